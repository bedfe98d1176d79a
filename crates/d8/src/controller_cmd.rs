//! `d8 controller`: the one place every controller of the platform is composed. One replica at
//! a time acts, elected through Lease `d8-system/deckhouse-leader-election`; while it leads it
//! runs the registry controller, the release engine, the module manager, the ObjectKeeper
//! controller, the module documentation builds and the CNI migration manager, and stops them
//! the moment it loses the lease. Metrics are served on every replica: on the loopback address to
//! anyone, and, with `--secure-metrics-address`, over HTTPS to callers a TokenReview and a
//! SubjectAccessReview let through (kube-rbac-proxy built in, [`metrics`]).

mod cni_chart;
mod metrics;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use prometheus_client::registry::Registry;

use crate::release_cmd;

/// The Lease of the platform controller.
const LEASE: &str = "deckhouse-leader-election";

/// A failed pass of the webhook certificate keeper is tried again after this long.
const WEBHOOK_CERTIFICATE_RETRY: Duration = Duration::from_secs(10);

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
    /// Also serve `/metrics` and `/queue/list` here over HTTPS, only to bearer tokens that pass
    /// a TokenReview and a SubjectAccessReview (`/healthz` stays open for the probes).
    #[arg(long)]
    secure_metrics_address: Option<SocketAddr>,
    /// The secure listener's certificate (PEM; default: self-signed at start).
    #[arg(long, requires = "metrics_tls_private_key_file")]
    metrics_tls_cert_file: Option<PathBuf>,
    /// The secure listener's private key (PEM).
    #[arg(long, requires = "metrics_tls_cert_file")]
    metrics_tls_private_key_file: Option<PathBuf>,
    /// What a caller must be allowed, as kube-rbac-proxy's `resourceAttributes`
    /// (`namespace=d8-system,apiGroup=apps,apiVersion=v1,resource=deployments,subresource=prometheus-metrics,name=deckhouse`);
    /// without it, `get` on the request path as a non-resource URL.
    #[arg(long, requires = "secure_metrics_address")]
    metrics_resource_attributes: Option<delegated_auth::ResourceAttributes>,
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
    /// Where the package controller downloads the bundles of the package versions
    /// Applications install (default: `<downloaded-modules-dir>/.packages`, else a directory
    /// under the system's temporary directory).
    #[arg(long)]
    packages_dir: Option<PathBuf>,
    /// Runs the CNI migration manager here, under the lease (for a single machine). Without
    /// it, the controller applies the chart's `cni-migration-manager` Deployment and
    /// `cni-migration-agent` DaemonSet while a CNIMigration exists (Deckhouse's
    /// detect-cni-migration hook) and deletes them afterwards.
    #[arg(long)]
    cni_migration_manager: bool,
    /// Time between two passes of the CNI migration manager (it acts only while a
    /// CNIMigration exists).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    cni_migration_interval: Duration,
    /// A Secret of webhook certificates the leader keeps, `SECRET=SERVICE[,SERVICE…]`
    /// (repeatable): a CA and a serving certificate for the Services' DNS names, renewed before
    /// expiry, the CA injected as `caBundle` where a webhook configuration or CRD conversion
    /// calls one of the Services.
    #[arg(long = "webhook-certificate", value_name = "SECRET=SERVICE[,SERVICE…]")]
    webhook_certificates: Vec<webhook::keeper::Target>,
    /// The Service (one of a `--webhook-certificate`'s) that converts our CRDs serving several
    /// versions: their `spec.conversion` is pointed at its `/convert`.
    #[arg(long, requires = "webhook_certificates")]
    crd_conversion_service: Option<String>,
    /// Namespace of the webhook certificates' Secrets and Services.
    #[arg(long, env = "POD_NAMESPACE", default_value = "d8-system")]
    webhook_namespace: String,
    /// Time between two checks of the webhook certificates.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    webhook_certificate_interval: Duration,
    /// Tests and demos: every controller's clock starts at this instant (RFC 3339, e.g.
    /// `2025-03-03T08:30:00Z`) and runs on at real speed — update windows, canary and
    /// notification delays, ObjectKeeper TTLs and condition times all read it.
    #[arg(long, env = "D8_CLOCK_START", hide = true, value_parser = parse_timestamp)]
    clock_start: Option<jiff::Timestamp>,
}

fn parse_timestamp(text: &str) -> Result<jiff::Timestamp, String> {
    text.parse()
        .map_err(|e| format!("expected an RFC 3339 time such as 2025-03-03T08:30:00Z: {e}"))
}

