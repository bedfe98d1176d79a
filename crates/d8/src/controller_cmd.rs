//! `d8 controller`: the one place every controller of the platform is composed. One replica at
//! a time acts, elected through Lease `d8-system/deckhouse-leader-election`; while it leads it
//! runs the registry controller, the release engine, the module manager, the ObjectKeeper
//! controller, the module documentation builds and the CNI migration manager, and stops them
//! the moment it loses the lease. Metrics are served on every replica.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::release_cmd;

/// The Lease of the platform controller.
const LEASE: &str = "deckhouse-leader-election";

/// Flags of `d8 controller`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Kubeconfig to use (default: in-cluster or `~/.kube/config`).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// This replica's identity in the election (default: the host name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Where `/metrics` is served.
    #[arg(long, default_value = "127.0.0.1:4281")]
    metrics_address: SocketAddr,
    /// Time between two passes of the registry controller.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    registry_interval: Duration,
    /// The cache replicas speak plain HTTP (single machine, loopback only).
    #[arg(long)]
    storage_plain_http: bool,
    /// CA (PEM) of the cache replicas' serving certificate.
    #[arg(long)]
    storage_ca: Option<PathBuf>,
    /// A cache replica known up front, `NODE=HOST:PORT` (repeatable).
    #[arg(long = "storage-replica", value_name = "NODE=HOST:PORT")]
    storage_replicas: Vec<String>,
    /// Do not run the release engine.
    #[arg(long)]
    without_release_engine: bool,
    #[command(flatten)]
    engine: release_cmd::EngineArgs,
    #[command(flatten)]
    modules: crate::module_cmd::ManagerArgs,
    /// How often the ObjectKeeper controller looks again at an object a keeper follows.
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
    object_keeper_recheck: Duration,
    /// First wait before a documentation builder that failed is tried again (doubled each
    /// time, at most 5m).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    documentation_retry: Duration,
    /// Time between two passes of the CNI migration manager (it acts only while a
    /// CNIMigration exists).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    cni_migration_interval: Duration,
}

/// The utility controllers: ObjectKeeper always, module documentation builds when modules are
/// downloaded here.
#[derive(Debug, Default)]
pub(crate) struct Utilities {
    /// The ObjectKeeper controller's settings.
    pub(crate) object_keeper: utilities::object_keeper::Options,
    /// The documentation controller's settings, when it runs.
    pub(crate) documentation: Option<utilities::documentation::Options>,
    /// The CNI migration manager's settings.
    pub(crate) cni_migration: utilities::cni::manager::Options,
}

fn utilities_options(args: &Args) -> Utilities {
    Utilities {
        object_keeper: utilities::object_keeper::Options {
            recheck: args.object_keeper_recheck,
            ..Default::default()
        },
        documentation: args.modules.downloaded_dir().map(|dir| {
            let mut options = utilities::documentation::Options::new(dir);
            options.retry_base = args.documentation_retry;
            options
        }),
        cni_migration: utilities::cni::manager::Options {
            interval: args.cni_migration_interval,
        },
    }
}

fn registry_options(args: &Args) -> anyhow::Result<registry_controller::Options> {
    let mut storage = registry_controller::StorageOptions {
        scheme: if args.storage_plain_http {
            api::module_source::Scheme::Http
        } else {
            api::module_source::Scheme::Https
        },
        ..Default::default()
    };
    if let Some(path) = &args.storage_ca {
        storage.ca = Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        );
    }
    for replica in &args.storage_replicas {
        let (node, address) = replica
            .split_once('=')
            .with_context(|| format!("--storage-replica {replica:?}: expected NODE=HOST:PORT"))?;
        storage.replicas.push((node.to_owned(), address.to_owned()));
    }
    Ok(registry_controller::Options {
        interval: args.registry_interval,
        storage,
        ..Default::default()
    })
}

