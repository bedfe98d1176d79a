use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use http_body_util::StreamBody;
use hyper::body::Frame;
use tokio::net::TcpSocket;

use super::*;

/// An answer with `body` and, when `length` is set, that `Content-Length`.
fn answer_with(body: &'static [u8], length: Option<usize>) -> Response<ProxyBody> {
    let mut response = Response::new(crate::proxy::full(Bytes::from_static(body)));
    if let Some(length) = length {
        response
            .headers_mut()
            .insert(http::header::CONTENT_LENGTH, length.into());
    }
    response
}

/// A body of `chunks`, then `end` (an error breaks it), with no length known.
fn streamed(chunks: Vec<&'static [u8]>, broken: bool) -> ProxyBody {
    let mut items: Vec<io::Result<Frame<Bytes>>> = chunks
        .into_iter()
        .map(|c| Ok(Frame::data(Bytes::from_static(c))))
        .collect();
    if broken {
        items.push(Err(io::Error::other("the registry reset the connection")));
    }
    BodyExt::boxed_unsync(StreamBody::new(futures_util::stream::iter(items)))
}

/// Serves `handler` on a loopback port (plain HTTP) until the returned sender says stop.
async fn start<H, F>(handler: H) -> (SocketAddr, watch::Sender<bool>, tokio::task::JoinHandle<()>)
where
    H: Fn(Request<()>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, mut stopped) = watch::channel(false);
    let server = tokio::spawn(serve(listener, None, handler, async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    (address, stop, server)
}

/// Echoes the request's method and path as the body, with its length.
async fn echo(request: Request<()>) -> Response<ProxyBody> {
    let body = format!("{} {}", request.method(), request.uri());
    let length = body.len();
    let mut response = Response::new(crate::proxy::full(Bytes::from(body)));
    response
        .headers_mut()
        .insert(http::header::CONTENT_LENGTH, length.into());
    response
}

/// Sends `request` and reads until the connection closes or `until` appears `count` times.
async fn exchange(tcp: &mut TcpStream, request: &[u8], until: &str, count: usize) -> String {
    tcp.write_all(request).await.unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&received).into_owned();
        if !until.is_empty() && text.matches(until).count() >= count {
            return text;
        }
        match tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return text,
            Ok(Ok(n)) => received.extend_from_slice(&buffer[..n]),
            Err(_) => panic!("no answer in 5 s; so far: {text:?}"),
        }
    }
}

#[tokio::test]
async fn requests_one_after_another_and_pipelined_share_a_connection() {
    let (address, _stop, _server) = start(echo).await;
    let mut tcp = TcpStream::connect(address).await.unwrap();
    let first = exchange(
        &mut tcp,
        b"GET /v2/a HTTP/1.1\r\nhost: x\r\n\r\n",
        "GET /v2/a",
        1,
    )
    .await;
    assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
    assert!(first.contains("content-length: 9\r\n"), "{first}");
    assert!(first.contains("\r\ndate: "), "{first}");
    assert!(!first.contains("connection: close"), "{first}");
    // Two requests in one write: both answered, in order, on the same connection.
    let both = exchange(
        &mut tcp,
        b"GET /v2/b HTTP/1.1\r\nhost: x\r\n\r\nHEAD /v2/cc HTTP/1.1\r\nhost: x\r\n\r\n",
        "HTTP/1.1 200 OK",
        2,
    )
    .await;
    let b = both.find("GET /v2/b").expect("the first answer");
    let c = both.rfind("HTTP/1.1 200 OK").unwrap();
    assert!(b < c, "{both}");
    // The answer to HEAD announces the length and has no body.
    assert!(both[c..].contains("content-length: 11\r\n"), "{both}");
    assert!(both[c..].ends_with("\r\n\r\n"), "{both}");
    let last = exchange(
        &mut tcp,
        b"GET /v2/d HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        "",
        0,
    )
    .await;
    assert!(
        last.contains("connection: close\r\n") && last.ends_with("GET /v2/d"),
        "{last}"
    );
}

#[tokio::test]
async fn bodies_of_unknown_length_are_chunked_for_http_1_1_and_closed_for_http_1_0() {
    let (address, _stop, _server) =
        start(|_| async { Response::new(streamed(vec![b"hello, ", b"world"], false)) }).await;
    let mut tcp = TcpStream::connect(address).await.unwrap();
    let chunked = exchange(&mut tcp, b"GET / HTTP/1.1\r\n\r\n", "0\r\n\r\n", 1).await;
    assert!(
        chunked.contains("transfer-encoding: chunked\r\n"),
        "{chunked}"
    );
    assert!(
        chunked.ends_with("\r\n\r\n7\r\nhello, \r\n5\r\nworld\r\n0\r\n\r\n"),
        "{chunked}"
    );
    let mut tcp = TcpStream::connect(address).await.unwrap();
    let closed = exchange(&mut tcp, b"GET / HTTP/1.0\r\n\r\n", "", 0).await;
    assert!(closed.contains("connection: close\r\n"), "{closed}");
    assert!(!closed.contains("chunked"), "{closed}");
    assert!(closed.ends_with("\r\n\r\nhello, world"), "{closed}");
}

