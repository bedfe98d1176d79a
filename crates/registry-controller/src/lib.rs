//! The registry controller (part of `d8 controller`): it turns ModuleConfig `registry` into
//! what every node's agent and every cache replica reads — one `RegistryNode` per Node (owned by
//! the Node), `RegistryStorage`, and Secret `d8-system/registry-resolved-auth` holding every
//! credential they reference — and keeps `RegistryConfig` (rendered from the ModuleConfig) and
//! its status, the RegistryUpstream verdicts, ConfigMap `registry-image-address`, the drain
//! record, the migration marker, `registry-suggested-config` and the `d8_registry_*` metrics.
//!
//! Each pass is observe → plan → act: read everything, call the pure planners of
//! `registry-controller-plan`, write what differs (the credentials Secret first), write status.
//! Passes are level-triggered and idempotent; [`Controller::run`] repeats them on an interval.
//! The preflight probe of the primary upstream is the only network call outside the API.
//!
//! It depends on kube-rs only for I/O: it must not depend on the API server, the agent or the
//! storage implementation (they meet through the API objects).

mod error;
pub mod ingress_client;
pub mod metrics;
pub mod probe;
mod publish;
mod push;
mod reconcile;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::module_source::Scheme;
use registry_plan::Credentials;

pub use registry_controller_plan::prerequisites::ClusterFacts;

pub use error::Error;
pub use metrics::Metrics;
pub use reconcile::Report;

/// How agents reach the cache replicas (what the storage PKI and accounts would say).
#[derive(Clone, Debug, Default)]
pub struct StorageOptions {
    /// `HTTP` (single machine, loopback) or `HTTPS`.
    pub scheme: Scheme,
    /// CA of the replicas' serving certificate.
    pub ca: Option<String>,
    /// The replicas' pull-only node account.
    pub credentials: Option<Credentials>,
    /// Replicas known up front, `(node, host:port)`, in addition to those that report an
    /// address in `RegistryStorage.status.replicas`.
    pub replicas: Vec<(String, String)>,
}

/// Where the facts the module's prerequisites are checked against come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ClusterSource {
    /// ClusterConfiguration in Secret `kube-system/d8-cluster-configuration`; without it the
    /// cluster is a Managed Kubernetes the module refuses to work in.
    #[default]
    ClusterConfiguration,
    /// Known up front (the single machine: one static node running containerd).
    Fixed(ClusterFacts),
}

/// Controller settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// Time between two passes.
    pub interval: Duration,
    /// Bound of one preflight probe (Deckhouse: 20 s).
    pub probe_timeout: Duration,
    /// A failed probe of an unchanged upstream is repeated after this long.
    pub probe_retry: Duration,
    /// The cache replicas.
    pub storage: StorageOptions,
    /// What the module's prerequisites are checked against.
    pub cluster: ClusterSource,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(10),
            probe_timeout: Duration::from_secs(20),
            probe_retry: Duration::from_secs(60),
            storage: StorageOptions::default(),
            cluster: ClusterSource::default(),
        }
    }
}

/// The registry controller.
pub struct Controller {
    client: kube::Client,
    options: Options,
    metrics: Arc<Metrics>,
    state: Mutex<reconcile::Memory>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller acting through `client`.
    pub fn new(client: kube::Client, options: Options) -> Self {
        Self {
            client,
            options,
            metrics: Arc::new(Metrics::default()),
            state: Mutex::new(reconcile::Memory::default()),
        }
    }

    /// The metric families (register them with [`Metrics::register`]).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Runs passes every `interval` until `shutdown` resolves. A failed pass is logged and
    /// retried on the next tick; it never stops the loop.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut tick = tokio::time::interval(self.options.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tick.tick() => {}
            }
            let span = tracing::info_span!("reconcile", object = "registry");
            match tracing::Instrument::instrument(self.reconcile(), span).await {
                Ok(report) => tracing::debug!(?report, "registry reconciled"),
                Err(error) => tracing::warn!(%error, "registry reconcile failed; retrying"),
            }
        }
    }
}
