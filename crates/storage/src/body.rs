//! Response bodies: small buffers, and file ranges read with positional reads — from a
//! committed blob, or from a growing one while a fill writes it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::TryStreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::Frame;
use tokio::sync::watch;

use crate::fill::FillState;

/// The body of every response.
pub type ResponseBody = UnsyncBoxBody<Bytes, io::Error>;

/// Read size for file bodies: large reads keep the per-chunk overhead (a blocking-pool hop, a
/// frame) small against the copy itself.
const READ_CHUNK: usize = 1 << 20;

/// Marks a response whose body is exactly bytes `start..end` of a complete file: a plain-HTTP
/// listener may send those bytes with `sendfile(2)` instead of reading the body (a response
/// extension; the body itself stays a normal one for every other listener).
#[derive(Clone, Debug)]
pub struct ZeroCopy {
    /// The file.
    pub file: Arc<File>,
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

/// A body of known bytes.
pub fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An empty body.
pub fn empty() -> ResponseBody {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// Bytes `start..end` of a complete file.
pub fn file(file: Arc<File>, start: u64, end: u64) -> ResponseBody {
    range_body(file, start, Some(end), None)
}

/// Bytes from `start` up to `end` (or to the end of the fill when `None`) of a file a fill is
/// writing; waits for bytes not yet written and ends in an error if the fill fails.
pub fn growing(
    file: Arc<File>,
    start: u64,
    end: Option<u64>,
    progress: watch::Receiver<FillState>,
) -> ResponseBody {
    range_body(file, start, end, Some(progress))
}

struct Reader {
    file: Arc<File>,
    pos: u64,
    end: Option<u64>,
    progress: Option<watch::Receiver<FillState>>,
}

/// How far the file may be read now, or `Err` if the fill failed; `None` means wait.
fn readable(reader: &mut Reader) -> Result<Option<u64>, io::Error> {
    let Some(rx) = reader.progress.as_mut() else {
        return Ok(reader.end);
    };
    match &*rx.borrow_and_update() {
        FillState::Streaming { written, .. } => {
            Ok(Some(reader.end.map_or(*written, |end| end.min(*written)))
                .filter(|limit| *limit > reader.pos || reader.end == Some(reader.pos)))
        }
        FillState::Done { size, .. } => Ok(Some(reader.end.map_or(*size, |e| e.min(*size)))),
        FillState::Failed { reason, .. } => Err(io::Error::other(reason.clone())),
        FillState::Connecting | FillState::Unstorable => {
            Err(io::Error::other("fill ended without content"))
        }
    }
}

async fn next_chunk(mut reader: Reader) -> Option<(Result<Bytes, io::Error>, Reader)> {
    loop {
        let limit = match readable(&mut reader) {
            Ok(Some(limit)) => limit,
            Ok(None) => {
                let rx = reader.progress.as_mut()?;
                if rx.changed().await.is_err() {
                    // The fill task is gone without a final state: treat as failed.
                    if !matches!(*rx.borrow(), FillState::Done { .. }) {
                        reader.progress = None;
                        reader.end = Some(reader.pos);
                        return Some((Err(io::Error::other("fill aborted")), reader));
                    }
                }
                continue;
            }
            Err(e) => {
                reader.progress = None;
                reader.end = Some(reader.pos);
                return Some((Err(e), reader));
            }
        };
        if reader.pos >= limit {
            return None;
        }
        let len = (limit - reader.pos).min(READ_CHUNK as u64) as usize;
        let file = reader.file.clone();
        let pos = reader.pos;
        let read = tokio::task::spawn_blocking(move || {
            let mut buf = BytesMut::zeroed(len);
            file.read_exact_at(&mut buf, pos).map(|()| buf.freeze())
        })
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)));
        return match read {
            Ok(bytes) => {
                reader.pos += bytes.len() as u64;
                Some((Ok(bytes), reader))
            }
            Err(e) => {
                reader.end = Some(reader.pos);
                reader.progress = None;
                Some((Err(e), reader))
            }
        };
    }
}

fn range_body(
    file: Arc<File>,
    start: u64,
    end: Option<u64>,
    progress: Option<watch::Receiver<FillState>>,
) -> ResponseBody {
    let reader = Reader {
        file,
        pos: start,
        end,
        progress,
    };
    let stream = futures_util::stream::unfold(reader, next_chunk).map_ok(Frame::data);
    BodyExt::boxed_unsync(StreamBody::new(stream))
}
