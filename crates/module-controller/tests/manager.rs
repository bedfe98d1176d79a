//! The module manager end to end: the embedded API server with the platform's CRDs and a real
//! `docker-registry` holding a module source. Scanning creates Modules and ModuleReleases;
//! enabling a module installs its first release at once; a new channel version is applied per
//! policy (Auto, Manual with approval); a release whose schema refuses the current settings is
//! not switched in and says why; an override follows a moving tag and rolls back on delete.

#[path = "support/fixtures.rs"]
mod support;

use std::sync::Arc;

use api::module::Module;
use api::module_config::ModuleConfig;
use api::module_pull_override::ModulePullOverride;
use api::module_release::ModuleRelease;
use api::module_source::ModuleSource;
use api::module_update_policy::v1alpha2::ModuleUpdatePolicy;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use module_controller::install::Downloaded;
use module_controller::manager::Manager;
use module_plan::enabling::{Facts, version_of};
use release_controller::ManualClock;
use serde_json::{Value, json};
use support::{REPO, Source, module_image, release_image, source};

struct Cluster {
    _api: testkit::Cluster,
    client: Client,
    source: Source,
    manager: Manager,
    downloaded: Downloaded,
    clock: ManualClock,
}

/// ModuleUpdatePolicy's conversion between its served versions, as `d8 apiserver` runs it (a
/// `v1alpha1` write is stored as `v1alpha2`, without the selector); other kinds serve one
/// version.
struct MupConversion;

impl apiserver::Converter for MupConversion {
    fn convert(&self, object: Value, desired: &str) -> Result<Value, String> {
        if object["kind"] == "ModuleUpdatePolicy" {
            return api::module_update_policy::convert(&object, desired).map_err(|e| e.to_string());
        }
        apiserver::NoConversion.convert(object, desired)
    }
}

/// The cluster UUID the canary waves are computed with.
const CLUSTER_UUID: &str = "1f6a1e2c-5d0b-4c1e-9b8a-2d7f3e4c5b6a";

async fn cluster() -> Cluster {
    let source = source().await;
    let api = testkit::Cluster::start_with(|b| b.converter(MupConversion)).await;
    let dir = api.dir().to_path_buf();
    let client = api.client().await;
    let downloaded = Downloaded::open(dir.as_path().join("downloaded")).unwrap();
    let clock = ManualClock::new("2026-11-30T12:00:00Z".parse().unwrap());
    let facts = Facts {
        bundle: "Default".into(),
        edition: "ee".into(),
        deckhouse_version: version_of("v1.69.3"),
        kubernetes_version: version_of("1.29.3"),
        bootstrapped: true,
        ..Default::default()
    };
    let modules_dir = dir.as_path().join("modules");
    std::fs::create_dir_all(modules_dir.join("040-node-manager/openapi")).unwrap();
    std::fs::write(
        modules_dir.join("040-node-manager/openapi/config-values.yaml"),
        "type: object\nproperties:\n  earlyOomEnabled: {type: boolean, default: true}\n",
    )
    .unwrap();
    let embedded = module_controller::embedded::discover(&modules_dir).unwrap();
    let manager = Manager::new(
        client.clone(),
        downloaded.clone(),
        Arc::new(clock.clone()),
        facts,
    )
    .with_embedded(embedded)
    .with_cluster_uuid(CLUSTER_UUID);
    let cluster = Cluster {
        _api: api,
        client,
        source,
        manager,
        downloaded,
        clock,
    };
    cluster
        .apply::<ModuleSource>(json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleSource",
            "metadata": {"name": "example"},
            "spec": {"registry": {"scheme": "HTTP", "repo": format!("{}/{REPO}", cluster.source.upstream.host())}}
        }))
        .await;
    cluster
}

impl Cluster {
    async fn apply<K>(&self, object: Value)
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + serde::Serialize,
        <K as kube::Resource>::DynamicType: Default,
    {
        let api: Api<K> = Api::all(self.client.clone());
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let typed: K = serde_json::from_value(object.clone()).unwrap();
        if api.get_opt(&name).await.unwrap().is_some() {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(object))
                .await
                .unwrap();
        } else {
            api.create(&PostParams::default(), &typed).await.unwrap();
        }
    }

    async fn config(&self, module: &str, spec: Value) {
        self.apply::<ModuleConfig>(json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
            "metadata": {"name": module}, "spec": spec
        }))
        .await;
    }

    async fn pass(&self) {
        self.manager.reconcile_all().await.unwrap();
    }

    async fn releases(&self, module: &str) -> Vec<(String, String, String)> {
        let api: Api<ModuleRelease> = Api::all(self.client.clone());
        let mut out: Vec<(String, String, String)> = api
            .list(&ListParams::default().labels(&format!("module={module}")))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|r| {
                let s = r.status.clone().unwrap_or_default();
                (
                    r.name_any(),
                    s.phase.map(|p| p.as_str().to_owned()).unwrap_or_default(),
                    s.message,
                )
            })
            .collect();
        out.sort();
        out
    }

    async fn module(&self, name: &str) -> Module {
        Api::<Module>::all(self.client.clone())
            .get(name)
            .await
            .unwrap()
    }

    async fn release(&self, name: &str) -> ModuleRelease {
        Api::<ModuleRelease>::all(self.client.clone())
            .get(name)
            .await
            .unwrap()
    }

    async fn publish(&self, module: &str, channel: &str, version: &str, max_replicas: u32) {
        let image = module_image(&self.source.layout, module, version, max_replicas);
        self.source
            .push
            .push_image(&format!("{REPO}/{module}"), Some(version), &image)
            .await
            .unwrap();
        // A source publishes each release image under its version and the channel's tag.
        let release = release_image(&self.source.layout, module, version);
        for tag in [version, channel] {
            self.source
                .push
                .push_image(&format!("{REPO}/{module}/release"), Some(tag), &release)
                .await
                .unwrap();
        }
    }
}

