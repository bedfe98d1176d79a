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

/// A TLS acceptor for `certs` (TLS 1.2+, HTTP/1.1).
pub fn tls_acceptor(certs: Arc<CertStore>) -> tokio_rustls::TlsAcceptor {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(certs);
    // HTTP/1.1 only: blobs stream faster over one connection each than multiplexed over
    // HTTP/2 (measured by `cargo bench -p d8 --bench agent_pull`), and containerd, skopeo and
    // podman all speak it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// Serves the proxy on `listener` until `shutdown` resolves, then lets requests in flight
/// finish (up to 30 s).
pub async fn serve_registry(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    proxy: Proxy,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let service = move |_: http_serve::Connection| {
        let proxy = proxy.clone();
        hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let proxy = proxy.clone();
            async move { Ok::<_, std::convert::Infallible>(proxy.handle(request).await) }
        })
    };
    http_serve::serve(listener, tls, service, shutdown).await;
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
    http_serve::serve(listener, None, service, shutdown).await;
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
