//! The push stage of the write listener: upload sessions (monolithic, chunked, resumable after a
//! cut), request bodies streamed into the store, manifests checked against the blobs they name.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use oci::{Digest, ErrorCode, ManifestReference, Repository, Route};
use tokio::time::Instant;

use super::respond::{error_response, from_error, respond, value};
use super::{Listener, blocking};
use crate::body::{self, ResponseBody};
use crate::error::Error;
use crate::store::{Batch, BlobWriter};

pub(super) struct Session {
    repository: Repository,
    writer: Option<BlobWriter>,
    /// The last request on this session.
    touched: Instant,
}

pub(super) type Uploads = HashMap<String, Arc<tokio::sync::Mutex<Session>>>;

/// An upload session nobody touched for this long is dropped, its temporary file with it, when
/// the next upload starts (distribution purges after a week; a cache's disk is smaller). A
/// client that comes back later is told the upload is unknown and starts that blob again.
const UPLOAD_IDLE_LIMIT: Duration = Duration::from_secs(24 * 3600);

/// Drops the sessions idle for longer than [`UPLOAD_IDLE_LIMIT`]; one in use is kept.
fn purge_idle(uploads: &mut Uploads, now: Instant) {
    uploads.retain(|_, session| match session.try_lock() {
        Ok(session) => now.saturating_duration_since(session.touched) < UPLOAD_IDLE_LIMIT,
        Err(_) => true,
    });
}

fn created(location: &str, digest: &Digest) -> Response<ResponseBody> {
    let mut headers = HeaderMap::new();
    headers.insert(header::LOCATION, value(location));
    headers.insert(oci::header::CONTENT_DIGEST, value(&digest.to_string()));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    respond(StatusCode::CREATED, headers, body::empty())
}

fn upload_status(
    status: StatusCode,
    repository: &Repository,
    id: &str,
    len: u64,
) -> Response<ResponseBody> {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::LOCATION,
        value(&format!("/v2/{repository}/blobs/uploads/{id}")),
    );
    // Distribution's form: the inclusive last offset, `0-0` for an empty upload.
    headers.insert(
        header::RANGE,
        value(&format!("0-{}", len.saturating_sub(1))),
    );
    headers.insert(oci::header::UPLOAD_UUID, value(id));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    respond(status, headers, body::empty())
}

/// How a request body ended: whole, or cut off by the client after some bytes (kept in the
/// writer: they are the prefix the client sent, and the closing digest checks them all).
enum Received {
    Whole(BlobWriter),
    Cut(BlobWriter, Error),
}

impl Received {
    /// The writer when the body arrived whole; a cut body is an error.
    fn whole(self) -> Result<BlobWriter, Error> {
        match self {
            Received::Whole(writer) => Ok(writer),
            Received::Cut(_, error) => Err(error),
        }
    }
}

/// Streams a request body into `writer` in large batches. A write failure (budget, disk) is an
/// error; a body the client cut off still returns the writer with every byte that arrived, so
/// that a chunked upload can resume where it stopped.
async fn receive<B>(body: B, mut writer: BlobWriter) -> Result<Received, Error>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin,
    B::Error: std::fmt::Display + Send,
{
    let mut body = body;
    let mut batch = Batch::default();
    let mut cut = None;
    loop {
        let frame = body.frame().await;
        let done = match frame {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    batch.push(data);
                }
                false
            }
            Some(Err(e)) => {
                cut = Some(Error::io(
                    "receive",
                    "request body",
                    std::io::Error::other(e.to_string()),
                ));
                true
            }
            None => true,
        };
        if batch.is_full() || (done && !batch.is_empty()) {
            let batch = std::mem::take(&mut batch);
            let written = blocking(move || writer.write_batch(&batch).map(|()| writer)).await;
            writer = match written {
                Ok(writer) => writer,
                Err(error) => {
                    if !done {
                        drain(body).await;
                    }
                    return Err(error);
                }
            };
        }
        if done {
            return Ok(match cut {
                None => Received::Whole(writer),
                Some(error) => Received::Cut(writer, error),
            });
        }
    }
}

/// How much of a refused upload is read and discarded so that the client sees the answer.
const DRAIN_LIMIT: u64 = 1 << 30;

/// Reads and discards the rest of a refused request body (bounded in bytes and time): a server
/// that answers while the client is still sending and then closes makes the client's kernel see
/// a reset, and the client reports `broken pipe` instead of the reason (`BudgetExhausted`).
async fn drain<B>(mut body: B)
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin,
{
    let reading = async {
        let mut discarded = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                discarded += data.len() as u64;
                if discarded > DRAIN_LIMIT {
                    return;
                }
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(60), reading).await;
}

