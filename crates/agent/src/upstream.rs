//! The agent's own HTTP/1.1 client towards registries, for the requests it forwards.
//!
//! The registry client (reqwest) stays in charge of credentials: token exchanges and their
//! cache, Basic, the challenge flow. The forwarded request itself goes over [`wire`], an
//! HTTP/1.1 client that reads a connection only as far as the relay consumes it: reqwest and
//! hyper's own client read ahead into buffers of their own, which an open blob stream keeps
//! alive (`cargo bench -p d8 --bench agent_pull`, the memory row).
//!
//! Per request: our `Authorization` (when the target has credentials), redirects followed for
//! GET and HEAD with any `Authorization` dropped when the origin changes, one retry after a 401
//! to a cached token, the connect / response-headers / stall / total timeouts of the registry
//! client's settings, and the body watched as the registry client watches its own (stall window,
//! minimum throughput, deadline, `Content-Length`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use registry_client::{Body, Scope, Timeouts};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio::time::Instant;

mod wire;

/// Redirect hops followed per request, as Go's client (Deckhouse's agent) follows.
const MAX_REDIRECTS: usize = 10;
/// Idle upstream connections kept per host, and for how long.
const IDLE_PER_HOST: usize = 64;
const IDLE_FOR: Duration = Duration::from_secs(90);

/// Where one request goes.
#[derive(Debug)]
pub struct Destination<'a> {
    /// `https://host[:port]`.
    pub base: String,
    /// `/v2/…`, with the query.
    pub path_and_query: &'a str,
    /// CAs (PEM) trusted besides the system's.
    pub roots: Option<String>,
    /// When the target has credentials: the registry client's handle that authorizes `scope`.
    pub auth: Option<(registry_client::Remote, Scope)>,
}

/// A target's answer.
#[derive(Debug)]
pub struct Answer {
    /// The final hop's status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body, watched for stalls, the deadline and `Content-Length`.
    pub body: Body,
    /// Whether the final hop carried our credentials.
    pub credentials_sent: bool,
}

/// Why no answer came.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Connecting, TLS, or the exchange broke.
    #[error("{url}: {reason}")]
    Transport { url: String, reason: String },
    /// No status line and headers in time.
    #[error("{url}: no response headers within {after:?}")]
    Timeout { url: String, after: Duration },
    /// A redirect that cannot be followed.
    #[error("{url}: {reason}")]
    Redirect { url: String, reason: String },
    /// The target's CA (PEM) does not parse.
    #[error("the target's CA: {0}")]
    Roots(String),
    /// Our credentials could not be turned into an `Authorization`.
    #[error(transparent)]
    Auth(#[from] registry_client::Error),
}

/// Connectors, one per set of extra roots.
pub struct Upstreams {
    timeouts: Timeouts,
    min_throughput: Option<registry_client::MinThroughput>,
    user_agent: HeaderValue,
    clients: Mutex<HashMap<Option<String>, Arc<wire::Connector>>>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams").finish_non_exhaustive()
    }
}

