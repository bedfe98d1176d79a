//! A PackageRepositoryOperation's progress, as Deckhouse records it, without I/O.
//!
//! The operation moves through its conditions one step per reconcile, so that its status shows
//! the progress while it runs and a restarted controller carries on where it stopped:
//!
//! 1. no condition → `Pending=True` and `startTime`;
//! 2. `Pending` → the package names are listed into `packages.discovered` (`total`),
//!    `Discovered=True`; a failed listing ends it with `Completed=False` (`PackageListingFailed`);
//! 3. `Discovered` → the first discovered package is processed and moved to `processed` (with
//!    its type and version counts) or to `failed` (with the error of each version that failed,
//!    or of the whole package), `processedOverall` counts up — one package failing never stops
//!    the others, so a registry failing midway leaves an honest partial result;
//! 4. nothing left to discover → `Completed=True` and `completionTime`.

use api::packages::{
    DiscoveredPackage, FailedPackage, OperationPackages, PackageRepositoryOperationStatus,
    ProcessedPackage, VersionError,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition: the operation was accepted.
pub const PENDING: &str = "Pending";
/// Condition: the package names were listed.
pub const DISCOVERED: &str = "Discovered";
/// Condition: the operation ended (`True`), or failed as a whole (`False`).
pub const COMPLETED: &str = "Completed";
/// Reason of the operation's own conditions.
pub const REASON_READY: &str = "Ready";
/// Reason: the PackageRepository does not exist.
pub const REASON_REPOSITORY_NOT_FOUND: &str = "PackageRepositoryNotFound";
/// Reason: the repository's registry settings cannot be used.
pub const REASON_CLIENT_FAILED: &str = "RegistryClientCreationFailed";
/// Reason: the package names could not be listed.
pub const REASON_LISTING_FAILED: &str = "PackageListingFailed";

/// What the operation does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Accept it.
    Start,
    /// List the packages.
    Discover,
    /// Process this package (the first still discovered).
    Process(String),
    /// Mark it completed.
    Complete,
    /// Nothing: it has ended.
    Done,
}

fn condition<'a>(
    status: &'a PackageRepositoryOperationStatus,
    type_: &str,
) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

fn is_true(status: &PackageRepositoryOperationStatus, type_: &str) -> bool {
    condition(status, type_).is_some_and(|c| c.status == "True")
}

/// The next step of an operation with this status.
pub fn next_step(status: &PackageRepositoryOperationStatus) -> Step {
    if condition(status, COMPLETED).is_some() {
        return Step::Done;
    }
    if is_true(status, DISCOVERED) {
        return match status.packages.as_ref().and_then(|p| p.discovered.first()) {
            Some(first) => Step::Process(first.name.clone()),
            None => Step::Complete,
        };
    }
    if is_true(status, PENDING) {
        return Step::Discover;
    }
    Step::Start
}

/// Sets a condition, keeping its transition time when the status does not change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: &Time,
) {
    let status = if status { "True" } else { "False" };
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status != status {
            c.last_transition_time = now.clone();
        }
        c.status = status.into();
        c.reason = reason.into();
        c.message = message.into();
        return;
    }
    conditions.push(Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: now.clone(),
        observed_generation: None,
    });
}

/// Step 1: accepted.
pub fn started(
    mut status: PackageRepositoryOperationStatus,
    now: &Time,
) -> PackageRepositoryOperationStatus {
    set_condition(&mut status.conditions, PENDING, true, REASON_READY, "", now);
    status.start_time = Some(now.clone());
    status
}

/// Step 2: the package names.
pub fn discovered(
    mut status: PackageRepositoryOperationStatus,
    packages: &[String],
    now: &Time,
) -> PackageRepositoryOperationStatus {
    let p = status
        .packages
        .get_or_insert_with(OperationPackages::default);
    p.discovered = packages
        .iter()
        .map(|name| DiscoveredPackage { name: name.clone() })
        .collect();
    p.total = Some(packages.len() as i64);
    p.processed_overall = Some(0);
    p.new_versions_overall = Some(0);
    set_condition(
        &mut status.conditions,
        DISCOVERED,
        true,
        REASON_READY,
        "",
        now,
    );
    status
}

/// What processing one package gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackageOutcome {
    /// Its type (`Application`, `Module`) when it was determined.
    pub type_: Option<String>,
    /// Versions found in the registry.
    pub found_versions: i64,
    /// Versions new to the cluster.
    pub new_versions: i64,
    /// Errors per version (`version` empty when the whole package failed).
    pub errors: Vec<VersionError>,
}

/// Step 3: `name` (the first discovered package) was processed. A package whose type could not
/// be determined is recorded as failed only; otherwise as processed, and also as failed when
/// some of its versions failed.
pub fn processed(
    mut status: PackageRepositoryOperationStatus,
    name: &str,
    outcome: PackageOutcome,
) -> PackageRepositoryOperationStatus {
    let p = status
        .packages
        .get_or_insert_with(OperationPackages::default);
    if let Some(i) = p.discovered.iter().position(|d| d.name == name) {
        p.discovered.remove(i);
    }
    p.processed_overall = Some(p.processed_overall.unwrap_or(0) + 1);
    if outcome.type_.is_some() {
        p.new_versions_overall = Some(p.new_versions_overall.unwrap_or(0) + outcome.new_versions);
        p.processed.push(ProcessedPackage {
            name: name.into(),
            type_: outcome.type_,
            found_versions: Some(outcome.found_versions),
            new_versions: Some(outcome.new_versions),
        });
    }
    if !outcome.errors.is_empty() {
        p.failed.push(FailedPackage {
            name: name.into(),
            errors: outcome.errors,
        });
    }
    status
}

