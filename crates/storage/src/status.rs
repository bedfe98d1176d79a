//! What a replica reports about itself (`RegistryStorage.status.replicas[self]`), and the trait
//! through which it is published — implemented over Kubernetes elsewhere (`storage-kube`), so
//! the data path builds without it.

use registry_plan::budget::{self, Refusal};
use registry_plan::election;

use crate::store::Usage;

/// The replica's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Holds Lease `registry-storage`: fills from the upstream, takes pushes.
    Leader,
    /// Copies from the leader.
    Follower,
}

/// Store usage as reported: every byte count rounded down to 16 MiB
/// ([`budget::STATUS_GRANULARITY`]), so the status does not change on every write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreReport {
    /// Committed content plus writes in progress.
    pub used: u64,
    /// `storage.size`, if set.
    pub budget: Option<u64>,
    /// The reserve in force.
    pub reserve: u64,
    /// Free bytes on the filesystem.
    pub filesystem_free: u64,
    /// Size of the filesystem.
    pub filesystem_capacity: u64,
    /// Why writes are refused, if they are (`writable` is its absence).
    pub refusal: Option<Refusal>,
}

impl StoreReport {
    /// The report of `usage`, rounded.
    pub fn of(usage: &Usage) -> Self {
        Self {
            used: budget::granular(usage.used + usage.pending),
            budget: usage.budget.map(budget::granular),
            reserve: budget::granular(usage.reserve),
            filesystem_free: budget::granular(usage.filesystem.free),
            filesystem_capacity: budget::granular(usage.filesystem.capacity),
            refusal: usage.refusal,
        }
    }

    /// Whether writes are accepted.
    pub fn writable(&self) -> bool {
        self.refusal.is_none()
    }
}

/// One replica's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The node (identity).
    pub node: String,
    /// Leader or follower; unknown before the first election round.
    pub role: Option<Role>,
    /// Holds the whole expected set.
    pub full: bool,
    /// Expected digests held on the own disk.
    pub verified_digests: u64,
    /// Distinct digests held altogether.
    pub total_digests: u64,
    /// Size of the expected set.
    pub declared_digests: u64,
    /// Where the read listener answers, `host:port`.
    pub address: String,
    /// The replica copied from (the leader's node), for followers.
    pub source: Option<String>,
    /// Fingerprint of the set `full` refers to.
    pub verified_set: Option<String>,
    /// Why the last fill or verification failed.
    pub error: Option<String>,
    /// Store usage.
    pub store: Option<StoreReport>,
}

impl Report {
    /// An entry with nothing known yet but who and where.
    pub fn new(node: impl Into<String>, address: impl Into<String>) -> Self {
        Self {
            node: node.into(),
            role: None,
            full: false,
            verified_digests: 0,
            total_digests: 0,
            declared_digests: 0,
            address: address.into(),
            source: None,
            verified_set: None,
            error: None,
            store: None,
        }
    }

    /// What leader election reads of it.
    pub fn election(&self) -> election::Report {
        election::Report {
            node: self.node.clone(),
            full: self.full,
            error: self.error.is_some(),
            verified_digests: self.verified_digests,
            verified_set: self.verified_set.clone(),
            writable: self.store.as_ref().is_none_or(StoreReport::writable),
        }
    }
}

/// Where replicas publish their entries and read everyone's.
pub trait StatusSink: Send + Sync {
    /// The sink's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Writes `report` as this replica's entry without touching any other replica's entry;
    /// returns every replica's entry as written (for leader election).
    fn publish(
        &self,
        report: &Report,
    ) -> impl Future<Output = Result<Vec<election::Report>, Self::Error>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;
    use registry_plan::budget::Filesystem;

    const MIB: u64 = 1 << 20;

    #[test]
    fn usage_is_reported_at_16_mib_granularity() {
        let usage = Usage {
            used: 40 * MIB + 1,
            pending: 7 * MIB,
            budget: Some(100 * MIB + 5),
            reserve: 33 * MIB,
            filesystem: Filesystem {
                free: 17 * MIB,
                capacity: 1000 * MIB,
            },
            refusal: Some(Refusal::BudgetExhausted),
        };
        let report = StoreReport::of(&usage);
        assert_eq!(
            report,
            StoreReport {
                used: 32 * MIB,
                budget: Some(96 * MIB),
                reserve: 32 * MIB,
                filesystem_free: 16 * MIB,
                filesystem_capacity: 992 * MIB,
                refusal: Some(Refusal::BudgetExhausted),
            }
        );
        assert!(!report.writable());
    }

    #[test]
    fn election_reads_error_and_writability() {
        let mut report = Report::new("m-0", "10.0.0.1:5001");
        report.full = true;
        report.verified_digests = 7;
        assert_eq!(
            report.election(),
            election::Report {
                node: "m-0".into(),
                full: true,
                error: false,
                verified_digests: 7,
                verified_set: None,
                writable: true,
            }
        );
        report.error = Some("fill failed".into());
        report.store = Some(StoreReport {
            used: 0,
            budget: None,
            reserve: 0,
            filesystem_free: 0,
            filesystem_capacity: 0,
            refusal: Some(Refusal::ReserveExhausted),
        });
        let e = report.election();
        assert!(e.error && !e.writable);
    }
}
