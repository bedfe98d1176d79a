//! Modules running on the embedded API server: a module of ours on disk, its ModuleConfig
//! enabled → its objects applied (seen by kubectl) and a Helm release Secret in d8-system;
//! a settings change → a new revision that writes only the object that changed; a template
//! removed → its object deleted; a broken template → Module phase Error with Helm's message;
//! workloads not rolled out → Reconciling, rolled out → Ready; maintenance
//! NoResourceReconciliation → resources labelled once, then left alone (a deleted one not
//! restored), leaving it → applied again without the label; disabled → everything removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use api::module::Module;
use api::module_config::ModuleConfig;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use module_controller::manager::Manager;
use module_controller::runtime::release::Release;
use module_controller::runtime::{ModuleDirs, Runtime};
use module_plan::enabling::{Facts, version_of};
use release_controller::ManualClock;
use serde_json::{Value, json};

struct Cluster {
    _api: testkit::Cluster,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    client: Client,
    manager: Manager,
    runtime: Arc<Runtime>,
    module_dir: PathBuf,
}

const MODULE_YAML: &str = "name: echo\nweight: 910\nnamespace: d8-echo\n";
const SCHEMA: &str = "type: object\nproperties:\n  message:\n    type: string\n    default: hello\n  replicas:\n    type: integer\n    default: 1\n";
const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: d8-echo\n";
const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: echo\n  namespace: d8-echo\n  labels:\n    heritage: deckhouse\n    module: {{ .Chart.Name }}\ndata:\n  message: {{ .Values.echo.message | quote }}\n  modules: {{ .Values.global.enabledModules | join \",\" | quote }}\n  domain: {{ .Values.global.clusterConfiguration.clusterDomain }}\n";
const SECRET: &str =
    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: echo-token\ndata:\n  token: dDBrM24=\n";
const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: echo\nspec:\n  replicas: {{ .Values.echo.replicas }}\n  selector:\n    matchLabels: {app: echo}\n  template:\n    metadata:\n      labels: {app: echo}\n    spec:\n      containers:\n      - name: echo\n        image: registry.example.com/echo:1.0\n";

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

async fn cluster() -> Cluster {
    let api = testkit::Cluster::start().await;
    let kubeconfig = api.admin_kubeconfig().to_path_buf();
    let client = api.client().await;
    // Not under /tmp: in chroot mode the chroot's own /tmp is mounted there and would hide the
    // module.
    let scratch = tempfile::tempdir_in("/var/tmp").unwrap();
    let dir = scratch.path().to_path_buf();
    let modules = dir.as_path().join("modules");
    let module_dir = modules.join("910-echo");
    write(
        &module_dir,
        &[
            ("module.yaml", MODULE_YAML),
            ("openapi/config-values.yaml", SCHEMA),
            (".helmignore", "openapi\nhooks\n"),
            ("templates/namespace.yaml", NAMESPACE),
            ("templates/configmap.yaml", CONFIG_MAP),
            ("templates/secret.yaml", SECRET),
            ("templates/deployment.yaml", DEPLOYMENT),
        ],
    );
    let embedded = module_controller::embedded::discover(&modules).unwrap();
    let clock = ManualClock::new("2026-12-01T12:00:00Z".parse().unwrap());
    let downloaded =
        module_controller::install::Downloaded::open(dir.as_path().join("downloaded")).unwrap();
    let facts = Facts {
        bundle: "Default".into(),
        edition: "ee".into(),
        deckhouse_version: version_of("v1.69.3"),
        kubernetes_version: version_of("1.29.3"),
        bootstrapped: true,
        ..Default::default()
    };
    let manager = Manager::new(
        client.clone(),
        downloaded.clone(),
        Arc::new(clock.clone()),
        facts,
    )
    .with_embedded(embedded.clone());
    let runtime = Arc::new(
        Runtime::new(
            client.clone(),
            ModuleDirs {
                embedded,
                downloaded: Some(downloaded),
            },
            Arc::new(clock),
        )
        .with_chroot_root(dir.as_path().join("chroot"))
        .with_global(json!({"clusterConfiguration": {"clusterDomain": "cluster.local"}})),
    );
    Cluster {
        _api: api,
        _dir: scratch,
        kubeconfig,
        client,
        manager,
        runtime,
        module_dir,
    }
}

impl Cluster {
    async fn config(&self, spec: Value) {
        let api: Api<ModuleConfig> = Api::all(self.client.clone());
        let object = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
            "metadata": {"name": "echo"}, "spec": spec});
        let mut typed: ModuleConfig = serde_json::from_value(object).unwrap();
        match api.get_opt("echo").await.unwrap() {
            Some(old) => {
                typed.metadata = old.metadata;
                api.replace("echo", &PostParams::default(), &typed)
                    .await
                    .unwrap();
            }
            None => {
                api.create(&PostParams::default(), &typed).await.unwrap();
            }
        }
        self.manager.sync_modules().await.unwrap();
    }

    /// A converge; the echo module's revision.
    async fn converge(&self) -> Option<i64> {
        let results = self.runtime.converge().await.unwrap();
        results
            .into_iter()
            .find(|(m, _)| m == "echo")
            .and_then(|(_, r)| r.ok())
            .and_then(|o| o.revision)
    }

    async fn releases(&self) -> Vec<(String, BTreeMap<String, String>)> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), "d8-system");
        let mut out: Vec<(String, BTreeMap<String, String>)> = api
            .list(&kube::api::ListParams::default().labels("owner=helm"))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|s| (s.name_any(), s.labels().clone()))
            .collect();
        out.sort();
        out
    }

    async fn release(&self, revision: i64) -> Release {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), "d8-system");
        let secret = api
            .get(&format!("sh.helm.release.v1.echo.v{revision}"))
            .await
            .unwrap();
        Release::from_secret(&serde_json::to_value(secret).unwrap()).unwrap()
    }

    /// resourceVersions of the module's objects.
    async fn versions(&self) -> BTreeMap<&'static str, Option<String>> {
        let cm: Api<ConfigMap> = Api::namespaced(self.client.clone(), "d8-echo");
        let secret: Api<Secret> = Api::namespaced(self.client.clone(), "d8-echo");
        let deploy: Api<Deployment> = Api::namespaced(self.client.clone(), "d8-echo");
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        BTreeMap::from([
            (
                "configmap",
                cm.get_opt("echo")
                    .await
                    .unwrap()
                    .and_then(|o| o.resource_version()),
            ),
            (
                "secret",
                secret
                    .get_opt("echo-token")
                    .await
                    .unwrap()
                    .and_then(|o| o.resource_version()),
            ),
            (
                "deployment",
                deploy
                    .get_opt("echo")
                    .await
                    .unwrap()
                    .and_then(|o| o.resource_version()),
            ),
            (
                "namespace",
                ns.get_opt("d8-echo")
                    .await
                    .unwrap()
                    .and_then(|o| o.resource_version()),
            ),
        ])
    }

    async fn module(&self) -> (String, String, Option<String>, Option<String>) {
        let m = Api::<Module>::all(self.client.clone())
            .get("echo")
            .await
            .unwrap();
        let status = m.status.unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .find(|c| c.type_ == "IsReady")
            .cloned()
            .unwrap_or_default();
        (
            status
                .phase
                .map(|p| p.as_str().to_owned())
                .unwrap_or_default(),
            ready.status,
            ready.reason,
            ready.message,
        )
    }

    /// Marks the Deployment rolled out, as a kubelet and the deployment controller would.
    async fn roll_out(&self) {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), "d8-echo");
        let d = api.get("echo").await.unwrap();
        let replicas = d.spec.and_then(|s| s.replicas).unwrap_or(1);
        api.patch_status(
            "echo",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"observedGeneration": d.metadata.generation,
                "replicas": replicas, "updatedReplicas": replicas, "availableReplicas": replicas,
                "readyReplicas": replicas}}),
            ),
        )
        .await
        .unwrap();
    }

    async fn kubectl(&self, args: &[&str]) -> String {
        let out = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

#[tokio::test]
async fn a_module_runs_changes_and_is_removed() {
    let c = cluster().await;
    // Not enabled: nothing rendered.
    c.manager.sync_modules().await.unwrap();
    assert_eq!(c.converge().await, None);
    assert!(c.releases().await.is_empty());

    // Enabled: every object applied, release 1 recorded as Helm records it.
    c.config(json!({"enabled": true, "version": 1, "settings": {"message": "hi"}}))
        .await;
    assert_eq!(c.converge().await, Some(1));
    let cms = c
        .kubectl(&["get", "configmaps", "-n", "d8-echo", "-o", "name"])
        .await;
    assert_eq!(cms, "configmap/echo\n");
    let cm = c
        .kubectl(&["get", "configmap", "echo", "-n", "d8-echo", "-o", "json"])
        .await;
    let cm: Value = serde_json::from_str(&cm).unwrap();
    // Settings, and global values: the enabled modules, the caller's cluster facts.
    assert_eq!(
        cm["data"],
        json!({"message": "hi", "modules": "echo", "domain": "cluster.local"})
    );
    assert_eq!(
        cm["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "Helm"
    );
    assert_eq!(cm["metadata"]["labels"]["module"], "echo");
    assert_eq!(
        cm["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "echo"
    );
    // The Secret has no namespace in its template: the module's namespace.
    let secrets = c
        .kubectl(&["get", "secrets", "-n", "d8-echo", "-o", "name"])
        .await;
    assert_eq!(secrets, "secret/echo-token\n");
    let releases = c.releases().await;
    assert_eq!(releases.len(), 1);
    assert_eq!(releases[0].0, "sh.helm.release.v1.echo.v1");
    assert_eq!(releases[0].1["status"], "deployed");
    assert_eq!(releases[0].1["owner"], "helm");
    assert_eq!(releases[0].1["version"], "1");
    let r1 = c.release(1).await;
    assert!(
        r1.manifest.contains("# Source: echo/templates/secret.yaml"),
        "{}",
        r1.manifest
    );
    assert_eq!(r1.config["echo"], json!({"message": "hi", "replicas": 1}));
    assert_eq!(r1.namespace, "d8-echo");
    assert_eq!(r1.chart, ("echo".to_owned(), "0.2.0".to_owned()));

    // The Deployment is not rolled out: Reconciling, not ready, says why.
    let (phase, ready, reason, message) = c.module().await;
    assert_eq!((phase.as_str(), ready.as_str()), ("Reconciling", "False"));
    assert_eq!(reason.as_deref(), Some("Reconciling"));
    assert_eq!(
        message.as_deref(),
        Some("Deployment d8-echo/echo: the new spec is not observed yet")
    );
    c.roll_out().await;
    let before = c.versions().await;
    // Unchanged: no new revision, no write.
    assert_eq!(c.converge().await, Some(1));
    assert_eq!(c.versions().await, before);
    assert_eq!(c.releases().await.len(), 1);
    let (phase, ready, ..) = c.module().await;
    assert_eq!((phase.as_str(), ready.as_str()), ("Ready", "True"));

    // Settings change: revision 2, only the ConfigMap written.
    c.config(json!({"enabled": true, "version": 1, "settings": {"message": "bye"}}))
        .await;
    assert_eq!(c.converge().await, Some(2));
    let after = c.versions().await;
    assert_ne!(after["configmap"], before["configmap"]);
    for kind in ["secret", "deployment", "namespace"] {
        assert_eq!(
            after[kind], before[kind],
            "{kind} was written: {before:?} {after:?}"
        );
    }
    let releases = c.releases().await;
    let statuses: Vec<(&str, &str)> = releases
        .iter()
        .map(|(n, l)| (n.as_str(), l["status"].as_str()))
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("sh.helm.release.v1.echo.v1", "superseded"),
            ("sh.helm.release.v1.echo.v2", "deployed")
        ]
    );

    // A template removed (a new version of the module): its object is deleted.
    std::fs::remove_file(c.module_dir.join("templates/secret.yaml")).unwrap();
    assert_eq!(c.converge().await, Some(3));
    assert_eq!(c.versions().await["secret"], None);
    assert_eq!(c.versions().await["configmap"], after["configmap"]);

    // A broken template: Error with Helm's message; the resources stay.
    write(
        &c.module_dir,
        &[("templates/broken.yaml", "{{ .Values.echo.nope.deeper }}\n")],
    );
    assert_eq!(c.converge().await, None);
    let (phase, ready, reason, message) = c.module().await;
    assert_eq!((phase.as_str(), ready.as_str()), ("Error", "False"));
    assert_eq!(reason.as_deref(), Some("ModuleError"));
    let message = message.unwrap();
    assert!(
        message.starts_with("module echo: template: echo/templates/broken.yaml:1:"),
        "{message}"
    );
    assert_eq!(c.versions().await["configmap"], after["configmap"]);
    std::fs::remove_file(c.module_dir.join("templates/broken.yaml")).unwrap();
    assert_eq!(c.converge().await, Some(3));
    assert_eq!(c.module().await.0, "Ready");

    // Maintenance: a last revision labels the resources, then they are left alone.
    c.config(
        json!({"enabled": true, "version": 1, "maintenance": "NoResourceReconciliation",
        "settings": {"message": "ignored"}}),
    )
    .await;
    assert_eq!(c.converge().await, Some(4));
    let cm: Api<ConfigMap> = Api::namespaced(c.client.clone(), "d8-echo");
    let labelled = cm.get("echo").await.unwrap();
    assert_eq!(
        labelled
            .labels()
            .get("maintenance.deckhouse.io/no-resource-reconciliation"),
        Some(&String::new())
    );
    assert_eq!(
        c.release(4).await.labels["maintenance.deckhouse.io/no-resource-reconciliation"],
        "true"
    );
    // Every object is labelled, not only those the settings change.
    let deployments: Api<Deployment> = Api::namespaced(c.client.clone(), "d8-echo");
    assert_eq!(
        deployments
            .get("echo")
            .await
            .unwrap()
            .labels()
            .get("maintenance.deckhouse.io/no-resource-reconciliation"),
        Some(&String::new())
    );
    cm.patch(
        "echo",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"message": "edited by hand"}})),
    )
    .await
    .unwrap();
    c.config(
        json!({"enabled": true, "version": 1, "maintenance": "NoResourceReconciliation",
        "settings": {"message": "still ignored"}}),
    )
    .await;
    assert_eq!(c.converge().await, Some(4));
    assert_eq!(
        cm.get("echo").await.unwrap().data.unwrap()["message"],
        "edited by hand"
    );
    // A resource deleted in maintenance is not restored.
    deployments
        .delete("echo", &Default::default())
        .await
        .unwrap();
    assert_eq!(c.converge().await, Some(4));
    assert!(deployments.get_opt("echo").await.unwrap().is_none());
    // Out of maintenance: applied once more — the settings, the deleted Deployment back, the label
    // taken off, the release labelled "false".
    c.config(json!({"enabled": true, "version": 1, "settings": {"message": "now applied"}}))
        .await;
    assert_eq!(c.converge().await, Some(5));
    let unlabelled = cm.get("echo").await.unwrap();
    assert_eq!(
        unlabelled
            .labels()
            .get("maintenance.deckhouse.io/no-resource-reconciliation"),
        None
    );
    assert_eq!(unlabelled.data.unwrap()["message"], "now applied");
    assert!(deployments.get_opt("echo").await.unwrap().is_some());
    assert_eq!(
        c.release(5).await.labels["maintenance.deckhouse.io/no-resource-reconciliation"],
        "false"
    );

    // Disabled: every object and every release record removed.
    c.config(json!({"enabled": false})).await;
    assert_eq!(c.converge().await, None);
    let gone = c.versions().await;
    assert!(gone.values().all(Option::is_none), "{gone:?}");
    assert!(c.releases().await.is_empty());
}

