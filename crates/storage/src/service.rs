//! The request pipeline of both listeners: parse → authenticate → local lookup → (read
//! listener, on a miss) single-flight fill from the upstream → answer.
//!
//! The read listener (the "5001" role) serves the pull API and fills from the upstream; it
//! refuses writes. The write listener (the "5003" role) serves the push API and the pull API
//! from the store only; as the publish endpoint it also requires a client certificate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::TryStreamExt;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use oci::{Digest, ErrorBody, ErrorCode, ManifestReference, Repository, Route, Tag};
use tokio::time::Instant;

use crate::auth::{Access, Accounts, Denied};
use crate::body::{self, ResponseBody};
use crate::error::Error;
use crate::fill::{self, FillState, Fills, Source};
use crate::store::{BlobWriter, Store, StoredManifest};

mod token_endpoint;

pub use token_endpoint::TOKEN_PATH;

/// The realm of our Basic challenge.
pub const REALM: &str = "Deckhouse registry";

/// The upstream a replica fills from while one is held.
#[derive(Clone, Debug)]
pub struct Upstream {
    /// The upstream endpoint (with its own path prefix and credentials).
    pub remote: registry_client::Remote,
    /// The local repository prefix that maps to the upstream's root, e.g. `system/deckhouse`:
    /// `system/deckhouse/foo` is filled from `<upstream path>/foo`. Other repositories are
    /// served from the store only. Empty maps every repository.
    pub prefix: String,
}

/// Settings of the shared registry state.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How long a tag fetched from the upstream is served without asking again.
    pub tag_ttl: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            tag_ttl: Duration::from_secs(30),
        }
    }
}

struct Session {
    repository: Repository,
    writer: Option<BlobWriter>,
    /// The last request on this session.
    touched: Instant,
}

type Uploads = HashMap<String, Arc<tokio::sync::Mutex<Session>>>;

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

type TagKey = (String, String);

/// The registry state both listeners share: the store, the fills, the upstream, the uploads.
#[derive(Clone)]
pub struct Registry(Arc<Inner>);

struct Inner {
    store: Store,
    fills: Arc<Fills>,
    upstream: RwLock<Option<Upstream>>,
    settings: Settings,
    tag_checked: Mutex<HashMap<TagKey, Instant>>,
    tag_flights: Mutex<HashMap<TagKey, Arc<tokio::sync::Mutex<()>>>>,
    uploads: Mutex<Uploads>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("root", &self.0.store.root())
            .finish_non_exhaustive()
    }
}

/// Which API a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Pull API with pull-through; writes refused.
    Read,
    /// Push API, and pulls from the store only.
    Write,
}

/// What the connection told us about the client.
#[derive(Clone, Copy, Debug, Default)]
pub struct Peer {
    /// The client presented a certificate that chains to the configured client CA.
    pub client_certificate: bool,
    /// The connection is TLS (the scheme of the token endpoint's address in a challenge).
    pub tls: bool,
}

/// One listener's request handler.
#[derive(Clone, Debug)]
pub struct Listener {
    registry: Registry,
    role: Role,
    accounts: Accounts,
    require_client_certificate: bool,
}

impl Registry {
    /// A registry over `store`, filling from `upstream` while one is set.
    pub fn new(store: Store, upstream: Option<Upstream>, settings: Settings) -> Self {
        Self(Arc::new(Inner {
            store,
            fills: Arc::default(),
            upstream: RwLock::new(upstream),
            settings,
            tag_checked: Mutex::default(),
            tag_flights: Mutex::default(),
            uploads: Mutex::default(),
        }))
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.0.store
    }

    /// Upstream blob fetches started so far (one per fill).
    pub fn fills_started(&self) -> u64 {
        self.0.fills.started()
    }

    /// Sets or drops the upstream (air gap).
    pub fn set_upstream(&self, upstream: Option<Upstream>) {
        *self.0.upstream.write().unwrap_or_else(|e| e.into_inner()) = upstream;
    }

    /// Stores blob `digest` of `repository` from the held upstream through the same single
    /// flight as pull-through reads: a fill ahead of time and clients missing the same blob
    /// share one upstream request.
    pub async fn fill_blob(&self, repository: &Repository, digest: Digest) -> Result<(), Error> {
        if self.0.store.blob_size(&digest).is_some() {
            return Ok(());
        }
        let Some(source) = self.source(repository) else {
            return Err(Error::Config(format!(
                "{repository} does not map to a held upstream; nothing to fill from"
            )));
        };
        let mut rx = self.0.fills.join(&self.0.store, source, digest);
        match fill::finished(&mut rx).await {
            FillState::Done { .. } => Ok(()),
            FillState::Failed { reason, status } => Err(Error::FillFailed {
                digest,
                reason,
                status,
            }),
            _ => Err(Error::FillFailed {
                digest,
                reason: "the store refuses writes".to_owned(),
                status: 507,
            }),
        }
    }

