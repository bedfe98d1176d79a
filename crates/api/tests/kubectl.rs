//! The committed CRDs in a real API server: manifests Deckhouse's schemas accept (written from
//! Deckhouse's documentation) apply with `kubectl`, and what Deckhouse's schemas refuse is
//! refused. Each test names the difference from Deckhouse it holds closed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use apiserver::{ApiServer, RunningServer};

struct Server {
    server: RunningServer,
    _data: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Server {
    /// The embedded API server on a loopback port, serving every CRD under `crds/`.
    async fn start() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let data = tempfile::tempdir().expect("data dir");
        let crds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../crds");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let server = ApiServer::builder()
            .data_dir(data.path())
            .crd_dir(&crds)
            .expect("crds/ loads")
            .serve(listener)
            .await
            .expect("server starts");
        Self {
            server,
            _data: data,
            home: tempfile::tempdir().expect("home"),
        }
    }

    /// `kubectl <args>` with `stdin`: (success, stdout, stderr).
    async fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use tokio::io::AsyncWriteExt as _;
        let home: &Path = self.home.path();
        let mut child = tokio::process::Command::new("kubectl")
            .args(args)
            .arg("--kubeconfig")
            .arg(self.server.admin_kubeconfig())
            .arg("--cache-dir")
            .arg(home.join("cache"))
            .env("HOME", home)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl is installed (apt-get install kubectl)");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).await.expect("write stdin");
        }
        drop(input);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("kubectl finished in time")
            .expect("kubectl ran");
        let r = (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        eprintln!("$ kubectl {}\n{}{}", args.join(" "), r.1, r.2);
        r
    }

    async fn apply_ok(&self, manifest: &str) -> String {
        let (ok, out, err) = self.kubectl(&["apply", "-f", "-"], Some(manifest)).await;
        assert!(ok, "refused:\n{manifest}\n{err}");
        out
    }
}

/// ApplicationPackageVersion, CNIMigration and CNINodeMigration: Deckhouse's schemas do not
/// require `spec` (a CNINodeMigration is an empty marker named after its node; a draft
/// ApplicationPackageVersion has only a name).
#[tokio::test]
async fn kinds_without_a_required_spec_apply_without_one() {
    let s = Server::start().await;
    for manifest in [
        "apiVersion: deckhouse.io/v1alpha1
kind: ApplicationPackageVersion
metadata:
  name: main-nginx-v1.2.3
",
        "apiVersion: network.deckhouse.io/v1alpha1
kind: CNIMigration
metadata:
  name: cni-migration
",
        "apiVersion: network.deckhouse.io/v1alpha1
kind: CNINodeMigration
metadata:
  name: worker-0
",
    ] {
        let out = s.apply_ok(manifest).await;
        assert!(out.contains("created"), "{out}");
    }
}

/// ApplicationPackageVersion's `Repository` column reads `.spec.packageRepository`, as
/// Deckhouse's does: the cell stays empty even when `packageRepositoryName` is set.
#[tokio::test]
async fn application_package_version_columns_are_deckhouses() {
    let s = Server::start().await;
    s.apply_ok(
        "apiVersion: deckhouse.io/v1alpha1
kind: ApplicationPackageVersion
metadata:
  name: main-nginx-v1.2.3
spec:
  packageName: nginx
  packageRepositoryName: main
  packageVersion: v1.2.3
",
    )
    .await;
    let (ok, out, _) = s.kubectl(&["get", "apv", "main-nginx-v1.2.3"], None).await;
    assert!(ok);
    let mut lines = out.lines();
    let header = lines.next().unwrap_or_default();
    let row = lines.next().unwrap_or_default();
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(columns[..3], ["NAME", "PACKAGE", "REPOSITORY"], "{out}");
    let at = header.find("REPOSITORY").expect("column");
    let cell = row.get(at..at + "REPOSITORY".len()).unwrap_or_default();
    assert_eq!(
        cell.trim(),
        "",
        "the column does not read packageRepositoryName: {out}"
    );
    assert!(row.starts_with("main-nginx-v1.2.3   nginx"), "{out}");
}

