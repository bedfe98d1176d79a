//! The release engine: what it observes and acts through ([`Engine`]), and the long-running
//! loops ([`Engine::run`]): the release channel every 3 minutes and on settings changes, the
//! DeckhouseRelease controller (kube-runtime, level-triggered, re-run for every release when the
//! settings change), and the cleanup every 24 hours. [`Engine::error_policy`] is the one place
//! that decides backoff.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::deckhouse_release::DeckhouseRelease;
use api::module_config::ModuleConfig;
use futures_util::StreamExt;
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};

use crate::alerts::{AlertSource, StaticAlerts};
use crate::apply::{AlwaysReady, Deployer, Readiness};
use crate::metrics::Metrics;
use crate::notify::Notifier;
use crate::requirements::{Checks, KubernetesVersionSource};
use crate::settings::{DeckhouseSettings, MODULE_CONFIG_NAME};
use crate::source::ReleaseSource;
use crate::{Clock, Error, SystemClock};

/// The controller's name in Events (Deckhouse's).
pub const CONTROLLER_NAME: &str = "d8-deckhouse-release-controller";
/// How often the release channel is read.
pub const CHANNEL_INTERVAL: Duration = Duration::from_secs(180);
/// How often outdated releases are cleaned up.
pub const CLEANUP_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// How often the platform's image is checked against the image address.
pub const IMAGE_ADDRESS_INTERVAL: Duration = Duration::from_secs(10);
/// First retry after a failed reconcile; doubled per consecutive failure.
pub const BACKOFF_MIN: Duration = Duration::from_secs(5);
/// Longest retry delay after failures.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// What the engine observes and acts through.
pub struct Engine {
    pub(crate) client: Client,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) source: ReleaseSource,
    pub(crate) deployer: Arc<dyn Deployer>,
    pub(crate) readiness: Arc<dyn Readiness>,
    pub(crate) alerts: Arc<dyn AlertSource>,
    pub(crate) checks: Arc<Checks>,
    pub(crate) notifier: Notifier,
    pub(crate) cluster_uuid: String,
    pub(crate) kubernetes_version: KubernetesVersionSource,
    pub(crate) channel_interval: Duration,
    /// The channel tag and digest last synced (Deckhouse keeps it in memory too).
    pub(crate) channel_digest: Mutex<Option<(String, oci::Digest)>>,
    pub(crate) metrics: Metrics,
    pub(crate) recorder: Recorder,
    failures: Mutex<HashMap<String, u32>>,
}

/// Builds an [`Engine`].
pub struct Builder {
    client: Client,
    source: ReleaseSource,
    deployer: Arc<dyn Deployer>,
    clock: Arc<dyn Clock>,
    readiness: Arc<dyn Readiness>,
    alerts: Arc<dyn AlertSource>,
    checks: Checks,
    cluster_uuid: String,
    kubernetes_version: KubernetesVersionSource,
    channel_interval: Duration,
}

impl Builder {
    /// Where "now" comes from (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Whether the running Deckhouse is ready (default: always).
    pub fn readiness(mut self, readiness: Arc<dyn Readiness>) -> Self {
        self.readiness = readiness;
        self
    }

    /// Where firing alerts come from (default: none fire).
    pub fn alerts(mut self, alerts: Arc<dyn AlertSource>) -> Self {
        self.alerts = alerts;
        self
    }

    /// The requirement and disruption checks (default: [`Checks::with_defaults`]).
    pub fn checks(mut self, checks: Checks) -> Self {
        self.checks = checks;
        self
    }

    /// The cluster UUID that picks this cluster's canary wave.
    pub fn cluster_uuid(mut self, uuid: impl Into<String>) -> Self {
        self.cluster_uuid = uuid.into();
        self
    }

    /// Where the Kubernetes version comes from (default: the cluster configuration).
    pub fn kubernetes_version(mut self, source: KubernetesVersionSource) -> Self {
        self.kubernetes_version = source;
        self
    }

