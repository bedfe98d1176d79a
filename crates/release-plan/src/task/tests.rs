use super::*;

use Phase::{Deployed, Pending, Skipped, Suspended};
use TaskType::{Await, Process, Skip};

/// A release named `v<version>` with `spec.version: <version>`, as in Deckhouse's mock releases.
fn r(version: &str, phase: Phase) -> Release {
    Release::new(
        format!("v{version}"),
        ReleaseVersion::parse(version).unwrap(),
        phase,
    )
}

fn forced(version: &str, phase: Phase) -> Release {
    Release {
        forced: true,
        ..r(version, phase)
    }
}

fn constrained(version: &str, phase: Phase, from: &str, to: &str) -> Release {
    Release {
        update_constraints: vec![UpdateConstraint {
            from: from.into(),
            to: to.into(),
        }],
        ..r(version, phase)
    }
}

fn deployed(version: &str) -> Option<DeployedRelease> {
    Some(DeployedRelease {
        name: format!("v{version}"),
        version: ReleaseVersion::parse(version).unwrap(),
    })
}

fn qd(major: u64, minor: u64, patch: u64) -> Option<QueueDepth> {
    Some(QueueDepth {
        major,
        minor,
        patch,
    })
}

const STABLE: Context = Context {
    kind: ReleaseKind::Deckhouse,
    lts: false,
};
const LTS: Context = Context {
    kind: ReleaseKind::Deckhouse,
    lts: true,
};

#[derive(Default)]
struct Want {
    message: &'static str,
    is_major: bool,
    is_from_to: bool,
    is_patch: bool,
    is_single: bool,
    is_latest: bool,
    deployed: Option<DeployedRelease>,
    queue_depth: Option<QueueDepth>,
}

fn check(
    name: &str,
    context: Context,
    releases: Vec<Release>,
    current: &str,
    task_type: TaskType,
    want: Want,
) {
    let task = calculate(&releases, current, context).unwrap_or_else(|e| panic!("{name}: {e}"));
    let expected = Task {
        task_type,
        message: want.message.to_owned(),
        is_major: want.is_major,
        is_from_to: want.is_from_to,
        is_patch: want.is_patch,
        is_single: want.is_single,
        is_latest: want.is_latest,
        deployed: want.deployed,
        queue_depth: want.queue_depth,
    };
    assert_eq!(task, expected, "{name}");
}

