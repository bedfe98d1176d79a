use proptest::prelude::*;

use super::*;

use Phase::{Deployed, Pending, Superseded, Suspended};

fn v(s: &str) -> ReleaseVersion {
    ReleaseVersion::parse(s).unwrap()
}

fn rel(version: &str, phase: Phase) -> ClusterRelease {
    ClusterRelease::new(version, v(version), phase)
}

/// name, deployed, channel, tags, expected chain
type StepCase<'a> = (&'a str, &'a str, &'a str, &'a [&'a str], &'a [&'a str]);
/// name, deployed, channel, tags, error, message
type StepFailure<'a> = (&'a str, &'a str, &'a str, &'a [&'a str], Error, &'a str);
/// name, releases, channel, suspend, actions
type ActionCase = (
    &'static str,
    Vec<ClusterRelease>,
    &'static str,
    bool,
    Vec<ChannelAction>,
);

fn names(versions: &[ReleaseVersion]) -> Vec<String> {
    versions.iter().map(|x| x.original().to_owned()).collect()
}

#[test]
fn step_by_step_table() {
    let ok: &[StepCase<'_>] = &[
        (
            "the issue's example",
            "v1.66.3",
            "v1.68.5",
            &[
                "v1.66.5", "v1.67.5", "v1.67.11", "v1.68.1", "v1.68.3", "v1.68.5",
            ],
            &["v1.67.11", "v1.68.5"],
        ),
        (
            "only the deployed minor",
            "v1.66.3",
            "v1.66.5",
            &["v1.66.5"],
            &["v1.66.5"],
        ),
        (
            "one new minor",
            "v1.66.3",
            "v1.67.11",
            &["v1.66.5", "v1.67.11"],
            &["v1.67.11"],
        ),
        (
            "Deckhouse StepByStepUpdateSuccessfully",
            "v1.31.0",
            "v1.33.1",
            &[
                "v1.31.0", "v1.31.1", "v1.32.0", "v1.32.1", "v1.32.2", "v1.32.3", "v1.33.0",
                "v1.33.1",
            ],
            &["v1.32.3", "v1.33.1"],
        ),
        (
            "a newer patch than the channel's is replaced by the channel version",
            "v1.66.0",
            "v1.67.5",
            &["v1.67.0", "v1.67.9"],
            &["v1.67.5"],
        ),
        (
            "tags outside the range, pre-releases and non-release tags are ignored",
            "v1.66.3",
            "v1.68.5",
            &[
                "v1.60.0",
                "v1.67.2",
                "v1.67.3-rc.1",
                "alpha",
                "1.67.4",
                "v1.68.5",
                "v1.69.0",
                "v2.0.0",
            ],
            &["v1.67.2", "v1.68.5"],
        ),
        (
            "tags unsorted",
            "v1.66.3",
            "v1.68.5",
            &["v1.68.5", "v1.67.11", "v1.67.5"],
            &["v1.67.11", "v1.68.5"],
        ),
        (
            "a gap in the registry cuts the chain after the last direct step",
            "v1.66.3",
            "v1.69.0",
            &["v1.67.2", "v1.69.0"],
            &["v1.67.2"],
        ),
    ];
    for (name, actual, target, tags, expected) in ok {
        let chain =
            step_by_step(&v(actual), &v(target), tags).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(names(&chain), *expected, "{name}");
    }

    let failing: &[StepFailure<'_>] = &[
        (
            "no release tags",
            "v1.66.3",
            "v1.68.5",
            &["alpha", "stable", "v1.2.3-rc.1"],
            Error::NoMatchedTags,
            "no matched tags in registry",
        ),
        (
            "nothing between deployed and channel",
            "v1.66.3",
            "v1.68.5",
            &["v1.60.0", "v1.70.0"],
            Error::NoAcceptableTags,
            "no acceptable for step by step update tags in registry",
        ),
        (
            "Deckhouse StepByStepUpdateFailed",
            "v1.31.0",
            "v1.34.0",
            &["v1.31.0", "v1.31.1", "v1.33.0", "v1.33.1", "v1.34.0"],
            Error::NotInSequence {
                actual: "v1.31.0".into(),
                next: "v1.33.1".into(),
            },
            "versions is not in sequence: 'v1.31.0' and 'v1.33.1'",
        ),
    ];
    for (name, actual, target, tags, expected, message) in failing {
        let err = step_by_step(&v(actual), &v(target), tags).unwrap_err();
        assert_eq!(&err, expected, "{name}");
        assert_eq!(err.to_string(), *message, "{name}");
    }
}

