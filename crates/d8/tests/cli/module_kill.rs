//! `d8 controller` killed with SIGKILL while it applies a module's new revision: a second
//! controller (another identity, leading once the Lease expires) finishes the run. Nothing is
//! left half-applied or orphaned: the objects present are exactly those of the deployed
//! release, which `helm` (the oracle) reads from the release Secrets.

use std::path::Path;
use std::process::Command;

use testkit::process::{Service, free_port, require_tool};

use crate::Stage;
use crate::module::{REPO, apply, get, publish_chart, until};

/// ConfigMaps the chart renders: enough that applying them takes a while.
const OBJECTS: usize = 300;

const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: d8-echo\n";
/// `OBJECTS` ConfigMaps named `<message>-<i>`: a settings change renames every one of them.
fn many() -> String {
    format!(
        "{{{{- range $i := until {OBJECTS} }}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ $.Values.echo.message }}}}-{{{{ $i }}}}\ndata:\n  index: {{{{ $i | quote }}}}\n{{{{- end }}}}\n"
    )
}

fn controller(admin: &Path, dir: &Path, identity: &str) -> Service {
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(admin)
        .args(["--identity", identity, "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--module-source-interval=2s")
        .arg("--downloaded-modules-dir")
        .arg(dir.join("downloaded"));
    Service::spawn(
        &format!("d8 controller {identity}"),
        command,
        dir.join(format!("{identity}.log")),
    )
    .unwrap()
}

/// The module's ConfigMaps, by name.
fn config_maps(admin: &Path) -> Vec<String> {
    let out = get(
        admin,
        &[
            "get",
            "configmaps",
            "-n",
            "d8-echo",
            "-l",
            "app.kubernetes.io/managed-by=Helm",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    )
    .unwrap_or_default();
    let mut names: Vec<String> = out.split_whitespace().map(str::to_owned).collect();
    names.sort();
    names
}

/// `<revision> <status>` of every release Secret of `echo`, in revision order.
fn releases(admin: &Path) -> Vec<(i64, String)> {
    let out = get(
        admin,
        &[
            "get",
            "secrets",
            "-n",
            "d8-system",
            "-l",
            "owner=helm,name=echo",
            "-o",
            "jsonpath={range .items[*]}{.metadata.labels.version} {.metadata.labels.status}{\"\\n\"}{end}",
        ],
    )
    .unwrap_or_default();
    let mut found: Vec<(i64, String)> = out
        .lines()
        .filter_map(|l| {
            let (v, s) = l.split_once(' ')?;
            Some((v.parse().ok()?, s.to_owned()))
        })
        .collect();
    found.sort();
    found
}

fn names(prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = (0..OBJECTS).map(|i| format!("{prefix}-{i}")).collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_controller_killed_mid_apply_leaves_nothing_half_applied_for_the_next_leader() {
    let stage = Stage::start().await;
    let Stage {
        admin,
        upstream,
        push,
        dir,
        layout,
        ..
    } = &stage;
    publish_chart(
        push,
        layout,
        "v1.0.0",
        &[("ns.yaml", NAMESPACE), ("many.yaml", &many())],
    )
    .await;
    let mut first = controller(admin, dir.path(), "first");
    let source = format!(
        "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleSource\nmetadata:\n  name: example\nspec:\n  registry:\n    scheme: HTTP\n    repo: {}/{REPO}\n",
        upstream.host()
    );
    apply(admin, dir.path(), "source.yaml", &source);
    let config = |message: &str| {
        format!(
            "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: echo\nspec:\n  enabled: true\n  version: 1\n  settings:\n    message: {message}\n"
        )
    };
    apply(admin, dir.path(), "config.yaml", &config("a"));
    until("release 1 is deployed", || {
        releases(admin) == [(1, "deployed".to_owned())]
    })
    .await;
    assert_eq!(config_maps(admin), names("a"));

    // Every ConfigMap is renamed; the controller dies while it applies revision 2.
    apply(admin, dir.path(), "config.yaml", &config("b"));
    until("revision 2 is being applied", || {
        releases(admin).contains(&(2, "pending-upgrade".to_owned()))
    })
    .await;
    first.kill();
    let at_kill = config_maps(admin);
    let b_at_kill = at_kill.iter().filter(|n| n.starts_with("b-")).count();
    assert!(
        b_at_kill < OBJECTS || at_kill.iter().any(|n| n.starts_with("a-")),
        "the kill landed after the apply ({b_at_kill} of {OBJECTS} applied, nothing left to delete)"
    );
    eprintln!("killed with {b_at_kill} of {OBJECTS} new objects applied");

    // The next leader (after the Lease expires) finishes: exactly revision 3's objects.
    let _second = controller(admin, dir.path(), "second");
    until("the next leader deploys the release", || {
        releases(admin).iter().any(|(_, s)| s == "deployed")
            && !releases(admin)
                .iter()
                .any(|(_, s)| s.starts_with("pending"))
    })
    .await;
    assert_eq!(
        releases(admin),
        [
            (1, "superseded".to_owned()),
            (2, "failed".to_owned()),
            (3, "deployed".to_owned()),
        ]
    );
    assert_eq!(config_maps(admin), names("b"));
    // helm reads the same from the release Secrets: revision 3 deployed, its manifest holds
    // exactly the objects present.
    let helm = |args: &[&str]| {
        let out = Command::new(require_tool("helm", "helm"))
            .arg("--kubeconfig")
            .arg(admin)
            .args(["-n", "d8-system"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let status = helm(&["status", "echo", "-o", "json"]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["version"], 3);
    assert_eq!(status["info"]["status"], "deployed");
    let manifest = helm(&["get", "manifest", "echo"]);
    let mut in_manifest: Vec<String> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("  name: "))
        .filter(|n| *n != "d8-echo")
        .map(str::to_owned)
        .collect();
    in_manifest.sort();
    assert_eq!(in_manifest, names("b"));
}
