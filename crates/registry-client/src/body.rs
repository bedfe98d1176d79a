//! Streaming response bodies: a stall watchdog, an optional overall deadline, `Content-Length`
//! accounting, and digest verification that never lets a wrong or short blob look complete.
//!
//! # The guarantee
//!
//! A consumer that reads a [`Body`] until it yields `None` has received **exactly** the bytes the
//! upstream announced, and — for a verified body — bytes that hash to the requested digest.
//! Every other ending is an `Err` item (after which the stream yields `None`):
//!
//! - the connection breaks: [`Error::BodyInterrupted`];
//! - it ends cleanly but short of `Content-Length` or the expected size: [`Error::Truncated`];
//! - more bytes than expected: [`Error::TooLong`] (the excess is never yielded);
//! - no byte for the stall window: [`Error::Stalled`]; the total deadline: [`Error::Timeout`];
//! - fewer bytes than the minimum throughput asks in a window: [`Error::TooSlow`];
//! - a verified body whose content hashes differently: [`Error::DigestMismatch`].
//!
//! A verified body also **holds back its last chunk** until the digest is checked, and drops it
//! on a mismatch. So even a consumer that relays chunks as they come to an HTTP client with the
//! upstream's `Content-Length` can never deliver a complete-looking wrong blob: the client sees a
//! short body and the relay an error. (The only exception is a zero-length body, which has no
//! chunk to withhold; its mismatch is still the final `Err` item.)

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, Sleep};

use crate::error::{BoxError, Error, TimeoutPhase};

/// A network body as a transport delivers it. A peer that closes before the announced length
/// is told apart from other breaks by an `io::ErrorKind::UnexpectedEof` in the error's chain.
pub type RawStream = Pin<Box<dyn Stream<Item = Result<Bytes, BoxError>> + Send>>;

/// A response body: a stream of `Result<Bytes, Error>` that ends with `None` only when complete.
///
/// See the [module documentation](self) for what "complete" guarantees. Use it directly as a
/// [`Stream`] (e.g. `axum::body::Body::from_stream(body)`), or [`collect`](Self::collect) small
/// bodies.
pub struct Body {
    inner: Inner,
}

enum Inner {
    Empty,
    Full(Option<Bytes>),
    Watched(Box<Watched>),
    Verified(Box<Verified>),
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.inner {
            Inner::Empty => "empty",
            Inner::Full(_) => "bytes",
            Inner::Watched(_) => "streaming",
            Inner::Verified(_) => "streaming, verified",
        };
        f.debug_struct("Body").field("kind", &kind).finish()
    }
}

struct Watched {
    stream: RawStream,
    received: u64,
    expected_len: Option<u64>,
    stall: Duration,
    stall_timer: Pin<Box<Sleep>>,
    /// When the consumer started waiting for the chunk being read, if it is waiting.
    waiting_since: Option<Instant>,
    deadline: Option<(Pin<Box<Sleep>>, Duration, String)>,
    /// The minimum-throughput watchdog, when set.
    floor: Option<Floor>,
    done: bool,
}

/// The minimum-throughput window in progress: time spent waiting for data and the bytes that
/// came in it. Checked when a chunk arrives; the stall window bounds the wait for one.
struct Floor {
    minimum: crate::MinThroughput,
    waited: Duration,
    bytes: u64,
}

struct Verified {
    inner: Body,
    verifier: Option<oci::Verifier>,
    expected_size: Option<u64>,
    received: u64,
    held: Option<Bytes>,
    done: bool,
}

impl Body {
    /// An empty body (HEAD answers, 204).
    pub fn empty() -> Self {
        Self {
            inner: Inner::Empty,
        }
    }

    /// A body of known bytes.
    pub fn from_bytes(bytes: impl Into<Bytes>) -> Self {
        Self {
            inner: Inner::Full(Some(bytes.into())),
        }
    }

    /// Watches a network stream: `expected_len` from `Content-Length`, the stall window, and an
    /// optional deadline (instant, length for the message, URL for the message).
    pub fn watched(
        stream: RawStream,
        expected_len: Option<u64>,
        stall: Duration,
        deadline: Option<(Instant, Duration, String)>,
    ) -> Self {
        Self {
            inner: Inner::Watched(Box::new(Watched {
                stream,
                received: 0,
                expected_len,
                stall,
                stall_timer: Box::pin(tokio::time::sleep(stall)),
                waiting_since: None,
                deadline: deadline
                    .map(|(at, total, url)| (Box::pin(tokio::time::sleep_until(at)), total, url)),
                floor: None,
                done: false,
            })),
        }
    }

