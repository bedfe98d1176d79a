//! Applications end to end: the embedded API server, a real `docker-registry` holding an
//! `echo` package in three versions (version images with rules and a settings schema, bundles
//! with a chart), and the package controller's passes — what `kubectl get` shows in the
//! Applications' namespaces afterwards.

mod support;

use api::packages::{Application, ApplicationPackage, ApplicationPackageVersion, ApplicationSpec};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use package_controller::controller::{Controller, Options};
use serde_json::json;
use support::{
    Env, REPO, cm, get_application, namespace, new_application, push_package, registry, repository,
    spec,
};
use testkit::ImageBuilder;
use testkit::image::Layout;
use testkit::push::Registry;

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
    let meta = [
        ("package.yaml", package_yaml.as_bytes()),
        ("openapi/settings.yaml", SETTINGS.as_bytes()),
    ];
    push_package(push, layout, REPO, "echo", version, &meta, &bundle).await;
}

/// Points release channel `tag` of `echo` at `version`: the version image (its `package.yaml`
/// and `version.json`) published as `R/echo/release-channel:<tag>`, where Deckhouse looks.
async fn channel(push: &Registry, layout: &Layout, tag: &str, version: &str) {
    let json = format!(r#"{{"version": "{version}"}}"#);
    let image = ImageBuilder::new(&format!("echo-{tag}-{version}"))
        .files(&[
            ("package.yaml", PACKAGE_YAML.as_bytes()),
            ("version.json", json.as_bytes()),
        ])
        .build(layout);
    push.push_image(&format!("{REPO}/echo/release-channel"), Some(tag), &image)
        .await
        .unwrap();
}

async fn app(client: &Client, ns: &str, version: &str, settings: serde_json::Value) {
    new_application(
        client,
        ns,
        "shop",
        ApplicationSpec {
            settings: Some(settings),
            ..spec("echo", version)
        },
    )
    .await;
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

async fn data(client: &Client, ns: &str) -> (String, String) {
    let d = cm(client, ns, "shop-echo").await.expect("shop-echo exists");
    (d["greeting"].clone(), d["version"].clone())
}

#[tokio::test]
async fn applications_install_upgrade_roll_back_and_uninstall_per_namespace() {
    let env = Env::start().await;
    for v in ["v1.0.0", "v1.1.0", "v1.2.0"] {
        push(&env.push, &env.layout, v).await;
    }
    repository(&env.client, "main", registry(&env.upstream.host(), REPO)).await;
    let controller = Controller::new(env.client.clone(), support::options(&env.dir));
    controller.pass().await.unwrap();
    for ns in ["a", "b"] {
        namespace(&env.client, ns).await;
    }
    app(&env.client, "a", "v1.0.0", json!({"greeting": "hi"})).await;
    app(&env.client, "b", "v1.0.0", json!({})).await;
    controller.pass().await.unwrap();

    // Version 1 in both namespaces, each with its own settings.
    let a = get_application(&env.client, "a", "shop").await;
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
    assert_eq!(data(&env.client, "a").await, ("hi".into(), "v1.0.0".into()));
    assert_eq!(
        data(&env.client, "b").await,
        ("hello".into(), "v1.0.0".into())
    );
    assert!(cm(&env.client, "a", "only-v1").await.is_some());
    let apvs: Api<ApplicationPackageVersion> = Api::all(env.client.clone());
    let v1 = apvs.get("main-echo-v1.0.0").await.unwrap().status.unwrap();
    assert_eq!(v1.used_by_count, Some(2));
    let pkg = Api::<ApplicationPackage>::all(env.client.clone())
        .get("echo")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(pkg.instances_overall, Some(2));
    assert_eq!(pkg.instances.keys().collect::<Vec<_>>(), ["a", "b"]);

    // Settings the schema refuses: reported, nothing changes.
    change(
        &env.client,
        "a",
        json!({"settings": {"greeting": "bye", "replicas": 9}}),
    )
    .await;
    controller.pass().await.unwrap();
    let a = get_application(&env.client, "a", "shop").await;
    let (status, reason, message) = condition(&a, "Processed");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "SettingsInvalid")
    );
    assert_eq!(
        message,
        "spec.settings are not valid:  1 error occurred: * echo.replicas should be less than or equal to 3  "
    );
    assert_eq!(data(&env.client, "a").await, ("hi".into(), "v1.0.0".into()));
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"));

    // An upgrade the rules forbid (it skips v1.1.0): refused with the rule named.
    change(
        &env.client,
        "a",
        json!({"packageVersion": "v1.2.0", "settings": {"greeting": "bye", "replicas": null}}),
    )
    .await;
    controller.pass().await.unwrap();
    let a = get_application(&env.client, "a", "shop").await;
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
    assert_eq!(data(&env.client, "a").await, ("hi".into(), "v1.0.0".into()));

    // An upgrade within the rules: applied; what left the chart is deleted.
    change(&env.client, "a", json!({"packageVersion": "v1.1.0"})).await;
    controller.pass().await.unwrap();
    let a = get_application(&env.client, "a", "shop").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.1.0"), "{:?}", a.status);
    assert_eq!(condition(&a, "Processed").0, "True");
    assert_eq!(
        data(&env.client, "a").await,
        ("bye".into(), "v1.1.0".into())
    );
    assert!(cm(&env.client, "a", "only-v1").await.is_none());
    assert!(
        cm(&env.client, "b", "only-v1").await.is_some(),
        "b is untouched"
    );
    let v1 = apvs.get("main-echo-v1.0.0").await.unwrap().status.unwrap();
    assert_eq!(v1.used_by_count, Some(1));
    assert_eq!(v1.used_by[0].namespace.as_deref(), Some("b"));
    let v11 = apvs.get("main-echo-v1.1.0").await.unwrap().status.unwrap();
    assert_eq!(v11.used_by_count, Some(1));

    // A rollback within maxRollback (1): applied.
    change(&env.client, "a", json!({"packageVersion": "v1.0.0"})).await;
    controller.pass().await.unwrap();
    let a = get_application(&env.client, "a", "shop").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"));
    assert_eq!(
        data(&env.client, "a").await,
        ("bye".into(), "v1.0.0".into())
    );
    assert!(cm(&env.client, "a", "only-v1").await.is_some());

    // Deleting one Application removes what it installed and nothing else.
    Api::<Application>::namespaced(env.client.clone(), "a")
        .delete("shop", &DeleteParams::default())
        .await
        .unwrap();
    controller.pass().await.unwrap();
    assert!(
        Api::<Application>::namespaced(env.client.clone(), "a")
            .get_opt("shop")
            .await
            .unwrap()
            .is_none()
    );
    assert!(cm(&env.client, "a", "shop-echo").await.is_none());
    assert!(cm(&env.client, "a", "only-v1").await.is_none());
    assert_eq!(
        data(&env.client, "b").await,
        ("hello".into(), "v1.0.0".into())
    );
    let b = get_application(&env.client, "b", "shop").await;
    assert_eq!(condition(&b, "Ready").0, "True");
    let v1 = apvs.get("main-echo-v1.0.0").await.unwrap().status.unwrap();
    assert_eq!(v1.used_by_count, Some(1));
    let pkg = Api::<ApplicationPackage>::all(env.client.clone())
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
    let env = Env::start().await;
    push(&env.push, &env.layout, "v1.0.0").await;
    push(&env.push, &env.layout, "v1.1.0").await;
    let newer = format!("{PACKAGE_YAML}requirements:\n  deckhouse: \">= 1.80\"\n");
    push_with(&env.push, &env.layout, "v1.2.0", &newer).await;
    channel(&env.push, &env.layout, "stable", "1.0.0").await;
    repository(&env.client, "main", registry(&env.upstream.host(), REPO)).await;
    let controller = Controller::new(
        env.client.clone(),
        Options {
            deckhouse_version: Some(semver::Version::new(1, 75, 0)),
            ..support::options(&env.dir)
        },
    );
    controller.pass().await.unwrap();
    namespace(&env.client, "c").await;
    // spec.packageVersion says v1.1.0; the channel it follows says v1.0.0, and wins.
    new_application(
        &env.client,
        "c",
        "shop",
        ApplicationSpec {
            release_channel: Some("Stable".into()),
            ..spec("echo", "v1.1.0")
        },
    )
    .await;
    controller.pass().await.unwrap();
    let a = get_application(&env.client, "c", "shop").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"), "{:?}", a.status);
    let current = a.status.as_ref().unwrap().current_version.clone().unwrap();
    assert_eq!(current.channel.as_deref(), Some("Stable"));
    assert_eq!(data(&env.client, "c").await.1, "v1.0.0");

    // The channel moves on: the Application follows it, under the compatibility rules.
    channel(&env.push, &env.layout, "stable", "1.1.0").await;
    controller.pass().await.unwrap();
    let a = get_application(&env.client, "c", "shop").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.1.0"), "{:?}", a.status);
    assert_eq!(data(&env.client, "c").await.1, "v1.1.0");

    // A version the platform is too old for: refused with the requirement, v1.1.0 runs on.
    channel(&env.push, &env.layout, "stable", "1.2.0").await;
    controller.pass().await.unwrap();
    let a = get_application(&env.client, "c", "shop").await;
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
    assert_eq!(data(&env.client, "c").await.1, "v1.1.0");

    // A channel the repository does not publish: said so, nothing changes.
    change(&env.client, "c", json!({"releaseChannel": "Alpha"})).await;
    controller.pass().await.unwrap();
    let a = get_application(&env.client, "c", "shop").await;
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
    assert_eq!(data(&env.client, "c").await.1, "v1.1.0");
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
    let package_yaml = "name: greeter\ntype: Application\ndescription: {en: Greets}\ncategory: Misc\nstage: General Availability\n";
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
    let schema = "type: object\nproperties:\n  greeting: {type: string}\n";
    let meta = [
        ("package.yaml", package_yaml.as_bytes()),
        ("openapi/settings.yaml", schema.as_bytes()),
    ];
    push_package(push, layout, REPO, "greeter", version, &meta, &bundle).await;
}

