use super::*;

use crate::task::{DeployedRelease, QueueDepth, TaskType};
use crate::window::Window;

use ReleaseKind::{Deckhouse, Module};
use UpdateMode::{Auto, AutoPatch, Manual};

/// Deckhouse's test clock: Thursday 2019-10-17 15:33 UTC.
fn now() -> Timestamp {
    "2019-10-17T15:33:00Z".parse().unwrap()
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn settings(mode: UpdateMode) -> Settings {
    Settings::new(Deckhouse, mode)
}

fn windowed(mode: UpdateMode, from: &str, to: &str) -> Settings {
    Settings {
        windows: Windows::new(vec![Window::new(from, to, &[] as &[&str]).unwrap()]),
        ..settings(mode)
    }
}

fn release() -> ReleaseState {
    ReleaseState {
        name: "v1.26.0".into(),
        ..ReleaseState::default()
    }
}

/// Deckhouse's `TestDeployDelayReason` (deploy_delay_reason_test.go) and every single reason. The
/// time is Go's `time.RFC822` layout (`02 Jan 06 15:04 MST`): a two-digit year.
#[test]
fn delay_reason_messages() {
    let when = Some(now());
    let window = DelayReasons::NONE.with(DelayReasons::OUT_OF_WINDOW);
    assert_eq!(
        window.message(Deckhouse, when),
        "Release is waiting for the update window until 17 Oct 19 15:33 UTC"
    );
    let both = window.with(DelayReasons::MANUAL_APPROVAL);
    assert_eq!(
        both.message(Deckhouse, None),
        "Release is waiting for the update window, waiting for the 'release.deckhouse.io/approved: \"true\"' annotation"
    );
    assert_eq!(
        both.message(Module, None),
        "Release is waiting for the update window, waiting for the 'modules.deckhouse.io/approved: \"true\"' annotation"
    );
    assert_eq!(
        both.message(Deckhouse, when),
        "Release is waiting for the update window, waiting for the 'release.deckhouse.io/approved: \"true\"' annotation. After approval the release will be delayed until 17 Oct 19 15:33 UTC"
    );
    assert_eq!(
        both.message(Module, when),
        "Release is waiting for the update window, waiting for the 'modules.deckhouse.io/approved: \"true\"' annotation. After approval the release will be delayed until 17 Oct 19 15:33 UTC"
    );
    let cases = [
        (
            DelayReasons::COOLDOWN,
            "Release is in cooldown until 17 Oct 19 15:33 UTC",
        ),
        (
            DelayReasons::CANARY,
            "Release is postponed until 17 Oct 19 15:33 UTC",
        ),
        (
            DelayReasons::NOTIFICATION,
            "Release is postponed by notification until 17 Oct 19 15:33 UTC",
        ),
        (
            DelayReasons::CANARY.with(DelayReasons::OUT_OF_WINDOW),
            "Release is postponed, waiting for the update window until 17 Oct 19 15:33 UTC",
        ),
    ];
    for (reasons, expected) in cases {
        assert_eq!(reasons.message(Deckhouse, when), expected);
    }
    assert_eq!(DelayReasons::NONE.message(Deckhouse, when), "noDelay");
    assert_eq!(
        format_until(at("2021-01-02T08:00:00Z")),
        "02 Jan 21 08:00 UTC"
    );
}

struct Case {
    name: &'static str,
    settings: Settings,
    release: ReleaseState,
    /// `None` = applied now.
    delay: Option<(&'static str, Option<&'static str>)>,
}

fn run(patch: bool, cases: Vec<Case>) {
    for case in cases {
        let time = if patch {
            patch_deploy_time(&case.settings, &case.release, now()).unwrap()
        } else {
            minor_deploy_time(&case.settings, &case.release, now()).unwrap()
        };
        let got = delay_of(&time, &case.settings, &case.release, now())
            .map(|d| (d.message, d.apply_after, d.notified));
        let want = case
            .delay
            .map(|(message, apply_after)| (message.to_owned(), apply_after.map(at), true));
        assert_eq!(got, want, "{}", case.name);
    }
}

const APPROVAL: &str =
    "Release is waiting for the 'release.deckhouse.io/approved: \"true\"' annotation";

#[test]
fn patch_rules() {
    let canary = |r: ReleaseState| ReleaseState {
        apply_after: Some(at("2019-10-17T16:33:00Z")),
        ..r
    };
    let approved = |r: ReleaseState| ReleaseState {
        manually_approved: true,
        ..r
    };
    run(
        true,
        vec![
            Case {
                name: "auto, nothing delays",
                settings: settings(Auto),
                release: release(),
                delay: None,
            },
            Case {
                name: "auto, out of window: waits for the next opening",
                settings: windowed(Auto, "8:00", "10:00"),
                release: release(),
                delay: Some((
                    "Release is waiting for the update window until 18 Oct 19 08:00 UTC",
                    None,
                )),
            },
            Case {
                name: "autopatch, out of window: patches respect windows",
                settings: windowed(AutoPatch, "8:00", "10:00"),
                release: release(),
                delay: Some((
                    "Release is waiting for the update window until 18 Oct 19 08:00 UTC",
                    None,
                )),
            },
            Case {
                name: "autopatch, inside window",
                settings: windowed(AutoPatch, "15:00", "16:00"),
                release: release(),
                delay: None,
            },
            Case {
                name: "manual, not approved: windows ignored, approval needed",
                settings: windowed(Manual, "8:00", "10:00"),
                release: release(),
                delay: Some((APPROVAL, None)),
            },
            Case {
                name: "manual, approved: applies out of window",
                settings: windowed(Manual, "8:00", "10:00"),
                release: approved(release()),
                delay: None,
            },
            Case {
                name: "auto, canary in the future",
                settings: settings(Auto),
                release: canary(release()),
                delay: Some(("Release is postponed until 17 Oct 19 16:33 UTC", None)),
            },
            Case {
                name: "manual approved, canary still applies to patches",
                settings: settings(Manual),
                release: approved(canary(release())),
                delay: Some(("Release is postponed until 17 Oct 19 16:33 UTC", None)),
            },
            Case {
                name: "canary then window: the window after the canary time",
                settings: windowed(Auto, "20:00", "22:00"),
                release: canary(release()),
                delay: Some((
                    "Release is postponed, waiting for the update window until 17 Oct 19 20:00 UTC",
                    None,
                )),
            },
            Case {
                name: "canary in the past is no delay",
                settings: settings(Auto),
                release: ReleaseState {
                    apply_after: Some(at("2019-10-17T15:00:00Z")),
                    ..release()
                },
                delay: None,
            },
            Case {
                name: "apply-now skips window and approval",
                settings: windowed(Manual, "8:00", "10:00"),
                release: ReleaseState {
                    apply_now: true,
                    ..canary(release())
                },
                delay: None,
            },
        ],
    );
}

#[test]
fn minor_rules() {
    let canary = |r: ReleaseState| ReleaseState {
        apply_after: Some(at("2019-10-17T16:33:00Z")),
        ..r
    };
    let approved = |r: ReleaseState| ReleaseState {
        manually_approved: true,
        ..r
    };
    run(
        false,
        vec![
            Case {
                name: "auto, nothing delays",
                settings: settings(Auto),
                release: release(),
                delay: None,
            },
            Case {
                name: "auto, out of window",
                settings: windowed(Auto, "8:00", "10:00"),
                release: release(),
                delay: Some((
                    "Release is waiting for the update window until 18 Oct 19 08:00 UTC",
                    None,
                )),
            },
            Case {
                name: "autopatch: minors need approval",
                settings: settings(AutoPatch),
                release: release(),
                delay: Some((APPROVAL, None)),
            },
            Case {
                name: "autopatch approved: windows do not apply to minors",
                settings: windowed(AutoPatch, "8:00", "10:00"),
                release: approved(release()),
                delay: None,
            },
            Case {
                name: "manual: approval",
                settings: windowed(Manual, "8:00", "10:00"),
                release: release(),
                delay: Some((APPROVAL, None)),
            },
            Case {
                name: "manual approved: canary ignored",
                settings: settings(Manual),
                release: approved(canary(release())),
                delay: None,
            },
            Case {
                name: "autopatch approved: canary applies",
                settings: settings(AutoPatch),
                release: approved(canary(release())),
                delay: Some(("Release is postponed until 17 Oct 19 16:33 UTC", None)),
            },
            Case {
                name: "autopatch not approved with canary: approval replaces the canary reason",
                settings: settings(AutoPatch),
                release: canary(release()),
                delay: Some((APPROVAL, None)),
            },
            Case {
                name: "auto canary + window",
                settings: windowed(Auto, "20:00", "22:00"),
                release: canary(release()),
                delay: Some((
                    "Release is postponed, waiting for the update window until 17 Oct 19 20:00 UTC",
                    None,
                )),
            },
            Case {
                name: "apply-now",
                settings: windowed(AutoPatch, "8:00", "10:00"),
                release: ReleaseState {
                    apply_now: true,
                    ..release()
                },
                delay: None,
            },
        ],
    );
}

#[test]
fn notification_delay() {
    let notifying = |mode| Settings {
        minimal_notification_time: SignedDuration::from_hours(1),
        webhook_configured: true,
        ..settings(mode)
    };
    run(
        false,
        vec![
            Case {
                name: "not notified: at least now + minimalNotificationTime",
                settings: notifying(Auto),
                release: release(),
                delay: Some((
                    "Release is postponed by notification until 17 Oct 19 16:33 UTC",
                    Some("2019-10-17T16:33:00Z"),
                )),
            },
            Case {
                name: "canary later than the notification time: keeps the canary time, reason is notification",
                settings: notifying(Auto),
                release: ReleaseState {
                    apply_after: Some(at("2019-10-17T20:33:00Z")),
                    ..release()
                },
                delay: Some((
                    "Release is postponed by notification until 17 Oct 19 20:33 UTC",
                    Some("2019-10-17T20:33:00Z"),
                )),
            },
            Case {
                name: "notification then window: the window after the notification time",
                settings: Settings {
                    windows: Windows::new(vec![Window::new("18:00", "19:00", &["Thu"]).unwrap()]),
                    ..notifying(Auto)
                },
                release: release(),
                delay: Some((
                    "Release is postponed by notification until 17 Oct 19 18:00 UTC",
                    Some("2019-10-17T16:33:00Z"),
                )),
            },
            Case {
                name: "already notified: no delay",
                settings: notifying(Auto),
                release: ReleaseState {
                    notified: true,
                    ..release()
                },
                delay: None,
            },
            Case {
                name: "manual not approved and not notified: the notification reason, no time",
                settings: notifying(Manual),
                release: release(),
                delay: Some((
                    "Release is postponed by notification",
                    Some("2019-10-17T16:33:00Z"),
                )),
            },
        ],
    );
}

fn process_task(is_patch: bool) -> Task {
    Task {
        task_type: TaskType::Process,
        message: String::new(),
        is_major: false,
        is_from_to: false,
        is_patch,
        is_single: false,
        is_latest: true,
        deployed: Some(DeployedRelease {
            name: "v1.25.0".into(),
            version: ReleaseVersion::parse("v1.25.0").unwrap(),
        }),
        queue_depth: Some(QueueDepth::default()),
    }
}

fn plan_for(
    settings: &Settings,
    release: &ReleaseState,
    task: &Task,
    pod_ready: bool,
    requirements: &[String],
    disruptions: &[String],
) -> Plan {
    plan(&Input {
        settings,
        release,
        task,
        now: now(),
        pod_ready,
        requirement_failures: requirements,
        disruption_reasons: disruptions,
    })
    .unwrap()
}

#[test]
fn plan_order_and_messages() {
    let minor = process_task(false);
    let patch = process_task(true);
    let auto = settings(Auto);
    let none: &[String] = &[];

    // Forced: applied whatever else holds.
    let forced = ReleaseState {
        forced: true,
        ..release()
    };
    assert_eq!(
        plan_for(
            &windowed(Manual, "8:00", "9:00"),
            &forced,
            &minor,
            false,
            &["x".into()],
            &["y".into()]
        ),
        Plan::ApplyForced
    );

    // Minor while the running pod is not ready.
    assert_eq!(
        plan_for(&auto, &release(), &minor, false, none, none),
        Plan::Blocked {
            message: "awaiting for Deckhouse v1.25.0 pod to be ready".into(),
        }
    );
    let mut orphan = minor.clone();
    orphan.deployed = None;
    assert_eq!(
        plan_for(&auto, &release(), &orphan, false, none, none),
        Plan::Requeue
    );
    // Patches do not wait for the pod.
    assert_eq!(
        plan_for(&auto, &release(), &patch, false, none, none),
        Plan::DeployTime {
            notify: None,
            delay: None
        }
    );

    // Requirements, joined by ';'.
    let version = ReleaseVersion::parse("v1.30.0").unwrap();
    let failures = vec![
        requirement_not_met_message("k8s", &version, "min k8s version failed"),
        migrated_module_not_found_message("echo"),
    ];
    assert_eq!(
        plan_for(&auto, &release(), &minor, true, &failures, none),
        Plan::Blocked {
            message: "\"k8s\" requirement for DeckhouseRelease \"1.30.0\" not met: min k8s version failed;migrated module 'echo' not found in any ModuleSource registry".into(),
        }
    );

    // Disruptions: only minors, only in Manual disruption approval mode, until approved.
    let disruptive = Settings {
        disruption_approval_manual: true,
        ..settings(Auto)
    };
    let reasons = vec!["some test reason".to_owned()];
    assert_eq!(
        plan_for(&disruptive, &release(), &minor, true, none, &reasons),
        Plan::Blocked {
            message: "release blocked, disruption approval required: (`kubectl annotate DeckhouseRelease v1.26.0 release.deckhouse.io/disruption-approved=true`): some test reason".into(),
        }
    );
    let approved = ReleaseState {
        disruption_approved: true,
        ..release()
    };
    assert_eq!(
        plan_for(&disruptive, &approved, &minor, true, none, &reasons),
        Plan::DeployTime {
            notify: None,
            delay: None
        }
    );
    assert_eq!(
        plan_for(&auto, &release(), &minor, true, none, &reasons),
        Plan::DeployTime {
            notify: None,
            delay: None
        }
    );
    assert_eq!(
        plan_for(&disruptive, &release(), &patch, true, none, &reasons),
        Plan::DeployTime {
            notify: None,
            delay: None
        }
    );

    // Window delay.
    assert_eq!(
        plan_for(
            &windowed(Auto, "8:00", "10:00"),
            &release(),
            &minor,
            true,
            none,
            none
        ),
        Plan::DeployTime {
            notify: None,
            delay: Some(Delay {
                message: "Release is waiting for the update window until 18 Oct 19 08:00 UTC"
                    .into(),
                reasons: DelayReasons::OUT_OF_WINDOW,
                apply_after: None,
                notified: true
            })
        }
    );
}

#[test]
fn plan_notifications() {
    let minor = process_task(false);
    let patch = process_task(true);
    let none: &[String] = &[];
    let webhook = Settings {
        webhook_configured: true,
        ..settings(Auto)
    };

    // Minors are announced with their apply time; patches only with releaseType All.
    assert_eq!(
        plan_for(&webhook, &release(), &minor, true, none, none),
        Plan::DeployTime {
            notify: Some(NotifyRequest {
                apply_time: Some(now())
            }),
            delay: None
        }
    );
    assert_eq!(
        plan_for(&webhook, &release(), &patch, true, none, none),
        Plan::DeployTime {
            notify: None,
            delay: None
        }
    );
    let all = Settings {
        notify_release_type: NotifyReleaseType::All,
        ..webhook.clone()
    };
    assert_eq!(
        plan_for(&all, &release(), &patch, true, none, none),
        Plan::DeployTime {
            notify: Some(NotifyRequest { apply_time: None }),
            delay: None
        }
    );
    // At most once.
    let notified = ReleaseState {
        notified: true,
        ..release()
    };
    assert_eq!(
        plan_for(&webhook, &notified, &minor, true, none, none),
        Plan::DeployTime {
            notify: None,
            delay: None
        }
    );

    // With a minimal notification time the announced time is the delayed one.
    let delayed = Settings {
        minimal_notification_time: SignedDuration::from_hours(8),
        ..webhook.clone()
    };
    let Plan::DeployTime { notify, delay } =
        plan_for(&delayed, &release(), &minor, true, none, none)
    else {
        panic!("deploy time plan expected");
    };
    assert_eq!(
        notify,
        Some(NotifyRequest {
            apply_time: Some(at("2019-10-17T23:33:00Z"))
        })
    );
    let delay = delay.unwrap();
    assert_eq!(
        delay.message,
        "Release is postponed by notification until 17 Oct 19 23:33 UTC"
    );

    // A failed notification blocks with the error and records notified=false.
    assert_eq!(
        notification_failed(Some(&delay), "webhook response with status code 500, msg: boom"),
        Delay {
            message: "Release is blocked, failed to send release notification: webhook response with status code 500, msg: boom".into(),
            reasons: DelayReasons::NONE,
            apply_after: Some(at("2019-10-17T23:33:00Z")),
            notified: false,
        }
    );
}

#[test]
fn webhook_body() {
    let version = ReleaseVersion::parse("v1.26.0").unwrap();
    let body = WebhookBody::new(
        Deckhouse,
        &version,
        BTreeMap::from([("k8s".to_owned(), "1.19".to_owned())]),
        "https://github.com/deckhouse/deckhouse/releases/tag/v1.26.0",
        Some(at("2021-01-01T14:30:00Z")),
    );
    let json = serde_json::to_value(&body).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "subject": "Deckhouse",
            "version": "1.26.0",
            "requirements": {"k8s": "1.19"},
            "changelogLink": "https://github.com/deckhouse/deckhouse/releases/tag/v1.26.0",
            "applyTime": "2021-01-01T14:30:00Z",
            "message": "New Deckhouse Release 1.26.0 is available. Release will be applied at: Friday, 01-Jan-21 14:30:00 UTC"
        })
    );
    let bare = WebhookBody::new(Module, &version, BTreeMap::new(), "", None);
    let json = serde_json::to_value(&bare).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "subject": "Module",
            "version": "1.26.0",
            "applyTime": "0001-01-01T00:00:00Z",
            "message": "New Deckhouse Release 1.26.0 is available. Release will be applied at: Monday, 01-Jan-01 00:00:00 UTC"
        })
    );
}