    /// Adds the minimum-throughput watchdog to a [`watched`](Self::watched) body (other bodies
    /// are returned unchanged): fewer than `minimum.bytes` in a `minimum.window` of waiting for
    /// data ends it with [`Error::TooSlow`].
    pub fn with_min_throughput(mut self, minimum: Option<crate::MinThroughput>) -> Self {
        if let (Inner::Watched(watched), Some(minimum)) = (&mut self.inner, minimum) {
            watched.floor = Some(Floor {
                minimum,
                waited: Duration::ZERO,
                bytes: 0,
            });
        }
        self
    }

    /// Wraps this body so that it ends with `None` only if its content hashes to `digest` (and
    /// has `expected_size` bytes, when given); see the [module documentation](self).
    pub fn verify(self, digest: oci::Digest, expected_size: Option<u64>) -> Self {
        Self {
            inner: Inner::Verified(Box::new(Verified {
                inner: self,
                verifier: Some(digest.verifier()),
                expected_size,
                received: 0,
                held: None,
                done: false,
            })),
        }
    }

    /// Reads the whole body, refusing more than `limit` bytes ([`Error::TooLong`]).
    pub async fn collect(mut self, limit: u64) -> Result<Bytes, Error> {
        let mut out = BytesMut::new();
        while let Some(chunk) = self.next().await {
            let chunk = chunk?;
            if (out.len() + chunk.len()) as u64 > limit {
                return Err(Error::TooLong { expected: limit });
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out.freeze())
    }
}

impl Stream for Body {
    type Item = Result<Bytes, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match &mut self.inner {
            Inner::Empty => Poll::Ready(None),
            Inner::Full(bytes) => Poll::Ready(bytes.take().filter(|b| !b.is_empty()).map(Ok)),
            Inner::Watched(w) => w.poll(cx),
            Inner::Verified(v) => v.poll(cx),
        }
    }
}

impl Watched {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some((deadline, total, url)) = &mut self.deadline
            && deadline.as_mut().poll(cx).is_ready()
        {
            self.done = true;
            return Poll::Ready(Some(Err(Error::Timeout {
                phase: TimeoutPhase::Total,
                after: *total,
                url: std::mem::take(url),
            })));
        }
        // The stall window starts when the consumer asks for data, so back-pressure from a
        // slow consumer is never mistaken for a stalled upstream. Only the start is recorded
        // per chunk; the timer is re-armed when it fires early, not on every chunk (resetting a
        // timer per chunk costs more than the relay itself at gigabytes per second).
        let since = *self.waiting_since.get_or_insert_with(Instant::now);
        match self.stream.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                self.waiting_since = None;
                self.received += chunk.len() as u64;
                if let Some(expected) = self.expected_len
                    && self.received > expected
                {
                    self.done = true;
                    return Poll::Ready(Some(Err(Error::TooLong { expected })));
                }
                if let Some(floor) = &mut self.floor {
                    floor.waited += since.elapsed();
                    floor.bytes += chunk.len() as u64;
                    if floor.waited >= floor.minimum.window {
                        if floor.bytes < floor.minimum.bytes {
                            self.done = true;
                            return Poll::Ready(Some(Err(Error::TooSlow {
                                received_in_window: floor.bytes,
                                minimum: floor.minimum.bytes,
                                window: floor.minimum.window,
                                received: self.received,
                            })));
                        }
                        floor.waited = Duration::ZERO;
                        floor.bytes = 0;
                    }
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.done = true;
                if let Some(expected) = self.expected_len
                    && self.received < expected
                    && is_early_eof(&e)
                {
                    // A clean close before `Content-Length`: hyper reports it as an error.
                    return Poll::Ready(Some(Err(Error::Truncated {
                        received: self.received,
                        expected,
                    })));
                }
                Poll::Ready(Some(Err(Error::BodyInterrupted {
                    received: self.received,
                    source: e,
                })))
            }
            Poll::Ready(None) => {
                self.done = true;
                match self.expected_len {
                    Some(expected) if self.received < expected => {
                        Poll::Ready(Some(Err(Error::Truncated {
                            received: self.received,
                            expected,
                        })))
                    }
                    _ => Poll::Ready(None),
                }
            }
            Poll::Pending => {
                let due = since + self.stall;
                while self.stall_timer.as_mut().poll(cx).is_ready() {
                    if Instant::now() >= due {
                        self.done = true;
                        return Poll::Ready(Some(Err(Error::Stalled {
                            after: self.stall,
                            received: self.received,
                        })));
                    }
                    // Fired for an earlier wait: arm it for this one.
                    self.stall_timer.as_mut().reset(due);
                }
                Poll::Pending
            }
        }
    }
}