impl Cluster {
    /// The lines of the manager's metrics that are series of family `name`.
    fn series(&self, name: &str) -> Vec<String> {
        let prefix = format!("{name}{{");
        self.manager
            .metrics()
            .encode()
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .map(str::to_owned)
            .collect()
    }

    /// Publishes `version` of `module` (its image and its release image under the version's
    /// tag) without moving a channel.
    async fn publish_version(&self, module: &str, version: &str) {
        let image = module_image(&self.source.layout, module, version, 10);
        self.source
            .push
            .push_image(&format!("{REPO}/{module}"), Some(version), &image)
            .await
            .unwrap();
        let release = release_image(&self.source.layout, module, version);
        self.source
            .push
            .push_image(&format!("{REPO}/{module}/release"), Some(version), &release)
            .await
            .unwrap();
    }
}

fn phase(m: &Module) -> String {
    m.status
        .as_ref()
        .and_then(|s| s.phase)
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default()
}

fn condition(m: &Module, type_: &str) -> (String, Option<String>, Option<String>) {
    let c = m
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap();
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[tokio::test]
async fn scanning_enabling_and_updating_per_policy() {
    let c = cluster().await;
    c.config(
        "deckhouse",
        json!({"version": 1, "settings": {"releaseChannel": "Stable", "update": {"mode": "Auto"}}}),
    )
    .await;
    c.pass().await;

    // Every tag of the repository became a Module, offered by the source, not installed.
    let source: ModuleSource = Api::all(c.client.clone()).get("example").await.unwrap();
    let status = source.status.unwrap();
    assert_eq!(status.modules_count, Some(3));
    let names: Vec<&str> = status.modules.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, vec!["echo", "hello", "parca"]);
    assert_eq!(status.modules[0].version.as_deref(), Some("1.0.1"));
    assert!(
        source
            .metadata
            .finalizers
            .unwrap()
            .contains(&"modules.deckhouse.io/module-exists".to_owned())
    );
    let echo = c.module("echo").await;
    assert_eq!(echo.spec.properties.available_sources, vec!["example"]);
    assert_eq!(
        echo.spec.properties.release_channel.as_deref(),
        Some("Stable")
    );
    assert_eq!(
        condition(&echo, "EnabledByModuleManager"),
        (
            "False".into(),
            Some("Bundle".into()),
            Some("turned off by bundle".into())
        )
    );
    assert!(
        c.releases("echo").await.is_empty(),
        "no release for a disabled module"
    );
    // The edition (`ee`) is known: DeckhouseEditionNotFound stays silent.
    assert!(
        c.manager
            .metrics()
            .encode()
            .contains("d8_edition_not_found{module=\"deckhouse\"} 0")
    );

    // Enabling installs the channel version at once (apply-now on the first release).
    c.config(
        "echo",
        json!({"enabled": true, "version": 1, "settings": {"count": 3}}),
    )
    .await;
    c.pass().await;
    let releases = c.releases("echo").await;
    assert_eq!(
        releases,
        vec![("echo-v1.0.1".into(), "Deployed".into(), String::new())]
    );
    let release = c.release("echo-v1.0.1").await;
    let labels = release.labels();
    assert_eq!(labels["module"], "echo");
    assert_eq!(labels["source"], "example");
    assert_eq!(labels["status"], "deployed");
    assert_eq!(labels["release-checksum"].len(), 32);
    assert_eq!(
        release.annotations()["modules.deckhouse.io/change-cause"],
        "check release (no releases in cluster)"
    );
    assert!(
        !release
            .annotations()
            .contains_key("modules.deckhouse.io/apply-now")
    );
    assert!(
        release
            .finalizers()
            .contains(&"modules.deckhouse.io/exist-on-fs".to_owned())
    );
    assert_eq!(release.owner_references()[0].name, "example");
    // Its documentation is to be rendered, owned by the release.
    let doc: api::module_documentation::ModuleDocumentation =
        Api::all(c.client.clone()).get("echo").await.unwrap();
    assert_eq!(doc.spec.version, "v1.0.1");
    assert_eq!(
        doc.spec.checksum.as_deref(),
        Some(labels["release-checksum"].as_str())
    );
    assert_eq!(doc.spec.path.as_deref(), Some("/echo/v1.0.1"));
    assert_eq!(
        (
            doc.owner_references()[0].kind.as_str(),
            doc.owner_references()[0].name.as_str()
        ),
        ("ModuleRelease", "echo-v1.0.1")
    );
    let echo = c.module("echo").await;
    assert_eq!(
        (
            phase(&echo).as_str(),
            echo.spec.properties.version.as_deref()
        ),
        ("Ready", Some("v1.0.1"))
    );
    assert_eq!(echo.spec.properties.source.as_deref(), Some("example"));
    assert_eq!(
        c.downloaded.active_version("echo").as_deref(),
        Some("1.0.1")
    );
    // Its settings are written for version 1 of a schema at version 2: ModuleConfigObsoleteVersion.
    let metrics = c.manager.metrics().encode();
    assert!(
        metrics.contains(
            "d8_module_config_obsolete_version{name=\"echo\",version=\"1\",latest=\"2\"} 1"
        ),
        "{metrics}"
    );
    let mc: ModuleConfig = Api::all(c.client.clone()).get("echo").await.unwrap();
    assert_eq!(
        mc.status.unwrap().message,
        "Update available, latest spec.settings schema version is 2"
    );

    // The source's registry is written into the module's values schema; changing the
    // source's registry settings rewrites them for the Deployed release.
    let registry_values = |c: &Cluster| -> Value {
        let dir = c.downloaded.release_dir("echo", "1.0.1");
        let text = std::fs::read_to_string(dir.join("openapi/values.yaml")).unwrap();
        serde_json::from_str::<Value>(&text).unwrap()["properties"]["registry"]["properties"]
            .clone()
    };
    let values = registry_values(&c);
    assert_eq!(
        values["base"]["default"],
        format!("{}/{REPO}/echo", c.source.upstream.host())
    );
    assert_eq!(values["scheme"]["default"], "http");
    assert_eq!(values["dockercfg"]["default"], "");
    let sources: Api<ModuleSource> = Api::all(c.client.clone());
    let before = sources.get("example").await.unwrap().annotations()
        ["modules.deckhouse.io/registry-spec-checksum"]
        .clone();
    assert_eq!(before.len(), 32);
    use base64::Engine as _;
    let docker_cfg = base64::engine::general_purpose::STANDARD.encode(
        json!({"auths": {c.source.upstream.host(): {"auth": base64::engine::general_purpose::STANDARD.encode("reader:secret")}}})
            .to_string(),
    );
    sources
        .patch(
            "example",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"registry": {"dockerCfg": docker_cfg}}})),
        )
        .await
        .unwrap();
    c.pass().await;
    assert_eq!(
        registry_values(&c)["dockercfg"]["default"],
        docker_cfg.as_str()
    );
    let after = sources.get("example").await.unwrap().annotations()
        ["modules.deckhouse.io/registry-spec-checksum"]
        .clone();
    assert_ne!(before, after);
    assert!(
        !c.release("echo-v1.0.1")
            .await
            .annotations()
            .contains_key("modules.deckhouse.io/registry-spec-changed"),
        "the mark is dropped once the values are rewritten"
    );

    // A policy on the Alpha channel: the step-by-step chain 1.1.0, 1.2.0 is created; 1.1.0 is
    // applied (Auto), 1.2.0 refuses the current settings (3 replicas, at most 2) and says so.
    c.apply::<ModuleUpdatePolicy>(json!({
        "apiVersion": "deckhouse.io/v1alpha2", "kind": "ModuleUpdatePolicy",
        "metadata": {"name": "fast"}, "spec": {"releaseChannel": "Alpha", "update": {"mode": "Auto"}}
    }))
    .await;
    c.config(
        "echo",
        json!({"enabled": true, "updatePolicy": "fast", "version": 1, "settings": {"count": 3}}),
    )
    .await;
    c.pass().await;
    let releases = c.releases("echo").await;
    assert_eq!(
        releases[0],
        ("echo-v1.0.1".into(), "Superseded".into(), String::new())
    );
    assert_eq!(
        releases[1],
        ("echo-v1.1.0".into(), "Deployed".into(), String::new())
    );
    assert_eq!(releases[2].0, "echo-v1.2.0");
    assert_eq!(releases[2].1, "Pending");
    assert_eq!(
        releases[2].2,
        "validation failed: spec.settings are not valid (version 1 converted to 2):  1 error occurred: * echo.replicas should be less than or equal to 2  "
    );
    assert_eq!(
        c.downloaded.active_version("echo").as_deref(),
        Some("1.1.0")
    );
    assert_eq!(
        c.release("echo-v1.2.0").await.labels()["modules.deckhouse.io/update-policy"],
        "fast"
    );
    // … and D8DeckhouseModuleValidationError reads why.
    let metrics = c.manager.metrics().encode();
    assert!(
        metrics.contains("deckhouse_module_configuration_error{module=\"echo\",version=\"1.2.0\",error=\"spec.settings are not valid (version 1 converted to 2):  1 error occurred: * echo.replicas should be less than or equal to 2  \"} 1"),
        "{metrics}"
    );
    // Fixing the settings lets it through on the next pass (a merge patch: `count` removed).
    c.config("echo", json!({"enabled": true, "updatePolicy": "fast", "version": 2, "settings": {"count": null, "replicas": 2}})).await;
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("echo").as_deref(),
        Some("1.2.0")
    );
    assert_eq!(c.releases("echo").await[2].1, "Deployed");
    // The error is cleared (0, no message), and the settings are at the latest version.
    let metrics = c.manager.metrics().encode();
    assert_eq!(
        metrics
            .lines()
            .filter(|l| l.starts_with("deckhouse_module_configuration_error{module=\"echo\""))
            .collect::<Vec<_>>(),
        vec![
            "deckhouse_module_configuration_error{module=\"echo\",version=\"1.2.0\",error=\"\"} 0"
        ]
    );
    assert!(
        !metrics.contains("d8_module_config_obsolete_version{"),
        "{metrics}"
    );

    // Manual mode: a new version waits for the approval annotation.
    c.apply::<ModuleUpdatePolicy>(json!({
        "apiVersion": "deckhouse.io/v1alpha2", "kind": "ModuleUpdatePolicy",
        "metadata": {"name": "manual"}, "spec": {"releaseChannel": "Stable", "update": {"mode": "Manual"}}
    }))
    .await;
    c.config("hello", json!({"enabled": true, "updatePolicy": "manual"}))
        .await;
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("hello").as_deref(),
        Some("0.2.0"),
        "the first release is applied at once"
    );
    c.publish("hello", "stable", "v0.2.1", 10).await;
    c.pass().await;
    let pending = c.releases("hello").await;
    assert_eq!(
        pending[1],
        (
            "hello-v0.2.1".into(),
            "Pending".into(),
            "Release is waiting for the 'modules.deckhouse.io/approved: \"true\"' annotation"
                .into()
        )
    );
    // … and is on d8_module_release_info for the ModuleReleaseIsWaitingManualApproval alert.
    let metrics = c.manager.metrics().encode();
    assert!(
        metrics.contains("d8_module_release_info{name=\"hello-v0.2.1\",manualApproval=\"true\",disruptionApproval=\"false\",requirementsNotMet=\"false\",notificationNotSent=\"false\",releaseQueueDepth=\"1\""),
        "{metrics}"
    );
    assert!(metrics.contains(",module=\"hello\"} 1"), "{metrics}");
    Api::<ModuleRelease>::all(c.client.clone())
        .patch(
            "hello-v0.2.1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"modules.deckhouse.io/approved": "true"}}}),
            ),
        )
        .await
        .unwrap();
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("hello").as_deref(),
        Some("0.2.1")
    );
    assert!(
        !c.manager
            .metrics()
            .encode()
            .contains("d8_module_release_info{name=\"hello-v0.2.1\""),
        "a deployed release leaves d8_module_release_info"
    );

    // A ModuleConfig for a module nobody offers.
    c.config("nonexistent", json!({"enabled": true})).await;
    c.pass().await;
    let mc: ModuleConfig = Api::all(c.client.clone()).get("nonexistent").await.unwrap();
    assert_eq!(mc.status.unwrap().message, "Ignored: unknown module name");

    // The registry module (built in) accepts its configuration: no message. Once the registry
    // controller refuses it (RegistryConfig Valid=False, prerequisites not met), the
    // ModuleConfig shows why, as Deckhouse shows a configuration error; and no longer after.
    c.config("registry", json!({"enabled": true, "version": 1}))
        .await;
    c.pass().await;
    let registry_message = |c: &Cluster| {
        let client = c.client.clone();
        async move {
            let mc: ModuleConfig = Api::all(client).get("registry").await.unwrap();
            mc.status.unwrap().message
        }
    };
    assert_eq!(registry_message(&c).await, "");
    let refusal = "the cluster must be fully managed by the platform: the module does not work in Managed Kubernetes (there is no ClusterConfiguration, Secret kube-system/d8-cluster-configuration)";
    let configs: Api<api::registry::RegistryConfig> = Api::all(c.client.clone());
    let valid = |status: &str, reason: &str, message: &str| {
        json!({"status": {"conditions": [{"type": "Valid", "status": status, "reason": reason,
            "message": message, "lastTransitionTime": "2025-01-01T00:00:00Z"}]}})
    };
    c.apply::<api::registry::RegistryConfig>(json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "RegistryConfig",
        "metadata": {"name": "registry"}, "spec": {"mode": "Managed"}
    }))
    .await;
    configs
        .patch_status(
            "registry",
            &PatchParams::default(),
            &Patch::Merge(valid("False", "PrerequisitesNotMet", refusal)),
        )
        .await
        .unwrap();
    c.pass().await;
    assert_eq!(registry_message(&c).await, format!("Error: {refusal}"));
    configs
        .patch_status(
            "registry",
            &PatchParams::default(),
            &Patch::Merge(valid("True", "Valid", "")),
        )
        .await
        .unwrap();
    c.pass().await;
    assert_eq!(registry_message(&c).await, "");

    // A module in maintenance is reported for the ModuleIsInMaintenanceMode alert, and no
    // longer once maintenance is lifted.
    let scrape = |c: &Cluster| {
        let mut registry = prometheus_client::registry::Registry::default();
        c.manager.metrics().register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    };
    c.config("hello", json!({"maintenance": "NoResourceReconciliation"}))
        .await;
    c.pass().await;
    let text = scrape(&c);
    assert!(
        text.contains(
            "deckhouse_mm_module_maintenance{module=\"hello\",state=\"NoResourceReconciliation\"} 1"
        ),
        "{text}"
    );
    c.config("hello", json!({"maintenance": null})).await;
    c.pass().await;
    let text = scrape(&c);
    assert!(
        !text.contains("deckhouse_mm_module_maintenance{module=\"hello\""),
        "{text}"
    );
    // Every module is on deckhouse_mm_module_info, with whether it is enabled.
    assert!(
        text.contains(
            "deckhouse_mm_module_info{module=\"hello\",enabled=\"true\",critical=\"false\"} 1"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn an_override_follows_a_moving_tag_and_rolls_back() {
    let c = cluster().await;
    c.config("parca", json!({"enabled": true})).await;
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("parca").as_deref(),
        Some("2.0.0")
    );

    let push_main = |text: &'static str| {
        let image = testkit::ImageBuilder::new(text)
            .files(&[
                ("module.yaml", b"name: parca\nweight: 910\n".as_slice()),
                ("templates/build.txt", text.as_bytes()),
            ])
            .build(&c.source.layout);
        let push = c.source.push.clone();
        async move {
            push.push_image(&format!("{REPO}/parca"), Some("main"), &image)
                .await
                .unwrap()
        }
    };
    push_main("build 1").await;
    c.apply::<ModulePullOverride>(json!({
        "apiVersion": "deckhouse.io/v1alpha2", "kind": "ModulePullOverride",
        "metadata": {"name": "parca"}, "spec": {"imageTag": "main", "scanInterval": "15s", "rollback": true}
    }))
    .await;
    c.pass().await;
    let overrides: Api<ModulePullOverride> = Api::all(c.client.clone());
    let o = overrides.get("parca").await.unwrap();
    let status = o.status.clone().unwrap();
    assert_eq!(status.message.as_deref(), Some("Ready"));
    let first_digest = status.image_digest.clone().unwrap();
    assert_eq!(c.downloaded.active_version("parca").as_deref(), Some("dev"));
    let doc: api::module_documentation::ModuleDocumentation =
        Api::all(c.client.clone()).get("parca").await.unwrap();
    assert_eq!(doc.spec.version, "dev");
    assert_eq!(doc.spec.path.as_deref(), Some("/modules/deployed/parca"));
    assert_eq!(doc.owner_references()[0].kind, "ModulePullOverride");
    let link = c.downloaded.root().join("modules/910-parca");
    assert_eq!(
        std::fs::read_to_string(link.join("templates/build.txt")).unwrap(),
        "build 1"
    );
    assert_eq!(
        condition(&c.module("parca").await, "IsOverridden").0,
        "True"
    );

    // The tag moves: the next pass re-installs.
    push_main("build 2").await;
    c.pass().await;
    let status = overrides.get("parca").await.unwrap().status.unwrap();
    assert_ne!(status.image_digest.unwrap(), first_digest);
    assert_eq!(
        std::fs::read_to_string(link.join("templates/build.txt")).unwrap(),
        "build 2"
    );

    // While the override exists, a new channel version is not released.
    c.publish("parca", "stable", "v2.1.0", 10).await;
    c.pass().await;
    assert_eq!(c.releases("parca").await.len(), 1);
    let source: ModuleSource = Api::all(c.client.clone()).get("example").await.unwrap();
    let parca = source
        .status
        .unwrap()
        .modules
        .into_iter()
        .find(|m| m.name == "parca")
        .unwrap();
    assert_eq!(parca.overridden, Some(true));

    // Delete with rollback: back to the deployed release.
    overrides
        .delete("parca", &DeleteParams::default())
        .await
        .unwrap();
    c.pass().await;
    assert!(
        overrides.get_opt("parca").await.unwrap().is_none(),
        "finalizer released"
    );
    assert_eq!(
        condition(&c.module("parca").await, "IsOverridden").0,
        "False"
    );
    assert_eq!(
        c.downloaded.active_version("parca").as_deref(),
        Some("2.0.0")
    );
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("parca").as_deref(),
        Some("2.1.0"),
        "releases resume"
    );
}

