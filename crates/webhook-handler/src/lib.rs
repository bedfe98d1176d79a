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
//! the hooks' processes (`handlers`), the HTTPS endpoint (`server`).

pub mod answer;
pub mod cel;
mod contexts;
mod controller;
mod handlers;
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
    /// The serving certificate and key (PEM), and the CA that signed it (for `caBundle`).
    pub cert_pem: String,
    pub key_pem: String,
    pub ca_pem: String,
}

/// Serves on `listener` and keeps the webhook objects' handlers until the task is dropped.
pub async fn run(
    client: kube::Client,
    listener: tokio::net::TcpListener,
    opts: Options,
) -> Result<(), String> {
    let acceptor = server::acceptor(&opts.cert_pem, &opts.key_pem)?;
    let served = Arc::new(server::Served::default());
    let serving = tokio::spawn(server::serve(listener, acceptor, served.clone()));
    controller::run(client, opts, served).await;
    serving.abort();
    Ok(())
}
