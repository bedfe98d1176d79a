//! The plain-HTTP listener with a zero-copy path: HTTP/1.1 `GET`/`HEAD` requests without a
//! body are parsed here, and a complete blob (whole or a Range of it) is written to the socket
//! with `sendfile(2)` — the page cache to the socket without a trip through user space, which
//! is what makes warm serving as fast as a bare file server.
//!
//! Everything else on the connection — a request with a body, HTTP/1.0, an upgrade, HTTP/2
//! prior knowledge, a head that does not parse — hands the connection, with the bytes already
//! read, to hyper for the rest of its life, so nothing is served differently from the TLS
//! listeners. Responses that are not a complete file (a growing file during a fill, manifests,
//! errors) are written from their body frames, chunked when their length is unknown.
//!
//! TLS listeners do not take this path: rustls encrypts in user space (kTLS would be needed to
//! send files from the kernel).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, Method, Request, Response, header};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::body::{ResponseBody, ZeroCopy};
use crate::service::{Listener, Peer};

/// How long requests in flight may take to finish after shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may take to send a request head it has started.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// A request head larger than this is left to hyper (which refuses it).
const MAX_HEAD: usize = 64 << 10;
/// Bytes per `sendfile` call.
const SENDFILE_CHUNK: u64 = 1 << 30;

/// Serves `handler` on `listener` (plain HTTP) until `shutdown` resolves, then lets requests in
/// flight finish (up to 30 s).
pub(crate) async fn serve(
    listener: TcpListener,
    handler: Listener,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every connection task holds a sender; the receiver sees `None` once all are gone.
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
    tokio::pin!(shutdown);
    while let Some((stream, _)) = http_serve::accept(&listener, &mut shutdown).await {
        let handler = handler.clone();
        let stop = stop_rx.clone();
        let alive = alive_tx.clone();
        tokio::spawn(async move {
            if let Err(error) = connection(stream, handler, stop).await {
                tracing::debug!(%error, "connection ended");
            }
            drop(alive);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(alive_tx);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, alive_rx.recv()).await;
}

/// A parsed request head we may answer ourselves.
struct Head {
    request: Request<http_body_util::Empty<Bytes>>,
    close: bool,
}

/// Parses one request head at the start of `buf`: `Ok(Some((head, len)))` when it is ours,
/// `Ok(None)` when more bytes are needed, `Err(())` when hyper should take over.
fn parse(buf: &[u8]) -> Result<Option<(Head, usize)>, ()> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut headers);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Ok(None),
        _ => return Err(()),
    };
    if parsed.version != Some(1) {
        return Err(());
    }
    let method = match parsed.method {
        Some("GET") => Method::GET,
        Some("HEAD") => Method::HEAD,
        _ => return Err(()),
    };
    let mut builder = Request::builder()
        .method(method)
        .uri(parsed.path.ok_or(())?);
    let mut close = false;
    for h in parsed.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("transfer-encoding")
            || name.eq_ignore_ascii_case("expect")
            || name.eq_ignore_ascii_case("upgrade")
            || (name.eq_ignore_ascii_case("content-length") && h.value != b"0")
        {
            return Err(());
        }
        if name.eq_ignore_ascii_case("connection") {
            close = std::str::from_utf8(h.value)
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
        }
        builder = builder.header(name, h.value);
    }
    let request = builder.body(http_body_util::Empty::new()).map_err(|_| ())?;
    Ok(Some((Head { request, close }, len)))
}

async fn connection(
    mut stream: TcpStream,
    handler: Listener,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(8 << 10);
    loop {
        let head = loop {
            match parse(&buf) {
                Ok(Some((head, len))) => {
                    buf.advance(len);
                    break head;
                }
                Ok(None) => {}
                Err(()) => return hand_over(stream, buf.freeze(), handler, stop).await,
            }
            let read = if buf.is_empty() {
                // Idle between requests: shutdown closes the connection.
                tokio::select! {
                    read = stream.read_buf(&mut buf) => read?,
                    _ = stop.wait_for(|stopped| *stopped) => return Ok(()),
                }
            } else {
                tokio::time::timeout(HEAD_TIMEOUT, stream.read_buf(&mut buf))
                    .await
                    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "request head"))??
            };
            if read == 0 {
                return Ok(());
            }
        };
        let head_only = head.request.method() == Method::HEAD;
        let response = if http_serve::limits::headers_too_large(head.request.headers()) {
            let mut response = Response::new(crate::body::empty());
            *response.status_mut() = http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
            response
        } else {
            handler.handle(head.request, Peer::default()).await
        };
        write_response(&mut stream, response, head_only).await?;
        if head.close || *stop.borrow() {
            let _ = stream.shutdown().await;
            return Ok(());
        }
    }
}

