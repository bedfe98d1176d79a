//! One HTTPS POST of a JSON review to a webhook, the way kube-apiserver's webhook client makes
//! it: the CA bundle (else the system roots) verifies the server, the timeout bounds the whole
//! call and is sent as `?timeout=<n>s`, errors read like Go's `Post "<url>": <cause>`.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use rustls_pki_types::{CertificateDer, ServerName, pem::PemObject as _};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The largest response accepted (kube-apiserver reads at most a few MB as well).
const MAX_RESPONSE: usize = 8 << 20;

/// Where to connect and what to verify.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The URL as shown in errors (with the `timeout` query added).
    pub(crate) url: String,
    /// The address dialled.
    pub(crate) addr: SocketAddr,
    /// The name the certificate must carry.
    pub(crate) server_name: String,
    /// `Host` header and request target.
    pub(crate) host: String,
    pub(crate) path_and_query: String,
}

/// Splits `https://host[:port]/path?query` into its parts.
pub(crate) fn parse_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("Unparsable URL: {url:?}: the scheme must be https"))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || p.parse::<u16>().is_ok() => (
            h,
            p.parse::<u16>()
                .map_err(|_| format!("Unparsable URL: {url:?}: invalid port"))?,
        ),
        _ => (authority, 443),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("Unparsable URL: {url:?}: no host"));
    }
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    Ok((host.to_string(), port, path))
}

/// Adds kube-apiserver's `timeout` query parameter.
pub(crate) fn with_timeout(path: &str, timeout: Duration) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}timeout={}s", timeout.as_secs())
}

fn native_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}

fn tls_config(ca_bundle: Option<&[u8]>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_bundle {
        Some(pem) => {
            for c in CertificateDer::pem_slice_iter(pem) {
                let c = c.map_err(|e| format!("invalid caBundle: {e}"))?;
                roots.add(c).map_err(|e| format!("invalid caBundle: {e}"))?;
            }
            if roots.is_empty() {
                return Err("invalid caBundle: no certificate in it".into());
            }
        }
        None => {
            roots.add_parsable_certificates(native_roots().iter().cloned());
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A TLS handshake failure in Go's words where kube-apiserver's are known.
fn tls_error(e: &std::io::Error) -> String {
    let text = e.to_string();
    if text.contains("UnknownIssuer") || text.contains("BadSignature") {
        "tls: failed to verify certificate: x509: certificate signed by unknown authority".into()
    } else if text.contains("NotValidForName") {
        "tls: failed to verify certificate: x509: certificate is not valid for the requested name"
            .into()
    } else if text.contains("Expired") {
        "tls: failed to verify certificate: x509: certificate has expired or is not yet valid"
            .into()
    } else {
        format!("tls: {text}")
    }
}

/// POSTs `body` and returns the response's status and body. The error is the cause only
/// (`context deadline exceeded`, `connection refused`, …); the caller wraps it.
pub(crate) async fn post(
    ep: &Endpoint,
    ca_bundle: Option<&[u8]>,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<(u16, Bytes), String> {
    let call = async {
        let tls = tokio_rustls::TlsConnector::from(Arc::new(tls_config(ca_bundle)?));
        let tcp = tokio::net::TcpStream::connect(ep.addr)
            .await
            .map_err(|e| format!("dial tcp {}: {e}", ep.addr))?;
        let name = ServerName::try_from(ep.server_name.clone())
            .map_err(|e| format!("invalid server name {:?}: {e}", ep.server_name))?;
        let stream = tls.connect(name, tcp).await.map_err(|e| tls_error(&e))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let req = http::Request::post(&ep.path_and_query)
            .header(http::header::HOST, &ep.host)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let bytes = Limited::new(resp.into_body(), MAX_RESPONSE)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, bytes))
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(format!("Post {:?}: {e}", ep.url)),
        Err(_) => Err(format!("Post {:?}: context deadline exceeded", ep.url)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_as_kube_apiserver_reads_them() {
        let table = [
            (
                "https://127.0.0.1:8443/validate",
                Ok(("127.0.0.1".to_string(), 8443, "/validate".to_string())),
            ),
            (
                "https://webhook.example.io",
                Ok(("webhook.example.io".to_string(), 443, "/".to_string())),
            ),
            (
                "https://[::1]:9443/x?a=b",
                Ok(("::1".to_string(), 9443, "/x?a=b".to_string())),
            ),
        ];
        for (url, want) in table {
            assert_eq!(parse_url(url), want, "{url}");
        }
        assert!(
            parse_url("http://a/")
                .unwrap_err()
                .contains("scheme must be https")
        );
        assert_eq!(
            with_timeout("/v?x=1", Duration::from_secs(5)),
            "/v?x=1&timeout=5s"
        );
        assert_eq!(
            with_timeout("/v", Duration::from_secs(10)),
            "/v?timeout=10s"
        );
    }
}
