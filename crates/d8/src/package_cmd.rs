//! `d8 package …` and `d8 app …`: the packages repositories offer, their versions, and the
//! Applications installed from them with why one is not running (the style of `d8 module list`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use api::packages::{Application, ApplicationPackage, ApplicationPackageVersion};
use kube::Api;
use kube::api::ListParams;
use package_controller::view;

/// Flags of `d8 package`.
#[derive(Debug, clap::Args)]
pub(crate) struct PackageArgs {
    /// Kubeconfig to use (default: `$KUBECONFIG`, `~/.kube/config`, or in-cluster).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    #[command(subcommand)]
    command: PackageCommand,
}

#[derive(Debug, clap::Subcommand)]
enum PackageCommand {
    /// ApplicationPackages with their repositories, versions and instances.
    List,
    /// A package's ApplicationPackageVersions, lowest first, with their metadata state.
    Versions {
        /// The package.
        name: String,
    },
}

/// Flags of `d8 app`.
#[derive(Debug, clap::Args)]
pub(crate) struct AppArgs {
    /// Kubeconfig to use (default: `$KUBECONFIG`, `~/.kube/config`, or in-cluster).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    #[command(subcommand)]
    command: AppCommand,
}

#[derive(Debug, clap::Subcommand)]
enum AppCommand {
    /// Applications with package, version, state and why one is not running.
    List {
        /// In every namespace.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// In this namespace (default `default`).
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
}

fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Runs `d8 package …`.
pub(crate) async fn run_package(args: PackageArgs) -> anyhow::Result<()> {
    let client = crate::kube_client::client(args.kubeconfig.as_deref()).await?;
    let versions = Api::<ApplicationPackageVersion>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing ApplicationPackageVersions")?
        .items;
    match args.command {
        PackageCommand::List => {
            let packages = Api::<ApplicationPackage>::all(client)
                .list(&ListParams::default())
                .await
                .context("listing ApplicationPackages")?
                .items;
            print(&view::render_packages(&packages, &versions))
        }
        PackageCommand::Versions { name } => print(&view::render_versions(&name, &versions)),
    }
}

/// Runs `d8 app …`.
pub(crate) async fn run_app(args: AppArgs) -> anyhow::Result<()> {
    let client = crate::kube_client::client(args.kubeconfig.as_deref()).await?;
    match args.command {
        AppCommand::List {
            all_namespaces,
            namespace,
        } => {
            let api: Api<Application> = if all_namespaces {
                Api::all(client)
            } else {
                Api::namespaced(client, &namespace)
            };
            let apps = api
                .list(&ListParams::default())
                .await
                .context("listing Applications")?
                .items;
            print(&view::render_applications(&apps, all_namespaces))
        }
    }
}
