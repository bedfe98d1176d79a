//! Oversized request headers, answered the same way on HTTP/1.1 and HTTP/2: `431 Request Header
//! Fields Too Large`, every time.
//!
//! - A header section larger than [`MAX_HEADER_BYTES`] that still reaches a service gets 431 from
//!   [`Guarded`] (HTTP/1.1 and HTTP/2 alike), and the connection stays usable.
//! - A request head larger than hyper's HTTP/1 buffer gets hyper's own 431, after which hyper
//!   closes the connection. [`Lingering`] then reads what the client still sends before the
//!   socket closes, so the kernel does not answer the unread bytes with a reset that would
//!   destroy the 431 on its way to the client.
//! - HTTP/2 decodes header blocks up to [`H2_HEADER_LIST_CEILING`] and passes them on, so the 431
//!   comes from [`Guarded`] as an ordinary response. Above the ceiling the h2 library answers
//!   431 itself and resets the stream with `REFUSED_STREAM`, which clients may retry.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{Either, Empty};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The largest header section (names, values, `": "` and line ends, as HTTP/1.1 writes them)
/// a request may carry: 16 KiB, hyper's HTTP/2 default and the HTTP/1 buffer the platform sets.
pub const MAX_HEADER_BYTES: usize = 16 << 10;

/// What HTTP/2 decodes of one header block before the h2 library refuses the stream itself.
pub const H2_HEADER_LIST_CEILING: u32 = 256 << 10;

/// How long a closing connection keeps reading what the client still sends.
const LINGER_TIME: Duration = Duration::from_secs(1);
/// How much a closing connection reads at most before it closes anyway.
const LINGER_BYTES: usize = 1 << 20;

/// The size of `headers` as an HTTP/1.1 header section: `name: value\r\n` per field.
pub fn header_bytes(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum()
}

/// Whether `headers` are more than a request may carry ([`MAX_HEADER_BYTES`]).
pub fn headers_too_large(headers: &HeaderMap) -> bool {
    header_bytes(headers) > MAX_HEADER_BYTES
}

/// A service that answers requests with oversized headers with 431 and passes the rest on.
#[derive(Clone, Debug)]
pub struct Guarded<S>(pub S);

impl<S, B, T> hyper::service::Service<Request<T>> for Guarded<S>
where
    S: hyper::service::Service<Request<T>, Response = Response<B>, Error = Infallible>,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    type Response = Response<Either<B, Empty<B::Data>>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: Request<T>) -> Self::Future {
        if headers_too_large(request.headers()) {
            let mut response = Response::new(Either::Right(Empty::new()));
            *response.status_mut() = StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
            return Box::pin(std::future::ready(Ok(response)));
        }
        let answer = self.0.call(request);
        Box::pin(async move { Ok(answer.await?.map(Either::Left)) })
    }
}

/// A connection that, when shut down, sends its end of the stream and then reads (up to 1 MiB,
/// for up to 1 s) until the client closes its side, so that a response written just before the
/// close is not destroyed by a reset.
#[derive(Debug)]
pub struct Lingering<T> {
    inner: T,
    drain: Option<Drain>,
}

#[derive(Debug)]
struct Drain {
    deadline: Pin<Box<tokio::time::Sleep>>,
    left: usize,
    done: bool,
}

impl<T> Lingering<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        Self { inner, drain: None }
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Lingering<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lingering<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
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

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.drain.is_none() {
            ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
            this.drain = Some(Drain {
                deadline: Box::pin(tokio::time::sleep(LINGER_TIME)),
                left: LINGER_BYTES,
                done: false,
            });
        }
        let drain = this.drain.as_mut().expect("set above");
        let mut scratch = [0u8; 8192];
        while !drain.done {
            if drain.left == 0 || drain.deadline.as_mut().poll(cx).is_ready() {
                drain.done = true;
                break;
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    drain.left = drain.left.saturating_sub(buf.filled().len());
                }
                // The client closed its side, or the connection failed: nothing more to wait for.
                Poll::Ready(_) => drain.done = true,
            }
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes_count_the_section_as_http1_writes_it() {
        type Row = (&'static [(&'static str, usize)], usize, bool);
        let table: &[Row] = &[
            (&[], 0, false),
            (&[("a", 1)], 6, false),
            (&[("host", 9), ("accept", 3)], 4 + 9 + 4 + 6 + 3 + 4, false),
            (&[("x", MAX_HEADER_BYTES - 5)], MAX_HEADER_BYTES, false),
            (&[("x", MAX_HEADER_BYTES - 4)], MAX_HEADER_BYTES + 1, true),
            (&[("x", 64 << 10)], (64 << 10) + 5, true),
        ];
        for (fields, bytes, too_large) in table {
            let mut headers = HeaderMap::new();
            for (name, len) in *fields {
                headers.append(
                    http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    http::HeaderValue::from_str(&"v".repeat(*len)).unwrap(),
                );
            }
            assert_eq!(header_bytes(&headers), *bytes, "{fields:?}");
            assert_eq!(headers_too_large(&headers), *too_large, "{fields:?}");
        }
    }
}
