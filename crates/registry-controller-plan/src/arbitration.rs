//! RegistryUpstream arbitration: several writers (modules, administrators, users) may ask to
//! intercept a registry host, so the winner must be a property of the objects, never of the
//! order they were observed in. Oldest `creationTimestamp` first, then name; hosts compare
//! case-insensitively. An empty match or host is `InvalidSpec`; a match naming the in-cluster
//! host, the primary upstream or one of its mirrors is `ShadowsPrimary`; a match an earlier
//! object already claims is `MatchConflict`; the rest are `Accepted` and compiled into every
//! node's `additionalRoutes`.

use std::collections::BTreeMap;

use api::registry::{InlineAuth, RegistryUpstreamSpec, Upstream, UpstreamArbitrationReason};

use crate::IN_CLUSTER_HOST;

/// One RegistryUpstream as arbitration sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Object name (unique).
    pub name: String,
    /// `metadata.creationTimestamp`, seconds since the epoch.
    pub created: i64,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// The spec.
    pub spec: RegistryUpstreamSpec,
}

/// The verdict on one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Compiled into the layouts.
    pub accepted: bool,
    /// Machine-readable reason (the `Accepted` condition's reason and the metric label).
    pub reason: UpstreamArbitrationReason,
    /// Why it was rejected; empty when accepted.
    pub conflict: String,
}

/// An accepted upstream, ready for every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledRoute {
    /// The intercepted host as the object spelled it.
    pub match_host: String,
    /// Where intercepted pulls go, with inline credentials (moved to the Secret by the layout).
    pub upstream: Upstream<InlineAuth>,
}

/// The outcome for a whole set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Arbitration {
    /// Accepted routes, oldest first.
    pub routes: Vec<CompiledRoute>,
    /// A verdict for every object, by name.
    pub verdicts: BTreeMap<String, Verdict>,
}

impl Arbitration {
    /// How many objects are rejected, per reason (for `d8_registry_upstreams_rejected`).
    pub fn rejected(&self) -> BTreeMap<UpstreamArbitrationReason, u64> {
        let mut counts = BTreeMap::new();
        for reason in [
            UpstreamArbitrationReason::InvalidSpec,
            UpstreamArbitrationReason::ShadowsPrimary,
            UpstreamArbitrationReason::MatchConflict,
        ] {
            counts.insert(reason, 0);
        }
        for verdict in self.verdicts.values().filter(|v| !v.accepted) {
            *counts.entry(verdict.reason).or_default() += 1;
        }
        counts
    }
}

fn normalize(host: &str) -> String {
    host.trim().to_ascii_lowercase()
}

