//! HTTP/1.1 to containerd, written only as fast as the client reads.
//!
//! hyper's server kept, per connection, a request-head read buffer that doubles to 16 KiB as it
//! reads for the next request while the answer streams, an 8 KiB header write buffer, and
//! rustls' queue of encrypted records (up to 33 KiB): 54 KiB of a stalled stream's 94
//! (`bench/README.md`). Here a connection reads a request head into a buffer that is freed once
//! the head is parsed, seals the chunks of the answer that are ready at once (up to 64 KiB, what
//! one read of a registry connection brings in) into records written together
//! ([`crate::tls`]), and takes the next chunks from the body only once those are written. What
//! the socket does not take at once moves to a buffer of its own size before the wait, so a
//! client that stops reading holds in the agent at most the unsent part of one write and what
//! one read of the registry took in and was not yet sealed, besides the kernel's socket buffers.
//!
//! The agent serves pulls, so requests are read without their bodies: a request that has one is
//! answered and its connection then closed, lingering to read what the client still sends so
//! that the answer is not destroyed by a reset. Answers are framed by their `Content-Length`,
//! else chunked (HTTP/1.1) or delimited by the close (HTTP/1.0). An answer whose body breaks is
//! cut off where it broke: the client sees it short of its length or without the last chunk,
//! never a clean end.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use futures_util::FutureExt;
use http::{HeaderMap, Method, Request, Response, StatusCode, Version};
use http_body_util::BodyExt;
use rustls::server::UnbufferedServerConnection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::fields::{content_length, header_map, tokens};
use crate::proxy::ProxyBody;
use crate::tls::Tls;

/// The longest request head read (request line and headers); longer ones get a 431, as do
/// heads whose header section alone is over [`http_serve::limits::MAX_HEADER_BYTES`].
const MAX_HEAD: usize = http_serve::limits::MAX_HEADER_BYTES + 4096;
/// The most header fields a request may have (hyper's default).
const MAX_HEADERS: usize = 100;
/// What one read of a plain connection takes in while a head is read.
const PLAIN_READ: usize = 4096;

