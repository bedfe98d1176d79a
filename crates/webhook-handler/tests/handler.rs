//! The webhook handler end to end: the embedded API server calls it over HTTPS as kube-apiserver
//! would, driven by the preinstalled kubectl; Python handlers run with Flant's `deckhouse` SDK.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use testkit::certs::Certs;

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
    /// The CA of the serving certificate, the files the handler reads it from, its URL.
    ca: Certs,
    certs: PathBuf,
    base: String,
    client: kube::Client,
    opts: webhook_handler::Options,
    home: PathBuf,
    kubeconfig: PathBuf,
    handler: tokio::task::JoinHandle<Result<(), String>>,
    /// `http://…/metrics` of the handler's metrics listener.
    metrics_url: String,
    metrics: tokio::task::JoinHandle<()>,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.handler.abort();
        self.metrics.abort();
    }
}

/// Writes a serving pair for loopback signed by `ca` where the handler reads it.
fn write_pair(dir: &Path, ca: &Certs) {
    let pair = ca.server(&[]);
    std::fs::write(dir.join("tls.crt"), pair.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), pair.key_pem).unwrap();
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
        let ca = Certs::new("webhook-handler CA");
        let certs = dir.path().join("certs");
        std::fs::create_dir_all(&certs).unwrap();
        write_pair(&certs, &ca);
        std::fs::write(certs.join("ca.crt"), ca.ca_pem()).unwrap();
        let hl = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://{}", hl.local_addr().unwrap());
        let opts = webhook_handler::Options {
            hooks_dir: dir.path().join("hooks"),
            endpoint: webhook_handler::render::Endpoint::Url(base.clone()),
            certificate: webhook::CertificateFiles::load(
                certs.join("tls.crt"),
                certs.join("tls.key"),
            )
            .unwrap(),
            ca: webhook_handler::ca::CaFile::load(certs.join("ca.crt")).unwrap(),
            metrics: webhook_handler::metrics::Metrics::default(),
        };
        let handler = tokio::spawn(webhook_handler::run(client.clone(), hl, opts.clone()));
        let ml = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let metrics_url = format!("http://{}/metrics", ml.local_addr().unwrap());
        let metrics = tokio::spawn(webhook_handler::metrics::serve(ml, opts.metrics.clone()));
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        Self {
            _server: server,
            _dir: dir,
            ca,
            certs,
            base,
            client,
            opts,
            home,
            kubeconfig,
            handler,
            metrics_url,
            metrics,
        }
    }

    /// The value of the series `series` (name and labels as exposed) on `/metrics`; 0 when absent.
    async fn metric(&self, series: &str) -> f64 {
        let text = testkit::http_client(None)
            .get(&self.metrics_url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .map(|v| v.parse().unwrap())
            .unwrap_or(0.0)
    }

    /// Stops the handler (its watches and its answers) — as a Deployment scaled to zero.
    fn stop_handler(&mut self) {
        self.handler.abort();
    }

    /// Starts a new handler on a new port; it registers its webhooks there.
    async fn start_handler(&mut self) {
        let hl = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut opts = self.opts.clone();
        opts.endpoint =
            webhook_handler::render::Endpoint::Url(format!("https://{}", hl.local_addr().unwrap()));
        self.handler = tokio::spawn(webhook_handler::run(self.client.clone(), hl, opts));
    }

    /// `kubectl get <resource> -o jsonpath=<path>`: whether it exists, and the output.
    async fn get(&self, resource: &str, path: &str) -> (bool, String) {
        let (ok, out, _) = self
            .kubectl(&["get", resource, "-o", &format!("jsonpath={path}")], None)
            .await;
        (ok, out)
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
    // Each conversion step is a run of the CRD's hook, counted under its binding.
    let v2_to_v1 = r#"{hook="sprockets.example.io/webhooks/conversion/sprockets.example.io.py",binding="v2_to_v1",queue=""}"#;
    assert!(
        env.metric(&format!("shell_operator_hook_run_success_total{v2_to_v1}"))
            .await
            >= 1.0
    );

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_rotated_on_disk_is_served_without_a_restart() {
    let env = Env::start().await;
    let health = format!("{}/healthz", env.base);
    let get = |ca: String| {
        let health = health.clone();
        async move {
            testkit::http_client(Some(&ca))
                .get(health)
                .send()
                .await
                .map(|r| r.status().as_u16())
        }
    };
    let new_ca = Certs::new("rotated CA");
    assert_eq!(get(env.ca.ca_pem()).await.unwrap(), 200);
    assert!(get(new_ca.ca_pem()).await.is_err());
    // A half-written rotation (a key that does not parse) keeps the old pair in service.
    std::fs::write(env.certs.join("tls.key"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
    assert_eq!(get(env.ca.ca_pem()).await.unwrap(), 200);
    write_pair(&env.certs, &new_ca);
    assert_eq!(
        get(new_ca.ca_pem()).await.unwrap(),
        200,
        "the new certificate is served"
    );
    assert!(
        get(env.ca.ca_pem()).await.is_err(),
        "the old one is not any more"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_webhook_object_waits_until_the_handler_has_taken_its_registration_away() {
    let mut env = Env::start().await;
    let vw = validation_webhook(
        "widgets-cel",
        "widgets-cel.example.deckhouse.io",
        json!({}),
        json!({"cel": "- expression: object.spec.replicas <= 3\n  message: a widget has at most 3 replicas\n"}),
        json!([]),
    );
    let cw = json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ConversionWebhook",
        "metadata": {"name": "sprockets.example.io"},
        "conversions": [
            {"from": "v1", "to": "v2", "handler": {"python": "return None, o"}},
            {"from": "v2", "to": "v1", "handler": {"python": "return None, o"}},
        ],
    });
    assert!(env.apply(&vw).await.0);
    assert!(env.apply(&cw.to_string()).await.0);
    env.ready("validationwebhook/widgets-cel", "True").await;
    env.ready("conversionwebhook/sprockets.example.io", "True")
        .await;
    let vwc = "validatingwebhookconfiguration/d8-deckhouse-validating-webhook-handler";
    let strategy = "{.spec.conversion.strategy}";
    for _ in 0..100 {
        let (_, f) = env
            .get(
                "conversionwebhook/sprockets.example.io",
                "{.metadata.finalizers}",
            )
            .await;
        if f.contains("exist-on-fs") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        env.get("validationwebhook/widgets-cel", "{.metadata.finalizers}")
            .await
            .1,
        r#"["validationwebhooks.deckhouse.io/exist-on-fs"]"#
    );
    assert_eq!(
        env.get(
            "conversionwebhook/sprockets.example.io",
            "{.metadata.finalizers}"
        )
        .await
        .1,
        r#"["conversionwebhooks.deckhouse.io/crd-cleanup","conversionwebhooks.deckhouse.io/exist-on-fs"]"#
    );

    // With the handler down, the objects wait, and so do their registrations.
    env.stop_handler();
    assert!(
        env.kubectl(
            &[
                "delete",
                "validationwebhook/widgets-cel",
                "conversionwebhook/sprockets.example.io",
                "--wait=false",
            ],
            None,
        )
        .await
        .0
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        env.get("validationwebhook/widgets-cel", "{.metadata.name}")
            .await
            .0
    );
    assert!(
        env.get("conversionwebhook/sprockets.example.io", "{.metadata.name}")
            .await
            .0
    );
    assert!(
        env.get(vwc, "{.webhooks[*].name}")
            .await
            .1
            .contains("widgets-cel")
    );
    assert_eq!(
        env.get("crd/sprockets.example.io", strategy).await.1,
        "Webhook"
    );

    // A handler that runs again removes the registrations, then lets the objects go.
    env.start_handler().await;
    let mut gone = false;
    for _ in 0..200 {
        let vw_there = env
            .get("validationwebhook/widgets-cel", "{.metadata.name}")
            .await
            .0;
        let cw_there = env
            .get("conversionwebhook/sprockets.example.io", "{.metadata.name}")
            .await
            .0;
        if !vw_there && !cw_there {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the deleted objects never went");
    assert!(
        !env.get(vwc, "{.metadata.name}").await.0,
        "the configuration is gone"
    );
    assert_eq!(
        env.get("crd/sprockets.example.io", strategy).await.1,
        "None"
    );
    let hooks = env.opts.hooks_dir.clone();
    assert!(
        !hooks
            .join("widgets-cel/webhooks/validating/widgets-cel.py")
            .exists()
    );
    assert!(
        !hooks
            .join("sprockets.example.io/webhooks/conversion/sprockets.example.io.py")
            .exists()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_review_a_handler_answers_is_counted_on_metrics_as_shell_operator_counts_hook_runs() {
    let env = Env::start().await;
    assert_eq!(
        env.metric("shell_operator_tasks_queue_length{queue=\"main\"}")
            .await,
        0.0
    );
    let c = cel_widgets_refused(&env, "w0").await;
    let labels = r#"{hook="widgets-cel/webhooks/validating/widgets-cel.py",binding="widgets-cel.example.deckhouse.io",queue=""}"#;
    let series = |name: &str| format!("shell_operator_{name}{labels}");
    let before = env.metric(&series("hook_run_success_total")).await;
    assert!(before >= 1.0, "the refusal is a successful run");
    assert!(env.apply(&widget("w1", "Direct", 1, c.clone())).await.0);
    assert!(!env.apply(&widget("w2", "Direct", 5, c)).await.0);
    assert_eq!(
        env.metric(&series("hook_run_success_total")).await,
        before + 2.0
    );
    assert_eq!(
        env.metric(&series("hook_run_seconds_count")).await,
        before + 2.0
    );
    assert_eq!(env.metric(&series("hook_run_errors_total")).await, 0.0);
    assert_eq!(
        env.metric(&series("hook_run_allowed_errors_total")).await,
        0.0
    );

    // A hook that crashes is a run that failed.
    let crash = validation_webhook(
        "crash",
        "crash.example.deckhouse.io",
        json!({"labelSelector": {"matchLabels": {"case": "crash"}}}),
        json!({"python": "import no_such_module_here\n\ndef validate(ctx, output):\n    output.allow()\n"}),
        json!([]),
    );
    assert!(env.apply(&crash).await.0);
    env.ready("validationwebhook/crash", "True").await;
    env.eventually_apply(
        &widget("c1", "Direct", 1, json!({"case": "crash"})),
        false,
        "Hook failed (exit code 1)",
    )
    .await;
    let crashed = r#"{hook="crash/webhooks/validating/crash.py",binding="crash.example.deckhouse.io",queue=""}"#;
    assert!(
        env.metric(&format!("shell_operator_hook_run_errors_total{crashed}"))
            .await
            >= 1.0
    );
    assert_eq!(
        env.metric(&format!("shell_operator_hook_run_success_total{crashed}"))
            .await,
        0.0
    );
}

/// Applies ValidationWebhook `widgets-cel` (at most 3 replicas for widgets labelled
/// `checked-by: cel`) and waits until widget `first`, with 4 replicas, is refused: from then on
/// every such request reaches the handler. Returns the labels that select the webhook.
async fn cel_widgets_refused(env: &Env, first: &str) -> Value {
    let cel = validation_webhook(
        "widgets-cel",
        "widgets-cel.example.deckhouse.io",
        json!({"labelSelector": {"matchLabels": {"checked-by": "cel"}}}),
        json!({"cel": "- expression: object.spec.replicas <= 3\n  message: a widget has at most 3 replicas\n"}),
        json!([]),
    );
    assert!(env.apply(&cel).await.0);
    env.ready("validationwebhook/widgets-cel", "True").await;
    let labels = json!({"checked-by": "cel"});
    env.eventually_apply(
        &widget(first, "Direct", 4, labels.clone()),
        false,
        "at most 3 replicas",
    )
    .await;
    labels
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_renewed_on_disk_is_registered_without_a_restart() {
    use base64::Engine as _;
    let env = Env::start().await;
    let c = cel_widgets_refused(&env, "w1").await;
    let registered = || async {
        env.get(
            "validatingwebhookconfiguration/d8-deckhouse-validating-webhook-handler",
            "{.webhooks[0].clientConfig.caBundle}",
        )
        .await
        .1
    };
    let bundle = |pem: String| base64::engine::general_purpose::STANDARD.encode(pem);
    assert_eq!(registered().await, bundle(env.ca.ca_pem()));

    // The controller renews the CA: the Secret's files change under the running handler.
    let renewed = Certs::new("renewed webhook-handler CA");
    std::fs::write(env.certs.join("ca.crt"), renewed.ca_pem()).unwrap();
    write_pair(&env.certs, &renewed);
    let mut now = String::new();
    for _ in 0..100 {
        now = registered().await;
        if now == bundle(renewed.ca_pem()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        now,
        bundle(renewed.ca_pem()),
        "the renewed CA is registered"
    );
    // The API server reaches the handler through it.
    env.eventually_apply(&widget("w2", "Direct", 4, c), false, "at most 3 replicas")
        .await;
}
