//! `d8 registry …`: the registry module's components.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

/// Registry components.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// The node agent: every containerd pull on the node goes through it.
    Agent(Box<AgentArgs>),
}

/// Flags of `d8 registry agent` (Deckhouse's names and defaults).
#[derive(Debug, clap::Args)]
pub(crate) struct AgentArgs {
    /// Where the registry endpoint listens.
    #[arg(long, default_value = "127.0.0.1:5001")]
    listen_address: SocketAddr,
    /// The address containerd and the loop guard know the agent by (default: the listen address).
    #[arg(long)]
    advertise_address: Option<String>,
    /// Serve plain HTTP instead of TLS (local experiments only).
    #[arg(long)]
    plain_http: bool,
    /// Where /metrics is served.
    #[arg(long, default_value = "127.0.0.1:4286")]
    metrics_address: SocketAddr,
    /// containerd's registry drop-in directory.
    #[arg(long, default_value = "/etc/containerd/registry.d")]
    containerd_registry_dir: PathBuf,
    /// The agent's PKI directory (CA and serving certificate, generated on the node).
    #[arg(long, default_value = "/etc/kubernetes/registry-agent/pki")]
    pki_dir: PathBuf,
    /// The layout the node was installed with (used until the API has been reached).
    #[arg(
        long,
        default_value = "/etc/kubernetes/registry-agent/bootstrap-layout.json"
    )]
    bootstrap_layout: PathBuf,
    /// The on-disk copy of the last layout read from the API.
    #[arg(long, default_value = "/var/lib/deckhouse/registry-agent/layout.json")]
    layout_cache: PathBuf,
    /// Extra CA certificates trusted for every registry.
    #[arg(long, default_value = "/opt/deckhouse/share/ca-certificates")]
    trust_dir: PathBuf,
    /// How often the layout is re-read.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Longest one attempt at one registry may take, body included.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    forward_timeout: Duration,
    /// A registry that sends no bytes for this long is abandoned (containerd can then fall back).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    stall_timeout: Duration,
    /// The kubeconfig to read the node's RegistryNode with; it may appear later.
    #[arg(long, default_value = "/etc/kubernetes/registry-agent/kubeconfig")]
    kubeconfig: PathBuf,
    /// This node's name (its RegistryNode's name).
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
}

/// Runs a registry component until Ctrl-C or SIGTERM.
pub(crate) async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Agent(args) => agent(*args).await,
    }
}

async fn agent(args: AgentArgs) -> anyhow::Result<()> {
    let config = agent::run::Config {
        listen: args.listen_address,
        advertise: args.advertise_address,
        plain_http: args.plain_http,
        metrics: Some(args.metrics_address),
        containerd_registry_dir: args.containerd_registry_dir,
        pki_dir: args.pki_dir,
        trust_dir: Some(args.trust_dir),
        bootstrap_layout: Some(args.bootstrap_layout),
        layout_cache: args.layout_cache,
        interval: args.interval,
        timeouts: registry_client::Timeouts {
            stall: args.stall_timeout,
            total: Some(args.forward_timeout),
            ..registry_client::Timeouts::default()
        },
    };
    let api = agent_kube::KubeNodeApi::new(
        &args.node_name,
        agent_kube::Connection::Kubeconfig(args.kubeconfig),
    );
    let running = agent::run::start(config, api)
        .await
        .context("starting the registry agent")?;
    tracing::info!(address = %running.address, node = %args.node_name, "registry agent listening");
    crate::shutdown_signal().await;
    running.stop().await;
    Ok(())
}