#[tokio::test]
async fn package_hooks_run_as_module_hooks_scoped_to_the_application() {
    let env = Env::start().await;
    let good = [
        ("hooks/before.sh", BEFORE_HELM_SH),
        ("hooks/after.sh", AFTER_HELM_SH),
        ("hooks/gone.sh", AFTER_DELETE_SH),
    ];
    push_greeter(&env.push, &env.layout, "v1.0.0", &good).await;
    let bad = [
        ("hooks/before.sh", BEFORE_HELM_SH),
        ("hooks/elsewhere.sh", ELSEWHERE_SH),
    ];
    push_greeter(&env.push, &env.layout, "v1.1.0", &bad).await;
    repository(&env.client, "main", registry(&env.upstream.host(), REPO)).await;
    let controller = Controller::new(env.client.clone(), support::options(&env.dir));
    controller.pass().await.unwrap();
    namespace(&env.client, "h").await;
    let api: Api<Application> = Api::namespaced(env.client.clone(), "h");
    new_application(
        &env.client,
        "h",
        "shop",
        ApplicationSpec {
            settings: Some(json!({"greeting": "from-settings"})),
            ..spec("greeter", "v1.0.0")
        },
    )
    .await;
    controller.pass().await.unwrap();

    // beforeHelm patched the values the chart is rendered with; afterHelm's patch rendered
    // it once more (revision 2).
    let a = get_application(&env.client, "h", "shop").await;
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"), "{:?}", a.status);
    let shown = cm(&env.client, "h", "shop-greeter").await.unwrap();
    assert_eq!(
        (shown["greeting"].as_str(), shown["after"].as_str()),
        ("from-before-helm", "seen")
    );
    let releases = || async {
        let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "h");
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
    change(&env.client, "h", json!({"packageVersion": "v1.1.0"})).await;
    controller.pass().await.unwrap();
    let a = get_application(&env.client, "h", "shop").await;
    let (status, reason, message) = condition(&a, "Installed");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "InstallFailed")
    );
    assert!(
        message.contains("module hook 'greeter/hooks/elsewhere.sh' failed: ConfigMap sneaky is in namespace default: an Application's hooks act only in its namespace h"),
        "{message}"
    );
    assert!(cm(&env.client, "default", "sneaky").await.is_none());
    assert_eq!(installed(&a).as_deref(), Some("v1.0.0"));
    assert_eq!(
        cm(&env.client, "h", "shop-greeter").await.unwrap()["greeting"],
        "from-before-helm"
    );

    // Deleted: the release goes, then afterDeleteHelm of the installed bundle runs.
    change(&env.client, "h", json!({"packageVersion": "v1.0.0"})).await;
    controller.pass().await.unwrap();
    api.delete("shop", &DeleteParams::default()).await.unwrap();
    controller.pass().await.unwrap();
    assert!(api.get_opt("shop").await.unwrap().is_none());
    assert!(cm(&env.client, "h", "shop-greeter").await.is_none());
    assert!(cm(&env.client, "h", "greeter-gone").await.is_some());
}

