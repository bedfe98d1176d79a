//! A registry that misbehaves on purpose: a small HTTP/1.1 proxy of ours in front of a real
//! [`Upstream`](crate::Upstream) that injects one [`Fault`] into blob downloads.
//!
//! Everything but `GET …/blobs/…` passes through untouched (manifests, tags, `/v2/`), except
//! with [`Fault::Unauthorized`], which refuses every request. Faults that act "at half" act at
//! the middle of the *blob*, not of the response: a `Range` request that starts past the middle
//! passes, so a client that resumes after the fault can finish from the same proxy, as it could
//! from a registry that reset one connection. The fault can be changed while the proxy runs
//! ([`FaultyUpstream::set_fault`]), so a test can check that the next fault-free pull is right.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy does to blob downloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Nothing: a faithful proxy.
    None,
    /// The announced length, the bytes up to the blob's middle, then a TCP reset.
    ResetAtHalf,
    /// The announced length, the bytes up to the blob's middle, then silence with the
    /// connection held open.
    StallAtHalf,
    /// `500` with an OCI error body to the first blob GET; every later one passes.
    ServerErrorOnce,
    /// The whole blob with the byte in its middle flipped.
    FlipByte,
    /// `401` with a Basic challenge to every request, `/v2/` included.
    Unauthorized,
    /// The announced length, the bytes up to the blob's middle, then a clean close.
    ShortBody,
    /// The whole blob, at `bytes_per_second`.
    Trickle {
        /// Bytes sent per second (in eight bursts a second, of at most 1 KiB).
        bytes_per_second: u64,
    },
}

impl Fault {
    /// Every fault, the trickle at 1 KiB/s: the matrix the pull-path tests run.
    pub const MATRIX: [Fault; 7] = [
        Fault::ResetAtHalf,
        Fault::StallAtHalf,
        Fault::ServerErrorOnce,
        Fault::FlipByte,
        Fault::Unauthorized,
        Fault::ShortBody,
        Fault::Trickle {
            bytes_per_second: 1024,
        },
    ];

    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::ResetAtHalf => "reset at half",
            Fault::StallAtHalf => "stall at half",
            Fault::ServerErrorOnce => "500 once",
            Fault::FlipByte => "flipped byte",
            Fault::Unauthorized => "401",
            Fault::ShortBody => "short body",
            Fault::Trickle { .. } => "trickle",
        }
    }

    /// Whether the fault strikes after the response headers, in the body.
    pub fn is_mid_body(&self) -> bool {
        matches!(
            self,
            Fault::ResetAtHalf
                | Fault::StallAtHalf
                | Fault::FlipByte
                | Fault::ShortBody
                | Fault::Trickle { .. }
        )
    }
}

#[derive(Debug)]
struct State {
    upstream: String,
    fault: Mutex<Fault>,
    /// Whether [`Fault::ServerErrorOnce`] has struck.
    struck: AtomicBool,
    blob_gets: AtomicU64,
    injected: AtomicU64,
    http: reqwest::Client,
}

/// The proxy; stops accepting when dropped (connections in flight run on).
#[derive(Debug)]
pub struct FaultyUpstream {
    address: SocketAddr,
    state: Arc<State>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for FaultyUpstream {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl FaultyUpstream {
    /// A proxy in front of `upstream` (plain HTTP) injecting `fault`.
    pub async fn start(upstream: &crate::Upstream, fault: Fault) -> Self {
        assert!(
            !upstream.is_tls(),
            "the faulty proxy fronts plain-HTTP upstreams"
        );
        Self::start_for(&upstream.url(), fault).await
    }

    /// A proxy in front of the registry at `upstream_url` (`http://host:port`).
    pub async fn start_for(upstream_url: &str, fault: Fault) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("reqwest client");
        let state = Arc::new(State {
            upstream: upstream_url.trim_end_matches('/').to_owned(),
            fault: Mutex::new(fault),
            struck: AtomicBool::new(false),
            blob_gets: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            http,
        });
        let shared = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, &state).await;
                });
            }
        });
        Self {
            address,
            state,
            accept,
        }
    }

    /// `127.0.0.1:port`.
    pub fn host(&self) -> String {
        self.address.to_string()
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Replaces the fault from the next request on.
    pub fn set_fault(&self, fault: Fault) {
        *self.state.fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
        self.state.struck.store(false, Ordering::SeqCst);
    }

    /// Blob GETs received so far.
    pub fn blob_gets(&self) -> u64 {
        self.state.blob_gets.load(Ordering::SeqCst)
    }

    /// Responses the fault changed so far.
    pub fn injected(&self) -> u64 {
        self.state.injected.load(Ordering::SeqCst)
    }
}

