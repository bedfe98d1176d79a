//! The agent's request path: parse → route → forward to each target in order → relay the first
//! usable answer, streamed, byte for byte.
//!
//! Failover, per target in order:
//! - transport error or timeout → next (`unreachable`);
//! - 401/403 to credentials *we* supplied → next (`unauthorized`); the challenge is never
//!   relayed, it would send containerd to a backend's token realm;
//! - 5xx with targets left → next (`server_error`);
//! - 404 → relayed, never retried elsewhere (the cache decides whether to fetch upstream);
//! - anything else → relayed.
//!
//! The last target's answer is relayed as it is, a 5xx included (as Deckhouse's agent does); a
//! 502 naming the last failure only when no target answered usably. Whole-blob GETs are
//! verified against their digest while relayed and resumed elsewhere when they break mid-body
//! (`blob`). Only `Accept`, `Accept-Encoding`, `Range` and `User-Agent` are forwarded; the
//! client's `Authorization` only on PassThrough, where the target's challenge also comes back
//! untouched so imagePullSecrets keep working.

use std::sync::{Arc, RwLock};

use bytes::Bytes;
use futures_util::TryStreamExt;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use oci::{ErrorCode, Route};
use registry_plan::route::{Kind, Resolution, Target, resolve};

mod avoid;
mod blob;
use registry_plan::{Layout, Scheme};

use crate::metrics::{FailoverReason, Metrics, Outcome};
use crate::upstream::{Answer, Destination, Failure, Upstreams};

/// A response body the agent sends: a relayed stream or a small local answer.
pub type ProxyBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// The layout the proxy routes with, swapped atomically by the layout loop; requests in flight
/// keep the layout they started with.
#[derive(Clone, Debug, Default)]
pub struct LayoutCell(Arc<RwLock<Option<Arc<Layout>>>>);

impl LayoutCell {
    /// The current layout.
    pub fn get(&self) -> Option<Arc<Layout>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the layout.
    pub fn set(&self, layout: Option<Layout>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = layout.map(Arc::new);
    }
}

/// Forwards registry requests.
#[derive(Clone, Debug)]
pub struct Proxy {
    /// Credentials: token exchanges and their cache.
    client: registry_client::Client,
    /// The forwarded requests themselves.
    upstreams: Arc<Upstreams>,
    layout: LayoutCell,
    trust: Arc<RwLock<Option<Arc<str>>>>,
    metrics: Arc<Metrics>,
    own_address: String,
    /// Targets that served a blob with the wrong bytes, tried last for that digest.
    suspects: Arc<blob::Suspects>,
    /// Targets that recently refused, reset or timed out, tried after the others for a while.
    avoided: Arc<avoid::Avoided>,
}

/// Request headers forwarded to targets.
const FORWARDED: [header::HeaderName; 4] = [
    header::ACCEPT,
    header::ACCEPT_ENCODING,
    header::RANGE,
    header::USER_AGENT,
];

/// What to do with one target's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Relay it to the client.
    Relay(Outcome),
    /// Try the next target.
    Next(FailoverReason),
}

/// The failover rule for a target that answered `status`. `ours` says whether the agent sent
/// its own credentials; `last` whether this was the last target.
pub fn judge(status: StatusCode, ours: bool, last: bool) -> Verdict {
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN if ours => {
            Verdict::Next(FailoverReason::unauthorized)
        }
        s if s.is_server_error() && !last => Verdict::Next(FailoverReason::server_error),
        StatusCode::NOT_FOUND => Verdict::Relay(Outcome::not_found),
        // The last target's own failure, relayed unchanged as Deckhouse's agent relays it.
        s if s.is_server_error() => Verdict::Relay(Outcome::unavailable),
        _ => Verdict::Relay(Outcome::served),
    }
}

