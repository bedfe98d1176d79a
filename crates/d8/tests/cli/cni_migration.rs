//! `d8 network cni-migration` end to end on `d8 apiserver` with kubectl: three nodes with pods
//! (status set as a kubelet would), the manager and one agent per node (each cleaning a temp
//! CNI config directory through a fake `ip`). `switch` → every phase in order → `Completed`:
//! the old CNI's files and links gone, the pod-network pods restarted, host-network pods, the
//! CNI's own DaemonSet pods and finished pods left alone. The manager is killed with SIGKILL
//! mid-migration and resumes at the recorded phase without switching a ModuleConfig again; a
//! node deleted mid-migration is reported in `failedSummary` and not waited for.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use testkit::process::{Service, require_tool};

use crate::{Apiserver, kubectl, kubectl_ok};

const PHASES: [&str; 8] = [
    "Preparing",
    "WaitingForAgents",
    "EnablingTargetCNI",
    "DisablingCurrentCNI",
    "CleaningNodes",
    "WaitingTargetCNI",
    "RestartingPods",
    "Completed",
];

pub(crate) fn d8(admin: &Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_d8"))
        .args(["network", "cni-migration", "--kubeconfig"])
        .arg(admin)
        .args(args)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

pub(crate) fn manager(admin: &Path, dir: &Path, log: &str) -> Service {
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .args(["network", "cni-migration", "manager", "--interval", "100ms"])
        .arg("--kubeconfig")
        .arg(admin);
    Service::spawn("cni-migration manager", command, dir.join(log)).unwrap()
}

/// A node's CNI config directory, its links (one file per link) and a fake `ip` over them.
pub(crate) struct NodeDirs {
    pub(crate) conf: PathBuf,
    links: PathBuf,
    ip: PathBuf,
}

pub(crate) fn node_dirs(dir: &Path, node: &str) -> NodeDirs {
    let root = dir.join(node);
    let conf = root.join("net.d");
    let links = root.join("links");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::create_dir_all(&links).unwrap();
    std::fs::write(conf.join("10-flannel.conflist"), "{\"name\":\"cbr0\"}").unwrap();
    std::fs::write(conf.join("99-loopback.conf"), "{}").unwrap();
    for link in ["flannel.1", "cni0"] {
        std::fs::write(links.join(link), "").unwrap();
    }
    let ip = root.join("ip");
    std::fs::write(
        &ip,
        format!(
            "#!/bin/sh\n[ \"$1 $2\" = \"link delete\" ] || exit 2\n[ -e {l}/$3 ] || {{ echo \"Cannot find device \\\"$3\\\"\" >&2; exit 1; }}\nrm {l}/$3\n",
            l = links.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&ip, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    NodeDirs { conf, links, ip }
}

pub(crate) fn agent(admin: &Path, dir: &Path, node: &str, dirs: &NodeDirs) -> Service {
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .args(["network", "cni-migration", "agent", "--interval", "100ms"])
        .arg("--kubeconfig")
        .arg(admin)
        .args(["--node", node])
        .arg("--cni-conf-dir")
        .arg(&dirs.conf)
        .arg("--ip-command")
        .arg(&dirs.ip);
    Service::spawn(
        &format!("agent {node}"),
        command,
        dir.join(format!("agent-{node}.log")),
    )
    .unwrap()
}

pub(crate) fn apply(admin: &Path, dir: &Path, name: &str, yaml: &str) {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    kubectl_ok(admin, &["apply", "-f", path.to_str().unwrap()]);
}

pub(crate) fn get(admin: &Path, args: &[&str], jsonpath: &str) -> String {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    let output = format!("jsonpath={jsonpath}");
    full.extend_from_slice(&["-o", &output]);
    kubectl(admin, &full).1
}

/// A pod on `node`, running as a kubelet reports it (or in `phase`).
fn pod(admin: &Path, dir: &Path, ns: &str, name: &str, node: &str, extra: &str, phase: &str) {
    apply(
        admin,
        dir,
        &format!("pod-{ns}-{name}.yaml"),
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n{extra}spec:\n  nodeName: {node}\n  containers:\n  - name: c\n    image: registry.example/app:1\n"
        ),
    );
    let status = format!("{{\"status\":{{\"phase\":\"{phase}\"}}}}");
    kubectl_ok(
        admin,
        &[
            "patch",
            "pod",
            name,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ],
    );
}

fn host_network_pod(admin: &Path, dir: &Path, name: &str, node: &str) {
    apply(
        admin,
        dir,
        &format!("pod-host-{name}.yaml"),
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: app\nspec:\n  nodeName: {node}\n  hostNetwork: true\n  containers:\n  - name: c\n    image: registry.example/app:1\n"
        ),
    );
    kubectl_ok(
        admin,
        &[
            "patch",
            "pod",
            name,
            "-n",
            "app",
            "--subresource=status",
            "--type=merge",
            "-p",
            "{\"status\":{\"phase\":\"Running\"}}",
        ],
    );
}

/// Gone, or deleted and waiting for its kubelet.
fn restarted(admin: &Path, ns: &str, name: &str) -> bool {
    let (exists, out, _) = kubectl(
        admin,
        &[
            "get",
            "pod",
            name,
            "-n",
            ns,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ],
    );
    !exists || !out.is_empty()
}

pub(crate) async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) fn phase(admin: &Path) -> String {
    get(admin, &["cnimigration", "cni-migration"], "{.status.phase}")
}