/// Serves connections from `listener` (over TLS with `tls`) with `handler` until `shutdown`
/// resolves; then closes idle connections and lets answers in flight finish (up to 30 s).
pub(crate) async fn serve<H, F>(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    handler: H,
    shutdown: impl Future<Output = ()>,
) where
    H: Fn(Request<()>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<ProxyBody>> + Send,
{
    let (stop, stopped) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    while let Some((tcp, peer)) = http_serve::accept(&listener, &mut shutdown).await {
        while connections.try_join_next().is_some() {}
        let handler = handler.clone();
        let tls = tls.clone();
        let stopped = stopped.clone();
        connections.spawn(async move {
            let io = match tls {
                None => Io::Plain(tcp),
                Some(config) => {
                    match tokio::time::timeout(
                        http_serve::HANDSHAKE_TIMEOUT,
                        Tls::accept(tcp, config),
                    )
                    .await
                    {
                        Ok(Ok(tls)) => Io::Tls(Box::new(tls)),
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    }
                }
            };
            connection(io, handler, stopped).await;
        });
    }
    let _ = stop.send(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(http_serve::DRAIN_TIMEOUT, drained).await;
}

/// A client's connection, plain or TLS.
pub(crate) enum Io {
    Plain(TcpStream),
    Tls(Box<Tls<UnbufferedServerConnection>>),
}

impl Io {
    /// What the client sent next: one read, or one record's plaintext. Empty at the end of the
    /// stream (a TLS client that closes without `close_notify` ends it too).
    async fn read(&mut self) -> io::Result<Bytes> {
        match self {
            Io::Plain(tcp) => {
                let mut buffer = BytesMut::with_capacity(PLAIN_READ);
                tcp.read_buf(&mut buffer).await?;
                Ok(buffer.freeze())
            }
            Io::Tls(tls) => match tls.read().await {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(Bytes::new()),
                other => other,
            },
        }
    }

    /// `pieces` of plaintext as they go on the wire, in one write (over TLS: encrypted, and the
    /// plaintext let go).
    fn seal(&mut self, pieces: Vec<Bytes>) -> io::Result<Bytes> {
        match self {
            Io::Plain(_) => Ok(match <[Bytes; 1]>::try_from(pieces) {
                Ok([one]) => one,
                Err(pieces) => pieces.concat().into(),
            }),
            Io::Tls(tls) => {
                let pieces: Vec<&[u8]> = pieces.iter().map(|piece| &piece[..]).collect();
                tls.seal(&pieces).map(Bytes::from)
            }
        }
    }

    /// Writes what [`seal`](Self::seal) returned. What the socket does not take at once moves
    /// to a buffer of its own size before the wait for the client, so that an answer whose
    /// client stops reading holds no more of it than is unsent.
    async fn transmit(&mut self, sealed: Bytes) -> io::Result<()> {
        let tcp = match self {
            Io::Plain(tcp) => tcp,
            Io::Tls(tls) => tls.tcp(),
        };
        let written = match tcp.try_write(&sealed) {
            Ok(written) => written,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if written < sealed.len() {
            let rest = Bytes::copy_from_slice(&sealed[written..]);
            drop(sealed);
            tcp.write_all(&rest).await?;
        }
        Ok(())
    }

    async fn send(&mut self, plaintext: Bytes) -> io::Result<()> {
        let sealed = self.seal(vec![plaintext])?;
        self.transmit(sealed).await
    }

    /// Ends the connection after a complete answer: `close_notify` and the end of the stream
    /// sent, then what the client still sends read and dropped as [`http_serve::Lingering`]
    /// does, so that a reset does not destroy the answer.
    async fn close(mut self) {
        let tcp = match &mut self {
            Io::Plain(tcp) => tcp,
            Io::Tls(tls) => {
                if tls.close_notify().await.is_err() {
                    return;
                }
                tls.tcp()
            }
        };
        let _ = http_serve::Lingering::new(tcp).shutdown().await;
    }
}

/// Requests on one connection, answered one after another, until the client closes it, asks
/// to, sends what cannot be read on, or an answer breaks; or, between requests, once the
/// server stops.
pub(crate) async fn connection<H, F>(mut io: Io, handler: H, mut stopped: watch::Receiver<bool>)
where
    H: Fn(Request<()>) -> F,
    F: Future<Output = Response<ProxyBody>>,
{
    // What was read past the last request head (a next request sent early).
    let mut buffered = BytesMut::new();
    loop {
        let next = tokio::select! {
            next = read_head(&mut io, &mut buffered) => next,
            _ = stopped.wait_for(|stop| *stop), if buffered.is_empty() => return,
        };
        let head = match next {
            Ok(Some(head)) => head,
            Ok(None) => return,
            Err(Refusal::Answer(status)) => {
                let refusal = Response::builder()
                    .status(status)
                    .body(crate::proxy::full(Bytes::new()))
                    .expect("a valid status");
                if answer(&mut io, &Method::GET, Version::HTTP_11, refusal, true)
                    .await
                    .is_ok()
                {
                    io.close().await;
                }
                return;
            }
            Err(Refusal::Gone) => return,
        };
        let close = !head.keep_alive || head.has_body || *stopped.borrow();
        let method = head.request.method().clone();
        let version = head.request.version();
        // While the answer is prepared (a registry's answer awaited), the connection is watched:
        // a client that goes away takes the request with it, as with hyper. What it sends
        // meanwhile (its next request) is kept, and then the watch ends. A request with a body
        // is not watched: its body is not read.
        let mut watching = buffered.is_empty() && !head.has_body;
        // Boxed: the handler's state would otherwise stay in the connection's task as long as
        // the answer streams.
        let mut handling = Box::pin(handler(head.request));
        let response = loop {
            tokio::select! {
                response = &mut handling => break response,
                read = io.read(), if watching => match read {
                    Ok(more) if !more.is_empty() => {
                        buffered.extend_from_slice(&more);
                        watching = false;
                    }
                    _ => {
                        tracing::debug!("the client went away before its answer");
                        return;
                    }
                },
            }
        };
        // The finished future's allocation goes before the answer streams, as the box meant.
        drop(handling);
        match answer(&mut io, &method, version, response, close).await {
            Ok(true) => {
                io.close().await;
                return;
            }
            Ok(false) => {}
            Err(error) => {
                tracing::debug!(%error, "an answer was cut off");
                return;
            }
        }
    }
}

/// A request head as read.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) request: Request<()>,
    /// The request has a body, which is not read: the connection closes after the answer.
    pub(crate) has_body: bool,
    /// The client keeps the connection for another request.
    pub(crate) keep_alive: bool,
}

/// Why no request came from a connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Answer with this status and close.
    Answer(StatusCode),
    /// The client went away mid-head, or the connection failed.
    Gone,
}

/// The next request head, with what follows it left in `buffered`; `None` when the client
/// closed the connection between requests.
async fn read_head(io: &mut Io, buffered: &mut BytesMut) -> Result<Option<Head>, Refusal> {
    loop {
        if !buffered.is_empty() {
            if let Some((length, head)) = parse_head(buffered)? {
                let _ = buffered.split_to(length);
                if buffered.is_empty() {
                    // The head's buffer goes with it.
                    *buffered = BytesMut::new();
                }
                return Ok(Some(head));
            }
            if buffered.len() >= MAX_HEAD {
                return Err(Refusal::Answer(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
            }
        }
        let more = io.read().await.map_err(|_| Refusal::Gone)?;
        if more.is_empty() {
            return if buffered.is_empty() {
                Ok(None)
            } else {
                Err(Refusal::Gone)
            };
        }
        buffered.extend_from_slice(&more);
    }
}

/// A complete request head at the front of `bytes`, and its length; `None` while incomplete.
pub(crate) fn parse_head(bytes: &[u8]) -> Result<Option<(usize, Head)>, Refusal> {
    let bad = || Refusal::Answer(StatusCode::BAD_REQUEST);
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut slots);
    let length = match parsed.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Refusal::Answer(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
        }
        Err(_) => return Err(bad()),
    };
    let method =
        Method::from_bytes(parsed.method.unwrap_or_default().as_bytes()).map_err(|_| bad())?;
    let uri: http::Uri = parsed.path.unwrap_or_default().parse().map_err(|_| bad())?;
    let version = match parsed.version {
        Some(1) => Version::HTTP_11,
        _ => Version::HTTP_10,
    };
    let headers = header_map(parsed.headers).map_err(|_| bad())?;
    if http_serve::limits::headers_too_large(&headers) {
        return Err(Refusal::Answer(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
    }
    let has_body = headers.contains_key(http::header::TRANSFER_ENCODING)
        || content_length(&headers)
            .map_err(|_| bad())?
            .is_some_and(|n| n > 0);
    let close =
        tokens(&headers, &http::header::CONNECTION).any(|t| t.eq_ignore_ascii_case("close"));
    let keep_alive = version == Version::HTTP_11 && !close;
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = headers;
    Ok(Some((
        length,
        Head {
            request,
            has_body,
            keep_alive,
        },
    )))
}

/// How an answer's body goes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body (an answer to `HEAD`; 1xx, 204, 304).
    None,
    /// Exactly this many bytes.
    Length(u64),
    Chunked,
    /// Until the connection closes (an HTTP/1.0 client, no length known).
    Close,
}

/// The framing of an answer with `status` and `headers` to a `method` request of `version`,
/// whose body is `exact` bytes long when that is known; and the `Content-Length` to announce
/// when the headers do not.
pub(crate) fn framing(
    method: &Method,
    version: Version,
    status: StatusCode,
    headers: &HeaderMap,
    exact: Option<u64>,
) -> (Framing, Option<u64>) {
    let declared = content_length(headers).ok().flatten();
    if *method == Method::HEAD {
        return (Framing::None, None);
    }
    if status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return (Framing::None, None);
    }
    match (declared, exact) {
        (Some(length), _) => (Framing::Length(length), None),
        (None, Some(length)) => (Framing::Length(length), Some(length)),
        (None, None) if version == Version::HTTP_11 => (Framing::Chunked, None),
        (None, None) => (Framing::Close, None),
    }
}

/// The status line and headers of an answer, with the framing's own headers, `date` unless
/// set, and `connection: close` when the connection ends after it.
pub(crate) fn response_head(
    status: StatusCode,
    headers: &HeaderMap,
    framing: Framing,
    announce: Option<u64>,
    close: bool,
    date: &str,
) -> BytesMut {
    let mut head = BytesMut::with_capacity(256);
    head.extend_from_slice(b"HTTP/1.1 ");
    head.extend_from_slice(status.as_str().as_bytes());
    head.extend_from_slice(b" ");
    head.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    head.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if name == http::header::CONNECTION || name == http::header::TRANSFER_ENCODING {
            continue;
        }
        field(&mut head, name.as_str(), value.as_bytes());
    }
    if let Some(length) = announce {
        field(&mut head, "content-length", length.to_string().as_bytes());
    }
    if framing == Framing::Chunked {
        field(&mut head, "transfer-encoding", b"chunked");
    }
    if close {
        field(&mut head, "connection", b"close");
    }
    if !headers.contains_key(http::header::DATE) {
        field(&mut head, "date", date.as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    head
}

fn field(head: &mut BytesMut, name: &str, value: &[u8]) {
    head.extend_from_slice(name.as_bytes());
    head.extend_from_slice(b": ");
    head.extend_from_slice(value);
    head.extend_from_slice(b"\r\n");
}

/// Writes `response` to a `method` request of `version`; whether the connection ends after it
/// (`close`, or a body delimited by the close). An error: the answer was cut off.
async fn answer(
    io: &mut Io,
    method: &Method,
    version: Version,
    response: Response<ProxyBody>,
    close: bool,
) -> io::Result<bool> {
    let (parts, mut body) = response.into_parts();
    let (framing, announce) = framing(
        method,
        version,
        parts.status,
        &parts.headers,
        hyper::body::Body::size_hint(&body).exact(),
    );
    let close = close || framing == Framing::Close;
    let date = httpdate::fmt_http_date(SystemTime::now());
    let mut head = Some(response_head(
        parts.status,
        &parts.headers,
        framing,
        announce,
        close,
        &date,
    ));
    drop(parts);
    let mut left = match framing {
        Framing::Length(length) => Some(length),
        _ => None,
    };
    let mut ended = framing == Framing::None;
    while !ended {
        // The head goes with the first chunk when that is ready at once.
        let first = match body.frame().now_or_never() {
            Some(frame) => frame,
            None => {
                if let Some(head) = head.take() {
                    io.send(head.freeze()).await?;
                }
                body.frame().await
            }
        };
        let (chunks, after) = gather(&mut body, first);
        let mut broken = match after {
            After::More => None,
            After::Ended => {
                ended = true;
                None
            }
            After::Broken(error) => Some(error),
        };
        let mut pieces = Vec::with_capacity(chunks.len());
        for data in chunks {
            if let Some(left) = &mut left {
                if data.len() as u64 > *left {
                    broken = Some(io::Error::other(
                        "the body is longer than its Content-Length",
                    ));
                    break;
                }
                *left -= data.len() as u64;
            }
            pieces.push(piece(framing, data));
        }
        if !pieces.is_empty() {
            if let Some(mut head) = head.take() {
                head.extend_from_slice(&pieces[0]);
                pieces[0] = head.freeze();
            }
            let sealed = io.seal(pieces)?;
            io.transmit(sealed).await?;
        }
        if let Some(error) = broken {
            return Err(error);
        }
    }
    if left.is_some_and(|left| left > 0) {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the body ended short of its Content-Length",
        ));
    }
    let mut end = head.unwrap_or_default();
    if framing == Framing::Chunked {
        end.extend_from_slice(b"0\r\n\r\n");
    }
    if !end.is_empty() {
        io.send(end.freeze()).await?;
    }
    Ok(close)
}

