//! The webhook handler end to end: the embedded API server calls it over HTTPS as kube-apiserver
//! would, driven by the preinstalled kubectl; Python handlers run with Flant's `deckhouse` SDK.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TEST_CRDS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.io
spec:
  group: example.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {mode: {type: string}, replicas: {type: integer}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sprockets.example.io
spec:
  group: example.io
  scope: Namespaced
  names: {plural: sprockets, singular: sprocket, kind: Sprocket}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: string}}}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {teeth: {type: integer}}}
"#;

struct Env {
    _server: apiserver::RunningServer,
    _dir: tempfile::TempDir,
    home: PathBuf,
    kubeconfig: PathBuf,
    handler: tokio::task::JoinHandle<Result<(), String>>,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.handler.abort();
    }
}

fn certs() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (cert.pem(), key.serialize_pem(), ca.pem())
}

async fn client_from(path: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(path).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

impl Env {
    async fn start() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let crds: Vec<Value> = api::crds::all()
            .into_iter()
            .filter(|c| {
                ["ValidationWebhook", "ConversionWebhook"].contains(&c.spec.names.kind.as_str())
            })
            .map(|c| serde_json::to_value(c).unwrap())
            .collect();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = apiserver::ApiServer::builder()
            .data_dir(dir.path().join("apiserver"))
            .crds(crds)
            .crd_yaml(TEST_CRDS)
            .unwrap()
            .serve(listener)
            .await
            .unwrap();
        let kubeconfig = server.admin_kubeconfig().to_path_buf();
        let client = client_from(&kubeconfig).await;
        let (cert_pem, key_pem, ca_pem) = certs();
        let hl = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://{}", hl.local_addr().unwrap());
        let opts = webhook_handler::Options {
            hooks_dir: dir.path().join("hooks"),
            endpoint: webhook_handler::render::Endpoint::Url(base),
            cert_pem,
            key_pem,
            ca_pem,
        };
        let handler = tokio::spawn(webhook_handler::run(client, hl, opts));
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        Self {
            _server: server,
            _dir: dir,
            home,
            kubeconfig,
            handler,
        }
    }

    async fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use tokio::io::AsyncWriteExt as _;
        let mut child = tokio::process::Command::new("kubectl")
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env("HOME", &self.home)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl is installed");
        let mut input = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).await.unwrap();
        }
        drop(input);
        let out = child.wait_with_output().await.unwrap();
        let r = (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        eprintln!("$ kubectl {}\n{}{}", args.join(" "), r.1, r.2);
        r
    }

    async fn apply(&self, manifest: &str) -> (bool, String, String) {
        self.kubectl(&["apply", "-f", "-"], Some(manifest)).await
    }

    /// Waits until the object's Ready condition says `status`; returns its message.
    async fn ready(&self, resource: &str, status: &str) -> String {
        for _ in 0..200 {
            let (_, out, _) = self
                .kubectl(
                    &[
                        "get",
                        resource,
                        "-o",
                        "jsonpath={.status.conditions[0].status}|{.status.conditions[0].message}",
                    ],
                    None,
                )
                .await;
            if let Some((s, m)) = out.split_once('|')
                && s == status
            {
                return m.to_string();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{resource} never became Ready={status}");
    }

    /// Applies `manifest` until it is accepted or refused with a message containing `want`
    /// (the handler's registration and context watches settle asynchronously).
    async fn eventually_apply(&self, manifest: &str, accepted: bool, want: &str) -> String {
        let mut last = String::new();
        for _ in 0..100 {
            let (ok, _, err) = self.apply(manifest).await;
            if ok == accepted && err.contains(want) {
                return err;
            }
            last = err;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!(
            "never {}: {want}\nlast: {last}",
            if accepted { "accepted" } else { "refused" }
        );
    }
}

fn widget(name: &str, mode: &str, replicas: i64, labels: Value) -> String {
    json!({"apiVersion": "example.io/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"mode": mode, "replicas": replicas}})
    .to_string()
}

fn validation_webhook(
    name: &str,
    webhook: &str,
    extra: Value,
    handler: Value,
    context: Value,
) -> String {
    let mut vo = json!({
        "name": webhook,
        "rules": [{"apiGroups": ["example.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}],
    });
    for (k, v) in extra.as_object().unwrap() {
        vo[k] = v.clone();
    }
    json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ValidationWebhook", "metadata": {"name": name},
        "validationObject": vo, "handler": handler, "context": context})
    .to_string()
}

const PYTHON_HANDLER: &str = r#"def validate(ctx: DotMap, output: hook.ValidationsCollector):
    obj = ctx.review.request.object
    if obj.spec.mode == "Proxy":
        output.deny(f"widget {obj.metadata.name}: mode Proxy is not allowed")
        return
    limits = ctx.snapshots.limits
    if limits and obj.spec.replicas > int(limits[0].filterResult):
        output.deny(f"widget {obj.metadata.name}: at most {limits[0].filterResult} replicas")
        return
    output.allow("checked by python")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_cel_handlers_refuse_and_admit_and_a_context_snapshot_changes_the_answer() {
    let env = Env::start().await;
    let limits = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: widget-limits\n  namespace: default\ndata:\n  max: \"2\"\n";
    assert!(env.apply(limits).await.0);
    // Not the ConfigMap the context's fieldSelector names: never in its snapshot.
    assert!(
        env.apply(
            &limits
                .replace("widget-limits", "a-decoy")
                .replace("\"2\"", "\"0\"")
        )
        .await
        .0
    );
    let python = validation_webhook(
        "widgets-python",
        "widgets-python.example.deckhouse.io",
        json!({"labelSelector": {"matchLabels": {"checked-by": "python"}}}),
        json!({"python": PYTHON_HANDLER}),
        json!([{"name": "limits", "kubernetes": {"apiVersion": "v1", "kind": "ConfigMap",
            "fieldSelector": {"matchExpressions": [{"field": "metadata.name", "operator": "=", "value": "widget-limits"}]},
            "jqFilter": ".data.max"}}]),
    );
    let (ok, _, err) = env.apply(&python).await;
    assert!(ok, "{err}");
    let msg = env.ready("validationwebhook/widgets-python", "True").await;
    assert!(msg.contains("serving"), "{msg}");

    let py = json!({"checked-by": "python"});
    let err = env
        .eventually_apply(
            &widget("w1", "Direct", 1, py.clone()),
            true,
            "Warning: checked by python",
        )
        .await;
    assert!(err.contains("Warning: checked by python"), "{err}");
    let (ok, _, err) = env.apply(&widget("w2", "Proxy", 1, py.clone())).await;
    assert!(!ok);
    assert!(
        err.contains("admission webhook \"widgets-python.example.deckhouse.io\" denied the request: widget w2: mode Proxy is not allowed"),
        "{err}"
    );
    // The context snapshot (the ConfigMap's .data.max) decides, and follows the ConfigMap.
    let (ok, _, err) = env.apply(&widget("w3", "Direct", 3, py.clone())).await;
    assert!(
        !ok && err.contains("widget w3: at most 2 replicas"),
        "{err}"
    );
    assert!(env.apply(&limits.replace("\"2\"", "\"5\"")).await.0);
    env.eventually_apply(&widget("w3", "Direct", 3, py.clone()), true, "")
        .await;

    let cel = validation_webhook(
        "widgets-cel",
        "widgets-cel.example.deckhouse.io",
        json!({"labelSelector": {"matchLabels": {"checked-by": "cel"}}}),
        json!({"cel": "- expression: object.spec.replicas <= 3\n  message: a widget has at most 3 replicas\n- expression: object.metadata.name.startsWith('w')\n"}),
        json!([]),
    );
    assert!(env.apply(&cel).await.0);
    env.ready("validationwebhook/widgets-cel", "True").await;
    let c = json!({"checked-by": "cel"});
    env.eventually_apply(&widget("w4", "Direct", 2, c.clone()), true, "")
        .await;
    let (ok, _, err) = env.apply(&widget("w5", "Direct", 4, c.clone())).await;
    assert!(!ok);
    assert!(
        err.contains("admission webhook \"widgets-cel.example.deckhouse.io\" denied the request: a widget has at most 3 replicas"),
        "{err}"
    );
    let (ok, _, err) = env.apply(&widget("x6", "Direct", 1, c)).await;
    assert!(
        !ok && err.contains(
            "denied the request: failed expression: object.metadata.name.startsWith('w')"
        ),
        "{err}"
    );

    // The configuration the handler registered.
    let (_, out, _) = env
        .kubectl(
            &[
                "get",
                "validatingwebhookconfiguration",
                "d8-deckhouse-validating-webhook-handler",
                "-o",
                "jsonpath={.webhooks[*].name}",
            ],
            None,
        )
        .await;
    let mut names: Vec<&str> = out.split(' ').collect();
    names.sort();
    assert_eq!(
        names,
        [
            "widgets-cel.example.deckhouse.io",
            "widgets-python.example.deckhouse.io"
        ]
    );

    // A handler that cannot be built says why in its status, and serves nothing.
    let broken = validation_webhook(
        "broken",
        "broken.example.deckhouse.io",
        json!({}),
        json!({"cel": "- expression: 'object.(('"}),
        json!([]),
    );
    assert!(env.apply(&broken).await.0);
    let msg = env.ready("validationwebhook/broken", "False").await;
    assert!(msg.contains("does not compile"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_handler_is_killed_at_the_timeout_and_a_crashing_one_is_a_clear_denial() {
    let env = Env::start().await;
    let hang = |policy: &str| {
        validation_webhook(
            "hang",
            "hang.example.deckhouse.io",
            json!({"labelSelector": {"matchLabels": {"case": "hang"}}, "timeoutSeconds": 2, "failurePolicy": policy}),
            json!({"python": "def validate(ctx, output):\n    import time\n    time.sleep(60)\n"}),
            json!([]),
        )
    };
    assert!(env.apply(&hang("Fail")).await.0);
    env.ready("validationwebhook/hang", "True").await;
    let started = std::time::Instant::now();
    let err = env
        .eventually_apply(
            &widget("h1", "Direct", 1, json!({"case": "hang"})),
            false,
            "was killed after 1.5s",
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        err.contains(
            "Internal error occurred: failed calling webhook \"hang.example.deckhouse.io\""
        ),
        "{err}"
    );
    assert!(env.apply(&hang("Ignore")).await.0);
    env.eventually_apply(
        &widget("h1", "Direct", 1, json!({"case": "hang"})),
        true,
        "",
    )
    .await;

    let crash = validation_webhook(
        "crash",
        "crash.example.deckhouse.io",
        json!({"labelSelector": {"matchLabels": {"case": "crash"}}}),
        json!({"python": "import no_such_module_here\n\ndef validate(ctx, output):\n    output.allow()\n"}),
        json!([]),
    );
    assert!(env.apply(&crash).await.0);
    env.ready("validationwebhook/crash", "True").await;
    let err = env
        .eventually_apply(
            &widget("c1", "Direct", 1, json!({"case": "crash"})),
            false,
            "denied the request",
        )
        .await;
    assert!(
        err.contains("admission webhook \"crash.example.deckhouse.io\" denied the request: Hook failed (exit code 1): ")
            && err.contains("No module named 'no_such_module_here'"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversion_webhook_converts_between_two_versions_as_kubectl_reads_both() {
    let env = Env::start().await;
    let cw = json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ConversionWebhook",
        "metadata": {"name": "sprockets.example.io"},
        "conversions": [
            {"from": "v1", "to": "v2", "handler": {"python": "obj = DotMap(o)\nobj.apiVersion = \"example.io/v2\"\nobj.spec.teeth = int(obj.spec.size.split(\"-\")[0])\ndel obj.spec.size\nreturn None, obj.toDict()"}},
            {"from": "v2", "to": "v1", "handler": {"python": "obj = DotMap(o)\nobj.apiVersion = \"example.io/v1\"\nobj.spec.size = f\"{obj.spec.teeth}-teeth\"\ndel obj.spec.teeth\nreturn None, obj.toDict()"}},
        ],
    });
    assert!(env.apply(&cw.to_string()).await.0);
    env.ready("conversionwebhook/sprockets.example.io", "True")
        .await;
    let (_, out, _) = env
        .kubectl(
            &[
                "get",
                "crd",
                "sprockets.example.io",
                "-o",
                "jsonpath={.spec.conversion.strategy}",
            ],
            None,
        )
        .await;
    assert_eq!(out, "Webhook");
    let v2 = "apiVersion: example.io/v2\nkind: Sprocket\nmetadata:\n  name: s1\n  namespace: default\nspec:\n  teeth: 12\n";
    env.eventually_apply(v2, true, "").await;
    let (_, out, _) = env
        .kubectl(
            &[
                "get",
                "sprockets.v1.example.io",
                "s1",
                "-n",
                "default",
                "-o",
                "jsonpath={.spec.size}",
            ],
            None,
        )
        .await;
    assert_eq!(out, "12-teeth");
    let (_, out, _) = env
        .kubectl(
            &[
                "get",
                "sprockets.v2.example.io",
                "s1",
                "-n",
                "default",
                "-o",
                "jsonpath={.spec.teeth}",
            ],
            None,
        )
        .await;
    assert_eq!(out, "12");

    // Deleting the ConversionWebhook takes the CRD's conversion webhook away.
    assert!(
        env.kubectl(
            &["delete", "conversionwebhook", "sprockets.example.io"],
            None
        )
        .await
        .0
    );
    for _ in 0..100 {
        let (_, out, _) = env
            .kubectl(
                &[
                    "get",
                    "crd",
                    "sprockets.example.io",
                    "-o",
                    "jsonpath={.spec.conversion.strategy}",
                ],
                None,
            )
            .await;
        if out == "None" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the CRD kept its conversion webhook");
}
