//! Package hooks failing between passes, end to end: the embedded API server, a real
//! `docker-registry` holding a `flaky` package whose Python hook is bound to ConfigMaps, and
//! `d8 controller`'s package controller running — what the Application shows while the hook
//! fails and after it succeeds again.

mod support;

use std::time::Duration;

use api::packages::Application;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use package_controller::controller::{Controller, Options};
use serde_json::json;
use support::{
    Env, REPO, Running, cm, create, namespace, new_application, push_package, registry, repository,
    spec, wait_for,
};
use testkit::ImageBuilder;
use testkit::image::Layout;
use testkit::push::Registry;

/// kubernetes: fails while a ConfigMap labelled watch=me says `fail: "yes"`.
const CHECK_PY: &str = r#"#!/usr/bin/env python3
import json, os, sys
if sys.argv[1:] == ["--config"]:
    print(json.dumps({"configVersion": "v1", "kubernetes": [{
        "name": "cms", "apiVersion": "v1", "kind": "ConfigMap",
        "labelSelector": {"matchLabels": {"watch": "me"}},
        "jqFilter": ".data.fail", "includeSnapshotsFrom": ["cms"]}]}))
    sys.exit(0)
contexts = json.load(open(os.environ["BINDING_CONTEXT_PATH"]))
items = contexts[-1].get("snapshots", {}).get("cms", [])
if any(i.get("filterResult") == "yes" for i in items):
    print("told to fail", file=sys.stderr)
    sys.exit(1)
"#;

/// kubernetes in its own queue with `waitForSynchronization: false` (addon-operator honours the
/// flag only outside the main queue): its Synchronization waits for the file
/// `GATE`, then puts `late: synced` into the values.
const LATE_PY: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
if sys.argv[1:] == ["--config"]:
    print(json.dumps({"configVersion": "v1", "kubernetes": [{
        "name": "late", "apiVersion": "v1", "kind": "ConfigMap",
        "labelSelector": {"matchLabels": {"late": "me"}},
        "queue": "late", "waitForSynchronization": False}]}))
    sys.exit(0)
while not os.path.exists("GATE"):
    time.sleep(0.1)
with open(os.environ["VALUES_JSON_PATCH_PATH"], "w") as f:
    json.dump([{"op": "add", "path": "/flaky/late", "value": "synced"}], f)
"#;

const CM: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-flaky
data:
  up: "yes"
  late: {{ .Values.flaky.late | default "none" | quote }}
"#;

async fn push_flaky(push: &Registry, layout: &Layout, gate: &std::path::Path) {
    let late = LATE_PY.replace("GATE", gate.to_str().unwrap());
    let package_yaml = "name: flaky\ntype: Application\ndescription: {en: Flaky}\ncategory: Misc\nstage: General Availability\n";
    let bundle = ImageBuilder::new("flaky-bundle")
        .files(&[
            (
                "Chart.yaml",
                b"apiVersion: v2\nname: flaky\nversion: 0.1.0\n",
            ),
            ("templates/cm.yaml", CM.as_bytes()),
            ("hooks/check.py", CHECK_PY.as_bytes()),
            ("hooks/late.py", late.as_bytes()),
        ])
        .executable(&["hooks/check.py", "hooks/late.py"])
        .build(layout);
    let meta = [("package.yaml", package_yaml.as_bytes())];
    push_package(push, layout, REPO, "flaky", "v1.0.0", &meta, &bundle).await;
}

