//! The client, one [`Remote`] per endpoint, requests with auth and redirects, and responses with
//! streaming bodies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use tokio::time::Instant;

use crate::auth::{Authorization, Scope, Target, TokenCache, TokenStats};
use crate::body::Body;
use crate::config::Config;
use crate::endpoint::{ClientIdentity, Endpoint, Secret};
use crate::error::{Error, TimeoutPhase, display_url, strip};

/// An upstream registry client: connection pools per TLS configuration and one token cache,
/// shared by every [`Remote`] made from it. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<ClientInner>,
}

#[derive(Debug)]
struct ClientInner {
    config: Config,
    pools: Mutex<HashMap<TlsKey, reqwest::Client>>,
    tokens: TokenCache,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TlsKey {
    ca_pem: Option<String>,
    identity: Option<ClientIdentity>,
}

impl Default for Client {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

impl Client {
    /// A client with these settings.
    pub fn new(config: Config) -> Self {
        // rustls needs a process-wide provider; ring is the project's only one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            inner: Arc::new(ClientInner {
                config,
                pools: Mutex::new(HashMap::new()),
                tokens: TokenCache::default(),
            }),
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Token exchanges so far (for metrics and tests).
    pub fn token_stats(&self) -> TokenStats {
        self.inner.tokens.stats()
    }

    /// A handle on one endpoint. The TLS configuration (system roots plus the endpoint's CA,
    /// client certificate) is built once per distinct configuration and shared.
    pub fn remote(&self, endpoint: Endpoint) -> Result<Remote, Error> {
        let base = endpoint.base_url()?;
        let http = self.pool(&endpoint)?;
        Ok(Remote {
            client: self.clone(),
            endpoint: Arc::new(endpoint),
            base,
            http,
        })
    }

    fn pool(&self, endpoint: &Endpoint) -> Result<reqwest::Client, Error> {
        let key = TlsKey {
            ca_pem: endpoint.ca_pem.clone(),
            identity: endpoint.client_identity.clone(),
        };
        let mut pools = self.inner.pools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = pools.get(&key) {
            return Ok(client.clone());
        }
        let invalid = |reason: String| Error::InvalidEndpoint {
            endpoint: endpoint.display(),
            reason,
        };
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.inner.config.timeouts.connect)
            .tls_version_min(reqwest::tls::Version::TLS_1_2)
            .tcp_nodelay(true);
        if self.inner.config.http1_only {
            builder = builder.http1_only();
        }
        if let Some(pem) = &key.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
                .map_err(|e| invalid(format!("CA PEM: {}", strip(e))))?;
            if certs.is_empty() {
                return Err(invalid("CA PEM holds no certificate".into()));
            }
            builder = builder.tls_certs_merge(certs);
        }
        if let Some(identity) = &key.identity {
            let identity = reqwest::Identity::from_pem(&identity.pem_bundle())
                .map_err(|e| invalid(format!("client certificate: {}", strip(e))))?;
            builder = builder.identity(identity);
        }
        let client = builder
            .build()
            .map_err(|e| invalid(format!("TLS setup: {}", strip(e))))?;
        pools.insert(key, client.clone());
        Ok(client)
    }
}

/// One registry endpoint, ready for requests. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Remote {
    client: Client,
    endpoint: Arc<Endpoint>,
    base: reqwest::Url,
    http: reqwest::Client,
}

/// What a request carries as its body.
#[derive(Debug, Default)]
pub enum RequestBody {
    /// None.
    #[default]
    Empty,
    /// Bytes in memory: the request can be replayed after a 401.
    Bytes(Bytes),
    /// A stream (e.g. a file being uploaded); sent once, never replayed.
    Stream(reqwest::Body),
}

impl RequestBody {
    fn try_clone(&self) -> Option<RequestBody> {
        match self {
            Self::Empty => Some(Self::Empty),
            Self::Bytes(b) => Some(Self::Bytes(b.clone())),
            Self::Stream(_) => None,
        }
    }
}

/// A request being built; see [`Remote::request`] and [`Remote::raw_request`].
#[derive(Debug)]
pub struct RequestBuilder {
    remote: Remote,
    method: Method,
    url: Result<reqwest::Url, Error>,
    headers: HeaderMap,
    body: RequestBody,
    scope: Option<Scope>,
}