/// Waits (up to `secs`) until `check` holds.
async fn eventually<F, Fut>(secs: u64, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    while tokio::time::Instant::now() < until {
        if check().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn queues_run_modules_retry_failures_and_export_metrics() {
    let c = cluster().await;
    c.manager.sync_modules().await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(c.runtime.clone().run(async move {
        let _ = stopped.await;
    }));
    // Enabling queues a converge, which runs the module.
    write(
        &c.module_dir,
        &[("templates/broken.yaml", "{{ .Values.echo.nope.deeper }}\n")],
    );
    c.config(json!({"enabled": true, "version": 1})).await;
    let view = c.runtime.queue_view();
    assert!(
        eventually(10, || async { view.render().contains("failed 1 times") }).await,
        "{}",
        view.render()
    );
    let list = view.render();
    assert!(
        list.contains("Queue 'main': length 1, head: ModuleRun:echo (queued "),
        "{list}"
    );
    assert!(
        list.contains("module echo: template: echo/templates/broken.yaml:1:"),
        "{list}"
    );
    let mut registry = prometheus_client::registry::Registry::default();
    c.runtime.queue_metrics().register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("deckhouse_tasks_queue_length{queue=\"main\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("deckhouse_tasks_queue_head_info{queue=\"main\",module=\"echo\",task_type=\"ModuleRun\",hook=\"\"} 1"),
        "{text}"
    );
    // The failed run counts for D8DeckhouseCouldNotRunModule.
    assert!(
        text.lines()
            .any(|l| l.starts_with("deckhouse_module_run_errors_total{module=\"echo\"} ")),
        "{text}"
    );
    assert_eq!(c.module().await.0, "Error");
    // Fixed: the retry (after shell-operator's 5 s) deploys it and the queue drains.
    std::fs::remove_file(c.module_dir.join("templates/broken.yaml")).unwrap();
    let cm: Api<ConfigMap> = Api::namespaced(c.client.clone(), "d8-echo");
    assert!(
        eventually(15, || async { cm.get_opt("echo").await.unwrap().is_some() }).await,
        "{}",
        view.render()
    );
    assert!(
        eventually(5, || async {
            view.render().starts_with("Summary: 1 queues, 0 tasks")
        })
        .await,
        "{}",
        view.render()
    );
    // Disabling converges again: everything removed.
    c.config(json!({"enabled": false})).await;
    assert!(
        eventually(10, || async { cm.get_opt("echo").await.unwrap().is_none() }).await,
        "{}",
        view.render()
    );
    assert!(eventually(5, || async { c.releases().await.is_empty() }).await);
    // Settings the schema refuses: every 5 s check counts a config values error
    // (D8DeckhouseConfigInvalid) …
    let config_errors = || {
        let mut registry = prometheus_client::registry::Registry::default();
        c.runtime.queue_metrics().register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("deckhouse_config_values_errors_total "))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_default()
    };
    let before = config_errors();
    c.config(json!({"enabled": true, "version": 1, "settings": {"replicas": "many"}}))
        .await;
    assert!(
        eventually(15, || async { config_errors() > before }).await,
        "{}",
        view.render()
    );
    // … until they are fixed: the module runs and the count stops.
    c.config(json!({"enabled": true, "version": 1, "settings": {"replicas": 2}}))
        .await;
    assert!(
        eventually(20, || async { cm.get_opt("echo").await.unwrap().is_some() }).await,
        "{}",
        view.render()
    );
    let settled = config_errors();
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    assert_eq!(config_errors(), settled);
    let _ = stop.send(());
    worker.await.unwrap();
}

#[tokio::test]
async fn a_run_killed_mid_apply_is_finished_by_the_next_leader() {
    let c = cluster().await;
    c.config(json!({"enabled": true, "version": 1})).await;
    assert_eq!(c.converge().await, Some(1));
    // A controller died while applying revision 2 (a chart with one more ConfigMap): its
    // pending record was stored and one object applied, the rest never happened.
    let mut pending = c.release(1).await;
    pending.version = 2;
    pending.status = module_controller::runtime::release::Status::PendingUpgrade;
    pending.manifest.push_str(
        "---\n# Source: echo/templates/extra.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: d8-echo\n",
    );
    c.runtime
        .applier()
        .store("d8-system", &pending)
        .await
        .unwrap();
    let cm: Api<ConfigMap> = Api::namespaced(c.client.clone(), "d8-echo");
    let extra: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "extra", "namespace": "d8-echo"}}))
    .unwrap();
    cm.create(&PostParams::default(), &extra).await.unwrap();
    // The next leader (a fresh runtime): the release is not deployed, so it is applied again
    // and what only the interrupted revision held is deleted; nothing is left orphaned.
    let next = Runtime::new(
        c.client.clone(),
        ModuleDirs {
            embedded: module_controller::embedded::discover(c.module_dir.parent().unwrap())
                .unwrap(),
            downloaded: None,
        },
        Arc::new(ManualClock::new("2026-12-01T12:05:00Z".parse().unwrap())),
    )
    .with_global(json!({"clusterConfiguration": {"clusterDomain": "cluster.local"}}));
    let results = next.converge().await.unwrap();
    assert_eq!(results[0].1.as_ref().unwrap().revision, Some(3));
    assert!(cm.get_opt("extra").await.unwrap().is_none());
    assert!(cm.get_opt("echo").await.unwrap().is_some());
    let statuses: Vec<(String, String)> = c
        .releases()
        .await
        .into_iter()
        .map(|(n, l)| (n, l["status"].clone()))
        .collect();
    assert_eq!(
        statuses,
        vec![
            (
                "sh.helm.release.v1.echo.v1".to_owned(),
                "superseded".to_owned()
            ),
            ("sh.helm.release.v1.echo.v2".to_owned(), "failed".to_owned()),
            (
                "sh.helm.release.v1.echo.v3".to_owned(),
                "deployed".to_owned()
            ),
        ]
    );
}