    /// The upstream source for a local repository, if it maps to the held upstream.
    fn source(&self, repository: &Repository) -> Option<Source> {
        let guard = self.0.upstream.read().unwrap_or_else(|e| e.into_inner());
        let upstream = guard.as_ref()?;
        let name = repository.as_str();
        let prefix = upstream.prefix.trim_matches('/');
        let rest = if prefix.is_empty() {
            name
        } else if name == prefix {
            ""
        } else {
            name.strip_prefix(prefix)?.strip_prefix('/')?
        };
        Some(Source {
            remote: upstream.remote.clone(),
            repository: rest.to_owned(),
        })
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Config(format!("blocking task failed: {e}")))?
}

fn api(mut response: Response<ResponseBody>) -> Response<ResponseBody> {
    response.headers_mut().insert(
        oci::header::API_VERSION,
        HeaderValue::from_static(oci::header::API_VERSION_VALUE),
    );
    response
}

fn respond(status: StatusCode, headers: HeaderMap, body: ResponseBody) -> Response<ResponseBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    api(response)
}

fn value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// An OCI error answer.
pub fn error_response(status: u16, code: ErrorCode, message: &str) -> Response<ResponseBody> {
    let bytes = ErrorBody::with_message(code, message).to_json();
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(oci::error::ERROR_CONTENT_TYPE),
    );
    headers.insert(header::CONTENT_LENGTH, value(&bytes.len().to_string()));
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    respond(status, headers, body::full(bytes))
}

fn from_error(error: &Error) -> Response<ResponseBody> {
    if error.status() >= 500 && !matches!(error, Error::Refused { .. }) {
        tracing::warn!(%error, "request failed");
    }
    error_response(error.status(), error.error_code(), &error.to_string())
}

fn unauthorized(message: &str) -> Response<ResponseBody> {
    let mut response = error_response(401, ErrorCode::Unauthorized, message);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        value(&format!("Basic realm=\"{REALM}\"")),
    );
    response
}

fn blob_headers(digest: &Digest, len: u64) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(header::CONTENT_LENGTH, value(&len.to_string()));
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(oci::header::CONTENT_DIGEST, value(&digest.to_string()));
    headers.insert(header::ETAG, value(&format!("\"{digest}\"")));
    headers
}

/// What a blob answer reads from.
enum Content {
    Complete(Arc<std::fs::File>),
    Growing(Arc<std::fs::File>, tokio::sync::watch::Receiver<FillState>),
}

fn serve_blob(
    digest: &Digest,
    content: Content,
    len: u64,
    range: Option<&str>,
    head: bool,
) -> Response<ResponseBody> {
    let mut headers = blob_headers(digest, len);
    if head {
        return respond(StatusCode::OK, headers, body::empty());
    }
    let (status, start, end) = match oci::range::evaluate(range, len) {
        oci::RangeOutcome::Full => (StatusCode::OK, 0, len),
        oci::RangeOutcome::Partial(r) => {
            headers.insert(header::CONTENT_RANGE, value(&r.content_range(len)));
            headers.insert(header::CONTENT_LENGTH, value(&r.len().to_string()));
            (StatusCode::PARTIAL_CONTENT, r.start, r.end + 1)
        }
        oci::RangeOutcome::Unsatisfiable { complete_length } => {
            headers.insert(
                header::CONTENT_RANGE,
                value(&format!("bytes */{complete_length}")),
            );
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
            return respond(StatusCode::RANGE_NOT_SATISFIABLE, headers, body::empty());
        }
    };
    match content {
        Content::Complete(file) => {
            let zero_copy = body::ZeroCopy {
                file: file.clone(),
                start,
                end,
            };
            let mut response = respond(status, headers, body::file(file, start, end));
            response.extensions_mut().insert(zero_copy);
            response
        }
        Content::Growing(file, rx) => {
            respond(status, headers, body::growing(file, start, Some(end), rx))
        }
    }
}

