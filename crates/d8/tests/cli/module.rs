//! `d8 controller` runs the module manager under the platform's Lease: on `d8 apiserver`, a
//! ModuleSource applied with kubectl pointing at a real `docker-registry` makes its modules
//! appear, and enabling one installs its release on disk; `d8 module list` and
//! `d8 module releases` show it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use testkit::ImageBuilder;
use testkit::image::Layout;
use testkit::process::{Service, free_port};
use testkit::push::Registry;

use crate::{Stage, kubectl_ok};

pub(crate) const REPO: &str = "deckhouse/ce/modules";

pub(crate) async fn publish(push: &Registry, layout: &Layout, module: &str, version: &str) {
    let module_yaml = format!("name: {module}\nweight: 910\n");
    let schema = "type: object\nproperties:\n  replicas: {type: integer, default: 1}\n";
    let image = ImageBuilder::new(&format!("{module}-{version}"))
        .files(&[
            ("module.yaml", module_yaml.as_bytes()),
            ("openapi/config-values.yaml", schema.as_bytes()),
            ("templates/app.yaml", format!("# {version}\n").as_bytes()),
        ])
        .build(layout);
    push_module(push, layout, module, version, &image).await;
}

/// Publishes a module as a ModuleSource finds it: the module image at `version`, its release
/// image on channel `stable`, and the tag naming the module in the source's repository.
pub(crate) async fn push_module(
    push: &Registry,
    layout: &Layout,
    module: &str,
    version: &str,
    image: &testkit::Image,
) {
    push.push_image(&format!("{REPO}/{module}"), Some(version), image)
        .await
        .unwrap();
    let release = ImageBuilder::new(&format!("{module}-release-{version}"))
        .files(&[(
            "version.json",
            format!("{{\"version\":\"{version}\"}}").as_bytes(),
        )])
        .build(layout);
    // Under the channel's tag and the version's, read for a step-by-step release.
    for tag in ["stable", version] {
        push.push_image(&format!("{REPO}/{module}/release"), Some(tag), &release)
            .await
            .unwrap();
    }
    let marker = ImageBuilder::new("marker").build(layout);
    push.push_image(REPO, Some(module), &marker).await.unwrap();
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

pub(crate) async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn the_controller_discovers_and_installs_modules_from_a_module_source() {
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
    // The controller runs as ServiceAccount deckhouse with the chart's roles.
    crate::rbac::apply_chart_rbac(admin);
    let deckhouse = apiserver.kubeconfig("system-serviceaccount-d8-system-deckhouse");
    publish(push, layout, "echo", "v1.0.0").await;
    publish(push, layout, "hello", "v0.3.1").await;

    let downloaded = dir.path().join("downloaded");
    let metrics_port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&deckhouse)
        .args(["--identity", "test-controller", "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{metrics_port}"))
        .arg("--downloaded-modules-dir")
        .arg(&downloaded)
        // The default ModuleSource `deckhouse` (the controller creates it), at a repository that
        // offers nothing.
        .arg(format!(
            "--default-module-source-repo={}/deckhouse/none/modules",
            upstream.host()
        ))
        .arg("--default-module-source-scheme=HTTP");
    let mut controller =
        Service::spawn("d8 controller", command, dir.path().join("controller.log")).unwrap();

    let source = format!(
        "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleSource\nmetadata:\n  name: example\nspec:\n  registry:\n    scheme: HTTP\n    repo: {}/{REPO}\n",
        upstream.host()
    );
    let config = "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: echo\nspec:\n  enabled: true\n";
    let maintenance = "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: hello\nspec:\n  maintenance: NoResourceReconciliation\n";
    for (name, yaml) in [
        ("source.yaml", source.as_str()),
        ("config.yaml", config),
        ("maintenance.yaml", maintenance),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, yaml).unwrap();
        kubectl_ok(admin, &["apply", "-f", path.to_str().unwrap()]);
    }

    let link = downloaded.join("modules/910-echo");
    testkit::process::wait_until(&mut controller, Duration::from_secs(90), || {
        let link = link.clone();
        async move { link.join("templates/app.yaml").exists() }
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(link.join("templates/app.yaml")).unwrap(),
        "# v1.0.0\n"
    );
    until("echo-v1.0.0 is Deployed", || {
        kubectl_ok(
            admin,
            &[
                "get",
                "modulerelease",
                "echo-v1.0.0",
                "-o",
                "jsonpath={.status.phase}",
            ],
        ) == "Deployed"
    })
    .await;
    let lease = kubectl_ok(
        admin,
        &[
            "get",
            "lease",
            "-n",
            "d8-system",
            "deckhouse-leader-election",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    );
    assert_eq!(lease, "test-controller");

    until("d8 module list shows echo Ready", || {
        let list = d8(admin, &["module", "list"]);
        list.lines().any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.first() == Some(&"echo") && cols.contains(&"Ready") && cols.contains(&"v1.0.0")
        })
    })
    .await;
    let list = d8(admin, &["module", "list"]);
    let hello = list
        .lines()
        .find(|l| l.starts_with("hello"))
        .unwrap_or_else(|| panic!("hello missing from d8 module list:\n{list}"));
    assert!(hello.contains("Available"), "{list}");
    let releases = d8(admin, &["module", "releases"]);
    assert!(
        releases
            .lines()
            .any(|l| l.starts_with("echo-v1.0.0") && l.contains("Deployed")),
        "{releases}"
    );
    assert!(!downloaded.join("modules/910-hello").exists());
    assert_eq!(
        kubectl_ok(
            admin,
            &[
                "get",
                "modulesource",
                "deckhouse",
                "-o",
                "jsonpath={.spec.registry.repo}",
            ],
        ),
        format!("{}/deckhouse/none/modules", upstream.host())
    );
    // A ModulePullOverride of hello, which is not enabled: answered in its status (Deckhouse's
    // message), and deleted.
    let mpo = dir.path().join("mpo.yaml");
    std::fs::write(
        &mpo,
        "apiVersion: deckhouse.io/v1alpha2\nkind: ModulePullOverride\nmetadata:\n  name: hello\nspec:\n  imageTag: v0.3.1\n",
    )
    .unwrap();
    kubectl_ok(admin, &["apply", "-f", mpo.to_str().unwrap()]);
    let message = || {
        crate::kubectl(
            admin,
            &[
                "get",
                "modulepulloverride",
                "hello",
                "-o",
                "jsonpath={.status.message}",
            ],
        )
    };
    until("the override of hello is answered", || {
        message().1 == "The module does not have an active source"
    })
    .await;
    kubectl_ok(admin, &["delete", "modulepulloverride", "hello"]);
    until("the override of hello is gone", || !message().0).await;

    // Every call the controller made is granted by deckhouse's role in the chart.
    crate::rbac::assert_deckhouse_calls("module", &log).await;

    // The module in maintenance is on the controller's /metrics.
    let url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let mut scraped = String::new();
    for _ in 0..100 {
        scraped = reqwest::get(&url).await.unwrap().text().await.unwrap();
        if scraped.contains(
            "deckhouse_mm_module_maintenance{module=\"hello\",state=\"NoResourceReconciliation\"} 1",
        ) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("hello's maintenance is not on /metrics:\n{scraped}");
}