/// A shell hook of the module writes what it sees of a file of the controller's filesystem
/// into a ConfigMap (through `KUBERNETES_PATCH_PATH`).
const PROBE_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","beforeHelm":1}'
  exit 0
fi
if [ -e "SECRET" ]; then sees=yes; else sees=no; fi
echo "{\"operation\":\"CreateOrUpdate\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"chroot-probe\",\"namespace\":\"default\"},\"data\":{\"sees\":\"$sees\"}}}" > "$KUBERNETES_PATCH_PATH"
"#;

/// Chroot mode in the runtime: without ConfigMap `d8-system/chroot-mode` a module's shell
/// hook sees the controller's filesystem; with it, the hook runs chrooted and does not.
#[tokio::test]
async fn chroot_mode_hides_the_controllers_filesystem_from_module_hooks() {
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "chroot mode needs root (bind mounts and chroot)"
    );
    let c = cluster().await;
    let secret = c._dir.path().join("controller-secret");
    std::fs::write(&secret, "s3cr3t").unwrap();
    let probe = c.module_dir.join("hooks/probe.sh");
    write(
        &c.module_dir,
        &[(
            "hooks/probe.sh",
            &PROBE_SH.replace("SECRET", &secret.display().to_string()),
        )],
    );
    std::fs::set_permissions(&probe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let sees = || async {
        Api::<ConfigMap>::namespaced(c.client.clone(), "default")
            .get("chroot-probe")
            .await
            .unwrap()
            .data
            .unwrap_or_default()
            .get("sees")
            .cloned()
            .unwrap_or_default()
    };
    c.config(json!({"enabled": true})).await;
    c.runtime.detect_chroot_mode().await;
    assert!(c.converge().await.is_some());
    assert_eq!(sees().await, "yes");

    let chroot_mode: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "chroot-mode", "namespace": "d8-system"},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(c.client.clone(), "d8-system")
        .create(&PostParams::default(), &chroot_mode)
        .await
        .unwrap();
    c.runtime.detect_chroot_mode().await;
    assert!(c.converge().await.is_some());
    assert_eq!(sees().await, "no");
    // The chroot holds the module's files (where the hook ran from).
    assert!(c._dir.path().join("chroot/echo").is_dir());
}

