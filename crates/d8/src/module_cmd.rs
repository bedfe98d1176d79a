//! `d8 module …`: which modules run (phase, source, version, why disabled), their releases with
//! why each waits, and `d8 module controller`, the module manager on its own (without leader
//! election; `d8 controller` runs it under the platform's Lease).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use api::module::Module;
use api::module_release::ModuleRelease;
use kube::api::ListParams;
use kube::{Api, Client};
use module_controller::controller::Options;
use module_controller::install::Downloaded;
use module_controller::manager::Manager;
use module_controller::view;
use module_plan::enabling::{Facts, version_of};

/// Flags of `d8 module`.
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
    /// Modules with phase, source, version and why a module does not run.
    List,
    /// ModuleReleases with why each one waits (optionally of one module).
    Releases {
        /// Only this module's releases.
        module: Option<String>,
    },
    /// Run the module manager: ModuleSources, Modules, ModuleConfigs, ModuleReleases and
    /// ModulePullOverrides.
    Controller(Box<ManagerArgs>),
    /// Render a module's chart exactly as `helm template` does (no cluster needed).
    Render(Box<crate::module_render::RenderArgs>),
    /// Prepare the downloaded modules directory (the `init-downloaded-modules` init container):
    /// create `DIR/modules` and check that it is writable.
    InitDownloadedModules {
        /// The downloaded modules directory (`$DOWNLOADED_MODULES_DIR`).
        #[arg(long, env = "DOWNLOADED_MODULES_DIR")]
        dir: PathBuf,
    },
}

/// Creates `dir/modules` and proves it writable by writing and removing a probe file.
fn init_downloaded_modules(dir: &std::path::Path) -> anyhow::Result<()> {
    let modules = dir.join("modules");
    std::fs::create_dir_all(&modules).with_context(|| format!("create {}", modules.display()))?;
    let probe = modules.join(".d8-write-probe");
    std::fs::write(&probe, b"")
        .with_context(|| format!("{} is not writable", modules.display()))?;
    std::fs::remove_file(&probe).with_context(|| format!("remove {}", probe.display()))?;
    print(&format!("{} is ready\n", modules.display()))
}

/// Flags of the module manager (also part of `d8 controller`).
#[derive(Debug, clap::Args)]
pub(crate) struct ManagerArgs {
    /// Where downloaded modules live (`$DOWNLOADED_MODULES_DIR`); `d8 controller` runs the
    /// module manager only when this is set.
    #[arg(long, env = "DOWNLOADED_MODULES_DIR")]
    downloaded_modules_dir: Option<PathBuf>,
    /// The embedded modules directory (`$MODULES_DIR`: `NNN-name` directories or `module.yaml`).
    #[arg(long, env = "MODULES_DIR")]
    modules_dir: Option<PathBuf>,
    /// Global hooks (`$GLOBAL_HOOKS_DIR`): every executable below it is a global hook of the
    /// module runtime (onStartup, beforeAll/afterAll, schedule, kubernetes).
    #[arg(long, env = "GLOBAL_HOOKS_DIR")]
    global_hooks_dir: Option<PathBuf>,
    /// The bundle (`Default`, `Minimal`, `Managed`).
    #[arg(long, default_value = "Default")]
    bundle: String,
    /// The edition (`ce`, `ee`, …).
    #[arg(long, default_value = "ce")]
    edition: String,
    /// The running Deckhouse version, for module requirements.
    #[arg(long)]
    deckhouse_version: Option<String>,
    /// The Kubernetes version, for module requirements.
    #[arg(long = "module-kubernetes-version")]
    module_kubernetes_version: Option<String>,
    /// Keep the default ModuleSource `deckhouse` at this repository (e.g. the node agent's
    /// `127.0.0.1:5001/system/deckhouse/modules`, so that modules are read through the agent).
    #[arg(long)]
    default_module_source_repo: Option<String>,
    /// Scheme of the default ModuleSource (`HTTP` or `HTTPS`).
    #[arg(long, default_value = "HTTPS")]
    default_module_source_scheme: String,
    /// CA (PEM file) of the default ModuleSource's registry (the agent's CA).
    #[arg(long)]
    default_module_source_ca: Option<PathBuf>,
    /// Time between two scans of every ModuleSource.
    #[arg(long, default_value = "3m", value_parser = humantime::parse_duration)]
    module_source_interval: std::time::Duration,
}

