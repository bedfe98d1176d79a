//! The server calls admission and conversion webhooks as kube-apiserver does: a real HTTPS
//! webhook server started by the test (its own CA), driven through the preinstalled kubectl.

#[path = "support/common.rs"]
mod common;
#[path = "support/hook_server.rs"]
mod hook_server;
#[path = "support/kubectl.rs"]
mod kubectl;

use hook_server::{HookServer, Reply, allow, deny, patch};
use kubectl::Kubectl;
use serde_json::{Value, json};
use std::time::Duration;

fn widget(name: &str, mode: &str, labels: &str) -> String {
    format!(
        "apiVersion: example.io/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {labels}\nspec:\n  mode: {mode}\n"
    )
}

fn validating(name: &str, client: Value, extra: Value) -> String {
    let mut hook = json!({
        "name": name,
        "clientConfig": client,
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.io"], "apiVersions": ["v1"], "resources": ["widgets"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (k, v) in extra.as_object().unwrap() {
        hook[k] = v.clone();
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name}, "webhooks": [hook],
    })
    .to_string()
}

struct Env {
    _server: common::TestServer,
    home: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

impl Env {
    async fn start() -> Self {
        let server = common::start().await;
        let kubeconfig = server.server.admin_kubeconfig().to_path_buf();
        Self {
            _server: server,
            home: tempfile::tempdir().unwrap(),
            kubeconfig,
        }
    }

    async fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        Kubectl {
            kubeconfig: &self.kubeconfig,
            home: self.home.path(),
        }
        .run(args, stdin)
        .await
    }

    fn spawn(&self, args: &[&str]) -> tokio::process::Child {
        Kubectl {
            kubeconfig: &self.kubeconfig,
            home: self.home.path(),
        }
        .spawn(args)
    }