#[test]
fn update_mode_parsing() {
    assert_eq!(UpdateMode::parse_or("Auto", AutoPatch), Auto);
    assert_eq!(UpdateMode::parse_or("Manual", AutoPatch), Manual);
    assert_eq!(UpdateMode::parse_or("AutoPatch", Auto), AutoPatch);
    assert_eq!(UpdateMode::parse_or("auto", AutoPatch), AutoPatch);
    assert_eq!(UpdateMode::parse_or("", Auto), Auto);
}

/// `d8_release_info` follows the plan: which wait a release is in, as Deckhouse labels it.
#[test]
fn release_info_labels_follow_the_plan() {
    let mut minor = process_task(false);
    minor.queue_depth = Some(QueueDepth {
        major: 1,
        minor: 2,
        patch: 0,
    });
    let none: &[String] = &[];
    let failures = vec!["\"k8s\" requirement …".to_owned()];
    let disruptions = vec!["ingress restarts".to_owned()];
    let manual = settings(Manual);
    let auto = settings(Auto);
    let disruptive = Settings {
        disruption_approval_manual: true,
        ..settings(Auto)
    };
    let forced = ReleaseState {
        forced: true,
        ..release()
    };
    let info = |settings: &Settings,
                state: &ReleaseState,
                pod_ready: bool,
                requirement_failures: &[String],
                disruption_reasons: &[String],
                failed: bool| {
        let input = Input {
            settings,
            release: state,
            task: &minor,
            now: now(),
            pod_ready,
            requirement_failures,
            disruption_reasons,
        };
        ReleaseInfo::of(&input, &plan(&input).unwrap(), failed)
    };

    // No series: forced, pod not ready.
    assert_eq!(info(&manual, &forced, true, none, none, false), None);
    assert_eq!(info(&manual, &release(), false, none, none, false), None);

    let base = ReleaseInfo {
        major_release_depth: 1,
        ..ReleaseInfo::default()
    };
    assert_eq!(
        info(&manual, &release(), true, &failures, none, false),
        Some(ReleaseInfo {
            requirements_not_met: true,
            ..base.clone()
        })
    );
    assert_eq!(
        info(&disruptive, &release(), true, none, &disruptions, false),
        Some(ReleaseInfo {
            disruption_approval: true,
            ..base.clone()
        })
    );
    assert_eq!(
        info(&manual, &release(), true, none, none, false),
        Some(ReleaseInfo {
            manual_approval: true,
            release_queue_depth: Some(2),
            ..base.clone()
        })
    );
    assert_eq!(
        info(&auto, &release(), true, none, none, true),
        Some(ReleaseInfo {
            notification_not_sent: true,
            ..base.clone()
        })
    );
    assert_eq!(
        info(&auto, &release(), true, none, none, false),
        Some(base.clone())
    );

    let labels = ReleaseInfo {
        manual_approval: true,
        release_queue_depth: Some(2),
        ..base
    }
    .labels("v1.26.0");
    assert_eq!(
        labels,
        vec![
            ("name", "v1.26.0".to_owned()),
            ("manualApproval", "true".to_owned()),
            ("disruptionApproval", "false".to_owned()),
            ("requirementsNotMet", "false".to_owned()),
            ("notificationNotSent", "false".to_owned()),
            ("releaseQueueDepth", "2".to_owned()),
            ("majorReleaseDepth", "1".to_owned()),
            ("majorReleaseName", "nil".to_owned()),
            ("fromToName", "nil".to_owned()),
        ]
    );

    // A major or from-to module release names itself (D8ModuleOutdatedByMajorVersion); a
    // platform release never does, as in Deckhouse.
    for (kind, is_major, is_from_to, want) in [
        (Module, true, false, ("echo-v2.0.0", "nil")),
        (Module, false, true, ("nil", "echo-v2.0.0")),
        (Module, false, false, ("nil", "nil")),
        (Deckhouse, true, true, ("nil", "nil")),
    ] {
        let task = Task {
            is_major,
            is_from_to,
            ..minor.clone()
        };
        let settings = Settings {
            kind,
            ..settings(Auto)
        };
        let state = release();
        let input = Input {
            settings: &settings,
            release: &state,
            task: &task,
            now: now(),
            pod_ready: true,
            requirement_failures: none,
            disruption_reasons: none,
        };
        let labels = ReleaseInfo::of(&input, &plan(&input).unwrap(), false)
            .unwrap()
            .labels("echo-v2.0.0");
        let get = |key: &str| labels.iter().find(|(k, _)| *k == key).unwrap().1.clone();
        assert_eq!(
            (get("majorReleaseName"), get("fromToName")),
            (want.0.to_owned(), want.1.to_owned()),
            "{kind:?} {is_major} {is_from_to}"
        );
    }
}