fn manifest_response(m: &StoredManifest, head: bool) -> Response<ResponseBody> {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, value(&m.media_type));
    headers.insert(header::CONTENT_LENGTH, value(&m.bytes.len().to_string()));
    headers.insert(oci::header::CONTENT_DIGEST, value(&m.digest.to_string()));
    headers.insert(header::ETAG, value(&format!("\"{}\"", m.digest)));
    let body = if head {
        body::empty()
    } else {
        body::full(m.bytes.clone())
    };
    respond(StatusCode::OK, headers, body)
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
    let mut batch = BytesMut::new();
    let mut cut = None;
    loop {
        let frame = body.frame().await;
        let done = match frame {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    batch.extend_from_slice(&data);
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
        if batch.len() >= 1 << 20 || (done && !batch.is_empty()) {
            let chunk = std::mem::take(&mut batch);
            let written = blocking(move || writer.write(&chunk).map(|()| writer)).await;
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

async fn read_limited<B>(body: B, limit: usize) -> Result<Option<Bytes>, String>
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

/// How a tag refresh ended.
enum Refresh {
    Fresh,
    Missing,
    Failed(Error),
}

impl Listener {
    /// The read listener: `accounts` with pull access may read.
    pub fn read(registry: Registry, accounts: Accounts) -> Self {
        Self {
            registry,
            role: Role::Read,
            accounts,
            require_client_certificate: false,
        }
    }

    /// The write listener: `accounts` with push access may write (and read). With
    /// `require_client_certificate` (the publish endpoint), a request must also come over a
    /// connection whose client certificate chains to the configured CA.
    pub fn write(registry: Registry, accounts: Accounts, require_client_certificate: bool) -> Self {
        Self {
            registry,
            role: Role::Write,
            accounts,
            require_client_certificate,
        }
    }

    /// The registry this listener serves.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Answers one request.
    pub async fn handle<B>(&self, request: Request<B>, peer: Peer) -> Response<ResponseBody>
    where
        B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        let path = request.uri().path();
        if path == "/healthz" {
            return respond(StatusCode::OK, HeaderMap::new(), body::full("ok"));
        }
        if self.role == Role::Write && self.require_client_certificate && !peer.client_certificate {
            return error_response(
                403,
                ErrorCode::Denied,
                "the publish endpoint requires a client certificate issued by its client CA \
                 (in addition to write credentials); none was presented",
            );
        }
        if self.role == Role::Read && path == TOKEN_PATH {
            return token_endpoint::issue(&self.accounts, request).await;
        }
        let needed = match self.role {
            Role::Write => Access::Push,
            Role::Read => Access::Pull,
        };
        let parsed = oci::path::parse(path, request.uri().query());
        let repository = parsed
            .as_ref()
            .ok()
            .and_then(|p| p.route.repository())
            .map(ToString::to_string);
        let authorization = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let checked = self.accounts.check_request(
            authorization,
            needed,
            repository.as_deref(),
            token_endpoint::unix_now(),
        );
        if let Err(denied) = checked {
            let message = match denied {
                Denied::Forbidden => {
                    return error_response(
                        403,
                        ErrorCode::Denied,
                        if needed == Access::Push {
                            "these credentials may not write to this registry"
                        } else {
                            "these credentials may not read this repository"
                        },
                    );
                }
                Denied::Unauthenticated if authorization.is_some() => "invalid credentials",
                Denied::Unauthenticated => "authentication required",
                Denied::InvalidToken => "invalid or expired token",
                Denied::InsufficientScope => "the token does not cover this repository",
            };
            let mut response = unauthorized(message);
            if self.accounts.tokens().is_some() {
                let scope = repository
                    .as_deref()
                    .map(|r| crate::auth::Scope::needed(r, needed));
                let error = match denied {
                    Denied::InvalidToken => Some("invalid_token"),
                    Denied::InsufficientScope => Some("insufficient_scope"),
                    _ => None,
                };
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    token_endpoint::bearer_challenge(
                        request.headers(),
                        request.uri().authority().map(|a| a.as_str()),
                        peer.tls,
                        scope.as_ref(),
                        error,
                    ),
                );
            }
            return response;
        }
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(e) => return error_response(e.status(), e.error_code(), &e.to_string()),
        };
        let method = request.method().clone();
        let head = method == Method::HEAD;
        let range = request
            .headers()
            .get(header::RANGE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        match (method, parsed.route) {
            (Method::GET | Method::HEAD, Route::Ping) => {
                let mut headers = HeaderMap::new();
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                respond(StatusCode::OK, headers, body::full("{}"))
            }
            (
                Method::GET | Method::HEAD,
                Route::Manifest {
                    repository,
                    reference,
                },
            ) => self.get_manifest(&repository, &reference, head).await,
            (Method::GET | Method::HEAD, Route::Blob { repository, digest }) => {
                self.get_blob(&repository, &digest, range.as_deref(), head)
                    .await
            }
            (
                Method::GET,
                Route::Tags {
                    repository,
                    n,
                    last,
                },
            ) => self.tags(&repository, n, last.as_deref()).await,
            (_, Route::Catalog { .. } | Route::Referrers { .. }) => error_response(
                404,
                ErrorCode::Unsupported,
                "not supported by this registry",
            ),
            (method, route) if self.role == Role::Write => {
                self.write_route(method, route, request).await
            }
            _ => error_response(
                405,
                ErrorCode::Unsupported,
                "this listener is read-only; push to the write listener",
            ),
        }
    }

    async fn get_manifest(
        &self,
        repository: &Repository,
        reference: &ManifestReference,
        head: bool,
    ) -> Response<ResponseBody> {
        let registry = &self.registry;
        let store = registry.store().clone();
        let source = match self.role {
            Role::Read => registry.source(repository),
            Role::Write => None,
        };
        let digest = match reference {
            ManifestReference::Digest(d) => *d,
            ManifestReference::Tag(tag) => {
                let mut refresh_error = None;
                if let Some(source) = &source {
                    match self.refresh_tag(repository, tag, source).await {
                        Refresh::Fresh => {}
                        Refresh::Missing => {
                            return error_response(
                                404,
                                ErrorCode::ManifestUnknown,
                                &format!("manifest unknown: {repository}:{tag} (upstream)"),
                            );
                        }
                        Refresh::Failed(e) => refresh_error = Some(e),
                    }
                }
                let (r, t) = (repository.clone(), tag.clone());
                let local = {
                    let store = store.clone();
                    blocking(move || Ok(store.tag(&r, &t))).await.ok().flatten()
                };
                match (local, refresh_error) {
                    (Some(d), e) => {
                        if let Some(e) = e {
                            tracing::warn!(%repository, %tag, error = %e, "upstream unavailable; serving the last known tag");
                        }
                        d
                    }
                    (None, Some(e)) => return from_error(&e),
                    (None, None) => {
                        return error_response(
                            404,
                            ErrorCode::ManifestUnknown,
                            &format!("manifest unknown: {repository}:{tag}"),
                        );
                    }
                }
            }
        };
        let lookup = {
            let (store, r) = (store.clone(), repository.clone());
            blocking(move || store.manifest(&r, &digest)).await
        };
        match lookup {
            Ok(Some(m)) => return manifest_response(&m, head),
            Ok(None) => {}
            Err(e) => return from_error(&e),
        }
        let Some(source) = source else {
            return error_response(
                404,
                ErrorCode::ManifestUnknown,
                &format!("manifest unknown: {repository}@{digest}"),
            );
        };
        match self
            .fetch_manifest(repository, &digest.to_string(), Some(digest), None, &source)
            .await
        {
            Ok(m) => manifest_response(&m, head),
            Err(e) if matches!(&e, Error::Upstream(u) if u.is_not_found()) => error_response(
                404,
                ErrorCode::ManifestUnknown,
                &format!("manifest unknown: {repository}@{digest}"),
            ),
            Err(e) => from_error(&e),
        }
    }

    async fn fetch_manifest(
        &self,
        repository: &Repository,
        reference: &str,
        expected: Option<Digest>,
        tag: Option<&Tag>,
        source: &Source,
    ) -> Result<StoredManifest, Error> {
        let m = source
            .remote
            .get_manifest(
                &source.repository,
                reference,
                &[oci::media_type::MANIFEST_ACCEPT],
            )
            .await?;
        let parsed = oci::Manifest::parse(m.bytes.to_vec(), m.media_type.as_deref())?;
        let media_type = parsed.media_type().as_str().to_owned();
        let stored = StoredManifest {
            bytes: m.bytes.to_vec(),
            media_type: media_type.clone(),
            digest: m.digest,
        };
        let (store, r, t) = (
            self.registry.store().clone(),
            repository.clone(),
            tag.cloned(),
        );
        let bytes = m.bytes.clone();
        let put = blocking(move || {
            store.put_manifest(
                &r,
                &bytes,
                &media_type,
                expected.or(Some(m.digest)),
                t.as_ref(),
            )
        })
        .await;
        if let Err(e) = put {
            // Unwritable store: serve it anyway, without storing.
            tracing::warn!(%repository, error = %e, "manifest not stored");
        }
        Ok(stored)
    }

    async fn refresh_tag(&self, repository: &Repository, tag: &Tag, source: &Source) -> Refresh {
        let inner = &self.registry.0;
        let key = (repository.to_string(), tag.to_string());
        let fresh = |key: &TagKey| {
            inner
                .tag_checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(key)
                .is_some_and(|at| at.elapsed() < inner.settings.tag_ttl)
        };
        if fresh(&key) {
            return Refresh::Fresh;
        }
        let flight = inner
            .tag_flights
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_default()
            .clone();
        let _guard = flight.lock().await;
        if fresh(&key) {
            return Refresh::Fresh;
        }
        let result = self.refresh_tag_now(repository, tag, source).await;
        if matches!(result, Refresh::Fresh) {
            inner
                .tag_checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.clone(), Instant::now());
        }
        inner
            .tag_flights
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        result
    }

    async fn refresh_tag_now(
        &self,
        repository: &Repository,
        tag: &Tag,
        source: &Source,
    ) -> Refresh {
        let head = source
            .remote
            .head_manifest(
                &source.repository,
                tag.as_str(),
                &[oci::media_type::MANIFEST_ACCEPT],
            )
            .await;
        let head = match head {
            Ok(head) => head,
            Err(e) if e.is_not_found() => return Refresh::Missing,
            Err(e) => return Refresh::Failed(e.into()),
        };
        let store = self.registry.store().clone();
        if let Some(digest) = head.digest {
            let (s, r, t) = (store.clone(), repository.clone(), tag.clone());
            let known = blocking(move || {
                if s.has_manifest(&r, &digest) {
                    if s.tag(&r, &t) != Some(digest) {
                        s.set_tag(&r, &t, &digest)?;
                    }
                    Ok(true)
                } else {
                    Ok(false)
                }
            })
            .await;
            if let Ok(true) = known {
                return Refresh::Fresh;
            }
        }
        match self
            .fetch_manifest(repository, tag.as_str(), None, Some(tag), source)
            .await
        {
            Ok(_) => Refresh::Fresh,
            Err(e) if matches!(&e, Error::Upstream(u) if u.is_not_found()) => Refresh::Missing,
            Err(e) => Refresh::Failed(e),
        }
    }

    async fn get_blob(
        &self,
        repository: &Repository,
        digest: &Digest,
        range: Option<&str>,
        head: bool,
    ) -> Response<ResponseBody> {
        let store = self.registry.store().clone();
        let d = *digest;
        let local = {
            let store = store.clone();
            blocking(move || store.open_blob(&d)).await
        };
        match local {
            Ok(Some((file, len))) => {
                return serve_blob(digest, Content::Complete(Arc::new(file)), len, range, head);
            }
            Ok(None) => {}
            Err(e) => return from_error(&e),
        }
        let source = match self.role {
            Role::Read => self.registry.source(repository),
            Role::Write => None,
        };
        let Some(source) = source else {
            return error_response(
                404,
                ErrorCode::BlobUnknown,
                &format!("blob unknown: {digest}"),
            );
        };
        if store.usage().map(|u| u.refusal.is_some()).unwrap_or(true) {
            return self.direct(&source, digest, range, head).await;
        }
        let mut rx = self.registry.0.fills.join(&store, source.clone(), *digest);
        match fill::started(&mut rx).await {
            FillState::Streaming {
                file,
                total: Some(total),
                ..
            } => serve_blob(digest, Content::Growing(file, rx), total, range, head),
            FillState::Streaming {
                file, total: None, ..
            } => {
                if head || range.is_some() {
                    return match fill::finished(&mut rx).await {
                        FillState::Done { file, size } => {
                            serve_blob(digest, Content::Complete(file), size, range, head)
                        }
                        FillState::Failed { reason, status } => {
                            fill_failed(digest, &reason, status)
                        }
                        _ => self.direct(&source, digest, range, head).await,
                    };
                }
                let mut headers = blob_headers(digest, 0);
                headers.remove(header::CONTENT_LENGTH);
                respond(StatusCode::OK, headers, body::growing(file, 0, None, rx))
            }
            FillState::Done { file, size } => {
                serve_blob(digest, Content::Complete(file), size, range, head)
            }
            FillState::Failed { reason, status } => fill_failed(digest, &reason, status),
            FillState::Unstorable => self.direct(&source, digest, range, head).await,
            FillState::Connecting => fill_failed(digest, "fill aborted", 502),
        }
    }

    /// Streams from the upstream without storing (the store refuses writes).
    async fn direct(
        &self,
        source: &Source,
        digest: &Digest,
        range: Option<&str>,
        head: bool,
    ) -> Response<ResponseBody> {
        if head {
            return match source.remote.head_blob(&source.repository, digest).await {
                Ok(h) => {
                    let mut headers = blob_headers(digest, h.size.unwrap_or(0));
                    if h.size.is_none() {
                        headers.remove(header::CONTENT_LENGTH);
                    }
                    respond(StatusCode::OK, headers, body::empty())
                }
                Err(e) => blob_upstream_error(digest, e),
            };
        }
        match source
            .remote
            .get_blob(&source.repository, digest, range, None)
            .await
        {
            Ok(response) => {
                let (status, upstream_headers, body) = response.into_parts();
                let mut headers = blob_headers(digest, 0);
                headers.remove(header::CONTENT_LENGTH);
                for name in [header::CONTENT_LENGTH, header::CONTENT_RANGE] {
                    if let Some(v) = upstream_headers.get(&name) {
                        headers.insert(name, v.clone());
                    }
                }
                let stream = body.map_err(std::io::Error::other).map_ok(Frame::data);
                respond(
                    status,
                    headers,
                    BodyExt::boxed_unsync(StreamBody::new(stream)),
                )
            }
            Err(e) => blob_upstream_error(digest, e),
        }
    }

    async fn tags(
        &self,
        repository: &Repository,
        n: Option<u32>,
        last: Option<&str>,
    ) -> Response<ResponseBody> {
        let source = match self.role {
            Role::Read => self.registry.source(repository),
            Role::Write => None,
        };
        let mut tags = None;
        if let Some(source) = source {
            match source.remote.all_tags(&source.repository).await {
                Ok(t) => tags = Some(t),
                Err(e) => {
                    tracing::warn!(%repository, error = %e, "upstream tag list failed; listing local tags");
                }
            }
        }
        if tags.is_none() {
            let (store, r) = (self.registry.store().clone(), repository.clone());
            match blocking(move || store.tags(&r)).await {
                Ok(t) => tags = t,
                Err(e) => return from_error(&e),
            }
        }
        let Some(tags) = tags else {
            return error_response(
                404,
                ErrorCode::NameUnknown,
                &format!("repository name not known to registry: {repository}"),
            );
        };
        let page = oci::pagination::paginate(tags, n, last);
        let mut headers = HeaderMap::new();
        let path = format!("/v2/{repository}/tags/list");
        if let Some(n) = n
            && let Some(link) = page.link(&path, n)
        {
            headers.insert(header::LINK, value(&link));
        }
        let list = oci::pagination::TagList {
            name: repository.to_string(),
            tags: page.items,
        };
        let bytes = serde_json::to_vec(&list).unwrap_or_default();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::CONTENT_LENGTH, value(&bytes.len().to_string()));
        respond(StatusCode::OK, headers, body::full(bytes))
    }

    async fn write_route<B>(
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
            ) => {
                let result = blocking(move || match &reference {
                    ManifestReference::Digest(d) => store.delete_manifest(&repository, d),
                    ManifestReference::Tag(t) => store.delete_tag(&repository, t),
                })
                .await;
                match result {
                    Ok(true) => respond(StatusCode::ACCEPTED, HeaderMap::new(), body::empty()),
                    Ok(false) => {
                        error_response(404, ErrorCode::ManifestUnknown, "manifest unknown")
                    }
                    Err(e) => from_error(&e),
                }
            }
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

fn fill_failed(digest: &Digest, reason: &str, status: u16) -> Response<ResponseBody> {
    if status == 404 {
        return error_response(
            404,
            ErrorCode::BlobUnknown,
            &format!("blob unknown: {digest}"),
        );
    }
    error_response(status, ErrorCode::Unavailable, reason)
}

fn blob_upstream_error(digest: &Digest, e: registry_client::Error) -> Response<ResponseBody> {
    if e.is_not_found() {
        return error_response(
            404,
            ErrorCode::BlobUnknown,
            &format!("blob unknown: {digest}"),
        );
    }
    from_error(&Error::Upstream(e))
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