/// ModuleUpdatePolicy v1alpha1 as Deckhouse's schema has it: Deckhouse's documented example
/// applies, `update` is defaulted (so required yet optional to write) to mode `AutoPatch`, and a
/// `matchExpressions` entry must carry `values` with `In`/`NotIn` and none with
/// `Exists`/`DoesNotExist`.
#[tokio::test]
async fn module_update_policy_v1alpha1_checks_update_and_match_expressions() {
    let s = Server::start().await;
    // Deckhouse's documentation example.
    let out = s
        .apply_ok(
            "apiVersion: deckhouse.io/v1alpha1
kind: ModuleUpdatePolicy
metadata:
  name: example-update-policy
spec:
  moduleReleaseSelector:
    labelSelector:
      matchLabels:
        source: example
        module: module-1
  releaseChannel: Alpha
  update:
    mode: Auto
    windows:
    - days: [Mon, Wed]
      from: \"13:30\"
      to: \"14:00\"
",
        )
        .await;
    assert!(out.contains("created"), "{out}");
    // Without `update`: the default `{}` fills it in, and its mode defaults to AutoPatch.
    s.apply_ok(
        "apiVersion: deckhouse.io/v1alpha1
kind: ModuleUpdatePolicy
metadata:
  name: expressions
spec:
  moduleReleaseSelector:
    labelSelector:
      matchExpressions:
      - key: module
        operator: In
        values: [module-1, module-2]
      - key: source
        operator: Exists
",
    )
    .await;
    let (ok, mode, _) = s
        .kubectl(
            &[
                "get",
                "moduleupdatepolicies.v1alpha1.deckhouse.io",
                "expressions",
                "-o",
                "jsonpath={.spec.update.mode}",
            ],
            None,
        )
        .await;
    assert!(ok);
    assert_eq!(mode, "AutoPatch");
    for (name, expression) in [
        ("in-without-values", "- key: module\n        operator: In"),
        (
            "exists-with-values",
            "- key: module\n        operator: Exists\n        values: [x]",
        ),
        (
            "unknown-operator",
            "- key: module\n        operator: Gt\n        values: [\"1\"]",
        ),
    ] {
        let manifest = format!(
            "apiVersion: deckhouse.io/v1alpha1
kind: ModuleUpdatePolicy
metadata:
  name: {name}
spec:
  moduleReleaseSelector:
    labelSelector:
      matchExpressions:
      {expression}
"
        );
        let (ok, _, err) = s.kubectl(&["apply", "-f", "-"], Some(&manifest)).await;
        assert!(!ok, "{name} was admitted");
        assert!(err.contains("matchExpressions"), "{name}: {err}");
    }
}

/// Module carries Deckhouse's `v1beta1` (the package system's shape) in its CRD without serving
/// it: `v1alpha1` objects apply and list, `v1beta1` is not a resource the server offers.
#[tokio::test]
async fn module_v1beta1_is_present_but_not_served() {
    let s = Server::start().await;
    let (ok, versions, _) = s
        .kubectl(
            &[
                "get",
                "crd",
                "modules.deckhouse.io",
                "-o",
                "jsonpath={range .spec.versions[*]}{.name}={.served}/{.storage} {end}",
            ],
            None,
        )
        .await;
    assert!(ok);
    assert_eq!(versions.trim(), "v1alpha1=true/true v1beta1=false/false");
    s.apply_ok(
        "apiVersion: deckhouse.io/v1alpha1
kind: Module
metadata:
  name: echo
properties:
  weight: 900
  source: example
",
    )
    .await;
    let (ok, _, _) = s
        .kubectl(&["get", "modules.v1alpha1.deckhouse.io", "echo"], None)
        .await;
    assert!(ok);
    let (ok, _, err) = s
        .kubectl(&["get", "modules.v1beta1.deckhouse.io", "echo"], None)
        .await;
    assert!(!ok, "v1beta1 is served");
    assert!(
        err.contains("doesn't have a resource type") || err.contains("not found"),
        "{err}"
    );
}

/// RegistryNode and RegistryStorage: Deckhouse's schemas do not require `secretRef` under
/// `auth`, so an `auth` naming no Secret (anonymous access) applies, and reads back as written.
#[tokio::test]
async fn registry_auth_without_a_secret_ref_applies() {
    let s = Server::start().await;
    for manifest in [
        "apiVersion: deckhouse.io/v1alpha1
kind: RegistryNode
metadata:
  name: worker-0
spec:
  cache: false
  backends:
  - name: Upstream
    host: registry.example.com
    path: /deckhouse/ee
    auth: {}
    mirrors:
    - host: mirror.example.com
      auth: {}
",
        "apiVersion: deckhouse.io/v1alpha1
kind: RegistryStorage
metadata:
  name: registry
spec:
  upstream:
    host: registry.example.com
    auth: {}
",
    ] {
        let out = s.apply_ok(manifest).await;
        assert!(out.contains("created"), "{out}");
    }
    let node: api::registry::RegistryNode = {
        let (ok, out, err) = s
            .kubectl(&["get", "registrynode", "worker-0", "-o", "json"], None)
            .await;
        assert!(ok, "{err}");
        serde_json::from_str(&out).expect("a RegistryNode")
    };
    let auth = node.spec.backends[0].auth.as_ref().expect("auth kept");
    assert_eq!(auth.secret_ref, None);
}

