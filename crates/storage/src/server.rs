//! Listeners: TLS (optionally asking for a client certificate) on the shared accept loop of
//! `http-serve`, or plain HTTP with a zero-copy path for complete blobs ([`plain`]).

use std::sync::Arc;

use hyper::body::Incoming;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

use crate::error::Error;
use crate::service::{Listener, Peer};
use client_auth::ClientAuth;

/// TLS settings of a listener.
#[derive(Clone)]
pub struct Tls {
    /// Server certificate chain, PEM.
    pub cert_pem: String,
    /// Server private key, PEM.
    pub key_pem: String,
    /// When set, clients must present a certificate chaining to this CA (PEM): the handshake
    /// fails without one (clients report `tls: certificate required`) or with one from another
    /// CA. Answering over HTTP instead would not help: clients do not show the body of a
    /// refused `/v2/` ping.
    pub client_ca_pem: Option<String>,
    /// When set, a client certificate is requested (not required): one that chains to the CA
    /// this file holds (`/pki/ingress-client-ca.crt`; followed as it changes, and nothing is
    /// believed while it holds none) marks the ingress in front, whose forwarded client address
    /// is then believed ([`crate::realip`]).
    pub ingress_client_ca: Option<Arc<http_serve::ca::CaFile>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("client_ca", &self.client_ca_pem.is_some())
            .field(
                "ingress_client_ca",
                &self.ingress_client_ca.as_ref().map(|f| f.path()),
            )
            .finish_non_exhaustive()
    }
}

/// A TLS listener's acceptor and its client-certificate policy.
#[derive(Clone)]
pub struct Acceptor {
    tls: tokio_rustls::TlsAcceptor,
    client_auth: Option<Arc<ClientAuth>>,
}

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acceptor")
            .field("client_auth", &self.client_auth)
            .finish_non_exhaustive()
    }
}

/// Builds the acceptor for `tls`. The cipher suite is the server's choice, AES-128-GCM first
/// ([`http_serve::tls::crypto_provider`]): clients such as curl and skopeo list AES-256-GCM
/// first, and every byte a replica serves over TLS is encrypted by it.
pub fn acceptor(tls: &Tls) -> Result<Acceptor, Error> {
    let provider = Arc::new(http_serve::tls::crypto_provider());
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(tls.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| Error::Config(format!("server certificate: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(tls.key_pem.as_bytes())
        .map_err(|e| Error::Config(format!("server key: {e}")))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS versions: {e}")))?;
    let client_auth = ClientAuth::new(
        tls.client_ca_pem.as_deref(),
        tls.ingress_client_ca.clone(),
        &provider,
    )?;
    let builder = match &client_auth {
        Some(policy) => builder.with_client_cert_verifier(policy.clone()),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| Error::Config(format!("server certificate: {e}")))?;
    config.ignore_client_order = true;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Acceptor {
        tls: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        client_auth,
    })
}

mod client_auth;
mod plain;

/// Serves `handler` on `listener` until `shutdown` resolves, then lets requests in flight finish
/// (up to 30 s). Plain HTTP (no `tls`) sends complete blobs with `sendfile(2)`.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Acceptor>,
    handler: Listener,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let Some(tls) = tls else {
        plain::serve(listener, handler, shutdown).await;
        return;
    };
    let policy = tls.client_auth.clone();
    let bounds = handler.bounds();
    let service = move |connection: http_serve::Connection| {
        let handler = handler.clone();
        let verdict = policy
            .as_ref()
            .map(|p| p.verdict(&connection.client_chain))
            .unwrap_or_default();
        let socket = connection.peer;
        hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let handler = handler.clone();
            let peer = Peer {
                client_certificate: verdict.publish,
                tls: true,
                address: crate::realip::client_address(socket, request.headers(), verdict.front),
            };
            async move { Ok::<_, std::convert::Infallible>(handler.handle(request, peer).await) }
        })
    };
    http_serve::serve(listener, Some(tls.tls), bounds, service, shutdown).await;
}