/// Whether a body error is the peer closing cleanly before the announced length (as opposed to
/// a reset or a protocol error).
fn is_early_eof(e: &BoxError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::UnexpectedEof
        {
            return true;
        }
        source = s.source();
    }
    false
}

impl Verified {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Error>>> {
        loop {
            if self.done {
                // After a successful end the held chunk goes out once, then `None`.
                return Poll::Ready(self.held.take().map(Ok));
            }
            match Pin::new(&mut self.inner).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) => {
                    if chunk.is_empty() {
                        continue;
                    }
                    self.received += chunk.len() as u64;
                    if let Some(expected) = self.expected_size
                        && self.received > expected
                    {
                        self.fail();
                        return Poll::Ready(Some(Err(Error::TooLong { expected })));
                    }
                    if let Some(v) = &mut self.verifier {
                        v.update(&chunk);
                    }
                    if let Some(previous) = self.held.replace(chunk) {
                        return Poll::Ready(Some(Ok(previous)));
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    self.fail();
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(None) => {
                    if let Some(expected) = self.expected_size
                        && self.received < expected
                    {
                        self.fail();
                        return Poll::Ready(Some(Err(Error::Truncated {
                            received: self.received,
                            expected,
                        })));
                    }
                    let verdict = self.verifier.take().map(oci::Verifier::finish);
                    self.done = true;
                    if let Some(Err(mismatch)) = verdict {
                        self.held = None;
                        return Poll::Ready(Some(Err(Error::from(mismatch))));
                    }
                    // Loop: releases the held chunk, then `None`.
                }
            }
        }
    }