impl RequestBuilder {
    /// Appends a header line (repeated names give repeated lines, as clients send `Accept`).
    pub fn header(mut self, name: header::HeaderName, value: &str) -> Self {
        match HeaderValue::from_str(value) {
            Ok(v) => {
                self.headers.append(name, v);
            }
            Err(_) => {
                self.url = Err(Error::InvalidRequest {
                    reason: format!("value of header {name} is not valid header text"),
                });
            }
        }
        self
    }

    /// Appends every header of `headers`, keeping repeated lines.
    pub fn headers(mut self, headers: &HeaderMap) -> Self {
        for (name, value) in headers {
            self.headers.append(name.clone(), value.clone());
        }
        self
    }

    /// Sets the query string (without `?`), replacing any.
    pub fn query(mut self, query: &str) -> Self {
        if let Ok(url) = &mut self.url {
            url.set_query(Some(query).filter(|q| !q.is_empty()));
        }
        self
    }

    /// Appends `name=value` (URL-encoded) to the query.
    pub fn query_pair(mut self, name: &str, value: &str) -> Self {
        if let Ok(url) = &mut self.url {
            url.query_pairs_mut().append_pair(name, value);
        }
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: RequestBody) -> Self {
        self.body = body;
        self
    }

    /// Overrides the token scope (default: pull for GET/HEAD, delete for DELETE, pull+push
    /// otherwise).
    pub fn scope(mut self, scope: Option<Scope>) -> Self {
        self.scope = scope;
        self
    }

    /// Sends it: authenticates (token flow, Basic or anonymous), follows redirects without
    /// carrying `Authorization` to another origin, and returns the status, headers and a
    /// streaming body. Non-success statuses are answers, not errors: see
    /// [`Response::error_for_status`].
    pub async fn send(self) -> Result<Response, Error> {
        let url = self.url?;
        self.remote
            .execute(self.method, url, self.headers, self.body, self.scope)
            .await
    }
}

impl Remote {
    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The client this remote belongs to.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// A request to `/v2/<prefix>/<repository>/<rest>`: `repository` is relative to the
    /// endpoint's prefix and validated against the distribution name grammar; `rest` is e.g.
    /// `manifests/latest`, `blobs/sha256:…`, `tags/list`.
    pub fn request(&self, method: Method, repository: &str, rest: &str) -> RequestBuilder {
        let full = self.endpoint.full_repository(repository);
        let url = oci::Repository::parse(&full)
            .map_err(|e| Error::InvalidRequest {
                reason: format!("repository {full:?}: {e}"),
            })
            .and_then(|_| self.join(&format!("v2/{full}/{}", rest.trim_start_matches('/'))));
        let scope = if method == Method::GET || method == Method::HEAD {
            Scope::pull(&full)
        } else if method == Method::DELETE {
            Scope::delete(&full)
        } else {
            Scope::push(&full)
        };
        RequestBuilder {
            remote: self.clone(),
            method,
            url,
            headers: HeaderMap::new(),
            body: RequestBody::Empty,
            scope: Some(scope),
        }
    }

    /// A request to any path of the registry (e.g. `/v2/`, or a deliberately invalid name for a
    /// conformance check): nothing is validated, no prefix is added, and the token scope is
    /// whatever `scope` says (`None`: no authentication at all).
    pub fn raw_request(
        &self,
        method: Method,
        path_and_query: &str,
        scope: Option<Scope>,
    ) -> RequestBuilder {
        let url = self.join(path_and_query.trim_start_matches('/'));
        RequestBuilder {
            remote: self.clone(),
            method,
            url,
            headers: HeaderMap::new(),
            body: RequestBody::Empty,
            scope,
        }
    }

    /// A request to an upload or blob `Location` a registry answered with: absolute, or relative
    /// to this registry. Nothing is validated; `scope` as in [`raw_request`](Self::raw_request).
    pub fn location_request(
        &self,
        method: Method,
        location: &str,
        scope: Option<Scope>,
    ) -> RequestBuilder {
        RequestBuilder {
            remote: self.clone(),
            method,
            url: self.join(location),
            headers: HeaderMap::new(),
            body: RequestBody::Empty,
            scope,
        }
    }

