//! The cache replica's Kubernetes side: [`KubeStatus`] writes the replica's own
//! `RegistryStorage.status.replicas[]` entry (implementing [`storage::status::StatusSink`]);
//! [`election`] campaigns for Lease `registry-storage` under the `MayLead` rules; [`sync`]
//! measures the disk, publishes, and copies ahead of time (leader from the upstream, followers
//! from the leader); [`expected`] computes the expected image set from the cluster's
//! DeckhouseReleases and release images; [`gc`] collects garbage on the cron schedule, one
//! replica at a time (Lease `registry-storage-gc`), and records `collectedAt` /
//! `collectionError`.
//!
//! Several replicas write entries of one list. Every write is a read-modify-replace of the
//! status guarded by `resourceVersion`: a concurrent writer turns ours into a 409, and we read
//! again and retry (bounded, with backoff), so no replica's entry is ever lost to another's
//! write. Only the replica's own entry is changed; entries of other replicas and the
//! controller's fields are written back as read.
//!
//! Depends on kube and the API types; the data path (`storage`) must not depend on this crate.

pub mod election;
pub mod expected;
pub mod gc;
pub mod sync;

use std::time::Duration;

use api::registry::{RegistryStorage, Replica, ReplicaRole, SINGLETON, StoreLimit, StoreUsage};
use kube::api::{Api, PostParams};
use registry_plan::budget::Refusal;
use registry_plan::election as plan;
use storage::status::{Report, Role, StatusSink, StoreReport};

/// How many times a write is retried after losing a race.
const ATTEMPTS: u32 = 20;

/// Errors of the replica's Kubernetes side.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request.
    #[error("RegistryStorage/{name}: {source}")]
    Kube {
        /// The object.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The controller has not created the RegistryStorage yet.
    #[error("RegistryStorage/{name} does not exist yet (the registry controller creates it)")]
    Missing {
        /// The object.
        name: String,
    },
    /// Every attempt lost a race with another writer.
    #[error("RegistryStorage/{name}: status kept changing under us ({attempts} attempts)")]
    Contended {
        /// The object.
        name: String,
        /// Attempts made.
        attempts: u32,
    },
}

/// Writes the replica's entry into `RegistryStorage/registry`.
#[derive(Clone, Debug)]
pub struct KubeStatus {
    api: Api<RegistryStorage>,
    name: String,
}

impl KubeStatus {
    /// A writer for the singleton `registry`.
    pub fn new(client: kube::Client) -> Self {
        Self::named(client, SINGLETON)
    }

    /// A writer for the RegistryStorage `name`.
    pub fn named(client: kube::Client, name: &str) -> Self {
        Self {
            api: Api::all(client),
            name: name.to_owned(),
        }
    }

    fn err(&self, source: kube::Error) -> Error {
        Error::Kube {
            name: self.name.clone(),
            source,
        }
    }

    /// Writes `report` as its replica's entry; returns every entry as written.
    pub async fn write(&self, report: &Report) -> Result<Vec<Replica>, Error> {
        self.modify(&report.node, |replicas| merge(replicas, report))
            .await
    }

    /// Records a garbage collection in `node`'s entry: `collectedAt` when it succeeded (and
    /// `collectionError` cleared), `collectionError` when it failed (the last `collectedAt`
    /// kept). Every other field is written back as read.
    pub async fn record_collection(
        &self,
        node: &str,
        outcome: Result<jiff::Timestamp, String>,
    ) -> Result<(), Error> {
        self.modify(node, |replicas| {
            let index = match replicas.iter().position(|r| r.node == node) {
                Some(i) => i,
                None => {
                    replicas.push(Replica {
                        node: node.to_owned(),
                        ..Replica::default()
                    });
                    replicas.sort_by(|a, b| a.node.cmp(&b.node));
                    replicas.iter().position(|r| r.node == node).unwrap_or(0)
                }
            };
            let entry = &mut replicas[index];
            match &outcome {
                Ok(at) => {
                    entry.collected_at =
                        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(*at));
                    entry.collection_error = None;
                }
                Err(e) => entry.collection_error = Some(e.clone()),
            }
        })
        .await
        .map(drop)
    }

    /// Read-modify-replace of the status' replica list, retried when another writer wins.
    async fn modify(
        &self,
        node: &str,
        change: impl Fn(&mut Vec<Replica>),
    ) -> Result<Vec<Replica>, Error> {
        for attempt in 0..ATTEMPTS {
            let Some(mut object) = self
                .api
                .get_opt(&self.name)
                .await
                .map_err(|e| self.err(e))?
            else {
                return Err(Error::Missing {
                    name: self.name.clone(),
                });
            };
            let status = object.status.get_or_insert_with(Default::default);
            change(&mut status.replicas);
            object.metadata.managed_fields = None;
            // `replace_status` carries the resourceVersion we read: a concurrent writer
            // makes this a 409 and nothing of theirs is overwritten.
            match self
                .api
                .replace_status(&self.name, &PostParams::default(), &object)
                .await
            {
                Ok(written) => return Ok(written.status.map(|s| s.replicas).unwrap_or_default()),
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    let pause =
                        Duration::from_millis(10 * u64::from(attempt + 1)) + jitter(node, attempt);
                    tracing::debug!(%node, attempt, "status write lost a race; retrying");
                    tokio::time::sleep(pause).await;
                }
                Err(e) => return Err(self.err(e)),
            }
        }
        Err(Error::Contended {
            name: self.name.clone(),
            attempts: ATTEMPTS,
        })
    }
}