/// The controllers' clock: the system's, or one started at `--clock-start`.
pub(crate) fn clock(start: Option<jiff::Timestamp>) -> Arc<dyn release_controller::Clock> {
    match start {
        Some(start) => {
            tracing::warn!(%start, "the controllers' clock starts at --clock-start, not at the system time");
            Arc::new(release_controller::OffsetClock::starting_at(start))
        }
        None => Arc::new(release_controller::SystemClock),
    }
}

/// The utility controllers: ObjectKeeper always, module documentation builds when modules are
/// downloaded here.
#[derive(Debug, Default)]
pub(crate) struct Utilities {
    /// The ObjectKeeper controller's settings.
    pub(crate) object_keeper: utilities::object_keeper::Options,
    /// The documentation controller's settings, when it runs.
    pub(crate) documentation: Option<utilities::documentation::Options>,
    /// The CNI migration manager's settings, when it runs here; otherwise the
    /// detect-cni-migration job runs, applying the chart's manager Deployment and agent
    /// DaemonSet while a CNIMigration exists.
    pub(crate) cni_migration: Option<utilities::cni::manager::Options>,
    /// The package controller's settings.
    pub(crate) packages: package_controller::controller::Options,
    /// The detect-cni-migration job's settings (when the manager does not run here).
    pub(crate) cni_components: utilities::cni::components::Options,
    /// The webhook certificates kept, when the chart's webhooks run.
    pub(crate) webhook_certificates: Option<WebhookCertificates>,
}

/// What the webhook certificate keeper keeps, and how often it looks.
#[derive(Debug)]
pub(crate) struct WebhookCertificates {
    namespace: String,
    targets: Vec<webhook::keeper::Target>,
    conversion_service: Option<String>,
    interval: Duration,
}

