//! Applications end to end: the embedded API server, a real `docker-registry` holding an
//! `echo` package in three versions (version images with rules and a settings schema, bundles
//! with a chart), and the package controller's passes — what `kubectl get` shows in the
//! Applications' namespaces afterwards.

use api::packages::{
    Application, ApplicationPackage, ApplicationPackageVersion, ApplicationSpec, PackageRegistry,
    PackageRepository, PackageRepositorySpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use package_controller::controller::{Controller, Options};
use serde_json::json;
use testkit::image::Layout;
use testkit::push::Registry;
use testkit::{Cluster, ImageBuilder, Upstream};

const REPO: &str = "packages";

const PACKAGE_YAML: &str = r#"name: echo
type: Application
description: {en: An echo server}
category: Networking
stage: General Availability
versionCompatibilityRules:
  upgrade:
    allowSkipMinor: 0
  downgrade:
    maxRollback: 1
"#;

const SETTINGS: &str = r#"type: object
properties:
  greeting: {type: string, default: hello}
  replicas: {type: integer, default: 1, maximum: 3}
"#;

const CHART: &str = "apiVersion: v2\nname: echo\nversion: 0.1.0\n";

const CM: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-echo
data:
  greeting: {{ .Values.echo.greeting | quote }}
  version: {{ .Chart.AppVersion | default "none" | quote }}
"#;

const INGRESS: &str = r#"apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {{ .Release.Name }}
  annotations:
    packages.deckhouse.io/is-application-endpoint: "true"
spec:
  rules:
  - host: {{ .Release.Name }}.{{ .Release.Namespace }}.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: echo, port: {number: 80}}}
"#;

async fn push(push: &Registry, layout: &Layout, version: &str) {
    push_with(push, layout, version, PACKAGE_YAML).await;
}

async fn push_with(push: &Registry, layout: &Layout, version: &str, package_yaml: &str) {
    let marker = ImageBuilder::new("package-marker").build(layout);
    push.push_image(REPO, Some("echo"), &marker).await.unwrap();
    let meta = ImageBuilder::new(&format!("echo-meta-{version}"))
        .files(&[
            ("package.yaml", package_yaml.as_bytes()),
            ("openapi/settings.yaml", SETTINGS.as_bytes()),
        ])
        .build(layout);
    push.push_image(&format!("{REPO}/echo/version"), Some(version), &meta)
        .await
        .unwrap();
    let chart = format!("{CHART}appVersion: {version}\n");
    let only_v1 = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: only-v1}\ndata: {}\n";
    let mut files: Vec<(&str, &[u8])> = vec![
        ("Chart.yaml", chart.as_bytes()),
        ("templates/cm.yaml", CM.as_bytes()),
        ("templates/ingress.yaml", INGRESS.as_bytes()),
        ("openapi/settings.yaml", SETTINGS.as_bytes()),
    ];
    if version == "v1.0.0" {
        files.push(("templates/only-v1.yaml", only_v1.as_bytes()));
    }
    let bundle = ImageBuilder::new(&format!("echo-bundle-{version}"))
        .files(&files)
        .build(layout);
    push.push_image(&format!("{REPO}/echo"), Some(version), &bundle)
        .await
        .unwrap();
}

/// Points release channel `tag` of `echo` at `version` (`R/echo/release:<tag>`).
async fn channel(push: &Registry, layout: &Layout, tag: &str, version: &str) {
    let json = format!(r#"{{"version": "{version}"}}"#);
    let image = ImageBuilder::new(&format!("echo-{tag}-{version}"))
        .files(&[("version.json", json.as_bytes())])
        .build(layout);
    push.push_image(&format!("{REPO}/echo/release"), Some(tag), &image)
        .await
        .unwrap();
}

async fn repository(client: &Client, upstream: &Upstream) {
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
}

async fn namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
}

async fn app(client: &Client, ns: &str, version: &str, settings: serde_json::Value) {
    let api: Api<Application> = Api::namespaced(client.clone(), ns);
    let mut a = Application::new(
        "shop",
        ApplicationSpec {
            package_name: "echo".into(),
            package_version: version.into(),
            package_repository_name: Some("main".into()),
            settings: Some(settings),
            ..Default::default()
        },
    );
    a.metadata.namespace = Some(ns.into());
    api.create(&PostParams::default(), &a).await.unwrap();
}

