//! Package hooks' bindings end to end: the embedded API server, a real `docker-registry`
//! holding a `watcher` package whose Python hooks are bound to `onStartup`, a `kubernetes`
//! binding and a `schedule`, and `d8 controller`'s package controller running — what the
//! Application's namespace shows, before and after the controller restarts.

mod support;

use std::time::Duration;

use api::packages::Application;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::DeleteParams;
use package_controller::controller::{Controller, Options};
use serde_json::json;
use support::{
    Env, REPO, Running, cm, create, namespace, new_application, push_package, registry, repository,
    spec, wait_for,
};
use testkit::ImageBuilder;
use testkit::image::Layout;
use testkit::push::Registry;

/// onStartup: counts the starts in the values (so a start after a restart shows whether the
/// count was kept) and records the Application it was told about.
const STARTUP_PY: &str = r#"#!/usr/bin/env python3
import json, os, sys
if sys.argv[1:] == ["--config"]:
    print(json.dumps({"configVersion": "v1", "onStartup": 1}))
    sys.exit(0)
values = json.load(open(os.environ["VALUES_PATH"]))
boots = values.get("watcher", {}).get("boots", 0) + 1
instance = os.environ["APPLICATION_NAMESPACE"] + "/" + os.environ["APPLICATION_NAME"]
with open(os.environ["VALUES_JSON_PATCH_PATH"], "w") as f:
    json.dump([{"op": "add", "path": "/watcher/boots", "value": boots},
               {"op": "add", "path": "/watcher/instance", "value": instance}], f)
"#;

/// kubernetes: the ConfigMaps labelled watch=me, by name, into the values. It names namespace
/// q: an Application's hooks watch its own namespace whatever they name.
const SEEN_PY: &str = r#"#!/usr/bin/env python3
import json, os, sys
if sys.argv[1:] == ["--config"]:
    print(json.dumps({"configVersion": "v1", "kubernetes": [{
        "name": "cms", "apiVersion": "v1", "kind": "ConfigMap",
        "labelSelector": {"matchLabels": {"watch": "me"}},
        "namespace": {"nameSelector": {"matchNames": ["q"]}},
        "jqFilter": ".metadata.name", "includeSnapshotsFrom": ["cms"]}]}))
    sys.exit(0)
contexts = json.load(open(os.environ["BINDING_CONTEXT_PATH"]))
ctx = contexts[-1]
items = ctx.get("snapshots", {}).get("cms", ctx.get("objects", []))
names = sorted(i.get("filterResult") for i in items)
with open(os.environ["VALUES_JSON_PATCH_PATH"], "w") as f:
    json.dump([{"op": "add", "path": "/watcher/seen", "value": ",".join(names) or "-"}], f)
"#;

/// schedule: every second, a ConfigMap in the Application's namespace.
const TICK_PY: &str = r#"#!/usr/bin/env python3
import json, os, sys
if sys.argv[1:] == ["--config"]:
    print(json.dumps({"configVersion": "v1", "schedule": [{"name": "tick", "crontab": "* * * * * *"}]}))
    sys.exit(0)
cm = {"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "ticked", "namespace": os.environ["APPLICATION_NAMESPACE"]},
      "data": {"by": os.environ["APPLICATION_NAME"]}}
with open(os.environ["KUBERNETES_PATCH_PATH"], "w") as f:
    json.dump({"operation": "CreateOrUpdate", "object": cm}, f)
"#;

const CM: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-watcher
data:
  boots: {{ .Values.watcher.boots | default 0 | quote }}
  instance: {{ .Values.watcher.instance | default "" | quote }}
  seen: {{ .Values.watcher.seen | default "none" | quote }}
"#;

