//! Who may lead the cache replicas (`MayLead`), and the phase of `RegistryStorage`.
//!
//! Every replica runs for Lease `registry-storage` only while [`may_lead`] says it may, and a
//! leader that may no longer lead steps aside (releases the lease). The seed's rule: only a
//! replica that already holds the whole expected set may become leader, and the lease holder
//! yields when the expected set appears on another replica. First match wins:
//!
//! 1. someone is full ⇒ only full replicas (a non-full incumbent steps aside, with or without an
//!    upstream);
//! 2. else (nobody full), if there is an incumbent ⇒ it keeps the lease;
//! 3. else ⇒ the replica with the most verified digests and no error (ties go to the lowest node
//!    name); if none qualifies, anyone.
//!
//! Rules 2 and 3 are the bootstrap case: while *nobody* holds the set, no replica can satisfy
//! the seed's condition, yet someone has to receive it — from the upstream (the leader fills
//! the expected roots; followers copy only from a full leader) or, in air gap, through
//! `d8 mirror push` on the publish endpoint, which routes to the lease holder. A stand-in
//! therefore leads only while nobody is full, and yields at its next eligibility check once any
//! replica reports full. The seed's hazard — an isolated cluster stuck behind a leader that
//! lacks the set while another replica has it — cannot arise: with someone full, rule 1 admits
//! only full replicas.
//!
//! "Full" means `full && !error && verifiedSet matches the current set (or either is unknown)`.

use std::collections::BTreeSet;

/// One replica's report, as read from `RegistryStorage.status.replicas[]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The node (the replica's identity).
    pub node: String,
    /// It holds the whole expected set.
    pub full: bool,
    /// It reports an error.
    pub error: bool,
    /// Expected digests verified on its own disk.
    pub verified_digests: u64,
    /// The fingerprint of the set `full` refers to.
    pub verified_set: Option<String>,
    /// Its store accepts writes.
    pub writable: bool,
}

impl Report {
    /// Full, error-free, and about the current set (or an unknown one).
    pub fn is_full(&self, current_set: Option<&str>) -> bool {
        let set_matches = match (self.verified_set.as_deref(), current_set) {
            (Some(theirs), Some(current)) => theirs == current,
            _ => true,
        };
        self.full && !self.error && set_matches
    }
}

/// What a replica observed when deciding.
#[derive(Clone, Debug, Default)]
pub struct Observed<'a> {
    /// The live lease holder, if any.
    pub incumbent: Option<&'a str>,
    /// Every replica's report.
    pub reports: &'a [Report],
    /// The current expected-set fingerprint, if known.
    pub current_set: Option<&'a str>,
}

/// Who may hold the lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Eligible {
    /// Only these nodes.
    Only(BTreeSet<String>),
    /// Any replica.
    Anyone,
}

impl Eligible {
    /// Whether `node` may lead.
    pub fn admits(&self, node: &str) -> bool {
        match self {
            Self::Only(nodes) => nodes.contains(node),
            Self::Anyone => true,
        }
    }
}

fn only<'a>(nodes: impl IntoIterator<Item = &'a str>) -> Eligible {
    Eligible::Only(nodes.into_iter().map(str::to_owned).collect())
}

/// The `MayLead` rules (see the module docs).
pub fn eligible(observed: &Observed<'_>) -> Eligible {
    let full: Vec<&Report> = observed
        .reports
        .iter()
        .filter(|r| r.is_full(observed.current_set))
        .collect();
    if !full.is_empty() {
        return only(full.iter().map(|r| r.node.as_str()));
    }
    if let Some(incumbent) = observed.incumbent {
        return only([incumbent]);
    }
    let best = observed.reports.iter().filter(|r| !r.error).max_by(|a, b| {
        a.verified_digests
            .cmp(&b.verified_digests)
            .then_with(|| b.node.cmp(&a.node))
    });
    match best {
        Some(best) => only([best.node.as_str()]),
        None => Eligible::Anyone,
    }
}

/// Whether `node` may lead now.
pub fn may_lead(node: &str, observed: &Observed<'_>) -> bool {
    eligible(observed).admits(node)
}

/// `RegistryStorage.status.phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No reports, or none from the lease holder.
    Idle,
    /// Copying towards the expected set.
    Filling,
    /// The leader holds the whole set.
    Ready,
    /// The leader, or any replica, reports an error.
    Failed,
}