/// What comes after the chunks of one write.
#[derive(Debug)]
enum After {
    /// More chunks, not ready yet.
    More,
    Ended,
    /// The body broke after the chunks.
    Broken(io::Error),
}

/// The chunks of `body` that go out in one write: those of `first` (the frame waited for) and
/// of the frames ready right after it, up to [`WRITE_BATCH`] bytes; and what comes next.
fn gather(
    body: &mut ProxyBody,
    first: Option<io::Result<hyper::body::Frame<Bytes>>>,
) -> (Vec<Bytes>, After) {
    let mut chunks = Vec::new();
    let mut batched = 0;
    let mut next = Some(first);
    while let Some(frame) = next.take() {
        match frame {
            None => return (chunks, After::Ended),
            Some(Err(error)) => return (chunks, After::Broken(error)),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data()
                    && !data.is_empty()
                {
                    batched += data.len();
                    chunks.push(data);
                }
            }
        }
        if batched < WRITE_BATCH {
            next = body.frame().now_or_never();
        }
    }
    (chunks, After::More)
}

/// `data` framed as `framing` frames a body's chunk.
fn piece(framing: Framing, data: Bytes) -> Bytes {
    match framing {
        Framing::Chunked => {
            let mut chunk = BytesMut::with_capacity(data.len() + 12);
            chunk.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            chunk.extend_from_slice(&data);
            chunk.extend_from_slice(b"\r\n");
            chunk.freeze()
        }
        _ => data,
    }
}

/// The most of an answer's body, in bytes, gathered for one write (four TLS records' worth: what
/// one read of a registry connection brings in, [`crate::tls`]).
const WRITE_BATCH: usize = 64 * 1024;

#[cfg(test)]
mod tests;
