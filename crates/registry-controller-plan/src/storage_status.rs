//! The controller's aggregate of `RegistryStorage.status`: each replica writes its own
//! `replicas[]` entry, the controller derives the summary fields from them and from the holder of
//! Lease `registry-storage`. Only the lease holder's own report decides whether the leader is
//! full (a replica saying "I lead" in a stale entry decides nothing).

use api::registry::{Fill, Replica, StoragePhase};

/// The summary fields the controller writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The lease holder.
    pub leader: Option<String>,
    /// The lease holder reports the expected set held, with no error.
    pub leader_full: bool,
    /// Every reporting replica is full.
    pub all_replicas_full: bool,
    /// The storage serves without an upstream.
    pub authoritative: bool,
    /// First match: no reports or no lease-holder report → Idle; leader error → Failed; leader
    /// full → Ready; any replica error → Failed; otherwise Filling.
    pub phase: StoragePhase,
    /// Leader's verified digests over the expected (else declared) count.
    pub fill: Option<Fill>,
}

fn has_error(replica: &Replica) -> bool {
    replica.error.as_deref().is_some_and(|e| !e.is_empty())
}

/// Summarises the replicas' reports. `expected_digests` is `storage.source.expectedDigests`;
/// `upstream_held` says whether the spec still names an upstream.
pub fn summarise(
    replicas: &[Replica],
    holder: Option<&str>,
    expected_digests: Option<i32>,
    upstream_held: bool,
) -> Summary {
    let leader_report = holder.and_then(|h| replicas.iter().find(|r| r.node == h));
    let leader_full = leader_report.is_some_and(|r| r.full == Some(true) && !has_error(r));
    let phase = match leader_report {
        _ if replicas.is_empty() => StoragePhase::Idle,
        None => StoragePhase::Idle,
        Some(r) if has_error(r) => StoragePhase::Failed,
        Some(_) if leader_full => StoragePhase::Ready,
        Some(_) if replicas.iter().any(has_error) => StoragePhase::Failed,
        Some(_) => StoragePhase::Filling,
    };
    Summary {
        leader: holder.map(str::to_owned),
        leader_full,
        all_replicas_full: !replicas.is_empty()
            && replicas
                .iter()
                .all(|r| r.full == Some(true) && !has_error(r)),
        authoritative: !upstream_held,
        phase,
        fill: leader_report.map(|r| Fill {
            filled: r.verified_digests,
            total: expected_digests.or(r.declared_digests),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(node: &str, full: bool, error: Option<&str>) -> Replica {
        Replica {
            node: node.into(),
            full: Some(full),
            verified_digests: Some(if full { 4 } else { 1 }),
            declared_digests: Some(4),
            error: error.map(str::to_owned),
            ..Default::default()
        }
    }

    #[test]
    fn the_phase_table() {
        use StoragePhase::*;
        type Row = (
            &'static str,
            Vec<Replica>,
            Option<&'static str>,
            StoragePhase,
            bool,
        );
        let rows: Vec<Row> = vec![
            ("no reports", vec![], Some("a"), Idle, false),
            (
                "no lease holder",
                vec![replica("a", true, None)],
                None,
                Idle,
                false,
            ),
            (
                "the holder has not reported",
                vec![replica("a", true, None)],
                Some("b"),
                Idle,
                false,
            ),
            (
                "leader error",
                vec![replica("a", true, Some("disk"))],
                Some("a"),
                Failed,
                false,
            ),
            (
                "leader full, follower failing",
                vec![replica("a", true, None), replica("b", false, Some("x"))],
                Some("a"),
                Ready,
                true,
            ),
            (
                "leader filling, follower failing",
                vec![replica("a", false, None), replica("b", false, Some("x"))],
                Some("a"),
                Failed,
                false,
            ),
            (
                "a full follower does not make the leader full",
                vec![replica("a", false, None), replica("b", true, None)],
                Some("a"),
                Filling,
                false,
            ),
        ];
        for (what, replicas, holder, phase, leader_full) in rows {
            let summary = summarise(&replicas, holder, None, true);
            assert_eq!(summary.phase, phase, "{what}");
            assert_eq!(summary.leader_full, leader_full, "{what}");
        }
    }

    #[test]
    fn fill_prefers_the_operators_count_and_all_full_needs_everyone() {
        let replicas = vec![replica("a", false, None), replica("b", true, None)];
        let summary = summarise(&replicas, Some("a"), Some(10), false);
        assert_eq!(
            summary.fill,
            Some(Fill {
                filled: Some(1),
                total: Some(10)
            })
        );
        assert!(summary.authoritative);
        assert!(!summary.all_replicas_full);
        let summary = summarise(&replicas, Some("b"), None, true);
        assert_eq!(summary.fill.and_then(|f| f.total), Some(4));
        assert!(!summary.authoritative);
        let both = vec![replica("a", true, None), replica("b", true, None)];
        assert!(summarise(&both, Some("a"), None, true).all_replicas_full);
    }
}
