//! `d8 release …`: the operator's view of platform releases (why each waits), approving and
//! applying now; and `d8 release controller`, the release engine on its own (the piece a
//! `d8 controller` composition runs next to the other controllers, see [`engine`]).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use api::deckhouse_release::DeckhouseRelease;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use release_controller::alerts::{AlertSource, ClusterAlerts, PrometheusAlerts, StaticAlerts};
use release_controller::apply::{
    AlwaysReady, Deployer, DeploymentTarget, HttpReadiness, Readiness,
};
use release_controller::controller::Engine;
use release_controller::requirements::KubernetesVersionSource;
use release_controller::source::ReleaseSource;

/// Flags of `d8 release`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Kubeconfig to use (default: `$KUBECONFIG`, `~/.kube/config`, or in-cluster).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// List DeckhouseReleases, newest first, with why each one waits.
    List,
    /// Approve a release for Manual mode (sets the top-level `approved: true`).
    Approve {
        /// The release, e.g. `v1.68.5`.
        name: String,
    },
    /// Apply a release at once, ignoring windows, canary delay and approval (requirements
    /// still hold).
    ApplyNow {
        /// The release, e.g. `v1.68.5`.
        name: String,
    },
    /// Run the release engine: the release channel source and the DeckhouseRelease controller.
    Controller(EngineArgs),
}

/// Flags of the release engine.
#[derive(Debug, clap::Args)]
pub(crate) struct EngineArgs {
    /// Registry the release channel is read from (the node agent in a cluster).
    #[arg(long, default_value = "127.0.0.1:5001")]
    registry: String,
    /// Repository of the releases in that registry (`<repository>/release-channel:<channel>`).
    #[arg(long, default_value = "system/deckhouse")]
    repository: String,
    /// Talk plain HTTP to the registry.
    #[arg(long)]
    registry_plain_http: bool,
    /// CA certificate (PEM) of the registry.
    #[arg(long)]
    registry_ca: Option<PathBuf>,
    /// Image repository of Deckhouse in the Deployment (`<this>:<version>`); default
    /// `<registry>/<repository>`.
    #[arg(long)]
    image_repository: Option<String>,
    /// The cluster UUID that picks the canary wave.
    #[arg(long, env = "D8_CLUSTER_UUID", default_value = "")]
    cluster_uuid: String,
    /// Kubernetes version for requirement checks; default: the cluster configuration Secret,
    /// then the API server's `/version`.
    #[arg(long)]
    kubernetes_version: Option<String>,
    /// Single machine: create `d8-system/deckhouse` on the first apply (it records the version).
    #[arg(long)]
    embedded: bool,
    /// Prometheus to read firing alerts from for `update.blockOnAlerts` (default: none fire).
    #[arg(long, conflicts_with = "cluster_alerts")]
    prometheus_url: Option<String>,
    /// Read firing alerts from the ClusterAlert objects, as Deckhouse does in a cluster.
    #[arg(long)]
    cluster_alerts: bool,
    /// Readiness URL of the running Deckhouse (default: always ready).
    #[arg(long)]
    readyz_url: Option<String>,
}

/// The release engine described by `args`, ready to [`Engine::run`].
pub(crate) fn engine(
    client: Client,
    args: &EngineArgs,
    clock: Arc<dyn release_controller::Clock>,
) -> anyhow::Result<Engine> {
    let mut endpoint = if args.registry_plain_http {
        registry_client::Endpoint::http(&args.registry)
    } else {
        registry_client::Endpoint::https(&args.registry)
    };
    if let Some(path) = &args.registry_ca {
        let pem =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        endpoint = endpoint.ca_pem(&pem);
    }
    let remote = registry_client::Client::new(registry_client::Config::default())
        .remote(endpoint)
        .context("registry endpoint")?;
    let source = ReleaseSource::new(remote, &args.repository);
    let images = args
        .image_repository
        .clone()
        .unwrap_or_else(|| format!("{}/{}", args.registry, args.repository));
    let deployer: Arc<dyn Deployer> = if args.embedded {
        Arc::new(DeploymentTarget::embedded(client.clone(), images))
    } else {
        Arc::new(DeploymentTarget::cluster(client.clone(), images))
    };
    let alerts: Arc<dyn AlertSource> = match &args.prometheus_url {
        Some(url) => Arc::new(PrometheusAlerts::new(url)?),
        None if args.cluster_alerts => Arc::new(ClusterAlerts::new(client.clone())),
        None => Arc::new(StaticAlerts::new()),
    };
    let readiness: Arc<dyn Readiness> = match &args.readyz_url {
        Some(url) => Arc::new(HttpReadiness::new(url)),
        None => Arc::new(AlwaysReady),
    };
    let kubernetes_version = match &args.kubernetes_version {
        Some(v) => KubernetesVersionSource::Fixed(v.clone()),
        None => KubernetesVersionSource::ClusterConfiguration,
    };
    Ok(Engine::builder(client, source, deployer)
        .alerts(alerts)
        .readiness(readiness)
        .cluster_uuid(&args.cluster_uuid)
        .kubernetes_version(kubernetes_version)
        .clock(clock)
        .build())
}

fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Runs `d8 release …`.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let client = crate::kube_client::client(args.kubeconfig.as_deref()).await?;
    let releases: Api<DeckhouseRelease> = Api::all(client.clone());
    match args.command {
        Command::List => {
            let list = releases
                .list(&Default::default())
                .await
                .context("listing DeckhouseReleases")?;
            let configs: Api<api::module_config::ModuleConfig> = Api::all(client.clone());
            let settings = configs
                .get_opt("deckhouse")
                .await
                .context("reading the deckhouse ModuleConfig")?
                .and_then(|c| c.spec.settings);
            let settings =
                release_controller::settings::DeckhouseSettings::from_settings(settings.as_ref())?;
            let running = DeploymentTarget::cluster(client, "")
                .running_version()
                .await
                .unwrap_or_default();
            let rows = release_controller::view::rows(&list.items);
            print(&release_controller::view::render(
                &settings,
                running.as_deref(),
                &rows,
            ))
        }
        Command::Approve { name } => {
            releases
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"approved": true})),
                )
                .await
                .with_context(|| format!("approving DeckhouseRelease {name}"))?;
            print(&format!("deckhouserelease.deckhouse.io/{name} approved\n"))
        }
        Command::ApplyNow { name } => {
            let patch = serde_json::json!({"metadata": {"annotations": {
                api::keys::RELEASE_APPLY_NOW: "true"
            }}});
            releases
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .with_context(|| format!("annotating DeckhouseRelease {name}"))?;
            print(&format!(
                "deckhouserelease.deckhouse.io/{name} will be applied at the next reconcile\n"
            ))
        }
        Command::Controller(engine_args) => {
            let engine = Arc::new(engine(
                client,
                &engine_args,
                Arc::new(release_controller::SystemClock),
            )?);
            tracing::info!(registry = %engine_args.registry, repository = %engine_args.repository, "release engine starting");
            // The engine wants a shutdown future it can share between its tasks.
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            tokio::spawn(async move {
                crate::shutdown_signal().await;
                let _ = stop.send(());
            });
            engine
                .run(async move {
                    let _ = stopped.await;
                })
                .await;
            Ok(())
        }
    }
}
