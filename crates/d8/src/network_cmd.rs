//! `d8 network cni-migration …`: switching the cluster's CNI. `switch` and `status` are the
//! operator's commands (as in Deckhouse's d8 CLI); `manager` and `agent` are the two halves
//! that do the work (in a cluster: a control-plane Deployment and a DaemonSet; `d8 controller`
//! also runs the manager under the platform Lease).

use std::path::PathBuf;
use std::time::Duration;

/// `d8 network` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Switch the cluster's CNI (cilium, flannel, simple-bridge).
    #[command(name = "cni-migration")]
    CniMigration(CniArgs),
}

/// Flags of `d8 network cni-migration`.
#[derive(Debug, clap::Args)]
pub(crate) struct CniArgs {
    /// Kubeconfig to use (default: `$KUBECONFIG`, `~/.kube/config`, or in-cluster).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    #[command(subcommand)]
    command: CniCommand,
}

#[derive(Debug, clap::Subcommand)]
enum CniCommand {
    /// Start the switch: creates the CNIMigration (refused while one exists, or to the CNI
    /// already running).
    Switch {
        /// Target CNI provider to switch to. Supported values: cilium, flannel, simple-bridge.
        #[arg(long = "to-cni")]
        to_cni: String,
    },
    /// The migration's phase and a table of its nodes.
    Status,
    /// Run the migration manager (drives the phases while a CNIMigration exists).
    Manager {
        /// Time between two passes.
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        interval: Duration,
    },
    /// Run the migration agent of one node.
    Agent {
        /// The node this agent runs on.
        #[arg(long, env = "NODE_NAME")]
        node: String,
        /// The node's CNI config directory.
        #[arg(long, default_value = "/etc/cni/net.d")]
        cni_conf_dir: PathBuf,
        /// The `ip` command (iproute2) that deletes the old CNI's links.
        #[arg(long, default_value = "ip")]
        ip_command: PathBuf,
        /// Time between two passes.
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        interval: Duration,
    },
}

/// Runs a `d8 network` subcommand.
pub(crate) async fn run(command: Command) -> anyhow::Result<()> {
    let Command::CniMigration(args) = command;
    let client = crate::kube_client::client(args.kubeconfig.as_deref()).await?;
    match args.command {
        CniCommand::Switch { to_cni } => {
            let message = utilities::cni::cli::switch(&client, &to_cni).await?;
            write_out(&message)?;
        }
        CniCommand::Status => write_out(&utilities::cni::cli::status(&client).await?)?,
        CniCommand::Manager { interval } => {
            let manager = utilities::cni::manager::Manager::new(
                client,
                utilities::cni::manager::Options {
                    interval,
                    ..Default::default()
                },
            );
            manager.run(crate::shutdown_signal()).await;
        }
        CniCommand::Agent {
            node,
            cni_conf_dir,
            ip_command,
            interval,
        } => {
            anyhow::ensure!(!node.is_empty(), "--node (or NODE_NAME) is required");
            let agent = utilities::cni::agent::Agent::new(
                client,
                utilities::cni::agent::Options {
                    node,
                    clean: utilities::cni::cleanup::Node {
                        cni_conf_dir,
                        ip_command,
                    },
                    interval,
                },
            );
            agent.run(crate::shutdown_signal()).await;
        }
    }
    Ok(())
}

fn write_out(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    std::io::stdout().lock().write_all(text.as_bytes())
}