impl Proxy {
    /// A proxy answering for `own_address` (`127.0.0.1:5001`), routing with `layout`.
    pub fn new(
        client: registry_client::Client,
        layout: LayoutCell,
        metrics: Arc<Metrics>,
        own_address: &str,
    ) -> Self {
        Self {
            upstreams: Arc::new(Upstreams::new(client.config())),
            client,
            layout,
            trust: Arc::default(),
            metrics,
            own_address: own_address.to_owned(),
            suspects: Arc::default(),
            avoided: Arc::default(),
        }
    }

    /// Sets the extra CAs (PEM) trusted for every target besides the system roots: the node's
    /// trust directory. PassThrough targets are verified against them too.
    pub fn set_trust(&self, pem: Option<String>) {
        *self.trust.write().unwrap_or_else(|e| e.into_inner()) = pem.map(Arc::from);
    }

    /// Answers one request.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<ProxyBody> {
        let path = request.uri().path();
        if path == "/healthz" {
            return text(StatusCode::OK, "ok");
        }
        if !path.starts_with("/v2/") && path != "/v2" {
            return oci_error(
                StatusCode::NOT_FOUND,
                ErrorCode::Unsupported,
                "not a registry API path",
            );
        }
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return oci_error(
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorCode::Unsupported,
                "the node agent serves pulls only",
            );
        }
        if path == "/v2" || path == "/v2/" {
            return with_api_version(json(StatusCode::OK, Bytes::from_static(b"{}")));
        }
        let parsed = match oci::path::parse(path, request.uri().query()) {
            Ok(parsed) => parsed,
            Err(error) => {
                let status =
                    StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
                return oci_error(status, error.error_code(), &error.to_string());
            }
        };
        let Some(repository) = forwardable(&parsed.route) else {
            return oci_error(
                StatusCode::BAD_REQUEST,
                ErrorCode::Unsupported,
                "not a pull endpoint",
            );
        };
        let ns = parsed.ns.as_ref().map(ToString::to_string);
        let remainder = parsed.route.suffix();
        let layout = self.layout.get();
        let routed = resolve(
            &registry_plan::route::Request {
                ns: ns.as_deref(),
                repository: repository.as_str(),
                remainder: &remainder,
            },
            layout.as_deref(),
            &self.own_address,
        );
        let resolution = match routed {
            Ok(resolution) => resolution,
            Err(error) => {
                tracing::warn!(ns = ns.as_deref().unwrap_or(""), repo = %repository, %error, "unroutable");
                self.metrics.request("Unroutable", Outcome::unroutable);
                return oci_error(
                    StatusCode::BAD_GATEWAY,
                    ErrorCode::Unavailable,
                    &error.to_string(),
                );
            }
        };
        let query = parsed.route.query();
        let blob = match &parsed.route {
            Route::Blob { digest, .. } => Some(*digest),
            _ => None,
        };
        self.forward(
            request.method(),
            request.headers(),
            &resolution,
            query.as_deref(),
            repository.as_str(),
            blob,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn forward(
        &self,
        method: &Method,
        client_headers: &HeaderMap,
        resolution: &Resolution<'_>,
        query: Option<&str>,
        client_repository: &str,
        blob: Option<oci::Digest>,
    ) -> Response<ProxyBody> {
        let kind = resolution.kind;
        let headers = forwarded_headers(client_headers, kind);
        let hops: Vec<Hop> = resolution.targets.iter().map(Hop::of).collect();
        // Targets that failed to answer go behind the others until they answer again.
        let standings = self.avoided.standings(hops.iter().map(Hop::name));
        for (hop, standing) in hops.iter().zip(&standings) {
            if *standing == avoid::Standing::Due {
                tokio::spawn(self.clone().probe(hop.clone()));
            }
        }
        let flags: Vec<bool> = standings
            .iter()
            .map(|s| *s != avoid::Standing::Good)
            .collect();
        let mut hops: Vec<Hop> = avoid::order(&flags)
            .into_iter()
            .map(|i| hops[i].clone())
            .collect();
        // A blob verified whole: its relay can check the digest, and resume elsewhere.
        let whole_blob =
            blob.filter(|_| *method == Method::GET && !client_headers.contains_key(header::RANGE));
        // A target caught serving this blob wrong goes last, for parts of it too (a client
        // resuming its own download with Range).
        if let Some(digest) = &blob {
            self.suspects.steer(digest, &mut hops);
        }
        let mut last_failure = String::new();
        let count = hops.len();
        for (index, hop) in hops.iter().enumerate() {
            let last = index + 1 == count;
            let name = hop.name();
            let response = match self.send(method, &headers, hop, query, !last).await {
                Ok(response) => response,
                Err(error) => {
                    tracing::warn!(target = %name, error = %error, "target unreachable");
                    last_failure = format!("{name}: {error}");
                    if !last {
                        self.metrics.failover(name, FailoverReason::unreachable);
                    }
                    continue;
                }
            };
            let status = response.status;
            match judge(
                status,
                hop.credentials.is_some() && response.credentials_sent,
                last,
            ) {
                Verdict::Next(reason) => {
                    tracing::warn!(target = %name, %status, "failing over");
                    last_failure = format!("{name} answered {}", status.as_u16());
                    if !last {
                        self.metrics.failover(name, reason);
                    }
                }
                Verdict::Relay(outcome) => {
                    if let Some(digest) = whole_blob
                        && status == StatusCode::OK
                    {
                        let relay = blob::Relay::new(
                            self.clone(),
                            kind,
                            digest,
                            headers,
                            hops.clone(),
                            index,
                            query.map(str::to_owned),
                        );
                        return relay.start(response, client_repository);
                    }
                    self.metrics.request(kind.as_str(), outcome);
                    return relay(response, kind, &hop.repository, client_repository);
                }
            }
        }
        self.metrics.request(kind.as_str(), Outcome::all_failed);
        let message = if last_failure.contains("answered") {
            format!("every registry failed, the last with {last_failure}")
        } else {
            format!("no registry could be reached: {last_failure}")
        };
        oci_error(StatusCode::BAD_GATEWAY, ErrorCode::Unavailable, &message)
    }

    /// Sends `method` to `target`'s path (with `query`) and returns its answer once the head is
    /// in. With `others_left`, the wait ends early when the target fails another request
    /// meanwhile: the caller has somewhere else to go.
    pub(crate) async fn send(
        &self,
        method: &Method,
        headers: &HeaderMap,
        target: &Hop,
        query: Option<&str>,
        others_left: bool,
    ) -> Result<Answer, Failure> {
        let path_and_query = match query {
            Some(q) => format!("{}?{q}", target.path),
            None => target.path.clone(),
        };
        let destination = self.destination(target, &path_and_query, true)?;
        let sent_at = std::time::Instant::now();
        let sent = tokio::select! {
            sent = self.upstreams.send(method, headers, &destination) => sent,
            () = self.avoided.fails_after(target.name(), sent_at), if others_left => {
                Err(Failure::Transport {
                    url: format!("{}{path_and_query}", destination.base),
                    reason: "not waited for: the registry failed another request meanwhile".into(),
                })
            }
        };
        match &sent {
            Ok(_) => {
                if self.avoided.answered(target.name()) {
                    tracing::info!(target = %target.name(), "target answers again; no longer avoided");
                    self.metrics.back(target.name());
                }
            }
            Err(Failure::Transport { .. } | Failure::Timeout { .. }) => {
                self.failed_to_answer(target)
            }
            Err(_) => {}
        }
        sent
    }

    /// Asks an avoided `target` whose window has lapsed `GET /v2/`, without credentials: any
    /// answer puts it back in its place, no answer opens its next window.
    async fn probe(self, target: Hop) {
        let sent = match self.destination(&target, "/v2/", false) {
            Ok(destination) => self
                .upstreams
                .send(&Method::GET, &HeaderMap::new(), &destination)
                .await
                .map(drop),
            Err(error) => Err(error),
        };
        match sent {
            Err(Failure::Transport { .. } | Failure::Timeout { .. }) => {
                self.failed_to_answer(&target)
            }
            // An answer (a redirect that cannot be followed is one too), or no way to ask (its
            // CA does not parse), which requests meet as well: back in its place either way.
            _ => {
                if self.avoided.probe_answered(target.name()) {
                    tracing::info!(target = %target.name(), "target back in its place after its probe");
                    self.metrics.back(target.name());
                }
            }
        }
    }

    /// Where a request to `target`'s `path_and_query` goes; with `auth`, authorized with the
    /// target's credentials.
    fn destination<'p>(
        &self,
        target: &Hop,
        path_and_query: &'p str,
        auth: bool,
    ) -> Result<Destination<'p>, Failure> {
        let scheme = target.scheme();
        let trust = self.trust.read().unwrap_or_else(|e| e.into_inner()).clone();
        let roots: Vec<&str> = target
            .ca
            .as_deref()
            .into_iter()
            .chain(trust.as_deref())
            .collect();
        let roots = (!roots.is_empty()).then(|| roots.join("\n"));
        let auth = match target.credentials.as_ref().filter(|_| auth) {
            Some(credentials) => {
                let mut endpoint = registry_client::Endpoint::new(scheme, &target.host)
                    .credentials(registry_client::Credentials::new(
                        &credentials.username,
                        &credentials.password,
                    ));
                if let Some(roots) = &roots {
                    endpoint = endpoint.ca_pem(roots);
                }
                let remote = self.client.remote(endpoint)?;
                Some((remote, registry_client::Scope::pull(&target.repository)))
            }
            None => None,
        };
        Ok(Destination {
            base: format!("{}://{}", scheme.as_str(), target.host),
            path_and_query,
            roots,
            auth,
        })
    }

    /// `target` refused, reset or timed out: tried after the others until it answers again, and
    /// its kept connections (as silent as it, most likely) are closed.
    pub(crate) fn failed_to_answer(&self, target: &Hop) {
        let name = target.name();
        if let Some(record) = self.avoided.fail(name) {
            let window = avoid::window(record.failures);
            tracing::warn!(
                target = %name,
                failures = record.failures,
                avoided_for = ?window,
                "target failed to answer; tried after the others for a while"
            );
            self.metrics.avoided(name);
            self.upstreams
                .forget(&format!("{}://{name}/", target.scheme().as_str()));
        }
    }
}