impl ManagerArgs {
    /// `--deckhouse-version`, when given and a version.
    pub(crate) fn deckhouse_version(&self) -> Option<semver::Version> {
        self.deckhouse_version.as_deref().and_then(version_of)
    }

    /// `--downloaded-modules-dir`, when given.
    pub(crate) fn downloaded_dir(&self) -> Option<&std::path::Path> {
        self.downloaded_modules_dir.as_deref()
    }
}

/// The module manager and when it runs passes, or `None` without `--downloaded-modules-dir`.
pub(crate) fn manager(
    client: Client,
    args: &ManagerArgs,
) -> anyhow::Result<Option<crate::controller_cmd::Modules>> {
    let Some(dir) = &args.downloaded_modules_dir else {
        return Ok(None);
    };
    let downloaded = Downloaded::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    let embedded = match &args.modules_dir {
        Some(modules) => module_controller::embedded::discover(modules)
            .with_context(|| format!("reading the modules in {}", modules.display()))?,
        None => Vec::new(),
    };
    let facts = Facts {
        bundle: args.bundle.clone(),
        edition: args.edition.clone(),
        deckhouse_version: args.deckhouse_version.as_deref().and_then(version_of),
        kubernetes_version: args
            .module_kubernetes_version
            .as_deref()
            .and_then(version_of),
        bootstrapped: true,
        ..Default::default()
    };
    // The runtime runs what the manager puts on disk: the same embedded modules and
    // downloaded directory.
    let runtime = module_controller::runtime::Runtime::new(
        client.clone(),
        module_controller::runtime::ModuleDirs {
            embedded: embedded.clone(),
            downloaded: Some(downloaded.clone()),
        },
        Arc::new(release_controller::SystemClock),
    )
    .with_global_hooks_dir(args.global_hooks_dir.clone());
    let manager = Manager::new(
        client,
        downloaded,
        Arc::new(release_controller::SystemClock),
        facts,
    )
    .with_embedded(embedded)
    // The canary wave of module releases, as the release engine's (`--cluster-uuid`).
    .with_cluster_uuid(std::env::var("D8_CLUSTER_UUID").unwrap_or_default());
    let manager = match &args.default_module_source_repo {
        Some(repo) => {
            let scheme = match args
                .default_module_source_scheme
                .to_ascii_uppercase()
                .as_str()
            {
                "HTTP" => api::module_source::Scheme::Http,
                "HTTPS" => api::module_source::Scheme::Https,
                other => anyhow::bail!("--default-module-source-scheme {other:?}: HTTP or HTTPS"),
            };
            let ca = match &args.default_module_source_ca {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .with_context(|| format!("reading {}", path.display()))?,
                ),
                None => None,
            };
            manager.with_default_source(api::module_source::SourceRegistry {
                scheme,
                repo: repo.clone(),
                docker_cfg: None,
                ca,
            })
        }
        None => manager,
    };
    let options = Options {
        source_interval: args.module_source_interval,
        ..Default::default()
    };
    Ok(Some((manager, options, Arc::new(runtime))))
}

fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Runs `d8 module …`.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    if let Command::Render(render) = args.command {
        crate::module_render::run(*render);
    }
    if let Command::InitDownloadedModules { dir } = &args.command {
        return init_downloaded_modules(dir);
    }
    let client = crate::kube_client::client(args.kubeconfig.as_deref()).await?;
    match args.command {
        Command::List => {
            let modules = Api::<Module>::all(client)
                .list(&ListParams::default())
                .await
                .context("listing Modules")?;
            print(&view::render_modules(&view::module_rows(&modules.items)))
        }
        Command::Releases { module } => {
            let mut params = ListParams::default();
            if let Some(module) = &module {
                params = params.labels(&format!("{}={module}", api::keys::LABEL_MODULE));
            }
            let releases = Api::<ModuleRelease>::all(client)
                .list(&params)
                .await
                .context("listing ModuleReleases")?;
            print(&view::render_releases(&releases.items))
        }
        Command::Render(_) | Command::InitDownloadedModules { .. } => {
            unreachable!("handled before connecting")
        }
        Command::Controller(args) => {
            let (manager, options, _) = manager(client, &args)?
                .context("the module manager needs --downloaded-modules-dir")?;
            manager
                .run_controller(options, crate::shutdown_signal())
                .await;
            Ok(())
        }
    }
}