/// A status patch through kubectl: (success, stderr).
async fn patch_status(s: &Server, args: &[&str], conditions: &str) -> (bool, String) {
    let patch = format!("{{\"status\":{{\"conditions\":{conditions}}}}}");
    let mut all: Vec<&str> = vec!["patch"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--subresource=status", "--type=merge", "-p", &patch]);
    let (ok, _, err) = s.kubectl(&all, None).await;
    (ok, err)
}

const READY: &str = r#"{"type":"Ready","status":"True","reason":"Reconciled","message":"","lastTransitionTime":"2025-01-01T00:00:00Z"}"#;

/// Status conditions of Application, PackageRepositoryOperation, PackageRepository and
/// ObjectKeeper carry Kubernetes' standard constraints, as Deckhouse's CRDs declare them: a
/// controller's condition (`True`, CamelCase reason, empty message) is stored; a status other than
/// `True`/`False`/`Unknown`, a reason that is not CamelCase, or a missing message is refused.
/// Application and PackageRepositoryOperation key them by `type` (a second condition of one type
/// is refused); PackageRepository and ObjectKeeper, like Deckhouse's, do not.
#[tokio::test]
async fn status_conditions_carry_kubernetes_standard_constraints() {
    let s = Server::start().await;
    s.apply_ok(
        "apiVersion: deckhouse.io/v1alpha1
kind: Application
metadata:
  name: nginx
  namespace: default
spec:
  packageName: nginx
  packageVersion: v1.2.3
---
apiVersion: deckhouse.io/v1alpha1
kind: PackageRepositoryOperation
metadata:
  name: main-scan
spec:
  packageRepositoryName: main
  type: Update
---
apiVersion: deckhouse.io/v1alpha1
kind: PackageRepository
metadata:
  name: main
spec:
  registry:
    repo: registry.example.com/packages
---
apiVersion: deckhouse.io/v1alpha1
kind: ObjectKeeper
metadata:
  name: keep-for-a-day
spec:
  mode: TTL
  ttl: 24h
",
    )
    .await;
    let objects: [&[&str]; 4] = [
        &["application", "nginx", "-n", "default"],
        &["packagerepositoryoperation", "main-scan"],
        &["packagerepository", "main"],
        &["objectkeeper", "keep-for-a-day"],
    ];
    for object in objects {
        let (ok, err) = patch_status(&s, object, &format!("[{READY}]")).await;
        assert!(ok, "{object:?}: {err}");
        for (bad, says) in [
            (
                READY.replace("\"True\"", "\"Yes\""),
                "Unsupported value: \"Yes\"",
            ),
            (
                READY.replace("Reconciled", "not camel case"),
                "status.conditions[0].reason",
            ),
            (
                READY.replace(",\"message\":\"\"", ""),
                "status.conditions[0].message: Required value",
            ),
        ] {
            let (ok, err) = patch_status(&s, object, &format!("[{bad}]")).await;
            assert!(!ok, "{object:?} took {bad}");
            assert!(err.contains(says), "{object:?}: {err}");
        }
    }
    for (object, keyed) in [
        (objects[0], true),
        (objects[1], true),
        (objects[2], false),
        (objects[3], false),
    ] {
        let (ok, err) = patch_status(&s, object, &format!("[{READY},{READY}]")).await;
        assert_eq!(ok, !keyed, "{object:?}: {err}");
        if keyed {
            assert!(err.contains("Duplicate value"), "{object:?}: {err}");
        }
    }
}

/// CNIMigration and CNINodeMigration: Deckhouse's CRDs declare `status.conditions` (and
/// `failedSummary`) as plain lists, without `x-kubernetes-list-type` markers or required
/// `failedSummary` fields: a second condition of one type is stored, as a failed node reported
/// without a reason is.
#[tokio::test]
async fn cni_migration_lists_are_plain_as_deckhouses() {
    let s = Server::start().await;
    s.apply_ok(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: CNIMigration
metadata:
  name: cni-migration
spec:
  targetCNI: cilium
---
apiVersion: network.deckhouse.io/v1alpha1
kind: CNINodeMigration
metadata:
  name: worker-0
",
    )
    .await;
    for object in [
        ["cnimigration", "cni-migration"],
        ["cninodemigration", "worker-0"],
    ] {
        let (ok, err) = patch_status(&s, &object, &format!("[{READY},{READY}]")).await;
        assert!(ok, "{object:?}: {err}");
        let (ok, out, _) = s
            .kubectl(
                &[
                    "get",
                    object[0],
                    object[1],
                    "-o",
                    "jsonpath={.status.conditions[*].type}",
                ],
                None,
            )
            .await;
        assert!(ok);
        assert_eq!(out, "Ready Ready", "{object:?}");
    }
    let (ok, _, err) = s
        .kubectl(
            &[
                "patch",
                "cnimigration",
                "cni-migration",
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"failedSummary":[{"node":"worker-0"}]}}"#,
            ],
            None,
        )
        .await;
    assert!(ok, "{err}");
}