/// Step 4: done.
pub fn completed(
    mut status: PackageRepositoryOperationStatus,
    now: &Time,
) -> PackageRepositoryOperationStatus {
    set_condition(
        &mut status.conditions,
        COMPLETED,
        true,
        REASON_READY,
        "",
        now,
    );
    status.completion_time = Some(now.clone());
    status
}

/// The operation failed as a whole.
pub fn failed(
    mut status: PackageRepositoryOperationStatus,
    reason: &str,
    message: &str,
    now: &Time,
) -> PackageRepositoryOperationStatus {
    set_condition(
        &mut status.conditions,
        COMPLETED,
        false,
        reason,
        message,
        now,
    );
    status.completion_time = Some(now.clone());
    status
}

/// The PackageRepository's `LastOperationScanFinished` message after a completed operation.
pub fn scan_finished_message(total: i64) -> String {
    format!("Successfully scanned repository, found {total} package(s)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Time {
        Time(jiff::Timestamp::from_second(1_700_000_000).unwrap())
    }

    fn error(version: &str, message: &str) -> VersionError {
        VersionError {
            version: version.into(),
            message: message.into(),
        }
    }

    /// Walks a whole operation through the pure steps, the way the controller does.
    fn run(
        packages: &[&str],
        outcome: impl Fn(&str) -> PackageOutcome,
    ) -> (Vec<Step>, PackageRepositoryOperationStatus) {
        let names: Vec<String> = packages.iter().map(|s| s.to_string()).collect();
        let mut status = PackageRepositoryOperationStatus::default();
        let mut steps = Vec::new();
        loop {
            let step = next_step(&status);
            steps.push(step.clone());
            status = match step {
                Step::Start => started(status, &now()),
                Step::Discover => discovered(status, &names, &now()),
                Step::Process(name) => {
                    let o = outcome(&name);
                    processed(status, &name, o)
                }
                Step::Complete => completed(status, &now()),
                Step::Done => break,
            };
        }
        (steps, status)
    }

    #[test]
    fn walks_every_package_once() {
        let (steps, status) = run(&["a", "b"], |_| PackageOutcome {
            type_: Some("Application".into()),
            found_versions: 2,
            new_versions: 2,
            errors: vec![],
        });
        assert_eq!(
            steps,
            [
                Step::Start,
                Step::Discover,
                Step::Process("a".into()),
                Step::Process("b".into()),
                Step::Complete,
                Step::Done
            ]
        );
        let p = status.packages.unwrap();
        assert_eq!(
            (p.total, p.processed_overall, p.new_versions_overall),
            (Some(2), Some(2), Some(4))
        );
        assert!(p.discovered.is_empty() && p.failed.is_empty());
        assert!(status.start_time.is_some() && status.completion_time.is_some());
        let completed = status
            .conditions
            .iter()
            .find(|c| c.type_ == COMPLETED)
            .unwrap();
        assert_eq!(completed.status, "True");
    }

    #[test]
    fn a_failing_package_leaves_the_others_processed() {
        let (_, status) = run(&["a", "broken", "half", "c"], |name| match name {
            "broken" => PackageOutcome {
                errors: vec![error("", "list tags of broken/version: 500")],
                ..Default::default()
            },
            "half" => PackageOutcome {
                type_: Some("Application".into()),
                found_versions: 2,
                new_versions: 1,
                errors: vec![error("v2.0.0", "ensure package version: boom")],
            },
            _ => PackageOutcome {
                type_: Some("Application".into()),
                found_versions: 1,
                new_versions: 1,
                errors: vec![],
            },
        });
        let p = status.packages.unwrap();
        let processed: Vec<&str> = p.processed.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(processed, ["a", "half", "c"]);
        let failed: Vec<(&str, usize)> = p
            .failed
            .iter()
            .map(|f| (f.name.as_str(), f.errors.len()))
            .collect();
        assert_eq!(failed, [("broken", 1), ("half", 1)]);
        assert_eq!(p.processed_overall, Some(4));
        assert_eq!(p.new_versions_overall, Some(3));
    }

    #[test]
    fn steps_from_conditions() {
        let at = now();
        let table: Vec<(PackageRepositoryOperationStatus, Step)> = vec![
            (Default::default(), Step::Start),
            (started(Default::default(), &at), Step::Discover),
            (
                discovered(started(Default::default(), &at), &["x".into()], &at),
                Step::Process("x".into()),
            ),
            (
                discovered(started(Default::default(), &at), &[], &at),
                Step::Complete,
            ),
            (
                failed(
                    started(Default::default(), &at),
                    REASON_LISTING_FAILED,
                    "no",
                    &at,
                ),
                Step::Done,
            ),
            (completed(Default::default(), &at), Step::Done),
        ];
        for (status, want) in table {
            assert_eq!(next_step(&status), want, "{status:?}");
        }
    }
}