/// Arbitrates `candidates` against the primary upstream in effect.
pub fn arbitrate(primary: Option<&Upstream<InlineAuth>>, candidates: &[Candidate]) -> Arbitration {
    let mut ordered: Vec<&Candidate> = candidates.iter().collect();
    ordered.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.name.cmp(&b.name)));

    let mut reserved: BTreeMap<String, &str> = BTreeMap::new();
    reserved.insert(
        normalize(IN_CLUSTER_HOST),
        "the in-cluster registry endpoint",
    );
    if let Some(primary) = primary {
        reserved.insert(
            normalize(&primary.host),
            "the primary upstream of Deckhouse components",
        );
        for mirror in &primary.mirrors {
            reserved
                .entry(normalize(&mirror.host))
                .or_insert("a mirror of the primary upstream");
        }
    }

    let mut result = Arbitration::default();
    let mut claimed: BTreeMap<String, &str> = BTreeMap::new();
    for candidate in ordered {
        let matched = normalize(&candidate.spec.match_);
        let reject = |reason, conflict: String| Verdict {
            accepted: false,
            reason,
            conflict,
        };
        let verdict = if matched.is_empty() {
            reject(
                UpstreamArbitrationReason::InvalidSpec,
                "spec.match is empty: there is no host to intercept".into(),
            )
        } else if let Some(what) = reserved.get(&matched) {
            reject(
                UpstreamArbitrationReason::ShadowsPrimary,
                format!("spec.match {:?} shadows {what}", candidate.spec.match_),
            )
        } else if let Some(owner) = claimed.get(&matched) {
            reject(
                UpstreamArbitrationReason::MatchConflict,
                format!(
                    "spec.match {:?} is already claimed by RegistryUpstream/{owner}",
                    candidate.spec.match_
                ),
            )
        } else if candidate.spec.upstream.host.trim().is_empty() {
            reject(
                UpstreamArbitrationReason::InvalidSpec,
                "spec.upstream.host is empty: intercepted pulls would have nowhere to go".into(),
            )
        } else {
            claimed.insert(matched, &candidate.name);
            result.routes.push(CompiledRoute {
                match_host: candidate.spec.match_.clone(),
                upstream: candidate.spec.upstream.clone(),
            });
            Verdict {
                accepted: true,
                reason: UpstreamArbitrationReason::Accepted,
                conflict: String::new(),
            }
        };
        result.verdicts.insert(candidate.name.clone(), verdict);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use UpstreamArbitrationReason as R;
    use api::registry::Mirror;

    fn candidate(name: &str, created: i64, matched: &str, host: &str) -> Candidate {
        Candidate {
            name: name.into(),
            created,
            generation: Some(1),
            spec: RegistryUpstreamSpec {
                match_: matched.into(),
                upstream: Upstream {
                    host: host.into(),
                    ..Default::default()
                },
            },
        }
    }

    fn primary() -> Upstream<InlineAuth> {
        Upstream {
            host: "registry.deckhouse.io".into(),
            mirrors: vec![Mirror {
                host: "Mirror.Example:5000".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    type Row = (&'static str, Vec<Candidate>, Vec<(&'static str, R)>);

    #[test]
    fn every_outcome() {
        let rows: Vec<Row> = vec![
            (
                "empty match",
                vec![candidate("a", 1, "", "x")],
                vec![("a", R::InvalidSpec)],
            ),
            (
                "blank match",
                vec![candidate("a", 1, "  ", "x")],
                vec![("a", R::InvalidSpec)],
            ),
            (
                "empty host",
                vec![candidate("a", 1, "quay.io", "")],
                vec![("a", R::InvalidSpec)],
            ),
            (
                "in-cluster host, any case",
                vec![candidate("a", 1, "Registry.D8-System.svc:5001", "x")],
                vec![("a", R::ShadowsPrimary)],
            ),
            (
                "primary host",
                vec![candidate("a", 1, "REGISTRY.deckhouse.io", "x")],
                vec![("a", R::ShadowsPrimary)],
            ),
            (
                "primary mirror",
                vec![candidate("a", 1, "mirror.example:5000", "x")],
                vec![("a", R::ShadowsPrimary)],
            ),
            (
                "older wins",
                vec![
                    candidate("b", 2, "quay.io", "x"),
                    candidate("z", 1, "Quay.IO", "y"),
                ],
                vec![("z", R::Accepted), ("b", R::MatchConflict)],
            ),
            (
                "same age: name decides",
                vec![
                    candidate("b", 1, "quay.io", "x"),
                    candidate("a", 1, "quay.io", "y"),
                ],
                vec![("a", R::Accepted), ("b", R::MatchConflict)],
            ),
            (
                "an invalid older one claims nothing",
                vec![
                    candidate("a", 1, "quay.io", ""),
                    candidate("b", 2, "quay.io", "y"),
                ],
                vec![("a", R::InvalidSpec), ("b", R::Accepted)],
            ),
            (
                "distinct matches all accepted",
                vec![
                    candidate("a", 1, "quay.io", "x"),
                    candidate("b", 1, "ghcr.io", "y"),
                ],
                vec![("a", R::Accepted), ("b", R::Accepted)],
            ),
        ];
        for (what, candidates, expected) in rows {
            let result = arbitrate(Some(&primary()), &candidates);
            for (name, reason) in expected {
                let verdict = &result.verdicts[name];
                assert_eq!(verdict.reason, reason, "{what}: {name}");
                assert_eq!(verdict.accepted, reason == R::Accepted, "{what}");
                assert_eq!(verdict.conflict.is_empty(), reason == R::Accepted, "{what}");
            }
            assert_eq!(result.verdicts.len(), candidates.len(), "{what}");
        }
    }

    #[test]
    fn conflict_names_the_winner_and_routes_keep_order() {
        let result = arbitrate(
            None,
            &[
                candidate("late", 9, "quay.io", "x"),
                candidate("early", 1, "quay.io", "y"),
                candidate("other", 5, "ghcr.io", "z"),
            ],
        );
        assert_eq!(
            result.verdicts["late"].conflict,
            "spec.match \"quay.io\" is already claimed by RegistryUpstream/early"
        );
        let hosts: Vec<_> = result
            .routes
            .iter()
            .map(|r| r.upstream.host.as_str())
            .collect();
        assert_eq!(hosts, ["y", "z"]);
        assert_eq!(result.rejected()[&R::MatchConflict], 1);
        assert_eq!(result.rejected()[&R::ShadowsPrimary], 0);
    }

    #[test]
    fn without_a_primary_only_the_in_cluster_host_is_reserved() {
        let result = arbitrate(None, &[candidate("a", 1, "registry.deckhouse.io", "x")]);
        assert!(result.verdicts["a"].accepted);
    }

    #[test]
    fn the_outcome_does_not_depend_on_input_order() {
        let mut set = vec![
            candidate("c", 3, "quay.io", "c"),
            candidate("a", 3, "quay.io", "a"),
            candidate("b", 1, "ghcr.io", "b"),
            candidate("d", 0, "ghcr.io", "d"),
        ];
        let first = arbitrate(None, &set);
        set.reverse();
        assert_eq!(arbitrate(None, &set), first);
        set.swap(0, 2);
        assert_eq!(arbitrate(None, &set), first);
    }
}
