//! Garbage collection on the cron schedule, one replica at a time.
//!
//! Each replica collects its own store, but never two at once: a run first takes Lease
//! `registry-storage-gc` (identity = node name), keeps it renewed while collecting, and releases
//! it when done, so the replicas' runs at the same scheduled minute follow one another and the
//! cluster always has replicas serving with their stores untouched. The schedule is the
//! controller's resolved `RegistryStorage.spec.garbageCollection` (five cron fields, replicas'
//! time zone; `enabled: false` stops the runs), re-read every minute; resolving it from the
//! maintenance windows is the controller's job. Without it the replica's own schedule applies
//! (default `17 3 * * *`). What to keep comes from the cluster ([`crate::expected`]) or, without one, from fixed
//! inputs; an unknown deployed version or keep set deletes nothing. The outcome lands in the
//! replica's status entry as `collectedAt` / `collectionError`.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use oci::{Digest, Repository};
use registry_plan::expected::{Entry, ExpectedSet};
use storage::gc::{Collection, Options};

use crate::KubeStatus;
use crate::expected::{self, ExpectedError};

/// The lease that serializes collections.
pub const LEASE: &str = "registry-storage-gc";

/// The schedule when none is configured.
pub const DEFAULT_SCHEDULE: &str = "17 3 * * *";

