//! The client against servers of the test's own that misbehave on purpose: redirects to another
//! origin (the second server must never see `Authorization`), resets, stalls, 500s, wrong
//! digests, short bodies, silent servers. Each failure must be the right error kind, within the
//! configured time, and no partial or wrong blob may ever look complete.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use registry_client::{Body, Client, Config, Credentials, Endpoint, Error, TimeoutPhase, Timeouts};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const STALL: Duration = Duration::from_millis(600);
const HEADERS: Duration = Duration::from_millis(500);

fn config() -> Config {
    Config {
        timeouts: Timeouts {
            connect: Duration::from_secs(2),
            response_headers: HEADERS,
            stall: STALL,
            total: None,
        },
        max_redirects: 3,
        ..Config::default()
    }
}

fn blob() -> (Bytes, oci::Digest) {
    let data: Vec<u8> = (0..256 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let digest = oci::Digest::sha256(&data);
    (Bytes::from(data), digest)
}

/// Reads a body to its end: the bytes handed on, and the error it ended with (if any).
async fn drain(mut body: Body) -> (Vec<u8>, Option<Error>) {
    let mut data = Vec::new();
    while let Some(item) = body.next().await {
        match item {
            Ok(chunk) => data.extend_from_slice(&chunk),
            Err(e) => {
                assert!(
                    body.next().await.is_none(),
                    "the stream ends after its error"
                );
                return (data, Some(e));
            }
        }
    }
    (data, None)
}

// ---------------------------------------------------------------------------------------------
// A raw HTTP/1.1 server whose answers are scripted per request path.

#[derive(Clone, Copy, Debug)]
enum Misbehave {
    /// Headers with the full Content-Length, half the body, then a TCP reset.
    ResetMidBody,
    /// Headers, half the body, then nothing (connection kept open).
    StallMidBody,
    /// 500 with an OCI error body.
    ServerError,
    /// The full length, but different bytes.
    WrongBytes,
    /// Half the announced Content-Length, then a clean close.
    ShortBody,
    /// Chunked encoding, properly terminated, but only half the blob.
    ShortChunked,
    /// Never answers.
    Silent,
}

async fn raw_server(data: Bytes) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let data = data.clone();
            tokio::spawn(async move {
                let _ = serve_connection(stream, data).await;
            });
        }
    });
    addr
}

async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 {
            return Ok(None);
        }
        head.push(byte[0]);
    }
    Ok(Some(String::from_utf8_lossy(&head).into_owned()))
}