async fn change(client: &Client, ns: &str, spec: serde_json::Value) {
    let api: Api<Application> = Api::namespaced(client.clone(), ns);
    api.patch(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": spec})),
    )
    .await
    .unwrap();
}

async fn get(client: &Client, ns: &str) -> Application {
    Api::<Application>::namespaced(client.clone(), ns)
        .get("shop")
        .await
        .unwrap()
}

fn condition(app: &Application, t: &str) -> (String, String, String) {
    let c = app
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == t)
        .unwrap_or_else(|| panic!("no {t} in {:?}", app.status));
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn installed(app: &Application) -> Option<String> {
    app.status
        .as_ref()?
        .current_version
        .as_ref()?
        .version
        .clone()
}

async fn cm(client: &Client, ns: &str, name: &str) -> Option<ConfigMap> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .unwrap()
}

async fn data(client: &Client, ns: &str) -> (String, String) {
    let cm = cm(client, ns, "shop-echo").await.expect("shop-echo exists");
    let d = cm.data.unwrap();
    (d["greeting"].clone(), d["version"].clone())
}

#[tokio::test]
async fn applications_install_upgrade_roll_back_and_uninstall_per_namespace() {
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(&dir.path().join("layout")).unwrap();
    let registry = Registry::of(&upstream);
    for v in ["v1.0.0", "v1.1.0", "v1.2.0"] {
        push(&registry, &layout, v).await;
    }
    repository(&client, &upstream).await;
    let controller = Controller::new(
        client.clone(),
        Options {
            packages_dir: dir.path().join("packages"),
            ..Default::default()
        },
    );
    controller.pass().await.unwrap();
    for ns in ["a", "b"] {
        namespace(&client, ns).await;
    }
    app(&client, "a", "v1.0.0", json!({"greeting": "hi"})).await;
    app(&client, "b", "v1.0.0", json!({})).await;
    controller.pass().await.unwrap();

    // Version 1 in both namespaces, each with its own settings.
    let a = get(&client, "a").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"), "{:?}", a.status);
    assert_eq!(condition(&a, "Installed").0, "True");
    assert_eq!(condition(&a, "Ready").0, "True");
    assert_eq!(
        a.status
            .as_ref()
            .unwrap()
            .summary
            .as_ref()
            .unwrap()
            .state
            .as_deref(),
        Some("Ready")
    );
    assert!(
        a.finalizers()
            .contains(&"application.deckhouse.io/statistic-registered".to_owned())
    );
    assert_eq!(
        a.status.as_ref().unwrap().urls[0].url,
        "http://shop.a.example.com/"
    );
    assert_eq!(
        a.status.as_ref().unwrap().last_applied_configuration,
        Some(json!({"greeting": "hi", "replicas": 1}))
    );
    assert_eq!(data(&client, "a").await, ("hi".into(), "v1.0.0".into()));
    assert_eq!(data(&client, "b").await, ("hello".into(), "v1.0.0".into()));
    assert!(cm(&client, "a", "only-v1").await.is_some());
    let apvs: Api<ApplicationPackageVersion> = Api::all(client.clone());
    let v1 = apvs.get("main-echo-v1.0.0").await.unwrap().status.unwrap();
    assert_eq!(v1.used_by_count, Some(2));
    let pkg = Api::<ApplicationPackage>::all(client.clone())
        .get("echo")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(pkg.instances_overall, Some(2));
    assert_eq!(pkg.instances.keys().collect::<Vec<_>>(), ["a", "b"]);

    // Settings the schema refuses: reported, nothing changes.
    change(
        &client,
        "a",
        json!({"settings": {"greeting": "bye", "replicas": 9}}),
    )
    .await;
    controller.pass().await.unwrap();
    let a = get(&client, "a").await;
    let (status, reason, message) = condition(&a, "Processed");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "SettingsInvalid")
    );
    assert_eq!(
        message,
        "spec.settings are not valid:  1 error occurred: * echo.replicas should be less than or equal to 3  "
    );
    assert_eq!(data(&client, "a").await, ("hi".into(), "v1.0.0".into()));
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"));

    // An upgrade the rules forbid (it skips v1.1.0): refused with the rule named.
    change(
        &client,
        "a",
        json!({"packageVersion": "v1.2.0", "settings": {"greeting": "bye", "replicas": null}}),
    )
    .await;
    controller.pass().await.unwrap();
    let a = get(&client, "a").await;
    let (status, reason, message) = condition(&a, "Processed");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "VersionChangeRefused")
    );
    assert!(
        message.contains("versionCompatibilityRules.upgrade.allowSkipMinor"),
        "{message}"
    );
    let summary = a.status.as_ref().unwrap().summary.clone().unwrap();
    assert_eq!(summary.state.as_deref(), Some("Degraded"));
    assert!(summary.message.unwrap().ends_with("(v1.0.0 keeps running)"));
    assert_eq!(data(&client, "a").await, ("hi".into(), "v1.0.0".into()));

    // An upgrade within the rules: applied; what left the chart is deleted.
    change(&client, "a", json!({"packageVersion": "v1.1.0"})).await;
    controller.pass().await.unwrap();
    let a = get(&client, "a").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.1.0"), "{:?}", a.status);
    assert_eq!(condition(&a, "Processed").0, "True");
    assert_eq!(data(&client, "a").await, ("bye".into(), "v1.1.0".into()));
    assert!(cm(&client, "a", "only-v1").await.is_none());
    assert!(
        cm(&client, "b", "only-v1").await.is_some(),
        "b is untouched"
    );
    let v1 = apvs.get("main-echo-v1.0.0").await.unwrap().status.unwrap();
    assert_eq!(v1.used_by_count, Some(1));
    assert_eq!(v1.used_by[0].namespace.as_deref(), Some("b"));
    let v11 = apvs.get("main-echo-v1.1.0").await.unwrap().status.unwrap();
    assert_eq!(v11.used_by_count, Some(1));

    // A rollback within maxRollback (1): applied.
    change(&client, "a", json!({"packageVersion": "v1.0.0"})).await;
    controller.pass().await.unwrap();
    let a = get(&client, "a").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"));
    assert_eq!(data(&client, "a").await, ("bye".into(), "v1.0.0".into()));
    assert!(cm(&client, "a", "only-v1").await.is_some());

    // Deleting one Application removes what it installed and nothing else.
    Api::<Application>::namespaced(client.clone(), "a")
        .delete("shop", &DeleteParams::default())
        .await
        .unwrap();
    controller.pass().await.unwrap();
    assert!(
        Api::<Application>::namespaced(client.clone(), "a")
            .get_opt("shop")
            .await
            .unwrap()
            .is_none()
    );
    assert!(cm(&client, "a", "shop-echo").await.is_none());
    assert!(cm(&client, "a", "only-v1").await.is_none());
    assert_eq!(data(&client, "b").await, ("hello".into(), "v1.0.0".into()));
    let b = get(&client, "b").await;
    assert_eq!(condition(&b, "Ready").0, "True");
    let v1 = apvs.get("main-echo-v1.0.0").await.unwrap().status.unwrap();
    assert_eq!(v1.used_by_count, Some(1));
    let pkg = Api::<ApplicationPackage>::all(client.clone())
        .get("echo")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(pkg.instances_overall, Some(1));
    assert_eq!(pkg.instances.keys().collect::<Vec<_>>(), ["b"]);
}

