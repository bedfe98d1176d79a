//! Response bodies: small buffers, and file ranges read with positional reads — from a
//! committed blob, or from a growing one while a fill writes it.

use std::fs::File;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::TryStreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::Frame;
use tokio::sync::watch;

use crate::fill::FillState;

/// The body of every response.
pub type ResponseBody = UnsyncBoxBody<Bytes, io::Error>;

/// Read size for what the page cache holds, read on the serving task's own thread
/// ([`read_cached`]): two TLS records, still in the core's cache when rustls copies and encrypts
/// them. A read is what a client slow to take it pins in memory, on top of hyper's and rustls'
/// queues ([`http_serve::Bounds::STREAMING`]): 256 KiB reads, queued by an unbounded hyper, had
/// cost 650 KiB per stalled TLS stream, 32 KiB reads bounded cost 84, for the same CPU per GiB
/// served (16 KiB reads, one per record, cost a third more; `serve` and `agent_pull` benches,
/// bench/README.md).
const CACHED_READ: usize = 32 << 10;

/// Read size for what has to come from the disk, on the blocking pool: large, so that the hop
/// to the pool is paid once per 256 KiB, and the kernel's readahead makes the reads after it
/// cached ones. (Every read on the pool, 1 MiB each, had cost a fifth of the CPU per GiB served.)
const DISK_READ: usize = 256 << 10;

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
    buffers: Buffers,
}

/// How far a reader at `pos` (stopping at `end`, if given) may read in `state`: `Ok(Some(limit))`
/// with `limit > pos`, or `limit == pos` when nothing is left; `Ok(None)` to wait for the writer;
/// `Err` when the fill failed.
fn limit(state: &FillState, pos: u64, end: Option<u64>) -> Result<Option<u64>, io::Error> {
    match state {
        FillState::Streaming { written, .. } => {
            let limit = end.map_or(*written, |end| end.min(*written));
            Ok(Some(limit).filter(|limit| *limit > pos || end == Some(pos)))
        }
        FillState::Done { size, .. } => Ok(Some(end.map_or(*size, |e| e.min(*size)))),
        FillState::Failed { reason, .. } => Err(io::Error::other(reason.clone())),
        FillState::Connecting | FillState::Unstorable => {
            Err(io::Error::other("fill ended without content"))
        }
    }
}

/// Waits until the fill of a growing file has bytes past `pos` for a reader stopping at `end`
/// (if given), and returns how far it may read (`pos` itself once nothing is left). The writer
/// wakes the reader with every batch it reports written; nothing polls.
async fn readable(
    progress: &mut watch::Receiver<FillState>,
    pos: u64,
    end: Option<u64>,
) -> Result<u64, io::Error> {
    loop {
        if let Some(limit) = limit(&progress.borrow_and_update(), pos, end)? {
            return Ok(limit);
        }
        if progress.changed().await.is_err() {
            // The fill task is gone: only a final state it left still counts.
            return match limit(&progress.borrow(), pos, end) {
                Ok(Some(limit)) => Ok(limit),
                _ => Err(io::Error::other("fill aborted")),
            };
        }
    }
}

/// Reads `len` bytes at `pos` into a new buffer (not zeroed first: the read fills it).
fn read_at(file: &File, pos: u64, len: usize) -> Result<Bytes, io::Error> {
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        let at = pos + buf.len() as u64;
        let read = rustix::io::pread(file, rustix::buffer::spare_capacity(&mut buf), at)
            .map_err(io::Error::from)?;
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file ended before its length",
            ));
        }
    }
    Ok(Bytes::from(buf))
}

/// Read buffers of one body, taken back once hyper has sent their bytes: safe code must
/// initialise what `preadv2` reads into, and a reused buffer was zeroed only once.
#[derive(Clone, Default)]
struct Buffers(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

/// A buffer lent out as [`Bytes`]: back to its [`Buffers`] when the last of them is dropped.
struct Lent {
    buf: Vec<u8>,
    home: Buffers,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.home.give_back(std::mem::take(&mut self.buf));
    }
}

impl Buffers {
    /// A buffer of `len` bytes, a returned one if there is.
    fn take(&self, len: usize) -> Vec<u8> {
        let mut buf = self
            .0
            .lock()
            .ok()
            .and_then(|mut free| free.pop())
            .unwrap_or_default();
        buf.resize(len, 0);
        buf
    }

    /// Keeps `buf` for the next [`take`](Self::take).
    fn give_back(&self, buf: Vec<u8>) {
        if let Ok(mut free) = self.0.lock() {
            free.push(buf);
        }
    }