    /// How often the channel is read (default [`CHANNEL_INTERVAL`]).
    pub fn channel_interval(mut self, every: Duration) -> Self {
        self.channel_interval = every;
        self
    }

    /// The engine.
    pub fn build(self) -> Engine {
        let recorder = Recorder::new(
            self.client.clone(),
            Reporter {
                controller: CONTROLLER_NAME.into(),
                instance: None,
            },
        );
        Engine {
            notifier: Notifier::new(self.clock.clone()),
            client: self.client,
            clock: self.clock,
            source: self.source,
            deployer: self.deployer,
            readiness: self.readiness,
            alerts: self.alerts,
            checks: Arc::new(self.checks),
            cluster_uuid: self.cluster_uuid,
            kubernetes_version: self.kubernetes_version,
            channel_interval: self.channel_interval,
            channel_digest: Mutex::new(None),
            metrics: Metrics::default(),
            recorder,
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("source", &self.source)
            .field("deployer", &self.deployer)
            .field("clock", &self.clock)
            .field("checks", &self.checks)
            .field("cluster_uuid", &self.cluster_uuid)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("source", &self.source)
            .field("cluster_uuid", &self.cluster_uuid)
            .finish_non_exhaustive()
    }
}

/// The result of reconciling one release.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Something was written.
    pub changed: bool,
    /// Look again after this long (`None`: only on the next change).
    pub requeue_after: Option<Duration>,
}

impl Outcome {
    pub(crate) fn done() -> Self {
        Self::default()
    }

    pub(crate) fn changed() -> Self {
        Self {
            changed: true,
            requeue_after: None,
        }
    }

    pub(crate) fn requeue(changed: bool, after: Duration) -> Self {
        Self {
            changed,
            requeue_after: Some(after),
        }
    }
}

impl Engine {
    /// An engine reading releases from `source` and applying them through `deployer`.
    pub fn builder(client: Client, source: ReleaseSource, deployer: Arc<dyn Deployer>) -> Builder {
        Builder {
            client,
            source,
            deployer,
            clock: Arc::new(SystemClock),
            readiness: Arc::new(AlwaysReady),
            alerts: Arc::new(StaticAlerts::new()),
            checks: Checks::with_defaults(),
            cluster_uuid: String::new(),
            kubernetes_version: KubernetesVersionSource::ClusterConfiguration,
            channel_interval: CHANNEL_INTERVAL,
        }
    }