    fn fail(&mut self) {
        self.done = true;
        self.held = None;
        self.verifier = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static [u8]]) -> RawStream {
        let items: Vec<Result<Bytes, BoxError>> =
            parts.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        Box::pin(futures_util::stream::iter(items))
    }

    async fn drain(mut body: Body) -> (Vec<u8>, Option<Error>) {
        let mut data = Vec::new();
        while let Some(item) = body.next().await {
            match item {
                Ok(chunk) => data.extend_from_slice(&chunk),
                Err(e) => {
                    assert!(body.next().await.is_none(), "nothing after an error");
                    return (data, Some(e));
                }
            }
        }
        (data, None)
    }

    fn watched(parts: &[&'static [u8]], len: Option<u64>) -> Body {
        Body::watched(chunks(parts), len, Duration::from_secs(5), None)
    }

    #[tokio::test]
    async fn complete_body_passes() {
        let digest = oci::Digest::sha256(b"hello world");
        let (data, err) =
            drain(watched(&[b"hello ", b"world"], Some(11)).verify(digest, Some(11))).await;
        assert_eq!(data, b"hello world");
        assert!(err.is_none());
    }

    #[tokio::test]
    async fn mismatch_withholds_the_last_chunk() {
        let digest = oci::Digest::sha256(b"hello world");
        let (data, err) =
            drain(watched(&[b"hello ", b"WORLD"], Some(11)).verify(digest, None)).await;
        assert_eq!(data, b"hello ", "the final chunk is never handed on");
        assert!(matches!(err, Some(Error::DigestMismatch(_))), "{err:?}");
    }

    #[tokio::test]
    async fn short_body_is_an_error_not_an_end() {
        let (data, err) = drain(watched(&[b"hello"], Some(11))).await;
        assert_eq!(data, b"hello");
        assert!(
            matches!(
                err,
                Some(Error::Truncated {
                    received: 5,
                    expected: 11
                })
            ),
            "{err:?}"
        );
        let digest = oci::Digest::sha256(b"hello world");
        let (data, err) = drain(watched(&[b"hello"], None).verify(digest, Some(11))).await;
        assert!(data.is_empty(), "held back");
        assert!(matches!(err, Some(Error::Truncated { .. })), "{err:?}");
    }

    #[tokio::test]
    async fn excess_bytes_are_refused() {
        let (data, err) = drain(watched(&[b"hello", b" world"], Some(5))).await;
        assert_eq!(data, b"hello");
        assert!(
            matches!(err, Some(Error::TooLong { expected: 5 })),
            "{err:?}"
        );
        let digest = oci::Digest::sha256(b"hello");
        let (_, err) = drain(watched(&[b"hello", b"!"], None).verify(digest, Some(5))).await;
        assert!(
            matches!(err, Some(Error::TooLong { expected: 5 })),
            "{err:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stall_watchdog_fires_without_data() {
        let stream: RawStream = Box::pin(
            futures_util::stream::iter(vec![Ok(Bytes::from_static(b"abc"))])
                .chain(futures_util::stream::pending()),
        );
        let started = Instant::now();
        let body = Body::watched(stream, Some(10), Duration::from_secs(3), None);
        let (data, err) = drain(body).await;
        assert_eq!(data, b"abc");
        assert!(
            matches!(err, Some(Error::Stalled { received: 3, .. })),
            "{err:?}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    /// One byte every `every`, `n` bytes in all.
    fn trickle(n: usize, every: Duration) -> RawStream {
        Box::pin(futures_util::stream::unfold(0usize, move |i| async move {
            if i == n {
                return None;
            }
            tokio::time::sleep(every).await;
            Some((Ok(Bytes::from_static(b"x")), i + 1))
        }))
    }

    #[tokio::test(start_paused = true)]
    async fn a_crawling_body_is_ended_by_the_throughput_floor() {
        let started = Instant::now();
        let floor = crate::MinThroughput {
            bytes: 100,
            window: Duration::from_secs(10),
        };
        // 1 byte per second never stalls (stall window 3 s) but stays far below the floor.
        let body = Body::watched(
            trickle(1000, Duration::from_secs(1)),
            Some(1000),
            Duration::from_secs(3),
            None,
        )
        .with_min_throughput(Some(floor));
        let (data, err) = drain(body).await;
        assert_eq!(
            data.len(),
            9,
            "the chunk that closed the window is not handed on"
        );
        assert!(
            matches!(
                err,
                Some(Error::TooSlow {
                    received_in_window: 10,
                    minimum: 100,
                    received: 10,
                    ..
                })
            ),
            "{err:?}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert!(err.unwrap().retry_elsewhere());
    }

    #[tokio::test(start_paused = true)]
    async fn the_floor_spares_a_fast_body_and_a_slow_consumer() {
        let floor = crate::MinThroughput {
            bytes: 5,
            window: Duration::from_secs(10),
        };
        // 10 bytes per 10 s: above the floor of 5 in every window.
        let body = Body::watched(
            trickle(40, Duration::from_secs(1)),
            Some(40),
            Duration::from_secs(3),
            None,
        )
        .with_min_throughput(Some(floor));
        let (data, err) = drain(body).await;
        assert_eq!((data.len(), err.map(|e| e.to_string())), (40, None));
        // A consumer that takes a minute per byte: its own pace never counts against the upstream.
        let mut body = Body::watched(
            chunks(&[b"a", b"b", b"c"]),
            Some(3),
            Duration::from_secs(1),
            None,
        )
        .with_min_throughput(Some(floor));
        let mut got = Vec::new();
        while let Some(chunk) = body.next().await {
            got.extend_from_slice(&chunk.unwrap());
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        assert_eq!(got, b"abc");
    }

    #[tokio::test(start_paused = true)]
    async fn slow_consumer_is_not_a_stall() {
        let stream: RawStream = chunks(&[b"a", b"b", b"c"]);
        let mut body = Body::watched(stream, Some(3), Duration::from_secs(1), None);
        let mut got = Vec::new();
        while let Some(chunk) = body.next().await {
            got.extend_from_slice(&chunk.unwrap());
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        assert_eq!(got, b"abc");
    }

    #[tokio::test(start_paused = true)]
    async fn total_deadline_ends_the_body() {
        let stream: RawStream = Box::pin(futures_util::stream::unfold(0u8, |n| async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            Some((Ok(Bytes::from(vec![n])), n.wrapping_add(1)))
        }));
        let deadline = Instant::now() + Duration::from_secs(2);
        let body = Body::watched(
            stream,
            None,
            Duration::from_secs(1),
            Some((deadline, Duration::from_secs(2), "http://u/".into())),
        );
        let (data, err) = drain(body).await;
        assert!(data.len() >= 3, "{}", data.len());
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
    }

    #[tokio::test]
    async fn empty_blob_is_verified_too() {
        let empty = oci::Digest::sha256(b"");
        let (data, err) = drain(Body::empty().verify(empty, Some(0))).await;
        assert!(data.is_empty() && err.is_none());
        let (_, err) = drain(Body::empty().verify(oci::Digest::sha256(b"x"), None)).await;
        assert!(matches!(err, Some(Error::DigestMismatch(_))));
    }

    #[tokio::test]
    async fn collect_limits() {
        assert_eq!(
            Body::from_bytes("abc").collect(3).await.unwrap(),
            Bytes::from_static(b"abc")
        );
        assert!(matches!(
            Body::from_bytes("abcd").collect(3).await,
            Err(Error::TooLong { expected: 3 })
        ));
    }
}