/// Watches ConfigMaps `probe` in the namespaces labelled `watch=yes`; writes the namespaces of
/// its snapshot into ConfigMap `default/ns-probe`.
const NS_PROBE_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","kubernetes":[{"name":"probes","apiVersion":"v1","kind":"ConfigMap","nameSelector":{"matchNames":["probe"]},"namespace":{"labelSelector":{"matchLabels":{"watch":"yes"}}},"jqFilter":".metadata.namespace","includeSnapshotsFrom":["probes"]}]}'
  exit 0
fi
seen=$(jq -r '[.[-1].snapshots.probes[].filterResult] | sort | join(",")' "$BINDING_CONTEXT_PATH")
echo "{\"operation\":\"CreateOrUpdate\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"ns-probe\",\"namespace\":\"default\"},\"data\":{\"seen\":\"$seen\"}}}" > "$KUBERNETES_PATCH_PATH"
"#;

/// `namespace.labelSelector` of a kubernetes binding: only objects of the namespaces it
/// matches are in the snapshot; a namespace labelled later brings its objects in, one whose
/// label is removed takes them out.
#[tokio::test]
async fn a_namespace_label_selector_keeps_a_binding_to_the_matching_namespaces() {
    use k8s_openapi::api::core::v1::Namespace;
    let c = cluster().await;
    write(&c.module_dir, &[("hooks/ns_probe.sh", NS_PROBE_SH)]);
    std::fs::set_permissions(
        c.module_dir.join("hooks/ns_probe.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let namespaces: Api<Namespace> = Api::all(c.client.clone());
    for (ns, labelled) in [("ns-a", true), ("ns-b", false)] {
        let labels = if labelled {
            json!({"watch": "yes"})
        } else {
            json!({})
        };
        let object: Namespace = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}),
        )
        .unwrap();
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }
    for ns in ["ns-a", "ns-b", "default"] {
        let probe: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "probe", "namespace": ns}}))
        .unwrap();
        Api::<ConfigMap>::namespaced(c.client.clone(), ns)
            .create(&PostParams::default(), &probe)
            .await
            .unwrap();
    }
    c.manager.sync_modules().await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(c.runtime.clone().run(async move {
        let _ = stopped.await;
    }));
    c.config(json!({"enabled": true, "version": 1})).await;
    let probe: Api<ConfigMap> = Api::namespaced(c.client.clone(), "default");
    let seen = || async {
        probe
            .get_opt("ns-probe")
            .await
            .unwrap()
            .and_then(|c| c.data)
            .and_then(|d| d.get("seen").cloned())
            .unwrap_or_else(|| "<none>".into())
    };
    let label = |ns: &'static str, value: Option<&'static str>| {
        let namespaces = namespaces.clone();
        async move {
            namespaces
                .patch(
                    ns,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {"watch": value}}})),
                )
                .await
                .unwrap();
        }
    };
    let view = c.runtime.queue_view();
    assert!(
        eventually(20, || async { seen().await == "ns-a" }).await,
        "{} {}",
        seen().await,
        view.render()
    );
    label("ns-b", Some("yes")).await;
    assert!(
        eventually(20, || async { seen().await == "ns-a,ns-b" }).await,
        "{} {}",
        seen().await,
        view.render()
    );
    label("ns-a", None).await;
    assert!(
        eventually(20, || async { seen().await == "ns-b" }).await,
        "{} {}",
        seen().await,
        view.render()
    );
    let _ = stop.send(());
    worker.await.unwrap();
}