impl Upstreams {
    /// Clients with the registry client's timeouts and user agent.
    pub fn new(config: &registry_client::Config) -> Self {
        Self {
            timeouts: config.timeouts,
            min_throughput: config.min_throughput,
            user_agent: HeaderValue::from_str(&config.user_agent)
                .unwrap_or_else(|_| HeaderValue::from_static("d8-registry-agent")),
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Sends `method` with `headers` to `to`, following redirects.
    pub async fn send(
        &self,
        method: &Method,
        headers: &HeaderMap,
        to: &Destination<'_>,
    ) -> Result<Answer, Failure> {
        let deadline = self.timeouts.total.map(|t| Instant::now() + t);
        let http = self.client(to.roots.as_deref())?;
        let start = format!("{}{}", to.base, to.path_and_query);
        let mut ours = match &to.auth {
            Some((remote, scope)) => remote.authorization(scope).await?,
            None => None,
        };
        let mut retried = false;
        loop {
            let (response, url, sent) = self
                .follow(&http, method, headers, &start, ours.as_ref(), deadline)
                .await?;
            if response.status == StatusCode::UNAUTHORIZED
                && !retried
                && let Some((remote, scope)) = &to.auth
            {
                // The cached token is stale, or the registry took anonymous requests when it
                // was probed and no longer does: forget what was cached and try once more.
                remote.forget_authorization(scope, ours.take()).await;
                ours = remote.authorization(scope).await?;
                retried = true;
                continue;
            }
            return Ok(self.answer(response, &url, sent, deadline));
        }
    }

    /// Closes the kept connections to `origin` (`https://host[:port]/`): its server stopped
    /// answering, and a request sent on one of them would wait out the response timeout.
    pub fn forget(&self, origin: &str) {
        let Ok(uri) = origin.parse::<Uri>() else {
            return;
        };
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        for client in clients.values() {
            client.forget(&uri);
        }
    }

    /// One request and its redirects: the final response, its URL and whether it carried our
    /// credentials.
    async fn follow(
        &self,
        http: &Arc<wire::Connector>,
        method: &Method,
        headers: &HeaderMap,
        start: &str,
        ours: Option<&registry_client::Secret>,
        deadline: Option<Instant>,
    ) -> Result<(wire::Response, String, bool), Failure> {
        let mut method = method.clone();
        let mut url = start.to_owned();
        let mut headers = headers.clone();
        let mut ours = ours;
        for _ in 0..=MAX_REDIRECTS {
            let uri: Uri = url.parse().map_err(|e| Failure::Redirect {
                url: url.clone(),
                reason: format!("not a URL: {e}"),
            })?;
            let mut request_headers = headers.clone();
            if !request_headers.contains_key(header::USER_AGENT) {
                request_headers.insert(header::USER_AGENT, self.user_agent.clone());
            }
            if let Some(secret) = ours
                && let Ok(mut value) = HeaderValue::from_str(secret.expose())
            {
                value.set_sensitive(true);
                request_headers.insert(header::AUTHORIZATION, value);
            }
            let mut wait = self.timeouts.response_headers;
            if let Some(deadline) = deadline {
                wait = wait.min(deadline.saturating_duration_since(Instant::now()));
            }
            let response =
                match tokio::time::timeout(wait, http.request(&method, &uri, &request_headers))
                    .await
                {
                    Err(_) => return Err(Failure::Timeout { url, after: wait }),
                    Ok(Err(e)) => {
                        return Err(Failure::Transport {
                            url,
                            reason: chain(&e),
                        });
                    }
                    Ok(Ok(response)) => response,
                };
            let status = response.status;
            if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
                return Ok((response, url, ours.is_some()));
            }
            let next = response
                .headers
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|location| join(&uri, location))
                .ok_or_else(|| Failure::Redirect {
                    url: url.clone(),
                    reason: "redirect without a usable Location".into(),
                })?;
            if origin(&uri) != origin_of(&next) {
                // Authorization, ours or the client's, goes only to the origin it was meant for.
                ours = None;
                headers.remove(header::AUTHORIZATION);
            }
            if status == StatusCode::SEE_OTHER && method != Method::HEAD {
                method = Method::GET;
            }
            tracing::debug!(from = %url, to = %next, "following redirect");
            url = next;
        }
        Err(Failure::Redirect {
            url: start.to_owned(),
            reason: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    fn answer(
        &self,
        response: wire::Response,
        url: &str,
        credentials_sent: bool,
        deadline: Option<Instant>,
    ) -> Answer {
        let wire::Response {
            status,
            headers,
            body,
        } = response;
        let body = match body {
            None => Body::empty(),
            Some(stream) => {
                let expected_len = headers
                    .get(header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok()?.trim().parse().ok());
                let deadline = deadline
                    .map(|at| (at, self.timeouts.total.unwrap_or_default(), url.to_owned()));
                // A clean close before Content-Length comes as `UnexpectedEof`: the watcher
                // calls it truncated.
                Body::watched(stream, expected_len, self.timeouts.stall, deadline)
                    .with_min_throughput(self.min_throughput)
            }
        };
        Answer {
            status,
            headers,
            body,
            credentials_sent,
        }
    }

    /// The client trusting the system roots plus `roots` (PEM), made once per distinct set.
    fn client(&self, roots: Option<&str>) -> Result<Arc<wire::Connector>, Failure> {
        let key = roots.map(str::to_owned);
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let mut store = rustls::RootCertStore::empty();
        store.add_parsable_certificates(system_roots().iter().cloned());
        if let Some(pem) = roots {
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let cert = cert.map_err(|e| Failure::Roots(e.to_string()))?;
                store.add(cert).map_err(|e| Failure::Roots(e.to_string()))?;
            }
        }
        let tls =
            rustls::ClientConfig::builder_with_provider(Arc::new(crate::server::crypto_provider()))
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .with_root_certificates(store)
                .with_no_client_auth();
        let client = wire::Connector::new(tls, self.timeouts.connect, IDLE_FOR, IDLE_PER_HOST);
        clients.insert(key, client.clone());
        Ok(client)
    }
}

/// The system's CA certificates, read once.
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}

/// `location` resolved against `base`: absolute URLs and absolute paths (what registries send).
fn join(base: &Uri, location: &str) -> Option<String> {
    if location.starts_with("https://") || location.starts_with("http://") {
        return Some(location.to_owned());
    }
    if location.starts_with('/') && !location.starts_with("//") {
        return Some(format!("{}{location}", origin(base)));
    }
    None
}

fn origin(uri: &Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("https");
    let authority = uri.authority().map_or("", |a| a.as_str());
    format!("{scheme}://{}", authority.to_ascii_lowercase())
}

fn origin_of(url: &str) -> String {
    url.parse::<Uri>()
        .map_or_else(|_| url.to_owned(), |uri| origin(&uri))
}

/// An error and its causes on one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