/// Application `spec.maintenance`: Deckhouse's enum, `NoResourceReconciliation` only.
#[tokio::test]
async fn application_maintenance_is_deckhouses_enum() {
    let s = Server::start().await;
    s.apply_ok(
        "apiVersion: deckhouse.io/v1alpha1
kind: Application
metadata:
  name: nginx
  namespace: default
spec:
  packageName: nginx
  packageVersion: v1.2.3
  maintenance: NoResourceReconciliation
",
    )
    .await;
    let (ok, _, err) = s
        .kubectl(
            &["apply", "-f", "-"],
            Some(
                "apiVersion: deckhouse.io/v1alpha1
kind: Application
metadata:
  name: other
  namespace: default
spec:
  packageName: nginx
  packageVersion: v1.2.3
  maintenance: Paused
",
            ),
        )
        .await;
    assert!(!ok);
    assert!(
        err.contains("spec.maintenance: Unsupported value: \"Paused\""),
        "{err}"
    );
}

/// ValidationWebhook and ConversionWebhook: Deckhouse's CRDs carry controller-gen's markers of
/// `metav1.LabelSelector` (the selector `x-kubernetes-map-type: atomic`, `matchExpressions` and
/// `values` `x-kubernetes-list-type: atomic`) and of the admission rules' lists; the served CRDs
/// carry them at the same places, and Deckhouse's manifests apply.
#[tokio::test]
async fn webhook_selectors_and_rules_carry_deckhouses_list_markers() {
    let s = Server::start().await;
    s.apply_ok(
        r#"apiVersion: deckhouse.io/v1alpha1
kind: ValidationWebhook
metadata:
  name: ingress-class-check
validationObject:
  name: ingress-class.deckhouse.io
  failurePolicy: Fail
  sideEffects: None
  timeoutSeconds: 10
  labelSelector:
    matchExpressions:
    - key: heritage
      operator: NotIn
      values: [deckhouse]
  namespace:
    labelSelector:
      matchLabels:
        kubernetes.io/metadata.name: prod
  rules:
  - apiGroups: ["networking.k8s.io"]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["ingresses"]
    scope: Namespaced
context:
- name: ingressclasses
  kubernetes:
    apiVersion: networking.k8s.io/v1
    kind: IngressClass
    labelSelector:
      matchLabels:
        app: nginx
    namespace:
      labelSelector:
        matchExpressions:
        - key: tier
          operator: Exists
handler:
  python: |
    def main(ctx):
        pass
---
apiVersion: deckhouse.io/v1alpha1
kind: ConversionWebhook
metadata:
  name: widgets.example.com
context:
- name: settings
  kubernetes:
    kind: ConfigMap
    labelSelector:
      matchExpressions:
      - key: app
        operator: In
        values: [widgets]
conversions:
- from: v1alpha1
  to: v1
  handler:
    python: |
      def main(ctx):
          pass
"#,
    )
    .await;
    let server = &s;
    let schema = |crd: &'static str| async move {
        let (ok, out, err) = server
            .kubectl(&["get", "crd", crd, "-o", "json"], None)
            .await;
        assert!(ok, "{err}");
        let crd: serde_json::Value = serde_json::from_str(&out).expect("CRD JSON");
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
    };
    let selector_markers = |selector: &serde_json::Value, at: &str| {
        assert_eq!(selector["x-kubernetes-map-type"], "atomic", "{at}");
        let expressions = &selector["properties"]["matchExpressions"];
        assert_eq!(expressions["x-kubernetes-list-type"], "atomic", "{at}");
        assert_eq!(
            expressions["items"]["properties"]["values"]["x-kubernetes-list-type"], "atomic",
            "{at}"
        );
    };
    let validation = schema("validationwebhooks.deckhouse.io").await;
    let object = &validation["properties"]["validationObject"]["properties"];
    selector_markers(&object["labelSelector"], "validationObject.labelSelector");
    selector_markers(
        &object["namespace"]["properties"]["labelSelector"],
        "validationObject.namespace.labelSelector",
    );
    for list in ["apiGroups", "apiVersions", "operations", "resources"] {
        assert_eq!(
            object["rules"]["items"]["properties"][list]["x-kubernetes-list-type"], "atomic",
            "rules[].{list}"
        );
    }
    for crd in [
        "validationwebhooks.deckhouse.io",
        "conversionwebhooks.deckhouse.io",
    ] {
        let schema = schema(crd).await;
        let binding =
            &schema["properties"]["context"]["items"]["properties"]["kubernetes"]["properties"];
        selector_markers(
            &binding["labelSelector"],
            &format!("{crd} context[].kubernetes.labelSelector"),
        );
        selector_markers(
            &binding["namespace"]["properties"]["labelSelector"],
            &format!("{crd} context[].kubernetes.namespace.labelSelector"),
        );
    }
}
