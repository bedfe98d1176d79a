//! Listeners: the registry endpoint (TLS, or plain HTTP for local use) and the metrics
//! endpoint, on the shared accept loop of `http-serve`, with a certificate that can be replaced
//! while serving.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http::{Response, StatusCode, header};
use hyper::body::Incoming;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;

use crate::metrics::Metrics;
use crate::proxy::{Proxy, ProxyBody};

/// The serving certificate, replaceable at run time (renewal without a restart).
#[derive(Debug)]
pub struct CertStore(RwLock<Arc<CertifiedKey>>);

impl CertStore {
    /// A store serving `key`.
    pub fn new(key: Arc<CertifiedKey>) -> Arc<Self> {
        Arc::new(Self(RwLock::new(key)))
    }

    /// Serves `key` from the next handshake on.
    pub fn replace(&self, key: Arc<CertifiedKey>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = key;
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The agent's TLS crypto, shared with the platform's other servers: AES-128-GCM first. Every
/// byte of a pull crosses two TLS legs in the agent (decrypted from the registry, encrypted to
/// containerd), so the cheaper cipher counts twice.
pub use http_serve::tls::crypto_provider;

/// The TLS configuration for `certs` (TLS 1.2+, HTTP/1.1) that picks the cipher suite by its
/// own preference ([`crypto_provider`]), not the client's: rustls clients (and OpenSSL ones)
/// list AES-256-GCM first.
pub fn tls_config(certs: Arc<CertStore>) -> Arc<rustls::ServerConfig> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(crypto_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.ignore_client_order = true;
    // HTTP/1.1 only: blobs stream faster over one connection each than multiplexed over
    // HTTP/2 (measured by `cargo bench -p d8 --bench agent_pull`), and containerd, skopeo and
    // podman all speak it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Early data would come before a request could be checked; the agent takes none.
    config.max_early_data_size = 0;
    // The records are protected by `crate::tls` once rustls has negotiated their keys.
    config.enable_secret_extraction = true;
    Arc::new(config)
}

/// Serves the proxy on `listener` until `shutdown` resolves, then lets requests in flight
/// finish (up to 30 s). A node pulls over many connections at once (containerd opens one per
/// layer), and each is served by the agent's own HTTP/1.1 ([`crate::http1`]): an answer is
/// read from the registry no further than the client takes it.
pub async fn serve_registry(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    proxy: Proxy,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let handler = move |request: http::Request<()>| {
        let proxy = proxy.clone();
        async move { proxy.handle(request).await }
    };
    crate::http1::serve(listener, tls, handler, shutdown).await;
}

/// Serves `/metrics` and `/healthz` on `listener` (plain HTTP, loopback).
pub async fn serve_metrics(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let service = move |_: http_serve::Connection| {
        let metrics = metrics.clone();
        hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let metrics = metrics.clone();
            async move {
                Ok::<_, std::convert::Infallible>(metrics_answer(request.uri().path(), &metrics))
            }
        })
    };
    http_serve::serve(
        listener,
        None,
        http_serve::Bounds::default(),
        service,
        shutdown,
    )
    .await;
}

fn metrics_answer(path: &str, metrics: &Metrics) -> Response<ProxyBody> {
    match path {
        "/metrics" => plain(
            StatusCode::OK,
            metrics.encode(),
            "text/plain; version=0.0.4",
        ),
        "/healthz" => plain(StatusCode::OK, "ok".into(), "text/plain"),
        _ => plain(StatusCode::NOT_FOUND, "not found".into(), "text/plain"),
    }
}

fn plain(status: StatusCode, body: String, content_type: &'static str) -> Response<ProxyBody> {
    use http_body_util::BodyExt;
    let body = http_body_util::Full::new(Bytes::from(body)).map_err(|never| match never {});
    let mut response = Response::new(BodyExt::boxed_unsync(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}

/// Binds `address`, with a message naming it on failure.
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {address}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::CipherSuite;
    use rustls_pki_types::pem::PemObject;

    /// Handshakes with the agent's acceptor as a client offering `suites` in that order, and
    /// returns the suite the connection settled on.
    async fn negotiated(suites: Vec<rustls::SupportedCipherSuite>) -> CipherSuite {
        let pki = crate::pki::issue().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(tls_config(CertStore::new(
            pki.certified_key().unwrap(),
        )));
        let mut roots = rustls::RootCertStore::empty();
        for ca in rustls_pki_types::CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        let provider = rustls::crypto::CryptoProvider {
            cipher_suites: suites,
            ..rustls::crypto::ring::default_provider()
        };
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let (client_io, server_io) = tokio::io::duplex(64 << 10);
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let (client, server) = tokio::join!(
            connector.connect(name, client_io),
            acceptor.accept(server_io)
        );
        let server = server.unwrap();
        let client = client.unwrap();
        let agreed = client
            .get_ref()
            .1
            .negotiated_cipher_suite()
            .unwrap()
            .suite();
        assert_eq!(
            server
                .get_ref()
                .1
                .negotiated_cipher_suite()
                .unwrap()
                .suite(),
            agreed
        );
        agreed
    }

    #[tokio::test]
    async fn a_client_preferring_aes_256_gets_aes_128() {
        // rustls' own default order, as reqwest and skopeo-like OpenSSL clients send it.
        let client_order = rustls::crypto::ring::default_provider().cipher_suites;
        assert_eq!(
            client_order[0].suite(),
            CipherSuite::TLS13_AES_256_GCM_SHA384,
            "the premise: rustls clients offer AES-256 first"
        );
        assert_eq!(
            negotiated(client_order).await,
            CipherSuite::TLS13_AES_128_GCM_SHA256
        );
    }

    #[tokio::test]
    async fn a_client_without_aes_128_still_connects() {
        let only = rustls::crypto::ring::default_provider()
            .cipher_suites
            .into_iter()
            .filter(|s| s.suite() == CipherSuite::TLS13_CHACHA20_POLY1305_SHA256)
            .collect();
        assert_eq!(
            negotiated(only).await,
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
        );
    }
}
