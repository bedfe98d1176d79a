//! The controller's HTTP endpoints: `/metrics` (Prometheus text format), `/healthz` (the
//! probes) and `/queue/list` (the module runtime's queues, for `d8 queue list`).
//!
//! Two listeners serve them. The loopback one (`--metrics-address`) answers anyone, as
//! kube-rbac-proxy's upstream does; the secure one (`--secure-metrics-address`) is
//! kube-rbac-proxy built in: HTTPS, and every path but `/healthz` only for a bearer token that
//! passes a TokenReview and a SubjectAccessReview ([`delegated_auth::Guard`]).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The most a request head may hold (a ServiceAccount token is about 1 KiB, but may grow).
const MAX_HEAD: usize = 16 << 10;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// What the endpoints show.
#[derive(Clone)]
pub(crate) struct Endpoints {
    pub(crate) metrics: Arc<Registry>,
    pub(crate) queues: Option<module_controller::runtime::worker::QueueView>,
    /// The metrics module hooks wrote (`METRICS_PATH`).
    pub(crate) hooks: Option<HookMetrics>,
}

/// The metrics module and global hooks wrote.
pub(crate) type HookMetrics = Arc<std::sync::Mutex<module_controller::module_hooks::MetricStore>>;

/// The registry's text with the hooks' metrics before its `# EOF`.
fn with_hook_metrics(text: String, hooks: Option<&HookMetrics>) -> String {
    let Some(extra) = hooks
        .and_then(|h| h.lock().ok().map(|s| s.render()))
        .filter(|t| !t.is_empty())
    else {
        return text;
    };
    match text.strip_suffix("# EOF\n") {
        Some(head) => format!("{head}{extra}# EOF\n"),
        None => format!("{text}{extra}"),
    }
}

/// The parts of a request head the endpoints look at.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    method: String,
    path: String,
    authorization: Option<String>,
}

/// Reads a request head: its request line and `Authorization` header.
fn parse_head(text: &str) -> Option<Head> {
    let mut lines = text.split("\r\n");
    let mut request = lines.next()?.split_whitespace();
    let method = request.next()?.to_string();
    let target = request.next()?;
    let path = target.split('?').next().unwrap_or_default().to_string();
    let authorization = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("authorization"))
        .map(|(_, value)| value.trim().to_string());
    Some(Head {
        method,
        path,
        authorization,
    })
}

async fn read_head(stream: &mut (impl AsyncRead + Unpin)) -> Option<Head> {
    let mut buffer = Vec::with_capacity(1024);
    let read = async {
        let mut chunk = [0u8; 2048];
        while !buffer.windows(4).any(|w| w == b"\r\n\r\n") && buffer.len() < MAX_HEAD {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            buffer.extend_from_slice(&chunk[..n]);
        }
        Some(())
    };
    tokio::time::timeout(HEAD_TIMEOUT, read).await.ok()??;
    parse_head(&String::from_utf8_lossy(&buffer))
}

impl Endpoints {
    /// The status line and body for `path`.
    fn answer(&self, path: &str) -> (&'static str, String) {
        match path {
            "/metrics" => (
                "200 OK",
                with_hook_metrics(
                    registry_controller::metrics::encode(&self.metrics),
                    self.hooks.as_ref(),
                ),
            ),
            "/healthz" => ("200 OK", "ok\n".into()),
            "/queue/list" => match &self.queues {
                Some(q) => ("200 OK", q.render()),
                None => (
                    "404 Not Found",
                    "the module runtime does not run here\n".into(),
                ),
            },
            _ => ("404 Not Found", String::new()),
        }
    }
}

fn status_line(code: u16) -> &'static str {
    match code {
        401 => "401 Unauthorized",
        403 => "403 Forbidden",
        _ => "500 Internal Server Error",
    }
}

async fn respond(stream: &mut (impl AsyncWrite + Unpin), status: &str, body: &str) {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Serves the endpoints to anyone on `listener` (the loopback address).
pub(crate) async fn serve_plain(listener: tokio::net::TcpListener, endpoints: Endpoints) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let endpoints = endpoints.clone();
        tokio::spawn(async move {
            let Some(head) = read_head(&mut stream).await else {
                return;
            };
            let (status, body) = endpoints.answer(&head.path);
            respond(&mut stream, status, &body).await;
        });
    }
}

/// How the secure listener protects the endpoints.
pub(crate) struct Secure {
    pub(crate) tls: tokio_rustls::TlsAcceptor,
    pub(crate) guard: Arc<delegated_auth::Guard<delegated_auth::Kube>>,
}

/// Serves the endpoints over HTTPS on `listener`, each request through the guard.
pub(crate) async fn serve_secure(
    listener: tokio::net::TcpListener,
    endpoints: Endpoints,
    secure: Secure,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let endpoints = endpoints.clone();
        let tls = secure.tls.clone();
        let guard = secure.guard.clone();
        tokio::spawn(async move {
            let Ok(Ok(mut stream)) = tokio::time::timeout(HEAD_TIMEOUT, tls.accept(stream)).await
            else {
                return;
            };
            let Some(head) = read_head(&mut stream).await else {
                return;
            };
            let verdict = guard
                .check(&head.method, &head.path, head.authorization.as_deref())
                .await;
            if verdict != delegated_auth::Verdict::Allowed {
                tracing::debug!(path = %head.path, status = verdict.status(), "refused");
                respond(&mut stream, status_line(verdict.status()), &verdict.body()).await;
                return;
            }
            let (status, body) = endpoints.answer(&head.path);
            respond(&mut stream, status, &body).await;
        });
    }
}

/// The TLS acceptor of the secure listener: the given certificate and key (PEM files), or a
/// self-signed certificate made at start, as kube-rbac-proxy makes one when given none.
pub(crate) fn tls_acceptor(
    cert_and_key: Option<(&std::path::Path, &std::path::Path)>,
) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (certs, key) = match cert_and_key {
        Some((cert, key)) => {
            let certs = CertificateDer::pem_file_iter(cert)
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .with_context(|| format!("reading {}", cert.display()))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .with_context(|| format!("reading {}", key.display()))?;
            (certs, key)
        }
        None => {
            let host = super::hostname().unwrap_or_else(|| "localhost".into());
            let certified = rcgen::generate_simple_self_signed(vec![host])
                .context("making a self-signed certificate")?;
            let key = PrivateKeyDer::try_from(certified.signing_key.serialize_der())
                .map_err(|e| anyhow::anyhow!("the generated key: {e}"))?;
            (vec![certified.cert.der().clone()], key)
        }
    };
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(agent::server::crypto_provider()))
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .context("the metrics certificate and key do not match")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads() {
        let table = [
            (
                "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nauthorization: Bearer t\r\n\r\n",
                Some(Head {
                    method: "GET".into(),
                    path: "/metrics".into(),
                    authorization: Some("Bearer t".into()),
                }),
            ),
            (
                "POST /queue/list HTTP/1.1\r\nHost: a\r\n\r\nAuthorization: Bearer in-the-body",
                Some(Head {
                    method: "POST".into(),
                    path: "/queue/list".into(),
                    authorization: None,
                }),
            ),
            ("", None),
            ("GET", None),
        ];
        for (text, expected) in table {
            assert_eq!(parse_head(text), expected, "{text:?}");
        }
    }
}
