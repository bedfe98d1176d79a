//! `d8 release list / approve / apply-now` as an operator runs them, against `d8 apiserver` and a
//! `d8 controller` whose release engine reads a real `docker-registry`: the listing says why the
//! release waits — a requirement, the notification, the update window, the canary delay, manual
//! approval — each time with Deckhouse's status message and the next step; the webhook receiver
//! gets the notification once; `approve` and `apply-now` switch the platform's Deployment; the
//! controller's `/metrics` carries `d8_release_info` with the reason.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use testkit::ImageBuilder;
use testkit::image::Layout;
use testkit::process::{Service, free_port};
use testkit::push::Registry;

use crate::{Stage, kubectl_ok};

const REPO: &str = "deckhouse/ce";

/// Publishes `release-channel:<tag>` holding `version_json`.
async fn publish_channel(push: &Registry, layout: &Layout, tag: &str, version_json: &str) {
    let image = ImageBuilder::new(&format!("channel-{tag}-{}", version_json.len()))
        .files(&[
            ("version.json", version_json.as_bytes()),
            ("changelog.yaml", b"deckhouse: {}\n".as_slice()),
        ])
        .build(layout);
    push.push_image(&format!("{REPO}/release-channel"), Some(tag), &image)
        .await
        .unwrap();
}

/// Publishes a release: its own channel tag and the Deckhouse image `<REPO>:<version>`.
async fn publish_version(push: &Registry, layout: &Layout, version: &str) {
    publish_channel(
        push,
        layout,
        version,
        &format!("{{\"version\":\"{version}\"}}"),
    )
    .await;
    let image = ImageBuilder::new(&format!("deckhouse-{version}"))
        .layer(64)
        .build(layout);
    push.push_image(REPO, Some(version), &image).await.unwrap();
}

fn d8(kubeconfig: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_d8"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "d8 {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The `d8 release list` row of `name`.
fn row(list: &str, name: &str) -> Option<String> {
    list.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .map(str::to_owned)
}

/// Polls `d8 release list` until the row of `name` satisfies `done`; returns that listing.
async fn until_listed(admin: &Path, name: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let list = d8(admin, &["release", "list"]);
        if row(&list, name).is_some_and(|r| done(&r)) {
            return list;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}; last listing:\n{list}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn apply_yaml(admin: &Path, dir: &Path, name: &str, yaml: &str) {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    kubectl_ok(admin, &["apply", "-f", path.to_str().unwrap()]);
}

/// The `deckhouse` ModuleConfig with `settings` (YAML, indented by four spaces).
fn settings(admin: &Path, dir: &Path, settings: &str) {
    let yaml = format!(
        "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: deckhouse\nspec:\n  version: 1\n  settings:\n{settings}"
    );
    // Replace, not merge: a setting left out must go away.
    let path = dir.join("deckhouse-mc.yaml");
    std::fs::write(&path, yaml).unwrap();
    let (ok, _, _) = crate::kubectl(admin, &["get", "moduleconfig", "deckhouse"]);
    if ok {
        kubectl_ok(admin, &["replace", "-f", path.to_str().unwrap()]);
    } else {
        kubectl_ok(admin, &["create", "-f", path.to_str().unwrap()]);
    }
}

/// A real HTTP server recording the notification bodies it receives.
async fn receiver() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let received: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let store = received.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let store = store.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Headers, then Content-Length bytes of body.
                loop {
                    let Ok(n) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + length {
                            let body = &buf[end + 4..end + 4 + length];
                            store
                                .lock()
                                .unwrap()
                                .push(serde_json::from_slice(body).unwrap_or_default());
                            let _ = stream
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                                .await;
                            return;
                        }
                    }
                }
            });
        }
    });
    (format!("http://{addr}/hook"), received)
}