#[tokio::test]
async fn switching_the_cni_runs_every_phase_and_survives_a_killed_manager() {
    testkit::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let requests = d.join("requests.jsonl");
    let apiserver = Apiserver::start_with(&crate::rbac::apiserver_flags(
        &["cni-migration-manager", "cni-migration-agent"],
        &requests,
    ))
    .await;
    let admin = apiserver.admin();
    // The manager and the agents run as their ServiceAccounts with the chart's roles.
    crate::rbac::apply_chart_rbac(&admin);
    let manager_sa = apiserver.kubeconfig("system-serviceaccount-d8-system-cni-migration-manager");
    let agent_sa = apiserver.kubeconfig("system-serviceaccount-d8-system-cni-migration-agent");

    for ns in ["app", "d8-cni-cilium"] {
        kubectl_ok(&admin, &["create", "namespace", ns]);
    }
    let nodes = ["n1", "n2", "n3"];
    for node in nodes {
        apply(
            &admin,
            d,
            &format!("node-{node}.yaml"),
            &format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {node}\n"),
        );
    }
    apply(
        &admin,
        d,
        "mc-flannel.yaml",
        "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: cni-flannel\nspec:\n  enabled: true\n  version: 1\n",
    );
    // The target CNI's DaemonSet: scheduled on every node, not ready yet.
    apply(
        &admin,
        d,
        "ds-cilium.yaml",
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\n  namespace: d8-cni-cilium\nspec:\n  selector:\n    matchLabels: {app: agent}\n  template:\n    metadata:\n      labels: {app: agent}\n    spec:\n      containers:\n      - name: cilium\n        image: registry.example/cilium:1\n",
    );
    kubectl_ok(
        &admin,
        &[
            "patch",
            "daemonset",
            "agent",
            "-n",
            "d8-cni-cilium",
            "--subresource=status",
            "--type=merge",
            "-p",
            "{\"status\":{\"desiredNumberScheduled\":3,\"numberReady\":0,\"currentNumberScheduled\":3,\"numberMisscheduled\":0}}",
        ],
    );
    let ds_uid = get(
        &admin,
        &["daemonset", "agent", "-n", "d8-cni-cilium"],
        "{.metadata.uid}",
    );
    for node in nodes {
        pod(
            &admin,
            d,
            "app",
            &format!("web-{node}"),
            node,
            "",
            "Running",
        );
        host_network_pod(&admin, d, &format!("host-{node}"), node);
        pod(
            &admin,
            d,
            "d8-cni-cilium",
            &format!("agent-{node}"),
            node,
            &format!(
                "  ownerReferences:\n  - apiVersion: apps/v1\n    kind: DaemonSet\n    name: agent\n    uid: {ds_uid}\n    controller: true\n"
            ),
            "Running",
        );
    }
    pod(&admin, d, "app", "job-n1", "n1", "", "Succeeded");

    // The operator's refusals, in Deckhouse's words.
    let (ok, _, err) = d8(&admin, &["switch", "--to-cni", "calico"]);
    assert!(!ok && err.contains("invalid --to-cni value \"calico\". Supported values are: cilium, flannel, simple-bridge"), "{err}");
    let (ok, _, err) = d8(&admin, &["switch", "--to-cni", "flannel"]);
    assert!(
        !ok && err.contains("already runs the CNI \"flannel\""),
        "{err}"
    );
    let (ok, out, _) = d8(&admin, &["status"]);
    assert!(
        ok && out.contains("No active CNI migration found."),
        "{out}"
    );

    // Every phase the manager records, as a watcher sees them.
    let mut watch = Command::new(require_tool("kubectl", "kubernetes-client"));
    watch.arg("--kubeconfig").arg(&admin).args([
        "get",
        "cnimigrations",
        "-w",
        "-o",
        "jsonpath={.status.phase}{\"\\n\"}",
    ]);
    let watch = Service::spawn("kubectl watch", watch, d.join("phases.log")).unwrap();

    let (ok, out, err) = d8(&admin, &["switch", "--to-cni", "cilium"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("CNIMigration cni-migration created"), "{out}");
    let (ok, _, err) = d8(&admin, &["switch", "--to-cni", "cilium"]);
    assert!(
        !ok && err.contains("a CNI migration already exists: cni-migration"),
        "{err}"
    );
    // The watcher has seen the new migration (or listed it) before anything acts on it.
    eventually("the watcher sees the migration", || {
        watch.log().contains('\n')
    })
    .await;

    let dirs: Vec<NodeDirs> = nodes.iter().map(|n| node_dirs(d, n)).collect();
    let mut manager1 = manager(&manager_sa, d, "manager-1.log");
    let mut agents: Vec<Option<Service>> = nodes
        .iter()
        .zip(&dirs)
        .map(|(n, dirs)| Some(agent(&agent_sa, d, n, dirs)))
        .collect();

    // Cleaning done everywhere, the target CNI not ready: the manager waits.
    eventually("WaitingTargetCNI", || phase(&admin) == "WaitingTargetCNI").await;
    for dirs in &dirs {
        assert!(!dirs.conf.join("10-flannel.conflist").exists());
        assert!(
            dirs.conf.join("99-loopback.conf").exists(),
            "another CNI's file stays"
        );
        assert_eq!(
            std::fs::read_dir(&dirs.links).unwrap().count(),
            0,
            "links deleted"
        );
    }
    assert_eq!(
        get(&admin, &["moduleconfig", "cni-cilium"], "{.spec.enabled}"),
        "true"
    );
    assert_eq!(
        get(&admin, &["moduleconfig", "cni-flannel"], "{.spec.enabled}"),
        "false"
    );
    assert_eq!(
        get(
            &admin,
            &["pod", "web-n1", "-n", "app"],
            "{.metadata.annotations.effective-cni\\.network\\.deckhouse\\.io}"
        ),
        "flannel"
    );
    let versions = |admin: &Path| {
        (
            get(
                admin,
                &["moduleconfig", "cni-cilium"],
                "{.metadata.resourceVersion}",
            ),
            get(
                admin,
                &["moduleconfig", "cni-flannel"],
                "{.metadata.resourceVersion}",
            ),
        )
    };
    let before = versions(&admin);
    let conditions_before = get(
        &admin,
        &["cnimigration", "cni-migration"],
        "{.status.conditions}",
    );

    // The manager dies; node n3 goes away with its agent.
    manager1.kill();
    agents[2].take().unwrap().kill();
    kubectl_ok(&admin, &["delete", "node", "n3"]);
    let _manager2 = manager(&manager_sa, d, "manager-2.log");
    eventually("n3 reported", || {
        get(
            &admin,
            &["cnimigration", "cni-migration"],
            "{.status.failedSummary[*].node}",
        ) == "n3"
    })
    .await;
    assert_eq!(
        phase(&admin),
        "WaitingTargetCNI",
        "resumed at the recorded phase"
    );

    // The target CNI becomes ready: pods restart, the migration completes without n3.
    kubectl_ok(
        &admin,
        &[
            "patch",
            "daemonset",
            "agent",
            "-n",
            "d8-cni-cilium",
            "--subresource=status",
            "--type=merge",
            "-p",
            "{\"status\":{\"numberReady\":3}}",
        ],
    );
    eventually("Completed", || phase(&admin) == "Completed").await;

    for node in ["n1", "n2"] {
        assert!(
            restarted(&admin, "app", &format!("web-{node}")),
            "web-{node} restarted"
        );
        assert!(
            !restarted(&admin, "app", &format!("host-{node}")),
            "host-network pod left alone"
        );
        assert!(
            !restarted(&admin, "d8-cni-cilium", &format!("agent-{node}")),
            "the CNI's own pod left alone"
        );
        assert_eq!(
            get(&admin, &["cninodemigration", node], "{.status.phase}"),
            "Completed"
        );
    }
    assert!(
        !restarted(&admin, "app", "job-n1"),
        "a finished pod is left alone"
    );
    assert_eq!(
        get(
            &admin,
            &["cnimigration", "cni-migration"],
            "{.status.failedSummary[0].reason}"
        ),
        "the node was deleted during the migration"
    );
    assert_eq!(
        get(
            &admin,
            &["cnimigration", "cni-migration"],
            "{.status.conditions[?(@.type==\"Succeeded\")].status}"
        ),
        "True"
    );
    assert_eq!(
        versions(&admin),
        before,
        "no ModuleConfig switched again after the restart"
    );
    // Every condition recorded before the kill kept its time: nothing was done twice.
    let after = get(
        &admin,
        &["cnimigration", "cni-migration"],
        "{.status.conditions}",
    );
    let first: Vec<serde_json::Value> = serde_json::from_str(&conditions_before).unwrap();
    let last: Vec<serde_json::Value> = serde_json::from_str(&after).unwrap();
    for c in &first {
        assert!(last.contains(c), "condition changed after the restart: {c}");
    }

    let (ok, out, _) = d8(&admin, &["status"]);
    assert!(ok, "{out}");
    assert!(out.contains("Phase:       Completed"), "{out}");
    assert!(
        out.contains("Nodes:       2/3 succeeded, 1 failed"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("n1") && l.contains("Completed")),
        "{out}"
    );
    assert!(
        out.contains("  - n3: the node was deleted during the migration"),
        "{out}"
    );

    let mut seen: Vec<String> = Vec::new();
    for line in watch.log().lines().map(str::trim).filter(|l| !l.is_empty()) {
        if seen.last().map(String::as_str) != Some(line) {
            seen.push(line.to_owned());
        }
    }
    assert_eq!(seen, PHASES, "phases as a watcher saw them");

    // Their calls, verbs included, are exactly what the chart's roles grant them.
    tokio::time::sleep(Duration::from_millis(500)).await; // the log is written every 200 ms
    crate::rbac::assert_role_matches(
        &requests,
        &crate::rbac::service_account("cni-migration-manager"),
        "cni-migration-manager",
        &[],
    );
    crate::rbac::assert_role_matches(
        &requests,
        &crate::rbac::service_account("cni-migration-agent"),
        "cni-migration-agent",
        &[],
    );
}
