//! Serving and pull-through against Debian's `docker-registry` (CNCF distribution 2.8), in one
//! run, printing ratios:
//!
//! (a) warm serving of 1 GiB of blobs to 16 concurrent curl clients: ours vs distribution vs a
//!     bare `sendfile` server (the machine's ceiling);
//! (b) 50 concurrent cold pulls of one 256 MiB blob: our pull-through vs distribution's `proxy`
//!     mode — upstream bytes and time;
//! (c) fill rate: one cold pull through us vs the same blob straight from the upstream.
//!
//! `cargo bench -p storage --bench serve` (needs `docker-registry` and `curl`).
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use storage::{Accounts, Limits, Listener, Registry, Settings, Store, Upstream};

const MIB: usize = 1 << 20;

/// No filesystem reserve: the default (up to 60 GiB free) refuses every write on a build
/// machine's half-full disk, and this bench measures serving, not the limits.
const NO_RESERVE: Limits = Limits {
    budget: None,
    reserve: Some(0),
};

fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

async fn push_blob(http: &reqwest::Client, base: &str, repo: &str, data: Vec<u8>) -> String {
    let digest = oci::Digest::sha256(&data).to_string();
    let r = http
        .post(format!("{base}/v2/{repo}/blobs/uploads/"))
        .send()
        .await
        .expect("post");
    let location = r.headers()["location"]
        .to_str()
        .expect("location")
        .to_owned();
    let url = if location.starts_with("http") {
        location
    } else {
        format!("{base}{location}")
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let put = http
        .put(format!("{url}{sep}digest={digest}"))
        .header("content-type", "application/octet-stream")
        .body(data)
        .send()
        .await
        .expect("put");
    assert_eq!(put.status(), 201, "push to {base}");
    digest
}

/// A bare HTTP/1.1 server answering every GET with a file by `sendfile`, one thread per
/// connection: the machine's ceiling for serving files over loopback.
fn sendfile_server(root: PathBuf) -> u16 {
    let listener = StdListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let root = root.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut stream = stream;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    let name = path.rsplit('/').next().unwrap_or("").replace("sha256:", "");
                    let Ok(file) = std::fs::File::open(root.join(&name)) else {
                        let _ = stream
                            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
                        continue;
                    };
                    let len = file.metadata().expect("stat").len();
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-length: {len}\r\ncontent-type: application/octet-stream\r\n\r\n"
                    );
                    let mut offset = 0u64;
                    while offset < len {
                        let count = (len - offset) as usize;
                        match rustix::fs::sendfile(&stream, &file, Some(&mut offset), count) {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                    }
                }
            });
        }
    });
    port
}

/// `clients` concurrent curl processes, each fetching every URL in turn; returns seconds.
async fn curl_all(clients: usize, urls: &[String], auth: Option<&str>) -> f64 {
    let start = Instant::now();
    let mut children = Vec::new();
    for _ in 0..clients {
        let mut command = tokio::process::Command::new("curl");
        command.args(["-s", "--fail", "--http1.1"]);
        if let Some(a) = auth {
            command.args(["-u", a]);
        }
        for url in urls {
            command.args(["-o", "/dev/null", url]);
        }
        children.push(command.status());
    }
    for status in futures_util::future::join_all(children).await {
        assert!(status.expect("curl").success(), "a curl client failed");
    }
    start.elapsed().as_secs_f64()
}

async fn serve(listener: Listener) -> String {
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = socket.local_addr().expect("addr");
    tokio::spawn(storage::server::serve(
        socket,
        None,
        listener,
        std::future::pending(),
    ));
    format!("http://{addr}")
}

