use super::*;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth::Accounts;
use crate::service::{Registry, Settings};
use crate::store::{Limits, Store};

#[test]
fn which_requests_are_ours() {
    let ours = |raw: &str| matches!(parse(raw.as_bytes()), Ok(Some(_)));
    let hyper = |raw: &str| parse(raw.as_bytes()).is_err();
    assert!(ours("GET /v2/a/blobs/x HTTP/1.1\r\nhost: h\r\n\r\n"));
    assert!(ours("HEAD /v2/ HTTP/1.1\r\ncontent-length: 0\r\n\r\n"));
    assert!(matches!(parse(b"GET /v2/ HTTP/1.1\r\nhost"), Ok(None)));
    assert!(matches!(parse(b""), Ok(None)));
    assert!(hyper("POST /v2/a/blobs/uploads/ HTTP/1.1\r\n\r\n"));
    assert!(hyper("GET / HTTP/1.0\r\n\r\n"));
    assert!(hyper("GET / HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello"));
    assert!(hyper(
        "GET / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"
    ));
    assert!(hyper("GET / HTTP/1.1\r\nupgrade: websocket\r\n\r\n"));
    assert!(hyper("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    assert!(hyper("garbage\r\n\r\n"));
    let (head, len) = parse(b"GET /v2/ HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\nNEXT")
        .unwrap()
        .unwrap();
    assert!(head.close);
    assert_eq!(
        len,
        "GET /v2/ HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n".len()
    );
}

async fn server(content: &[u8]) -> (std::net::SocketAddr, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        &dir.path().join("data"),
        Limits {
            budget: None,
            reserve: Some(0),
        },
    )
    .unwrap();
    let digest = oci::Digest::sha256(content);
    let mut w = store
        .writer(oci::Algorithm::Sha256, Some(content.len() as u64))
        .unwrap();
    w.write(content).unwrap();
    w.commit(Some(digest)).unwrap();
    let socket = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    let handler = Listener::read(
        Registry::new(store, None, Settings::default()),
        Accounts::open(),
    );
    tokio::spawn(serve(socket, handler, std::future::pending()));
    (addr, digest.to_string(), dir)
}

/// Reads one response with a content-length body from `stream`.
async fn response(stream: &mut TcpStream, pending: &mut Vec<u8>) -> (String, Vec<u8>) {
    loop {
        if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(pending[..end].to_vec()).unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .map_or(0, |v| v.trim().parse().unwrap());
            let start = end + 4;
            while pending.len() < start + len {
                let mut buf = vec![0u8; 1 << 16];
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "connection closed early");
                pending.extend_from_slice(&buf[..n]);
            }
            let body = pending[start..start + len].to_vec();
            pending.drain(..start + len);
            return (head, body);
        }
        let mut buf = vec![0u8; 1 << 16];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "connection closed early");
        pending.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test]
async fn full_range_and_head_answers_are_exact_and_pipelined_requests_keep_their_order() {
    let content: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let (addr, digest, _dir) = server(&content).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let path = format!("/v2/a/blobs/{digest}");
    // Three requests in one write: full, range, head.
    let requests = format!(
        "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n\
         GET {path} HTTP/1.1\r\nhost: x\r\nrange: bytes=1000-1999\r\n\r\n\
         HEAD {path} HTTP/1.1\r\nhost: x\r\n\r\n"
    );
    stream.write_all(requests.as_bytes()).await.unwrap();
    let mut pending = Vec::new();
    let (head, body) = response(&mut stream, &mut pending).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("docker-content-digest: {digest}")),
        "{head}"
    );
    assert_eq!(body, content);
    let (head, body) = response(&mut stream, &mut pending).await;
    assert!(head.starts_with("HTTP/1.1 206"), "{head}");
    assert!(
        head.contains("content-range: bytes 1000-1999/3000000"),
        "{head}"
    );
    assert_eq!(body, &content[1000..2000]);
    // HEAD announces the length and sends nothing: the next read sees the connection idle.
    let end = loop {
        if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let mut buf = vec![0u8; 4096];
        let n = stream.read(&mut buf).await.unwrap();
        pending.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8(pending[..end].to_vec()).unwrap();
    assert!(head.contains("content-length: 3000000"), "{head}");
    assert_eq!(pending.len(), end + 4, "a HEAD answer has no body");
}

#[tokio::test]
async fn a_request_with_a_body_hands_the_connection_to_hyper() {
    let content = b"small blob".to_vec();
    let (addr, digest, _dir) = server(&content).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // First a request we answer ourselves, then one with a body (hyper's), then a GET that
    // hyper must answer on the same connection.
    let requests = format!(
        "GET /v2/a/blobs/{digest} HTTP/1.1\r\nhost: x\r\n\r\n\
         POST /v2/a/blobs/uploads/ HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\nabc\
         GET /v2/a/blobs/{digest} HTTP/1.1\r\nhost: x\r\n\r\n"
    );
    stream.write_all(requests.as_bytes()).await.unwrap();
    let mut pending = Vec::new();
    let (head, body) = response(&mut stream, &mut pending).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, content);
    let (head, _) = response(&mut stream, &mut pending).await;
    assert!(
        head.starts_with("HTTP/1.1 405"),
        "the read listener refuses writes: {head}"
    );
    let (head, body) = response(&mut stream, &mut pending).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, content);
}