/// A target with everything owned, so that a blob relay can go back to it (or the next) after
/// the response has left [`Proxy::handle`].
#[derive(Clone, Debug)]
pub(crate) struct Hop {
    scheme: Scheme,
    host: String,
    path: String,
    ca: Option<String>,
    credentials: Option<registry_plan::Credentials>,
    repository: String,
}

impl Hop {
    fn of(target: &Target<'_>) -> Self {
        Self {
            scheme: target.scheme,
            host: target.host.to_string(),
            path: target.path.clone(),
            ca: target.ca.map(str::to_owned),
            credentials: target.credentials.cloned(),
            repository: target.repository.clone(),
        }
    }

    fn scheme(&self) -> registry_client::Scheme {
        match self.scheme {
            Scheme::Http => registry_client::Scheme::Http,
            Scheme::Https => registry_client::Scheme::Https,
        }
    }

    /// The name in logs and metrics: the host. Bounded, because only configured hosts can be
    /// failed over from: a PassThrough resolution has a single target.
    pub(crate) fn name(&self) -> &str {
        &self.host
    }
}

/// The repository of a pull endpoint the agent forwards; `None` for anything else.
fn forwardable(route: &Route) -> Option<&oci::Repository> {
    match route {
        Route::Manifest { repository, .. }
        | Route::Blob { repository, .. }
        | Route::Tags { repository, .. }
        | Route::Referrers { repository, .. } => Some(repository),
        _ => None,
    }
}

