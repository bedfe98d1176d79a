//! Assembly of the agent: PKI, listeners, and the layout loop that polls the node's layout,
//! swaps it into the proxy, converges the containerd drop-in and reports status.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use registry_plan::Layout;
use rustls_pki_types::UnixTime;

use crate::dropin;
use crate::metrics::Metrics;
use crate::pki;
use crate::proxy::{LayoutCell, Proxy};
use crate::server::{CertStore, bind, serve_metrics, serve_registry, tls_config};
use crate::source::{Cache, CacheUpdate, Fetched, Origin, Snapshot, decide, load_bootstrap};

/// The agent's settings (the flags of `d8 registry agent`).
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen (`127.0.0.1:5001`).
    pub listen: SocketAddr,
    /// The address containerd is told and the loop guard compares `ns` with; defaults to the
    /// bound listen address.
    pub advertise: Option<String>,
    /// Serve plain HTTP instead of TLS (local use only).
    pub plain_http: bool,
    /// Where to serve `/metrics` (`127.0.0.1:4286`); `None` for nowhere.
    pub metrics: Option<SocketAddr>,
    /// containerd's registry drop-in directory (`/etc/containerd/registry.d`).
    pub containerd_registry_dir: PathBuf,
    /// The agent's PKI directory (`/etc/kubernetes/registry-agent/pki`).
    pub pki_dir: PathBuf,
    /// Extra CAs to trust for every registry (`*.crt`, `*.pem`), re-read every pass.
    pub trust_dir: Option<PathBuf>,
    /// The layout the node was installed with.
    pub bootstrap_layout: Option<PathBuf>,
    /// The on-disk copy of the last layout from the API.
    pub layout_cache: PathBuf,
    /// How often the layout is re-read.
    pub interval: Duration,
    /// Timeouts towards registries; `total` is `--forward-timeout`.
    pub timeouts: registry_client::Timeouts,
    /// The slowest a registry may send a body (`--min-throughput`); `None` for no floor.
    pub min_throughput: Option<registry_client::MinThroughput>,
}

/// What the agent reports in `RegistryNode.status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStatus {
    /// Generation of the applied layout (0 for bootstrap).
    pub observed_generation: i64,
    /// The layout was applied (drop-in converged).
    pub reconciled: bool,
    /// The registry endpoint is listening.
    pub proxy_listening: bool,
    /// Backends of the applied layout, in order.
    pub active_backends: Vec<String>,
    /// Where the layout came from.
    pub origin: Option<Origin>,
    /// A human-readable account of the last pass.
    pub message: String,
}

/// The agent's view of the Kubernetes API: its RegistryNode (credentials resolved) and the
/// status it writes. Implemented over kube in a cluster; [`NoApi`] runs on the bootstrap
/// layout alone.
pub trait NodeApi: Send + Sync + 'static {
    /// Reads the node's layout.
    fn fetch(&self) -> impl std::future::Future<Output = Fetched> + Send;
    /// Writes the node's status.
    fn report(
        &self,
        status: &NodeStatus,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send;
}

/// No API: the agent runs on its bootstrap layout (or its cache).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoApi;

impl NodeApi for NoApi {
    async fn fetch(&self) -> Fetched {
        Fetched::Failed("no API server is configured".into())
    }
    async fn report(&self, _status: &NodeStatus) -> Result<(), String> {
        Ok(())
    }
}