/// Serves the rest of the connection with hyper, replaying what was already read.
async fn hand_over(
    stream: TcpStream,
    read: Bytes,
    handler: Listener,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
        let handler = handler.clone();
        async move { Ok::<_, std::convert::Infallible>(handler.handle(request, Peer::default()).await) }
    });
    let builder = http_serve::builder(http_serve::Bounds::default());
    let io = TokioIo::new(http_serve::Lingering::new(Rewind {
        read,
        inner: stream,
    }));
    let serving = builder.serve_connection(io, http_serve::Guarded(service));
    tokio::pin!(serving);
    tokio::select! {
        result = serving.as_mut() => return result.map_err(io::Error::other),
        _ = stop.wait_for(|stopped| *stopped) => {}
    }
    serving.as_mut().graceful_shutdown();
    serving.await.map_err(io::Error::other)
}

fn status_line(response: &Response<ResponseBody>) -> String {
    let status = response.status();
    format!(
        "HTTP/1.1 {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )
}

fn head_bytes(status_line: &str, headers: &HeaderMap, chunked: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(status_line.as_bytes());
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Writes `response`; a complete file goes out by `sendfile`.
async fn write_response(
    stream: &mut TcpStream,
    mut response: Response<ResponseBody>,
    head_only: bool,
) -> io::Result<()> {
    let line = status_line(&response);
    let no_body = head_only
        || response.status().is_informational()
        || response.status() == http::StatusCode::NO_CONTENT
        || response.status() == http::StatusCode::NOT_MODIFIED;
    let zero_copy = response.extensions_mut().remove::<ZeroCopy>();
    let (mut parts, body) = response.into_parts();
    if let (Some(file), false) = (zero_copy, no_body) {
        stream
            .write_all(&head_bytes(&line, &parts.headers, false))
            .await?;
        return send_file(stream, &file).await;
    }
    if no_body {
        return stream
            .write_all(&head_bytes(&line, &parts.headers, false))
            .await;
    }
    let known = parts.headers.contains_key(header::CONTENT_LENGTH);
    let exact = http_body::Body::size_hint(&body).exact();
    let chunked = match (known, exact) {
        (true, _) => false,
        (false, Some(len)) => {
            parts
                .headers
                .insert(header::CONTENT_LENGTH, http::HeaderValue::from(len));
            false
        }
        (false, None) => true,
    };
    let mut out = head_bytes(&line, &parts.headers, chunked);
    let mut body = body;
    while let Some(frame) = body.frame().await {
        // A body that fails mid-way (a fill that failed) ends the connection without the
        // terminating chunk, so the client sees a truncated response, never a complete one.
        let frame = frame?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if chunked {
            out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        }
        if data.len() >= 64 << 10 {
            // Large frames (file reads) go out as they are, not copied into `out`.
            stream.write_all(&out).await?;
            out.clear();
            stream.write_all(&data).await?;
        } else {
            out.extend_from_slice(&data);
        }
        if chunked {
            out.extend_from_slice(b"\r\n");
        }
        if out.len() >= 64 << 10 {
            stream.write_all(&out).await?;
            out.clear();
        }
    }
    if chunked {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    stream.write_all(&out).await
}

/// `sendfile(2)` of the range, waiting for the socket when it is full.
async fn send_file(stream: &TcpStream, file: &ZeroCopy) -> io::Result<()> {
    let mut offset = file.start;
    while offset < file.end {
        let count = (file.end - offset).min(SENDFILE_CHUNK) as usize;
        stream.writable().await?;
        let sent = stream.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(stream, &*file.file, Some(&mut offset), count)
                .map_err(io::Error::from)
        });
        match sent {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file ended before its length",
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A stream that first yields bytes already read from it.
struct Rewind {
    read: Bytes,
    inner: TcpStream,
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.read.is_empty() {
            let n = self.read.len().min(buf.remaining());
            let chunk = self.read.split_to(n);
            buf.put_slice(&chunk);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests;