/// Errors of a collection run.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// The schedule is not five cron fields.
    #[error(transparent)]
    Schedule(#[from] api::registry::ScheduleError),
    /// The lease could not be taken in time.
    #[error("Lease {LEASE} is held by another replica's collection; gave up after {waited:?}")]
    LeaseBusy {
        /// How long we waited.
        waited: Duration,
    },
    /// Leader election failed.
    #[error(transparent)]
    Lease(#[from] leader::Error),
    /// The keep set could not be computed.
    #[error("the expected image set: {0}")]
    Expected(#[from] ExpectedError),
    /// The collection itself failed.
    #[error(transparent)]
    Store(#[from] storage::Error),
    /// The blocking task died.
    #[error("the collection task failed: {0}")]
    Task(String),
}

/// A five-field cron schedule, parsed as admission parses it (one implementation, in `api`).
pub use api::registry::GcSchedule as Schedule;

/// [`DEFAULT_SCHEDULE`], parsed.
pub fn default_schedule() -> Schedule {
    Schedule::parse(DEFAULT_SCHEDULE).unwrap_or_else(|_| unreachable!("the default parses"))
}

/// What to keep.
#[derive(Clone, Debug)]
pub enum Keep {
    /// From the cluster's DeckhouseReleases and release images.
    Cluster(expected::Source),
    /// Fixed inputs (no cluster, or `--expected-root`): without a deployed version nothing is
    /// deleted.
    Fixed {
        /// The deployed version.
        deployed: Option<String>,
        /// The previous version.
        previous: Option<String>,
        /// The expected set's root manifests.
        roots: Vec<Digest>,
    },
}

/// A replica's collection settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Namespace of the lease (`d8-system`).
    pub namespace: String,
    /// Lease `registry-storage-gc`, identity = node name.
    pub lease: leader::Config,
    /// The platform repository (root scope of the tag pass).
    pub repository: Repository,
    /// What to keep.
    pub keep: Keep,
    /// Report only.
    pub dry_run: bool,
    /// Uses this recent still protect what they used (an upload touched in this window).
    pub grace: Duration,
    /// How long a run waits for another replica's collection.
    pub wait: Duration,
}

impl Config {
    /// Defaults for `node`: Lease `registry-storage-gc` in `d8-system`, 2 min grace, wait up
    /// to an hour.
    pub fn new(node: &str, repository: Repository, keep: Keep) -> Self {
        let mut lease = leader::Config::new(LEASE, node);
        lease.lease_duration = Duration::from_secs(30);
        lease.renew_deadline = Duration::from_secs(20);
        lease.retry_period = Duration::from_secs(5);
        Self {
            namespace: api::registry::NAMESPACE.to_owned(),
            lease,
            repository,
            keep,
            dry_run: false,
            grace: Duration::from_secs(120),
            wait: Duration::from_secs(3600),
        }
    }
}

fn fixed_set(roots: &[Digest]) -> Option<ExpectedSet> {
    (!roots.is_empty()).then(|| ExpectedSet {
        entries: roots.iter().map(|d| Entry::Digest(d.to_string())).collect(),
    })
}

/// Computes what to keep, then collects (holding nothing: the caller holds the lease).
async fn collect_now(
    client: &kube::Client,
    store: &storage::Store,
    config: &Config,
) -> Result<Collection, GcError> {
    let (deployed, previous, keep) = match &config.keep {
        Keep::Fixed {
            deployed,
            previous,
            roots,
        } => (deployed.clone(), previous.clone(), fixed_set(roots)),
        Keep::Cluster(source) => match expected::compute(client, source).await {
            Ok(c) => (Some(c.deployed), c.previous, Some(c.set)),
            // No deployed version: the run reports it and deletes nothing.
            Err(ExpectedError::Set(registry_plan::expected::ExpectedError::NoVersions)) => {
                (None, None, None)
            }
            Err(e) => return Err(e.into()),
        },
    };
    let options = Options {
        root: config.repository.clone(),
        deployed,
        previous,
        keep,
        dry_run: config.dry_run,
        grace: config.grace,
    };
    let store = store.clone();
    tokio::task::spawn_blocking(move || storage::gc::collect(&store, &options))
        .await
        .map_err(|e| GcError::Task(e.to_string()))?
        .map_err(Into::into)
}

/// One run: waits for Lease `registry-storage-gc`, collects while holding it, releases it,
/// and records the outcome in the replica's status entry (not for a dry run).
pub async fn run_once(
    client: &kube::Client,
    store: &storage::Store,
    config: &Config,
) -> Result<Collection, GcError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &config.namespace);
    let mut leadership = leader::LeaderElector::new(api, config.lease.clone())?.spawn();
    let acquired = tokio::time::timeout(config.wait, async {
        while !leadership.is_leader() {
            leadership.changed().await;
        }
    })
    .await
    .is_ok();
    let result = if acquired {
        tracing::info!(node = %config.lease.identity, dry_run = config.dry_run, "collecting garbage");
        collect_now(client, store, config).await
    } else {
        Err(GcError::LeaseBusy {
            waited: config.wait,
        })
    };
    leadership.shutdown().await;
    if !config.dry_run {
        let outcome = match &result {
            Ok(_) => Ok(jiff::Timestamp::now()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = KubeStatus::new(client.clone())
            .record_collection(&config.lease.identity, outcome)
            .await
        {
            tracing::warn!(error = %e, "cannot record the collection in the status");
        }
    }
    match &result {
        Ok(c) => tracing::info!(node = %config.lease.identity, %c, "garbage collection done"),
        Err(e) => {
            tracing::error!(node = %config.lease.identity, error = %e, "garbage collection failed")
        }
    }
    result
}

/// What the replica runs on: `RegistryStorage.spec.garbageCollection` as the controller
/// resolved it when present (`enabled: false` = no runs; a schedule that does not parse is
/// refused and the fallback kept), else the replica's own `fallback` schedule.
pub fn effective(
    fallback: &Schedule,
    spec: Option<&api::registry::GarbageCollection>,
) -> Option<Schedule> {
    let Some(spec) = spec else {
        return Some(fallback.clone());
    };
    if spec.enabled == Some(false) {
        return None;
    }
    match spec.schedule.as_deref().map(Schedule::parse) {
        None => Some(fallback.clone()),
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            tracing::error!(error = %e, fallback = fallback.as_str(), "refusing the configured schedule");
            Some(fallback.clone())
        }
    }
}

/// How often the configured schedule is re-read while waiting for the next run.
const RECHECK: Duration = Duration::from_secs(60);

/// Runs collections until the task is aborted, on the schedule of
/// `RegistryStorage.spec.garbageCollection` (re-read every minute), `fallback` when the spec
/// has none.
pub fn spawn(
    client: kube::Client,
    store: storage::Store,
    fallback: Schedule,
    config: Config,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let storages: Api<api::registry::RegistryStorage> = Api::all(client.clone());
        let mut next: Option<(String, jiff::Zoned)> = None;
        loop {
            let spec = match storages.get_opt(api::registry::SINGLETON).await {
                Ok(object) => object.and_then(|o| o.spec.garbage_collection),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read RegistryStorage; keeping the schedule");
                    None
                }
            };
            let Some(schedule) = effective(&fallback, spec.as_ref()) else {
                next = None;
                tokio::time::sleep(RECHECK).await;
                continue;
            };
            let now = jiff::Zoned::now();
            // A changed schedule replans; an unchanged one keeps its planned time.
            if next
                .as_ref()
                .is_none_or(|(text, _)| text != schedule.as_str())
            {
                next = schedule
                    .next_after(&now)
                    .map(|at| (schedule.as_str().to_owned(), at));
                if let Some((_, at)) = &next {
                    tracing::info!(schedule = schedule.as_str(), next = %at, "next garbage collection");
                }
            }
            let Some((_, at)) = next.clone() else {
                tracing::error!(schedule = schedule.as_str(), "the schedule has no next run");
                tokio::time::sleep(RECHECK).await;
                continue;
            };
            let wait = now.duration_until(&at).unsigned_abs();
            if now < at && wait > Duration::ZERO {
                tokio::time::sleep(wait.min(RECHECK)).await;
                continue;
            }
            next = None;
            let _ = run_once(&client, &store, &config).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_are_five_cron_fields() {
        let s = default_schedule();
        assert_eq!(s.as_str(), "17 3 * * *");
        let now: jiff::Zoned = "2026-11-30T12:00:00+00:00[UTC]".parse().expect("time");
        let next = s.next_after(&now).expect("next");
        assert_eq!(next.to_string(), "2026-12-01T03:17:00+00:00[UTC]");
        let window = Schedule::parse("30 1 * * 2,6").expect("window");
        let next = window.next_after(&now).expect("next");
        assert_eq!(
            next.to_string(),
            "2026-12-01T01:30:00+00:00[UTC]",
            "Tuesday"
        );
        for bad in ["", "17 3 * *", "0 17 3 * * *", "61 3 * * *", "x y z w v"] {
            let e = Schedule::parse(bad).expect_err(bad);
            assert!(e.to_string().contains("garbage collection schedule"), "{e}");
        }
    }

    #[test]
    fn the_resolved_spec_wins_over_the_flag() {
        use api::registry::GarbageCollection;
        let fallback = Schedule::parse("0 4 * * *").expect("fallback");
        let text = |s: Option<Schedule>| s.map(|s| s.as_str().to_owned());
        assert_eq!(text(effective(&fallback, None)), Some("0 4 * * *".into()));
        let configured = GarbageCollection {
            enabled: Some(true),
            schedule: Some("30 1 * * 2,6".into()),
        };
        assert_eq!(
            text(effective(&fallback, Some(&configured))),
            Some("30 1 * * 2,6".into())
        );
        let off = GarbageCollection {
            enabled: Some(false),
            schedule: Some("30 1 * * *".into()),
        };
        assert_eq!(text(effective(&fallback, Some(&off))), None);
        let unreadable = GarbageCollection {
            enabled: None,
            schedule: Some("every night".into()),
        };
        assert_eq!(
            text(effective(&fallback, Some(&unreadable))),
            Some("0 4 * * *".into())
        );
        let unset = GarbageCollection::default();
        assert_eq!(
            text(effective(&fallback, Some(&unset))),
            Some("0 4 * * *".into())
        );
    }
}
