//! Pull-through fills: one upstream request per digest, however many clients ask.
//!
//! The first request for a missing blob starts a [`Fill`], a task of its own (so it continues
//! when that client disconnects) that streams the upstream body into a temporary file of the
//! store, hashing as it writes, and commits it once the digest verifies. Every request for the
//! same digest meanwhile — the first one included — follows the fill's progress and reads the
//! growing file with positional reads: Range requests for the part already written are served
//! at once, later parts as they arrive. The store's writer hashes as it writes (one hash, off
//! the async threads), and the last byte is made visible only once the digest checks out, so no
//! reader can receive a complete-looking wrong blob; on a mismatch the file is discarded and
//! every reader's body ends in an error. Receiving the next batch overlaps writing the last.
//!
//! When the store refuses the write (budget, reserve, unwritable disk) the fill reports
//! [`FillState::Unstorable`] and callers stream from the upstream without storing.

use std::collections::HashMap;
use std::fs::File;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use oci::Digest;
use tokio::sync::watch;

use crate::error::Error;
use crate::store::{Batch, BlobWriter, Store};

/// Where a fill is.
#[derive(Clone, Debug)]
pub enum FillState {
    /// Waiting for the upstream's response headers.
    Connecting,
    /// Writing: `written` bytes of `total` (if announced) are readable from `file`.
    Streaming {
        /// The growing file.
        file: Arc<File>,
        /// `Content-Length` of the upstream answer.
        total: Option<u64>,
        /// Bytes written and readable.
        written: u64,
    },
    /// Committed; `file` still reads the whole content.
    Done {
        /// The (renamed) file.
        file: Arc<File>,
        /// Its length.
        size: u64,
    },
    /// Failed; nothing was stored.
    Failed {
        /// Why (shared by every waiter).
        reason: String,
        /// The status to answer with.
        status: u16,
    },
    /// The store refused the write; fetch directly without storing.
    Unstorable,
}

impl FillState {
    fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::Done { .. } | Self::Failed { .. } | Self::Unstorable
        )
    }
}

/// The in-flight fills, keyed by digest.
#[derive(Debug, Default)]
pub struct Fills {
    inflight: Mutex<HashMap<Digest, watch::Receiver<FillState>>>,
    started: std::sync::atomic::AtomicU64,
}

/// Where a fill gets its bytes.
#[derive(Clone, Debug)]
pub struct Source {
    /// The upstream.
    pub remote: registry_client::Remote,
    /// The repository on the upstream (under the endpoint's prefix).
    pub repository: String,
}

impl Fills {
    /// Fills started so far (one per upstream blob request).
    pub fn started(&self) -> u64 {
        self.started.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Joins the fill of `digest`, starting it from `source` if none runs.
    pub fn join(
        self: &Arc<Self>,
        store: &Store,
        source: Source,
        digest: Digest,
    ) -> watch::Receiver<FillState> {
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rx) = inflight.get(&digest) {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(FillState::Connecting);
        inflight.insert(digest, rx.clone());
        drop(inflight);
        self.started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let fills = self.clone();
        let store = store.clone();
        tokio::spawn(async move {
            let result = run(&store, &source, digest, &tx).await;
            match result {
                Ok(()) => {}
                Err(error) => {
                    tracing::warn!(%digest, repository = %source.repository, %error, "fill failed");
                    let status = error.status();
                    tx.send_replace(FillState::Failed {
                        reason: error.to_string(),
                        status,
                    });
                }
            }
            fills
                .inflight
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&digest);
        });
        rx
    }
}

/// Writes `batch` on the blocking pool (the writer hashes as it writes).
fn write_batch(
    mut writer: BlobWriter,
    batch: Batch,
) -> tokio::task::JoinHandle<Result<(BlobWriter, u64), Error>> {
    tokio::task::spawn_blocking(move || {
        writer.write_batch(&batch)?;
        Ok((writer, batch.len() as u64))
    })
}