    /// The engine's metrics, to register where `/metrics` is served.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The Kubernetes client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn releases_api(&self) -> Api<DeckhouseRelease> {
        Api::all(self.client.clone())
    }

    /// The `deckhouse` ModuleConfig settings (defaults when it does not exist).
    pub async fn settings(&self) -> Result<DeckhouseSettings, Error> {
        let configs: Api<ModuleConfig> = Api::all(self.client.clone());
        let config = configs
            .get_opt(MODULE_CONFIG_NAME)
            .await
            .map_err(|e| Error::kube("get ModuleConfig deckhouse", e))?;
        DeckhouseSettings::from_settings(config.and_then(|c| c.spec.settings).as_ref())
    }

    /// Every DeckhouseRelease.
    pub async fn list_releases(&self) -> Result<Vec<DeckhouseRelease>, Error> {
        self.releases_api()
            .list(&Default::default())
            .await
            .map(|l| l.items)
            .map_err(|e| Error::kube("list DeckhouseReleases", e))
    }

    /// One pass over every release, oldest version first, repeated while a pass changed
    /// something (at most 10 passes). Returns the shortest requested requeue.
    pub async fn reconcile_all(&self) -> Result<Option<Duration>, Error> {
        let mut requeue: Option<Duration> = None;
        for _ in 0..10 {
            let mut releases = self.list_releases().await?;
            releases.sort_by_cached_key(|r| {
                release_plan::ReleaseVersion::parse(&r.spec.spec.version).ok()
            });
            let mut changed = false;
            requeue = None;
            for release in releases {
                let outcome = self.reconcile(&release.name_any()).await?;
                changed |= outcome.changed;
                if let Some(after) = outcome.requeue_after {
                    requeue = Some(requeue.map_or(after, |r| r.min(after)));
                }
            }
            if !changed {
                break;
            }
        }
        Ok(requeue)
    }

    /// The one place that decides how long to wait after a failed reconcile of `key`:
    /// [`BACKOFF_MIN`] doubled per consecutive failure, at most [`BACKOFF_MAX`].
    pub fn error_policy(&self, key: &str, error: &Error) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(key.to_owned()).or_insert(0);
        let delay = BACKOFF_MIN
            .saturating_mul(1u32 << (*count).min(10))
            .min(BACKOFF_MAX);
        *count = count.saturating_add(1);
        tracing::warn!(object = key, %error, retry_in = ?delay, "release reconcile failed");
        delay
    }

    fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Runs the channel loop, the DeckhouseRelease controller and the cleanup until `shutdown`
    /// resolves.
    pub async fn run(self: Arc<Self>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
        let settings_changed = Arc::new(tokio::sync::Notify::new());
        let (reconcile_all_tx, reconcile_all_rx) = tokio::sync::mpsc::channel::<()>(16);

        // Settings changes wake the channel loop and re-run every release.
        let configs: Api<ModuleConfig> = Api::all(self.client.clone());
        let watch = watcher(
            configs,
            watcher::Config::default().fields(&format!("metadata.name={MODULE_CONFIG_NAME}")),
        );
        let notify = settings_changed.clone();
        let settings_task = tokio::spawn(async move {
            let mut watch = std::pin::pin!(watch);
            while let Some(event) = watch.next().await {
                match event {
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_))
                    | Ok(watcher::Event::InitDone) => {
                        notify.notify_one();
                        let _ = reconcile_all_tx.try_send(());
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "watching the deckhouse ModuleConfig"),
                }
            }
        });

        let engine = self.clone();
        let channel_task = tokio::spawn(async move {
            loop {
                match engine.sync_channel().await {
                    Ok(outcome) => tracing::debug!(?outcome, "release channel synced"),
                    Err(error) => tracing::warn!(%error, "release channel sync failed"),
                }
                tokio::select! {
                    _ = tokio::time::sleep(engine.channel_interval) => {}
                    _ = settings_changed.notified() => {}
                }
            }
        });

        // The platform's image follows the image address (step two of the registry switch).
        let engine = self.clone();
        let address_task = tokio::spawn(async move {
            loop {
                if let Err(error) = engine.deployer.follow_image_address().await {
                    tracing::warn!(%error, "following the image address failed");
                }
                tokio::time::sleep(engine.channel_interval.min(IMAGE_ADDRESS_INTERVAL)).await;
            }
        });

        let engine = self.clone();
        let cleanup_task = tokio::spawn(async move {
            loop {
                if let Err(error) = engine.cleanup().await {
                    tracing::warn!(%error, "release cleanup failed");
                }
                tokio::time::sleep(CLEANUP_INTERVAL).await;
            }
        });

        let trigger = futures_util::stream::unfold(reconcile_all_rx, |mut rx| async move {
            rx.recv().await.map(|()| ((), rx))
        });
        Controller::new(self.releases_api(), watcher::Config::default())
            .reconcile_all_on(trigger)
            .graceful_shutdown_on(shutdown)
            .run(
                |release: Arc<DeckhouseRelease>, engine: Arc<Engine>| async move {
                    let name = release.name_any();
                    let outcome = engine.reconcile(&name).await?;
                    engine.succeeded(&name);
                    Ok::<_, Error>(match outcome.requeue_after {
                        Some(after) => Action::requeue(after),
                        None => Action::await_change(),
                    })
                },
                |release: Arc<DeckhouseRelease>, error: &Error, engine: Arc<Engine>| {
                    Action::requeue(engine.error_policy(&release.name_any(), error))
                },
                self.clone(),
            )
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(%error, "release controller event");
                }
            })
            .await;
        settings_task.abort();
        channel_task.abort();
        address_task.abort();
        cleanup_task.abort();
    }
}