#[test]
fn plan_table() {
    let step = |from: &str| NewReleases::StepByStep {
        from: v(from),
        inherit_apply_after: None,
    };
    let channel = |cause| NewReleases::Channel { cause };
    let cases: Vec<(&str, Vec<ClusterRelease>, &str, bool, NewReleases)> = vec![
        (
            "no releases",
            vec![],
            "v1.68.5",
            false,
            channel(CreateCause::NoReleasesInCluster),
        ),
        (
            "LTS creates the channel version directly",
            vec![rel("v1.50.0", Deployed)],
            "v1.68.5",
            true,
            channel(CreateCause::LtsChannel),
        ),
        (
            "patch of the deployed",
            vec![rel("v1.66.3", Deployed)],
            "v1.66.5",
            false,
            channel(CreateCause::FromDeployed),
        ),
        (
            "next minor of the deployed",
            vec![rel("v1.66.3", Deployed)],
            "v1.67.0",
            false,
            channel(CreateCause::FromDeployed),
        ),
        (
            "two minors ahead: step by step from the deployed",
            vec![rel("v1.66.3", Deployed)],
            "v1.68.5",
            false,
            step("v1.66.3"),
        ),
        (
            "releases in the cluster chain up to a direct step",
            vec![rel("v1.66.3", Deployed), rel("v1.67.11", Pending)],
            "v1.68.5",
            false,
            channel(CreateCause::FromLastReleaseInCluster),
        ),
        (
            "the chain in the cluster ends too early: step by step from its end",
            vec![rel("v1.66.3", Deployed), rel("v1.67.11", Pending)],
            "v1.70.0",
            false,
            step("v1.67.11"),
        ),
        (
            "a broken chain in the cluster: step by step from the deployed",
            vec![rel("v1.66.3", Deployed), rel("v1.68.5", Pending)],
            "v1.70.0",
            false,
            step("v1.66.3"),
        ),
        (
            "releases below the deployed one do not count",
            vec![
                rel("v1.64.0", Superseded),
                rel("v1.65.0", Superseded),
                rel("v1.66.3", Deployed),
            ],
            "v1.68.5",
            false,
            step("v1.66.3"),
        ),
        (
            "no Deployed release: from the lowest",
            vec![rel("v1.67.0", Pending), rel("v1.66.0", Pending)],
            "v1.67.3",
            false,
            channel(CreateCause::FromDeployed),
        ),
    ];
    for (name, releases, target, lts, expected) in cases {
        assert_eq!(
            plan_new_releases(&releases, &v(target), lts).unwrap(),
            expected,
            "{name}"
        );
    }
    assert_eq!(
        plan_new_releases(&[rel("v1.66.3", Deployed)], &v("v1.67.0-rc.1"), false),
        Err(Error::PreRelease {
            version: "v1.67.0-rc.1".into()
        })
    );
    assert_eq!(
        Error::PreRelease {
            version: "v1.67.0-rc.1".into()
        }
        .to_string(),
        "pre-release versions are not supported: v1.67.0-rc.1"
    );
    assert!(needs_restore(&[rel("v1.67.0", Pending)]));
    assert!(!needs_restore(&[
        rel("v1.67.0", Pending),
        rel("v1.66.0", Deployed)
    ]));
    assert_eq!(
        CreateCause::StepByStep.change_cause(),
        "check release (step-by-step)"
    );
    assert_eq!(
        CreateCause::NoReleasesInCluster.change_cause(),
        "check release (no releases in cluster)"
    );
}

#[test]
fn channel_actions_table() {
    let delete = |n: &str| ChannelAction::Delete { name: n.into() };
    let cases: Vec<ActionCase> = vec![
        (
            "rolled back: newer Pending releases go",
            vec![
                rel("v1.66.0", Deployed),
                rel("v1.67.0", Pending),
                rel("v1.68.0", Pending),
                rel("v1.69.0", Pending),
            ],
            "v1.67.0",
            false,
            vec![delete("v1.69.0"), delete("v1.68.0")],
        ),
        (
            "channel suspends its version",
            vec![rel("v1.66.0", Deployed), rel("v1.67.0", Pending)],
            "v1.67.0",
            true,
            vec![ChannelAction::Suspend {
                name: "v1.67.0".into(),
            }],
        ),
        (
            "channel lifts the suspension",
            vec![rel("v1.66.0", Deployed), rel("v1.67.0", Suspended)],
            "v1.67.0",
            false,
            vec![ChannelAction::Resume {
                name: "v1.67.0".into(),
            }],
        ),
        (
            "a newer Suspended release stays",
            vec![rel("v1.66.0", Deployed), rel("v1.68.0", Suspended)],
            "v1.67.0",
            false,
            vec![],
        ),
        (
            "older Pending releases stay",
            vec![rel("v1.66.0", Deployed), rel("v1.66.5", Pending)],
            "v1.67.0",
            false,
            vec![],
        ),
        (
            "releases below the Deployed one are not considered",
            vec![rel("v1.67.0", Pending), rel("v1.68.0", Deployed)],
            "v1.67.0",
            true,
            vec![],
        ),
    ];
    for (name, releases, channel, suspend, expected) in cases {
        assert_eq!(
            channel_actions(&releases, &v(channel), suspend),
            expected,
            "{name}"
        );
    }
}

proptest! {
    /// Every chain step is direct from the one before (starting at the deployed version), the
    /// chain rises strictly, never passes the channel version, and every version is a tag or the
    /// channel version itself.
    #[test]
    fn chain_is_made_of_direct_steps(
        deployed_minor in 60u64..70,
        deployed_patch in 0u64..5,
        target_minor_ahead in 0u64..6,
        target_patch in 0u64..5,
        tags in proptest::collection::vec((58u64..78, 0u64..8), 0..30),
    ) {
        let actual = ReleaseVersion::new(1, deployed_minor, deployed_patch);
        let target = ReleaseVersion::new(1, deployed_minor + target_minor_ahead, target_patch);
        let tag_names: Vec<String> = tags.iter().map(|(m, p)| format!("v1.{m}.{p}")).collect();
        if let Ok(chain) = step_by_step(&actual, &target, &tag_names) {
            prop_assert!(!chain.is_empty());
            let mut current = &actual;
            for version in &chain {
                prop_assert!(current.is_updating_sequence(version), "{current} -> {version}");
                prop_assert!(version <= &target);
                prop_assert!(version == &target || tag_names.iter().any(|t| t == version.original()));
                current = version;
            }
            for pair in chain.windows(2) {
                prop_assert!(pair[0] < pair[1]);
            }
        }
    }
}