fn utilities_options(args: &Args, clock: &Arc<dyn release_controller::Clock>) -> Utilities {
    Utilities {
        object_keeper: utilities::object_keeper::Options {
            recheck: args.object_keeper_recheck,
            clock: clock.clone(),
            ..Default::default()
        },
        documentation: args.modules.downloaded_dir().map(|dir| {
            let mut options = utilities::documentation::Options::new(dir);
            options.retry_base = args.documentation_retry;
            options.clock = clock.clone();
            options
        }),
        cni_migration: args
            .cni_migration_manager
            .then(|| utilities::cni::manager::Options {
                interval: args.cni_migration_interval,
                clock: clock.clone(),
            }),
        packages: package_controller::controller::Options {
            packages_dir: args
                .packages_dir
                .clone()
                .or_else(|| args.modules.downloaded_dir().map(|d| d.join(".packages")))
                .unwrap_or_else(|| std::env::temp_dir().join("d8-packages")),
            deckhouse_version: args.modules.deckhouse_version(),
            ..Default::default()
        },
        cni_components: utilities::cni::components::Options {
            interval: args.cni_migration_interval,
            ..Default::default()
        },
        webhook_certificates: (!args.webhook_certificates.is_empty()).then(|| {
            WebhookCertificates {
                namespace: args.webhook_namespace.clone(),
                targets: args.webhook_certificates.clone(),
                conversion_service: args.crd_conversion_service.clone(),
                interval: args.webhook_certificate_interval,
            }
        }),
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
    let clock = clock(args.clock_start);
    let engine = if args.without_release_engine {
        None
    } else {
        Some(release_cmd::engine(
            client.clone(),
            &args.engine,
            clock.clone(),
        )?)
    };
    let secure_metrics = match args.secure_metrics_address {
        Some(address) => {
            let tls = metrics::tls_acceptor(
                args.metrics_tls_cert_file
                    .as_deref()
                    .zip(args.metrics_tls_private_key_file.as_deref()),
            )?;
            let guard = delegated_auth::Guard::new(
                delegated_auth::Kube(client.clone()),
                args.metrics_resource_attributes.clone(),
            )
            .exclude("/healthz");
            tracing::info!(%address, "metrics over HTTPS for reviewed tokens");
            Some((
                bind_metrics(address).await?,
                metrics::Secure {
                    tls,
                    guard: Arc::new(guard),
                },
            ))
        }
        None => None,
    };
    let composition = Composition {
        identity,
        registry: registry_options(&args)?,
        engine,
        metrics_address: args.metrics_address,
        utilities: utilities_options(&args, &clock),
        secure_metrics,
    };
    let modules = crate::module_cmd::manager(client.clone(), &args.modules, clock)?;
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
    /// The protected listener, if any.
    pub(crate) secure_metrics: Option<(tokio::net::TcpListener, metrics::Secure)>,
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
        secure_metrics,
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
    let mut utilities = utilities;
    // Applications' charts see the platform's global values (`$.Platform`) as the module
    // runtime last converged them.
    if let Some((_, _, runtime)) = &modules {
        let runtime = runtime.clone();
        utilities.packages.global_values =
            Some(package_controller::runtime::GlobalValues::new(move || {
                runtime.global_values()
            }));
    }
    let utilities = Arc::new(utility_controllers(&client, utilities)?);
    utilities.3.metrics().register(&mut metrics);
    let endpoints = metrics::Endpoints {
        metrics: Arc::new(metrics),
        queues,
        hooks: hook_metrics,
    };
    tracing::info!(address = %metrics_address, "metrics at /metrics");
    let mut servers = vec![tokio::spawn(metrics::serve_plain(
        listener,
        endpoints.clone(),
    ))];
    if let Some((listener, secure)) = secure_metrics {
        servers.push(tokio::spawn(metrics::serve_secure(
            listener, endpoints, secure,
        )));
    }
    // Every replica logs at the `deckhouse` ModuleConfig's `logLevel`.
    let log_task = tokio::spawn(crate::log_level::follow(client.clone()));
    let modules = modules.map(Arc::new);
    let result = elect_and_run(
        client, &identity, registry, engine, modules, utilities, shutdown,
    )
    .await;
    for server in servers {
        server.abort();
    }
    log_task.abort();
    result
}

/// The ObjectKeeper controller, the documentation controller (when it runs here), the CNI
/// migration's job here, the package controller (repository scans and Applications) and the
/// webhook certificate keeper (with its interval, when it runs).
type UtilityControllers = (
    utilities::object_keeper::Controller,
    Option<utilities::documentation::Controller>,
    CniMigration,
    package_controller::controller::Controller,
    Option<(webhook::keeper::Keeper, Duration)>,
);

/// What `d8 controller` does for CNI migrations: run the manager itself (one machine), or
/// make the chart's manager Deployment and agent DaemonSet exist while a CNIMigration does.
#[derive(Debug)]
enum CniMigration {
    Manager(utilities::cni::manager::Manager),
    Components(utilities::cni::components::Components),
}

impl CniMigration {
    async fn run(&self, stopped: impl std::future::Future<Output = ()>) {
        match self {
            Self::Manager(manager) => manager.run(stopped).await,
            Self::Components(components) => components.run(stopped).await,
        }
    }
}

fn utility_controllers(client: &Client, options: Utilities) -> anyhow::Result<UtilityControllers> {
    let keepers = utilities::object_keeper::Controller::new(client.clone(), options.object_keeper);
    let documentation = options
        .documentation
        .map(|o| utilities::documentation::Controller::new(client.clone(), o))
        .transpose()
        .context("documentation controller")?;
    let cni = match options.cni_migration {
        Some(o) => CniMigration::Manager(utilities::cni::manager::Manager::new(client.clone(), o)),
        None => {
            let chart = cni_chart::CniChart {
                namespace: options.cni_components.namespace.clone(),
            };
            CniMigration::Components(utilities::cni::components::Components::new(
                client.clone(),
                options.cni_components,
                Arc::new(chart),
            ))
        }
    };
    let packages =
        package_controller::controller::Controller::new(client.clone(), options.packages);
    let certificates = options.webhook_certificates.map(|o| {
        let keeper = webhook::keeper::Keeper::new(
            client.clone(),
            o.namespace,
            o.targets,
            o.conversion_service,
        );
        (keeper, o.interval)
    });
    Ok((keepers, documentation, cni, packages, certificates))
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
            async move { utilities.3.run(stopped).await }
        }));
        tasks.push(tokio::spawn({
            let utilities = utilities.clone();
            let stopped = until_stopped(stopped.clone());
            async move { utilities.2.run(stopped).await }
        }));
        if utilities.4.is_some() {
            let utilities = utilities.clone();
            let stopped = until_stopped(stopped.clone());
            tasks.push(tokio::spawn(async move {
                if let Some((keeper, interval)) = &utilities.4 {
                    keeper
                        .run(*interval, WEBHOOK_CERTIFICATE_RETRY, stopped)
                        .await
                }
            }));
        }
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
