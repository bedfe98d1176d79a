//! `d8 apiserver`: the embedded Kubernetes API server, with the platform's CRDs and validation.

use std::collections::HashMap;
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
    /// An `EncryptionConfiguration` (apiserver.config.k8s.io/v1) naming the resources to encrypt
    /// at rest and their providers (aesgcm, identity), as kube-apiserver takes it.
    #[arg(long, value_name = "FILE")]
    encryption_provider_config: Option<PathBuf>,
}

/// Runs the API server until Ctrl-C or SIGTERM.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    crate::private_state::make_private(&args.data_dir)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let mut builder = platform_apiserver(apiserver::ApiServer::builder().data_dir(&args.data_dir));
    for node in &args.agent_nodes {
        builder = builder.user(apiserver::User::registry_agent(node));
    }
    if args.plain_http {
        builder = builder.plain_http();
    }
    if let Some(path) = &args.encryption_provider_config {
        builder = builder.encryption_config(path);
    }
    let server = builder
        .serve(listener)
        .await
        .context("starting the API server")?;
    tracing::info!(url = server.url(), "API server listening");
    for (user, path) in server.kubeconfigs() {
        tracing::info!(user = %user, kubeconfig = %path.display(), "credentials");
    }
    crate::shutdown_signal().await;
    server.shutdown().await;
    Ok(())
}

/// An API server builder serving every Deckhouse CRD, the `d8-system` namespace, and running
/// the platform's validation functions on every write.
pub(crate) fn platform_apiserver(builder: apiserver::Builder) -> apiserver::Builder {
    let crds = api::crds::all();
    let plurals: HashMap<(String, String), String> = crds
        .iter()
        .map(|crd| {
            let key = (crd.spec.group.clone(), crd.spec.names.kind.clone());
            (key, crd.spec.names.plural.clone())
        })
        .collect();
    let validator = move |gvk: &apiserver::GroupVersionKind,
                          old: Option<&serde_json::Value>,
                          new: &serde_json::Value| {
        let Some(plural) = plurals.get(&(gvk.group.clone(), gvk.kind.clone())) else {
            return Ok(Vec::new());
        };
        api::validation::validate(&gvk.kind, old, new).map_err(|denial| {
            let name = new["metadata"]["name"].as_str().unwrap_or_default();
            let message = denial.status_message(&gvk.kind, plural, &gvk.group, name);
            apiserver::Denial {
                code: denial.code(),
                message,
                field: None,
            }
        })
    };
    builder
        .crds(
            crds.into_iter()
                .map(|crd| serde_json::to_value(crd).expect("a CRD serializes")),
        )
        .namespace("d8-system")
        .validator(validator)
}
