use super::*;
use CniMigrationCondition as C;
use CniMigrationPhase as P;

fn node(name: &str) -> NodeView {
    NodeView {
        name: name.into(),
        exists: true,
        agent_ready: true,
        cleaned: true,
        pods_restarted: true,
        failed: None,
        detected: None,
    }
}

fn observed(phase: Option<P>) -> Observed {
    Observed {
        phase,
        target: "cilium".into(),
        current: Some("flannel".into()),
        enabled: vec!["flannel".into()],
        nodes: vec![node("a"), node("b")],
        target_ready: true,
    }
}

fn summary(step: &Step) -> String {
    match step {
        Step::Wait(why) => format!("wait: {why}"),
        Step::Fail(c, m) => format!("fail {c}: {m}"),
        Step::Advance {
            act,
            phase,
            condition,
            ..
        } => format!("{act:?} → {phase} ({condition})"),
    }
}

#[test]
fn phases_in_order() {
    let enable = Some(Act::Module {
        cni: "cilium".into(),
        enabled: true,
    });
    let disable = Some(Act::Module {
        cni: "flannel".into(),
        enabled: false,
    });
    let rows = [
        (
            None,
            format!("None → WaitingForAgents ({})", C::EnvironmentPrepared),
        ),
        (
            Some(P::Preparing),
            "None → WaitingForAgents (EnvironmentPrepared)".into(),
        ),
        (
            Some(P::WaitingForAgents),
            "None → EnablingTargetCNI (AgentsReady)".into(),
        ),
        (
            Some(P::EnablingTargetCni),
            format!("{enable:?} → DisablingCurrentCNI (TargetCNIEnabled)"),
        ),
        (
            Some(P::DisablingCurrentCni),
            format!("{disable:?} → CleaningNodes (CurrentCNIDisabled)"),
        ),
        (
            Some(P::CleaningNodes),
            "None → WaitingTargetCNI (NodesCleaned)".into(),
        ),
        (
            Some(P::WaitingTargetCni),
            "None → RestartingPods (TargetCNIReady)".into(),
        ),
        (
            Some(P::RestartingPods),
            "None → Completed (Succeeded)".into(),
        ),
        (Some(P::Completed), "wait: completed".into()),
    ];
    for (phase, expected) in rows {
        assert_eq!(summary(&next(&observed(phase))), expected, "{phase:?}");
    }
}

#[test]
fn waits_name_the_nodes_left() {
    let mut o = observed(Some(P::CleaningNodes));
    o.nodes[1].cleaned = false;
    assert_eq!(
        summary(&next(&o)),
        "wait: waiting for the cleanup on nodes: b"
    );
    let mut o = observed(Some(P::WaitingForAgents));
    o.nodes[0].agent_ready = false;
    assert_eq!(
        summary(&next(&o)),
        "wait: waiting for the migration agent on nodes: a"
    );
    let mut o = observed(Some(P::WaitingTargetCni));
    o.target_ready = false;
    assert_eq!(
        summary(&next(&o)),
        "wait: waiting for the CNI cilium to become ready"
    );
}

#[test]
fn a_deleted_or_failed_node_is_reported_not_waited_for() {
    let mut o = observed(Some(P::RestartingPods));
    o.nodes[1].exists = false;
    o.nodes[1].pods_restarted = false;
    o.nodes.push(NodeView {
        failed: Some("ip link delete: busy".into()),
        pods_restarted: false,
        ..node("c")
    });
    assert_eq!(summary(&next(&o)), "None → Completed (Succeeded)");
    assert_eq!(
        failed_nodes(&o.nodes),
        [
            ("b".to_owned(), NODE_DELETED.to_owned()),
            ("c".to_owned(), "ip link delete: busy".to_owned())
        ]
    );
}

#[test]
fn detection() {
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        detect_current(&s(&["flannel"]), "cilium"),
        Ok("flannel".into())
    );
    // Resumed after EnablingTargetCNI: the target is on too.
    assert_eq!(
        detect_current(&s(&["flannel", "cilium"]), "cilium"),
        Ok("flannel".into())
    );
    assert!(
        detect_current(&s(&[]), "cilium")
            .unwrap_err()
            .contains("no enabled CNI module")
    );
    assert!(
        detect_current(&s(&["cilium"]), "cilium")
            .unwrap_err()
            .contains("already runs")
    );
    assert!(
        detect_current(&s(&["flannel", "simple-bridge"]), "cilium")
            .unwrap_err()
            .contains("more than one")
    );
}