/// Errors that stop the agent from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The PKI cannot be loaded or issued.
    #[error("agent PKI: {0}")]
    Pki(#[from] pki::PkiError),
    /// The drop-in directory is not writable.
    #[error("containerd drop-in: {0}")]
    DropIn(#[from] dropin::DropInError),
    /// A listener cannot be bound.
    #[error("{0}")]
    Listen(#[from] std::io::Error),
}

/// A running agent. Dropping it does not stop it; call [`Running::stop`].
#[derive(Debug)]
pub struct Running {
    /// The registry endpoint's bound address.
    pub address: SocketAddr,
    /// The metrics endpoint's bound address.
    pub metrics_address: Option<SocketAddr>,
    /// The CA containerd trusts.
    pub ca_pem: String,
    /// The agent's metrics.
    pub metrics: Arc<Metrics>,
    /// The layout in use.
    pub layout: LayoutCell,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Stops listening, lets requests in flight finish, and stops the loop.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Starts the agent: PKI, drop-in check, listeners, one layout pass, then the loop.
pub async fn start<A: NodeApi>(config: Config, api: A) -> Result<Running, StartError> {
    let (pki, outcome) = pki::ensure(&config.pki_dir, UnixTime::now())?;
    if outcome == pki::Outcome::Issued {
        tracing::info!(dir = %config.pki_dir.display(), "issued the agent's certificate");
    }
    dropin::check_writable(&config.containerd_registry_dir)?;
    let listener = bind(config.listen).await?;
    let address = listener.local_addr()?;
    let advertise = config
        .advertise
        .clone()
        .unwrap_or_else(|| address.to_string());
    let metrics = Arc::new(Metrics::default());
    let layout = LayoutCell::default();
    let client = registry_client::Client::new(registry_client::Config {
        timeouts: config.timeouts,
        min_throughput: config.min_throughput,
        // Only token exchanges go through it now (the forwarded requests go through
        // `upstream::Upstreams`, HTTP/1.1 as well): short requests, no need for HTTP/2.
        http1_only: true,
        ..registry_client::Config::default()
    });
    let tokens = client.clone();
    metrics.count_tokens_from(Box::new(move || {
        let stats = tokens.token_stats();
        (stats.issued, stats.failed)
    }));
    let proxy = Proxy::new(client, layout.clone(), metrics.clone(), &advertise);
    proxy.set_trust(config.trust_dir.as_deref().and_then(read_trust_dir));
    let certs = CertStore::new(pki.certified_key()?);
    let tls = (!config.plain_http).then(|| tls_config(certs.clone()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };

    let mut tasks = Vec::new();
    let mut metrics_address = None;
    if let Some(metrics_listen) = config.metrics {
        let listener = bind(metrics_listen).await?;
        metrics_address = Some(listener.local_addr()?);
        tasks.push(tokio::spawn(serve_metrics(
            listener,
            metrics.clone(),
            until_stopped(stopped.clone()),
        )));
    }
    tasks.push(tokio::spawn(serve_registry(
        listener,
        tls,
        proxy.clone(),
        until_stopped(stopped.clone()),
    )));

    let mut lp = Loop {
        config,
        api,
        proxy,
        layout: layout.clone(),
        metrics: metrics.clone(),
        certs,
        ca_pem: pki.ca_pem.clone(),
        advertise,
    };
    lp.pass().await;
    let mut loop_stopped = stopped;
    tasks.push(tokio::spawn(async move {
        let mut ticker = tokio::time::interval(lp.config.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = ticker.tick() => lp.pass().await,
                _ = loop_stopped.changed() => break,
            }
        }
    }));
    Ok(Running {
        address,
        metrics_address,
        ca_pem: pki.ca_pem,
        metrics,
        layout,
        stop,
        tasks,
    })
}

struct Loop<A> {
    config: Config,
    api: A,
    proxy: Proxy,
    layout: LayoutCell,
    metrics: Arc<Metrics>,
    certs: Arc<CertStore>,
    ca_pem: String,
    advertise: String,
}

impl<A: NodeApi> Loop<A> {
    /// One pass: renew the certificate if due, read the layout, apply it, report.
    async fn pass(&mut self) {
        self.renew_certificate();
        if let Some(dir) = &self.config.trust_dir {
            self.proxy.set_trust(read_trust_dir(dir));
        }
        let cache = Cache::new(&self.config.layout_cache);
        let cached = cache.load().unwrap_or_else(|error| {
            tracing::error!(%error, "the stored layout is unusable");
            None
        });
        let bootstrap = match &self.config.bootstrap_layout {
            Some(path) => load_bootstrap(path).unwrap_or_else(|error| {
                tracing::error!(%error, "the bootstrap layout is unusable");
                None
            }),
            None => None,
        };
        let fetched = self.api.fetch().await;
        if let Fetched::Failed(reason) = &fetched {
            tracing::debug!(%reason, "layout not read from the API");
        }
        let (snapshot, update) = match decide(fetched, cached, bootstrap) {
            Ok(decided) => decided,
            Err(error) => {
                tracing::warn!(%error, "keeping the current layout");
                return;
            }
        };
        if let CacheUpdate::Save(stored) = update
            && let Err(error) = cache.save(&stored)
        {
            tracing::error!(%error, "cannot store the layout for use without the API server");
        }
        let status = self.apply(&snapshot);
        if let Err(error) = self.api.report(&status).await {
            tracing::warn!(%error, "cannot write the node status");
        }
    }

    fn renew_certificate(&mut self) {
        match pki::ensure(&self.config.pki_dir, UnixTime::now()) {
            Ok((pki, pki::Outcome::Issued)) => match pki.certified_key() {
                Ok(key) => {
                    tracing::info!("renewed the agent's certificate");
                    self.certs.replace(key);
                    self.ca_pem = pki.ca_pem;
                }
                Err(error) => tracing::error!(%error, "the renewed certificate is unusable"),
            },
            Ok((_, pki::Outcome::Kept)) => {}
            Err(error) => tracing::error!(%error, "cannot check the agent's certificate"),
        }
    }

    /// Swaps the layout in first, then converges the drop-in: containerd is only pointed at
    /// the agent once the agent can route.
    fn apply(&self, snapshot: &Snapshot) -> NodeStatus {
        let layout: Option<Layout> = snapshot.layout.clone().filter(|l| !l.is_empty());
        let configured = layout.is_some();
        let active_backends = layout
            .iter()
            .flat_map(|l| &l.backends)
            .map(|b| format!("{:?}", b.name))
            .collect();
        self.layout.set(layout);
        self.metrics.layout_origin(snapshot.origin);
        let scheme = if self.config.plain_http {
            "http"
        } else {
            "https"
        };
        let desired = dropin::render(
            configured,
            &format!("{scheme}://{}", self.advertise),
            &self.ca_pem,
            &self.config.containerd_registry_dir,
        );
        let (reconciled, message) = match dropin::apply(
            &self.config.containerd_registry_dir,
            &desired,
        ) {
            Ok(applied) => {
                if applied.changed() {
                    tracing::info!(written = ?applied.written, removed = ?applied.removed_hosts, "containerd drop-in updated");
                }
                let origin = snapshot.origin.map_or("none", Origin::as_str);
                (
                    true,
                    format!(
                        "layout of generation {} applied from {origin}",
                        snapshot.generation
                    ),
                )
            }
            Err(error) => {
                tracing::error!(%error, "cannot write the containerd drop-in");
                (false, error.to_string())
            }
        };
        NodeStatus {
            observed_generation: snapshot.generation,
            reconciled,
            proxy_listening: true,
            active_backends,
            origin: snapshot.origin,
            message,
        }
    }
}

/// The PEM certificates of a trust directory, concatenated; `None` when there are none.
fn read_trust_dir(dir: &std::path::Path) -> Option<String> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "crt" || x == "pem"))
        .collect();
    entries.sort();
    let pem: String = entries
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter(|text| text.contains("-----BEGIN CERTIFICATE-----"))
        .collect::<Vec<_>>()
        .join("\n");
    (!pem.is_empty()).then_some(pem)
}