#[tokio::test]
async fn several_sources_without_a_choice_is_a_conflict() {
    let c = cluster().await;
    c.apply::<ModuleSource>(json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleSource",
        "metadata": {"name": "mirror"},
        "spec": {"registry": {"scheme": "HTTP", "repo": format!("{}/{REPO}", c.source.upstream.host())}}
    }))
    .await;
    c.config("echo", json!({"enabled": true})).await;
    c.pass().await;
    let echo = c.module("echo").await;
    assert_eq!(
        echo.spec.properties.available_sources,
        vec!["example", "mirror"]
    );
    assert_eq!(phase(&echo), "Conflict");
    assert_eq!(
        condition(&echo, "EnabledByModuleManager"),
        (
            "False".into(),
            Some("Conflict".into()),
            Some("several available sources".into())
        )
    );
    assert!(
        c.releases("echo").await.is_empty(),
        "nothing is downloaded in conflict"
    );
    // The ModuleAtConflict alert's metric, labelled as Deckhouse labels it.
    let metrics = c.manager.metrics().encode();
    assert!(
        metrics
            .lines()
            .any(|l| l == "d8_module_at_conflict{moduleName=\"echo\"} 1"),
        "{metrics}"
    );
    // Choosing a source settles it: the release comes from the chosen source.
    c.config("echo", json!({"enabled": true, "source": "mirror"}))
        .await;
    c.pass().await;
    c.pass().await;
    let echo = c.module("echo").await;
    assert_eq!(echo.spec.properties.source.as_deref(), Some("mirror"));
    assert_eq!(phase(&echo), "Ready");
    assert_eq!(c.release("echo-v1.0.1").await.labels()["source"], "mirror");
    assert!(
        !c.manager
            .metrics()
            .encode()
            .contains("d8_module_at_conflict{"),
        "settled: no conflict left"
    );
    // An allow-disabling annotation on an enabled module's ModuleConfig is reported
    // (D8HasModuleConfigAllowedToDisable) until the module is disabled.
    Api::<ModuleConfig>::all(c.client.clone())
        .patch(
            "echo",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"modules.deckhouse.io/allow-disabling": "true"}}}),
            ),
        )
        .await
        .unwrap();
    c.pass().await;
    let metrics = c.manager.metrics().encode();
    assert!(
        metrics
            .lines()
            .any(|l| l == "d8_moduleconfig_allowed_to_disable{module=\"echo\"} 1"),
        "{metrics}"
    );
    c.config("echo", json!({"enabled": false, "source": "mirror"}))
        .await;
    c.pass().await;
    let metrics = c.manager.metrics().encode();
    assert!(
        metrics
            .lines()
            .any(|l| l == "d8_moduleconfig_allowed_to_disable{module=\"echo\"} 0"),
        "{metrics}"
    );
}