#[tokio::test]
async fn a_broken_body_is_cut_off_never_ended_cleanly() {
    let (address, _stop, _server) = start(|request: Request<()>| async move {
        let mut response = Response::new(streamed(vec![b"part"], true));
        if request.uri().path() == "/length" {
            response
                .headers_mut()
                .insert(http::header::CONTENT_LENGTH, 100.into());
        }
        response
    })
    .await;
    let mut tcp = TcpStream::connect(address).await.unwrap();
    let short = exchange(&mut tcp, b"GET /length HTTP/1.1\r\n\r\n", "", 0).await;
    assert!(
        short.contains("content-length: 100\r\n") && short.ends_with("\r\n\r\npart"),
        "{short}"
    );
    let mut tcp = TcpStream::connect(address).await.unwrap();
    let chunked = exchange(&mut tcp, b"GET /chunked HTTP/1.1\r\n\r\n", "", 0).await;
    assert!(
        chunked.ends_with("4\r\npart\r\n"),
        "no last chunk: {chunked}"
    );
}

#[tokio::test]
async fn bad_and_oversized_heads_are_refused_and_the_connection_closed() {
    let (address, _stop, _server) = start(echo).await;
    let mut tcp = TcpStream::connect(address).await.unwrap();
    let bad = exchange(&mut tcp, b"GET /\x01 HTTP/1.1\r\n\r\n", "", 0).await;
    assert!(
        bad.starts_with("HTTP/1.1 400 Bad Request\r\n") && bad.contains("connection: close"),
        "{bad}"
    );
    let mut tcp = TcpStream::connect(address).await.unwrap();
    let huge = format!("GET / HTTP/1.1\r\nx-big: {}\r\n\r\n", "a".repeat(20_000));
    let refused = exchange(&mut tcp, huge.as_bytes(), "", 0).await;
    assert!(
        refused.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{refused}"
    );
    let mut tcp = TcpStream::connect(address).await.unwrap();
    let many: String = (0..150).map(|i| format!("x-{i}: 1\r\n")).collect();
    let refused = exchange(
        &mut tcp,
        format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes(),
        "",
        0,
    )
    .await;
    assert!(refused.starts_with("HTTP/1.1 431 "), "{refused}");
}

#[tokio::test]
async fn a_request_with_a_body_is_answered_whole_then_its_connection_closed() {
    let (address, _stop, _server) = start(echo).await;
    let mut tcp = TcpStream::connect(address).await.unwrap();
    // The body is never read; the answer still arrives whole, and the connection ends.
    let body = "b".repeat(200_000);
    let request = format!(
        "PUT /v2/x HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = exchange(&mut tcp, request.as_bytes(), "", 0).await;
    assert!(
        answer.contains("connection: close\r\n") && answer.ends_with("PUT /v2/x"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_client_that_stops_reading_is_given_no_more_than_its_sockets_hold() {
    const CHUNK: usize = 16 * 1024;
    static TAKEN: AtomicUsize = AtomicUsize::new(0);
    // Small socket buffers on both ends (accepted sockets inherit the listener's).
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(16 * 1024).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(16).unwrap();
    let address = listener.local_addr().unwrap();
    let handler = |_: Request<()>| async {
        let chunks = futures_util::stream::iter(0..1000).map(|_| {
            TAKEN.fetch_add(1, Ordering::SeqCst);
            Ok::<_, io::Error>(Frame::data(Bytes::from(vec![7u8; CHUNK])))
        });
        let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(chunks)));
        response
            .headers_mut()
            .insert(http::header::CONTENT_LENGTH, (1000 * CHUNK).into());
        response
    };
    let _server = tokio::spawn(serve(listener, None, handler, std::future::pending()));
    let client = TcpSocket::new_v4().unwrap();
    client.set_recv_buffer_size(16 * 1024).unwrap();
    let mut tcp = client.connect(address).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut first = [0u8; 1024];
    let _ = tcp.read(&mut first).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let taken = TAKEN.load(Ordering::SeqCst);
    // The kernel takes what its buffers hold (a few chunks, as it sizes them); the server
    // holds one more at most.
    assert!(
        taken <= 12,
        "{taken} chunks of 16 KiB taken for a client that read 1 KiB"
    );
    // Reading on gets every byte.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), tcp.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(TAKEN.load(Ordering::SeqCst), 1000);
    assert!(rest.ends_with(&[7u8; CHUNK]));
}

#[tokio::test]
async fn stopping_closes_idle_connections_and_lets_answers_in_flight_finish() {
    let (release, released) = watch::channel(false);
    let (address, stop, server) = start(move |_| {
        let mut released = released.clone();
        async move {
            let _ = released.wait_for(|r| *r).await;
            answer_with(b"late", Some(4))
        }
    })
    .await;
    let mut idle = TcpStream::connect(address).await.unwrap();
    let mut busy = TcpStream::connect(address).await.unwrap();
    busy.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.send(true).unwrap();
    let mut nothing = [0u8; 16];
    let closed = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut nothing)).await;
    assert!(
        matches!(closed, Ok(Ok(0))),
        "the idle connection is closed: {closed:?}"
    );
    release.send(true).unwrap();
    let late = exchange(&mut busy, b"", "", 0).await;
    assert!(late.ends_with("\r\n\r\nlate"), "{late}");
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
}