/// With no CNI module enabled, the nodes' configuration decides.
#[test]
fn detection_from_the_nodes_when_no_module_is_enabled() {
    use crate::cni::detect::NodeCni;
    let known = |c: &str| Some(NodeCni::Known(c.into()));
    let rows: [(&str, [Option<NodeCni>; 2], &str); 6] = [
        (
            "both flannel",
            [known("flannel"), known("flannel")],
            "None → WaitingForAgents (EnvironmentPrepared) current flannel",
        ),
        (
            "one not reported",
            [known("flannel"), None],
            "wait: no CNI module is enabled: waiting for the migration agents to report the CNI of nodes: b",
        ),
        (
            "nothing on the nodes",
            [Some(NodeCni::None), Some(NodeCni::None)],
            "fail CurrentCNIDetectionFailed: no enabled CNI module found and no node runs a known CNI (a: no CNI configuration; b: no CNI configuration)",
        ),
        (
            "the target already runs",
            [known("cilium"), known("cilium")],
            "fail CurrentCNIDetectionFailed: the cluster already runs the CNI \"cilium\"",
        ),
        (
            "different CNIs",
            [known("cilium"), known("flannel")],
            "fail CurrentCNIDetectionFailed: no enabled CNI module found and the nodes run different CNIs: cilium, flannel",
        ),
        (
            "an unknown CNI",
            [
                known("flannel"),
                Some(NodeCni::Unknown("10-calico.conflist".into())),
            ],
            "fail CurrentCNIDetectionFailed: no enabled CNI module found and the nodes disagree: flannel on some, b: unknown CNI configuration 10-calico.conflist",
        ),
    ];
    for (case, detected, want) in rows {
        let mut o = observed(Some(P::Preparing));
        o.enabled.clear();
        o.current = None;
        for (n, d) in o.nodes.iter_mut().zip(detected) {
            n.detected = d;
        }
        let got = match next(&o) {
            step @ Step::Advance { .. } => {
                let Step::Advance { current, .. } = &step else {
                    unreachable!()
                };
                format!(
                    "{} current {}",
                    summary(&step),
                    current.clone().unwrap_or_default()
                )
            }
            step => summary(&step),
        };
        assert_eq!(got, want, "{case}");
    }
    // A module enabled wins over the nodes (Deckhouse's detection first).
    let mut o = observed(Some(P::Preparing));
    o.nodes[0].detected = known("cilium");
    assert!(matches!(next(&o), Step::Advance { current: Some(c), .. } if c == "flannel"));
}

#[test]
fn switch_refusals() {
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(refuse_switch("cilium", &[], &s(&["flannel"])), None);
    assert!(
        refuse_switch("calico", &[], &s(&["flannel"]))
            .unwrap()
            .contains("Supported values are: cilium, flannel, simple-bridge")
    );
    assert!(
        refuse_switch("cilium", &s(&["cni-migration"]), &s(&["flannel"]))
            .unwrap()
            .contains("already exists: cni-migration")
    );
    assert!(
        refuse_switch("flannel", &[], &s(&["flannel"]))
            .unwrap()
            .contains("already runs")
    );
}

#[test]
fn which_pods_are_marked_and_restarted() {
    let pod = |host_network, cni_daemon, terminating, finished, cni: Option<&str>| PodView {
        namespace: "default".into(),
        name: "p".into(),
        host_network,
        cni_daemon,
        terminating,
        finished,
        effective_cni: cni.map(str::to_owned),
    };
    let rows = [
        // (pod, marked, restarted once marked)
        (pod(false, false, false, false, None), true, false),
        (
            pod(false, false, false, false, Some("flannel")),
            false,
            true,
        ),
        (pod(false, false, false, false, Some("cilium")), true, false),
        (pod(true, false, false, false, None), false, false),
        (pod(false, true, false, false, None), false, false),
        (pod(false, false, true, false, None), false, false),
        (
            pod(false, false, true, false, Some("flannel")),
            false,
            false,
        ),
        (pod(false, false, false, true, None), false, false),
    ];
    for (p, marked, restarted) in rows {
        assert_eq!(annotates(&p, "flannel"), marked, "{p:?}");
        assert_eq!(restarts(&p, "flannel"), restarted, "{p:?}");
    }
}

#[test]
fn cni_artifacts() {
    let flannel = artifacts("flannel").unwrap();
    assert!(is_cni_file("10-flannel.conflist", &flannel));
    assert!(!is_cni_file("05-cilium-cni.conf", &flannel));
    assert!(!is_cni_file("flannel-notes.txt", &flannel));
    let cilium = artifacts("cilium").unwrap();
    assert!(is_cni_file("05-cilium-cni.conf", &cilium));
    assert_eq!(cilium.links, ["cilium_host", "cilium_net", "cilium_vxlan"]);
    assert!(artifacts("calico").is_none());
}

#[test]
fn the_oldest_migration_runs() {
    let t = |s: &str| Some(s.parse::<jiff::Timestamp>().unwrap());
    assert_eq!(active(&[]), None);
    assert_eq!(
        active(&[
            ("newer", t("2024-01-02T00:00:00Z")),
            ("older", t("2024-01-01T00:00:00Z"))
        ]),
        Some("older")
    );
    assert_eq!(
        active(&[
            ("migration-b", t("2024-01-01T00:00:00Z")),
            ("migration-a", t("2024-01-01T00:00:00Z"))
        ]),
        Some("migration-a")
    );
}

#[test]
fn agent_steps() {
    use AgentStep::*;
    let rows = [
        (None, (false, false, false, false), Wait),
        (
            Some(P::WaitingForAgents),
            (false, false, false, false),
            Wait,
        ),
        (
            Some(P::CleaningNodes),
            (false, false, false, false),
            AnnotatePods,
        ),
        (Some(P::CleaningNodes), (true, false, false, false), Clean),
        (Some(P::CleaningNodes), (true, true, false, false), Wait),
        (Some(P::WaitingTargetCni), (true, true, false, false), Wait),
        (
            Some(P::RestartingPods),
            (true, true, false, false),
            RestartPods,
        ),
        (Some(P::RestartingPods), (true, true, true, false), Complete),
        (Some(P::Completed), (true, true, true, true), Wait),
    ];
    for (phase, (a, c, r, done), expected) in rows {
        assert_eq!(
            agent_next(phase, a, c, r, done),
            expected,
            "{phase:?} {a} {c} {r}"
        );
    }
}