/// A webhook receiver answering 200 and keeping every request body.
async fn webhook() -> (String, Arc<std::sync::Mutex<Vec<Value>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = bodies.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = stream.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    data.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&data).into_owned();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length: usize = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if data.len() < end + 4 + length {
                        continue;
                    }
                    let body: Value = serde_json::from_slice(&data[end + 4..end + 4 + length])
                        .unwrap_or(Value::Null);
                    seen.lock().unwrap().push(body);
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    return;
                }
            });
        }
    });
    (url, bodies)
}

#[tokio::test]
async fn autopatch_windows_canary_and_notification() {
    let c = cluster().await;
    let (url, notifications) = webhook().await;
    c.config(
        "deckhouse",
        json!({"version": 1, "settings": {"releaseChannel": "Stable", "update": {"mode": "Auto"}}}),
    )
    .await;

    // AutoPatch: a patch goes in by itself...
    c.apply::<ModuleUpdatePolicy>(json!({
        "apiVersion": "deckhouse.io/v1alpha2", "kind": "ModuleUpdatePolicy",
        "metadata": {"name": "patches"}, "spec": {"releaseChannel": "Stable", "update": {"mode": "AutoPatch"}}
    }))
    .await;
    c.config("echo", json!({"enabled": true, "updatePolicy": "patches"}))
        .await;
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("echo").as_deref(),
        Some("1.0.1")
    );
    c.publish("echo", "stable", "v1.0.2", 10).await;
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("echo").as_deref(),
        Some("1.0.2")
    );

    // ...a minor, with the platform's notification webhook configured, is announced once
    // (releaseType Minor), waits for the notification time and for approval.
    c.config(
        "deckhouse",
        json!({"version": 1, "settings": {"releaseChannel": "Stable", "update": {
            "mode": "Auto",
            "notification": {"webhook": url, "minimalNotificationTime": "1h"}
        }}}),
    )
    .await;
    c.publish("echo", "stable", "v1.1.0", 10).await;
    c.pass().await;
    let waiting = c.release("echo-v1.1.0").await;
    assert_eq!(
        waiting.status.as_ref().unwrap().message,
        // Deckhouse's wording: the notification delay replaces the approval reason.
        "Release is postponed by notification"
    );
    assert_eq!(
        waiting.annotations()["modules.deckhouse.io/notified"],
        "true"
    );
    assert_eq!(
        waiting.annotations()["modules.deckhouse.io/notification-time-shift"],
        "true"
    );
    assert_eq!(
        waiting.spec.apply_after.as_ref().unwrap().0.to_string(),
        "2026-11-30T13:00:00Z"
    );
    {
        let sent = notifications.lock().unwrap();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(sent[0]["subject"], "Module");
        assert_eq!(sent[0]["version"], "1.1.0");
        let message = sent[0]["message"].as_str().unwrap();
        assert!(message.contains("1.1.0 is available"), "{message}");
    }
    Api::<ModuleRelease>::all(c.client.clone())
        .patch(
            "echo-v1.1.0",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"modules.deckhouse.io/approved": "true"}}}),
            ),
        )
        .await
        .unwrap();
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("echo").as_deref(),
        Some("1.0.2")
    );
    assert_eq!(
        c.release("echo-v1.1.0").await.status.unwrap().message,
        "Release is postponed until 30 Nov 26 13:00 UTC"
    );
    c.clock.advance(jiff::SignedDuration::from_mins(61));
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("echo").as_deref(),
        Some("1.1.0")
    );
    assert_eq!(notifications.lock().unwrap().len(), 1, "announced once");

    // Auto with an update window (and no notification any more): a patch waits for the
    // window, then goes in.
    c.config(
        "deckhouse",
        json!({"version": 1, "settings": {"releaseChannel": "Stable", "update": {"mode": "Auto", "notification": null}}}),
    )
    .await;
    c.apply::<ModuleUpdatePolicy>(json!({
        "apiVersion": "deckhouse.io/v1alpha2", "kind": "ModuleUpdatePolicy",
        "metadata": {"name": "night"},
        "spec": {"releaseChannel": "Stable", "update": {"mode": "Auto", "windows": [{"from": "01:00", "to": "02:00"}]}}
    }))
    .await;
    c.config("hello", json!({"enabled": true, "updatePolicy": "night"}))
        .await;
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("hello").as_deref(),
        Some("0.2.0"),
        "the first release ignores windows"
    );
    c.publish("hello", "stable", "v0.2.1", 10).await;
    c.pass().await;
    let message = c.release("hello-v0.2.1").await.status.unwrap().message;
    assert_eq!(
        message,
        "Release is waiting for the update window until 01 Dec 26 01:00 UTC"
    );
    assert_eq!(
        c.downloaded.active_version("hello").as_deref(),
        Some("0.2.0")
    );
    c.clock.set("2026-12-01T01:30:00Z".parse().unwrap());
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("hello").as_deref(),
        Some("0.2.1")
    );

    // Canary: the channel's waves postpone the new version by this cluster's wave.
    c.config("parca", json!({"enabled": true})).await;
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("parca").as_deref(),
        Some("2.0.0")
    );
    let wave = release_plan::canary::wave(CLUSTER_UUID, "v2.1.0", 5);
    assert!(
        wave >= 2,
        "the fixture's wave must outlast the notification time"
    );
    let image = module_image(&c.source.layout, "parca", "v2.1.0", 10);
    c.source
        .push
        .push_image(&format!("{REPO}/parca"), Some("v2.1.0"), &image)
        .await
        .unwrap();
    let release = testkit::ImageBuilder::new("parca-release-canary")
        .files(&[(
            "version.json",
            br#"{"version":"v2.1.0","canary":{"stable":{"enabled":true,"waves":5,"interval":"1h"}}}"#,
        )])
        .build(&c.source.layout);
    c.source
        .push
        .push_image(&format!("{REPO}/parca/release"), Some("stable"), &release)
        .await
        .unwrap();
    let created_at = release_controller::Clock::now(&c.clock);
    c.pass().await;
    let postponed = c.release("parca-v2.1.0").await;
    let apply_after = postponed.spec.apply_after.as_ref().unwrap().0;
    assert_eq!(
        apply_after,
        created_at
            .checked_add(jiff::SignedDuration::from_hours(wave as i64))
            .unwrap()
    );
    let message = postponed.status.unwrap().message;
    assert!(message.starts_with("Release is postponed"), "{message}");
    assert_eq!(
        c.downloaded.active_version("parca").as_deref(),
        Some("2.0.0")
    );
    c.clock
        .advance(jiff::SignedDuration::from_hours(wave as i64 + 1));
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("parca").as_deref(),
        Some("2.1.0")
    );
}

