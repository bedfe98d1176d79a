//! Readers of a blob being filled, against an upstream whose pace the test controls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::sync::mpsc;

use crate::common::{self, NODE, Options, basic, client};
use storage::Upstream;

/// An upstream serving one blob of `len` bytes whose body the test feeds chunk by chunk.
struct Paced {
    url: String,
    requests: Arc<AtomicUsize>,
    feed: Arc<Mutex<Vec<mpsc::Sender<Bytes>>>>,
}

impl Paced {
    async fn start(len: u64) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let requests = Arc::new(AtomicUsize::new(0));
        let feed: Arc<Mutex<Vec<mpsc::Sender<Bytes>>>> = Arc::default();
        let (r, f) = (requests.clone(), feed.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (r, f) = (r.clone(), f.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            let (r, f) = (r.clone(), f.clone());
                            async move {
                                let mut response = http::Response::new(BodyExt::boxed(
                                    http_body_util::Empty::<Bytes>::new()
                                        .map_err(|never| -> std::io::Error { match never {} }),
                                ));
                                if req.uri().path().contains("/blobs/") {
                                    r.fetch_add(1, Ordering::SeqCst);
                                    let (tx, rx) = mpsc::channel::<Bytes>(64);
                                    f.lock().expect("feed").push(tx);
                                    let stream = tokio_stream(rx)
                                        .map(|b| Ok::<_, std::io::Error>(Frame::data(b)));
                                    *response.body_mut() = BodyExt::boxed(StreamBody::new(stream));
                                    response.headers_mut().insert(
                                        "content-length",
                                        len.to_string().parse().expect("len"),
                                    );
                                }
                                Ok::<_, std::convert::Infallible>(response)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            url,
            requests,
            feed,
        }
    }

    async fn send(&self, bytes: &[u8]) {
        let tx = loop {
            if let Some(tx) = self.feed.lock().expect("feed").last().cloned() {
                break tx;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        for chunk in bytes.chunks(64 << 10) {
            tx.send(Bytes::copy_from_slice(chunk)).await.expect("feed");
        }
    }

    fn close(&self) {
        self.feed.lock().expect("feed").clear();
    }

    fn upstream(&self) -> Upstream {
        let endpoint = registry_client::Endpoint::from_url(&self.url).expect("endpoint");
        Upstream {
            remote: registry_client::Client::new(registry_client::Config::default())
                .remote(endpoint)
                .expect("remote"),
            prefix: "system/deckhouse".into(),
        }
    }
}

fn tokio_stream(mut rx: mpsc::Receiver<Bytes>) -> impl futures_util::Stream<Item = Bytes> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_follow_the_growing_file_and_the_fill_outlives_its_first_client() {
    const LEN: usize = 4 << 20;
    let data = content(LEN, 7);
    let digest = common::sha256(&data);
    let paced = Paced::start(LEN as u64).await;
    let replica = common::start(Options {
        upstream: Some(paced.upstream()),
        ..Options::default()
    })
    .await;
    let http = client();
    let url = format!(
        "{}/v2/system/deckhouse/app/blobs/{digest}",
        replica.read_url()
    );

    // The first client starts the fill, and sees the exact length before any byte exists.
    let first = http.get(&url).header("authorization", basic(NODE)).send();
    let (first, ()) = tokio::join!(first, paced.send(&data[..LEN / 2]));
    let first = first.expect("first");
    assert_eq!(first.status(), 200);
    assert_eq!(first.content_length(), Some(LEN as u64));

    // A Range read of the part already written is answered while the upstream is paused.
    let early = tokio::time::timeout(
        Duration::from_secs(10),
        http.get(&url)
            .header("authorization", basic(NODE))
            .header("range", "bytes=0-1048575")
            .send(),
    )
    .await
    .expect("a written range is served at once")
    .expect("send");
    assert_eq!(early.status(), 206);
    let early = tokio::time::timeout(Duration::from_secs(10), early.bytes())
        .await
        .expect("a written range is served at once")
        .expect("bytes");
    assert_eq!(&early[..], &data[..1 << 20]);

    // A Range beyond what is written waits for it.
    let late = {
        let (http, url) = (http.clone(), url.clone());
        tokio::spawn(async move {
            http.get(&url)
                .header("authorization", basic(NODE))
                .header("range", "bytes=3145728-3145827")
                .send()
                .await
                .expect("send")
                .bytes()
                .await
                .expect("bytes")
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!late.is_finished(), "bytes not yet written are not served");

    // The first client goes away; the fill goes on.
    drop(first);
    paced.send(&data[LEN / 2..]).await;
    paced.close();
    let late = tokio::time::timeout(Duration::from_secs(10), late)
        .await
        .expect("late range")
        .expect("task");
    assert_eq!(&late[..], &data[3_145_728..3_145_828]);
    let d = oci::Digest::parse(&digest).expect("digest");
    for _ in 0..200 {
        if replica.store().blob_size(&d).is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(replica.store().blob_size(&d), Some(LEN as u64), "committed");
    assert_eq!(
        paced.requests.load(Ordering::SeqCst),
        1,
        "one upstream request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_mismatch_is_discarded_and_never_served_complete() {
    const LEN: usize = 1 << 20;
    let data = content(LEN, 1);
    let claimed = common::sha256(&content(LEN, 2));
    let paced = Paced::start(LEN as u64).await;
    let replica = common::start(Options {
        upstream: Some(paced.upstream()),
        ..Options::default()
    })
    .await;
    let http = client();
    let url = format!(
        "{}/v2/system/deckhouse/app/blobs/{claimed}",
        replica.read_url()
    );
    let request = http.get(&url).header("authorization", basic(NODE)).send();
    let feed = async {
        paced.send(&data).await;
        paced.close();
    };
    let (response, ()) = tokio::join!(request, feed);
    let received = match response {
        Ok(r) => r.bytes().await.map(|b| b.len()),
        Err(e) => Err(e),
    };
    assert!(
        !matches!(received, Ok(n) if n == LEN),
        "a wrong blob is never delivered whole: {received:?}"
    );
    let d = oci::Digest::parse(&claimed).expect("digest");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(replica.store().blob_size(&d), None, "nothing stored");
    let tmp = std::fs::read_dir(replica.store().root().join("tmp"))
        .expect("tmp")
        .count();
    assert_eq!(tmp, 0, "the temporary file is gone");
    // The failure is not cached: the next request asks the upstream again.
    let retry = http.get(&url).header("authorization", basic(NODE)).send();
    let feed = async {
        paced.send(&data).await;
        paced.close();
    };
    let _ = tokio::join!(retry, feed);
    assert_eq!(paced.requests.load(Ordering::SeqCst), 2);
}
