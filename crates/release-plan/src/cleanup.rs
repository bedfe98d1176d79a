//! Release cleanup.
//!
//! Platform releases (every 24 h): every Deployed release but the newest becomes Superseded;
//! only the newest [`KEEP_OUTDATED_DECKHOUSE`] outdated releases (Skipped, Superseded,
//! Suspended) are kept; Pending releases older than the newest Deployed one (left behind when a
//! channel moved back) become Skipped with [`MSG_SKIPPED_BY_CLEANUP`].
//!
//! Module releases (after each deploy): only the newest [`KEEP_OUTDATED_MODULE`] outdated
//! releases of each module are kept.

use crate::version::{Phase, ReleaseVersion};

/// Outdated DeckhouseReleases kept.
pub const KEEP_OUTDATED_DECKHOUSE: usize = 10;
/// Outdated ModuleReleases kept per module.
pub const KEEP_OUTDATED_MODULE: usize = 3;
/// The status message of a Pending release the cleanup skipped.
pub const MSG_SKIPPED_BY_CLEANUP: &str = "Skipped by cleanup hook";

/// A release as the cleanup sees it.
#[derive(Clone, Debug)]
pub struct Entry {
    /// `metadata.name`.
    pub name: String,
    /// `spec.version`.
    pub version: ReleaseVersion,
    /// `status.phase`.
    pub phase: Phase,
}

/// Whether a phase counts as outdated.
pub fn is_outdated(phase: Phase) -> bool {
    matches!(phase, Phase::Skipped | Phase::Superseded | Phase::Suspended)
}

/// What the platform cleanup changes (names, newest first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Set phase Superseded.
    pub supersede: Vec<String>,
    /// Set phase Skipped with [`MSG_SKIPPED_BY_CLEANUP`].
    pub skip: Vec<String>,
    /// Delete.
    pub delete: Vec<String>,
}

impl Plan {
    /// Whether the cleanup has nothing to do.
    pub fn is_empty(&self) -> bool {
        self.supersede.is_empty() && self.skip.is_empty() && self.delete.is_empty()
    }
}

fn newest_first(releases: &[Entry]) -> Vec<&Entry> {
    let mut sorted: Vec<&Entry> = releases.iter().collect();
    sorted.sort_by(|a, b| b.version.cmp(&a.version));
    sorted
}

/// The platform cleanup of all DeckhouseReleases.
pub fn deckhouse(releases: &[Entry]) -> Plan {
    let sorted = newest_first(releases);
    let mut plan = Plan::default();
    let newest_deployed = sorted.iter().position(|r| r.phase == Phase::Deployed);
    let mut outdated = 0usize;
    for (i, release) in sorted.iter().enumerate() {
        match release.phase {
            Phase::Deployed if Some(i) != newest_deployed => {
                plan.supersede.push(release.name.clone())
            }
            Phase::Pending if newest_deployed.is_some_and(|d| i > d) => {
                plan.skip.push(release.name.clone())
            }
            phase if is_outdated(phase) => {
                outdated += 1;
                if outdated > KEEP_OUTDATED_DECKHOUSE {
                    plan.delete.push(release.name.clone());
                }
            }
            _ => {}
        }
    }
    plan
}