#[tokio::test]
async fn missing_policy_and_broken_sequence_are_reported() {
    let c = cluster().await;
    c.config(
        "deckhouse",
        json!({"version": 1, "settings": {"releaseChannel": "Stable", "update": {"mode": "Manual"}}}),
    )
    .await;
    c.config("echo", json!({"enabled": true})).await;
    c.config("hello", json!({"enabled": true})).await;
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("echo").as_deref(),
        Some("1.0.1")
    );
    assert_eq!(
        c.downloaded.active_version("hello").as_deref(),
        Some("0.2.0")
    );

    // A Pending echo release whose module names a policy that does not exist: each pass
    // counts it (D8DeckhouseModuleUpdatePolicyNotFound), until the policy appears.
    c.publish("echo", "stable", "v1.1.0", 10).await;
    c.pass().await;
    assert_eq!(
        c.release("echo-v1.1.0")
            .await
            .status
            .unwrap()
            .phase
            .unwrap()
            .as_str(),
        "Pending"
    );
    c.config("echo", json!({"enabled": true, "updatePolicy": "gone"}))
        .await;
    let not_found = |c: &Cluster| {
        c.series("deckhouse_module_update_policy_not_found")
            .into_iter()
            .next()
    };
    assert_eq!(not_found(&c), None);
    c.pass().await;
    assert_eq!(
        c.release("echo-v1.1.0").await.status.unwrap().message,
        "Update policy gone not found"
    );
    assert_eq!(
        not_found(&c).as_deref(),
        Some(
            "deckhouse_module_update_policy_not_found{version=\"v1.1.0\",module_release=\"echo-v1.1.0\",module=\"echo\"} 1"
        )
    );
    c.apply::<ModuleUpdatePolicy>(json!({
        "apiVersion": "deckhouse.io/v1alpha2", "kind": "ModuleUpdatePolicy",
        "metadata": {"name": "gone"}, "spec": {"releaseChannel": "Stable", "update": {"mode": "Manual"}}
    }))
    .await;
    c.pass().await;
    c.pass().await;
    assert!(not_found(&c).unwrap().ends_with("} 1"), "no longer counted");

    // hello's channel jumps from 0.2 to 0.4 with no 0.3 in the registry: the releases cannot be
    // created step by step (DeckhouseModuleUpdatingFailedBrokenSequence) …
    c.publish("hello", "stable", "v0.4.0", 10).await;
    c.pass().await;
    let broken = |c: &Cluster| c.series("d8_module_updating_broken_sequence");
    assert_eq!(
        broken(&c),
        vec![format!(
            "d8_module_updating_broken_sequence{{module=\"hello\",version=\"v0.4.0\",registry=\"{}/{REPO}\",actualVersion=\"v0.2.0\"}} 1",
            c.source.upstream.host()
        )]
    );
    assert!(
        !c.releases("hello")
            .await
            .iter()
            .any(|r| r.0 == "hello-v0.4.0")
    );
    // … until 0.3 is published: the chain is created and the failure cleared.
    c.publish_version("hello", "v0.3.0").await;
    c.pass().await;
    let names: Vec<String> = c.releases("hello").await.into_iter().map(|r| r.0).collect();
    assert!(names.contains(&"hello-v0.3.0".to_owned()), "{names:?}");
    assert!(names.contains(&"hello-v0.4.0".to_owned()), "{names:?}");
    assert_eq!(broken(&c), Vec::<String>::new());
}

