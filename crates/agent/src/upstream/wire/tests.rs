use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use http::HeaderValue;

use super::*;

fn connector() -> Arc<Connector> {
    let tls =
        rustls::ClientConfig::builder_with_provider(Arc::new(crate::server::crypto_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
    Connector::new(tls, Duration::from_secs(5), Duration::from_secs(90), 4)
}

/// What the test server does with the next request.
#[derive(Clone, Copy)]
enum Answer {
    /// Writes these bytes and waits for the next request.
    Keep(&'static [u8]),
    /// Writes these bytes and closes the connection.
    Close(&'static [u8]),
    /// Closes the connection without answering.
    Hangup,
}

/// A plain-HTTP server that answers requests with `answers` in turn, whichever connection
/// they come on, and counts its connections.
async fn server(answers: Vec<Answer>) -> (Uri, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!(
        "http://{}/v2/x/blobs/sha256:0",
        listener.local_addr().unwrap()
    )
    .parse()
    .unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        let answers = Arc::new(Mutex::new(answers.into_iter()));
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, Ordering::SeqCst);
            let answers = answers.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                loop {
                    while let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                        request.drain(..end + 4);
                        let answer = answers.lock().unwrap().next();
                        match answer {
                            Some(Answer::Keep(bytes)) => socket.write_all(bytes).await.unwrap(),
                            Some(Answer::Close(bytes)) => {
                                socket.write_all(bytes).await.unwrap();
                                return;
                            }
                            Some(Answer::Hangup) | None => return,
                        }
                    }
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
            });
        }
    });
    (uri, connections)
}

async fn get(connector: &Arc<Connector>, uri: &Uri) -> io::Result<(StatusCode, Vec<u8>)> {
    let response = connector
        .request(&Method::GET, uri, &HeaderMap::new())
        .await?;
    let mut body = Vec::new();
    if let Some(mut stream) = response.body {
        while let Some(chunk) = stream.next().await {
            body.extend_from_slice(&chunk.map_err(io::Error::other)?);
        }
    }
    Ok((response.status, body))
}