#[tokio::test]
async fn an_application_follows_its_release_channel_within_the_requirements() {
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(&dir.path().join("layout")).unwrap();
    let registry = Registry::of(&upstream);
    push(&registry, &layout, "v1.0.0").await;
    push(&registry, &layout, "v1.1.0").await;
    let newer = format!("{PACKAGE_YAML}requirements:\n  deckhouse: \">= 1.80\"\n");
    push_with(&registry, &layout, "v1.2.0", &newer).await;
    channel(&registry, &layout, "stable", "1.0.0").await;
    repository(&client, &upstream).await;
    let controller = Controller::new(
        client.clone(),
        Options {
            packages_dir: dir.path().join("packages"),
            deckhouse_version: Some(semver::Version::new(1, 75, 0)),
            ..Default::default()
        },
    );
    controller.pass().await.unwrap();
    namespace(&client, "c").await;
    // spec.packageVersion says v1.1.0; the channel it follows says v1.0.0, and wins.
    let api: Api<Application> = Api::namespaced(client.clone(), "c");
    let mut a = Application::new(
        "shop",
        ApplicationSpec {
            package_name: "echo".into(),
            package_version: "v1.1.0".into(),
            package_repository_name: Some("main".into()),
            release_channel: Some("Stable".into()),
            ..Default::default()
        },
    );
    a.metadata.namespace = Some("c".into());
    api.create(&PostParams::default(), &a).await.unwrap();
    controller.pass().await.unwrap();
    let a = get(&client, "c").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"), "{:?}", a.status);
    let current = a.status.as_ref().unwrap().current_version.clone().unwrap();
    assert_eq!(current.channel.as_deref(), Some("Stable"));
    assert_eq!(data(&client, "c").await.1, "v1.0.0");

    // The channel moves on: the Application follows it, under the compatibility rules.
    channel(&registry, &layout, "stable", "1.1.0").await;
    controller.pass().await.unwrap();
    let a = get(&client, "c").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.1.0"), "{:?}", a.status);
    assert_eq!(data(&client, "c").await.1, "v1.1.0");

    // A version the platform is too old for: refused with the requirement, v1.1.0 runs on.
    channel(&registry, &layout, "stable", "1.2.0").await;
    controller.pass().await.unwrap();
    let a = get(&client, "c").await;
    let (status, reason, message) = condition(&a, "Processed");
    assert_eq!(
        (status.as_str(), reason.as_str(), message.as_str()),
        (
            "False",
            "RequirementsNotMet",
            "requirement deckhouse >= 1.80 is not met: the cluster runs 1.75.0"
        )
    );
    assert_eq!(installed(&a).as_deref(), Some("v1.1.0"));
    assert_eq!(data(&client, "c").await.1, "v1.1.0");

    // A channel the repository does not publish: said so, nothing changes.
    change(&client, "c", json!({"releaseChannel": "Alpha"})).await;
    controller.pass().await.unwrap();
    let a = get(&client, "c").await;
    let (status, reason, message) = condition(&a, "Processed");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ReleaseChannelUnavailable")
    );
    assert!(
        message.starts_with("release channel Alpha of package echo: "),
        "{message}"
    );
    assert_eq!(installed(&a).as_deref(), Some("v1.1.0"));
    assert_eq!(data(&client, "c").await.1, "v1.1.0");
}