async fn push_watcher(push: &Registry, layout: &Layout) {
    let package_yaml = "name: watcher\ntype: Application\ndescription: {en: Watches}\ncategory: Misc\nstage: General Availability\n";
    let hooks = [
        ("hooks/startup.py", STARTUP_PY),
        ("hooks/seen.py", SEEN_PY),
        ("hooks/tick.py", TICK_PY),
    ];
    let mut files: Vec<(&str, &[u8])> = vec![
        (
            "Chart.yaml",
            b"apiVersion: v2\nname: watcher\nversion: 0.1.0\n",
        ),
        ("templates/cm.yaml", CM.as_bytes()),
    ];
    for (path, script) in &hooks {
        files.push((path, script.as_bytes()));
    }
    let executables: Vec<&str> = hooks.iter().map(|(p, _)| *p).collect();
    let bundle = ImageBuilder::new("watcher-bundle")
        .files(&files)
        .executable(&executables)
        .build(layout);
    let meta = [("package.yaml", package_yaml.as_bytes())];
    push_package(push, layout, REPO, "watcher", "v1.0.0", &meta, &bundle).await;
}

#[tokio::test]
async fn package_hooks_bindings_run_between_passes_and_their_values_survive_a_restart() {
    let env = Env::start().await;
    push_watcher(&env.push, &env.layout).await;
    repository(&env.client, "main", registry(&env.upstream.host(), REPO)).await;
    for ns in ["p", "q"] {
        namespace(&env.client, ns).await;
    }
    let options = Options {
        retry: Duration::from_secs(1),
        ..support::options(&env.dir)
    };
    let controller = Controller::new(env.client.clone(), options.clone());
    controller.pass().await.unwrap();
    let apps: Api<Application> = Api::namespaced(env.client.clone(), "p");
    new_application(&env.client, "p", "w", spec("watcher", "v1.0.0")).await;
    let running = Running::start(controller);

    // onStartup ran once, told the Application; the Synchronization saw no ConfigMap ("-").
    let shown = wait_for(&env.client, "p", "w-watcher", |d| d["seen"] == "-").await;
    assert_eq!(
        (shown["boots"].as_str(), shown["instance"].as_str()),
        ("1", "p/w")
    );

    // Events between passes: only the labelled ConfigMap of the Application's namespace.
    let labelled = |ns: &str, name: &str| json!({"metadata": {"name": name, "namespace": ns, "labels": {"watch": "me"}}});
    create::<ConfigMap>(&env.client, Some("q"), labelled("q", "elsewhere")).await;
    create::<ConfigMap>(
        &env.client,
        Some("p"),
        json!({"metadata": {"name": "plain"}}),
    )
    .await;
    create::<ConfigMap>(&env.client, Some("p"), labelled("p", "one")).await;
    wait_for(&env.client, "p", "w-watcher", |d| d["seen"] == "one").await;
    create::<ConfigMap>(&env.client, Some("p"), labelled("p", "two")).await;
    wait_for(&env.client, "p", "w-watcher", |d| d["seen"] == "one,two").await;
    Api::<ConfigMap>::namespaced(env.client.clone(), "p")
        .delete("one", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&env.client, "p", "w-watcher", |d| d["seen"] == "two").await;

    // The schedule fires: its hook acts in the Application's namespace.
    let ticked = wait_for(&env.client, "p", "ticked", |_| true).await;
    assert_eq!(ticked["by"], "w");
    assert!(cm(&env.client, "q", "ticked").await.is_none());

    // The controller restarts: what the hooks patched was kept in the namespace, so the new
    // start counts on from it.
    running.stop().await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "p");
    assert!(secrets.get_opt("package-hooks.w").await.unwrap().is_some());
    let controller = Controller::new(env.client.clone(), options);
    controller.pass().await.unwrap();
    let shown = cm(&env.client, "p", "w-watcher").await.unwrap();
    assert_eq!(
        (
            shown["boots"].as_str(),
            shown["instance"].as_str(),
            shown["seen"].as_str()
        ),
        ("2", "p/w", "two")
    );

    // Deleted: what the hooks patched goes with it.
    apps.delete("w", &DeleteParams::default()).await.unwrap();
    controller.pass().await.unwrap();
    assert!(apps.get_opt("w").await.unwrap().is_none());
    assert!(secrets.get_opt("package-hooks.w").await.unwrap().is_none());
}