    /// The first `len` bytes of `buf`, which comes back here once they are dropped.
    fn lend(&self, buf: Vec<u8>, len: usize) -> Bytes {
        let home = self.clone();
        Bytes::from_owner(Lent { buf, home }).slice(..len)
    }
}

/// Reads up to `len` bytes at `pos` if the page cache holds the first of them, without waiting
/// for the disk (`preadv2` with `RWF_NOWAIT`; a short read when only a part is cached), into a
/// buffer of `buffers`. `Ok(None)` when nothing at `pos` is cached or the file ends there; `Err`
/// when the file system cannot read this way.
fn read_cached(
    file: &File,
    pos: u64,
    len: usize,
    buffers: &Buffers,
) -> Result<Option<Bytes>, rustix::io::Errno> {
    let mut buf = buffers.take(len);
    let read = rustix::io::preadv2(
        file,
        &mut [io::IoSliceMut::new(&mut buf)],
        pos,
        rustix::io::ReadWriteFlags::NOWAIT,
    );
    match read {
        Ok(0) | Err(rustix::io::Errno::AGAIN) => {
            buffers.give_back(buf);
            Ok(None)
        }
        Ok(read) => Ok(Some(buffers.lend(buf, read))),
        Err(e) => Err(e),
    }
}

/// Whether to try [`read_cached`] at all: cleared for the process once the file system refuses
/// `RWF_NOWAIT` (the store is one directory, on one file system).
static INLINE_READS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// The next bytes of `reader`'s file, at most `left`: up to [`CACHED_READ`] of them read inline
/// when the page cache holds them, up to [`DISK_READ`] on the blocking pool otherwise.
async fn read_next(reader: &mut Reader, left: u64) -> Result<Bytes, io::Error> {
    use std::sync::atomic::Ordering::Relaxed;
    let up_to = |size: usize| left.min(size as u64) as usize;
    if INLINE_READS.load(Relaxed) {
        match read_cached(
            &reader.file,
            reader.pos,
            up_to(CACHED_READ),
            &reader.buffers,
        ) {
            Ok(Some(bytes)) => return Ok(bytes),
            Ok(None) => {}
            Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::INVAL) => {
                tracing::info!(
                    "the file system cannot read without blocking; reads go to the blocking pool"
                );
                INLINE_READS.store(false, Relaxed);
            }
            // Reported by the blocking read, if it recurs.
            Err(_) => {}
        }
    }
    let file = reader.file.clone();
    let pos = reader.pos;
    let len = up_to(DISK_READ);
    tokio::task::spawn_blocking(move || read_at(&file, pos, len))
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)))
}

