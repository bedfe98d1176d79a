//! The module manager as a controller: when passes run.
//!
//! - A change to a ModuleSource, ModuleConfig, ModuleRelease, ModulePullOverride or
//!   ModuleUpdatePolicy (its spec, labels, annotations, finalizers or deletion; never its
//!   status, so the manager's own status writes do not wake it) runs a full pass shortly after
//!   (changes arriving together are folded into one pass).
//! - Every [`Options::source_interval`] (Deckhouse: 3 minutes) a full pass rescans every
//!   ModuleSource.
//! - Every [`Options::release_requeue`] (Deckhouse: 15 s) the Pending releases are looked at
//!   again, so that windows, canary delays and notification delays elapse without a registry
//!   round trip.
//! - Each ModulePullOverride is polled on its own `scanInterval` (15 s when unset, zero or
//!   unreadable).
//!
//! A failed pass is retried after a back-off doubling from one second up to the source
//! interval. Leader election is the caller's: `d8 controller` runs this only while it holds
//! the platform's Lease.

use std::collections::BTreeMap;
use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use api::module_config::ModuleConfig;
use api::module_pull_override::ModulePullOverride;
use api::module_release::ModuleRelease;
use api::module_source::ModuleSource;
use api::module_update_policy::v1alpha2::ModuleUpdatePolicy;
use futures_util::StreamExt;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use tokio::time::Instant;

use crate::Error;
use crate::manager::Manager;

/// Deckhouse's ModuleSource requeue.
pub const SOURCE_INTERVAL: Duration = Duration::from_secs(180);
/// How soon a Pending release is looked at again.
pub const RELEASE_REQUEUE: Duration = Duration::from_secs(15);
/// A ModulePullOverride's poll interval when its `scanInterval` is unset, zero or unreadable.
pub const DEFAULT_SCAN_INTERVAL: Duration = Duration::from_secs(15);
const BACKOFF_MIN: Duration = Duration::from_secs(1);

/// When the controller runs passes.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Between two scans of every ModuleSource.
    pub source_interval: Duration,
    /// Between two looks at the Pending releases.
    pub release_requeue: Duration,
    /// How long changes are collected before the pass they trigger.
    pub debounce: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            source_interval: SOURCE_INTERVAL,
            release_requeue: RELEASE_REQUEUE,
            debounce: Duration::from_millis(200),
        }
    }
}

/// A ModulePullOverride's `scanInterval` (`^(\d+h)?(\d+m)?(\d+s)?$`); `None` when it does not
/// parse or is zero.
pub fn parse_scan_interval(text: &str) -> Option<Duration> {
    let mut total: u64 = 0;
    let mut number = String::new();
    let mut last_unit = 0u8;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let (rank, seconds) = match c {
            'h' => (1, 3600),
            'm' => (2, 60),
            's' => (3, 1),
            _ => return None,
        };
        // Units appear at most once, in the order h, m, s, each after a number.
        if rank <= last_unit || number.is_empty() {
            return None;
        }
        last_unit = rank;
        let n: u64 = number.parse().ok()?;
        number.clear();
        total = total.checked_add(n.checked_mul(seconds)?)?;
    }
    if !number.is_empty() || total == 0 {
        return None;
    }
    Some(Duration::from_secs(total))
}

/// The poll interval of `o`.
pub fn scan_interval(o: &ModulePullOverride) -> Duration {
    parse_scan_interval(&o.spec.scan_interval).unwrap_or(DEFAULT_SCAN_INTERVAL)
}

/// What of an object makes a pass worth running: everything but its status.
fn spec_hash<K: Resource>(object: &K) -> Option<u64> {
    let meta = object.meta();
    let mut h = DefaultHasher::new();
    meta.generation.hash(&mut h);
    meta.deletion_timestamp.is_some().hash(&mut h);
    object.labels().hash(&mut h);
    object.annotations().hash(&mut h);
    object.finalizers().hash(&mut h);
    Some(h.finish())
}

fn watch<K>(
    manager: &Manager,
    changed: tokio::sync::mpsc::Sender<()>,
) -> tokio::task::JoinHandle<()>
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    <K as Resource>::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let api: Api<K> = Api::all(manager.client().clone());
    tokio::spawn(async move {
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .touched_objects()
            .predicate_filter(spec_hash, Default::default());
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => {
                    let _ = changed.try_send(());
                }
                Err(error) => {
                    let kind = K::kind(&Default::default()).into_owned();
                    tracing::warn!(%kind, %error, "module manager watch");
                }
            }
        }
    })
}

fn later(now: Instant, after: Duration) -> Instant {
    now.checked_add(after)
        .unwrap_or_else(|| now + Duration::from_secs(86_400))
}