#[tokio::test]
async fn content_length_bodies_reuse_one_connection() {
    let answer: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
    let (uri, connections) = server(vec![Answer::Keep(answer), Answer::Keep(answer)]).await;
    let connector = connector();
    assert_eq!(
        get(&connector, &uri).await.unwrap(),
        (StatusCode::OK, b"hello".to_vec())
    );
    assert_eq!(
        get(&connector, &uri).await.unwrap(),
        (StatusCode::OK, b"hello".to_vec())
    );
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn chunked_bodies_are_decoded_with_extensions_and_trailers() {
    let answer: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
        5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-trailer: t\r\n\r\n";
    let again: &[u8] = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
    let (uri, connections) = server(vec![Answer::Keep(answer), Answer::Keep(again)]).await;
    let connector = connector();
    assert_eq!(
        get(&connector, &uri).await.unwrap(),
        (StatusCode::OK, b"hello world".to_vec())
    );
    assert_eq!(
        get(&connector, &uri).await.unwrap(),
        (StatusCode::NOT_FOUND, Vec::new())
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "the chunked body ended cleanly"
    );
}

#[tokio::test]
async fn a_kept_connection_the_server_closed_is_replaced_once() {
    let answer: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    // The first connection answers once, then closes on the second request; the request goes
    // again on a new connection.
    let (uri, connections) = server(vec![
        Answer::Keep(answer),
        Answer::Hangup,
        Answer::Keep(answer),
    ])
    .await;
    let connector = connector();
    assert_eq!(get(&connector, &uri).await.unwrap().1, b"ok");
    assert_eq!(get(&connector, &uri).await.unwrap().1, b"ok");
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn forgotten_origins_get_new_connections_and_others_keep_theirs() {
    let answer: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    let (uri, connections) = server(vec![Answer::Keep(answer); 3]).await;
    let (other, other_connections) = server(vec![Answer::Keep(answer); 2]).await;
    let connector = connector();
    get(&connector, &uri).await.unwrap();
    get(&connector, &other).await.unwrap();
    // The agent found the first server silent on another connection: its kept one goes too.
    let origin: Uri = format!("http://{}/", uri.authority().unwrap())
        .parse()
        .unwrap();
    connector.forget(&origin);
    get(&connector, &uri).await.unwrap();
    get(&connector, &other).await.unwrap();
    assert_eq!(connections.load(Ordering::SeqCst), 2);
    assert_eq!(other_connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_body_short_of_its_length_is_an_unexpected_eof() {
    let answer: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\nconnection: close\r\n\r\nhello";
    let (uri, _) = server(vec![Answer::Close(answer)]).await;
    let error = get(&connector(), &uri).await.unwrap_err();
    let eof = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<io::Error>())
        .map(io::Error::kind);
    assert_eq!(eof, Some(io::ErrorKind::UnexpectedEof), "{error}");
    assert!(error.to_string().contains("after 5 bytes"), "{error}");
}

#[tokio::test]
async fn informational_heads_are_skipped_and_close_delimited_bodies_end_at_close() {
    let answer: &[u8] =
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil close";
    let (uri, _) = server(vec![Answer::Close(answer)]).await;
    assert_eq!(
        get(&connector(), &uri).await.unwrap(),
        (StatusCode::OK, b"until close".to_vec())
    );
}

#[tokio::test]
async fn head_answers_have_no_body_whatever_their_length() {
    let answer: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n";
    let second: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    let (uri, connections) = server(vec![Answer::Keep(answer), Answer::Keep(second)]).await;
    let connector = connector();
    let response = connector
        .request(&Method::HEAD, &uri, &HeaderMap::new())
        .await
        .unwrap();
    assert!(response.body.is_none());
    assert_eq!(response.headers[header::CONTENT_LENGTH], "1234");
    assert_eq!(get(&connector, &uri).await.unwrap().1, b"ok");
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn malformed_answers_are_errors_not_panics() {
    for answer in [
        &b"garbage\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\ncontent-length: nope\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
    ] {
        let (uri, _) = server(vec![Answer::Close(answer)]).await;
        let error = get(&connector(), &uri).await.unwrap_err();
        let text = error.to_string();
        assert!(
            ["not an HTTP/1.1 response", "Content-Length", "chunk"]
                .iter()
                .any(|w| text.contains(w)),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_head_longer_than_the_limit_is_refused() {
    let long: &'static [u8] = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nx-long: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        )
        .into_bytes()
        .into_boxed_slice(),
    );
    let (uri, _) = server(vec![Answer::Close(long)]).await;
    let error = get(&connector(), &uri).await.unwrap_err();
    assert!(error.to_string().contains("longer than"), "{error}");
}

#[test]
fn request_heads_name_the_host_and_forward_the_headers() {
    let uri: Uri = "https://registry.example:5000/v2/x/manifests/v1?ns=a"
        .parse()
        .unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT, HeaderValue::from_static("a/b"));
    headers.insert(header::HOST, HeaderValue::from_static("ignored"));
    let head = String::from_utf8(request_head(&Method::GET, &uri, &headers)).unwrap();
    assert_eq!(
        head,
        "GET /v2/x/manifests/v1?ns=a HTTP/1.1\r\nhost: registry.example:5000\r\naccept: a/b\r\n\r\n"
    );
}

#[test]
fn origins_default_their_ports_and_unbracket_ipv6() {
    let origin = Origin::of(&"https://[::1]/v2/".parse().unwrap()).unwrap();
    assert_eq!(
        origin,
        Origin {
            tls: true,
            host: "::1".into(),
            port: 443
        }
    );
    let origin = Origin::of(&"http://Registry:5000/v2/".parse().unwrap()).unwrap();
    assert_eq!((origin.host.as_str(), origin.port), ("registry", 5000));
}
