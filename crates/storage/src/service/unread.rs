//! HTTP/1.1 manners for answers sent before the request body was read (a 401 to an upload
//! without credentials, a 404 to an unknown upload session, a refusal on the read listener).
//!
//! Left in the connection, the unread body would be parsed as the next request; closed without
//! a word, the connection breaks under a client that retries on it with credentials. So after
//! the stage has answered, whatever it left unread is read and discarded when it is small
//! ([`DISCARD_LIMIT`], within [`DISCARD_TIMEOUT`]) and the connection stays usable; a larger
//! body is not waited for and the answer says `Connection: close`.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, header};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};

use crate::body::ResponseBody;

/// The most bytes of an unread body discarded to keep the connection.
pub(super) const DISCARD_LIMIT: u64 = 1 << 20;

/// How long discarding may take.
pub(super) const DISCARD_TIMEOUT: Duration = Duration::from_secs(10);

/// What to do about a body the stage left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Manner {
    /// Nothing is left (read to its end, or there never was one).
    Nothing,
    /// Read and discard the rest, then keep the connection.
    Discard,
    /// Say `Connection: close` (too large to wait for).
    Close,
}

/// Decides from what the request announced: `Content-Length`, or chunked (unknown length).
pub(super) fn manner(ended: bool, announced: Option<u64>, chunked: bool) -> Manner {
    if ended {
        return Manner::Nothing;
    }
    match announced {
        Some(0) if !chunked => Manner::Nothing,
        Some(len) if len <= DISCARD_LIMIT => Manner::Discard,
        None if !chunked => Manner::Nothing,
        _ => Manner::Close,
    }
}

/// The announced length and whether the body is chunked.
pub(super) fn announced(headers: &HeaderMap) -> (Option<u64>, bool) {
    let len = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let chunked = headers
        .get(header::TRANSFER_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    (len, chunked)
}

struct State<B> {
    body: Option<B>,
    ended: bool,
}

/// A request body the stage reads while the listener keeps hold of what it leaves.
pub(super) struct Kept<B>(Arc<Mutex<State<B>>>);

impl<B> Kept<B> {
    /// Wraps `body`; the second value takes back what is left once the stage answered.
    pub(super) fn new(body: B) -> (Self, Leftover<B>) {
        let state = Arc::new(Mutex::new(State {
            body: Some(body),
            ended: false,
        }));
        (Self(state.clone()), Leftover(state))
    }
}

impl<B> Body for Kept<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(body) = state.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            state.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        let state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        state.ended || state.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        state
            .body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

/// The listener's hold on a request body.
pub(super) struct Leftover<B>(Arc<Mutex<State<B>>>);

impl<B> Leftover<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    /// Applies the manners to `response` for a request that announced `announced`.
    pub(super) async fn settle(
        self,
        announced: (Option<u64>, bool),
        mut response: Response<ResponseBody>,
    ) -> Response<ResponseBody> {
        let (ended, body) = {
            let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let ended = state.ended || state.body.as_ref().is_none_or(Body::is_end_stream);
            (ended, state.body.take())
        };
        let mut manner = manner(ended, announced.0, announced.1);
        if manner == Manner::Discard
            && let Some(body) = body
            && !discard(body).await
        {
            manner = Manner::Close;
        }
        if manner == Manner::Close {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

/// Reads `body` to its end within the limits; whether it ended.
async fn discard<B>(mut body: B) -> bool
where
    B: Body<Data = Bytes> + Unpin,
{
    let reading = async {
        let mut read = 0u64;
        loop {
            match body.frame().await {
                None => return true,
                Some(Err(_)) => return false,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        read += data.len() as u64;
                        if read > DISCARD_LIMIT {
                            return false;
                        }
                    }
                }
            }
        }
    };
    tokio::time::timeout(DISCARD_TIMEOUT, reading)
        .await
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_left_decides_the_manner() {
        // (ended, Content-Length, chunked) → manner
        let cases = [
            (true, Some(5 << 20), false, Manner::Nothing),
            (true, None, true, Manner::Nothing),
            (false, None, false, Manner::Nothing),
            (false, Some(0), false, Manner::Nothing),
            (false, Some(1), false, Manner::Discard),
            (false, Some(DISCARD_LIMIT), false, Manner::Discard),
            (false, Some(DISCARD_LIMIT + 1), false, Manner::Close),
            (false, None, true, Manner::Close),
        ];
        for (ended, len, chunked, expected) in cases {
            assert_eq!(
                manner(ended, len, chunked),
                expected,
                "{ended} {len:?} {chunked}"
            );
        }
    }
}
