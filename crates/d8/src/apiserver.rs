//! `d8 apiserver`: the embedded Kubernetes API server on one machine.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Arguments of `d8 apiserver`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Database, certificates, credentials and kubeconfig files.
    #[arg(long, default_value = "d8-apiserver")]
    data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Directories of CRD manifests (`*.yaml`, `*.json`) to serve.
    #[arg(long = "crds")]
    crd_dirs: Vec<PathBuf>,
    /// Extra names or IPs for the serving certificate.
    #[arg(long = "san")]
    sans: Vec<String>,
    /// Namespaces to create at start-up.
    #[arg(long = "namespace", default_value = "d8-system")]
    namespaces: Vec<String>,
    /// Write a kubeconfig for the registry agent of this node (repeatable).
    #[arg(long = "registry-agent")]
    registry_agents: Vec<String>,
    /// Serve plain HTTP (tests only).
    #[arg(long)]
    plain_http: bool,
}

/// Runs the server until Ctrl-C.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let mut b = apiserver::ApiServer::builder().data_dir(&args.data_dir);
    for d in &args.crd_dirs {
        b = b.crd_dir(d)?;
    }
    for s in args.sans {
        b = b.san(s);
    }
    for ns in args.namespaces {
        b = b.namespace(ns);
    }
    for node in &args.registry_agents {
        b = b.user(apiserver::User::registry_agent(node));
    }
    if args.plain_http {
        b = b.plain_http();
    }
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let server = b.serve(listener).await?;
    for (user, path) in server.kubeconfigs() {
        tracing::info!(%user, kubeconfig = %path.display(), "kubeconfig written");
    }
    tokio::signal::ctrl_c().await?;
    tracing::info!("shutting down");
    server.shutdown().await;
    Ok(())
}