/// Deckhouse's `TestTaskCalculator_CalculatePendingReleaseTask` table
/// (deckhouse-controller/pkg/releaseupdater/task_calculator_test.go).
#[test]
fn deckhouse_task_table() {
    check(
        "single release",
        STABLE,
        vec![r("1.67.0", Pending)],
        "v1.67.0",
        Process,
        Want {
            is_single: true,
            is_latest: true,
            queue_depth: qd(0, 0, 0),
            ..Want::default()
        },
    );
    check(
        "forced release greater than pending",
        STABLE,
        vec![r("1.67.0", Pending), forced("1.68.0", Pending)],
        "v1.67.0",
        Skip,
        Want::default(),
    );
    check(
        "forced release less than pending - should process",
        STABLE,
        vec![forced("1.67.0", Pending), r("1.68.0", Pending)],
        "v1.68.0",
        Process,
        Want {
            is_latest: true,
            queue_depth: qd(0, 0, 0),
            ..Want::default()
        },
    );
    check(
        "deployed release greater than pending",
        STABLE,
        vec![r("1.67.0", Pending), r("1.68.0", Deployed)],
        "v1.67.0",
        Skip,
        Want::default(),
    );
    check(
        "constraint endpoint - process as from-to",
        STABLE,
        vec![
            r("1.67.0", Deployed),
            r("1.68.0", Pending),
            r("1.69.0", Pending),
            constrained("1.70.0", Pending, "1.67", "1.70"),
        ],
        "v1.70.0",
        Process,
        Want {
            is_from_to: true,
            is_latest: true,
            deployed: deployed("1.67.0"),
            queue_depth: qd(0, 3, 0),
            ..Want::default()
        },
    );
    check(
        "await previous pending release",
        STABLE,
        vec![r("1.67.0", Pending), r("1.68.0", Pending)],
        "v1.68.0",
        Await,
        Want {
            message: "awaiting for v1.67.0 release to be deployed",
            queue_depth: qd(0, 0, 0),
            ..Want::default()
        },
    );
    check(
        "await major version jump (not 0->1)",
        STABLE,
        vec![r("1.67.0", Deployed), r("2.0.0", Pending)],
        "v2.0.0",
        Await,
        Want {
            message: "major version is greater than deployed 1.67.0",
            is_major: true,
            deployed: deployed("1.67.0"),
            queue_depth: qd(1, 0, 0),
            ..Want::default()
        },
    );
    check(
        "allow major version jump 0->1",
        STABLE,
        vec![r("0.67.0", Deployed), r("1.0.0", Pending)],
        "v1.0.0",
        Process,
        Want {
            is_latest: true,
            deployed: deployed("0.67.0"),
            queue_depth: qd(1, 0, 0),
            ..Want::default()
        },
    );
    check(
        "await minor version jump in regular channel",
        STABLE,
        vec![r("1.65.0", Deployed), r("1.67.0", Pending)],
        "v1.67.0",
        Await,
        Want {
            message: "minor version is greater than deployed 1.65.0 by one",
            deployed: deployed("1.65.0"),
            queue_depth: qd(0, 2, 0),
            ..Want::default()
        },
    );
    check(
        "allow minor version jump in LTS channel",
        LTS,
        vec![r("1.65.0", Deployed), r("1.67.0", Pending)],
        "v1.67.0",
        Process,
        Want {
            is_latest: true,
            deployed: deployed("1.65.0"),
            queue_depth: qd(0, 2, 0),
            ..Want::default()
        },
    );
    check(
        "await excessive minor version jump in LTS channel",
        LTS,
        vec![r("1.65.0", Deployed), r("1.76.0", Pending)],
        "v1.76.0",
        Await,
        Want {
            message: "minor version is greater than deployed 1.65.0 by 11, it's more than acceptable channel limitation",
            deployed: deployed("1.65.0"),
            queue_depth: qd(0, 11, 0),
            ..Want::default()
        },
    );
    check(
        "skip patch release when higher patch exists",
        STABLE,
        vec![
            r("1.67.0", Deployed),
            r("1.67.3", Pending),
            r("1.67.5", Pending),
        ],
        "v1.67.3",
        Skip,
        Want {
            is_patch: true,
            ..Want::default()
        },
    );
    check(
        "process patch release when it's the latest",
        STABLE,
        vec![r("1.67.0", Deployed), r("1.67.5", Pending)],
        "v1.67.5",
        Process,
        Want {
            is_patch: true,
            is_latest: true,
            deployed: deployed("1.67.0"),
            queue_depth: qd(0, 0, 5),
            ..Want::default()
        },
    );
    check(
        "process minor release when next is major",
        STABLE,
        vec![
            r("1.67.0", Deployed),
            r("1.68.0", Pending),
            r("2.0.0", Pending),
        ],
        "v1.68.0",
        Process,
        Want {
            deployed: deployed("1.67.0"),
            queue_depth: qd(1, 1, 0),
            ..Want::default()
        },
    );
    check(
        "process sequential minor release",
        STABLE,
        vec![r("1.67.0", Deployed), r("1.68.0", Pending)],
        "v1.68.0",
        Process,
        Want {
            is_latest: true,
            deployed: deployed("1.67.0"),
            queue_depth: qd(0, 1, 0),
            ..Want::default()
        },
    );
    check(
        "constraint not applicable - deployed version too low",
        STABLE,
        vec![
            r("1.65.0", Deployed),
            constrained("1.70.0", Pending, "1.67", "1.70"),
        ],
        "v1.70.0",
        Await,
        Want {
            message: "minor version is greater than deployed 1.65.0 by one",
            deployed: deployed("1.65.0"),
            queue_depth: qd(0, 5, 0),
            ..Want::default()
        },
    );
    check(
        "constraint not applicable - deployed version too high",
        STABLE,
        vec![
            r("1.72.0", Deployed),
            constrained("1.70.0", Pending, "1.67", "1.70"),
        ],
        "v1.70.0",
        Skip,
        Want::default(),
    );
    check(
        "suspended releases are ignored",
        STABLE,
        vec![
            r("1.70.17", Deployed),
            r("1.71.5", Suspended),
            r("1.71.7", Pending),
            r("1.72.5", Suspended),
            r("1.72.10", Pending),
        ],
        "v1.72.10",
        Await,
        Want {
            message: "awaiting for v1.71.7 release to be deployed",
            deployed: deployed("1.70.17"),
            queue_depth: qd(0, 2, 0),
            ..Want::default()
        },
    );
}

#[test]
fn errors() {
    let releases = vec![r("1.67.0", Deployed), r("1.67.0", Pending)];
    // Both carry the name v1.67.0; the first found is the Deployed one.
    assert_eq!(
        calculate(&releases, "v1.67.0", STABLE),
        Err(Error::ReleasePhaseIsNotPending)
    );
    let releases = vec![
        Release::new(
            "deployed",
            ReleaseVersion::parse("1.67.0").unwrap(),
            Deployed,
        ),
        Release::new("pending", ReleaseVersion::parse("1.67.0").unwrap(), Pending),
    ];
    assert_eq!(
        calculate(&releases, "pending", STABLE),
        Err(Error::ReleaseIsAlreadyDeployed)
    );
    assert_eq!(
        calculate(&releases, "missing", STABLE),
        Err(Error::ReleaseNotListed {
            name: "missing".into()
        })
    );
    assert_eq!(
        Error::ReleaseIsAlreadyDeployed.to_string(),
        "release is already deployed"
    );
    assert_eq!(
        Error::ReleasePhaseIsNotPending.to_string(),
        "release phase is not pending"
    );
}

