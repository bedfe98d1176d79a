//! `d8 apiserver`: the embedded Kubernetes API server, with the platform's CRDs and validation.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;

/// Flags of `d8 apiserver`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where the state (one database file), PKI and kubeconfigs live.
    #[arg(long, default_value = "/var/lib/d8/apiserver")]
    data_dir: PathBuf,
    /// Address to serve the Kubernetes API on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Serve plain HTTP instead of HTTPS (tests and local experiments only).
    #[arg(long)]
    plain_http: bool,
    /// Nodes whose registry agents get credentials (a kubeconfig each).
    #[arg(long = "agent-node", value_name = "NODE")]
    agent_nodes: Vec<String>,
    /// A user authenticating with a bearer token (a kubeconfig is written for it), with no
    /// rights of its own: what it may do is granted by RBAC objects naming it (repeatable).
    #[arg(long = "user", value_name = "NAME")]
    users: Vec<String>,

    /// An `EncryptionConfiguration` (apiserver.config.k8s.io/v1) naming the resources to encrypt
    /// at rest and their providers (aesgcm, identity), as kube-apiserver takes it.
    #[arg(long, value_name = "FILE")]
    encryption_provider_config: Option<PathBuf>,

    /// Tests: record every request as authorization saw it (user, verb, group, resource,
    /// subresource, namespace, name, allowed) into FILE, one JSON object a line, rewritten every
    /// 200 ms and at exit — to compare what each component calls with its Role.
    #[arg(long, value_name = "FILE")]
    request_log: Option<PathBuf>,
}

/// Runs the API server until Ctrl-C or SIGTERM.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    crate::private_state::make_private(&args.data_dir)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let mut builder = platform_apiserver(
        apiserver::ApiServer::builder().data_dir(&args.data_dir),
        admission::Verdicts::All,
    );
    for node in &args.agent_nodes {
        builder = builder.user(apiserver::User::registry_agent(node));
    }
    for user in &args.users {
        builder = builder.user(apiserver::User::new(user));
    }
    if args.plain_http {
        builder = builder.plain_http();
    }
    if let Some(path) = &args.encryption_provider_config {
        builder = builder.encryption_config(path);
    }
    let request_log = args
        .request_log
        .as_ref()
        .map(|path| (apiserver::RequestLog::new(), path.clone()));
    if let Some((log, _)) = &request_log {
        builder = builder.request_log(log.clone());
    }
    let server = builder
        .serve(listener)
        .await
        .context("starting the API server")?;
    tracing::info!(url = server.url(), "API server listening");
    for (user, path) in server.kubeconfigs() {
        tracing::info!(user = %user, kubeconfig = %path.display(), "credentials");
    }
    let writer = request_log.clone().map(|(log, path)| {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                if let Err(error) = write_request_log(&log, &path) {
                    tracing::warn!(%error, "writing the request log");
                }
            }
        })
    });
    crate::shutdown_signal().await;
    server.shutdown().await;
    if let Some(writer) = writer {
        writer.abort();
    }
    if let Some((log, path)) = &request_log {
        write_request_log(log, path)?;
    }
    Ok(())
}

/// The request log as JSON lines, replaced atomically (a reader never sees half a file).
fn write_request_log(log: &apiserver::RequestLog, path: &std::path::Path) -> anyhow::Result<()> {
    let mut text = String::new();
    for entry in log.entries() {
        text.push_str(&serde_json::to_string(&entry)?);
        text.push('\n');
    }
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).with_context(|| format!("writing {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("replacing {}", path.display()))?;
    Ok(())
}

/// An API server builder serving every Deckhouse CRD, the `d8-system` namespace, and running
/// the platform's admission rules (with the cluster's facts from the store) and conversions
/// in process — the same code `d8 webhook` serves to kube-apiserver; `verdicts` says which
/// rules it answers for itself.
pub(crate) fn platform_apiserver(
    builder: apiserver::Builder,
    verdicts: admission::Verdicts,
) -> apiserver::Builder {
    admission::embedded::platform(builder, verdicts)
}
