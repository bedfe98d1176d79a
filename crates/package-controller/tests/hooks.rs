//! Package hooks' bindings end to end: the embedded API server, a real `docker-registry`
//! holding a `watcher` package whose Python hooks are bound to `onStartup`, a `kubernetes`
//! binding and a `schedule`, and `d8 controller`'s package controller running — what the
//! Application's namespace shows, before and after the controller restarts.

use std::time::Duration;

use api::packages::{
    Application, ApplicationSpec, PackageRegistry, PackageRepository, PackageRepositorySpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use package_controller::controller::{Controller, Options};
use serde_json::json;
use testkit::image::Layout;
use testkit::push::Registry;
use testkit::{Cluster, ImageBuilder, Upstream};

const REPO: &str = "packages";

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
    let marker = ImageBuilder::new("watcher-marker").build(layout);
    push.push_image(REPO, Some("watcher"), &marker)
        .await
        .unwrap();
    let package_yaml = "name: watcher\ntype: Application\ndescription: {en: Watches}\ncategory: Misc\nstage: General Availability\n";
    let meta = ImageBuilder::new("watcher-meta")
        .files(&[("package.yaml", package_yaml.as_bytes())])
        .build(layout);
    push.push_image(&format!("{REPO}/watcher/version"), Some("v1.0.0"), &meta)
        .await
        .unwrap();
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
    push.push_image(&format!("{REPO}/watcher"), Some("v1.0.0"), &bundle)
        .await
        .unwrap();
}

async fn create<K>(client: &Client, ns: Option<&str>, object: serde_json::Value)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Clone
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns.unwrap_or("default"));
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

async fn cm(
    client: &Client,
    ns: &str,
    name: &str,
) -> Option<std::collections::BTreeMap<String, String>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.get_opt(name)
        .await
        .unwrap()
        .map(|c| c.data.unwrap_or_default())
}

/// Waits (up to a minute) until `check` holds for ConfigMap `ns/name`'s data.
async fn wait_for(
    client: &Client,
    ns: &str,
    name: &str,
    check: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
) -> std::collections::BTreeMap<String, String> {
    let mut last = None;
    for _ in 0..600 {
        last = cm(client, ns, name).await;
        if let Some(d) = &last
            && check(d)
        {
            return d.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("ConfigMap {ns}/{name} never got there: {last:?}");
}

#[tokio::test]
async fn package_hooks_bindings_run_between_passes_and_their_values_survive_a_restart() {
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(&dir.path().join("layout")).unwrap();
    push_watcher(&Registry::of(&upstream), &layout).await;
    Api::<PackageRepository>::all(client.clone())
        .create(
            &PostParams::default(),
            &PackageRepository::new(
                "main",
                PackageRepositorySpec {
                    registry: PackageRegistry {
                        repo: format!("{}/{REPO}", upstream.host()),
                        scheme: Some("HTTP".into()),
                        ..Default::default()
                    },
                    scan_interval: None,
                },
            ),
        )
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in ["p", "q"] {
        let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces.create(&PostParams::default(), &n).await.unwrap();
    }
    let options = Options {
        packages_dir: dir.path().join("packages"),
        retry: Duration::from_secs(1),
        ..Default::default()
    };
    let controller = Controller::new(client.clone(), options.clone());
    controller.pass().await.unwrap();
    let apps: Api<Application> = Api::namespaced(client.clone(), "p");
    let mut a = Application::new(
        "w",
        ApplicationSpec {
            package_name: "watcher".into(),
            package_version: "v1.0.0".into(),
            package_repository_name: Some("main".into()),
            ..Default::default()
        },
    );
    a.metadata.namespace = Some("p".into());
    apps.create(&PostParams::default(), &a).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        controller
            .run(async {
                let _ = stopped.await;
            })
            .await;
    });

    // onStartup ran once, told the Application; the Synchronization saw no ConfigMap ("-").
    let shown = wait_for(&client, "p", "w-watcher", |d| d["seen"] == "-").await;
    assert_eq!(
        (shown["boots"].as_str(), shown["instance"].as_str()),
        ("1", "p/w")
    );

    // Events between passes: only the labelled ConfigMap of the Application's namespace.
    let labelled = |ns: &str, name: &str| json!({"metadata": {"name": name, "namespace": ns, "labels": {"watch": "me"}}});
    create::<ConfigMap>(&client, Some("q"), labelled("q", "elsewhere")).await;
    create::<ConfigMap>(&client, Some("p"), json!({"metadata": {"name": "plain"}})).await;
    create::<ConfigMap>(&client, Some("p"), labelled("p", "one")).await;
    wait_for(&client, "p", "w-watcher", |d| d["seen"] == "one").await;
    create::<ConfigMap>(&client, Some("p"), labelled("p", "two")).await;
    wait_for(&client, "p", "w-watcher", |d| d["seen"] == "one,two").await;
    Api::<ConfigMap>::namespaced(client.clone(), "p")
        .delete("one", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&client, "p", "w-watcher", |d| d["seen"] == "two").await;

    // The schedule fires: its hook acts in the Application's namespace.
    let ticked = wait_for(&client, "p", "ticked", |_| true).await;
    assert_eq!(ticked["by"], "w");
    assert!(cm(&client, "q", "ticked").await.is_none());

    // The controller restarts: what the hooks patched was kept in the namespace, so the new
    // start counts on from it.
    stop.send(()).unwrap();
    running.await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "p");
    assert!(secrets.get_opt("package-hooks.w").await.unwrap().is_some());
    let controller = Controller::new(client.clone(), options);
    controller.pass().await.unwrap();
    let shown = cm(&client, "p", "w-watcher").await.unwrap();
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