/// The client's headers to forward for `kind`, copied: hyper's values are slices of the buffer
/// the request head was read into, and a blob relay keeps these for the whole stream (to
/// resume), which would keep that buffer alive as long.
fn forwarded_headers(client: &HeaderMap, kind: Kind) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let mut forward = |name: &header::HeaderName| {
        for value in client.get_all(name) {
            headers.append(name.clone(), owned(value));
        }
    };
    FORWARDED.iter().for_each(&mut forward);
    if kind == Kind::PassThrough {
        forward(&header::AUTHORIZATION);
    }
    headers
}

/// `value` in an allocation of its own.
fn owned(value: &HeaderValue) -> HeaderValue {
    let mut copy = HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
    copy.set_sensitive(value.is_sensitive());
    copy
}

/// Relays a target's answer: status, end-to-end headers and the streamed body.
fn relay(
    response: Answer,
    kind: Kind,
    target_repository: &str,
    client_repository: &str,
) -> Response<ProxyBody> {
    let stream = response
        .body
        .map_ok(Frame::data)
        .map_err(std::io::Error::other);
    let body = BodyExt::boxed_unsync(StreamBody::new(stream));
    relay_with(
        response.status,
        &response.headers,
        body,
        kind,
        target_repository,
        client_repository,
    )
}