async fn scrape(address: &str) -> String {
    reqwest::get(format!("http://{address}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// A cluster UUID whose canary wave for `version` is not 0 (so the release gets `applyAfter`).
fn uuid_in_a_late_wave(version: &str, waves: u64) -> String {
    (0..)
        .map(|i| format!("6f1c0d3e-2b8a-4c5d-9e7f-{i:012}"))
        .find(|uuid| release_plan::canary::wave(uuid, version, waves) > 0)
        .unwrap()
}

#[tokio::test]
async fn release_list_explains_each_wait_and_approve_and_apply_now_deploy() {
    let requests_dir = tempfile::tempdir().unwrap();
    let requests = requests_dir.path().join("requests.jsonl");
    let stage = Stage::start_with(&crate::rbac::apiserver_flags(&["deckhouse"], &requests)).await;
    let Stage {
        admin,
        upstream,
        push,
        dir,
        layout,
        ..
    } = &stage;
    let host = upstream.host();
    crate::rbac::apply_chart_rbac(admin);
    let deckhouse = stage
        .apiserver
        .kubeconfig("system-serviceaccount-d8-system-deckhouse");

    for version in ["v1.66.0", "v1.67.0", "v1.68.0"] {
        publish_version(push, layout, version).await;
    }
    // The channel moves to 1.67.0, which needs Kubernetes 1.30, in 5 canary waves an hour apart.
    publish_channel(
        push,
        layout,
        "stable",
        r#"{"version":"v1.67.0","requirements":{"k8s":"1.30"},"canary":{"stable":{"enabled":true,"waves":5,"interval":"1h"}}}"#,
    )
    .await;
    // Deckhouse 1.66.0 runs.
    apply_yaml(
        admin,
        dir.path(),
        "deployment.yaml",
        &format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: deckhouse\n  namespace: d8-system\nspec:\n  selector:\n    matchLabels: {{app: deckhouse}}\n  template:\n    metadata:\n      labels: {{app: deckhouse}}\n    spec:\n      containers:\n      - name: deckhouse\n        image: {host}/{REPO}:v1.66.0\n"
        ),
    );
    settings(
        admin,
        dir.path(),
        "    releaseChannel: Stable\n    update:\n      mode: Manual\n",
    );

    let metrics_address = format!("127.0.0.1:{}", free_port());
    let uuid = uuid_in_a_late_wave("v1.67.0", 5);
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&deckhouse)
        .args(["--identity", "release-test"])
        .arg(format!("--metrics-address={metrics_address}"))
        .arg("--downloaded-modules-dir")
        .arg(dir.path().join("downloaded"))
        .args([
            "--registry",
            &host,
            "--repository",
            REPO,
            "--registry-plain-http",
        ])
        .args([
            "--embedded",
            "--cluster-uuid",
            &uuid,
            "--kubernetes-version",
            "1.29.3",
        ]);
    let _controller =
        Service::spawn("d8 controller", command, dir.path().join("controller.log")).unwrap();

    // 1. A requirement: the release waits with Deckhouse's message; the canary wave set its
    //    applyAfter; the operator is told how to override.
    let list = until_listed(admin, "v1.67.0", "v1.67.0 waits for its requirement", |r| {
        r.contains("requirement for DeckhouseRelease")
    })
    .await;
    let waiting = row(&list, "v1.67.0").unwrap();
    assert!(
        waiting.contains("\"k8s\" requirement for DeckhouseRelease \"1.67.0\" not met: current kubernetes version is lower than required → fix the cluster, or force: kubectl annotate DeckhouseRelease v1.67.0 release.deckhouse.io/force=true"),
        "{list}"
    );
    assert!(
        list.starts_with(
            "Running version: v1.66.0\nRelease channel: Stable\nUpdate mode: Manual\n"
        ),
        "{list}"
    );
    let restored = row(&list, "v1.66.0").unwrap();
    assert!(
        restored.contains("Deployed") && restored.contains("Release object was restored"),
        "{list}"
    );
    let canary_after = kubectl_ok(
        admin,
        &[
            "get",
            "deckhouserelease",
            "v1.67.0",
            "-o",
            "jsonpath={.spec.applyAfter}",
        ],
    );
    assert!(
        !canary_after.is_empty(),
        "the canary wave sets applyAfter:\n{list}"
    );
    let metrics = scrape(&metrics_address).await;
    assert!(
        metrics.contains("d8_release_info{name=\"v1.67.0\",manualApproval=\"false\",disruptionApproval=\"false\",requirementsNotMet=\"true\""),
        "{metrics}"
    );

    // 2. Auto mode with a notification webhook and a minimal notification time, then the
    //    requirement is dropped: the receiver gets the documented body once, and the release is
    //    postponed until the notification time has passed.
    let (webhook, received) = receiver().await;
    settings(
        admin,
        dir.path(),
        &format!(
            "    releaseChannel: Stable\n    update:\n      mode: Auto\n      notification:\n        webhook: {webhook}\n        minimalNotificationTime: 3h\n"
        ),
    );
    // Only now: a release that waited for anything but its requirements counts as notified.
    kubectl_ok(
        admin,
        &[
            "patch",
            "deckhouserelease",
            "v1.67.0",
            "--type=merge",
            "-p",
            r#"{"spec":{"requirements":null}}"#,
        ],
    );
    let list = until_listed(
        admin,
        "v1.67.0",
        "v1.67.0 is postponed after notifying",
        |r| r.contains("Release is postponed"),
    )
    .await;
    assert!(
        row(&list, "v1.67.0")
            .unwrap()
            .contains("→ skip the wait: d8 release apply-now v1.67.0"),
        "{list}"
    );
    let bodies = received.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1, "notified once: {bodies:?}");
    assert_eq!(bodies[0]["subject"], "Deckhouse");
    assert_eq!(bodies[0]["version"], "1.67.0");
    assert!(
        bodies[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("New Deckhouse Release 1.67.0 is available. Release will be applied at: "),
        "{bodies:?}"
    );

    // 3. A window that opens only the day after tomorrow: the release waits for it. (Not
    // tomorrow: the notification delay above ends up to a few hours from now, and after 21:00
    // UTC that is past tomorrow's 00:00, so the delay would be the later wait and the reason.)
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400;
    // 1970-01-01 was a Thursday.
    let window_day =
        ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][((days + 2 + 4) % 7) as usize];
    settings(
        admin,
        dir.path(),
        &format!(
            "    releaseChannel: Stable\n    update:\n      mode: Auto\n      windows:\n      - from: \"00:00\"\n        to: \"23:59\"\n        days: [{window_day}]\n"
        ),
    );
    until_listed(admin, "v1.67.0", "v1.67.0 waits for the window", |r| {
        r.contains("waiting for the update window until")
            && r.contains("d8 release apply-now v1.67.0")
    })
    .await;

    // 4. No window: only the delay recorded in applyAfter is left.
    settings(
        admin,
        dir.path(),
        "    releaseChannel: Stable\n    update:\n      mode: Auto\n",
    );
    until_listed(
        admin,
        "v1.67.0",
        "v1.67.0 is postponed until applyAfter",
        |r| r.contains("Release is postponed until") && !r.contains("window"),
    )
    .await;

    // 5. Manual mode: the release waits for approval; d8 release approve applies it.
    settings(
        admin,
        dir.path(),
        "    releaseChannel: Stable\n    update:\n      mode: Manual\n",
    );
    until_listed(admin, "v1.67.0", "v1.67.0 waits for approval", |r| {
        r.contains(
            "Release is waiting for the 'release.deckhouse.io/approved: \"true\"' annotation",
        ) && r.contains("→ approve: d8 release approve v1.67.0")
    })
    .await;
    let metrics = scrape(&metrics_address).await;
    assert!(
        metrics.contains("d8_release_info{name=\"v1.67.0\",manualApproval=\"true\""),
        "{metrics}"
    );
    let out = d8(admin, &["release", "approve", "v1.67.0"]);
    assert_eq!(out, "deckhouserelease.deckhouse.io/v1.67.0 approved\n");
    let list = until_listed(admin, "v1.67.0", "v1.67.0 is deployed", |r| {
        r.contains("Deployed")
    })
    .await;
    assert!(list.starts_with("Running version: v1.67.0\n"), "{list}");
    assert_eq!(
        kubectl_ok(
            admin,
            &[
                "get",
                "deployment",
                "-n",
                "d8-system",
                "deckhouse",
                "-o",
                "jsonpath={.spec.template.spec.containers[0].image}"
            ],
        ),
        format!("{host}/{REPO}:v1.67.0")
    );
    assert_eq!(received.lock().unwrap().len(), 1, "no second notification");

    // 6. The channel moves on; in Manual mode apply-now skips the approval.
    publish_channel(push, layout, "stable", r#"{"version":"v1.68.0"}"#).await;
    // A settings change makes the engine read the channel at once.
    settings(
        admin,
        dir.path(),
        "    releaseChannel: Stable\n    update:\n      mode: Manual\n      disruptionApprovalMode: Auto\n",
    );
    until_listed(admin, "v1.68.0", "v1.68.0 waits for approval", |r| {
        r.contains("release.deckhouse.io/approved")
    })
    .await;
    let out = d8(admin, &["release", "apply-now", "v1.68.0"]);
    assert_eq!(
        out,
        "deckhouserelease.deckhouse.io/v1.68.0 will be applied at the next reconcile\n"
    );
    let list = until_listed(admin, "v1.68.0", "v1.68.0 is deployed", |r| {
        r.contains("Deployed")
    })
    .await;
    assert!(list.starts_with("Running version: v1.68.0\n"), "{list}");
    let superseded = row(&list, "v1.67.0").unwrap();
    assert!(superseded.contains("Superseded"), "{list}");
    crate::rbac::assert_deckhouse_calls("release", &requests).await;
}

/// Starts `d8 controller` for the release engine with its clock started at `clock_start`.
fn controller_at(stage: &Stage, clock_start: &str, log: &str) -> Service {
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&stage.admin)
        .args(["--identity", "clock-test"])
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .args([
            "--registry",
            &stage.upstream.host(),
            "--repository",
            REPO,
            "--registry-plain-http",
            "--embedded",
            "--kubernetes-version",
            "1.31.0",
        ])
        .env("D8_CLOCK_START", clock_start);
    Service::spawn("d8 controller", command, stage.dir.path().join(log)).unwrap()
}