/// The ModuleReleases of one module to delete: outdated ones beyond the newest
/// [`KEEP_OUTDATED_MODULE`] (names, newest first).
pub fn module(releases: &[Entry]) -> Vec<String> {
    newest_first(releases)
        .into_iter()
        .filter(|r| is_outdated(r.phase))
        .skip(KEEP_OUTDATED_MODULE)
        .map(|r| r.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    use Phase::{Deployed, Pending, Skipped, Superseded, Suspended};

    fn e(version: &str, phase: Phase) -> Entry {
        Entry {
            name: version.to_owned(),
            version: ReleaseVersion::parse(version).unwrap(),
            phase,
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn deckhouse_table() {
        // have-a-few-deployed-releases: only the newest Deployed stays.
        let plan = deckhouse(&[
            e("v1.45.0", Deployed),
            e("v1.46.0", Deployed),
            e("v1.47.0", Deployed),
        ]);
        assert_eq!(plan.supersede, names(&["v1.46.0", "v1.45.0"]));
        assert!(plan.skip.is_empty() && plan.delete.is_empty());

        // have-15-superseded-releases: the 5 oldest go.
        let mut releases: Vec<Entry> = (0..15)
            .map(|i| e(&format!("v1.{}.0", 30 + i), Superseded))
            .collect();
        releases.push(e("v1.45.0", Deployed));
        let plan = deckhouse(&releases);
        assert_eq!(
            plan.delete,
            names(&["v1.34.0", "v1.33.0", "v1.32.0", "v1.31.0", "v1.30.0"])
        );

        // Outdated mixes Skipped, Superseded and Suspended; exactly 10 are kept.
        let mut releases: Vec<Entry> = (0..4)
            .map(|i| e(&format!("v1.{}.0", 30 + i), Skipped))
            .collect();
        releases.extend((4..8).map(|i| e(&format!("v1.{}.0", 30 + i), Superseded)));
        releases.extend((8..11).map(|i| e(&format!("v1.{}.0", 30 + i), Suspended)));
        releases.push(e("v1.45.0", Deployed));
        assert_eq!(deckhouse(&releases).delete, names(&["v1.30.0"]));

        // have-1-deployed-release-and-5-outdated-releases: nothing to do.
        let mut releases: Vec<Entry> = (0..5)
            .map(|i| e(&format!("v1.{}.0", 30 + i), Superseded))
            .collect();
        releases.push(e("v1.35.0", Deployed));
        assert!(deckhouse(&releases).is_empty());

        // Pending releases older than the Deployed one are skipped; newer ones stay.
        let plan = deckhouse(&[
            e("v1.44.0", Pending),
            e("v1.45.0", Deployed),
            e("v1.46.0", Pending),
            e("v1.43.2", Pending),
        ]);
        assert_eq!(plan.skip, names(&["v1.44.0", "v1.43.2"]));
        assert!(plan.supersede.is_empty());

        // Without a Deployed release, Pending releases are left alone.
        assert!(deckhouse(&[e("v1.44.0", Pending), e("v1.46.0", Pending)]).is_empty());
        assert_eq!(MSG_SKIPPED_BY_CLEANUP, "Skipped by cleanup hook");
    }

    #[test]
    fn module_table() {
        let releases = [
            e("1.0.0", Superseded),
            e("1.1.0", Superseded),
            e("1.2.0", Skipped),
            e("1.3.0", Suspended),
            e("1.4.0", Superseded),
            e("1.5.0", Deployed),
            e("1.6.0", Pending),
        ];
        assert_eq!(module(&releases), names(&["1.1.0", "1.0.0"]));
        assert!(module(&releases[2..]).is_empty());
    }

    fn phase() -> impl Strategy<Value = Phase> {
        prop_oneof![
            Just(Deployed),
            Just(Pending),
            Just(Skipped),
            Just(Superseded),
            Just(Suspended)
        ]
    }

    fn apply(releases: &mut Vec<Entry>, plan: &Plan) {
        releases.retain(|r| !plan.delete.contains(&r.name));
        for r in releases.iter_mut() {
            if plan.supersede.contains(&r.name) {
                r.phase = Superseded;
            }
            if plan.skip.contains(&r.name) {
                r.phase = Skipped;
            }
        }
    }

    proptest! {
        /// Cleanup converges in two rounds (the first one creates outdated releases the second
        /// one may trim), never deletes a Deployed or Pending release, and leaves at most one
        /// Deployed release, at most ten outdated ones and no Pending release older than the
        /// Deployed one.
        #[test]
        fn deckhouse_cleanup_converges(phases in proptest::collection::vec(phase(), 0..30)) {
            let mut releases: Vec<Entry> = phases.iter().enumerate().map(|(i, p)| e(&format!("v1.{i}.0"), *p)).collect();
            for _ in 0..2 {
                let plan = deckhouse(&releases);
                for name in &plan.delete {
                    let r = releases.iter().find(|r| &r.name == name).unwrap();
                    prop_assert!(is_outdated(r.phase));
                }
                apply(&mut releases, &plan);
            }
            prop_assert!(deckhouse(&releases).is_empty());
            prop_assert!(releases.iter().filter(|r| r.phase == Deployed).count() <= 1);
            prop_assert!(releases.iter().filter(|r| is_outdated(r.phase)).count() <= KEEP_OUTDATED_DECKHOUSE);
            if let Some(d) = releases.iter().find(|r| r.phase == Deployed) {
                prop_assert!(releases.iter().all(|r| r.phase != Pending || r.version > d.version));
            }
        }

        /// Module cleanup keeps the three newest outdated releases and nothing else changes.
        #[test]
        fn module_cleanup_keeps_newest(phases in proptest::collection::vec(phase(), 0..20)) {
            let releases: Vec<Entry> = phases.iter().enumerate().map(|(i, p)| e(&format!("1.{i}.0"), *p)).collect();
            let deleted = module(&releases);
            let outdated: Vec<&Entry> = releases.iter().filter(|r| is_outdated(r.phase)).collect();
            prop_assert_eq!(deleted.len(), outdated.len().saturating_sub(KEEP_OUTDATED_MODULE));
            for name in &deleted {
                let r = releases.iter().find(|r| &r.name == name).unwrap();
                prop_assert!(is_outdated(r.phase));
                let newer = outdated.iter().filter(|o| o.version > r.version).count();
                prop_assert!(newer >= KEEP_OUTDATED_MODULE);
            }
        }
    }
}