fn upstream_bytes(log: &str, path: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains(&format!("\"GET {path} ")))
        .filter_map(|l| {
            let after = l.split("\" ").nth(1)?;
            let mut parts = after.split_whitespace();
            let status = parts.next()?;
            (status == "200").then(|| parts.next()?.parse::<u64>().ok())?
        })
        .sum()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    testkit::install_crypto();
    let http = testkit::http_client(None);
    let scratch = tempfile::tempdir().expect("tempdir");

    // (a) warm serving
    let blobs = 8;
    let blob_len = 128 * MIB;
    let store = Store::open(&scratch.path().join("ours"), NO_RESERVE).expect("store");
    let distribution = testkit::Upstream::start_plain().await;
    let sendfile_root = scratch.path().join("sendfile");
    std::fs::create_dir_all(&sendfile_root).expect("dir");
    let mut digests = Vec::new();
    for i in 0..blobs {
        let data = content(blob_len, i as u64 + 1);
        let digest = oci::Digest::sha256(&data);
        let mut w = store
            .writer(oci::Algorithm::Sha256, Some(data.len() as u64))
            .expect("writer");
        w.write(&data).expect("write");
        w.commit(Some(digest)).expect("commit");
        std::fs::hard_link(
            store.blob_path(&digest),
            sendfile_root.join(digest.encoded()),
        )
        .expect("link");
        let pushed = push_blob(&http, &distribution.url(), "bench/warm", data).await;
        assert_eq!(pushed, digest.to_string());
        digests.push(digest.to_string());
    }
    let ours = serve(Listener::read(
        Registry::new(store.clone(), None, Settings::default()),
        Accounts::open(),
    ))
    .await;
    let sendfile = format!(
        "http://127.0.0.1:{}",
        sendfile_server(sendfile_root.clone())
    );
    let urls = |base: &str| -> Vec<String> {
        digests
            .iter()
            .map(|d| format!("{base}/v2/bench/warm/blobs/{d}"))
            .collect()
    };
    let clients = 16;
    let total = (clients * blobs * blob_len) as f64;
    // warm the page cache and every server once
    curl_all(1, &urls(&ours), None).await;
    curl_all(1, &urls(&distribution.url()), None).await;
    let mut best = [f64::MAX; 3];
    for _ in 0..2 {
        best[0] = best[0].min(curl_all(clients, &urls(&sendfile), None).await);
        best[1] = best[1].min(curl_all(clients, &urls(&distribution.url()), None).await);
        best[2] = best[2].min(curl_all(clients, &urls(&ours), None).await);
    }
    let gbps = |secs: f64| total / secs / 1e9;
    println!(
        "(a) warm serving, {clients} clients x {} MiB: sendfile {:.2} GB/s, distribution {:.2} GB/s, ours {:.2} GB/s",
        blobs * blob_len / MIB,
        gbps(best[0]),
        gbps(best[1]),
        gbps(best[2])
    );
    println!(
        "    ours/distribution = {:.2} (target >= 1.1), ours/sendfile = {:.2} (target >= 0.9)",
        best[1] / best[2],
        best[0] / best[2]
    );
    drop(distribution);

    // (b) 50 concurrent cold pulls of one 256 MiB blob
    let big_len = 256 * MIB;
    let upstream = testkit::Upstream::start_plain().await;
    let d1 = push_blob(
        &http,
        &upstream.url(),
        "deckhouse/ee/big",
        content(big_len, 101),
    )
    .await;
    let d2 = push_blob(
        &http,
        &upstream.url(),
        "deckhouse/ee/big",
        content(big_len, 102),
    )
    .await;
    let d3 = push_blob(
        &http,
        &upstream.url(),
        "deckhouse/ee/big",
        content(big_len, 103),
    )
    .await;
    let proxy =
        testkit::Upstream::start(testkit::UpstreamOptions::default().proxy(&upstream.url(), None))
            .await;
    let endpoint = registry_client::Endpoint::from_url(&upstream.url()).expect("endpoint");
    let remote = registry_client::Client::new(registry_client::Config::default())
        .remote(endpoint)
        .expect("remote");
    let cache = Store::open(&scratch.path().join("cache"), NO_RESERVE).expect("store");
    let ours_cache = serve(Listener::read(
        Registry::new(
            cache,
            Some(Upstream {
                remote,
                prefix: String::new(),
            }),
            Settings::default(),
        ),
        Accounts::open(),
    ))
    .await;
    let one = |base: &str, d: &str| vec![format!("{base}/v2/deckhouse/ee/big/blobs/{d}")];
    let path = |d: &str| format!("/v2/deckhouse/ee/big/blobs/{d}");
    let t_dist = curl_all(50, &one(&proxy.url(), &d1), None).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let dist_bytes = upstream_bytes(&upstream.log(), &path(&d1));
    let t_ours = curl_all(50, &one(&ours_cache, &d2), None).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let our_bytes = upstream_bytes(&upstream.log(), &path(&d2));
    let ratio = |b: u64| b as f64 / big_len as f64;
    println!(
        "(b) 50 cold clients, 256 MiB blob: distribution proxy fetched {:.2}x the blob upstream in {t_dist:.2} s; ours {:.2}x (target <= 1.05) in {t_ours:.2} s",
        ratio(dist_bytes),
        ratio(our_bytes)
    );

    // (c) fill rate vs upstream bandwidth
    let t_direct = curl_all(1, &one(&upstream.url(), &d3), None).await;
    let t_fill = curl_all(1, &one(&ours_cache, &d3), None).await;
    println!(
        "(c) one cold 256 MiB pull: direct from upstream {:.2} GB/s, through our fill {:.2} GB/s, ratio {:.2}",
        big_len as f64 / t_direct / 1e9,
        big_len as f64 / t_fill / 1e9,
        t_direct / t_fill
    );
}