async fn serve_connection(mut stream: TcpStream, data: Bytes) -> std::io::Result<()> {
    while let Some(head) = read_head(&mut stream).await? {
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let behaviour = if path == "/v2/" {
            None
        } else if path.contains("/reset/") {
            Some(Misbehave::ResetMidBody)
        } else if path.contains("/stall/") {
            Some(Misbehave::StallMidBody)
        } else if path.contains("/error/") {
            Some(Misbehave::ServerError)
        } else if path.contains("/wrong/") {
            Some(Misbehave::WrongBytes)
        } else if path.contains("/short/") {
            Some(Misbehave::ShortBody)
        } else if path.contains("/chunked/") {
            Some(Misbehave::ShortChunked)
        } else {
            Some(Misbehave::Silent)
        };
        let len = data.len();
        let half = &data[..len / 2];
        let ok_head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {len}\r\n\r\n"
        );
        match behaviour {
            None => {
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nDocker-Distribution-Api-Version: registry/2.0\r\n\r\n{}")
                    .await?;
            }
            Some(Misbehave::ResetMidBody) => {
                stream.write_all(ok_head.as_bytes()).await?;
                stream.write_all(half).await?;
                stream.flush().await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                stream.set_zero_linger()?;
                return Ok(()); // dropped with SO_LINGER 0: RST
            }
            Some(Misbehave::StallMidBody) => {
                stream.write_all(ok_head.as_bytes()).await?;
                stream.write_all(half).await?;
                stream.flush().await?;
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Some(Misbehave::ServerError) => {
                let body = br#"{"errors":[{"code":"UNKNOWN","message":"boom"}]}"#;
                let head = format!(
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                stream.write_all(head.as_bytes()).await?;
                stream.write_all(body).await?;
            }
            Some(Misbehave::WrongBytes) => {
                let mut wrong = data.to_vec();
                wrong[len - 1] ^= 0xff;
                stream.write_all(ok_head.as_bytes()).await?;
                stream.write_all(&wrong).await?;
            }
            Some(Misbehave::ShortBody) => {
                stream.write_all(ok_head.as_bytes()).await?;
                stream.write_all(half).await?;
                stream.shutdown().await?;
                return Ok(());
            }
            Some(Misbehave::ShortChunked) => {
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    .await?;
                stream
                    .write_all(format!("{:x}\r\n", half.len()).as_bytes())
                    .await?;
                stream.write_all(half).await?;
                stream.write_all(b"\r\n0\r\n\r\n").await?;
            }
            Some(Misbehave::Silent) => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
        }
    }
    Ok(())
}

async fn fault(
    path_kind: &str,
    expected_size: Option<u64>,
) -> (Result<registry_client::Response, Error>, Instant) {
    let (data, digest) = blob();
    let addr = raw_server(data).await;
    let remote = Client::new(config())
        .remote(Endpoint::http(&addr.to_string()))
        .unwrap();
    let started = Instant::now();
    let result = remote
        .get_blob(&format!("fault/{path_kind}"), &digest, None, expected_size)
        .await;
    (result, started)
}

#[tokio::test]
async fn reset_mid_blob_is_an_interrupted_body() {
    let (result, _) = fault("reset", None).await;
    let (data, err) = drain(result.unwrap().into_body()).await;
    let err = err.expect("a reset must end in an error");
    assert!(matches!(err, Error::BodyInterrupted { .. }), "{err:?}");
    assert!(err.retry_elsewhere());
    assert!(
        data.len() < blob().0.len(),
        "no complete blob was handed on"
    );
}

#[tokio::test]
async fn stall_mid_blob_fires_the_watchdog_in_time() {
    let (result, started) = fault("stall", None).await;
    let (data, err) = drain(result.unwrap().into_body()).await;
    let elapsed = started.elapsed();
    match err {
        Some(Error::Stalled { after, received }) => {
            assert_eq!(after, STALL);
            // The verified body holds back its latest chunk: fewer bytes handed on than read.
            assert!(received as usize >= data.len());
            assert!(received > 0);
        }
        other => panic!("expected Stalled, got {other:?}"),
    }
    assert!(elapsed >= STALL, "{elapsed:?}");
    assert!(
        elapsed < STALL + Duration::from_secs(2),
        "watchdog fired late: {elapsed:?}"
    );
    assert!(data.len() < blob().0.len());
}

#[tokio::test]
async fn server_error_is_retryable_elsewhere() {
    let (result, _) = fault("error", None).await;
    let err = result.unwrap_err();
    match &err {
        Error::Status { status, code, .. } => {
            assert_eq!(*status, http::StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(code.as_deref(), Some("UNKNOWN"));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.retry_elsewhere());
    assert_eq!(
        err.gateway_status(),
        http::StatusCode::INTERNAL_SERVER_ERROR
    );
}

#[tokio::test]
async fn wrong_digest_is_caught_and_its_last_chunk_withheld() {
    let (result, _) = fault("wrong", None).await;
    let (data, err) = drain(result.unwrap().into_body()).await;
    let (good, digest) = blob();
    match err {
        Some(Error::DigestMismatch(m)) => {
            assert_eq!(m.expected, digest);
            assert_ne!(m.actual, digest);
        }
        other => panic!("expected DigestMismatch, got {other:?}"),
    }
    assert!(
        data.len() < good.len(),
        "a relay with the upstream's Content-Length would see a short body, never a complete wrong one"
    );
    assert_eq!(
        &data[..],
        &good[..data.len()],
        "what was handed on is the (correct) prefix"
    );
}

#[tokio::test]
async fn short_body_against_content_length_is_truncated() {
    let (result, _) = fault("short", None).await;
    let (data, err) = drain(result.unwrap().into_body()).await;
    let full = blob().0.len() as u64;
    match err {
        Some(Error::Truncated { expected, received }) => {
            assert_eq!(expected, full);
            assert_eq!(received, full / 2);
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    assert!((data.len() as u64) < full);
}

#[tokio::test]
async fn short_chunked_body_against_the_descriptor_size_is_truncated() {
    let full = blob().0.len() as u64;
    let (result, _) = fault("chunked", Some(full)).await;
    let (data, err) = drain(result.unwrap().into_body()).await;
    assert!(
        matches!(err, Some(Error::Truncated { expected, received }) if expected == full && received == full / 2),
        "{err:?}"
    );
    assert!((data.len() as u64) < full);
}

#[tokio::test]
async fn silent_server_hits_the_header_timeout() {
    let (result, started) = fault("silent", None).await;
    let err = result.unwrap_err();
    assert!(
        matches!(err, Error::Timeout { phase: TimeoutPhase::ResponseHeaders, after, .. } if after == HEADERS),
        "{err:?}"
    );
    assert!(err.retry_elsewhere());
    assert_eq!(err.gateway_status(), http::StatusCode::GATEWAY_TIMEOUT);
    assert!(started.elapsed() < HEADERS + Duration::from_secs(1));
}

#[tokio::test]
async fn refused_connection_is_a_connect_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let remote = Client::new(config())
        .remote(Endpoint::http(&format!("127.0.0.1:{port}")))
        .unwrap();
    let err = remote
        .raw_request(http::Method::GET, "/v2/", None)
        .send()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(err.retry_elsewhere());
    // Through the token flow the same failure is an authentication failure of this target.
    let err = remote.check().await.unwrap_err();
    assert!(matches!(err, Error::Auth { .. }), "{err:?}");
    assert!(err.retry_elsewhere());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn total_deadline_bounds_a_slow_trickle() {
    // A server that trickles one byte every 100 ms never stalls, but the total deadline ends it.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = read_head(&mut stream).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
                    .await;
                for _ in 0..1000 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if stream.write_all(b"x").await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut cfg = config();
    cfg.timeouts.total = Some(Duration::from_millis(1500));
    let remote = Client::new(cfg)
        .remote(Endpoint::http(&addr.to_string()))
        .unwrap();
    let started = Instant::now();
    let response = remote
        .raw_request(http::Method::GET, "/v2/x/blobs/trickle", None)
        .send()
        .await
        .unwrap();
    let (data, err) = drain(response.into_body()).await;
    assert!(
        matches!(
            err,
            Some(Error::Timeout {
                phase: TimeoutPhase::Total,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(!data.is_empty() && data.len() < 1000);
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1400) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Redirects: server A wants Basic auth and redirects blob GETs; server B records what it sees.

#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, HeaderMap)>>>);

impl Seen {
    fn push(&self, uri: &Uri, headers: &HeaderMap) {
        self.0
            .lock()
            .unwrap()
            .push((uri.to_string(), headers.clone()));
    }
    fn all(&self) -> Vec<(String, HeaderMap)> {
        self.0.lock().unwrap().clone()
    }
}

#[derive(Clone)]
struct A {
    seen: Seen,
    b: SocketAddr,
    data: Bytes,
    auth: String,
}

async fn serve(router: axum::Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

async fn server_b(data: Bytes, seen: Seen) -> SocketAddr {
    let router = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let data = data.clone();
        let seen = seen.clone();
        async move {
            seen.push(&uri, &headers);
            data.into_response()
        }
    });
    serve(router).await
}

async fn server_a(state: A) -> SocketAddr {
    async fn handle(State(a): State<A>, uri: Uri, headers: HeaderMap) -> Response {
        a.seen.push(&uri, &headers);
        let authorized = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            == Some(a.auth.as_str());
        if !authorized {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Basic realm=\"a\"")],
            )
                .into_response();
        }
        let path = uri.path();
        if path == "/v2/" {
            return "{}".into_response();
        }
        if path.starts_with("/v2/cross/blobs/") {
            let location = format!(
                "http://{}/storage/blob?X-Amz-Signature=s3cr3t-signature",
                a.b
            );
            return (
                StatusCode::TEMPORARY_REDIRECT,
                [(header::LOCATION, location)],
            )
                .into_response();
        }
        if path.starts_with("/v2/same/blobs/") {
            return (
                StatusCode::FOUND,
                [(header::LOCATION, "../../internal/blob")],
            )
                .into_response();
        }
        if path == "/v2/internal/blob" {
            return a.data.clone().into_response();
        }
        if path.starts_with("/v2/loop/blobs/") {
            return (StatusCode::FOUND, [(header::LOCATION, path.to_owned())]).into_response();
        }
        StatusCode::NOT_FOUND.into_response()
    }
    serve(axum::Router::new().fallback(handle).with_state(state)).await
}

struct Redirecting {
    a_seen: Seen,
    b_seen: Seen,
    a: SocketAddr,
    data: Bytes,
    digest: oci::Digest,
}

async fn redirecting() -> Redirecting {
    let (data, digest) = blob();
    let b_seen = Seen::default();
    let b = server_b(data.clone(), b_seen.clone()).await;
    let a_seen = Seen::default();
    let a = server_a(A {
        seen: a_seen.clone(),
        b,
        data: data.clone(),
        auth: "Basic dXNlcjpwYXNzd29yZA==".into(), // user:password
    })
    .await;
    Redirecting {
        a_seen,
        b_seen,
        a,
        data,
        digest,
    }
}

fn has_authorization(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION)
}

#[tokio::test]
async fn cross_origin_redirect_never_carries_authorization() {
    let r = redirecting().await;
    let remote = Client::new(config())
        .remote(Endpoint::http(&r.a.to_string()).credentials(Credentials::new("user", "password")))
        .unwrap();
    let response = remote
        .get_blob("cross", &r.digest, None, None)
        .await
        .unwrap();
    assert!(
        !response.url().contains("s3cr3t"),
        "the answering URL is shown without its signed query: {}",
        response.url()
    );
    assert!(
        !response.credentials_sent(),
        "nothing of ours went to the second server"
    );
    let (data, err) = drain(response.into_body()).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(data, r.data);

    let a_blob_requests: Vec<_> = r
        .a_seen
        .all()
        .into_iter()
        .filter(|(uri, _)| uri.contains("/blobs/"))
        .collect();
    assert_eq!(a_blob_requests.len(), 1);
    assert!(
        has_authorization(&a_blob_requests[0].1),
        "A got our credentials"
    );
    let b = r.b_seen.all();
    assert_eq!(b.len(), 1, "B was asked once");
    assert!(
        b[0].0.contains("X-Amz-Signature"),
        "the query is kept on the wire"
    );
    assert!(
        !has_authorization(&b[0].1),
        "B must never see Authorization: {:?}",
        b[0].1
    );
}

#[tokio::test]
async fn callers_own_authorization_is_dropped_across_origins_too() {
    let r = redirecting().await;
    // Pass-through: no credentials of ours, the client's own header forwarded.
    let remote = Client::new(config())
        .remote(Endpoint::http(&r.a.to_string()))
        .unwrap();
    let response = remote
        .request(http::Method::GET, "cross", &format!("blobs/{}", r.digest))
        .header(header::AUTHORIZATION, "Basic dXNlcjpwYXNzd29yZA==")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), http::StatusCode::OK);
    let (data, _) = drain(response.into_body()).await;
    assert_eq!(data, r.data);
    let b = r.b_seen.all();
    assert_eq!(b.len(), 1);
    assert!(!has_authorization(&b[0].1), "{:?}", b[0].1);
}

#[tokio::test]
async fn same_origin_relative_redirect_keeps_authorization() {
    let r = redirecting().await;
    let remote = Client::new(config())
        .remote(Endpoint::http(&r.a.to_string()).credentials(Credentials::new("user", "password")))
        .unwrap();
    let response = remote
        .get_blob("same", &r.digest, None, None)
        .await
        .unwrap();
    assert!(
        response.url().ends_with("/v2/internal/blob"),
        "{}",
        response.url()
    );
    assert!(response.credentials_sent());
    let (data, err) = drain(response.into_body()).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(data, r.data);
    assert!(r.b_seen.all().is_empty());
}

#[tokio::test]
async fn redirect_loops_are_bounded() {
    let r = redirecting().await;
    let remote = Client::new(config())
        .remote(Endpoint::http(&r.a.to_string()).credentials(Credentials::new("user", "password")))
        .unwrap();
    let err = remote
        .get_blob("loop", &r.digest, None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::TooManyRedirects { limit: 3, .. }),
        "{err:?}"
    );
    assert!(err.retry_elsewhere());
    let loops = r
        .a_seen
        .all()
        .into_iter()
        .filter(|(uri, _)| uri.contains("/loop/"))
        .count();
    assert_eq!(loops, 4, "the first request and three redirects");
}
