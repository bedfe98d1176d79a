//! The request pipeline of both listeners: parse → authenticate → route → pull | push |
//! management → answer.
//!
//! - parse: [`oci::path::parse`], path and query to a typed [`Route`];
//! - authenticate ([`authenticate`]): Basic or Bearer credentials against the accounts, the
//!   publish endpoint's client certificate, the token endpoint ([`token_endpoint`]);
//! - route ([`Listener::handle`]): method and route to a stage, or an OCI error;
//! - pull ([`pull`]): manifests, blobs and tags: local lookup, then (read listener, on a miss)
//!   a single-flight fill from the upstream;
//! - push ([`push`]): upload sessions, streamed bodies, manifests checked against the store;
//! - referrers ([`referrers`]): the OCI 1.1 referrers API;
//! - management ([`management`]): deletes;
//! - answer ([`respond`]): the OCI headers and error bodies every stage shares; a request body
//!   the answer left unread is discarded or the connection closed ([`unread`]).
//!
//! The read listener (the "5001" role) serves the pull API and fills from the upstream; it
//! refuses writes. The write listener (the "5003" role) serves the push API and the pull API
//! from the store only; as the publish endpoint it also requires a client certificate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use oci::{Digest, ErrorCode, Repository, Route};
use tokio::time::Instant;

use crate::auth::{Access, Accounts};
use crate::body::{self, ResponseBody};
use crate::error::Error;
use crate::fill::{self, FillState, Fills, Source};
use crate::store::Store;
use push::Uploads;
use respond::respond;

mod authenticate;
mod management;
mod pull;
mod push;
mod referrers;
mod respond;
mod token_endpoint;
mod unread;

pub use respond::error_response;
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
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    /// The client presented a certificate that chains to the configured client CA.
    pub client_certificate: bool,
    /// The connection is TLS (the scheme of the token endpoint's address in a challenge).
    pub tls: bool,
    /// The client's address as the request is logged: the socket's peer, or the one the
    /// ingress in front forwarded ([`crate::realip`]).
    pub address: std::net::IpAddr,
}

impl Default for Peer {
    fn default() -> Self {
        Self {
            client_certificate: false,
            tls: false,
            address: std::net::Ipv4Addr::UNSPECIFIED.into(),
        }
    }
}

impl Peer {
    /// A plain-HTTP connection: nobody fronts it, so its socket's peer is the client.
    pub fn plain(stream: &tokio::net::TcpStream) -> Self {
        Self {
            address: stream
                .peer_addr()
                .map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |a| a.ip()),
            ..Self::default()
        }
    }
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

    /// What a TLS connection to this listener may queue of a response. The read listener
    /// streams blobs to every node's pulls at once, so it keeps little per connection
    /// ([`http_serve::Bounds::STREAMING`]). The write listener takes uploads, and hyper's buffer
    /// cap is also its read size: 16 KiB reads of an upload cost a quarter more CPU per GiB
    /// received, so it keeps hyper's defaults.
    pub(crate) fn bounds(&self) -> http_serve::Bounds {
        match self.role {
            Role::Read => http_serve::Bounds::STREAMING,
            Role::Write => http_serve::Bounds::default(),
        }
    }

    /// The registry this listener serves.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Answers one request. A body the answer did not need is discarded or the connection
    /// closed ([`unread`]), so the connection stays in step for the client's next request.
    pub async fn handle<B>(&self, request: Request<B>, peer: Peer) -> Response<ResponseBody>
    where
        B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        let announced = unread::announced(request.headers());
        let (parts, body) = request.into_parts();
        let (method, path) = (parts.method.clone(), parts.uri.path().to_owned());
        let (kept, leftover) = unread::Kept::new(body);
        let response = self.route(Request::from_parts(parts, kept), peer).await;
        self.access_log(peer, &method, &path, response.status());
        leftover.settle(announced, response).await
    }

    /// One line per request, naming the client by [`Peer::address`]: at `info` on the write
    /// listener (pushes are rare and each one matters), at `debug` on the read listener.
    fn access_log(&self, peer: Peer, method: &Method, path: &str, status: StatusCode) {
        let client = peer.address;
        let status = status.as_u16();
        match self.role {
            Role::Write => {
                tracing::info!(listener = "write", %client, %method, path, status, "request");
            }
            Role::Read => {
                tracing::debug!(listener = "read", %client, %method, path, status, "request");
            }
        }
    }

    /// parse → authenticate → route to a stage.
    async fn route<B>(&self, request: Request<B>, peer: Peer) -> Response<ResponseBody>
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
        if let Some(refused) = self.authenticate(&request, peer, needed, repository.as_deref()) {
            return refused;
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
            (
                Method::GET,
                Route::Referrers {
                    repository,
                    digest,
                    artifact_type,
                    n,
                    last,
                },
            ) => {
                let query = referrers::Query {
                    artifact_type,
                    n,
                    last,
                };
                self.referrers(&repository, &digest, query).await
            }
            (_, Route::Catalog { .. }) => error_response(
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
}
