//! `d8 webhook-handler`: Deckhouse's `webhook-handler` Deployment — ValidationWebhook and
//! ConversionWebhook objects turned into handlers that answer the API server.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;

/// Serves ValidationWebhook and ConversionWebhook handlers over HTTPS.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Kubeconfig of the API server to watch and register with (default: in-cluster or
    /// `$KUBECONFIG`).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Address the HTTPS endpoint listens on.
    #[arg(long, default_value = "0.0.0.0:9680")]
    listen: SocketAddr,
    /// Serving certificate (PEM); re-read when it or the key changes on disk.
    #[arg(
        long,
        env = "VALIDATING_WEBHOOK_SERVER_CERT",
        default_value = "/certs/tls.crt"
    )]
    tls_cert: PathBuf,
    /// Its private key (PEM).
    #[arg(
        long,
        env = "VALIDATING_WEBHOOK_SERVER_KEY",
        default_value = "/certs/tls.key"
    )]
    tls_key: PathBuf,
    /// The CA that signed the certificate: the `caBundle` of what is registered; re-read when
    /// it changes on disk (what is registered then follows).
    #[arg(long, env = "VALIDATING_WEBHOOK_CA", default_value = "/certs/ca.crt")]
    tls_ca: PathBuf,
    /// Where hook files are rendered.
    #[arg(long, default_value = "/hooks")]
    hooks_dir: PathBuf,
    /// Register `clientConfig.url` with this base (e.g. `https://127.0.0.1:9680`, on one
    /// machine) instead of the Services `validating-webhook-handler` and
    /// `conversion-webhook-handler` in `--namespace`.
    #[arg(long)]
    url: Option<String>,
    /// Namespace of the Services in front of the handler.
    #[arg(long, env = "SHELL_OPERATOR_NAMESPACE", default_value = "d8-system")]
    namespace: String,
    /// Where `/metrics` (shell-operator's families) is served, plain HTTP: the address the
    /// chart's `kube-rbac-proxy` sidecar forwards to.
    #[arg(long, default_value = "127.0.0.1:9681")]
    metrics_address: SocketAddr,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let opts = webhook_handler::Options {
        hooks_dir: args.hooks_dir,
        endpoint: match args.url {
            Some(u) => webhook_handler::render::Endpoint::Url(u),
            None => webhook_handler::render::Endpoint::Service(args.namespace),
        },
        certificate: webhook::CertificateFiles::load(&args.tls_cert, &args.tls_key)
            .context("loading the serving certificate")?,
        ca: webhook_handler::ca::CaFile::load(&args.tls_ca).map_err(anyhow::Error::msg)?,
        metrics: webhook_handler::metrics::Metrics::default(),
    };
    let client = crate::kube_client::client(args.kubeconfig.as_deref()).await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let metrics_listener = tokio::net::TcpListener::bind(args.metrics_address)
        .await
        .with_context(|| format!("listening on {}", args.metrics_address))?;
    tokio::spawn(webhook_handler::metrics::serve(
        metrics_listener,
        opts.metrics.clone(),
    ));
    tracing::info!(listen = %args.listen, metrics = %args.metrics_address, "webhook handler serving");
    tokio::select! {
        r = webhook_handler::run(client, listener, opts) => r.map_err(anyhow::Error::msg),
        _ = crate::shutdown_signal() => Ok(()),
    }
}