async fn run(
    store: &Store,
    source: &Source,
    digest: Digest,
    tx: &watch::Sender<FillState>,
) -> Result<(), Error> {
    // Not the registry client's verified body: the store's writer hashes what it writes and
    // refuses a mismatch at commit, and hashing twice halved the fill rate.
    let response = source
        .remote
        .request(
            http::Method::GET,
            &source.repository,
            &format!("blobs/{digest}"),
        )
        .send()
        .await?
        .error_for_status()
        .await?;
    let total = response.content_length();
    let writer = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || store.writer(digest.algorithm(), total))
            .await
            .map_err(|e| Error::Config(format!("fill task: {e}")))?
    };
    let writer = match writer {
        Ok(w) => w,
        Err(error) => {
            tracing::warn!(%digest, %error, "store refuses the fill; streaming without storing");
            tx.send_replace(FillState::Unstorable);
            return Ok(());
        }
    };
    let file = writer.file();
    tx.send_replace(FillState::Streaming {
        file: file.clone(),
        total,
        written: 0,
    });
    // Readers may read what is reported written; the last byte of a blob of known length is
    // reported only once the digest verified, so no reader ever ends a complete-looking body
    // with unverified content. (It need not wait for the fsync: verified bytes are right.)
    let report = |written: u64, verified: bool| {
        let visible = match total {
            Some(t) if !verified => written.min(t.saturating_sub(1)),
            _ => written,
        };
        tx.send_modify(|state| {
            if let FillState::Streaming { written, .. } = state {
                *written = visible;
            }
        });
    };
    let mut body = response.into_body();
    let mut received = 0u64;
    let mut resumes = 0u32;
    let mut written = 0u64;
    let mut idle = Some(writer);
    // One write in flight; while it runs, the next batch keeps growing from the network.
    let mut in_flight: Option<tokio::task::JoinHandle<Result<(BlobWriter, u64), Error>>> = None;
    let mut batch = Batch::default();
    let mut ended = false;
    loop {
        if let Some(writer) = idle.take() {
            if !batch.is_empty() {
                in_flight = Some(write_batch(writer, std::mem::take(&mut batch)));
            } else if ended {
                idle = Some(writer);
                break;
            } else {
                idle = Some(writer);
            }
        }
        tokio::select! {
            biased;
            chunk = body.next(), if !ended && !batch.is_full() => match chunk {
                Some(Ok(chunk)) => {
                    received += chunk.len() as u64;
                    batch.push(chunk);
                }
                Some(Err(error)) => {
                    body = resume(source, digest, received, error, &mut resumes).await?;
                }
                None => ended = true,
            },
            done = async {
                match in_flight.as_mut() {
                    Some(handle) => join(handle).await,
                    None => std::future::pending().await,
                }
            }, if in_flight.is_some() => {
                in_flight = None;
                let (writer, n) = done?;
                written += n;
                report(written, false);
                idle = Some(writer);
            },
        }
    }
    let Some(writer) = idle else {
        return Err(Error::Config("fill writer lost".into()));
    };
    if writer.digest() == Some(digest) {
        report(written, true);
    }
    let size = writer.len();
    tokio::task::spawn_blocking(move || writer.commit(Some(digest)))
        .await
        .map_err(|e| Error::Config(format!("fill task: {e}")))??;
    tx.send_replace(FillState::Done { file, size });
    Ok(())
}

/// Range requests a fill makes after its stream broke, at most, before it fails.
pub const MAX_RESUMES: u32 = 3;

/// Whether a fill whose upstream stream broke with `error` may continue where it stopped: a
/// reset, a stall or a body cut short — not a crawl (the throughput floor ends it, and the next
/// pull starts afresh) nor anything about the content or the request.
pub fn resumable(error: &registry_client::Error) -> bool {
    use registry_client::Error as E;
    matches!(
        error,
        E::BodyInterrupted { .. } | E::Stalled { .. } | E::Truncated { .. }
    )
}

/// The first byte a `Content-Range: bytes first-last/total` answer carries.
pub fn range_start(content_range: Option<&str>) -> Option<u64> {
    let range = content_range?.trim().strip_prefix("bytes ")?;
    let (first, rest) = range.split_once('-')?;
    rest.split_once('/')?;
    first.parse().ok()
}

/// Continues a fill whose upstream stream broke after `received` bytes: `Range: bytes=n-` to
/// the upstream again (a fresh connection), taken only when it answers `206` from exactly that
/// byte — the writer then hashes the spliced stream as one, so the digest still decides. When
/// no attempt can continue, the fill fails with the break that ended it.
async fn resume(
    source: &Source,
    digest: Digest,
    received: u64,
    error: registry_client::Error,
    resumes: &mut u32,
) -> Result<registry_client::Body, Error> {
    if !resumable(&error) {
        return Err(error.into());
    }
    while *resumes < MAX_RESUMES {
        *resumes += 1;
        tracing::info!(%digest, repository = %source.repository, received, %error, attempt = *resumes,
            "fill: the upstream stream broke; continuing with a Range request");
        let answer = source
            .remote
            .request(
                http::Method::GET,
                &source.repository,
                &format!("blobs/{digest}"),
            )
            .header(http::header::RANGE, &format!("bytes={received}-"))
            .send()
            .await;
        let response = match answer {
            Ok(r) => r.error_for_status().await,
            Err(e) => Err(e),
        };
        match response {
            Ok(r)
                if r.status() == http::StatusCode::PARTIAL_CONTENT
                    && range_start(r.header_str("content-range")) == Some(received) =>
            {
                return Ok(r.into_body());
            }
            Ok(r) => {
                tracing::warn!(%digest, status = %r.status(), "fill: the upstream cannot continue from byte {received}");
                break;
            }
            Err(e) => tracing::warn!(%digest, error = %e, "fill: the Range request failed"),
        }
    }
    Err(error.into())
}