pub(super) async fn read_limited<B>(body: B, limit: usize) -> Result<Option<Bytes>, String>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin,
    B::Error: std::fmt::Display + Send,
{
    let mut body = body;
    let mut out = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Ok(None);
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Some(out.freeze()))
}

impl Listener {
    pub(super) async fn write_route<B>(
        &self,
        method: Method,
        route: Route,
        request: Request<B>,
    ) -> Response<ResponseBody>
    where
        B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        let store = self.registry.store().clone();
        match (method, route) {
            (
                Method::POST,
                Route::UploadStart {
                    repository,
                    digest,
                    mount,
                    ..
                },
            ) => {
                if let Some(mount) = mount
                    && store.blob_size(&mount).is_some()
                {
                    return created(&format!("/v2/{repository}/blobs/{mount}"), &mount);
                }
                let writer = {
                    let store = store.clone();
                    let algorithm = digest.map_or(oci::Algorithm::Sha256, |d| d.algorithm());
                    blocking(move || store.writer(algorithm, None)).await
                };
                let writer = match writer {
                    Ok(w) => w,
                    Err(e) => return from_error(&e),
                };
                if let Some(digest) = digest {
                    let result = async {
                        let writer = receive(request.into_body(), writer).await?.whole()?;
                        blocking(move || writer.commit(Some(digest))).await
                    }
                    .await;
                    return match result {
                        Ok(d) => created(&format!("/v2/{repository}/blobs/{d}"), &d),
                        Err(e) => from_error(&e),
                    };
                }
                let id = crate::store::random_id();
                let now = Instant::now();
                let mut uploads = self
                    .registry
                    .0
                    .uploads
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                purge_idle(&mut uploads, now);
                uploads.insert(
                    id.clone(),
                    Arc::new(tokio::sync::Mutex::new(Session {
                        repository: repository.clone(),
                        writer: Some(writer),
                        touched: now,
                    })),
                );
                drop(uploads);
                upload_status(StatusCode::ACCEPTED, &repository, &id, 0)
            }
            (
                method,
                Route::Upload {
                    repository,
                    id,
                    digest,
                },
            ) => self.upload(method, repository, id, digest, request).await,
            (
                Method::PUT,
                Route::Manifest {
                    repository,
                    reference,
                },
            ) => self.put_manifest(repository, reference, request).await,
            (
                Method::DELETE,
                Route::Manifest {
                    repository,
                    reference,
                },
            ) => self.delete_manifest(repository, reference).await,
            _ => error_response(
                405,
                ErrorCode::Unsupported,
                "this operation is not supported by this registry",
            ),
        }
    }

    async fn upload<B>(
        &self,
        method: Method,
        repository: Repository,
        id: String,
        digest: Option<Digest>,
        request: Request<B>,
    ) -> Response<ResponseBody>
    where
        B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        let uploads = &self.registry.0.uploads;
        let session = uploads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned();
        let Some(session) = session else {
            return error_response(404, ErrorCode::BlobUploadUnknown, "blob upload unknown");
        };
        let mut session = session.lock_owned().await;
        session.touched = Instant::now();
        if session.repository != repository {
            return error_response(404, ErrorCode::BlobUploadUnknown, "blob upload unknown");
        }
        let Some(writer) = session.writer.take() else {
            return error_response(404, ErrorCode::BlobUploadUnknown, "blob upload unknown");
        };
        let remove = || {
            uploads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        };
        match method {
            Method::GET => {
                let len = writer.len();
                session.writer = Some(writer);
                upload_status(StatusCode::NO_CONTENT, &repository, &id, len)
            }
            Method::DELETE => {
                drop(writer);
                remove();
                respond(StatusCode::NO_CONTENT, HeaderMap::new(), body::empty())
            }
            Method::PATCH => {
                if let Some(range) = request
                    .headers()
                    .get(header::CONTENT_RANGE)
                    .and_then(|v| v.to_str().ok())
                {
                    match oci::range::parse_upload_range(range) {
                        Ok(r) if r.start == writer.len() => {}
                        _ => {
                            let len = writer.len();
                            session.writer = Some(writer);
                            let mut response = error_response(
                                416,
                                ErrorCode::RangeInvalid,
                                &format!("chunk must start at offset {len}"),
                            );
                            response.headers_mut().insert(
                                header::RANGE,
                                value(&format!("0-{}", len.saturating_sub(1))),
                            );
                            return response;
                        }
                    }
                }
                // Received in a task of its own: hyper drops this future when the client's
                // connection dies, and what arrived must still go back into the session so
                // that the client can resume where the bytes stopped.
                let body = request.into_body();
                let received = tokio::spawn(async move {
                    let outcome = receive(body, writer).await;
                    match outcome {
                        Ok(Received::Whole(writer)) => {
                            let len = writer.len();
                            session.writer = Some(writer);
                            Ok(Ok(len))
                        }
                        Ok(Received::Cut(writer, e)) => {
                            session.writer = Some(writer);
                            Ok(Err(e))
                        }
                        Err(e) => Err(e),
                    }
                })
                .await
                .unwrap_or_else(|e| Err(Error::Config(format!("the upload task failed: {e}"))));
                match received {
                    Ok(Ok(len)) => upload_status(StatusCode::ACCEPTED, &repository, &id, len),
                    // Cut off: the bytes are kept, the client asks for the offset and resumes.
                    Ok(Err(e)) => from_error(&e),
                    Err(e) => {
                        remove();
                        from_error(&e)
                    }
                }
            }
            Method::PUT => {
                remove();
                let Some(digest) = digest else {
                    return error_response(
                        400,
                        ErrorCode::DigestInvalid,
                        "the closing PUT needs ?digest=",
                    );
                };
                let result = async {
                    let writer = receive(request.into_body(), writer).await?.whole()?;
                    blocking(move || writer.commit(Some(digest))).await
                }
                .await;
                match result {
                    Ok(d) => created(&format!("/v2/{repository}/blobs/{d}"), &d),
                    Err(e) => from_error(&e),
                }
            }
            _ => {
                session.writer = Some(writer);
                error_response(405, ErrorCode::Unsupported, "method not allowed on uploads")
            }
        }
    }

    async fn put_manifest<B>(
        &self,
        repository: Repository,
        reference: ManifestReference,
        request: Request<B>,
    ) -> Response<ResponseBody>
    where
        B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = match read_limited(request.into_body(), oci::manifest::MANIFEST_MAX_LEN).await {
            Ok(Some(b)) => b,
            Ok(None) => {
                return error_response(
                    413,
                    ErrorCode::ManifestInvalid,
                    &format!(
                        "manifest larger than {} bytes",
                        oci::manifest::MANIFEST_MAX_LEN
                    ),
                );
            }
            Err(e) => return error_response(400, ErrorCode::ManifestInvalid, &e),
        };
        let manifest = match oci::Manifest::parse(bytes.to_vec(), content_type.as_deref()) {
            Ok(m) => m,
            Err(e) => return from_error(&Error::Manifest(e)),
        };
        let store = self.registry.store().clone();
        let (tag, expected) = match &reference {
            ManifestReference::Tag(t) => (Some(t.clone()), None),
            ManifestReference::Digest(d) => (None, Some(*d)),
        };
        let media_type = manifest.media_type().as_str().to_owned();
        let references: Vec<Digest> = manifest
            .references()
            .into_iter()
            .filter(|d| d.urls.is_empty())
            .map(|d| d.digest)
            .collect();
        let subject = manifest.subject().map(|s| s.digest);
        let r = repository.clone();
        let result = blocking(move || {
            if let Some(missing) = references.iter().find(|d| store.blob_size(d).is_none()) {
                return Err(Error::ManifestBlobUnknown { digest: *missing });
            }
            store.put_manifest(&r, &bytes, &media_type, expected, tag.as_ref())
        })
        .await;
        match result {
            Ok(d) => {
                let mut response = created(&format!("/v2/{repository}/manifests/{d}"), &d);
                if let Some(subject) = subject {
                    response
                        .headers_mut()
                        .insert(oci::header::OCI_SUBJECT, value(&subject.to_string()));
                }
                response
            }
            Err(e) => from_error(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(touched: Instant) -> Arc<tokio::sync::Mutex<Session>> {
        Arc::new(tokio::sync::Mutex::new(Session {
            repository: Repository::parse("system/deckhouse").expect("repository"),
            writer: None,
            touched,
        }))
    }

    #[test]
    fn idle_upload_sessions_are_purged_and_busy_ones_kept() {
        let start = Instant::now();
        let mut uploads = Uploads::new();
        uploads.insert("recent".into(), session(start));
        uploads.insert("idle".into(), session(start));
        let busy = session(start);
        uploads.insert("busy".into(), busy.clone());
        let _held = busy.try_lock().expect("lock");

        purge_idle(&mut uploads, start + Duration::from_secs(3600));
        assert_eq!(uploads.len(), 3, "an hour idle is kept");

        uploads
            .get("recent")
            .expect("recent")
            .try_lock()
            .expect("lock")
            .touched = start + Duration::from_secs(20 * 3600);
        purge_idle(
            &mut uploads,
            start + UPLOAD_IDLE_LIMIT + Duration::from_secs(1),
        );
        let mut left: Vec<_> = uploads.keys().cloned().collect();
        left.sort();
        assert_eq!(left, ["busy", "recent"]);
    }
}
