//! The marketplace through the `d8` binary: `d8 apiserver`, `d8 controller` and a real
//! `docker-registry` holding an `echo` package in three versions; a PackageRepository applied
//! with kubectl is scanned, Applications install it into two namespaces, and `d8 package` /
//! `d8 app list -A` show what happened and why an Application is not running.

use std::process::Command;

use testkit::ImageBuilder;
use testkit::image::Layout;
use testkit::process::{Service, free_port};
use testkit::push::Registry;

use crate::module::{apply, get, until};
use crate::{Stage, kubectl_ok};

const REPO: &str = "marketplace";

const PACKAGE_YAML: &str = "name: echo\ntype: Application\ndescription: {en: An echo server}\nstage: General Availability\nversionCompatibilityRules:\n  upgrade: {allowSkipMinor: 0}\n  downgrade: {maxRollback: 1}\n";
const SETTINGS: &str = "type: object\nproperties:\n  greeting: {type: string, default: hello}\n  replicas: {type: integer, default: 1, maximum: 3}\n";
const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-echo\ndata:\n  greeting: {{ .Values.echo.greeting | quote }}\n  version: {{ .Chart.AppVersion | quote }}\n";

async fn publish(push: &Registry, layout: &Layout, version: &str) {
    let marker = ImageBuilder::new("package-marker").build(layout);
    push.push_image(REPO, Some("echo"), &marker).await.unwrap();
    let meta = ImageBuilder::new(&format!("echo-meta-{version}"))
        .files(&[
            ("package.yaml", PACKAGE_YAML.as_bytes()),
            ("openapi/settings.yaml", SETTINGS.as_bytes()),
        ])
        .build(layout);
    push.push_image(&format!("{REPO}/echo/version"), Some(version), &meta)
        .await
        .unwrap();
    let chart = format!("apiVersion: v2\nname: echo\nversion: 0.1.0\nappVersion: {version}\n");
    let bundle = ImageBuilder::new(&format!("echo-bundle-{version}"))
        .files(&[
            ("Chart.yaml", chart.as_bytes()),
            ("templates/cm.yaml", CM.as_bytes()),
        ])
        .build(layout);
    push.push_image(&format!("{REPO}/echo"), Some(version), &bundle)
        .await
        .unwrap();
}

fn d8(admin: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_d8"))
        .args(args)
        .arg("--kubeconfig")
        .arg(admin)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "d8 {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn application(ns: &str, version: &str, settings: &str) -> String {
    format!(
        "apiVersion: deckhouse.io/v1alpha1\nkind: Application\nmetadata:\n  name: shop\n  namespace: {ns}\nspec:\n  packageName: echo\n  packageRepositoryName: main\n  packageVersion: {version}\n  settings: {settings}\n"
    )
}

#[tokio::test]
async fn applications_are_installed_per_namespace_and_d8_app_list_says_why_one_is_not_running() {
    let requests = tempfile::tempdir().unwrap();
    let log = requests.path().join("requests.jsonl");
    let stage = Stage::start_with(&crate::rbac::apiserver_flags(&["deckhouse"], &log)).await;
    let Stage {
        apiserver,
        admin,
        upstream,
        push,
        dir,
        layout,
    } = &stage;
    // The controller runs as ServiceAccount deckhouse with the chart's roles: an Application's
    // objects are written through `moduleManagerClusterAdmin`'s binding to cluster-admin.
    crate::rbac::apply_chart_rbac(admin);
    let deckhouse = apiserver.kubeconfig("system-serviceaccount-d8-system-deckhouse");
    for v in ["v1.0.0", "v1.1.0", "v1.2.0"] {
        publish(push, layout, v).await;
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&deckhouse)
        .args(["--identity", "test-controller", "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--packages-dir")
        .arg(dir.path().join("packages"));
    let _controller =
        Service::spawn("d8 controller", command, dir.path().join("controller.log")).unwrap();
    let repo = format!(
        "apiVersion: deckhouse.io/v1alpha1\nkind: PackageRepository\nmetadata:\n  name: main\nspec:\n  registry:\n    scheme: HTTP\n    repo: {}/{REPO}\n",
        upstream.host()
    );
    apply(admin, dir.path(), "repo.yaml", &repo);

    // The scan: the package and its versions appear with their metadata.
    until("the versions are loaded", || {
        let text = d8(admin, &["package", "versions", "echo"]);
        text.matches("loaded").count() == 3
    })
    .await;
    let list = d8(admin, &["package", "list"]);
    assert!(list.contains("echo") && list.contains("v1.2.0"), "{list}");

    for ns in ["a", "b"] {
        kubectl_ok(admin, &["create", "namespace", ns]);
    }
    apply(
        admin,
        dir.path(),
        "a.yaml",
        &application("a", "v1.0.0", "{greeting: hi}"),
    );
    apply(
        admin,
        dir.path(),
        "b.yaml",
        &application("b", "v1.0.0", "{}"),
    );
    let greeting = |ns: &str| {
        get(
            admin,
            &[
                "get",
                "configmap",
                "shop-echo",
                "-n",
                ns,
                "-o",
                "jsonpath={.data.greeting} {.data.version}",
            ],
        )
        .unwrap_or_default()
    };
    until("both are installed", || {
        greeting("a") == "hi v1.0.0" && greeting("b") == "hello v1.0.0"
    })
    .await;

    // Settings the schema refuses: reported, nothing changes.
    apply(
        admin,
        dir.path(),
        "a.yaml",
        &application("a", "v1.0.0", "{greeting: bye, replicas: 9}"),
    );
    until("the settings are refused", || {
        d8(admin, &["app", "list", "-A"])
            .contains("echo.replicas should be less than or equal to 3")
    })
    .await;
    assert_eq!(greeting("a"), "hi v1.0.0");

    // Outside the rules (v1.0.0 → v1.2.0 skips v1.1.0): refused with the rule named.
    apply(
        admin,
        dir.path(),
        "a.yaml",
        &application("a", "v1.2.0", "{greeting: bye}"),
    );
    until("the upgrade is refused", || {
        let text = d8(admin, &["app", "list", "-A"]);
        text.contains("versionCompatibilityRules.upgrade.allowSkipMinor")
            && text.contains("v1.0.0 (wants v1.2.0)")
    })
    .await;
    assert_eq!(greeting("a"), "hi v1.0.0");

    // Within the rules: upgraded; then rolled back within maxRollback.
    apply(
        admin,
        dir.path(),
        "a.yaml",
        &application("a", "v1.1.0", "{greeting: bye}"),
    );
    until("a is upgraded", || greeting("a") == "bye v1.1.0").await;
    apply(
        admin,
        dir.path(),
        "a.yaml",
        &application("a", "v1.0.0", "{greeting: bye}"),
    );
    until("a is rolled back", || greeting("a") == "bye v1.0.0").await;
    assert_eq!(greeting("b"), "hello v1.0.0");

    // Deleting one leaves the other.
    kubectl_ok(
        admin,
        &[
            "delete",
            "application",
            "shop",
            "-n",
            "a",
            "--wait=true",
            "--timeout=60s",
        ],
    );
    until("a's objects are gone", || greeting("a").is_empty()).await;
    assert_eq!(greeting("b"), "hello v1.0.0");
    let apps = d8(admin, &["app", "list", "-A"]);
    assert!(
        apps.contains("Ready") && !apps.lines().any(|l| l.starts_with("a ")),
        "{apps}"
    );
    crate::rbac::assert_deckhouse_calls("packages", &log).await;
}