async fn join(
    handle: &mut tokio::task::JoinHandle<Result<(BlobWriter, u64), Error>>,
) -> Result<(BlobWriter, u64), Error> {
    handle
        .await
        .map_err(|e| Error::Config(format!("fill task: {e}")))?
}

/// Waits until the fill has response headers (or has ended).
pub async fn started(rx: &mut watch::Receiver<FillState>) -> FillState {
    loop {
        let state = rx.borrow_and_update().clone();
        if !matches!(state, FillState::Connecting) {
            return state;
        }
        if rx.changed().await.is_err() {
            return rx.borrow().clone();
        }
    }
}

/// Waits until the fill ended.
pub async fn finished(rx: &mut watch::Receiver<FillState>) -> FillState {
    loop {
        let state = rx.borrow_and_update().clone();
        if state.is_terminal() {
            return state;
        }
        if rx.changed().await.is_err() {
            return rx.borrow().clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_breaks_a_fill_continues_after() {
        use registry_client::Error as E;
        use std::time::Duration;
        let cases: [(E, bool); 5] = [
            (
                E::BodyInterrupted {
                    received: 5,
                    source: "connection reset".into(),
                },
                true,
            ),
            (
                E::Stalled {
                    after: Duration::from_secs(1),
                    received: 5,
                },
                true,
            ),
            (
                E::Truncated {
                    received: 5,
                    expected: 10,
                },
                true,
            ),
            (
                E::TooSlow {
                    received_in_window: 1,
                    minimum: 10,
                    window: Duration::from_secs(1),
                    received: 5,
                },
                false,
            ),
            (E::TooLong { expected: 10 }, false),
        ];
        for (error, want) in cases {
            assert_eq!(resumable(&error), want, "{error}");
        }
    }

    /// An upstream that cuts every blob body in half and ignores `Range` (answers `200` with the
    /// whole blob from byte 0, as a proxy that drops the header would): no target can finish, so
    /// the fill fails — nothing stored, no temporary file — after its one refused Range request.
    #[tokio::test]
    async fn a_fill_no_target_can_finish_fails_and_keeps_nothing() {
        use std::sync::atomic::{AtomicU64, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let content = vec![7u8; 64 * 1024];
        let digest = Digest::sha256(&content);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicU64::new(0));
        let ranged = Arc::new(AtomicU64::new(0));
        let (counted, ranges) = (requests.clone(), ranged.clone());
        let body = content.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        break;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                if head.contains("/blobs/") {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                if head.contains("\r\nrange: bytes=") {
                    ranges.fetch_add(1, Ordering::SeqCst);
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.write_all(&body[..body.len() / 2]).await;
                let _ = stream.shutdown().await;
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            &dir.path().join("data"),
            crate::store::Limits {
                budget: None,
                reserve: Some(0),
            },
        )
        .unwrap();
        let remote = registry_client::Client::new(registry_client::Config::default())
            .remote(registry_client::Endpoint::from_url(&format!("http://{address}")).unwrap())
            .unwrap();
        let fills = Arc::new(Fills::default());
        let mut rx = fills.join(
            &store,
            Source {
                remote,
                repository: "system/deckhouse".into(),
            },
            digest,
        );
        let state = tokio::time::timeout(std::time::Duration::from_secs(10), finished(&mut rx))
            .await
            .expect("the fill ends");
        let FillState::Failed { reason, .. } = state else {
            panic!("the fill must fail: {state:?}");
        };
        assert!(
            reason.contains("truncated"),
            "the break that ended it: {reason}"
        );
        assert_eq!(
            requests.load(Ordering::SeqCst),
            2,
            "the GET and one Range GET"
        );
        assert_eq!(ranged.load(Ordering::SeqCst), 1);
        assert_eq!(store.blob_size(&digest), None, "nothing stored");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let tmp =
            |root: &std::path::Path| std::fs::read_dir(root.join("tmp")).map_or(0, Iterator::count);
        while tmp(store.root()) > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(tmp(store.root()), 0, "no temporary file left");
    }

    #[test]
    fn content_range_start() {
        for (header, want) in [
            (Some("bytes 1048576-2097151/2097152"), Some(1_048_576)),
            (Some("bytes 0-9/*"), Some(0)),
            (Some("bytes */10"), None),
            (Some("items 1-2/3"), None),
            (Some("bytes 5-9"), None),
            (None, None),
        ] {
            assert_eq!(range_start(header), want, "{header:?}");
        }
    }
}
