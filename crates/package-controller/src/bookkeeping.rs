//! Deckhouse's bookkeeping around packages, decided here (pure) and carried out by the
//! controller's pass:
//!
//! - a PackageRepository keeps the checksum of its `spec.registry` in the annotation
//!   `packages.deckhouse.io/registry-spec-checksum`; when it changes, every Application of the
//!   repository is annotated `packages.deckhouse.io/registry-spec-changed` (the time, RFC
//!   3339), which the Application controller removes once it has read the registry again;
//! - an Application is owned (not controlled, deletion blocked) by its
//!   ApplicationPackageVersion and its ApplicationPackage; an operation, a version and a
//!   package by their PackageRepository (the controller);
//! - of a repository's PackageRepositoryOperations, the 10 newest are kept;
//! - a repository that is gone leaves every ApplicationPackage's `availableRepositories`.

use std::collections::BTreeMap;

use api::packages::PackageRegistry;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

/// PackageRepository annotation: the checksum of the registry spec last seen.
pub const ANNOTATION_CHECKSUM: &str = "packages.deckhouse.io/registry-spec-checksum";
/// Application annotation: the registry spec of its repository changed (when).
pub const ANNOTATION_SPEC_CHANGED: &str = "packages.deckhouse.io/registry-spec-changed";
/// How many operations of a repository are kept.
pub const OPERATIONS_KEPT: usize = 10;

/// The checksum of a registry spec (md5 of its JSON, as Deckhouse computes it).
pub fn registry_checksum(registry: &PackageRegistry) -> String {
    use md5::Digest;
    let json = serde_json::to_vec(registry).unwrap_or_default();
    hex::encode(md5::Md5::digest(&json))
}

/// What the registry checksum asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checksum {
    /// Unchanged.
    Same,
    /// Not recorded yet: record it, nothing else.
    Record(String),
    /// Changed: annotate the repository's Applications, then record it.
    Changed(String),
}

/// Compares the recorded checksum (`annotations`) with the spec's.
pub fn checksum(annotations: &BTreeMap<String, String>, registry: &PackageRegistry) -> Checksum {
    let now = registry_checksum(registry);
    match annotations.get(ANNOTATION_CHECKSUM) {
        None => Checksum::Record(now),
        Some(old) if *old == now => Checksum::Same,
        Some(_) => Checksum::Changed(now),
    }
}

/// The operations (name, creation time) to delete: all but the newest [`OPERATIONS_KEPT`].
pub fn operations_to_delete(ops: &[(String, Option<Time>)]) -> Vec<String> {
    if ops.len() <= OPERATIONS_KEPT {
        return Vec::new();
    }
    let mut sorted: Vec<&(String, Option<Time>)> = ops.iter().collect();
    // Newest first; ties by name, newest name (the unix suffix) first.
    sorted.sort_by(|a, b| {
        let ta = a.1.as_ref().map(|t| t.0);
        let tb = b.1.as_ref().map(|t| t.0);
        tb.cmp(&ta).then_with(|| b.0.cmp(&a.0))
    });
    sorted
        .into_iter()
        .skip(OPERATIONS_KEPT)
        .map(|(n, _)| n.clone())
        .collect()
}

/// `available` without the repositories that no longer exist.
pub fn available_repositories(available: &[String], exists: impl Fn(&str) -> bool) -> Vec<String> {
    available.iter().filter(|r| exists(r)).cloned().collect()
}

/// An owner reference as Deckhouse sets it on an Application: not its controller, blocking
/// the owner's deletion.
pub fn application_owner(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        controller: Some(false),
        block_owner_deletion: Some(true),
    }
}

/// An Application's owner references with `version` and `package` (both
/// [`application_owner`]s): a reference to another version or package of the same kind is
/// replaced, other owners are kept.
pub fn application_owners(
    existing: &[OwnerReference],
    version: OwnerReference,
    package: OwnerReference,
) -> Vec<OwnerReference> {
    let mut out: Vec<OwnerReference> = existing
        .iter()
        .filter(|r| {
            (r.kind != version.kind || r.name == version.name)
                && (r.kind != package.kind || r.name == package.name)
        })
        .cloned()
        .collect();
    for wanted in [version, package] {
        if !out
            .iter()
            .any(|r| r.kind == wanted.kind && r.name == wanted.name)
        {
            out.push(wanted);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(repo: &str) -> PackageRegistry {
        PackageRegistry {
            repo: repo.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_registry_checksum_decides() {
        let r = registry("registry.example.io/packages");
        let sum = registry_checksum(&r);
        assert_eq!(sum.len(), 32);
        assert_ne!(
            sum,
            registry_checksum(&registry("other.example.io/packages"))
        );
        let mut annotations = BTreeMap::new();
        assert_eq!(checksum(&annotations, &r), Checksum::Record(sum.clone()));
        annotations.insert(ANNOTATION_CHECKSUM.to_owned(), sum.clone());
        assert_eq!(checksum(&annotations, &r), Checksum::Same);
        let moved = registry("other.example.io/packages");
        assert_eq!(
            checksum(&annotations, &moved),
            Checksum::Changed(registry_checksum(&moved))
        );
    }

    #[test]
    fn the_ten_newest_operations_are_kept() {
        let at = |s: i64| Some(Time(jiff::Timestamp::from_second(s).unwrap()));
        let ops: Vec<(String, Option<Time>)> = (0..13)
            .map(|i| (format!("main-scan-{}", 1000 + i), at(1000 + i)))
            .collect();
        assert_eq!(
            operations_to_delete(&ops),
            ["main-scan-1002", "main-scan-1001", "main-scan-1000"]
        );
        assert!(operations_to_delete(&ops[..10]).is_empty());
        // Order of the list does not matter.
        let mut reversed = ops.clone();
        reversed.reverse();
        assert_eq!(operations_to_delete(&reversed).len(), 3);
        assert!(operations_to_delete(&reversed).contains(&"main-scan-1000".to_owned()));
    }

    #[test]
    fn gone_repositories_leave_the_packages() {
        let available = vec!["main".to_owned(), "extra".to_owned()];
        assert_eq!(
            available_repositories(&available, |r| r == "main"),
            ["main"]
        );
        assert_eq!(available_repositories(&available, |_| true), available);
    }

    #[test]
    fn applications_are_owned_by_their_version_and_package() {
        let apv = |n: &str| {
            application_owner(
                "deckhouse.io/v1alpha1",
                "ApplicationPackageVersion",
                n,
                "u1",
            )
        };
        let ap = application_owner("deckhouse.io/v1alpha1", "ApplicationPackage", "echo", "u2");
        let other = application_owner("example.io/v1", "Thing", "t", "u3");
        let first = application_owners(
            std::slice::from_ref(&other),
            apv("main-echo-v1.0.0"),
            ap.clone(),
        );
        assert_eq!(
            first,
            vec![other.clone(), apv("main-echo-v1.0.0"), ap.clone()]
        );
        assert_eq!(first[1].controller, Some(false));
        assert_eq!(first[1].block_owner_deletion, Some(true));
        // Upgraded: the old version's reference is replaced.
        let next = application_owners(&first, apv("main-echo-v1.1.0"), ap.clone());
        assert_eq!(next, vec![other, ap, apv("main-echo-v1.1.0")]);
        assert_eq!(
            application_owners(&next, apv("main-echo-v1.1.0"), next[1].clone()),
            next
        );
    }
}
