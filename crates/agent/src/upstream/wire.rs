//! HTTP/1.1 to registries, read only as far as the consumer asks.
//!
//! hyper's client drives each connection from a task of its own, which reads ahead of whoever
//! consumes the body: one chunk waits in the body's channel while the next is read, and each
//! keeps a whole read buffer alive (`bench/README.md`, "Memory per stream, buffer by buffer").
//! Here the consumer's poll drives the connection: the next read happens when the relay asks
//! for the next chunk, and a chunk is the plaintext of one TLS record, handed on in the buffer
//! the record was received in. TLS records are received into buffers of ours, up to four a read
//! when the registry has sent them ([`crate::tls`]): a stream whose client stopped reading keeps
//! no more of the upstream's bytes than what one read took in and was not yet handed on.
//!
//! Requests carry no body (the agent forwards pulls). Bodies are framed as RFC 9112 says:
//! none for `HEAD`, 1xx, 204 and 304; chunked; `Content-Length`; else until the connection
//! closes. A connection that ended a body cleanly is kept for the next request to its origin;
//! one that was idle may have been closed by the server meanwhile, so a request that gets no
//! answer on a reused connection is sent once more on a new one.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, StatusCode, Uri, header};
use registry_client::{BoxError, RawStream};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::fields::{content_length, header_map, tokens};
use crate::tls::Tls;

/// The longest response head accepted (status line and headers), as hyper's client was
/// configured before: one TLS record's plaintext and then some.
const MAX_HEAD: usize = 17 * 1024;
/// The most headers a response may have.
const MAX_HEADERS: usize = 100;
/// The longest line of chunked framing (a chunk size with extensions, a trailer).
const MAX_LINE: usize = 4096;
/// What one read of a plain-HTTP connection allocates (over TLS a read takes up to four
/// records, [`crate::tls`]).
const PLAIN_READ: usize = 16 * 1024;

/// Opens, reuses and keeps connections to registries, with one TLS configuration.
pub(crate) struct Connector {
    tls: Arc<rustls::ClientConfig>,
    connect_timeout: Duration,
    idle_for: Duration,
    idle_per_origin: usize,
    idle: Mutex<HashMap<Origin, Vec<(Conn, Instant)>>>,
}

/// A response's status, headers and body (`None`: the response has none).
pub(crate) struct Response {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Option<RawStream>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Origin {
    tls: bool,
    host: String,
    port: u16,
}

impl Origin {
    fn of(uri: &Uri) -> io::Result<Self> {
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(invalid(format!("{uri}: not an http or https URL"))),
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| invalid(format!("{uri}: no host")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Ok(Self {
            tls,
            host: host.to_ascii_lowercase(),
            port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
        })
    }
}

impl Connector {
    /// A connector verifying servers with `tls` (ALPN is set to HTTP/1.1 here). Idle
    /// connections are kept `idle_for`, at most `idle_per_origin` per origin; a task closes
    /// the expired ones while the connector lives.
    pub(crate) fn new(
        mut tls: rustls::ClientConfig,
        connect_timeout: Duration,
        idle_for: Duration,
        idle_per_origin: usize,
    ) -> Arc<Self> {
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        // The records are protected by `crate::tls` once rustls has negotiated their keys.
        tls.enable_secret_extraction = true;
        let connector = Arc::new(Self {
            tls: Arc::new(tls),
            connect_timeout,
            idle_for,
            idle_per_origin,
            idle: Mutex::new(HashMap::new()),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(reap(Arc::downgrade(&connector), idle_for));
        }
        connector
    }

    /// Sends `method` (without a body) to `uri` with `headers`, and returns the response once
    /// its head is in. The body is read as it is consumed.
    pub(crate) async fn request(
        self: &Arc<Self>,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
    ) -> io::Result<Response> {
        let origin = Origin::of(uri)?;
        let head = request_head(method, uri, headers);
        if let Some(conn) = self.take_idle(&origin) {
            match self.exchange(conn, &head, method, &origin).await {
                Ok(response) => return Ok(response),
                Err(Exchange::Unanswered(error)) => {
                    tracing::debug!(%error, "a kept connection was closed; opening a new one");
                }
                Err(Exchange::Failed(error)) => return Err(error),
            }
        }
        let conn = self.connect(&origin).await?;
        self.exchange(conn, &head, method, &origin)
            .await
            .map_err(Exchange::into_error)
    }

    async fn connect(&self, origin: &Origin) -> io::Result<Conn> {
        let address = (origin.host.as_str(), origin.port);
        let tcp = tokio::time::timeout(self.connect_timeout, TcpStream::connect(address))
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("connecting timed out after {:?}", self.connect_timeout),
                )
            })?
            .map_err(|e| io::Error::new(e.kind(), format!("cannot connect: {e}")))?;
        tcp.set_nodelay(true)?;
        let io = if origin.tls {
            let name = ServerName::try_from(origin.host.clone())
                .map_err(|e| invalid(format!("{}: {e}", origin.host)))?;
            let tls = Tls::connect(tcp, self.tls.clone(), name)
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
            Io::Tls(Box::new(tls))
        } else {
            Io::Plain(tcp)
        };
        Ok(Conn {
            io,
            buffered: Bytes::new(),
        })
    }