async fn next_chunk(mut reader: Reader) -> Option<(Result<Bytes, io::Error>, Reader)> {
    let limit = match reader.progress.as_mut() {
        None => reader.end.unwrap_or(reader.pos),
        Some(progress) => match readable(progress, reader.pos, reader.end).await {
            Ok(limit) => limit,
            Err(e) => {
                reader.progress = None;
                reader.end = Some(reader.pos);
                return Some((Err(e), reader));
            }
        },
    };
    if reader.pos >= limit {
        return None;
    }
    let left = limit - reader.pos;
    match read_next(&mut reader, left).await {
        Ok(bytes) => {
            reader.pos += bytes.len() as u64;
            Some((Ok(bytes), reader))
        }
        Err(e) => {
            reader.end = Some(reader.pos);
            reader.progress = None;
            Some((Err(e), reader))
        }
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
        buffers: Buffers::default(),
    };
    let stream = futures_util::stream::unfold(reader, next_chunk).map_ok(Frame::data);
    BodyExt::boxed_unsync(StreamBody::new(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streaming(written: u64) -> FillState {
        FillState::Streaming {
            file: Arc::new(tempfile::tempfile().expect("file")),
            total: Some(100),
            written,
        }
    }

    #[test]
    fn how_far_a_reader_may_read() {
        let done = FillState::Done {
            file: Arc::new(tempfile::tempfile().expect("file")),
            size: 100,
        };
        let failed = FillState::Failed {
            reason: "digest mismatch".into(),
            status: 502,
        };
        // (state, pos, end) → limit, None to wait, Err for an error
        type Row<'a> = (&'a FillState, u64, Option<u64>, Result<Option<u64>, ()>);
        let table: [Row<'_>; 11] = [
            (&streaming(0), 0, None, Ok(None)),
            (&streaming(40), 0, None, Ok(Some(40))),
            (&streaming(40), 40, None, Ok(None)),
            (&streaming(40), 10, Some(30), Ok(Some(30))),
            (&streaming(40), 30, Some(30), Ok(Some(30))),
            (&streaming(40), 40, Some(60), Ok(None)),
            (&done, 40, None, Ok(Some(100))),
            (&done, 100, None, Ok(Some(100))),
            (&done, 0, Some(10), Ok(Some(10))),
            (&failed, 0, None, Err(())),
            (&FillState::Unstorable, 0, None, Err(())),
        ];
        for (state, pos, end, want) in table {
            let got = limit(state, pos, end).map_err(|_| ());
            assert_eq!(got, want, "{state:?} at {pos}, end {end:?}");
        }
    }

    /// Drops `file`'s pages from `from` on out of the page cache; false where the file system
    /// keeps its files only there (tmpfs).
    fn evict_from(file: &File, from: u64) -> bool {
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        rustix::fs::fadvise(file, from, None, rustix::fs::Advice::DontNeed).expect("fadvise");
        rustix::fs::fstatfs(file).expect("statfs").f_type as i64 != TMPFS_MAGIC
    }

    #[tokio::test]
    async fn file_bodies_read_the_cached_part_inline_and_the_rest_from_the_disk() {
        use std::io::Write;
        let len = 3 * DISK_READ + 1000;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4093) as u8).collect();
        let mut file = tempfile::tempfile().expect("file");
        file.write_all(&data).expect("write");
        file.sync_all().expect("sync");
        let file = Arc::new(file);
        let half = 2 * DISK_READ;

        let cached = read_cached(&file, 5, 100, &Buffers::default())
            .expect("preadv2")
            .expect("cached");
        assert_eq!(cached[..], data[5..105]);
        assert_eq!(
            read_cached(&file, len as u64, 100, &Buffers::default()),
            Ok(None),
            "at the end"
        );
        if evict_from(&file, half as u64) {
            assert_eq!(
                read_cached(&file, half as u64, 100, &Buffers::default()),
                Ok(None),
                "evicted"
            );
            let short = read_cached(&file, 0, len, &Buffers::default())
                .expect("preadv2")
                .expect("cached");
            assert!(short.len() >= half, "{} of the cached {half}", short.len());
            assert_eq!(short[..], data[..short.len()]);
        }

        let ranges = [(0, len), (half - 10, half + 10), (7, len - 3), (len, len)];
        for (start, end) in ranges {
            evict_from(&file, half as u64);
            let body = super::file(file.clone(), start as u64, end as u64);
            let got = body.collect().await.expect("body").to_bytes();
            assert!(got[..] == data[start..end], "bytes {start}..{end}");
        }
    }

    #[test]
    fn a_lent_buffer_comes_back_once_the_last_of_its_bytes_is_dropped() {
        let buffers = Buffers::default();
        let mut buf = buffers.take(1000);
        assert_eq!(buf, vec![0; 1000]);
        buf[..5].copy_from_slice(b"layer");
        let at = buf.as_ptr();
        let bytes = buffers.lend(buf, 5);
        let rest = bytes.slice(2..);
        assert_eq!((&bytes[..], &rest[..]), (&b"layer"[..], &b"yer"[..]));
        drop(bytes);
        assert!(buffers.0.lock().expect("lock").is_empty(), "still lent");
        drop(rest);
        let again = buffers.take(800);
        assert_eq!((again.as_ptr(), again.len()), (at, 800), "the same buffer");
        assert!(buffers.0.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn a_waiting_reader_is_woken_by_the_writer_and_by_a_failure() {
        let (tx, rx) = watch::channel(streaming(10));
        let waiting = |mut rx: watch::Receiver<FillState>, pos| {
            tokio::spawn(async move { readable(&mut rx, pos, None).await })
        };
        let reader = waiting(rx.clone(), 10);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!reader.is_finished(), "nothing past byte 10 yet");
        tx.send_modify(|state| {
            if let FillState::Streaming { written, .. } = state {
                *written = 64;
            }
        });
        assert_eq!(reader.await.expect("task").expect("readable"), 64);

        let reader = waiting(rx.clone(), 64);
        tx.send_replace(FillState::Failed {
            reason: "digest mismatch".into(),
            status: 502,
        });
        let error = reader.await.expect("task").expect_err("failed");
        assert!(error.to_string().contains("digest mismatch"), "{error}");

        // A fill task gone without a final state is a failure too, not an endless wait.
        let (tx, rx) = watch::channel(streaming(10));
        let reader = waiting(rx, 10);
        drop(tx);
        let error = reader.await.expect("task").expect_err("aborted");
        assert!(error.to_string().contains("fill aborted"), "{error}");
    }
}