    async fn apply(&self, manifest: &str) -> (bool, String, String) {
        self.kubectl(&["apply", "-f", "-"], Some(manifest)).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validating_webhook_refuses_in_kube_apiservers_words_and_its_warnings_reach_kubectl() {
    let hooks = HookServer::start(&[], |_, review| {
        let mode = review["request"]["object"]["spec"]["mode"]
            .as_str()
            .unwrap_or_default();
        Reply::ok(if mode == "Proxy" {
            deny(
                review,
                403,
                "Forbidden",
                "proxy widgets are not allowed here",
            )
        } else {
            allow(review, &["widget checked by the webhook"])
        })
    })
    .await;
    let env = Env::start().await;
    let cfg = validating(
        "widgets.validate.example.io",
        json!({"url": hooks.url("/validate"), "caBundle": hooks.ca_bundle()}),
        json!({}),
    );
    assert!(env.apply(&cfg).await.0);

    let (ok, _, err) = env.apply(&widget("w1", "Direct", "{}")).await;
    assert!(ok, "{err}");
    assert!(
        err.contains("Warning: widget checked by the webhook"),
        "{err}"
    );

    let (ok, _, err) = env.apply(&widget("w2", "Proxy", "{}")).await;
    assert!(!ok);
    assert!(
        err.contains(
            "Error from server (Forbidden): error when creating \"STDIN\": admission webhook \"widgets.validate.example.io\" denied the request: proxy widgets are not allowed here"
        ),
        "{err}"
    );
    let (ok, _, _) = env
        .kubectl(&["get", "widget", "w2", "-n", "default"], None)
        .await;
    assert!(!ok, "a refused widget is not stored");

    // The review is kube-apiserver's: v1, the request's identity, the user, the timeout.
    let seen = hooks.seen.lock().unwrap().clone();
    let (path, review) = &seen[0];
    assert_eq!(path, "/validate?timeout=10s");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    let req = &review["request"];
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(
        req["kind"],
        json!({"group": "example.io", "version": "v1", "kind": "Widget"})
    );
    assert_eq!(req["resource"]["resource"], "widgets");
    assert_eq!(
        (req["name"].as_str(), req["namespace"].as_str()),
        (Some("w1"), Some("default"))
    );
    assert_eq!(req["userInfo"]["username"], "admin");
    assert_eq!(
        req["object"]["spec"]["replicas"], 1,
        "the webhook sees defaulted objects"
    );
    assert_eq!(req["oldObject"], Value::Null);

    // An update is sent with the old object.
    let (ok, _, err) = env.apply(&widget("w1", "Proxy", "{}")).await;
    assert!(
        !ok && err.contains("denied the request: proxy widgets"),
        "{err}"
    );
    let seen = hooks.seen.lock().unwrap().clone();
    let last = &seen.last().unwrap().1["request"];
    assert_eq!(last["operation"], "UPDATE");
    assert_eq!(last["oldObject"]["spec"]["mode"], "Direct");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_webhook_behind_a_service_patches_before_validating_webhooks_see_the_object() {
    let hooks = HookServer::start(&["widget-hooks.default.svc"], |path, review| {
        if path.starts_with("/mutate") {
            Reply::ok(patch(
                review,
                &json!([{"op": "add", "path": "/spec/note", "value": "mutated"}]),
            ))
        } else if review["request"]["object"]["spec"]["note"] == "mutated" {
            allow(review, &[]).into_reply()
        } else {
            Reply::ok(deny(review, 400, "", "not mutated first"))
        }
    })
    .await;
    let env = Env::start().await;
    let port = hooks.addr.port();
    let service = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: widget-hooks\n  namespace: default\nspec:\n  clusterIP: 127.0.0.1\n  ports:\n  - port: {port}\n"
    );
    assert!(env.apply(&service).await.0);
    let svc = |path: &str| json!({"service": {"namespace": "default", "name": "widget-hooks", "path": path, "port": port}, "caBundle": hooks.ca_bundle()});
    let mutating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "widgets.mutate.example.io"},
        "webhooks": [{"name": "widgets.mutate.example.io", "clientConfig": svc("/mutate"),
            "rules": [{"operations": ["CREATE"], "apiGroups": ["example.io"], "apiVersions": ["*"], "resources": ["widgets"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}],
    });
    assert!(env.apply(&mutating.to_string()).await.0);
    assert!(
        env.apply(&validating(
            "widgets.check.example.io",
            svc("/validate"),
            json!({})
        ))
        .await
        .0
    );
    let (ok, _, err) = env.apply(&widget("w1", "Direct", "{}")).await;
    assert!(ok, "{err}");
    let (_, out, _) = env
        .kubectl(
            &[
                "get",
                "widget",
                "w1",
                "-n",
                "default",
                "-o",
                "jsonpath={.spec.note}",
            ],
            None,
        )
        .await;
    assert_eq!(out, "mutated");
    let seen = hooks.seen.lock().unwrap().clone();
    assert_eq!(seen[0].0, "/mutate?timeout=10s");
    assert_eq!(seen[1].0, "/validate?timeout=10s");
}

trait IntoReply {
    fn into_reply(self) -> Reply;
}

impl IntoReply for Value {
    fn into_reply(self) -> Reply {
        Reply::ok(self)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_does_not_answer_in_time_fails_closed_or_open_by_its_failure_policy() {
    let hooks = HookServer::start(&[], |_, review| Reply {
        delay: Duration::from_secs(5),
        status: 200,
        body: allow(review, &[]),
    })
    .await;
    let env = Env::start().await;
    let client = json!({"url": hooks.url("/slow"), "caBundle": hooks.ca_bundle()});
    assert!(
        env.apply(&validating(
            "slow.example.io",
            client.clone(),
            json!({"timeoutSeconds": 1})
        ))
        .await
        .0
    );
    let started = std::time::Instant::now();
    let (ok, _, err) = env.apply(&widget("w1", "Direct", "{}")).await;
    assert!(!ok);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the timeout bounds the call"
    );
    let want = format!(
        "Error from server (InternalError): error when creating \"STDIN\": Internal error occurred: failed calling webhook \"slow.example.io\": failed to call webhook: Post \"https://{}/slow?timeout=1s\": context deadline exceeded",
        hooks.addr
    );
    assert!(err.contains(&want), "{err}");

    let cfg = validating(
        "slow.example.io",
        client,
        json!({"timeoutSeconds": 1, "failurePolicy": "Ignore"}),
    );
    assert!(env.apply(&cfg).await.0);
    let (ok, _, err) = env.apply(&widget("w1", "Direct", "{}")).await;
    assert!(ok, "failurePolicy Ignore admits: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_and_an_untrusted_certificate_decide_whether_and_how_a_webhook_is_called() {
    let hooks = HookServer::start(&[], |_, review| {
        Reply::ok(deny(review, 403, "Forbidden", "called"))
    })
    .await;
    let env = Env::start().await;
    let client = json!({"url": hooks.url("/v"), "caBundle": hooks.ca_bundle()});
    let cfg = validating(
        "selective.example.io",
        client,
        json!({"objectSelector": {"matchLabels": {"checked": "yes"}},
               "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]}}),
    );
    assert!(env.apply(&cfg).await.0);
    let (ok, _, err) = env.apply(&widget("plain", "Direct", "{}")).await;
    assert!(ok, "the object selector skips unlabelled widgets: {err}");
    let (ok, _, err) = env
        .apply(&widget("labelled", "Direct", "{checked: \"yes\"}"))
        .await;
    assert!(!ok && err.contains("denied the request: called"), "{err}");

    // A CA bundle that did not sign the server's certificate: the call fails, closed.
    let other = HookServer::start(&[], |_, r| Reply::ok(allow(r, &[]))).await;
    let cfg = validating(
        "untrusted.example.io",
        json!({"url": hooks.url("/v"), "caBundle": other.ca_bundle()}),
        json!({}),
    );
    assert!(env.apply(&cfg).await.0);
    let (ok, _, err) = env.apply(&widget("plain2", "Direct", "{}")).await;
    assert!(!ok);
    assert!(
        err.contains(
            "failed calling webhook \"untrusted.example.io\": failed to call webhook: Post"
        ) && err.contains(
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        ),
        "{err}"
    );
}

const VERSIONED_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sprockets.example.io
spec:
  group: example.io
  scope: Namespaced
  names: {plural: sprockets, singular: sprocket, kind: Sprocket}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        url: URL
        caBundle: CA
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

/// v1 `size: "12-teeth"` ⇄ v2 `teeth: 12`.
fn convert(review: &Value) -> Value {
    let req = &review["request"];
    let desired = req["desiredAPIVersion"].as_str().unwrap();
    let objects: Vec<Value> = req["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let mut o = o.clone();
            if desired == "example.io/v2" {
                let size = o["spec"]["size"].as_str().unwrap_or("0-teeth").to_string();
                let n: i64 = size.trim_end_matches("-teeth").parse().unwrap_or(0);
                o["spec"] = json!({"teeth": n});
            } else {
                let n = o["spec"]["teeth"].as_i64().unwrap_or(0);
                o["spec"] = json!({"size": format!("{n}-teeth")});
            }
            o["apiVersion"] = json!(desired);
            o
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": req["uid"], "result": {"status": "Success"}, "convertedObjects": objects},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_with_a_conversion_webhook_is_read_and_written_in_every_version_through_it() {
    let hooks = HookServer::start(&[], |_, review| Reply::ok(convert(review))).await;
    let env = Env::start().await;
    let crd = VERSIONED_CRD
        .replace("URL", &hooks.url("/convert"))
        .replace("CA", &hooks.ca_bundle());
    assert!(env.apply(&crd).await.0);
    let v2 = "apiVersion: example.io/v2\nkind: Sprocket\nmetadata:\n  name: s1\n  namespace: default\nspec:\n  teeth: 12\n";
    let (ok, _, err) = env.apply(v2).await;
    assert!(ok, "{err}");
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
    assert_eq!(out, "12-teeth", "stored in v1 through the webhook");
    let (_, out, _) = env
        .kubectl(
            &[
                "get",
                "sprockets.v2.example.io",
                "-n",
                "default",
                "-o",
                "jsonpath={.items[0].spec.teeth}",
            ],
            None,
        )
        .await;
    assert_eq!(out, "12", "listed in v2 through the webhook");
    let seen = hooks.seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .all(|(p, r)| p == "/convert?timeout=30s" && r["kind"] == "ConversionReview")
    );

    // A webhook that fails the conversion: kube-apiserver's words.
    drop(hooks);
    let failing = HookServer::start(&[], |_, review| {
        Reply::ok(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": review["request"]["uid"], "result": {"status": "Failure", "message": "teeth cannot be counted"}}}))
    })
    .await;
    let crd = VERSIONED_CRD
        .replace("URL", &failing.url("/convert"))
        .replace("CA", &failing.ca_bundle());
    assert!(env.apply(&crd).await.0);
    let (ok, _, err) = env
        .kubectl(
            &["get", "sprockets.v2.example.io", "s1", "-n", "default"],
            None,
        )
        .await;
    assert!(!ok);
    assert!(
        err.contains(
            "conversion webhook for example.io/v1, Kind=Sprocket failed: teeth cannot be counted"
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn match_conditions_decide_whether_a_webhook_is_called_and_an_error_follows_its_failure_policy()
 {
    let hooks = HookServer::start(&[], |_, review| {
        Reply::ok(deny(review, 403, "Forbidden", "checked and refused"))
    })
    .await;
    let env = Env::start().await;
    let client = json!({"url": hooks.url("/v"), "caBundle": hooks.ca_bundle()});
    let conditions = json!({"matchConditions": [
        {"name": "checked-only", "expression": "object.metadata.name.startsWith('checked-')"},
        {"name": "admin-only", "expression": "request.userInfo.username == 'admin'"},
    ]});
    assert!(
        env.apply(&validating(
            "conditional.example.io",
            client.clone(),
            conditions
        ))
        .await
        .0
    );
    let (ok, _, err) = env.apply(&widget("plain", "Direct", "{}")).await;
    assert!(ok, "a false condition skips the webhook: {err}");
    assert!(hooks.seen.lock().unwrap().is_empty(), "not called");
    let (ok, _, err) = env.apply(&widget("checked-1", "Direct", "{}")).await;
    assert!(!ok);
    assert!(
        err.contains(
            "admission webhook \"conditional.example.io\" denied the request: checked and refused"
        ),
        "{err}"
    );
    assert_eq!(hooks.seen.lock().unwrap().len(), 1);

    // A condition that cannot be evaluated (no such field): Fail refuses in kube-apiserver's
    // words without calling the webhook, Ignore skips the webhook.
    let broken = json!({"matchConditions": [
        {"name": "has-tier", "expression": "object.spec.tier == 'gold'"},
    ]});
    let mut fail = broken.clone();
    fail["failurePolicy"] = json!("Fail");
    assert!(
        env.apply(&validating("conditional.example.io", client.clone(), fail))
            .await
            .0
    );
    let (ok, _, err) = env.apply(&widget("checked-2", "Direct", "{}")).await;
    assert!(!ok);
    assert!(
        err.contains(
            "Error from server (Forbidden): error when creating \"STDIN\": widgets.example.io \"checked-2\" is forbidden: matchCondition \"has-tier\""
        ),
        "{err}"
    );
    assert_eq!(hooks.seen.lock().unwrap().len(), 1, "not called");
    let mut ignore = broken;
    ignore["failurePolicy"] = json!("Ignore");
    assert!(
        env.apply(&validating("conditional.example.io", client, ignore))
            .await
            .0
    );
    let (ok, _, err) = env.apply(&widget("checked-3", "Direct", "{}")).await;
    assert!(ok, "Ignore skips the webhook: {err}");
    assert_eq!(hooks.seen.lock().unwrap().len(), 1, "not called");
}

fn mutating(name: &str, client: Value, extra: Value) -> String {
    let mut hook = json!({
        "name": name,
        "clientConfig": client,
        "rules": [{"operations": ["CREATE"], "apiGroups": ["example.io"], "apiVersions": ["v1"], "resources": ["widgets"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (k, v) in extra.as_object().unwrap() {
        hook[k] = v.clone();
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name}, "webhooks": [hook],
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_webhook_with_reinvocation_if_needed_sees_what_a_later_webhook_changed() {
    // `/first` notes the replicas it saw; `/second` (a later configuration) sets them to 3.
    let hooks = HookServer::start(&[], |path, review| {
        if path.starts_with("/first") {
            let seen = &review["request"]["object"]["spec"]["replicas"];
            Reply::ok(patch(
                review,
                &json!([{"op": "add", "path": "/spec/note", "value": format!("first saw {seen}")}]),
            ))
        } else {
            Reply::ok(patch(
                review,
                &json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
            ))
        }
    })
    .await;
    let env = Env::start().await;
    let client = |p: &str| json!({"url": hooks.url(p), "caBundle": hooks.ca_bundle()});
    let first = |policy: &str| {
        mutating(
            "a-first.example.io",
            client("/first"),
            json!({"reinvocationPolicy": policy}),
        )
    };
    assert!(env.apply(&first("IfNeeded")).await.0);
    assert!(
        env.apply(&mutating(
            "b-second.example.io",
            client("/second"),
            json!({})
        ))
        .await
        .0
    );
    let note = |name: &'static str| {
        let env = &env;
        async move {
            let (ok, out, err) = env
                .kubectl(
                    &[
                        "get",
                        "widget",
                        name,
                        "-n",
                        "default",
                        "-o",
                        "jsonpath={.spec.note} {.spec.replicas}",
                    ],
                    None,
                )
                .await;
            assert!(ok, "{err}");
            out
        }
    };
    let (ok, _, err) = env.apply(&widget("w1", "Direct", "{}")).await;
    assert!(ok, "{err}");
    assert_eq!(
        note("w1").await,
        "first saw 3 3",
        "called again after /second"
    );
    let paths: Vec<String> = hooks
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(
        paths,
        [
            "/first?timeout=10s",
            "/second?timeout=10s",
            "/first?timeout=10s"
        ]
    );

    // `Never` (the default): called once, before the later change.
    assert!(env.apply(&first("Never")).await.0);
    hooks.seen.lock().unwrap().clear();
    let (ok, _, err) = env.apply(&widget("w2", "Direct", "{}")).await;
    assert!(ok, "{err}");
    let seen = hooks.seen.lock().unwrap().clone();
    assert_eq!(note("w2").await, "first saw 1 3", "{seen:#?}");
    assert_eq!(hooks.seen.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_at_another_version_gets_objects_converted_by_the_webhook() {
    use tokio::io::AsyncBufReadExt as _;
    let hooks = HookServer::start(&[], |_, review| Reply::ok(convert(review))).await;
    let env = Env::start().await;
    let crd = VERSIONED_CRD
        .replace("URL", &hooks.url("/convert"))
        .replace("CA", &hooks.ca_bundle());
    assert!(env.apply(&crd).await.0);
    let v1 = |name: &str, size: &str| {
        format!(
            "apiVersion: example.io/v1\nkind: Sprocket\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  size: {size}\n"
        )
    };
    let (ok, _, err) = env.apply(&v1("s1", "12-teeth")).await;
    assert!(ok, "{err}");

    let mut watch = env.spawn(&[
        "get",
        "sprockets.v2.example.io",
        "-n",
        "default",
        "--watch",
        "-o",
        "jsonpath={.apiVersion} {.metadata.name}={.spec.teeth}{\"\\n\"}",
    ]);
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("a watch event in time")
            .unwrap()
            .expect("the watch goes on")
    };
    assert_eq!(next().await, "example.io/v2 s1=12", "the initial list");
    // Stored in v1, written after the watch began: the event comes in v2, converted.
    let (ok, _, err) = env.apply(&v1("s2", "7-teeth")).await;
    assert!(ok, "{err}");
    assert_eq!(next().await, "example.io/v2 s2=7");
    let (ok, _, err) = env.apply(&v1("s1", "13-teeth")).await;
    assert!(ok, "{err}");
    assert_eq!(next().await, "example.io/v2 s1=13");
}