    /// A request to an absolute URL on this registry or elsewhere (an upload `Location`).
    pub(crate) fn url_request(
        &self,
        method: Method,
        url: reqwest::Url,
        scope: Scope,
    ) -> RequestBuilder {
        RequestBuilder {
            remote: self.clone(),
            method,
            url: Ok(url),
            headers: HeaderMap::new(),
            body: RequestBody::Empty,
            scope: Some(scope),
        }
    }

    pub(crate) fn join(&self, path: &str) -> Result<reqwest::Url, Error> {
        self.base.join(path).map_err(|e| Error::InvalidRequest {
            reason: format!("path {path:?}: {e}"),
        })
    }

    /// The `Authorization` value this client sends to this endpoint for `scope`: a cached or
    /// freshly exchanged token, Basic credentials, or `None` where the registry takes anonymous
    /// requests. For callers that send the request over a transport of their own; after a 401
    /// they call [`forget_authorization`](Self::forget_authorization) and ask again, once.
    pub async fn authorization(&self, scope: &Scope) -> Result<Option<Secret>, Error> {
        let auth = self
            .client
            .inner
            .tokens
            .authorize(&self.target(), scope)
            .await?;
        Ok(auth.header)
    }

    /// Forgets `used` for `scope` (the registry refused it), unless a newer value was fetched
    /// meanwhile.
    pub async fn forget_authorization(&self, scope: &Scope, used: Option<Secret>) {
        let used = Authorization { header: used };
        self.client
            .inner
            .tokens
            .invalidate(&self.target(), scope, &used)
            .await;
    }

    fn target(&self) -> Target<'_> {
        Target {
            http: &self.http,
            base: &self.base,
            host: &self.endpoint.host,
            credentials: self.endpoint.credentials.as_ref(),
            timeout: self.client.inner.config.timeouts.response_headers,
            user_agent: &self.client.inner.config.user_agent,
        }
    }

    async fn execute(
        &self,
        method: Method,
        url: reqwest::Url,
        mut headers: HeaderMap,
        body: RequestBody,
        scope: Option<Scope>,
    ) -> Result<Response, Error> {
        let config = &self.client.inner.config;
        if !headers.contains_key(header::USER_AGENT)
            && let Ok(v) = HeaderValue::from_str(&config.user_agent)
        {
            headers.insert(header::USER_AGENT, v);
        }
        let deadline = config.timeouts.total.map(|t| Instant::now() + t);
        let tokens = &self.client.inner.tokens;
        let mut body = Some(body);
        let mut replay_left = 1;
        loop {
            let auth = match &scope {
                // Only our own registry gets our credentials: a caller-supplied Authorization
                // (pass-through) is left alone and ours is not added.
                Some(scope) if !headers.contains_key(header::AUTHORIZATION) => {
                    Some(tokens.authorize(&self.target(), scope).await?)
                }
                _ => None,
            };
            let current = body.take().unwrap_or_default();
            let spare = if replay_left > 0 {
                current.try_clone()
            } else {
                None
            };
            let response = self
                .follow(
                    method.clone(),
                    url.clone(),
                    headers.clone(),
                    current,
                    auth.as_ref(),
                    deadline,
                )
                .await?;
            if response.status == StatusCode::UNAUTHORIZED
                && let (Some(scope), Some(auth), Some(spare)) = (&scope, &auth, spare)
            {
                // The cached token (or decision) is stale: forget it and try once more.
                tracing::debug!(url = %display_url(&url), "401 with cached authorization; refreshing");
                tokens.invalidate(&self.target(), scope, auth).await;
                replay_left -= 1;
                body = Some(spare);
                continue;
            }
            return Ok(response);
        }
    }

    /// Sends one request and follows redirects (GET and HEAD only), at most `max_redirects`.
    /// `Authorization` (ours or the caller's) goes only to the origin it was meant for.
    async fn follow(
        &self,
        mut method: Method,
        start: reqwest::Url,
        mut headers: HeaderMap,
        body: RequestBody,
        auth: Option<&Authorization>,
        deadline: Option<Instant>,
    ) -> Result<Response, Error> {
        let config = &self.client.inner.config;
        let follows =
            matches!(body, RequestBody::Empty) && (method == Method::GET || method == Method::HEAD);
        let mut our_auth = auth.and_then(|a| a.header.clone());
        let mut url = start.clone();
        let mut body = Some(body);
        let mut hops = 0;
        loop {
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .headers(headers.clone());
            if let Some(secret) = &our_auth
                && let Ok(mut value) = HeaderValue::from_str(secret.expose())
            {
                value.set_sensitive(true);
                request = request.header(header::AUTHORIZATION, value);
            }
            match body.take().unwrap_or_default() {
                RequestBody::Empty => {}
                RequestBody::Bytes(b) => request = request.body(b),
                RequestBody::Stream(s) => request = request.body(s),
            }
            let mut wait = config.timeouts.response_headers;
            let mut phase = TimeoutPhase::ResponseHeaders;
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left < wait {
                    wait = left;
                    phase = TimeoutPhase::Total;
                }
            }
            let response = match tokio::time::timeout(wait, request.send()).await {
                Err(_) => {
                    let after = if phase == TimeoutPhase::Total {
                        config.timeouts.total.unwrap_or(wait)
                    } else {
                        wait
                    };
                    return Err(Error::Timeout {
                        phase,
                        after,
                        url: display_url(&url),
                    });
                }
                Ok(Err(e)) => return Err(send_error(e, &url, config)),
                Ok(Ok(r)) => r,
            };
            let status = response.status();
            if follows && is_redirect(status) {
                hops += 1;
                if hops > config.max_redirects {
                    return Err(Error::TooManyRedirects {
                        limit: config.max_redirects,
                        url: display_url(&start),
                    });
                }
                let next = response
                    .headers()
                    .get(header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|loc| url.join(loc).ok())
                    .filter(|u| matches!(u.scheme(), "http" | "https"))
                    .ok_or_else(|| Error::BadRedirect {
                        url: display_url(&url),
                    })?;
                if !same_origin(&url, &next) {
                    our_auth = None;
                    headers.remove(header::AUTHORIZATION);
                }
                tracing::debug!(from = %display_url(&url), to = %display_url(&next), "following redirect");
                if status == StatusCode::SEE_OTHER {
                    method = if method == Method::HEAD {
                        Method::HEAD
                    } else {
                        Method::GET
                    };
                }
                url = next;
                body = Some(RequestBody::Empty);
                continue;
            }
            return Ok(Response::new(
                response,
                &method,
                our_auth.is_some(),
                config,
                deadline,
            ));
        }
    }
}