impl Manager {
    /// Runs passes on changes and timers (see the module docs) until `shutdown` resolves.
    pub async fn run_controller(&self, options: Options, shutdown: impl Future<Output = ()>) {
        let (changed, mut changes) = tokio::sync::mpsc::channel::<()>(64);
        let watches = vec![
            watch::<ModuleSource>(self, changed.clone()),
            watch::<ModuleConfig>(self, changed.clone()),
            watch::<ModuleRelease>(self, changed.clone()),
            watch::<ModulePullOverride>(self, changed.clone()),
            watch::<ModuleUpdatePolicy>(self, changed),
        ];
        let mut shutdown = std::pin::pin!(shutdown);
        let now = Instant::now();
        let mut next_full = now;
        let mut next_releases = later(now, options.release_requeue);
        let mut overrides: BTreeMap<String, Instant> = BTreeMap::new();
        let mut backoff = BACKOFF_MIN;
        tracing::info!("module manager started");
        loop {
            let next_override = overrides.values().min().copied();
            let far = later(Instant::now(), Duration::from_secs(86_400));
            enum Wake {
                Full,
                Releases,
                Overrides,
            }
            let wake = tokio::select! {
                () = &mut shutdown => break,
                Some(()) = changes.recv() => {
                    tokio::time::sleep(options.debounce).await;
                    while changes.try_recv().is_ok() {}
                    Wake::Full
                }
                () = tokio::time::sleep_until(next_full) => Wake::Full,
                () = tokio::time::sleep_until(next_releases) => Wake::Releases,
                () = tokio::time::sleep_until(next_override.unwrap_or(far)) => Wake::Overrides,
            };
            let pass = async {
                match wake {
                    Wake::Full => self.reconcile_all().await.map(|()| true),
                    Wake::Releases => self.reconcile_releases().await.map(|()| false),
                    Wake::Overrides => {
                        self.poll_due_overrides(&mut overrides).await?;
                        Ok(false)
                    }
                }
            };
            let result = tokio::select! {
                () = &mut shutdown => break,
                result = pass => result,
            };
            let now = Instant::now();
            match result {
                Ok(full) => {
                    backoff = BACKOFF_MIN;
                    if full {
                        next_full = later(now, options.source_interval);
                        next_releases = later(now, options.release_requeue);
                        match self.override_schedule(now).await {
                            Ok(schedule) => overrides = schedule,
                            Err(error) => tracing::warn!(%error, "listing ModulePullOverrides"),
                        }
                    } else if matches!(wake, Wake::Releases) {
                        next_releases = later(now, options.release_requeue);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, retry_in = ?backoff, "module manager pass failed");
                    next_full = later(now, backoff);
                    backoff = backoff.saturating_mul(2).min(options.source_interval);
                }
            }
        }
        for w in watches {
            w.abort();
        }
        tracing::info!("module manager stopped");
    }

    /// When each ModulePullOverride is next polled, counted from `now`.
    async fn override_schedule(&self, now: Instant) -> Result<BTreeMap<String, Instant>, Error> {
        let list = Api::<ModulePullOverride>::all(self.client().clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list ModulePullOverrides", e))?;
        Ok(list
            .items
            .iter()
            .map(|o| (o.name_any(), later(now, scan_interval(o))))
            .collect())
    }

    /// Polls the overrides whose time has come and schedules their next poll.
    async fn poll_due_overrides(
        &self,
        schedule: &mut BTreeMap<String, Instant>,
    ) -> Result<(), Error> {
        let now = Instant::now();
        let due: Vec<String> = schedule
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(name, _)| name.clone())
            .collect();
        let api: Api<ModulePullOverride> = Api::all(self.client().clone());
        for name in due {
            match api
                .get_opt(&name)
                .await
                .map_err(|e| Error::kube(format!("get ModulePullOverride {name}"), e))?
            {
                Some(o) => {
                    schedule.insert(name, later(now, scan_interval(&o)));
                    self.sync_override(&o).await?;
                }
                None => {
                    schedule.remove(&name);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_intervals_as_the_crd_pattern_allows() {
        let cases: &[(&str, Option<u64>)] = &[
            ("15s", Some(15)),
            ("1m", Some(60)),
            ("1h30m", Some(5400)),
            ("2h3m4s", Some(7384)),
            ("0s", None),
            ("", None),
            ("10", None),
            ("1s1m", None),
            ("1m1m", None),
            ("m", None),
            ("5d", None),
            ("-5s", None),
            ("99999999999999999999h", None),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse_scan_interval(text),
                want.map(Duration::from_secs),
                "{text:?}"
            );
        }
    }

    #[test]
    fn status_changes_do_not_wake_the_controller() {
        let release = |message: &str, annotation: Option<&str>| {
            let mut r = ModuleRelease::new(
                "echo-v1.0.0",
                api::module_release::ModuleReleaseSpec {
                    module_name: "echo".into(),
                    version: "1.0.0".into(),
                    weight: None,
                    apply_after: None,
                    requirements: None,
                    update_constraints: None,
                    changelog: None,
                },
            );
            r.metadata.generation = Some(1);
            r.status = Some(api::module_release::ModuleReleaseStatus {
                message: message.into(),
                ..Default::default()
            });
            if let Some(a) = annotation {
                r.annotations_mut().insert(a.into(), "true".into());
            }
            r
        };
        let base = spec_hash(&release("", None));
        assert_eq!(base, spec_hash(&release("Release is postponed", None)));
        assert_ne!(
            base,
            spec_hash(&release("", Some("modules.deckhouse.io/approved")))
        );
        let mut deleted = release("", None);
        deleted.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert_ne!(base, spec_hash(&deleted));
    }
}