/// Waits (up to a minute) until the Application's `Ready` condition is `(status, reason)`;
/// returns its message and the summary's state and message.
async fn wait_ready(
    apps: &Api<Application>,
    status: &str,
    reason: &str,
) -> (String, Option<String>, Option<String>) {
    let mut last = None;
    for _ in 0..600 {
        let s = apps.get("f").await.unwrap().status.unwrap_or_default();
        if let Some(c) = s.conditions.iter().find(|c| c.type_ == "Ready")
            && c.status == status
            && c.reason == reason
        {
            let summary = s.summary.clone().unwrap_or_default();
            return (c.message.clone(), summary.state, summary.message);
        }
        last = Some(s.conditions);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("Ready never became {status}/{reason}: {last:?}");
}

struct Setup {
    env: Env,
    controller: Controller,
    apps: Api<Application>,
}

/// The `flaky` package published, repository scanned, Application `p/f` created; `open`
/// says whether the `late.py` gate is open from the start.
async fn setup(open: bool) -> Setup {
    let env = Env::start().await;
    let gate = env.dir.path().join("gate");
    if open {
        std::fs::write(&gate, "").unwrap();
    }
    push_flaky(&env.push, &env.layout, &gate).await;
    repository(&env.client, "main", registry(&env.upstream.host(), REPO)).await;
    namespace(&env.client, "p").await;
    let options = Options {
        retry: Duration::from_secs(1),
        ..support::options(&env.dir)
    };
    let controller = Controller::new(env.client.clone(), options);
    controller.pass().await.unwrap();
    let apps: Api<Application> = Api::namespaced(env.client.clone(), "p");
    new_application(&env.client, "p", "f", spec("flaky", "v1.0.0")).await;
    Setup {
        env,
        controller,
        apps,
    }
}

#[tokio::test]
async fn a_hook_failing_between_passes_shows_on_the_application_until_it_succeeds() {
    let Setup {
        env,
        controller,
        apps,
    } = setup(true).await;
    let running = Running::start(controller);
    wait_ready(&apps, "True", "Reconciled").await;
    wait_for(&env.client, "p", "f-flaky", |d| d["up"] == "yes").await;

    // The hook's Event run fails: the Application says so, what runs keeps running.
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), "p");
    create::<ConfigMap>(
        &env.client,
        Some("p"),
        json!({"metadata": {"name": "switch", "labels": {"watch": "me"}}, "data": {"fail": "yes"}}),
    )
    .await;
    let (message, state, summary) = wait_ready(&apps, "False", "HookError").await;
    assert!(
        message.contains("hooks/check.py") && message.contains("told to fail"),
        "{message}"
    );
    assert_eq!(state.as_deref(), Some("Degraded"));
    assert_eq!(summary.as_deref(), Some(message.as_str()));
    let s = apps.get("f").await.unwrap().status.unwrap();
    let installed = s
        .conditions
        .iter()
        .find(|c| c.type_ == "Installed")
        .unwrap();
    assert_eq!(installed.status, "True", "the release stays");
    assert!(cm(&env.client, "p", "f-flaky").await.is_some());

    // The hook's next run succeeds: the error is gone.
    cms.patch(
        "switch",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"fail": "no"}})),
    )
    .await
    .unwrap();
    let (_, state, summary) = wait_ready(&apps, "True", "Reconciled").await;
    assert_eq!(state.as_deref(), Some("Ready"));
    assert_eq!(summary, None);

    running.stop().await;
}

#[tokio::test]
async fn a_binding_with_wait_for_synchronization_false_does_not_hold_up_the_release() {
    let Setup {
        env,
        controller,
        apps,
    } = setup(false).await;
    let running = Running::start(controller);
    // late.py's Synchronization cannot finish while the gate is shut; the release does not
    // wait for it (with waitForSynchronization: true nothing would be released yet).
    let shown = wait_for(&env.client, "p", "f-flaky", |_| true).await;
    assert_eq!(shown["late"], "none", "released before the Synchronization");
    // The pass goes on to record the version installed, the Synchronization still pending.
    let mut installed = false;
    for _ in 0..600 {
        let s = apps.get("f").await.unwrap().status.unwrap_or_default();
        if s.current_version.is_some() {
            installed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(installed, "status.currentVersion never set");
    assert_eq!(
        cm(&env.client, "p", "f-flaky").await.unwrap()["late"],
        "none"
    );

    // The gate opens: the Synchronization finishes, between passes, and its values are
    // released.
    std::fs::write(env.dir.path().join("gate"), "").unwrap();
    wait_for(&env.client, "p", "f-flaky", |d| d["late"] == "synced").await;
    running.stop().await;
}
