//! `d8 webhook`: the admission and conversion webhook of the kinds we own, for kube-apiserver.
//!
//! One HTTPS endpoint (rustls with *ring*, the certificate read from files and re-read when
//! they change on disk) answering `admission.k8s.io/v1` AdmissionReview on `/validate/…` and
//! `apiextensions.k8s.io/v1` ConversionReview on `/convert`, with the rules and conversions of
//! the `admission` crate — the code the embedded API server runs in process. The cluster facts
//! the ModuleConfig and ModuleUpdatePolicy rules need are read from the API per request
//! ([`KubeFacts`]), so an answer never rests on a stale cache.
//!
//! Stages: [`tls`] (certificate files → rustls) → [`service`] (path → review → answer), with the
//! facts behind [`Facts`]. Around it: [`certs`] (a private CA and serving certificate kept in a
//! directory, renewed before expiry; [`keeper`] keeps the chart's in Secrets from `d8 controller`) and [`registration`] (the ValidatingWebhookConfiguration
//! and CRD conversions that point an API server at it) — what `d8 up` uses to run it.

/// The private CA and serving certificate (the `pki` crate, shared with the registry controller).
pub use pki as certs;
pub mod keeper;
pub mod registration;
pub mod service;
pub mod tls;

pub use service::{Facts, KubeFacts, Webhook};
pub use tls::{CertificateFiles, TlsError};

/// Serves `webhook` over TLS on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    certificate: std::sync::Arc<CertificateFiles>,
    webhook: Webhook,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let acceptor = tls::acceptor(certificate);
    let service = move |_: http_serve::Connection| {
        let webhook = webhook.clone();
        hyper::service::service_fn(move |request| {
            let webhook = webhook.clone();
            async move { Ok::<_, std::convert::Infallible>(webhook.handle(request).await) }
        })
    };
    http_serve::serve(
        listener,
        Some(acceptor),
        http_serve::Bounds::default(),
        service,
        shutdown,
    )
    .await;
}