/// A target's status and end-to-end headers with `body`.
fn relay_with(
    status: StatusCode,
    upstream_headers: &HeaderMap,
    body: ProxyBody,
    kind: Kind,
    target_repository: &str,
    client_repository: &str,
) -> Response<ProxyBody> {
    let mut builder = Response::builder().status(status);
    let headers = builder.headers_mut().expect("a fresh builder has headers");
    for (name, value) in upstream_headers {
        if is_hop_by_hop(name) || (name == header::WWW_AUTHENTICATE && kind != Kind::PassThrough) {
            continue;
        }
        if name == header::LINK {
            headers.append(
                name.clone(),
                rewrite_link(value, target_repository, client_repository),
            );
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    builder.body(body).unwrap_or_else(|_| {
        oci_error(
            StatusCode::BAD_GATEWAY,
            ErrorCode::Unavailable,
            "bad upstream headers",
        )
    })
}

/// Tag-list pagination names the target's repository; the client must see its own.
fn rewrite_link(
    value: &HeaderValue,
    target_repository: &str,
    client_repository: &str,
) -> HeaderValue {
    let Ok(text) = value.to_str() else {
        return value.clone();
    };
    let from = format!("</v2/{target_repository}/");
    let to = format!("</v2/{client_repository}/");
    HeaderValue::from_str(&text.replacen(&from, &to, 1)).unwrap_or_else(|_| value.clone())
}

fn is_hop_by_hop(name: &header::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

pub(crate) fn full(bytes: Bytes) -> ProxyBody {
    BodyExt::boxed_unsync(Full::new(bytes).map_err(|never| match never {}))
}

fn text(status: StatusCode, body: &'static str) -> Response<ProxyBody> {
    let mut response = Response::new(full(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

fn json(status: StatusCode, body: Bytes) -> Response<ProxyBody> {
    let length = body.len();
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    response
}

fn with_api_version(mut response: Response<ProxyBody>) -> Response<ProxyBody> {
    response.headers_mut().insert(
        "docker-distribution-api-version",
        HeaderValue::from_static("registry/2.0"),
    );
    response
}

/// An OCI error response: `{"errors":[{"code","message"}]}` with the API version header.
pub fn oci_error(status: StatusCode, code: ErrorCode, message: &str) -> Response<ProxyBody> {
    let body = oci::ErrorBody::with_message(code, message);
    with_api_version(json(status, Bytes::from(body.to_json())))
}

#[cfg(test)]
mod tests;
