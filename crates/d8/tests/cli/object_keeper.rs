//! `d8 controller` runs the ObjectKeeper controller: on `d8 apiserver`, with kubectl, a
//! ConfigMap owned by a keeper lives while the keeper's target lives and goes after, for every
//! mode; a TTL survives a controller restart; a target replaced under the same name (new UID)
//! counts as gone.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use testkit::process::{Service, free_port};

use crate::{Apiserver, kubectl, kubectl_ok};

fn controller(admin: &Path, dir: &Path, log: &str) -> Service {
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(admin)
        .args(["--identity", "test-controller", "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .args(["--object-keeper-recheck", "1s"]);
    Service::spawn("d8 controller", command, dir.join(log)).unwrap()
}

fn apply(admin: &Path, dir: &Path, name: &str, yaml: &str) {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    kubectl_ok(admin, &["apply", "-f", path.to_str().unwrap()]);
}

fn exists(admin: &Path, args: &[&str]) -> bool {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    kubectl(admin, &full).0
}

fn uid(admin: &Path, args: &[&str]) -> String {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", "jsonpath={.metadata.uid}"]);
    kubectl_ok(admin, &full)
}

/// A keeper and a ConfigMap it keeps (owned by it).
fn keeper(admin: &Path, dir: &Path, name: &str, spec: &str) {
    apply(
        admin,
        dir,
        &format!("{name}.yaml"),
        &format!(
            "apiVersion: deckhouse.io/v1alpha1\nkind: ObjectKeeper\nmetadata:\n  name: {name}\nspec:\n{spec}"
        ),
    );
    let owner = uid(admin, &["objectkeeper", name]);
    apply(
        admin,
        dir,
        &format!("{name}-kept.yaml"),
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept-by-{name}\n  namespace: default\n  ownerReferences:\n  - apiVersion: deckhouse.io/v1alpha1\n    kind: ObjectKeeper\n    name: {name}\n    uid: {owner}\ndata:\n  x: y\n"
        ),
    );
}

fn target(admin: &Path, dir: &Path, name: &str) -> String {
    apply(
        admin,
        dir,
        &format!("target-{name}.yaml"),
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n"
        ),
    );
    uid(admin, &["configmap", "-n", "default", name])
}

fn follow(name: &str, uid: &str) -> String {
    format!(
        "  followObjectRef:\n    apiVersion: v1\n    kind: ConfigMap\n    namespace: default\n    name: {name}\n    uid: {uid}\n"
    )
}