#[tokio::test]
async fn the_controller_clock_starts_where_told_so_an_update_window_opens_on_cue() {
    let stage = Stage::start().await;
    let Stage {
        admin,
        upstream,
        push,
        dir,
        layout,
        ..
    } = &stage;
    let host = upstream.host();
    for version in ["v1.66.0", "v1.67.0"] {
        publish_version(push, layout, version).await;
    }
    publish_channel(push, layout, "stable", r#"{"version":"v1.67.0"}"#).await;
    apply_yaml(
        admin,
        dir.path(),
        "deployment.yaml",
        &format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: deckhouse\n  namespace: d8-system\nspec:\n  selector:\n    matchLabels: {{app: deckhouse}}\n  template:\n    metadata:\n      labels: {{app: deckhouse}}\n    spec:\n      containers:\n      - name: deckhouse\n        image: {host}/{REPO}:v1.66.0\n"
        ),
    );
    // Updates only on Mondays between 09:00 and 10:00 UTC.
    settings(
        admin,
        dir.path(),
        "    releaseChannel: Stable\n    update:\n      mode: Auto\n      windows:\n      - from: \"09:00\"\n        to: \"10:00\"\n        days: [Mon]\n",
    );

    // Monday 3 March 2025, 08:00 UTC: the release waits for the window that opens at 09:00,
    // whatever the hour and the day the test runs at.
    let mut controller = controller_at(&stage, "2025-03-03T08:00:00Z", "controller-0800.log");
    // Pending comes first; the wait message is written by the next pass.
    let list = until_listed(admin, "v1.67.0", "v1.67.0 waits for the window", |r| {
        r.contains("Pending") && r.contains("waiting for the update window")
    })
    .await;
    assert!(
        row(&list, "v1.67.0")
            .unwrap()
            .contains("Release is waiting for the update window until 03 Mar 25 09:00 UTC"),
        "{list}"
    );
    assert!(list.starts_with("Running version: v1.66.0\n"), "{list}");
    controller.stop();

    // The same Monday, 09:30 UTC: the window is open, the release is deployed, and the times the
    // controller records are on its clock.
    let _controller = controller_at(&stage, "2025-03-03T09:30:00Z", "controller-0930.log");
    let list = until_listed(admin, "v1.67.0", "v1.67.0 is deployed", |r| {
        r.contains("Deployed")
    })
    .await;
    assert!(list.starts_with("Running version: v1.67.0\n"), "{list}");
    let deployed_at = kubectl_ok(
        admin,
        &[
            "get",
            "deckhouserelease",
            "v1.67.0",
            "-o",
            "jsonpath={.status.transitionTime}",
        ],
    );
    assert!(
        deployed_at.starts_with("2025-03-03T09:3"),
        "transitionTime {deployed_at:?} is not on the controller's clock"
    );
}