/// A kubernetes hook on ConfigMap `default/trigger` that fails while the ConfigMap is in its
/// binding context; `QUEUE` is its binding's `queue` field (empty: `main`, and run at
/// synchronization; named: not run at synchronization).
fn trigger_hook(queue: &str) -> String {
    let (name, binding) = if queue.is_empty() {
        ("triggers".to_owned(), String::new())
    } else {
        (
            format!("{queue}-triggers"),
            format!(r#","queue":"{queue}","executeHookOnSynchronization":false"#),
        )
    };
    format!(
        r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{{"configVersion":"v1","kubernetes":[{{"name":"{name}","apiVersion":"v1","kind":"ConfigMap","namespace":{{"nameSelector":{{"matchNames":["default"]}}}},"nameSelector":{{"matchNames":["trigger"]}}{binding}}}]}}'
  exit 0
fi
if grep -q '"trigger"' "$BINDING_CONTEXT_PATH"; then
  echo "the trigger is there" >&2
  exit 1
fi
"#
    )
}

/// addon-operator's `queue` and `activation` labels on the hook error counters: a hook failing
/// at the synchronization of the startup converge counts `queue="main",
/// activation="OperatorStartup"`; failing on a later event, `activation=""` and the queue its
/// binding names.
#[tokio::test]
async fn hook_errors_carry_the_queue_and_the_activation() {
    let c = cluster().await;
    let main_hook = trigger_hook("");
    let named_hook = trigger_hook("probes");
    write(
        &c.module_dir,
        &[
            ("hooks/trigger.sh", main_hook.as_str()),
            ("hooks/trigger_named.sh", named_hook.as_str()),
        ],
    );
    for hook in ["trigger.sh", "trigger_named.sh"] {
        std::fs::set_permissions(
            c.module_dir.join("hooks").join(hook),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
    }
    let configmaps: Api<ConfigMap> = Api::namespaced(c.client.clone(), "default");
    let trigger: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "trigger", "namespace": "default"}}))
    .unwrap();
    configmaps
        .create(&PostParams::default(), &trigger)
        .await
        .unwrap();
    c.config(json!({"enabled": true, "version": 1})).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(c.runtime.clone().run(async move {
        let _ = stopped.await;
    }));
    let errors = || {
        let mut registry = prometheus_client::registry::Registry::default();
        c.runtime.queue_metrics().register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text.lines()
            .filter(|l| l.starts_with("deckhouse_module_hook_errors_total{"))
            .filter_map(|l| l.rsplit_once(' ').map(|(series, _)| series.to_owned()))
            .collect::<Vec<String>>()
    };
    let at_startup = "deckhouse_module_hook_errors_total{module=\"echo\",hook=\"910-echo/hooks/trigger.sh\",binding=\"kubernetes\",queue=\"main\",activation=\"OperatorStartup\"}";
    let view = c.runtime.queue_view();
    assert!(
        eventually(60, || async { errors().iter().any(|s| s == at_startup) }).await,
        "{:?} {}",
        errors(),
        view.render()
    );
    // Without the trigger the module runs …
    configmaps
        .delete("trigger", &Default::default())
        .await
        .unwrap();
    let cm: Api<ConfigMap> = Api::namespaced(c.client.clone(), "d8-echo");
    assert!(
        eventually(60, || async { cm.get_opt("echo").await.unwrap().is_some() }).await,
        "{}",
        view.render()
    );
    // … and a new trigger fails both hooks' event runs, outside the startup converge.
    configmaps
        .create(&PostParams::default(), &trigger)
        .await
        .unwrap();
    let on_events = [
        "deckhouse_module_hook_errors_total{module=\"echo\",hook=\"910-echo/hooks/trigger.sh\",binding=\"kubernetes\",queue=\"main\",activation=\"\"}",
        "deckhouse_module_hook_errors_total{module=\"echo\",hook=\"910-echo/hooks/trigger_named.sh\",binding=\"kubernetes\",queue=\"probes\",activation=\"\"}",
    ];
    assert!(
        eventually(60, || async {
            let seen = errors();
            on_events.iter().all(|want| seen.iter().any(|s| s == want))
        })
        .await,
        "{:?} {}",
        errors(),
        view.render()
    );
    let _ = stop.send(());
    worker.await.unwrap();
}
