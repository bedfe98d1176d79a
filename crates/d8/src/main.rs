//! `d8`: one binary, one subcommand per component of the platform. This file only parses the
//! command line and hands over; each subcommand lives in its own module.

mod apiserver_cmd;
#[cfg(test)]
mod chart_args;
mod controller_cmd;
mod image_cmd;
mod kube_client;
mod log_level;
mod mirror_cmd;
mod module_cmd;
mod module_render;
mod network_cmd;
mod package_cmd;
mod private_state;
mod queue_cmd;
mod registry_cmd;
mod release_cmd;
mod up_cmd;
mod webhook_cmd;
mod webhook_handler_cmd;

use clap::{Parser, Subcommand};

/// Deckhouse platform core and registry, re-implemented in Rust.
#[derive(Debug, Parser)]
#[command(name = "d8", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The embedded Kubernetes API server for a single machine.
    Apiserver(apiserver_cmd::Args),
    /// Applications installed from packages: `list` (`-A` for every namespace) with why one is
    /// not running.
    App(package_cmd::AppArgs),
    /// Every platform controller (registry, releases) under leader election.
    Controller(Box<controller_cmd::Args>),
    /// d8's own container image: build it (reproducibly) and push it to a registry.
    Image {
        #[command(subcommand)]
        command: image_cmd::Command,
    },
    /// Bundles of platform releases and modules for air-gapped clusters.
    Mirror {
        #[command(subcommand)]
        command: mirror_cmd::Command,
    },
    /// Modules: list (phase, source, version, why disabled), releases (why each waits), the
    /// module manager.
    Module(module_cmd::Args),
    /// Packages repositories offer: `list`, `versions NAME`.
    Package(package_cmd::PackageArgs),
    /// Networking: `cni-migration` (switch the cluster's CNI: switch, status, manager, agent).
    Network {
        #[command(subcommand)]
        command: network_cmd::Command,
    },
    /// The registry module's components.
    Registry {
        #[command(subcommand)]
        command: registry_cmd::Command,
    },
    /// The module runtime's task queues (`list`: each queue with its length and head).
    Queue {
        #[command(subcommand)]
        command: queue_cmd::Command,
    },
    /// Platform releases: list (with why each waits), approve, apply now; the release engine.
    Release(release_cmd::Args),
    /// The whole platform on this machine: API server, controllers and this node's registry
    /// agent in one process.
    Up(Box<up_cmd::Args>),
    /// Deckhouse's webhook handler: serves ValidationWebhook and ConversionWebhook objects'
    /// handlers (Python with the `deckhouse` SDK, CEL) to the API server over HTTPS.
    WebhookHandler(Box<webhook_handler_cmd::Args>),
    /// The admission and conversion webhook of the platform's kinds, for kube-apiserver
    /// (AdmissionReview and ConversionReview over HTTPS).
    Webhook(webhook_cmd::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // ring with AES-128-GCM preferred (the agent's choice; see `agent::server::crypto_provider`).
    let _ = agent::server::crypto_provider().install_default();
    log_level::init();
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        match cli.command {
            Command::Apiserver(args) => apiserver_cmd::run(args).await,
            Command::App(args) => package_cmd::run_app(args).await,
            Command::Controller(args) => controller_cmd::run(*args).await,
            Command::Image { command } => image_cmd::run(command).await,
            Command::Mirror { command } => mirror_cmd::run(command).await,
            Command::Module(args) => module_cmd::run(args).await,
            Command::Network { command } => network_cmd::run(command).await,
            Command::Package(args) => package_cmd::run_package(args).await,
            Command::Queue { command } => queue_cmd::run(command).await,
            Command::Registry { command } => registry_cmd::run(command).await,
            Command::Release(args) => release_cmd::run(args).await,
            Command::Up(args) => up_cmd::run(*args).await,
            Command::WebhookHandler(args) => webhook_handler_cmd::run(*args).await,
            Command::Webhook(args) => webhook_cmd::run(args).await,
        }
    })
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("install the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