const BEFORE_HELM_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","beforeHelm":1}'
  exit 0
fi
echo '[{"op":"add","path":"/greeter/greeting","value":"from-before-helm"}]' > "$VALUES_JSON_PATCH_PATH"
"#;

const AFTER_DELETE_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","afterDeleteHelm":1}'
  exit 0
fi
echo '{"operation":"CreateOrUpdate","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"greeter-gone","namespace":"h"},"data":{}}}' > "$KUBERNETES_PATCH_PATH"
"#;

const AFTER_HELM_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","afterHelm":1}'
  exit 0
fi
echo '[{"op":"add","path":"/greeter/after","value":"seen"}]' > "$VALUES_JSON_PATCH_PATH"
"#;

const ELSEWHERE_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","beforeHelm":2}'
  exit 0
fi
echo '{"operation":"CreateOrUpdate","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"sneaky","namespace":"default"},"data":{}}}' > "$KUBERNETES_PATCH_PATH"
"#;

/// `greeter` `version`: a chart of one ConfigMap and the hooks `hooks` (path, script).
async fn push_greeter(push: &Registry, layout: &Layout, version: &str, hooks: &[(&str, &str)]) {
    let marker = ImageBuilder::new("greeter-marker").build(layout);
    push.push_image(REPO, Some("greeter"), &marker)
        .await
        .unwrap();
    let package_yaml = "name: greeter\ntype: Application\ndescription: {en: Greets}\ncategory: Misc\nstage: General Availability\n";
    let meta = ImageBuilder::new(&format!("greeter-meta-{version}"))
        .files(&[("package.yaml", package_yaml.as_bytes())])
        .build(layout);
    push.push_image(&format!("{REPO}/greeter/version"), Some(version), &meta)
        .await
        .unwrap();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-greeter\ndata:\n  greeting: {{ .Values.greeter.greeting | default \"none\" | quote }}\n  after: {{ .Values.greeter.after | default \"no\" | quote }}\n";
    let mut files: Vec<(&str, &[u8])> = vec![
        (
            "Chart.yaml",
            b"apiVersion: v2\nname: greeter\nversion: 0.1.0\n",
        ),
        ("templates/cm.yaml", cm.as_bytes()),
    ];
    for (path, script) in hooks {
        files.push((path, script.as_bytes()));
    }
    let executables: Vec<&str> = hooks.iter().map(|(p, _)| *p).collect();
    let bundle = ImageBuilder::new(&format!("greeter-bundle-{version}"))
        .files(&files)
        .executable(&executables)
        .build(layout);
    push.push_image(&format!("{REPO}/greeter"), Some(version), &bundle)
        .await
        .unwrap();
}

#[tokio::test]
async fn package_hooks_run_as_module_hooks_scoped_to_the_application() {
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(&dir.path().join("layout")).unwrap();
    let registry = Registry::of(&upstream);
    let good = [
        ("hooks/before.sh", BEFORE_HELM_SH),
        ("hooks/after.sh", AFTER_HELM_SH),
        ("hooks/gone.sh", AFTER_DELETE_SH),
    ];
    push_greeter(&registry, &layout, "v1.0.0", &good).await;
    let bad = [
        ("hooks/before.sh", BEFORE_HELM_SH),
        ("hooks/elsewhere.sh", ELSEWHERE_SH),
    ];
    push_greeter(&registry, &layout, "v1.1.0", &bad).await;
    repository(&client, &upstream).await;
    let controller = Controller::new(
        client.clone(),
        Options {
            packages_dir: dir.path().join("packages"),
            ..Default::default()
        },
    );
    controller.pass().await.unwrap();
    namespace(&client, "h").await;
    let api: Api<Application> = Api::namespaced(client.clone(), "h");
    let mut a = Application::new(
        "shop",
        ApplicationSpec {
            package_name: "greeter".into(),
            package_version: "v1.0.0".into(),
            package_repository_name: Some("main".into()),
            settings: Some(json!({"greeting": "from-settings"})),
            ..Default::default()
        },
    );
    a.metadata.namespace = Some("h".into());
    api.create(&PostParams::default(), &a).await.unwrap();
    controller.pass().await.unwrap();

    // beforeHelm patched the values the chart is rendered with; afterHelm's patch rendered
    // it once more (revision 2).
    let a = get(&client, "h").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"), "{:?}", a.status);
    let greeting = |cm: ConfigMap| cm.data.unwrap()["greeting"].clone();
    let shown = cm(&client, "h", "shop-greeter")
        .await
        .unwrap()
        .data
        .unwrap();
    assert_eq!(
        (shown["greeting"].as_str(), shown["after"].as_str()),
        ("from-before-helm", "seen")
    );
    let releases = || async {
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), "h");
        let mut names: Vec<String> = secrets
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|s| s.name_any())
            .filter(|n| n.starts_with("sh.helm.release.v1.shop."))
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        releases().await,
        ["sh.helm.release.v1.shop.v1", "sh.helm.release.v1.shop.v2"]
    );
    // The hooks' patches are kept: the next pass renders the same, no new revision.
    controller.pass().await.unwrap();
    assert_eq!(
        releases().await,
        ["sh.helm.release.v1.shop.v1", "sh.helm.release.v1.shop.v2"]
    );

    // A hook acting outside the Application's namespace fails the install: nothing of it is
    // done and v1.0.0 runs on.
    change(&client, "h", json!({"packageVersion": "v1.1.0"})).await;
    controller.pass().await.unwrap();
    let a = get(&client, "h").await;
    let (status, reason, message) = condition(&a, "Installed");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "InstallFailed")
    );
    assert!(
        message.contains("module hook 'greeter/hooks/elsewhere.sh' failed: ConfigMap sneaky is in namespace default: an Application's hooks act only in its namespace h"),
        "{message}"
    );
    assert!(cm(&client, "default", "sneaky").await.is_none());
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"));
    assert_eq!(
        greeting(cm(&client, "h", "shop-greeter").await.unwrap()),
        "from-before-helm"
    );

    // Deleted: the release goes, then afterDeleteHelm of the installed bundle runs.
    change(&client, "h", json!({"packageVersion": "v1.0.0"})).await;
    controller.pass().await.unwrap();
    api.delete("shop", &DeleteParams::default()).await.unwrap();
    controller.pass().await.unwrap();
    assert!(api.get_opt("shop").await.unwrap().is_none());
    assert!(cm(&client, "h", "shop-greeter").await.is_none());
    assert!(cm(&client, "h", "greeter-gone").await.is_some());
}