/// Publishes `echo` at `version` on the `stable` channel with these templates.
pub(crate) async fn publish_chart(
    push: &Registry,
    layout: &Layout,
    version: &str,
    templates: &[(&str, &str)],
) {
    // Its description names the version: an upgrade changes the module's settings schema, and
    // with it the ModuleSettingsDefinition.
    let schema = format!(
        "type: object\nproperties:\n  message: {{type: string, default: hello, description: \"echo {version}\"}}\n"
    );
    let mut files: Vec<(String, Vec<u8>)> = vec![
        (
            "module.yaml".into(),
            b"name: echo\nweight: 910\nnamespace: d8-echo\n".to_vec(),
        ),
        (
            "openapi/config-values.yaml".into(),
            schema.as_bytes().to_vec(),
        ),
    ];
    for (name, text) in templates {
        files.push((format!("templates/{name}"), text.as_bytes().to_vec()));
    }
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    let image = ImageBuilder::new(&format!("echo-{version}"))
        .files(&refs)
        .build(layout);
    push_module(push, layout, "echo", version, &image).await;
}

const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: d8-echo\n";
const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: echo\ndata:\n  message: {{ .Values.echo.message | quote }}\n";
const SECRET: &str =
    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: echo-token\ndata:\n  token: dDBrM24=\n";

pub(crate) fn apply(admin: &Path, dir: &Path, name: &str, yaml: &str) {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    kubectl_ok(admin, &["apply", "-f", path.to_str().unwrap()]);
}

pub(crate) fn get(admin: &Path, args: &[&str]) -> Option<String> {
    let (ok, out, _) = crate::kubectl(admin, args);
    ok.then_some(out)
}

