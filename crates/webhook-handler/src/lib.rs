//! Deckhouse's `webhook-handler` (`d8 webhook-handler`): ValidationWebhook and ConversionWebhook
//! objects (`deckhouse.io/v1alpha1`) become hooks that answer kube-apiserver.
//!
//! For each ValidationWebhook the handler renders Deckhouse's Python hook (run by `python3`
//! with the `deckhouse` SDK through `module-hooks`' runner) or compiles its CEL rules, keeps a
//! watch per `context` binding, registers a webhook in the ValidatingWebhookConfiguration
//! `d8-deckhouse-validating-webhook-handler`, and answers AdmissionReview requests; for each
//! ConversionWebhook it renders the conversion hook, sets the CRD's `spec.conversion` and
//! answers ConversionReview requests. The status of each object says whether it is served.
//!
//! Pure parts: [`render`], [`cel`], [`answer`]. I/O: the watches (`contexts`, `controller`),
//! the hooks' processes (`handlers`), the HTTPS endpoint (`server`, with `d8 webhook`'s
//! certificate files re-read on change and its accept loop), shell-operator's metrics
//! ([`metrics`], served on their own loopback listener).

pub mod answer;
/// The CA file, re-read when it changes (shared with the cache replicas: `http_serve::ca`).
pub use http_serve::ca;
pub mod cel;
mod contexts;
mod controller;
mod finalizers;
mod handlers;
pub mod metrics;
pub mod render;
mod server;

use std::path::PathBuf;
use std::sync::Arc;

/// How the handler runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where hook files are rendered (`<dir>/<name>/webhooks/validating/<name>.py`, …).
    pub hooks_dir: PathBuf,
    /// How the API server reaches the handler.
    pub endpoint: render::Endpoint,
    /// The serving certificate and key, re-read when their files change on disk.
    pub certificate: Arc<webhook::CertificateFiles>,
    /// The CA that signed it, the `caBundle` of what is registered (re-read when its file
    /// changes: what is registered then follows).
    pub ca: Arc<ca::CaFile>,
    /// Where hook runs are counted ([`metrics::serve`] exposes them).
    pub metrics: metrics::Metrics,
}

/// Serves on `listener` and keeps the webhook objects' handlers until the task is dropped.
pub async fn run(
    client: kube::Client,
    listener: tokio::net::TcpListener,
    opts: Options,
) -> Result<(), String> {
    let served = Arc::new(server::Served {
        metrics: opts.metrics.clone(),
        ..server::Served::default()
    });
    let _serving = AbortOnDrop(tokio::spawn(server::serve(
        listener,
        opts.certificate.clone(),
        served.clone(),
    )));
    let _ticking = AbortOnDrop(tokio::spawn(opts.metrics.clone().tick()));
    controller::run(client, opts, served).await;
    Ok(())
}

/// A task that ends with its owner (a dropped [`run`] stops serving and ticking).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