/// name, releases, current, task type, depth, release queue depth, major depth
type DepthCase = (
    &'static str,
    Vec<Release>,
    &'static str,
    TaskType,
    QueueDepth,
    u64,
    u64,
);

/// Deckhouse's `TestReleaseQueueDepthDelta_*` cases, with DeckhouseRelease-style `v` versions.
#[test]
fn queue_depth_table() {
    let dr = |v: &str, phase| Release::new(v, ReleaseVersion::parse(v).unwrap(), phase);
    let cases: Vec<DepthCase> = vec![
        (
            "major version change 0->1",
            vec![dr("v0.66.0", Deployed), dr("v1.0.0", Pending)],
            "v1.0.0",
            Process,
            QueueDepth {
                major: 1,
                minor: 0,
                patch: 0,
            },
            0,
            1,
        ),
        (
            "patch version change",
            vec![dr("v1.66.0", Deployed), dr("v1.66.1", Pending)],
            "v1.66.1",
            Process,
            QueueDepth {
                major: 0,
                minor: 0,
                patch: 1,
            },
            1,
            0,
        ),
        (
            "minor version with patches",
            vec![dr("v1.66.5", Deployed), dr("v1.67.2", Pending)],
            "v1.67.2",
            Process,
            QueueDepth {
                major: 0,
                minor: 1,
                patch: 0,
            },
            1,
            0,
        ),
        (
            "major version awaiting",
            vec![dr("v1.66.0", Deployed), dr("v2.0.0", Pending)],
            "v2.0.0",
            Await,
            QueueDepth {
                major: 1,
                minor: 0,
                patch: 0,
            },
            0,
            1,
        ),
        (
            "major version with minor updates",
            vec![
                dr("v1.0.0", Deployed),
                dr("v1.1.0", Pending),
                dr("v1.2.0", Pending),
                dr("v1.3.5", Pending),
                dr("v1.3.6", Pending),
                dr("v1.3.7", Pending),
                dr("v1.4.8", Pending),
                dr("v1.5.10", Pending),
                dr("v2.5.0", Pending),
            ],
            "v1.1.0",
            Process,
            QueueDepth {
                major: 1,
                minor: 5,
                patch: 0,
            },
            5,
            1,
        ),
    ];
    for (name, releases, current, task_type, depth, release_queue_depth, major_depth) in cases {
        let task = calculate(&releases, current, STABLE).unwrap();
        assert_eq!(task.task_type, task_type, "{name}");
        let got = task.queue_depth.unwrap();
        assert_eq!(got, depth, "{name}");
        assert_eq!(got.release_queue_depth(), release_queue_depth, "{name}");
        assert_eq!(got.major_release_depth(), major_depth, "{name}");
    }
}