fn is_redirect(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

fn same_origin(a: &reqwest::Url, b: &reqwest::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str().map(str::to_ascii_lowercase) == b.host_str().map(str::to_ascii_lowercase)
        && a.port_or_known_default() == b.port_or_known_default()
}

fn send_error(e: reqwest::Error, url: &reqwest::Url, config: &Config) -> Error {
    let url = display_url(url);
    if e.is_connect() {
        if e.is_timeout() || source_is_timeout(&e) {
            return Error::Timeout {
                phase: TimeoutPhase::Connect,
                after: config.timeouts.connect,
                url,
            };
        }
        return Error::Connect {
            url,
            source: strip(e),
        };
    }
    if e.is_timeout() {
        return Error::Timeout {
            phase: TimeoutPhase::Connect,
            after: config.timeouts.connect,
            url,
        };
    }
    Error::Transport {
        url,
        source: strip(e),
    }
}

fn source_is_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return true;
        }
        if s.to_string().contains("timed out") {
            return true;
        }
        source = s.source();
    }
    false
}

/// A registry's answer: status, headers, and a streaming [`Body`].
#[derive(Debug)]
pub struct Response {
    status: StatusCode,
    headers: HeaderMap,
    url: reqwest::Url,
    credentials_sent: bool,
    body: Body,
}

