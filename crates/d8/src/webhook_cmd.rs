//! `d8 webhook`: the admission and conversion webhook of the kinds we own, for kube-apiserver.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

/// Flags of `d8 webhook`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Address to serve HTTPS on.
    #[arg(long, visible_alias = "listen", default_value = "0.0.0.0:9443")]
    listen_address: SocketAddr,
    /// The serving certificate (PEM, chain first); re-read when it changes on disk.
    #[arg(long)]
    tls_cert_file: PathBuf,
    /// The certificate's private key (PEM); re-read when it changes on disk.
    #[arg(long)]
    tls_private_key_file: PathBuf,
    /// Kubeconfig of the API whose objects the rules read (default: in-cluster, then
    /// `$KUBECONFIG`, then `~/.kube/config`).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

/// Serves until Ctrl-C or SIGTERM.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let certificate =
        webhook::CertificateFiles::load(&args.tls_cert_file, &args.tls_private_key_file)
            .context("loading the serving certificate")?;
    let client = crate::kube_client::client(args.kubeconfig.as_deref()).await?;
    let listener = tokio::net::TcpListener::bind(args.listen_address)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen_address))?;
    let address = listener.local_addr()?;
    let facts = Arc::new(webhook::KubeFacts::new(client));
    tracing::info!(%address, "webhook listening (/validate/…, /convert, /healthz)");
    webhook::serve(
        listener,
        certificate,
        webhook::Webhook::new(facts),
        crate::shutdown_signal(),
    )
    .await;
    Ok(())
}