/// Cases beyond Deckhouse's table: platform messages quote the version as written (`v1.65.0`),
/// awaiting messages chain, modules are exempt from the LTS limit, constraints skip the releases
/// they jump over.
#[test]
fn more_cases() {
    let dr = |v: &str, phase| Release::new(v, ReleaseVersion::parse(v).unwrap(), phase);
    let task = calculate(
        &[dr("v1.65.3", Deployed), dr("v1.67.0", Pending)],
        "v1.67.0",
        STABLE,
    )
    .unwrap();
    assert_eq!(
        task.message,
        "minor version is greater than deployed v1.65.3 by one"
    );

    // The awaiting message of the previous Pending release is passed on.
    let mut waiting = r("1.66.0", Pending);
    waiting.message = "minor version is greater than deployed 1.64.0 by one".into();
    let chained = vec![
        r("1.64.0", Deployed),
        r("1.65.0", Skipped),
        waiting.clone(),
        r("1.67.0", Pending),
    ];
    let task = calculate(&chained, "v1.67.0", STABLE).unwrap();
    assert_eq!(task.task_type, Await);
    assert_eq!(task.message, "awaiting for v1.66.0 release to be deployed");
    waiting.message = "awaiting for v1.65.0 release to be deployed".into();
    let chained = vec![r("1.64.0", Deployed), waiting, r("1.67.0", Pending)];
    let task = calculate(&chained, "v1.67.0", STABLE).unwrap();
    assert_eq!(task.message, "awaiting for v1.65.0 release to be deployed");

    // LTS: ten minors at once is fine for the platform, eleven is not; modules have no limit.
    let task = calculate(
        &[r("1.65.0", Deployed), r("1.75.0", Pending)],
        "v1.75.0",
        LTS,
    )
    .unwrap();
    assert_eq!(task.task_type, Process);
    let module_lts = Context {
        kind: ReleaseKind::Module,
        lts: true,
    };
    let task = calculate(
        &[r("1.65.0", Deployed), r("1.95.0", Pending)],
        "v1.95.0",
        module_lts,
    )
    .unwrap();
    assert_eq!(task.task_type, Process);
    // A module on a regular channel still goes one minor at a time.
    let module = Context {
        kind: ReleaseKind::Module,
        lts: false,
    };
    let task = calculate(
        &[r("1.65.0", Deployed), r("1.67.0", Pending)],
        "v1.67.0",
        module,
    )
    .unwrap();
    assert_eq!(task.task_type, Await);

    // Major 1 → 2 and 2 → 3 wait; the previous release is what the message names.
    let task = calculate(
        &[r("2.9.0", Deployed), r("3.0.0", Pending)],
        "v3.0.0",
        STABLE,
    )
    .unwrap();
    assert_eq!(task.message, "major version is greater than deployed 2.9.0");

    // Update constraints: the releases jumped over are skipped, the endpoint is the newest patch
    // of `to`'s minor, and releases after the endpoint follow the usual rules.
    let releases = vec![
        r("1.67.5", Deployed),
        r("1.68.0", Pending),
        r("1.69.2", Pending),
        constrained("1.70.0", Pending, "1.67", "1.70"),
        r("1.70.3", Pending),
        r("1.71.0", Pending),
    ];
    for skipped in ["v1.68.0", "v1.69.2", "v1.70.0"] {
        let task = calculate(&releases, skipped, STABLE).unwrap();
        assert_eq!(
            (task.task_type, task.message.as_str()),
            (Skip, MSG_SKIPPED_BY_UPDATE_CONSTRAINTS),
            "{skipped}"
        );
    }
    let task = calculate(&releases, "v1.70.3", STABLE).unwrap();
    assert_eq!(task.task_type, Process);
    assert!(task.is_from_to && !task.is_patch && !task.is_latest);
    let task = calculate(&releases, "v1.71.0", STABLE).unwrap();
    assert_eq!(
        (task.task_type, task.message.as_str()),
        (Await, "awaiting for v1.70.3 release to be deployed")
    );

    // A constraint whose `to` is not the holder's own minor is ignored.
    let releases = vec![
        r("1.67.5", Deployed),
        r("1.68.0", Pending),
        constrained("1.69.0", Pending, "1.67", "1.70"),
    ];
    let task = calculate(&releases, "v1.68.0", STABLE).unwrap();
    assert_eq!(task.task_type, Process);
    assert!(!task.is_from_to);

    // A constraint endpoint across a major is a major from-to jump.
    let releases = vec![
        r("1.67.5", Deployed),
        constrained("2.0.1", Pending, "1.60", "2.0"),
    ];
    let task = calculate(&releases, "v2.0.1", STABLE).unwrap();
    assert!(task.is_from_to && task.is_major && task.task_type == Process);

    // A higher forced release skips this one.
    let task = calculate(
        &[
            r("1.67.0", Deployed),
            forced("1.67.2", Pending),
            r("1.67.1", Pending),
        ],
        "v1.67.1",
        STABLE,
    )
    .unwrap();
    assert_eq!(task.task_type, Skip);
}

#[test]
fn order_of_input_does_not_matter() {
    let mut releases = vec![
        r("1.68.3", Pending),
        r("1.67.0", Deployed),
        r("1.68.1", Pending),
        r("1.69.0", Pending),
    ];
    let expected: Vec<Task> = ["v1.68.3", "v1.68.1", "v1.69.0"]
        .iter()
        .map(|n| calculate(&releases, n, STABLE).unwrap())
        .collect();
    releases.reverse();
    for (name, want) in ["v1.68.3", "v1.68.1", "v1.69.0"].iter().zip(expected) {
        assert_eq!(calculate(&releases, name, STABLE).unwrap(), want);
    }
    assert_eq!(
        calculate(&releases, "v1.68.1", STABLE).unwrap().task_type,
        Skip
    );
    // 1.68.3 waits until 1.68.1 has been marked Skipped, then goes on.
    assert_eq!(
        calculate(&releases, "v1.68.3", STABLE).unwrap().message,
        "awaiting for v1.68.1 release to be deployed"
    );
    releases
        .iter_mut()
        .find(|r| r.name == "v1.68.1")
        .unwrap()
        .phase = Skipped;
    assert_eq!(
        calculate(&releases, "v1.68.3", STABLE).unwrap().task_type,
        Process
    );
    assert_eq!(
        calculate(&releases, "v1.69.0", STABLE).unwrap().task_type,
        Await
    );
}
