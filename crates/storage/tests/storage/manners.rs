//! HTTP/1.1 manners: an answer sent before the request body was read leaves the connection
//! usable for the client's next request (the body is discarded), or says `Connection: close`
//! when the body is too large to wait for.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{self, Options, PUSHER};

/// One answer read off a raw connection: status, headers (lower-case names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one answer (with a `Content-Length` body) from `stream`, `buf` holding what was read
/// beyond the previous one. `None` when the server closed the connection first.
async fn read_answer(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Answer> {
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 8192];
        let n = tokio::time::timeout(std::time::Duration::from_secs(20), stream.read(&mut chunk))
            .await
            .expect("the server answers in time")
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap_or(0));
    while buf.len() < head_end + len {
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[head_end..head_end + len].to_vec();
    buf.drain(..head_end + len);
    Some(Answer {
        status,
        headers,
        body,
    })
}

fn monolithic_upload(blob: &[u8], authorization: Option<&str>) -> Vec<u8> {
    let digest = common::sha256(blob);
    let mut request = format!(
        "POST /v2/test/app/blobs/uploads/?digest={digest} HTTP/1.1\r\nHost: registry\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\n",
        blob.len()
    )
    .into_bytes();
    if let Some(a) = authorization {
        request.extend_from_slice(format!("Authorization: {a}\r\n").as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(blob);
    request
}

#[tokio::test]
async fn a_401_before_the_body_keeps_the_connection_for_the_retry_with_credentials() {
    let replica = common::start(Options::default()).await;
    let blob: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut stream = TcpStream::connect(replica.write).await.unwrap();
    let mut buf = Vec::new();

    // The client sends the whole upload without credentials, as one write.
    stream
        .write_all(&monolithic_upload(&blob, None))
        .await
        .unwrap();
    let refused = read_answer(&mut stream, &mut buf).await.expect("an answer");
    assert_eq!(refused.status, 401);
    assert!(refused.header("www-authenticate").is_some());
    assert!(
        String::from_utf8_lossy(&refused.body).contains("UNAUTHORIZED"),
        "an OCI error body"
    );
    assert_ne!(refused.header("connection"), Some("close"));

    // It retries with credentials on the same connection: the refused body was not taken for
    // the next request.
    stream
        .write_all(&monolithic_upload(&blob, Some(&common::basic(PUSHER))))
        .await
        .unwrap();
    let created = read_answer(&mut stream, &mut buf)
        .await
        .expect("the connection is still usable");
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let digest = oci::Digest::parse(&common::sha256(&blob)).unwrap();
    assert_eq!(replica.store().blob_size(&digest), Some(blob.len() as u64));
}

#[tokio::test]
async fn a_401_before_a_large_body_says_connection_close() {
    let replica = common::start(Options::default()).await;
    let blob = vec![7u8; 4 << 20];
    let mut stream = TcpStream::connect(replica.write).await.unwrap();
    let request = monolithic_upload(&blob, None);
    // Send the head only: the server answers without waiting for four MiB.
    let head_len = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    stream.write_all(&request[..head_len]).await.unwrap();
    let mut buf = Vec::new();
    let refused = read_answer(&mut stream, &mut buf).await.expect("an answer");
    assert_eq!(refused.status, 401);
    assert_eq!(
        refused.header("connection"),
        Some("close"),
        "the client must not send its next request on this connection"
    );
}

#[tokio::test]
async fn an_unknown_upload_session_answered_before_its_chunk_keeps_the_connection() {
    let replica = common::start(Options::default()).await;
    let mut stream = TcpStream::connect(replica.write).await.unwrap();
    let mut buf = Vec::new();
    let chunk = vec![1u8; 10_000];
    let mut request = format!(
        "PATCH /v2/test/app/blobs/uploads/no-such-session HTTP/1.1\r\nHost: registry\r\n\
         Authorization: {}\r\nContent-Length: {}\r\n\r\n",
        common::basic(PUSHER),
        chunk.len()
    )
    .into_bytes();
    request.extend_from_slice(&chunk);
    stream.write_all(&request).await.unwrap();
    let unknown = read_answer(&mut stream, &mut buf).await.expect("an answer");
    assert_eq!(unknown.status, 404);
    stream
        .write_all(b"GET /v2/ HTTP/1.1\r\nHost: registry\r\nAuthorization: ")
        .await
        .unwrap();
    stream
        .write_all(format!("{}\r\n\r\n", common::basic(PUSHER)).as_bytes())
        .await
        .unwrap();
    let ping = read_answer(&mut stream, &mut buf)
        .await
        .expect("the connection is still usable");
    assert_eq!(ping.status, 200);
}