/// Serves `handler` over TLS on a loopback port, and a client's TLS connection to it.
async fn tls_client<H, F>(handler: H) -> tokio_rustls::client::TlsStream<TcpStream>
where
    H: Fn(Request<()>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    let (config, client) = crate::tls::tests::configs(rustls::DEFAULT_VERSIONS, true);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(serve(
        listener,
        Some(config),
        handler,
        std::future::pending(),
    ));
    let tcp = TcpStream::connect(address).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(client)
        .connect(name, tcp)
        .await
        .unwrap()
}

/// A handler's answer, boxed.
type Answering = std::pin::Pin<Box<dyn Future<Output = Response<ProxyBody>> + Send>>;

/// A handler that never answers, and a count of the requests it was given and then dropped.
fn never_answering() -> (
    impl Fn(Request<()>) -> Answering + Clone + Send + Sync + 'static,
    Arc<AtomicUsize>,
) {
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let counter = dropped.clone();
    let handler = move |_| {
        let guard = Dropped(counter.clone());
        Box::pin(async move {
            let _guard = guard;
            std::future::pending().await
        }) as Answering
    };
    (handler, dropped)
}

async fn until_dropped(dropped: &AtomicUsize, count: usize) {
    tokio::time::timeout(Duration::from_secs(5), async {
        while dropped.load(Ordering::SeqCst) < count {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the request was given up");
}

#[tokio::test]
async fn a_client_that_goes_away_takes_its_request_with_it() {
    // Plain: the connection closed while the answer is awaited.
    let (handler, dropped) = never_answering();
    let (address, _stop, _server) = start(handler).await;
    let mut tcp = TcpStream::connect(address).await.unwrap();
    tcp.write_all(b"GET /v2/a HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "still awaited");
    drop(tcp);
    until_dropped(&dropped, 1).await;

    // TLS: the client ends the session (close_notify, then the end of the stream), as Go's
    // clients do.
    let (handler, dropped) = never_answering();
    let mut tls = tls_client(handler).await;
    tls.write_all(b"GET /v2/a HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    tls.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "still awaited");
    tls.shutdown().await.unwrap();
    until_dropped(&dropped, 1).await;
}

#[tokio::test]
async fn what_a_client_sends_while_its_answer_is_awaited_is_kept() {
    let slow_then_echo = |request: Request<()>| async move {
        if request.uri().path() == "/v2/slow" {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        echo(request).await
    };
    // Plain: the next request, sent while the first one's answer is awaited.
    let (address, _stop, _server) = start(slow_then_echo).await;
    let mut tcp = TcpStream::connect(address).await.unwrap();
    tcp.write_all(b"GET /v2/slow HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let both = exchange(
        &mut tcp,
        b"GET /v2/next HTTP/1.1\r\nhost: x\r\n\r\n",
        "HTTP/1.1 200 OK",
        2,
    )
    .await;
    let both = if both.ends_with("GET /v2/next") {
        both
    } else {
        exchange(&mut tcp, b"", "GET /v2/next", 1).await
    };
    let slow = both.find("GET /v2/slow").expect("the first answer");
    assert!(slow < both.find("GET /v2/next").unwrap(), "{both}");

    // TLS: a key update the client asks for while it waits is answered, and the answer comes
    // under the new keys; then the next request on the same connection.
    let mut tls = tls_client(slow_then_echo).await;
    for path in ["/v2/slow", "/v2/next"] {
        tls.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        tls.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        tls.get_mut().1.refresh_traffic_keys().unwrap();
        tls.flush().await.unwrap();
        let mut received = Vec::new();
        let mut buffer = [0u8; 1024];
        let expected = format!("GET {path}");
        while !String::from_utf8_lossy(&received).ends_with(&expected) {
            let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buffer))
                .await
                .expect("an answer")
                .unwrap();
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&received));
            received.extend_from_slice(&buffer[..n]);
        }
        assert!(received.starts_with(b"HTTP/1.1 200 OK\r\n"));
    }
}

#[test]
fn framing_follows_the_method_the_status_and_what_is_known_of_the_length() {
    let with_length = {
        let mut h = HeaderMap::new();
        h.insert(http::header::CONTENT_LENGTH, 5.into());
        h
    };
    let none = HeaderMap::new();
    let ok = StatusCode::OK;
    let table = [
        (
            Method::HEAD,
            Version::HTTP_11,
            ok,
            &with_length,
            None,
            (Framing::None, None),
        ),
        (
            Method::GET,
            Version::HTTP_11,
            StatusCode::NO_CONTENT,
            &none,
            Some(0),
            (Framing::None, None),
        ),
        (
            Method::GET,
            Version::HTTP_11,
            StatusCode::NOT_MODIFIED,
            &with_length,
            None,
            (Framing::None, None),
        ),
        (
            Method::GET,
            Version::HTTP_11,
            ok,
            &with_length,
            None,
            (Framing::Length(5), None),
        ),
        (
            Method::GET,
            Version::HTTP_11,
            ok,
            &none,
            Some(7),
            (Framing::Length(7), Some(7)),
        ),
        (
            Method::GET,
            Version::HTTP_11,
            ok,
            &none,
            None,
            (Framing::Chunked, None),
        ),
        (
            Method::GET,
            Version::HTTP_10,
            ok,
            &none,
            None,
            (Framing::Close, None),
        ),
    ];
    for (method, version, status, headers, exact, expected) in table {
        assert_eq!(
            framing(&method, version, status, headers, exact),
            expected,
            "{method} {version:?} {status}"
        );
    }
}

#[test]
fn heads_parse_as_hyper_read_them() {
    let (length, head) = parse_head(b"GET /v2/?ns=x HTTP/1.1\r\nHost: a\r\n\r\nnext")
        .unwrap()
        .unwrap();
    assert_eq!(length, 35);
    assert_eq!(head.request.uri(), "/v2/?ns=x");
    assert_eq!(head.request.headers()["host"], "a");
    assert!(head.keep_alive && !head.has_body);
    let (_, head) = parse_head(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
    assert!(!head.keep_alive);
    let (_, head) = parse_head(b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(head.has_body);
    assert!(
        parse_head(b"GET / HTTP/1.1\r\nhost: a\r\n")
            .unwrap()
            .is_none()
    );
    assert_eq!(
        parse_head(b"GET / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n")
            .unwrap_err(),
        Refusal::Answer(StatusCode::BAD_REQUEST)
    );
}

#[tokio::test]
async fn chunks_ready_at_once_are_written_together_up_to_a_bound() {
    const CHUNK: usize = 16 * 1024;
    // Six chunks ready, then a wait.
    let ready = futures_util::stream::iter(
        (0..6u8).map(|i| Ok::<_, io::Error>(Frame::data(Bytes::from(vec![i; CHUNK])))),
    );
    let mut body: ProxyBody = BodyExt::boxed_unsync(StreamBody::new(
        ready.chain(futures_util::stream::pending()),
    ));
    let first = body.frame().await;
    let (chunks, after) = gather(&mut body, first);
    assert_eq!(chunks.len(), WRITE_BATCH / CHUNK, "{after:?}");
    assert!(matches!(after, After::More));
    let first = body.frame().await;
    let (chunks, after) = gather(&mut body, first);
    let firsts: Vec<u8> = chunks.iter().map(|chunk| chunk[0]).collect();
    assert_eq!(firsts, [4, 5], "{after:?}");
    assert!(matches!(after, After::More));
    // The end, or a break, comes with the chunks before it.
    let (chunks, after) = gather(&mut streamed(vec![b"a", b"b"], false), None);
    assert!(chunks.is_empty() && matches!(after, After::Ended));
    let mut body = streamed(vec![b"a", b"", b"b"], true);
    let first = body.frame().await;
    let (chunks, after) = gather(&mut body, first);
    assert_eq!(chunks, [&b"a"[..], b"b"]);
    assert!(matches!(after, After::Broken(_)));
}