/// The ModuleUpdatePolicy CRD with `version` as its stored version.
async fn store_update_policies_as(client: &Client, version: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = crds.get("moduleupdatepolicies.deckhouse.io").await.unwrap();
    for v in &mut crd.spec.versions {
        v.storage = v.name == version;
    }
    crds.replace(&crd.name_any(), &PostParams::default(), &crd)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_deprecated_update_policy_selecting_a_module_is_reported() {
    use api::module_update_policy::v1alpha1;
    let c = cluster().await;
    c.config("echo", json!({"enabled": true})).await;
    c.pass().await;
    let deprecated = |c: &Cluster| c.series("d8_deprecated_update_policy");
    assert_eq!(deprecated(&c), Vec::<String>::new());
    let policy = |name: &str, selector: Value| {
        json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleUpdatePolicy",
            "metadata": {"name": name},
            "spec": {"update": {"mode": "Auto"}, "moduleReleaseSelector": {"labelSelector": selector}}})
    };
    // A policy written while v1alpha1 was the stored version (a cluster from before v1alpha2)
    // keeps its selector after the upgrade; one written since is stored without it.
    store_update_policies_as(&c.client, "v1alpha1").await;
    c.apply::<v1alpha1::ModuleUpdatePolicy>(policy(
        "legacy",
        json!({"matchLabels": {"source": "example"}}),
    ))
    .await;
    c.apply::<v1alpha1::ModuleUpdatePolicy>(policy(
        "other-source",
        json!({"matchLabels": {"source": "elsewhere"}}),
    ))
    .await;
    store_update_policies_as(&c.client, "v1alpha2").await;
    c.apply::<v1alpha1::ModuleUpdatePolicy>(policy(
        "fresh",
        json!({"matchExpressions": [{"key": "module", "operator": "In", "values": ["echo"]}]}),
    ))
    .await;
    c.pass().await;
    assert_eq!(
        deprecated(&c),
        vec!["d8_deprecated_update_policy{moduleName=\"echo\",updatePolicy=\"legacy\"} 1"]
    );
    // Bound to a policy by name (ModuleConfig.spec.updatePolicy), the module is no longer
    // reported …
    c.config("echo", json!({"enabled": true, "updatePolicy": "fresh"}))
        .await;
    c.pass().await;
    assert_eq!(deprecated(&c), Vec::<String>::new());
    // … nor once the selector is retired as Deckhouse's alert says (the write stores v1alpha2).
    c.config("echo", json!({"enabled": true, "updatePolicy": null}))
        .await;
    c.pass().await;
    assert_eq!(deprecated(&c).len(), 1);
    Api::<v1alpha1::ModuleUpdatePolicy>::all(c.client.clone())
        .patch(
            "legacy",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([{"op": "replace",
                    "path": "/spec/moduleReleaseSelector/labelSelector/matchLabels",
                    "value": {"": ""}}]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    c.pass().await;
    assert_eq!(deprecated(&c), Vec::<String>::new());
}

#[tokio::test]
async fn an_invalid_intermediate_release_image_is_reported_and_skipped() {
    let c = cluster().await;
    c.config(
        "deckhouse",
        json!({"version": 1, "settings": {"releaseChannel": "Stable", "update": {"mode": "Manual"}}}),
    )
    .await;
    c.config("hello", json!({"enabled": true})).await;
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("hello").as_deref(),
        Some("0.2.0")
    );
    // The channel moves from 0.2 to 0.4; 0.3 is in the registry, but its release image holds
    // no version.json.
    let image = module_image(&c.source.layout, "hello", "v0.3.0", 10);
    c.source
        .push
        .push_image(&format!("{REPO}/hello"), Some("v0.3.0"), &image)
        .await
        .unwrap();
    let broken = testkit::ImageBuilder::new("hello-release-broken")
        .files(&[("changelog.yaml", b"features:\n- broken\n".as_slice())])
        .build(&c.source.layout);
    c.source
        .push
        .push_image(&format!("{REPO}/hello/release"), Some("v0.3.0"), &broken)
        .await
        .unwrap();
    c.publish("hello", "stable", "v0.4.0", 10).await;
    c.pass().await;
    let not_valid = |c: &Cluster| c.series("d8_module_updating_module_is_not_valid");
    assert_eq!(
        not_valid(&c),
        vec![format!(
            "d8_module_updating_module_is_not_valid{{module=\"hello\",version=\"v0.3.0\",registry=\"{}/{REPO}\",actualVersion=\"v0.2.0\"}} 1",
            c.source.upstream.host()
        )]
    );
    // The step is not created; the walk goes on to the channel's release.
    let names: Vec<String> = c.releases("hello").await.into_iter().map(|r| r.0).collect();
    assert!(!names.contains(&"hello-v0.3.0".to_owned()), "{names:?}");
    assert!(names.contains(&"hello-v0.4.0".to_owned()), "{names:?}");
    let source = Api::<ModuleSource>::all(c.client.clone())
        .get("example")
        .await
        .unwrap();
    let entry = source
        .status
        .unwrap()
        .modules
        .into_iter()
        .find(|m| m.name == "hello")
        .unwrap();
    let error = entry.error.unwrap_or_default();
    assert!(
        error.starts_with("step by step update failed: load release metadata v0.3.0: ")
            && error.ends_with(": module is corrupted"),
        "{error}"
    );
    // A valid release image for 0.3 fills the hole and clears the alert.
    let release = support::release_image(&c.source.layout, "hello", "v0.3.0");
    c.source
        .push
        .push_image(&format!("{REPO}/hello/release"), Some("v0.3.0"), &release)
        .await
        .unwrap();
    c.pass().await;
    assert_eq!(not_valid(&c), Vec::<String>::new());
    let names: Vec<String> = c.releases("hello").await.into_iter().map(|r| r.0).collect();
    assert!(names.contains(&"hello-v0.3.0".to_owned()), "{names:?}");
}