/// The maintenance label on the application's ConfigMap and Ingress (`None`: not there).
async fn maintenance_labels(client: &Client, ns: &str) -> [Option<String>; 2] {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::networking::v1::Ingress;
    let key = api::keys::LABEL_MAINTENANCE_NO_RESOURCE_RECONCILIATION;
    let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get("shop-echo")
        .await
        .unwrap();
    let ingress = Api::<Ingress>::namespaced(client.clone(), ns)
        .get("shop")
        .await
        .unwrap();
    [
        cm.labels().get(key).cloned(),
        ingress.labels().get(key).cloned(),
    ]
}

/// `spec.maintenance: NoResourceReconciliation`, as Deckhouse runs it: the templates are applied
/// once more so that every resource carries `maintenance.deckhouse.io/no-resource-reconciliation`,
/// then nothing is applied — new settings wait, a deleted resource is not restored — and
/// `deckhouse_application_maintenance` names the Application; leaving the mode applies the
/// templates again, which restores the resources and takes the label off.
#[tokio::test]
async fn an_application_in_maintenance_is_labelled_left_alone_and_reported() {
    let env = Env::start().await;
    push(&env.push, &env.layout, "v1.0.0").await;
    repository(&env.client, "main", registry(&env.upstream.host(), REPO)).await;
    let controller = Controller::new(env.client.clone(), support::options(&env.dir));
    controller.pass().await.unwrap();
    namespace(&env.client, "a").await;
    app(&env.client, "a", "v1.0.0", json!({"greeting": "hi"})).await;
    controller.pass().await.unwrap();
    assert_eq!(data(&env.client, "a").await, ("hi".into(), "v1.0.0".into()));
    assert_eq!(maintenance_labels(&env.client, "a").await, [None, None]);
    let maintenance = |c: &Controller| {
        c.metrics()
            .encode()
            .lines()
            .filter(|l| l.starts_with("deckhouse_application_maintenance{"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(maintenance(&controller), Vec::<String>::new());

    // Entering maintenance labels every resource (the value nelm writes) and the metric names
    // the Application.
    change(
        &env.client,
        "a",
        json!({"maintenance": "NoResourceReconciliation"}),
    )
    .await;
    controller.pass().await.unwrap();
    let labelled = [Some(String::new()), Some(String::new())];
    assert_eq!(maintenance_labels(&env.client, "a").await, labelled);
    assert_eq!(data(&env.client, "a").await, ("hi".into(), "v1.0.0".into()));
    assert_eq!(
        maintenance(&controller),
        vec![
            "deckhouse_application_maintenance{namespace=\"a\",name=\"shop\",state=\"NoResourceReconciliation\"} 1"
        ]
    );

    // In maintenance, new settings are not applied and a deleted resource is not restored.
    change(&env.client, "a", json!({"settings": {"greeting": "bye"}})).await;
    controller.pass().await.unwrap();
    assert_eq!(data(&env.client, "a").await, ("hi".into(), "v1.0.0".into()));
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(env.client.clone(), "a");
    configmaps
        .delete("shop-echo", &DeleteParams::default())
        .await
        .unwrap();
    controller.pass().await.unwrap();
    controller.pass().await.unwrap();
    assert!(cm(&env.client, "a", "shop-echo").await.is_none());

    // Out of maintenance (the alert's `remove /spec/maintenance`), it is reconciled again: the
    // settings applied, the ConfigMap back, the label gone.
    let api: Api<Application> = Api::namespaced(env.client.clone(), "a");
    api.patch(
        "shop",
        &PatchParams::default(),
        &Patch::<()>::Json(
            serde_json::from_value(json!([{"op": "remove", "path": "/spec/maintenance"}])).unwrap(),
        ),
    )
    .await
    .unwrap();
    controller.pass().await.unwrap();
    assert_eq!(
        data(&env.client, "a").await,
        ("bye".into(), "v1.0.0".into())
    );
    assert_eq!(maintenance_labels(&env.client, "a").await, [None, None]);
    assert_eq!(maintenance(&controller), Vec::<String>::new());
}

/// `name` v1.0.0: a chart of one ConfigMap `<release>-cm` whose data shows `.Values.<name>`'s
/// `keys`, a version image without a settings schema, and `extra` in the bundle besides the
/// chart (`hooks/…` executable).
async fn push_plain(
    push: &Registry,
    layout: &Layout,
    name: &str,
    keys: &[&str],
    extra: &[(&str, &[u8])],
) {
    let package_yaml = format!(
        "name: {name}\ntype: Application\ndescription: {{en: Plain}}\ncategory: Misc\nstage: General Availability\n"
    );
    let chart = format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n");
    let mut cm =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n"
            .to_owned();
    for key in keys {
        let field = key.rsplit('.').next().unwrap();
        cm.push_str(&format!(
            "  {field}: {{{{ .Values.{name}.{key} | default \"none\" | quote }}}}\n"
        ));
    }
    let mut files: Vec<(&str, &[u8])> = vec![
        ("Chart.yaml", chart.as_bytes()),
        ("templates/cm.yaml", cm.as_bytes()),
    ];
    files.extend_from_slice(extra);
    let hooks: Vec<&str> = extra
        .iter()
        .map(|(path, _)| *path)
        .filter(|path| path.starts_with("hooks/"))
        .collect();
    let bundle = ImageBuilder::new(&format!("{name}-bundle"))
        .files(&files)
        .executable(&hooks)
        .build(layout);
    let meta = [("package.yaml", package_yaml.as_bytes())];
    push_package(push, layout, REPO, name, "v1.0.0", &meta, &bundle).await;
}

/// beforeHelm: the keys of the package's config values (`CONFIG_VALUES_PATH`), into the values.
const CONFIG_KEYS_PY: &str = r#"#!/usr/bin/env python3
import json, os, sys
if sys.argv[1:] == ["--config"]:
    print(json.dumps({"configVersion": "v1", "beforeHelm": 1}))
    sys.exit(0)
config = json.load(open(os.environ["CONFIG_VALUES_PATH"]))
keys = ",".join(sorted(config.get("legacy", {}).keys()))
with open(os.environ["VALUES_JSON_PATCH_PATH"], "w") as f:
    json.dump([{"op": "add", "path": "/legacy/configKeys", "value": keys}], f)
"#;

/// A template reading what Deckhouse's package runtime hands a chart besides `.Values`.
const RUNTIME_CM: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-runtime
data:
  instance: {{ printf "%s/%s" .Application.Instance.Namespace .Application.Instance.Name | quote }}
  package: {{ printf "%s@%s" .Application.Package.Name .Application.Package.Version | quote }}
  repository: {{ printf "%s %s" .Application.Package.Registry.name .Application.Package.Registry.repository | quote }}
  image: {{ index .Application.Package.Images "server" | quote }}
  replicas: {{ .Application.Settings.replicas | quote }}
  kubernetes: {{ .Platform.discovery.kubernetesVersion | quote }}
  domain: {{ .Platform.discovery.clusterDomain | quote }}
"#;

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[tokio::test]
async fn settings_and_values_come_from_the_bundle_and_settings_need_a_schema() {
    let env = Env::start().await;
    // `legacy` keeps its settings schema in the bundle only, under the legacy name, with static
    // values and a values schema; `bare` has no schema at all.
    let settings_schema =
        "type: object\nproperties:\n  replicas: {type: integer, default: 1, maximum: 3}\n";
    let digests = format!(r#"{{"server": "{DIGEST}"}}"#);
    let values_schema = "x-extend:\n  schema: config-values.yaml\ntype: object\nproperties:\n  internal:\n    type: object\n    default: {}\n    properties:\n      tier: {type: string, default: gold}\n";
    push_plain(
        &env.push,
        &env.layout,
        "legacy",
        &["replicas", "color", "internal.tier", "configKeys"],
        &[
            ("hooks/config_keys.py", CONFIG_KEYS_PY.as_bytes()),
            ("openapi/config-values.yaml", settings_schema.as_bytes()),
            ("openapi/values.yaml", values_schema.as_bytes()),
            ("values.yaml", b"color: blue\n"),
            ("templates/runtime.yaml", RUNTIME_CM.as_bytes()),
            ("images_digests.json", digests.as_bytes()),
        ],
    )
    .await;
    push_plain(&env.push, &env.layout, "bare", &["replicas"], &[]).await;
    repository(&env.client, "main", registry(&env.upstream.host(), REPO)).await;
    // The platform's global values, as `d8 controller` hands over the module runtime's.
    let options = Options {
        global_values: Some(package_controller::runtime::GlobalValues::new(
            || json!({"discovery": {"clusterDomain": "cluster.local"}}),
        )),
        ..support::options(&env.dir)
    };
    let controller = Controller::new(env.client.clone(), options);
    controller.pass().await.unwrap();
    namespace(&env.client, "s").await;
    let with = |package: &str, settings: serde_json::Value| ApplicationSpec {
        settings: Some(settings),
        ..spec(package, "v1.0.0")
    };
    new_application(
        &env.client,
        "s",
        "old",
        with("legacy", json!({"replicas": 9})),
    )
    .await;
    new_application(
        &env.client,
        "s",
        "plain",
        with("bare", json!({"replicas": 2})),
    )
    .await;
    controller.pass().await.unwrap();

    // Refused, each with Deckhouse's words; nothing is installed.
    let refused = |app: &Application| {
        let (status, reason, message) = condition(app, "Processed");
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "SettingsInvalid")
        );
        assert_eq!(installed(app), None);
        message
    };
    let old = get_application(&env.client, "s", "old").await;
    assert_eq!(
        refused(&old),
        "spec.settings are not valid:  1 error occurred: * legacy.replicas should be less than or equal to 3  "
    );
    let plain = get_application(&env.client, "s", "plain").await;
    assert_eq!(
        refused(&plain),
        "spec.settings are not valid: config schema is not defined but config values were provided"
    );
    assert_eq!(cm(&env.client, "s", "old-cm").await, None);
    assert_eq!(cm(&env.client, "s", "plain-cm").await, None);

    // Settings the schema takes, and none for the package without one: installed, the chart
    // rendered with the bundle's static values and both schemas' defaults; the hook's config
    // values are the settings alone.
    let apps: Api<Application> = Api::namespaced(env.client.clone(), "s");
    for (name, spec) in [
        ("old", json!({"settings": {"replicas": null}})),
        ("plain", json!({"settings": null})),
    ] {
        apps.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .unwrap();
    }
    controller.pass().await.unwrap();
    for name in ["old", "plain"] {
        let app = get_application(&env.client, "s", name).await;
        assert_eq!(
            installed(&app).as_deref(),
            Some("v1.0.0"),
            "{:?}",
            app.status
        );
    }
    let old = cm(&env.client, "s", "old-cm").await.unwrap();
    assert_eq!(
        (
            old["replicas"].as_str(),
            old["color"].as_str(),
            old["tier"].as_str(),
            old["configKeys"].as_str()
        ),
        ("1", "blue", "gold", "replicas")
    );
    assert_eq!(
        get_application(&env.client, "s", "old")
            .await
            .status
            .unwrap()
            .last_applied_configuration,
        Some(json!({"replicas": 1}))
    );
    assert_eq!(
        cm(&env.client, "s", "plain-cm").await.unwrap()["replicas"],
        "none"
    );

    // The chart saw `$.Application` and `$.Platform` as Deckhouse's package runtime hands
    // them: the Application, its package and repository, the images of `images_digests.json`,
    // the settings with their defaults, and the platform's global values with the API server's
    // Kubernetes version.
    let kubernetes = env.client.apiserver_version().await.unwrap().git_version;
    let kubernetes = package_controller::application::loose_version(&kubernetes)
        .unwrap()
        .to_string();
    let repo = registry(&env.upstream.host(), REPO).repo;
    let runtime = cm(&env.client, "s", "old-runtime").await.unwrap();
    let want: std::collections::BTreeMap<String, String> = [
        ("instance", "s/old".to_owned()),
        ("package", "legacy@v1.0.0".to_owned()),
        ("repository", format!("main {repo}")),
        ("image", format!("{repo}/legacy@{DIGEST}")),
        ("replicas", "1".to_owned()),
        ("kubernetes", kubernetes),
        ("domain", "cluster.local".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(runtime, want);
}
