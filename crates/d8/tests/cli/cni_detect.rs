//! The CNI migration's two detections end to end on `d8 apiserver` with kubectl:
//!
//! - `d8 controller` does the job of Deckhouse's `detect-cni-migration` hook: while a
//!   CNIMigration exists, the chart's `cni-migration-manager` Deployment and
//!   `cni-migration-agent` DaemonSet exist (with the `deckhouse` Deployment's image and pull
//!   secrets), and they go once it is deleted;
//! - with no CNI module enabled, the manager takes the current CNI from the nodes' CNI
//!   configuration directories as their agents report them, and says
//!   `CurrentCNIDetectionFailed` when the nodes hold no known CNI.

use std::path::Path;
use std::process::Command;

use testkit::process::{Service, free_port};

use crate::cni_migration::{agent, apply, d8, eventually, get, manager, node_dirs, phase};
use crate::{Apiserver, kubectl, kubectl_ok};

const IMAGE: &str = "registry.example.com/deckhouse/d8@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn controller(admin: &Path, dir: &Path) -> Service {
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(admin)
        .args(["--identity", "test-controller", "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .args(["--cni-migration-interval", "200ms"]);
    Service::spawn("d8 controller", command, dir.join("controller.log")).unwrap()
}

fn exists(admin: &Path, args: &[&str]) -> bool {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    kubectl(admin, &full).0
}

#[tokio::test]
async fn the_migration_manager_and_agents_exist_while_a_cni_migration_does() {
    testkit::install_crypto();
    let requests_dir = tempfile::tempdir().unwrap();
    let requests = requests_dir.path().join("requests.jsonl");
    let (apiserver, deckhouse) = crate::rbac::deckhouse_apiserver(&[], &requests).await;
    let admin = apiserver.admin();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let _ = kubectl(&admin, &["create", "namespace", "d8-system"]);
    // The platform's own Deployment, as the chart installs it: its image is the migration's.
    apply(
        &admin,
        d,
        "deckhouse.yaml",
        &format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: deckhouse\n  namespace: d8-system\nspec:\n  selector:\n    matchLabels: {{app: deckhouse}}\n  template:\n    metadata:\n      labels: {{app: deckhouse}}\n    spec:\n      imagePullSecrets:\n      - name: deckhouse-registry\n      containers:\n      - name: deckhouse\n        image: {IMAGE}\n"
        ),
    );
    apply(
        &admin,
        d,
        "mc-flannel.yaml",
        "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: cni-flannel\nspec:\n  enabled: true\n  version: 1\n",
    );
    let _controller = controller(&deckhouse, d);
    let manager_exists = |admin: &Path| {
        exists(
            admin,
            &["deployment", "cni-migration-manager", "-n", "d8-system"],
        )
    };
    let agent_exists = |admin: &Path| {
        exists(
            admin,
            &["daemonset", "cni-migration-agent", "-n", "d8-system"],
        )
    };
    // The controller is running (it leads and looks every 200 ms), and nothing is there.
    eventually("the controller leads", || {
        !get(
            &admin,
            &["lease", "deckhouse-leader-election", "-n", "d8-system"],
            "{.spec.holderIdentity}",
        )
        .is_empty()
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(!manager_exists(&admin) && !agent_exists(&admin));

    let (ok, out, err) = d8(&admin, &["switch", "--to-cni", "cilium"]);
    assert!(ok, "{out}{err}");
    eventually("the manager and the agents appear", || {
        manager_exists(&admin) && agent_exists(&admin)
    })
    .await;
    for kind in [
        "deployment/cni-migration-manager",
        "daemonset/cni-migration-agent",
    ] {
        let (kind, name) = kind.split_once('/').unwrap();
        assert_eq!(
            get(
                &admin,
                &[kind, name, "-n", "d8-system"],
                "{.spec.template.spec.containers[0].image}"
            ),
            IMAGE,
            "{kind} runs the platform's image"
        );
        assert_eq!(
            get(
                &admin,
                &[kind, name, "-n", "d8-system"],
                "{.metadata.labels.heritage}"
            ),
            "deckhouse"
        );
    }
    assert_eq!(
        get(
            &admin,
            &["deployment", "cni-migration-manager", "-n", "d8-system"],
            "{.spec.template.spec.imagePullSecrets[0].name}"
        ),
        "deckhouse-registry"
    );
    assert_eq!(
        get(
            &admin,
            &["daemonset", "cni-migration-agent", "-n", "d8-system"],
            "{.spec.template.spec.containers[0].args}"
        ),
        r#"["network","cni-migration","agent"]"#
    );

    kubectl_ok(&admin, &["delete", "cnimigration", "cni-migration"]);
    eventually("the manager and the agents go", || {
        !manager_exists(&admin) && !agent_exists(&admin)
    })
    .await;
    assert!(
        exists(&admin, &["deployment", "deckhouse", "-n", "d8-system"]),
        "the platform's own Deployment stays"
    );
    crate::rbac::assert_deckhouse_calls("cni_detect", &requests).await;
}

const LOOPBACK: &str = r#"{"cniVersion":"0.3.1","name":"lo","type":"loopback"}"#;
const FLANNEL: &str = r#"{"name":"cbr0","cniVersion":"0.3.1","plugins":[{"type":"flannel","delegate":{"hairpinMode":true,"isDefaultGateway":true}},{"type":"portmap","capabilities":{"portMappings":true}}]}"#;

#[tokio::test]
async fn with_no_cni_module_enabled_the_nodes_configuration_tells_the_current_cni() {
    testkit::install_crypto();
    let apiserver = Apiserver::start(&[]).await;
    let admin = apiserver.admin();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nodes = ["n1", "n2"];
    for node in nodes {
        apply(
            &admin,
            d,
            &format!("node-{node}.yaml"),
            &format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {node}\n"),
        );
    }
    // No CNI ModuleConfig at all; the nodes' CNI directories hold no CNI's configuration.
    let dirs: Vec<_> = nodes.iter().map(|n| node_dirs(d, n)).collect();
    for dirs in &dirs {
        std::fs::remove_file(dirs.conf.join("10-flannel.conflist")).unwrap();
        std::fs::write(dirs.conf.join("99-loopback.conf"), LOOPBACK).unwrap();
    }
    let _manager = manager(&admin, d, "manager.log");
    let mut agents: Vec<Service> = nodes
        .iter()
        .zip(&dirs)
        .map(|(n, dirs)| agent(&admin, d, n, dirs))
        .collect();
    let (ok, out, err) = d8(&admin, &["switch", "--to-cni", "cilium"]);
    assert!(ok, "{out}{err}");
    let failed = |admin: &Path| {
        get(
            admin,
            &["cnimigration", "cni-migration"],
            "{.status.conditions[?(@.type==\"CurrentCNIDetectionFailed\")].message}",
        )
    };
    eventually("CurrentCNIDetectionFailed", || !failed(&admin).is_empty()).await;
    assert_eq!(
        failed(&admin),
        "no enabled CNI module found and no node runs a known CNI (n1: no CNI configuration; n2: no CNI configuration)"
    );
    assert_eq!(
        get(
            &admin,
            &["cnimigration", "cni-migration"],
            "{.status.conditions[?(@.type==\"CurrentCNIDetectionFailed\")].reason}"
        ),
        "CNIDetectionError"
    );
    assert_eq!(phase(&admin), "Preparing", "nothing done");
    assert_eq!(
        get(
            &admin,
            &["cninodemigration", "n1"],
            "{.metadata.annotations}"
        ),
        r#"{"cni-migration.network.deckhouse.io/detected-cni":"none"}"#
    );

    // The operator starts over on nodes running flannel: the migration takes it from them.
    for agent in &mut agents {
        agent.kill();
    }
    kubectl_ok(&admin, &["delete", "cnimigration", "cni-migration"]);
    eventually("the nodes' records go with the migration", || {
        get(&admin, &["cninodemigrations"], "{.items[*].metadata.name}").is_empty()
    })
    .await;
    for dirs in &dirs {
        std::fs::write(dirs.conf.join("10-flannel.conflist"), FLANNEL).unwrap();
    }
    let _agents: Vec<Service> = nodes
        .iter()
        .zip(&dirs)
        .map(|(n, dirs)| agent(&admin, d, n, dirs))
        .collect();
    let (ok, out, err) = d8(&admin, &["switch", "--to-cni", "cilium"]);
    assert!(ok, "{out}{err}");
    eventually("the current CNI detected", || {
        get(
            &admin,
            &["cnimigration", "cni-migration"],
            "{.status.currentCNI}",
        ) == "flannel"
    })
    .await;
    assert_eq!(
        get(
            &admin,
            &["cnimigration", "cni-migration"],
            "{.status.conditions[?(@.type==\"EnvironmentPrepared\")].message}"
        ),
        "Switching from flannel to cilium."
    );
    // And the migration goes on from there: the target module is switched on.
    eventually("cni-cilium enabled", || {
        get(&admin, &["moduleconfig", "cni-cilium"], "{.spec.enabled}") == "true"
    })
    .await;
}