    /// One request and its response head on `conn`.
    async fn exchange(
        self: &Arc<Self>,
        mut conn: Conn,
        head: &[u8],
        method: &Method,
        origin: &Origin,
    ) -> Result<Response, Exchange> {
        conn.send(head).await.map_err(Exchange::Unanswered)?;
        let (status, version, headers) = read_head(&mut conn).await?;
        let framing = framing(method, status, &headers).map_err(Exchange::Failed)?;
        let keep = version == http::Version::HTTP_11
            && !tokens(&headers, &header::CONNECTION).any(|t| t.eq_ignore_ascii_case("close"));
        let body = match framing {
            Framing::Length(0) | Framing::None => {
                if keep {
                    self.put_idle(origin, conn);
                }
                (framing == Framing::Length(0)).then(|| empty())
            }
            framing => Some(Reader::new(conn, framing, keep, self, origin).into_stream()),
        };
        Ok(Response {
            status,
            headers,
            body,
        })
    }

    fn take_idle(&self, origin: &Origin) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = idle.get_mut(origin)?;
        while let Some((conn, since)) = kept.pop() {
            if since.elapsed() < self.idle_for {
                return Some(conn);
            }
        }
        None
    }

    fn put_idle(&self, origin: &Origin, conn: Conn) {
        if !conn.buffered.is_empty() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = idle.entry(origin.clone()).or_default();
        if kept.len() < self.idle_per_origin {
            kept.push((conn, Instant::now()));
        }
    }

    /// Closes the idle connections to `uri`'s origin.
    pub(crate) fn forget(&self, uri: &Uri) {
        let Ok(origin) = Origin::of(uri) else {
            return;
        };
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.remove(&origin);
    }

    /// Closes the connections idle for longer than `idle_for`.
    fn reap(&self) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        for kept in idle.values_mut() {
            kept.retain(|(_, since)| since.elapsed() < self.idle_for);
        }
        idle.retain(|_, kept| !kept.is_empty());
    }
}

async fn reap(connector: Weak<Connector>, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_secs(1)));
    tick.tick().await;
    loop {
        tick.tick().await;
        match connector.upgrade() {
            Some(connector) => connector.reap(),
            None => return,
        }
    }
}

/// Why an exchange failed: before any byte of an answer (worth sending again on a new
/// connection when this one was reused), or after.
enum Exchange {
    Unanswered(io::Error),
    Failed(io::Error),
}

impl Exchange {
    fn into_error(self) -> io::Error {
        match self {
            Self::Unanswered(e) | Self::Failed(e) => e,
        }
    }
}

enum Io {
    Plain(TcpStream),
    Tls(Box<Tls<rustls::client::UnbufferedClientConnection>>),
}

/// A connection and the bytes read but not yet consumed (past a response head, or the rest of
/// a record).
struct Conn {
    io: Io,
    buffered: Bytes,
}

impl Conn {
    async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.io {
            Io::Plain(tcp) => tcp.write_all(bytes).await,
            Io::Tls(tls) => tls.send(bytes).await,
        }
    }

    /// Up to `max` bytes: those read but not consumed first, else one read of the connection
    /// (over TLS, one record's plaintext, of which what is past `max` stays buffered). Empty at
    /// the end of the stream.
    async fn read(&mut self, max: usize) -> io::Result<Bytes> {
        let mut chunk = if self.buffered.is_empty() {
            self.read_io(max).await?
        } else {
            std::mem::take(&mut self.buffered)
        };
        if chunk.len() > max {
            self.buffered = chunk.split_off(max);
        }
        Ok(chunk)
    }

    async fn read_io(&mut self, max: usize) -> io::Result<Bytes> {
        match &mut self.io {
            Io::Plain(tcp) => {
                let mut buffer = BytesMut::with_capacity(max.min(PLAIN_READ));
                tcp.read_buf(&mut buffer).await?;
                Ok(buffer.freeze())
            }
            Io::Tls(tls) => tls.read().await,
        }
    }

    /// The next line of chunked framing, without its line end.
    async fn line(&mut self) -> io::Result<Bytes> {
        // The start of a line that spans reads.
        let mut start = BytesMut::new();
        loop {
            if let Some(end) = self.buffered.iter().position(|&b| b == b'\n') {
                let rest = self.buffered.split_to(end + 1);
                let mut line = if start.is_empty() {
                    rest
                } else {
                    start.extend_from_slice(&rest);
                    start.freeze()
                };
                line.truncate(line.len() - 1);
                if line.last() == Some(&b'\r') {
                    line.truncate(line.len() - 1);
                }
                return Ok(line);
            }
            start.extend_from_slice(&std::mem::take(&mut self.buffered));
            if start.len() > MAX_LINE {
                return Err(invalid("a line of chunked framing is too long"));
            }
            self.buffered = self.read_io(MAX_LINE).await?;
            if self.buffered.is_empty() {
                return Err(closed_early("in the chunked framing"));
            }
        }
    }
}