/// One request head: method, path with query, headers.
struct Head {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
}

async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<Head>> {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 {
            return Ok(None);
        }
        raw.push(byte[0]);
        if raw.len() > 64 * 1024 {
            return Ok(None);
        }
    }
    let text = String::from_utf8_lossy(&raw);
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next().unwrap_or("").split_whitespace();
    let method = request_line.next().unwrap_or("GET").to_owned();
    let target = request_line.next().unwrap_or("/").to_owned();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Ok(Some(Head {
        method,
        target,
        headers,
    }))
}

async fn serve(mut stream: TcpStream, state: &State) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    while let Some(head) = read_head(&mut stream).await? {
        if !answer(&mut stream, state, &head).await? {
            return Ok(());
        }
    }
    Ok(())
}

/// Answers one request; `false` when the connection must not be reused.
async fn answer(stream: &mut TcpStream, state: &State, head: &Head) -> std::io::Result<bool> {
    let fault = *state.fault.lock().unwrap_or_else(|e| e.into_inner());
    if fault == Fault::Unauthorized {
        state.injected.fetch_add(1, Ordering::SeqCst);
        let body = r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#;
        let response = format!(
            "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n\
             WWW-Authenticate: Basic realm=\"faulty\"\r\n\
             Docker-Distribution-Api-Version: registry/2.0\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(response.as_bytes()).await?;
        return Ok(true);
    }
    let blob_get = head.method == "GET" && head.target.contains("/blobs/");
    if blob_get {
        state.blob_gets.fetch_add(1, Ordering::SeqCst);
        if fault == Fault::ServerErrorOnce && !state.struck.swap(true, Ordering::SeqCst) {
            state.injected.fetch_add(1, Ordering::SeqCst);
            let body = r#"{"errors":[{"code":"UNKNOWN","message":"injected failure"}]}"#;
            let response = format!(
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(response.as_bytes()).await?;
            return Ok(true);
        }
    }
    let method =
        reqwest::Method::from_bytes(head.method.as_bytes()).unwrap_or(reqwest::Method::GET);
    let mut request = state
        .http
        .request(method.clone(), format!("{}{}", state.upstream, head.target));
    for (name, value) in &head.headers {
        if !matches!(name.as_str(), "host" | "connection" | "content-length") {
            request = request.header(name.as_str(), value.as_str());
        }
    }
    let Ok(mut response) = request.send().await else {
        let response = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
        stream.write_all(response.as_bytes()).await?;
        return Ok(true);
    };
    let status = response.status();
    let length: Option<u64> =
        header(response.headers(), "content-length").and_then(|v| v.parse().ok());
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    for (name, value) in response.headers() {
        if matches!(name.as_str(), "transfer-encoding" | "connection") {
            continue;
        }
        out.push_str(&format!(
            "{name}: {}\r\n",
            String::from_utf8_lossy(value.as_bytes())
        ));
    }
    let has_body = method != reqwest::Method::HEAD && status != 204 && status != 304;
    let close = has_body && length.is_none();
    if close {
        out.push_str("connection: close\r\n");
    }
    out.push_str("\r\n");
    stream.write_all(out.as_bytes()).await?;
    if !has_body {
        return Ok(true);
    }
    let faulted = blob_get && (status == 200 || status == 206) && fault != Fault::None;
    // The blob offset of the first body byte and the blob's size.
    let (start, total) = match header(response.headers(), "content-range") {
        Some(range) if status == 206 => parse_content_range(&range).unwrap_or((0, 0)),
        _ => (0, length.unwrap_or(0)),
    };
    let half = total / 2;
    let mut offset = start;
    let mut counted = false;
    let mut count = || {
        if !counted {
            counted = true;
            state.injected.fetch_add(1, Ordering::SeqCst);
        }
    };
    while let Some(chunk) = response.chunk().await.map_err(std::io::Error::other)? {
        let mut chunk = chunk.to_vec();
        let end = offset + chunk.len() as u64;
        if faulted {
            match fault {
                Fault::ResetAtHalf | Fault::StallAtHalf | Fault::ShortBody
                    if offset < half && end > half =>
                {
                    count();
                    let keep = half.saturating_sub(offset) as usize;
                    stream.write_all(&chunk[..keep]).await?;
                    stream.flush().await?;
                    match fault {
                        Fault::ResetAtHalf => {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            stream.set_zero_linger()?;
                        }
                        Fault::StallAtHalf => {
                            // Silent until the client gives up.
                            let mut sink = [0u8; 1024];
                            while stream.read(&mut sink).await.unwrap_or(0) > 0 {}
                        }
                        _ => stream.shutdown().await?,
                    }
                    return Ok(false);
                }
                Fault::FlipByte if offset <= half && half < end => {
                    count();
                    chunk[(half - offset) as usize] ^= 0x01;
                }
                Fault::Trickle { bytes_per_second } => {
                    count();
                    // Small bursts: the trickle never looks like a stall, only like a crawl.
                    let burst = (bytes_per_second / 8).clamp(1, 1024) as usize;
                    let pause = Duration::from_secs_f64(burst as f64 / bytes_per_second as f64);
                    for piece in chunk.chunks(burst) {
                        stream.write_all(piece).await?;
                        tokio::time::sleep(pause).await;
                    }
                    offset = end;
                    continue;
                }
                _ => {}
            }
        }
        stream.write_all(&chunk).await?;
        offset = end;
    }
    Ok(!close)
}

fn header(headers: &reqwest::header::HeaderMap, name: &str) -> Option<String> {
    headers.get(name)?.to_str().ok().map(str::to_owned)
}

/// `bytes a-b/total` → `(a, total)`.
fn parse_content_range(value: &str) -> Option<(u64, u64)> {
    let rest = value.strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (first, _) = range.split_once('-')?;
    Some((first.parse().ok()?, total.parse().ok()?))
}

/// What a client saw when it pulled a blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// `200` and bytes that hash to the digest.
    Right,
    /// A clean error status.
    Status(u16),
    /// The body broke off before its announced length (or the connection failed).
    Broken,
    /// A complete body whose bytes do not hash to the digest: never acceptable.
    Wrong,
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seen::Right => write!(f, "right bytes"),
            Seen::Status(s) => write!(f, "clean error {s}"),
            Seen::Broken => write!(f, "broken off"),
            Seen::Wrong => write!(f, "WRONG BYTES"),
        }
    }
}

impl Seen {
    /// Classifies the answer to a blob GET against `digest` (`sha256:…`), reading the body.
    pub async fn of(response: reqwest::Result<reqwest::Response>, digest: &str) -> Self {
        use sha2::Digest as _;
        let Ok(response) = response else {
            return Seen::Broken;
        };
        let status = response.status().as_u16();
        if status != 200 {
            return Seen::Status(status);
        }
        let announced = response.content_length();
        match response.bytes().await {
            Ok(bytes)
                if format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes))) == digest =>
            {
                Seen::Right
            }
            Ok(bytes) if announced.is_some_and(|n| n != bytes.len() as u64) => Seen::Broken,
            Ok(_) => Seen::Wrong,
            Err(_) => Seen::Broken,
        }
    }
}