#[tokio::test]
async fn the_controller_runs_a_module_from_a_module_source() {
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
    // The controller runs as ServiceAccount deckhouse with the chart's roles: the module's own
    // objects are written through `moduleManagerClusterAdmin`'s binding to cluster-admin.
    crate::rbac::apply_chart_rbac(admin);
    let deckhouse = apiserver.kubeconfig("system-serviceaccount-d8-system-deckhouse");
    publish_chart(
        push,
        layout,
        "v1.0.0",
        &[
            ("ns.yaml", NAMESPACE),
            ("cm.yaml", CONFIG_MAP),
            ("secret.yaml", SECRET),
        ],
    )
    .await;
    let metrics_port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&deckhouse)
        .args(["--identity", "test-controller", "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{metrics_port}"))
        .arg("--module-source-interval=2s")
        .arg("--downloaded-modules-dir")
        .arg(dir.path().join("downloaded"));
    let _controller =
        Service::spawn("d8 controller", command, dir.path().join("controller.log")).unwrap();
    let source = format!(
        "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleSource\nmetadata:\n  name: example\nspec:\n  registry:\n    scheme: HTTP\n    repo: {}/{REPO}\n",
        upstream.host()
    );
    apply(admin, dir.path(), "source.yaml", &source);
    let config = |message: &str, enabled: bool| {
        format!(
            "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: echo\nspec:\n  enabled: {enabled}\n  version: 1\n  settings:\n    message: {message}\n"
        )
    };
    apply(admin, dir.path(), "config.yaml", &config("hi", true));

    // Enabled: the chart is rendered with the settings and applied.
    let cm = [
        "get",
        "configmap",
        "echo",
        "-n",
        "d8-echo",
        "-o",
        "jsonpath={.data.message}",
    ];
    until("the ConfigMap says hi", || {
        get(admin, &cm).as_deref() == Some("hi")
    })
    .await;
    let release = [
        "get",
        "secret",
        "-n",
        "d8-system",
        "sh.helm.release.v1.echo.v1",
        "-o",
        "jsonpath={.metadata.labels.status}",
    ];
    until("release 1 is deployed", || {
        get(admin, &release).as_deref() == Some("deployed")
    })
    .await;
    until("the Module is Ready", || {
        get(
            admin,
            &["get", "module", "echo", "-o", "jsonpath={.status.phase}"],
        )
        .as_deref()
            == Some("Ready")
    })
    .await;
    let queues = Command::new(env!("CARGO_BIN_EXE_d8"))
        .args([
            "queue",
            "list",
            "--address",
            &format!("127.0.0.1:{metrics_port}"),
        ])
        .output()
        .unwrap();
    assert!(
        queues.status.success(),
        "{}",
        String::from_utf8_lossy(&queues.stderr)
    );
    let queues = String::from_utf8_lossy(&queues.stdout);
    assert!(queues.starts_with("Summary: "), "{queues}");
    assert!(queues.contains("Queue 'main': length "), "{queues}");
    let metrics = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("deckhouse_tasks_queue_length{queue=\"main\"}"),
        "{metrics}"
    );

    // Settings change: the ConfigMap is rewritten, the Secret is not.
    let secret_rv = [
        "get",
        "secret",
        "echo-token",
        "-n",
        "d8-echo",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ];
    let before = get(admin, &secret_rv).unwrap();
    apply(admin, dir.path(), "config.yaml", &config("bye", true));
    until("the ConfigMap says bye", || {
        get(admin, &cm).as_deref() == Some("bye")
    })
    .await;
    assert_eq!(get(admin, &secret_rv).unwrap(), before);

    // A new release without the Secret's template: the Secret is deleted.
    publish_chart(
        push,
        layout,
        "v1.1.0",
        &[("ns.yaml", NAMESPACE), ("cm.yaml", CONFIG_MAP)],
    )
    .await;
    until("the Secret is gone", || get(admin, &secret_rv).is_none()).await;
    assert_eq!(get(admin, &cm).as_deref(), Some("bye"));

    // Disabled: everything removed, the release records too.
    apply(admin, dir.path(), "config.yaml", &config("bye", false));
    until("the ConfigMap is gone", || get(admin, &cm).is_none()).await;
    until("the namespace is gone", || {
        get(admin, &["get", "namespace", "d8-echo", "-o", "name"]).is_none()
    })
    .await;
    let releases = kubectl_ok(
        admin,
        &[
            "get",
            "secrets",
            "-n",
            "d8-system",
            "-l",
            "owner=helm",
            "-o",
            "name",
        ],
    );
    assert_eq!(releases, "");
    crate::rbac::assert_deckhouse_calls_beyond(
        "module_lifecycle",
        &log,
        crate::rbac::MODULE_CHART_NAMESPACE,
    )
    .await;
}