/// The request line, `Host` and `headers`.
fn request_head(method: &Method, uri: &Uri, headers: &HeaderMap) -> Vec<u8> {
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let host = uri.authority().map_or("", |a| a.as_str());
    let mut head = Vec::with_capacity(256);
    head.extend_from_slice(method.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(target.as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    head.extend_from_slice(host.as_bytes());
    head.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if name == header::HOST {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// The final response head (informational ones skipped); what follows it stays buffered.
async fn read_head(conn: &mut Conn) -> Result<(StatusCode, http::Version, HeaderMap), Exchange> {
    let mut head = BytesMut::new();
    loop {
        if !head.is_empty() {
            match parse_head(&head).map_err(Exchange::Failed)? {
                Some((length, status, ..)) if status.is_informational() => {
                    let _ = head.split_to(length);
                    continue;
                }
                Some((length, status, version, headers)) => {
                    conn.buffered = head.split_off(length).freeze();
                    return Ok((status, version, headers));
                }
                None if head.len() >= MAX_HEAD => {
                    return Err(Exchange::Failed(invalid(format!(
                        "the response head is longer than {MAX_HEAD} bytes"
                    ))));
                }
                None => {}
            }
        }
        // Nothing of an answer yet: the connection may have been closed while it was idle.
        let unanswered = head.is_empty();
        let failure = |error| {
            if unanswered {
                Exchange::Unanswered(error)
            } else {
                Exchange::Failed(error)
            }
        };
        let more = conn
            .read(MAX_HEAD.saturating_sub(head.len()).max(1))
            .await
            .map_err(failure)?;
        if more.is_empty() {
            return Err(failure(closed_early("before a complete response head")));
        }
        head.extend_from_slice(&more);
    }
}

/// A complete head at the front of `bytes`: its length, status, version and headers.
fn parse_head(bytes: &[u8]) -> io::Result<Option<(usize, StatusCode, http::Version, HeaderMap)>> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut slots);
    let length = match response.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(invalid(format!("not an HTTP/1.1 response: {e}"))),
    };
    let status = response
        .code
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| invalid("a response without a valid status"))?;
    let version = match response.version {
        Some(1) => http::Version::HTTP_11,
        _ => http::Version::HTTP_10,
    };
    let headers = header_map(response.headers).map_err(invalid)?;
    Ok(Some((length, status, version, headers)))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// No body at all.
    None,
    /// This many bytes are left.
    Length(u64),
    Chunked(Chunked),
    /// Until the server closes the connection.
    Close,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunked {
    /// A chunk-size line comes next.
    Size,
    /// This many bytes of the current chunk are left.
    Data(u64),
    /// The line end after a chunk's data.
    DataEnd,
    /// Trailer lines, up to an empty one.
    Trailers,
}

/// How the body of a response to `method` with `status` and `headers` is delimited.
fn framing(method: &Method, status: StatusCode, headers: &HeaderMap) -> io::Result<Framing> {
    if *method == Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::None);
    }
    if headers.contains_key(header::TRANSFER_ENCODING) {
        let last = tokens(headers, &header::TRANSFER_ENCODING).last();
        return Ok(match last {
            Some(coding) if coding.eq_ignore_ascii_case("chunked") => {
                Framing::Chunked(Chunked::Size)
            }
            _ => Framing::Close,
        });
    }
    let length = content_length(headers).map_err(invalid)?;
    Ok(length.map_or(Framing::Close, Framing::Length))
}

/// A response body being read; the connection goes back to its connector when the body ended
/// cleanly and may be reused.
struct Reader {
    /// `None` once the body has ended or broken: nothing more is read.
    conn: Option<Conn>,
    framing: Framing,
    keep: bool,
    connector: Arc<Connector>,
    origin: Origin,
    /// Bytes of the body so far (for messages).
    received: u64,
}