/// Runs the composition until Ctrl-C or SIGTERM.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let client = crate::kube_client::client(args.kubeconfig.as_deref()).await?;
    let identity = match &args.identity {
        Some(identity) => identity.clone(),
        None => hostname().unwrap_or_else(|| format!("d8-controller-{}", std::process::id())),
    };
    let engine = if args.without_release_engine {
        None
    } else {
        Some(release_cmd::engine(client.clone(), &args.engine)?)
    };
    let composition = Composition {
        identity,
        registry: registry_options(&args)?,
        engine,
        metrics_address: args.metrics_address,
        utilities: utilities_options(&args),
    };
    let modules = crate::module_cmd::manager(client.clone(), &args.modules)?;
    if modules.is_none() {
        tracing::info!("no --downloaded-modules-dir: the module manager does not run");
    }
    let metrics = bind_metrics(composition.metrics_address).await?;
    lead(
        client,
        composition,
        modules,
        metrics,
        crate::shutdown_signal(),
    )
    .await
}

/// This machine's host name, if it has one.
pub(crate) fn hostname() -> Option<String> {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
}

/// What [`lead`] runs: the registry controller and, optionally, the release engine.
pub(crate) struct Composition {
    /// This replica's identity in the election.
    pub(crate) identity: String,
    /// The registry controller's settings.
    pub(crate) registry: registry_controller::Options,
    /// The release engine, if it runs.
    pub(crate) engine: Option<release_controller::controller::Engine>,
    /// Where `/metrics` is served.
    pub(crate) metrics_address: SocketAddr,
    /// The utility controllers.
    pub(crate) utilities: Utilities,
}

/// Binds the metrics listener (separately, so a caller learns of a busy port before it starts).
pub(crate) async fn bind_metrics(address: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen on {address}"))
}

/// The module manager, when it runs its passes, and the module runtime (queues, render,
/// apply) running what it installs.
pub(crate) type Modules = (
    module_controller::manager::Manager,
    module_controller::controller::Options,
    Arc<module_controller::runtime::Runtime>,
);

/// Serves metrics on `listener` and runs the controllers (and the module manager, when given)
/// while this replica holds the lease, until `shutdown` resolves; then stops them and releases
/// the lease.
pub(crate) async fn lead(
    client: Client,
    composition: Composition,
    modules: Option<Modules>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let Composition {
        identity,
        registry,
        engine,
        metrics_address,
        utilities,
    } = composition;
    let registry = Arc::new(registry_controller::Controller::new(
        client.clone(),
        registry,
    ));
    let engine = engine.map(Arc::new);
    let mut metrics = Registry::default();
    registry.metrics().register(&mut metrics);
    let mut queues = None;
    let mut hook_metrics = None;
    if let Some((manager, _, runtime)) = &modules {
        manager.metrics().register(&mut metrics);
        runtime.queue_metrics().register(&mut metrics);
        queues = Some(runtime.queue_view());
        hook_metrics = Some(runtime.hook_metrics());
    }
    if let Some(engine) = &engine {
        engine.metrics().register(&mut metrics);
    }
    let metrics = Arc::new(metrics);
    tracing::info!(address = %metrics_address, "metrics at /metrics");
    let metrics_task = tokio::spawn(serve_metrics(listener, metrics, queues, hook_metrics));
    // Every replica logs at the `deckhouse` ModuleConfig's `logLevel`.
    let log_task = tokio::spawn(crate::log_level::follow(client.clone()));
    let modules = modules.map(Arc::new);
    let utilities = Arc::new(utility_controllers(&client, utilities)?);
    let result = elect_and_run(
        client, &identity, registry, engine, modules, utilities, shutdown,
    )
    .await;
    metrics_task.abort();
    log_task.abort();
    result
}

/// The ObjectKeeper controller, the documentation controller (when it runs) and the CNI
/// migration manager.
type UtilityControllers = (
    utilities::object_keeper::Controller,
    Option<utilities::documentation::Controller>,
    utilities::cni::manager::Manager,
);

fn utility_controllers(client: &Client, options: Utilities) -> anyhow::Result<UtilityControllers> {
    let keepers = utilities::object_keeper::Controller::new(client.clone(), options.object_keeper);
    let documentation = options
        .documentation
        .map(|o| utilities::documentation::Controller::new(client.clone(), o))
        .transpose()
        .context("documentation controller")?;
    let cni = utilities::cni::manager::Manager::new(client.clone(), options.cni_migration);
    Ok((keepers, documentation, cni))
}