/// A few milliseconds that differ between replicas, so racing writers drift apart.
fn jitter(node: &str, attempt: u32) -> Duration {
    let seed = node.bytes().fold(u64::from(attempt), |h, b| {
        h.wrapping_mul(31).wrapping_add(u64::from(b))
    });
    Duration::from_millis(seed % 17)
}

impl StatusSink for KubeStatus {
    type Error = Error;

    async fn publish(&self, report: &Report) -> Result<Vec<plan::Report>, Error> {
        Ok(self
            .write(report)
            .await?
            .iter()
            .map(election_report)
            .collect())
    }
}

/// Replaces (or adds) `report`'s entry in `replicas`, keeping the fields only the garbage
/// collector writes (`collectedAt`, `collectionError`); entries stay sorted by node.
pub fn merge(replicas: &mut Vec<Replica>, report: &Report) {
    let mut entry = entry(report);
    match replicas.iter_mut().find(|r| r.node == report.node) {
        Some(existing) => {
            entry.collected_at = existing.collected_at.take();
            entry.collection_error = existing.collection_error.take();
            *existing = entry;
        }
        None => replicas.push(entry),
    }
    replicas.sort_by(|a, b| a.node.cmp(&b.node));
}

fn count(n: u64) -> Option<i32> {
    Some(i32::try_from(n).unwrap_or(i32::MAX))
}

fn bytes(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn store(report: &StoreReport) -> StoreUsage {
    StoreUsage {
        used_bytes: bytes(report.used),
        budget_bytes: report.budget.map(bytes),
        reserve_bytes: bytes(report.reserve),
        filesystem_free_bytes: bytes(report.filesystem_free),
        filesystem_capacity_bytes: bytes(report.filesystem_capacity),
        writable: report.writable(),
        reason: report.refusal.map(|r| match r {
            Refusal::BudgetExhausted => StoreLimit::BudgetExhausted,
            Refusal::ReserveExhausted => StoreLimit::ReserveExhausted,
        }),
    }
}

/// The status entry of `report`.
pub fn entry(report: &Report) -> Replica {
    Replica {
        node: report.node.clone(),
        role: report.role.map(|r| match r {
            Role::Leader => ReplicaRole::Leader,
            Role::Follower => ReplicaRole::Follower,
        }),
        full: Some(report.full),
        verified_digests: count(report.verified_digests),
        total_digests: count(report.total_digests),
        declared_digests: count(report.declared_digests),
        address: Some(report.address.clone()),
        source: report.source.clone(),
        collected_at: None,
        collection_error: None,
        error: report.error.clone(),
        verified_set: report.verified_set.clone(),
        store: report.store.as_ref().map(store),
    }
}

/// What leader election reads of a status entry.
pub fn election_report(replica: &Replica) -> plan::Report {
    plan::Report {
        node: replica.node.clone(),
        full: replica.full.unwrap_or(false),
        error: replica.error.is_some(),
        verified_digests: replica
            .verified_digests
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0),
        verified_set: replica.verified_set.clone(),
        writable: replica.store.as_ref().is_none_or(|s| s.writable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_replaces_only_the_own_entry_and_keeps_gc_fields() {
        let mut replicas = vec![
            Replica {
                node: "b".into(),
                collection_error: Some("sweep failed".into()),
                verified_digests: Some(1),
                ..Replica::default()
            },
            Replica {
                node: "c".into(),
                verified_digests: Some(9),
                ..Replica::default()
            },
        ];
        let mut report = Report::new("b", "10.0.0.2:5001");
        report.verified_digests = 5;
        report.role = Some(Role::Leader);
        merge(&mut replicas, &report);
        let mut a = Report::new("a", "10.0.0.1:5001");
        a.error = Some("boom".into());
        merge(&mut replicas, &a);
        let nodes: Vec<_> = replicas.iter().map(|r| r.node.as_str()).collect();
        assert_eq!(nodes, ["a", "b", "c"]);
        assert_eq!(replicas[1].verified_digests, Some(5));
        assert_eq!(replicas[1].role, Some(ReplicaRole::Leader));
        assert_eq!(
            replicas[1].collection_error.as_deref(),
            Some("sweep failed")
        );
        assert_eq!(replicas[2].verified_digests, Some(9));
        let e = election_report(&replicas[0]);
        assert!(e.error && !e.full);
    }

    #[test]
    fn store_limits_map_to_their_status_names() {
        let report = StoreReport {
            used: 1,
            budget: Some(2),
            reserve: 3,
            filesystem_free: 4,
            filesystem_capacity: 5,
            refusal: Some(Refusal::ReserveExhausted),
        };
        let usage = store(&report);
        assert!(!usage.writable);
        assert_eq!(usage.reason, Some(StoreLimit::ReserveExhausted));
        assert_eq!(usage.budget_bytes, Some(2));
    }
}