impl Response {
    fn new(
        response: reqwest::Response,
        method: &Method,
        credentials_sent: bool,
        config: &Config,
        deadline: Option<Instant>,
    ) -> Self {
        let status = response.status();
        let headers = response.headers().clone();
        let url = response.url().clone();
        let no_body = *method == Method::HEAD
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED;
        let body = if no_body {
            Body::empty()
        } else {
            let expected_len = content_length(&headers);
            let deadline = deadline.map(|at| {
                (
                    at,
                    config.timeouts.total.unwrap_or_default(),
                    display_url(&url),
                )
            });
            Body::watched(
                Box::pin(futures_util::TryStreamExt::map_err(
                    response.bytes_stream(),
                    |e| Box::new(strip(e)) as crate::error::BoxError,
                )),
                expected_len,
                config.timeouts.stall,
                deadline,
            )
            .with_min_throughput(config.min_throughput)
        };
        Self {
            status,
            headers,
            url,
            credentials_sent,
            body,
        }
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The headers, repeated lines kept.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The URL that answered, after redirects, without its query (safe to log).
    pub fn url(&self) -> String {
        display_url(&self.url)
    }

    pub(crate) fn raw_url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Whether the final request carried our credentials or token (a 401/403 then means our
    /// credentials are wrong for this target).
    pub fn credentials_sent(&self) -> bool {
        self.credentials_sent
    }

    /// `Content-Length`, when present and valid.
    pub fn content_length(&self) -> Option<u64> {
        content_length(&self.headers)
    }

    /// `Docker-Content-Digest`, when present and valid.
    pub fn digest(&self) -> Option<oci::Digest> {
        self.header_str(oci::header::CONTENT_DIGEST)
            .and_then(|v| oci::Digest::parse(v.trim()).ok())
    }

    /// `Content-Type` without parameters.
    pub fn media_type(&self) -> Option<String> {
        self.header_str(header::CONTENT_TYPE.as_str())
            .map(oci::media_type::essence)
    }

    /// A header's value as text.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body.
    pub fn body_mut(&mut self) -> &mut Body {
        &mut self.body
    }

    /// Takes the body.
    pub fn into_body(self) -> Body {
        self.body
    }

    /// Status, headers and body.
    pub fn into_parts(self) -> (StatusCode, HeaderMap, Body) {
        (self.status, self.headers, self.body)
    }

    /// Replaces the body (e.g. with a verified one).
    pub(crate) fn map_body(mut self, f: impl FnOnce(Body) -> Body) -> Self {
        let body = std::mem::replace(&mut self.body, Body::empty());
        self.body = f(body);
        self
    }

    /// `Ok(self)` for 2xx; otherwise the matching [`Error`]: `Unauthorized` for 401/403 (saying
    /// whether our credentials were sent), `Status` with the body's first OCI error code for the
    /// rest. Reads at most 64 KiB of an error body.
    pub async fn error_for_status(self) -> Result<Self, Error> {
        if self.status.is_success() {
            return Ok(self);
        }
        let url = self.url();
        if self.status == StatusCode::UNAUTHORIZED || self.status == StatusCode::FORBIDDEN {
            return Err(Error::Unauthorized {
                status: self.status,
                credentials_sent: self.credentials_sent,
                url,
            });
        }
        let status = self.status;
        let code = match self
            .body
            .collect(oci::error::ERROR_BODY_MAX_LEN as u64)
            .await
        {
            Ok(bytes) => oci::ErrorBody::parse(&bytes)
                .ok()
                .and_then(|b| b.errors.into_iter().next())
                .map(|e| e.code),
            Err(_) => None,
        };
        Err(Error::Status { status, code, url })
    }
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(same_origin(
            &u("https://a.example/x"),
            &u("https://A.example:443/y")
        ));
        assert!(!same_origin(
            &u("https://a.example/x"),
            &u("http://a.example/x")
        ));
        assert!(!same_origin(
            &u("http://127.0.0.1:5000/"),
            &u("http://127.0.0.1:5001/")
        ));
        assert!(!same_origin(&u("http://a/"), &u("http://b/")));
    }

    #[test]
    fn bad_endpoint_configuration_is_an_error_not_a_panic() {
        let client = Client::default();
        let err = client
            .remote(Endpoint::https("r.example").ca_pem("not a pem"))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidEndpoint { .. }), "{err}");
        let err = client.remote(Endpoint::https("bad host/x")).unwrap_err();
        assert!(matches!(err, Error::InvalidEndpoint { .. }), "{err}");
    }

    #[tokio::test]
    async fn invalid_repository_names_are_refused_before_sending() {
        let remote = Client::default()
            .remote(Endpoint::http("127.0.0.1:9"))
            .unwrap();
        for name in ["UPPER", "a//b", "../x", ""] {
            let err = remote
                .request(Method::GET, name, "tags/list")
                .send()
                .await
                .unwrap_err();
            assert!(matches!(err, Error::InvalidRequest { .. }), "{name}: {err}");
            assert!(!err.retry_elsewhere());
        }
    }
}