async fn elect_and_run(
    client: Client,
    identity: &str,
    registry: Arc<registry_controller::Controller>,
    engine: Option<Arc<release_controller::controller::Engine>>,
    modules: Option<Arc<Modules>>,
    utilities: Arc<UtilityControllers>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let leases: Api<Lease> = Api::namespaced(client, "d8-system");
    let elector = leader::LeaderElector::new(leases, leader::Config::new(LEASE, identity))
        .context("leader election")?;
    let mut leadership = elector.spawn();
    let signal = shutdown;
    tokio::pin!(signal);
    loop {
        // Wait to lead.
        while !leadership.is_leader() {
            tokio::select! {
                _ = &mut signal => {
                    leadership.shutdown().await;
                    return Ok(());
                }
                _ = leadership.changed() => {}
            }
        }
        tracing::info!(%identity, lease = LEASE, "leading: controllers start");
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn({
            let registry = registry.clone();
            let stopped = until_stopped(stopped.clone());
            async move { registry.run(stopped).await }
        }));
        if let Some(engine) = &engine {
            let engine = engine.clone();
            let stopped = until_stopped(stopped.clone());
            tasks.push(tokio::spawn(async move { engine.run(stopped).await }));
        }
        if let Some(modules) = &modules {
            let runtime = modules.2.clone();
            let runtime_stopped = until_stopped(stopped.clone());
            let modules = modules.clone();
            let stopped = until_stopped(stopped.clone());
            tasks.push(tokio::spawn(async move {
                let (manager, options, _) = &*modules;
                manager.run_controller(*options, stopped).await
            }));
            // The runtime runs what the manager installs, under the same lease.
            tasks.push(tokio::spawn(
                async move { runtime.run(runtime_stopped).await },
            ));
        }
        tasks.push(tokio::spawn({
            let utilities = utilities.clone();
            let stopped = until_stopped(stopped.clone());
            async move { utilities.0.run(stopped).await }
        }));
        tasks.push(tokio::spawn({
            let utilities = utilities.clone();
            let stopped = until_stopped(stopped.clone());
            async move { utilities.2.run(stopped).await }
        }));
        if utilities.1.is_some() {
            let utilities = utilities.clone();
            let stopped = until_stopped(stopped.clone());
            tasks.push(tokio::spawn(async move {
                if let Some(documentation) = &utilities.1 {
                    documentation.run(stopped).await
                }
            }));
        }
        let quit = loop {
            tokio::select! {
                _ = &mut signal => break true,
                leading = leadership.changed() => if !leading { break false },
            }
        };
        let _ = stop.send(true);
        for task in tasks {
            let _ = task.await;
        }
        if quit {
            leadership.shutdown().await;
            return Ok(());
        }
        tracing::warn!(%identity, "lost the lease: controllers stopped");
    }
}

/// A minimal `/metrics` endpoint (Prometheus text format) and `/queue/list` (the module
/// runtime's queues, for `d8 queue list`); anything else is 404.
/// The metrics module hooks wrote (`METRICS_PATH`).
type HookMetrics = Arc<std::sync::Mutex<module_controller::module_hooks::MetricStore>>;

/// The registry's text with the hooks' metrics before its `# EOF`.
fn with_hook_metrics(text: String, hooks: Option<&HookMetrics>) -> String {
    let Some(extra) = hooks
        .and_then(|h| h.lock().ok().map(|s| s.render()))
        .filter(|t| !t.is_empty())
    else {
        return text;
    };
    match text.strip_suffix("# EOF\n") {
        Some(head) => format!("{head}{extra}# EOF\n"),
        None => format!("{text}{extra}"),
    }
}

async fn serve_metrics(
    listener: tokio::net::TcpListener,
    metrics: Arc<Registry>,
    queues: Option<module_controller::runtime::worker::QueueView>,
    hooks: Option<HookMetrics>,
) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        let queues = queues.clone();
        let hooks = hooks.clone();
        tokio::spawn(async move {
            let mut buffer = [0u8; 1024];
            let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await;
            let Ok(Ok(n)) = read else { return };
            let request = String::from_utf8_lossy(&buffer[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or_default();
            let (status, body) = if path == "/metrics" {
                (
                    "200 OK",
                    with_hook_metrics(
                        registry_controller::metrics::encode(&metrics),
                        hooks.as_ref(),
                    ),
                )
            } else if path == "/queue/list" {
                match &queues {
                    Some(q) => ("200 OK", q.render()),
                    None => (
                        "404 Not Found",
                        "the module runtime does not run here\n".into(),
                    ),
                }
            } else {
                ("404 Not Found", String::new())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}
