//! Who may lead the cache replicas (`MayLead`), and the phase of `RegistryStorage`.
//!
//! Every replica runs for Lease `registry-storage` only while [`may_lead`] says it may, and a
//! leader that may no longer lead steps aside (releases the lease). The rules, first match wins:
//!
//! 1. someone is full and the incumbent is live, can fill (an upstream exists), has no error
//!    and a writable store ⇒ only the incumbent;
//! 2. else, if someone is full ⇒ only full replicas;
//! 3. else, if there is an incumbent ⇒ it keeps the lease;
//! 4. else ⇒ the replica with the most verified digests and no error (ties go to the lowest node
//!    name); if none qualifies, anyone.
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
    /// An upstream is held, so a leader can fill.
    pub upstream: bool,
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
    let incumbent_report = observed
        .incumbent
        .and_then(|i| observed.reports.iter().find(|r| r.node == i));
    if !full.is_empty() {
        if let Some(report) = incumbent_report
            && observed.upstream
            && !report.error
            && report.writable
        {
            return only([report.node.as_str()]);
        }
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
            upstream: bool,
            expect: &'static str,
        }
        let cases = vec![
            Case {
                what: "rule 1: an incumbent that can fill keeps the lease though another is full",
                incumbent: Some("a"),
                reports: vec![r("a").verified(3), r("b").full()],
                set: None,
                upstream: true,
                expect: "a",
            },
            Case {
                what: "rule 2: air gap (no upstream): a non-full incumbent steps aside",
                incumbent: Some("a"),
                reports: vec![r("a").verified(3), r("b").full(), r("c").full()],
                set: None,
                upstream: false,
                expect: "b,c",
            },
            Case {
                what: "rule 2: an incumbent with an error steps aside",
                incumbent: Some("a"),
                reports: vec![r("a").error(), r("b").full()],
                set: None,
                upstream: true,
                expect: "b",
            },
            Case {
                what: "rule 2: an incumbent with an unwritable store steps aside",
                incumbent: Some("a"),
                reports: vec![r("a").readonly(), r("b").full()],
                set: None,
                upstream: true,
                expect: "b",
            },
            Case {
                what: "rule 2: an incumbent without a report steps aside",
                incumbent: Some("x"),
                reports: vec![r("b").full()],
                set: None,
                upstream: true,
                expect: "b",
            },
            Case {
                what: "full with an error does not count as full",
                incumbent: None,
                reports: vec![r("a").full().error(), r("b").verified(1)],
                set: None,
                upstream: true,
                expect: "b",
            },
            Case {
                what: "full about another set does not count",
                incumbent: None,
                reports: vec![r("a").full().set("old"), r("b").full().set("new")],
                set: Some("new"),
                upstream: false,
                expect: "b",
            },
            Case {
                what: "an unknown current set accepts any full",
                incumbent: None,
                reports: vec![r("a").full().set("old"), r("b").full()],
                set: None,
                upstream: false,
                expect: "a,b",
            },
            Case {
                what: "rule 3: nobody full, the incumbent keeps it",
                incumbent: Some("c"),
                reports: vec![r("a").verified(9), r("c").verified(1)],
                set: None,
                upstream: true,
                expect: "c",
            },
            Case {
                what: "rule 4: most verified wins",
                incumbent: None,
                reports: vec![r("a").verified(1), r("b").verified(5), r("c").verified(4)],
                set: None,
                upstream: true,
                expect: "b",
            },
            Case {
                what: "rule 4: ties go to the lowest node name",
                incumbent: None,
                reports: vec![r("c").verified(5), r("b").verified(5), r("d").verified(5)],
                set: None,
                upstream: true,
                expect: "b",
            },
            Case {
                what: "rule 4: replicas with errors do not qualify",
                incumbent: None,
                reports: vec![r("a").verified(9).error(), r("b").verified(1)],
                set: None,
                upstream: true,
                expect: "b",
            },
            Case {
                what: "rule 4: nobody qualifies, anyone",
                incumbent: None,
                reports: vec![r("a").error()],
                set: None,
                upstream: true,
                expect: "*",
            },
            Case {
                what: "no reports at all, anyone",
                incumbent: None,
                reports: vec![],
                set: None,
                upstream: false,
                expect: "*",
            },
        ];
        for c in cases {
            let observed = Observed {
                incumbent: c.incumbent,
                reports: &c.reports,
                current_set: c.set,
                upstream: c.upstream,
            };
            assert_eq!(names(&eligible(&observed)), c.expect, "{}", c.what);
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
        /// Once someone is full, only a full replica or a live incumbent able to fill may lead;
        /// the eligible set is never empty when there are reports.
        #[test]
        fn never_an_unfit_leader(reports in proptest::collection::vec(report(), 0..6),
                                 incumbent in proptest::option::of(0u8..6),
                                 set in proptest::option::of(0u8..2),
                                 upstream in any::<bool>()) {
            let incumbent = incumbent.map(|i| format!("n{i}"));
            let set = set.map(|s| format!("s{s}"));
            let observed = Observed {
                incumbent: incumbent.as_deref(),
                reports: &reports,
                current_set: set.as_deref(),
                upstream,
            };
            let e = eligible(&observed);
            let someone_full = reports.iter().any(|r| r.is_full(set.as_deref()));
            if let Eligible::Only(nodes) = &e {
                prop_assert!(!nodes.is_empty());
                if someone_full {
                    for n in nodes {
                        let fit_incumbent = incumbent.as_deref() == Some(n.as_str())
                            && upstream
                            && reports.iter().any(|r| &r.node == n && !r.error && r.writable);
                        let full = reports.iter().any(|r| &r.node == n && r.is_full(set.as_deref()));
                        prop_assert!(fit_incumbent || full, "{} may lead: {:?}", n, reports);
                    }
                }
            } else {
                prop_assert!(!someone_full && incumbent.is_none());
            }
        }
    }
}