async fn eventually(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < timeout, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn status(admin: &Path, name: &str) -> String {
    kubectl(
        admin,
        &[
            "get",
            "objectkeeper",
            name,
            "-o",
            "jsonpath={.status.phase}: {.status.message}",
        ],
    )
    .1
}

#[tokio::test]
async fn object_keepers_keep_what_they_own_while_their_target_lives() {
    testkit::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let requests = dir.path().join("requests.jsonl");
    // The controller runs as ServiceAccount deckhouse with the chart's roles.
    let (apiserver, deckhouse) = crate::rbac::deckhouse_apiserver(&[], &requests).await;
    let admin = apiserver.admin();
    let _controller = controller(&deckhouse, dir.path(), "controller.log");
    let long = Duration::from_secs(60);

    // FollowObject: kept while the target lives, gone with it.
    let t1 = target(&admin, dir.path(), "t1");
    keeper(
        &admin,
        dir.path(),
        "follow",
        &format!("  mode: FollowObject\n{}", follow("t1", &t1)),
    );
    eventually("Tracking", long, || {
        status(&admin, "follow") == "Tracking: Following object v1/ConfigMap/t1"
    })
    .await;
    assert!(exists(
        &admin,
        &["configmap", "-n", "default", "kept-by-follow"]
    ));
    kubectl_ok(&admin, &["delete", "configmap", "-n", "default", "t1"]);
    eventually("keeper and kept object gone", long, || {
        !exists(&admin, &["objectkeeper", "follow"])
            && !exists(&admin, &["configmap", "-n", "default", "kept-by-follow"])
    })
    .await;

    // A target replaced under the same name (new UID) is a different object.
    let t2 = target(&admin, dir.path(), "t2");
    keeper(
        &admin,
        dir.path(),
        "replaced",
        &format!("  mode: FollowObject\n{}", follow("t2", &t2)),
    );
    eventually("Tracking", long, || {
        status(&admin, "replaced").starts_with("Tracking")
    })
    .await;
    kubectl_ok(&admin, &["delete", "configmap", "-n", "default", "t2"]);
    let t2b = target(&admin, dir.path(), "t2");
    assert_ne!(t2, t2b);
    eventually("keeper of a replaced target gone", long, || {
        !exists(&admin, &["configmap", "-n", "default", "kept-by-replaced"])
    })
    .await;

    // FollowObjectWithTTL: kept while the target lives, then for the TTL, then gone.
    let t3 = target(&admin, dir.path(), "t3");
    keeper(
        &admin,
        dir.path(),
        "linger",
        &format!(
            "  mode: FollowObjectWithTTL\n  ttl: 4s\n{}",
            follow("t3", &t3)
        ),
    );
    eventually("Tracking", long, || {
        status(&admin, "linger").starts_with("Tracking")
    })
    .await;
    kubectl_ok(&admin, &["delete", "configmap", "-n", "default", "t3"]);
    eventually("Expiring", long, || {
        status(&admin, "linger").starts_with("Expiring: TTL expires at ")
    })
    .await;
    let lost_at = kubectl_ok(
        &admin,
        &[
            "get",
            "objectkeeper",
            "linger",
            "-o",
            "jsonpath={.status.lostAt}",
        ],
    );
    assert!(!lost_at.is_empty());
    assert!(
        exists(&admin, &["configmap", "-n", "default", "kept-by-linger"]),
        "kept during the TTL"
    );
    eventually("kept object gone after the TTL", long, || {
        !exists(&admin, &["configmap", "-n", "default", "kept-by-linger"])
    })
    .await;
    crate::rbac::assert_deckhouse_calls("object_keeper", &requests).await;
}

#[tokio::test]
async fn a_ttl_survives_a_controller_restart() {
    testkit::install_crypto();
    let apiserver = Apiserver::start(&[]).await;
    let admin = apiserver.admin();
    let dir = tempfile::tempdir().unwrap();
    let mut first = controller(&admin, dir.path(), "first.log");
    // The keeper's creation (truncated to the second) is no earlier than a second before this.
    let before = Instant::now();
    keeper(&admin, dir.path(), "ttl", "  mode: TTL\n  ttl: 8s\n");
    eventually("Expiring", Duration::from_secs(60), || {
        status(&admin, "ttl").starts_with("Expiring: TTL expires at ")
    })
    .await;
    let message = status(&admin, "ttl");
    first.kill();
    let kept = exists(&admin, &["configmap", "-n", "default", "kept-by-ttl"]);
    if before.elapsed() < Duration::from_secs(6) {
        assert!(kept, "gone before its TTL ({message})");
    }
    // Down past the TTL. A controller that counted from its own start would keep the keeper
    // another 8s after the restart; one that counts from the recorded creation deletes it at once.
    tokio::time::sleep_until((before + Duration::from_secs(12)).into()).await;
    let restarted = Instant::now();
    let _second = controller(&admin, dir.path(), "second.log");
    eventually(
        "gone once the restarted controller looks",
        Duration::from_secs(60),
        || !exists(&admin, &["configmap", "-n", "default", "kept-by-ttl"]),
    )
    .await;
    let after_restart = restarted.elapsed();
    assert!(
        after_restart < Duration::from_secs(8),
        "counted from the restart: gone {after_restart:?} after it ({message})"
    );
}