/// The release image of a module's channel cannot be read: the source reports the module's
/// version `unknown`; for a module its ModuleConfig enables from this source, with the error in
/// `status.modules[].error` and `d8_module_updating_module_is_not_valid{version="unknown"}`
/// (DeckhouseModuleUpdatingFailedModuleIsNotValid) until the channel can be read again; for a
/// module nobody enabled, silently.
#[tokio::test]
async fn an_unreadable_channel_image_is_reported_for_a_module_enabled_from_the_source() {
    let c = cluster().await;
    c.config("hello", json!({"enabled": true})).await;
    c.pass().await;
    assert_eq!(
        c.downloaded.active_version("hello").as_deref(),
        Some("0.2.0")
    );
    // Both hello's (enabled) and parca's (not enabled) stable channel images hold no
    // version.json.
    let broken = testkit::ImageBuilder::new("channel-broken")
        .files(&[("changelog.yaml", b"features:\n- broken\n".as_slice())])
        .build(&c.source.layout);
    for module in ["hello", "parca"] {
        c.source
            .push
            .push_image(&format!("{REPO}/{module}/release"), Some("stable"), &broken)
            .await
            .unwrap();
    }
    c.pass().await;
    let not_valid = |c: &Cluster| c.series("d8_module_updating_module_is_not_valid");
    assert_eq!(
        not_valid(&c),
        vec![format!(
            "d8_module_updating_module_is_not_valid{{module=\"hello\",version=\"unknown\",registry=\"{}/{REPO}\"}} 1",
            c.source.upstream.host()
        )]
    );
    let status = || async {
        Api::<ModuleSource>::all(c.client.clone())
            .get("example")
            .await
            .unwrap()
            .status
            .unwrap()
    };
    let s = status().await;
    let entry = |name: &str| s.modules.iter().find(|m| m.name == name).unwrap().clone();
    let hello = entry("hello");
    assert_eq!(hello.version.as_deref(), Some("unknown"));
    assert!(
        hello.error.as_deref().is_some_and(|e| !e.is_empty()),
        "{hello:?}"
    );
    assert_eq!(hello.pull_error, None);
    let parca = entry("parca");
    assert_eq!(parca.version.as_deref(), Some("unknown"));
    assert_eq!((parca.error, parca.pull_error), (None, None));
    assert_eq!(
        s.message.as_deref(),
        Some(api::module_source::MESSAGE_SOME_ERRORS)
    );
    // Enabled from another source, hello is no longer this source's concern.
    c.config("hello", json!({"enabled": true, "source": "elsewhere"}))
        .await;
    c.pass().await;
    assert_eq!(not_valid(&c), Vec::<String>::new());
    let s = status().await;
    assert_eq!(
        s.modules.iter().find(|m| m.name == "hello").unwrap().error,
        None
    );
    // From this source again and readable again: the alert clears, the version is back.
    c.config("hello", json!({"enabled": true, "source": null}))
        .await;
    c.pass().await;
    assert_eq!(not_valid(&c).len(), 1);
    c.publish("hello", "stable", "v0.2.0", 10).await;
    c.pass().await;
    assert_eq!(not_valid(&c), Vec::<String>::new());
    let s = status().await;
    let hello = s.modules.iter().find(|m| m.name == "hello").unwrap();
    assert_ne!(hello.version.as_deref(), Some("unknown"));
    assert_eq!(hello.error, None);
}