impl Reader {
    fn new(
        conn: Conn,
        framing: Framing,
        keep: bool,
        connector: &Arc<Connector>,
        origin: &Origin,
    ) -> Self {
        Self {
            conn: Some(conn),
            framing,
            keep: keep && framing != Framing::Close,
            connector: connector.clone(),
            origin: origin.clone(),
            received: 0,
        }
    }

    fn into_stream(self) -> RawStream {
        Box::pin(futures_util::stream::unfold(
            self,
            |mut reader| async move {
                match reader.next().await {
                    Ok(Some(chunk)) => Some((Ok(chunk), reader)),
                    Ok(None) => None,
                    Err(error) => {
                        // Nothing more comes from a broken body.
                        reader.conn = None;
                        Some((Err(BoxError::from(error)), reader))
                    }
                }
            },
        ))
    }

    /// The next chunk of the body, `None` at its end.
    async fn next(&mut self) -> io::Result<Option<Bytes>> {
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return Ok(None);
            };
            match self.framing {
                Framing::None => return Ok(None),
                Framing::Length(left) => {
                    let chunk = part(conn, left, self.received, || {
                        format!("{left} short of its Content-Length")
                    })
                    .await?;
                    let left = left - chunk.len() as u64;
                    self.framing = Framing::Length(left);
                    if left == 0 {
                        self.done();
                    }
                    return Ok(Some(self.count(chunk)));
                }
                Framing::Close => match conn.read(usize::MAX).await {
                    Ok(chunk) if !chunk.is_empty() => return Ok(Some(self.count(chunk))),
                    // A TLS server that closes without close_notify ends such a body too.
                    Ok(_) => return Ok(self.end()),
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(self.end()),
                    Err(e) => return Err(e),
                },
                Framing::Chunked(Chunked::Size) => {
                    let line = conn.line().await?;
                    let size = chunk_size(&line)?;
                    self.framing = Framing::Chunked(if size == 0 {
                        Chunked::Trailers
                    } else {
                        Chunked::Data(size)
                    });
                }
                Framing::Chunked(Chunked::Data(left)) => {
                    let chunk =
                        part(conn, left, self.received, || "inside a chunk".to_owned()).await?;
                    let left = left - chunk.len() as u64;
                    self.framing = Framing::Chunked(if left == 0 {
                        Chunked::DataEnd
                    } else {
                        Chunked::Data(left)
                    });
                    return Ok(Some(self.count(chunk)));
                }
                Framing::Chunked(Chunked::DataEnd) => {
                    if !conn.line().await?.is_empty() {
                        return Err(invalid("a chunk longer than its size"));
                    }
                    self.framing = Framing::Chunked(Chunked::Size);
                }
                Framing::Chunked(Chunked::Trailers) => {
                    if conn.line().await?.is_empty() {
                        self.done();
                        return Ok(None);
                    }
                }
            }
        }
    }

    fn count(&mut self, chunk: Bytes) -> Bytes {
        self.received += chunk.len() as u64;
        chunk
    }

    /// The body ended where its framing says: the connection may serve the next request.
    fn done(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.keep
        {
            self.connector.put_idle(&self.origin, conn);
        }
    }

    /// The server closed the connection, which ends a body delimited that way.
    fn end(&mut self) -> Option<Bytes> {
        self.conn = None;
        None
    }
}

/// Up to `left` bytes of a body of which `received` came before; the connection closing first
/// is an error saying where (`place`).
async fn part(
    conn: &mut Conn,
    left: u64,
    received: u64,
    place: impl FnOnce() -> String,
) -> io::Result<Bytes> {
    let chunk = conn
        .read(usize::try_from(left).unwrap_or(usize::MAX))
        .await?;
    if chunk.is_empty() {
        return Err(closed_early(&format!(
            "after {received} bytes, {}",
            place()
        )));
    }
    Ok(chunk)
}

/// A chunk-size line's size (extensions ignored).
fn chunk_size(line: &[u8]) -> io::Result<u64> {
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    let digits = std::str::from_utf8(digits)
        .ok()
        .map(str::trim)
        .filter(|d| !d.is_empty() && d.len() <= 16)
        .ok_or_else(|| invalid("an invalid chunk size"))?;
    u64::from_str_radix(digits, 16).map_err(|_| invalid("an invalid chunk size"))
}

fn empty() -> RawStream {
    Box::pin(futures_util::stream::empty())
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// The server closed the connection early: told apart from other breaks by its kind.
fn closed_early(when: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the registry closed the connection {when}"),
    )
}

#[cfg(test)]
mod tests;