impl Phase {
    /// The enum value as the status writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "Idle",
            Self::Filling => "Filling",
            Self::Ready => "Ready",
            Self::Failed => "Failed",
        }
    }
}

/// The phase, first match: no reports or no lease-holder report → Idle; leader error → Failed;
/// leader full → Ready; any replica error → Failed; otherwise Filling.
pub fn phase(leader: Option<&str>, reports: &[Report], current_set: Option<&str>) -> Phase {
    let Some(leader) = leader.and_then(|l| reports.iter().find(|r| r.node == l)) else {
        return Phase::Idle;
    };
    if leader.error {
        Phase::Failed
    } else if leader.is_full(current_set) {
        Phase::Ready
    } else if reports.iter().any(|r| r.error) {
        Phase::Failed
    } else {
        Phase::Filling
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(node: &str) -> Report {
        Report {
            node: node.into(),
            writable: true,
            ..Report::default()
        }
    }

    impl Report {
        fn full(mut self) -> Self {
            self.full = true;
            self
        }
        fn error(mut self) -> Self {
            self.error = true;
            self
        }
        fn verified(mut self, n: u64) -> Self {
            self.verified_digests = n;
            self
        }
        fn set(mut self, s: &str) -> Self {
            self.verified_set = Some(s.into());
            self
        }
        fn readonly(mut self) -> Self {
            self.writable = false;
            self
        }
    }

    fn names(e: &Eligible) -> String {
        match e {
            Eligible::Anyone => "*".into(),
            Eligible::Only(n) => n.iter().cloned().collect::<Vec<_>>().join(","),
        }
    }

    #[test]
    fn rules_table() {
        struct Case {
            what: &'static str,
            incumbent: Option<&'static str>,
            reports: Vec<Report>,
            set: Option<&'static str>,
            expect: &'static str,
        }
        let cases = vec![
            Case {
                what: "rule 1: a non-full incumbent yields to a full replica (it could fill from \
                       the upstream, and still yields: the seed's rule, issue #19)",
                incumbent: Some("a"),
                reports: vec![r("a").verified(9), r("b").full()],
                set: None,
                expect: "b",
            },
            Case {
                what: "rule 1: a non-full incumbent yields to every full replica",
                incumbent: Some("a"),
                reports: vec![r("a").verified(3), r("b").full(), r("c").full()],
                set: None,
                expect: "b,c",
            },
            Case {
                what: "rule 1: a full incumbent stays eligible (the lease keeps it)",
                incumbent: Some("b"),
                reports: vec![r("a").verified(3), r("b").full(), r("c").full()],
                set: None,
                expect: "b,c",
            },
            Case {
                what: "rule 1: an incumbent with an error steps aside",
                incumbent: Some("a"),
                reports: vec![r("a").error(), r("b").full()],
                set: None,
                expect: "b",
            },
            Case {
                what: "rule 1: an incumbent with an unwritable store and no full set steps aside",
                incumbent: Some("a"),
                reports: vec![r("a").readonly(), r("b").full()],
                set: None,
                expect: "b",
            },
            Case {
                what: "rule 1: an incumbent without a report steps aside",
                incumbent: Some("x"),
                reports: vec![r("b").full()],
                set: None,
                expect: "b",
            },
            Case {
                what: "rule 1: the best non-full replica never takes a vacant lease from a full one",
                incumbent: None,
                reports: vec![r("a").verified(9), r("b").full().verified(2)],
                set: None,
                expect: "b",
            },
            Case {
                what: "full with an error does not count as full",
                incumbent: None,
                reports: vec![r("a").full().error(), r("b").verified(1)],
                set: None,
                expect: "b",
            },
            Case {
                what: "full about another set does not count",
                incumbent: Some("a"),
                reports: vec![r("a").full().set("old"), r("b").full().set("new")],
                set: Some("new"),
                expect: "b",
            },
            Case {
                what: "an unknown current set accepts any full",
                incumbent: None,
                reports: vec![r("a").full().set("old"), r("b").full()],
                set: None,
                expect: "a,b",
            },
            Case {
                what: "bootstrap, rule 2: nobody full, the incumbent keeps it",
                incumbent: Some("c"),
                reports: vec![r("a").verified(9), r("c").verified(1)],
                set: None,
                expect: "c",
            },
            Case {
                what: "bootstrap, rule 3: most verified wins",
                incumbent: None,
                reports: vec![r("a").verified(1), r("b").verified(5), r("c").verified(4)],
                set: None,
                expect: "b",
            },
            Case {
                what: "bootstrap, rule 3: ties go to the lowest node name",
                incumbent: None,
                reports: vec![r("c").verified(5), r("b").verified(5), r("d").verified(5)],
                set: None,
                expect: "b",
            },
            Case {
                what: "bootstrap, rule 3: replicas with errors do not qualify",
                incumbent: None,
                reports: vec![r("a").verified(9).error(), r("b").verified(1)],
                set: None,
                expect: "b",
            },
            Case {
                what: "bootstrap, rule 3: nobody qualifies, anyone",
                incumbent: None,
                reports: vec![r("a").error()],
                set: None,
                expect: "*",
            },
            Case {
                what: "no reports at all, anyone",
                incumbent: None,
                reports: vec![],
                set: None,
                expect: "*",
            },
        ];
        for c in cases {
            let observed = Observed {
                incumbent: c.incumbent,
                reports: &c.reports,
                current_set: c.set,
            };
            assert_eq!(names(&eligible(&observed)), c.expect, "{}", c.what);
        }
    }

    /// The bootstrap stand-in, round by round: it leads while nobody is full and loses
    /// eligibility in the very round another replica first reports full.
    #[test]
    fn the_bootstrap_stand_in_yields_in_the_round_someone_becomes_full() {
        let rounds = [
            (vec![r("a").verified(2), r("b").verified(1)], "a"),
            (vec![r("a").verified(4), r("b").verified(6)], "a"),
            (vec![r("a").verified(5), r("b").verified(10).full()], "b"),
        ];
        for (i, (reports, expect)) in rounds.into_iter().enumerate() {
            let observed = Observed {
                incumbent: Some("a"),
                reports: &reports,
                current_set: None,
            };
            assert_eq!(names(&eligible(&observed)), expect, "round {i}");
        }
    }

    #[test]
    fn phase_table() {
        let cases: Vec<(Option<&str>, Vec<Report>, Phase)> = vec![
            (None, vec![r("a").full()], Phase::Idle),
            (Some("a"), vec![], Phase::Idle),
            (Some("a"), vec![r("b").full()], Phase::Idle),
            (Some("a"), vec![r("a").error().full()], Phase::Failed),
            (Some("a"), vec![r("a").full(), r("b").error()], Phase::Ready),
            (Some("a"), vec![r("a"), r("b").error()], Phase::Failed),
            (Some("a"), vec![r("a"), r("b").full()], Phase::Filling),
        ];
        for (leader, reports, expected) in cases {
            assert_eq!(
                phase(leader, &reports, None),
                expected,
                "{leader:?} {reports:?}"
            );
        }
        assert_eq!(
            phase(Some("a"), &[r("a").full().set("old")], Some("new")),
            Phase::Filling,
            "a leader full about an old set is filling again"
        );
    }

    fn report() -> impl Strategy<Value = Report> {
        (
            0u8..5,
            any::<bool>(),
            any::<bool>(),
            0u64..4,
            proptest::option::of(0u8..2),
            any::<bool>(),
        )
            .prop_map(|(n, full, error, v, set, writable)| Report {
                node: format!("n{n}"),
                full,
                error,
                verified_digests: v,
                verified_set: set.map(|s| format!("s{s}")),
                writable,
            })
    }

    proptest! {
        /// Once someone is full, only a full replica may lead (the incumbent included); the
        /// eligible set is never empty when there are reports.
        #[test]
        fn never_an_unfit_leader(reports in proptest::collection::vec(report(), 0..6),
                                 incumbent in proptest::option::of(0u8..6),
                                 set in proptest::option::of(0u8..2)) {
            let incumbent = incumbent.map(|i| format!("n{i}"));
            let set = set.map(|s| format!("s{s}"));
            let observed = Observed {
                incumbent: incumbent.as_deref(),
                reports: &reports,
                current_set: set.as_deref(),
            };
            let e = eligible(&observed);
            let someone_full = reports.iter().any(|r| r.is_full(set.as_deref()));
            if let Eligible::Only(nodes) = &e {
                prop_assert!(!nodes.is_empty());
                if someone_full {
                    for n in nodes {
                        let full = reports.iter().any(|r| &r.node == n && r.is_full(set.as_deref()));
                        prop_assert!(full, "{} may lead: {:?}", n, reports);
                    }
                }
            } else {
                prop_assert!(!someone_full && incumbent.is_none());
            }
        }
    }
}
