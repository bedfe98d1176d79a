//! The chart's webhook certificates come from `d8 controller`: on `d8 apiserver` with the chart
//! applied by kubectl, the controller started with the flags the chart's `deckhouse` container
//! has makes Secrets `d8-webhook-tls` and `webhook-handler-tls` (a certificate a TLS client
//! accepts for the Services' DNS names with the Secret's `ca.crt`), injects the CA into
//! `deckhouse-webhook` and into the conversion of our converted CRDs, keeps all of it on a
//! second run, and renews a serving certificate close to its end from the same CA.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use testkit::process::{Service, free_port, require_tool};

use crate::install::{render, repo};
use crate::{Apiserver, kubectl, kubectl_ok};

/// The `deckhouse` container's `--webhook-certificate` and `--crd-conversion-service` flags in
/// the rendered chart.
fn chart_flags(rendered: &str) -> Vec<String> {
    let doc = rendered
        .split("\n---\n")
        .find(|d| d.contains("kind: Deployment") && d.contains("\n  name: deckhouse\n"))
        .expect("the chart has Deployment deckhouse");
    let deployment: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap();
    args.iter()
        .filter_map(|a| a.as_str())
        .filter(|a| {
            a.starts_with("--webhook-certificate=") || a.starts_with("--crd-conversion-service=")
        })
        .map(String::from)
        .collect()
}

fn controller(admin: &Path, dir: &Path, log: &str, flags: &[String]) -> Service {
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(admin)
        .args(["--identity", log, "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--webhook-certificate-interval=300ms")
        .args(flags);
    Service::spawn("d8 controller", command, dir.join(format!("{log}.log"))).unwrap()
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn jsonpath(admin: &Path, args: &[&str], path: &str) -> String {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    let output = format!("jsonpath={path}");
    full.extend_from_slice(&["-o", &output]);
    kubectl(admin, &full).1
}

/// A key of a Secret in d8-system, decoded.
fn secret_key(admin: &Path, secret: &str, key: &str) -> String {
    let encoded = jsonpath(
        admin,
        &["secret", secret, "-n", "d8-system"],
        &format!("{{.data.{}}}", key.replace('.', "\\.")),
    );
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .unwrap_or_default(),
    )
    .unwrap()
}

fn openssl(args: &[&str]) -> String {
    let output = Command::new(require_tool("openssl", "openssl"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Seconds until the certificate in `pem` expires.
fn seconds_left(dir: &Path, pem: &str) -> i64 {
    let file = dir.join("check.crt");
    std::fs::write(&file, pem).unwrap();
    let end = openssl(&[
        "x509",
        "-in",
        &file.display().to_string(),
        "-noout",
        "-enddate",
    ]);
    let end = end.trim().trim_start_matches("notAfter=");
    let output = Command::new("date")
        .args(["-u", "-d", end, "+%s"])
        .output()
        .unwrap();
    let end: i64 = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    end - now
}

/// A ModuleConfig's AdmissionReview, as kube-apiserver sends it.
const REVIEW: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"0f1e2d3c","kind":{"group":"deckhouse.io","version":"v1alpha1","kind":"ModuleConfig"},"resource":{"group":"deckhouse.io","version":"v1alpha1","resource":"moduleconfigs"},"name":"echo","operation":"CREATE","userInfo":{"username":"admin"},"object":{"apiVersion":"deckhouse.io/v1alpha1","kind":"ModuleConfig","metadata":{"name":"echo"},"spec":{"enabled":true}}}}"#;

/// `d8 webhook` (as ServiceAccount d8-webhook, `webhook_kubeconfig`) serving the Secret's
/// certificate answers a client that trusts only the Secret's `ca.crt` and reaches it by
/// `host`: its health, and a ModuleConfig's review (which reads the rules' facts).
async fn served_to_a_client_trusting_the_ca(
    admin: &Path,
    webhook_kubeconfig: &Path,
    dir: &Path,
    host: &str,
) {
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::write(dir.join(key), secret_key(admin, "d8-webhook-tls", key)).unwrap();
    }
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("webhook")
        .arg("--kubeconfig")
        .arg(webhook_kubeconfig)
        .arg(format!("--listen-address=127.0.0.1:{port}"))
        .arg(format!("--tls-cert-file={}", dir.join("tls.crt").display()))
        .arg(format!(
            "--tls-private-key-file={}",
            dir.join("tls.key").display()
        ));
    let mut webhook = Service::spawn("d8 webhook", command, dir.join("webhook.log")).unwrap();
    let curl = require_tool("curl", "curl");
    let url = format!("https://{host}:{port}/healthz");
    let resolve = format!("{host}:{port}:127.0.0.1");
    let ca = dir.join("ca.crt");
    testkit::process::wait_until(&mut webhook, Duration::from_secs(30), || {
        let (curl, url, resolve, ca) = (curl.clone(), url.clone(), resolve.clone(), ca.clone());
        async move {
            Command::new(curl)
                .args(["-sf", "--cacert"])
                .arg(ca)
                .args(["--resolve", &resolve, &url])
                .status()
                .is_ok_and(|s| s.success())
        }
    })
    .await;
    let review = dir.join("review.json");
    std::fs::write(&review, REVIEW).unwrap();
    let output = Command::new(&curl)
        .args(["-sf", "--cacert"])
        .arg(&ca)
        .args([
            "--resolve",
            &resolve,
            "-H",
            "Content-Type: application/json",
        ])
        .arg("--data-binary")
        .arg(format!("@{}", review.display()))
        .arg(format!(
            "https://{host}:{port}/validate/v1alpha1/module-configs"
        ))
        .output()
        .unwrap();
    let answer = String::from_utf8_lossy(&output.stdout);
    assert!(answer.contains(r#""uid":"0f1e2d3c""#), "{answer}");
    webhook.stop();
}

/// `d8 apiserver` logging requests to `requests`, knowing the ServiceAccounts of `components`,
/// with the platform's CRDs applied.
async fn apiserver_with_crds(components: &[&str], requests: &Path) -> Apiserver {
    let apiserver =
        Apiserver::start_with(&crate::rbac::apiserver_flags(components, requests)).await;
    kubectl_ok(
        &apiserver.admin(),
        &["apply", "-f", &repo().join("crds").display().to_string()],
    );
    apiserver
}

#[tokio::test]
async fn the_controller_makes_injects_keeps_and_renews_the_charts_webhook_certificates() {
    testkit::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let requests = d.join("requests.jsonl");
    let apiserver = apiserver_with_crds(&["deckhouse", "d8-webhook"], &requests).await;
    let admin = apiserver.admin();
    let rendered = render(&["monitoring.enabled=false"]);
    std::fs::write(d.join("chart.yaml"), &rendered).unwrap();
    kubectl_ok(
        &admin,
        &[
            "apply",
            "--server-side",
            "-f",
            &d.join("chart.yaml").display().to_string(),
        ],
    );
    // The controller runs as ServiceAccount deckhouse with the chart's roles (applied above).
    let deckhouse = apiserver.kubeconfig("system-serviceaccount-d8-system-deckhouse");
    let d8_webhook = apiserver.kubeconfig("system-serviceaccount-d8-system-d8-webhook");
    let flags = chart_flags(&rendered);
    assert!(!flags.is_empty(), "the chart passes the keeper's flags");
    // Nothing is there before the controller.
    assert!(
        !kubectl(
            &admin,
            &["get", "secret", "d8-webhook-tls", "-n", "d8-system"]
        )
        .0
    );
    let bundles = |admin: &Path| {
        jsonpath(
            admin,
            &["validatingwebhookconfiguration", "deckhouse-webhook"],
            "{.webhooks[*].clientConfig.caBundle}",
        )
    };
    assert_eq!(bundles(&admin), "");

    let mut first = controller(&deckhouse, d, "controller-1", &flags);
    eventually("the Secrets appear", || {
        !secret_key(&admin, "d8-webhook-tls", "ca.crt").is_empty()
            && !secret_key(&admin, "webhook-handler-tls", "ca.crt").is_empty()
    })
    .await;
    let ca = secret_key(&admin, "d8-webhook-tls", "ca.crt");
    let bundle = base64::engine::general_purpose::STANDARD.encode(&ca);
    eventually(
        "the CA is injected into every webhook of deckhouse-webhook",
        || bundles(&admin) == [bundle.as_str(); 3].join(" "),
    )
    .await;
    let mup = ["crd", "moduleupdatepolicies.deckhouse.io"];
    eventually(
        "the ModuleUpdatePolicy conversion calls d8-webhook with the CA",
        || {
            jsonpath(
                &admin,
                &mup,
                "{.spec.conversion.webhook.clientConfig.caBundle}",
            ) == bundle
        },
    )
    .await;
    assert_eq!(
        jsonpath(
            &admin,
            &mup,
            "{.spec.conversion.webhook.clientConfig.service.name}/{.spec.conversion.webhook.clientConfig.service.path}"
        ),
        "d8-webhook//convert"
    );
    assert_eq!(
        jsonpath(
            &admin,
            &["secret", "d8-webhook-tls", "-n", "d8-system"],
            "{.type}"
        ),
        "kubernetes.io/tls"
    );
    for host in [
        "d8-webhook.d8-system.svc",
        "d8-webhook.d8-system.svc.cluster.local",
    ] {
        served_to_a_client_trusting_the_ca(&admin, &d8_webhook, d, host).await;
    }
    let handler = d.join("handler.crt");
    std::fs::write(
        &handler,
        secret_key(&admin, "webhook-handler-tls", "tls.crt"),
    )
    .unwrap();
    let names = openssl(&[
        "x509",
        "-in",
        &handler.display().to_string(),
        "-noout",
        "-ext",
        "subjectAltName",
    ]);
    for name in [
        "DNS:validating-webhook-handler.d8-system.svc",
        "DNS:conversion-webhook-handler.d8-system.svc",
    ] {
        assert!(names.contains(name), "{names}");
    }
    let serving = secret_key(&admin, "d8-webhook-tls", "tls.crt");
    assert!(seconds_left(d, &serving) > 300 * 86_400);

    // A second run keeps everything: the same Secret, the same caBundle.
    let version = |admin: &Path, secret: &str| {
        jsonpath(
            admin,
            &["secret", secret, "-n", "d8-system"],
            "{.metadata.resourceVersion}",
        )
    };
    let versions = [
        version(&admin, "d8-webhook-tls"),
        version(&admin, "webhook-handler-tls"),
    ];
    first.stop();
    let second = controller(&deckhouse, d, "controller-2", &flags);
    eventually(
        "the second controller has checked the certificates twice",
        || second.log().matches("webhook certificates checked").count() >= 2,
    )
    .await;
    assert_eq!(
        [
            version(&admin, "d8-webhook-tls"),
            version(&admin, "webhook-handler-tls")
        ],
        versions
    );
    assert_eq!(bundles(&admin), [bundle.as_str(); 3].join(" "));

    // A serving certificate 10 days from its end (signed by the same CA, as the Secret holds its
    // key) is renewed; the CA and the caBundle stay.
    let files = |key: &str| {
        let path = d.join(format!("old-{key}"));
        std::fs::write(&path, secret_key(&admin, "d8-webhook-tls", key)).unwrap();
        path.display().to_string()
    };
    let (ca_crt, ca_key) = (files("ca.crt"), files("ca.key"));
    let key = d.join("expiring.key").display().to_string();
    let csr = d.join("expiring.csr").display().to_string();
    let crt = d.join("expiring.crt").display().to_string();
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=d8-webhook.d8-system.svc",
        "-keyout",
        &key,
        "-out",
        &csr,
    ]);
    let ext = d.join("ext");
    std::fs::write(
        &ext,
        "subjectAltName=DNS:d8-webhook,DNS:d8-webhook.d8-system,DNS:d8-webhook.d8-system.svc,DNS:d8-webhook.d8-system.svc.cluster.local\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca_crt,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-days",
        "10",
        "-extfile",
        &ext.display().to_string(),
        "-out",
        &crt,
    ]);
    let patch = serde_json::json!({"data": {
        "tls.crt": base64::engine::general_purpose::STANDARD.encode(std::fs::read(&crt).unwrap()),
        "tls.key": base64::engine::general_purpose::STANDARD.encode(std::fs::read(&key).unwrap()),
    }})
    .to_string();
    kubectl_ok(
        &admin,
        &[
            "patch",
            "secret",
            "d8-webhook-tls",
            "-n",
            "d8-system",
            "--type=merge",
            "-p",
            &patch,
        ],
    );
    eventually("the expiring serving certificate is renewed", || {
        let now = secret_key(&admin, "d8-webhook-tls", "tls.crt");
        !now.is_empty() && seconds_left(d, &now) > 300 * 86_400
    })
    .await;
    assert_eq!(secret_key(&admin, "d8-webhook-tls", "ca.crt"), ca);
    assert_eq!(bundles(&admin), [bundle.as_str(); 3].join(" "));
    served_to_a_client_trusting_the_ca(&admin, &d8_webhook, d, "d8-webhook.d8-system.svc").await;
    drop(second);
    // Every call the keeper (and the rest of the controller) made is granted by deckhouse's
    // role in the chart.
    crate::rbac::assert_deckhouse_calls("webhook_certs", &requests).await;
    // d8 webhook, as ServiceAccount d8-webhook, called exactly what its role grants.
    crate::rbac::assert_role_matches(
        &requests,
        &crate::rbac::service_account("d8-webhook"),
        "d8-webhook",
        &[],
    );
}

/// A kind with two versions, for a ConversionWebhook.
const SPROCKETS: &str = "apiVersion: apiextensions.k8s.io/v1
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
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

const HANDLED: &str = r#"{"apiVersion": "deckhouse.io/v1alpha1", "kind": "ValidationWebhook", "metadata": {"name": "sprockets-cel"},
  "validationObject": {"name": "sprockets-cel.example.deckhouse.io", "rules": [{"apiGroups": ["example.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["sprockets"]}]},
  "handler": {"cel": "- expression: object.metadata.name.startsWith('s')\n"}, "context": []}"#;

const CONVERTED: &str = r#"{"apiVersion": "deckhouse.io/v1alpha1", "kind": "ConversionWebhook", "metadata": {"name": "sprockets.example.io"},
  "conversions": [
    {"from": "v1", "to": "v2", "handler": {"python": "obj = DotMap(o)\nobj.apiVersion = \"example.io/v2\"\nreturn None, obj.toDict()"}},
    {"from": "v2", "to": "v1", "handler": {"python": "obj = DotMap(o)\nobj.apiVersion = \"example.io/v1\"\nreturn None, obj.toDict()"}}]}"#;

/// The `webhook-handler` container's arguments in the rendered chart, each path under a mount
/// mapped to `dir` (the certificates, the hooks), listening on `listen`, its metrics on
/// `metrics` (the chart's loopback port, moved: tests run side by side).
fn handler_args(rendered: &str, dir: &Path, listen: &str, metrics: &str) -> Vec<String> {
    let doc = rendered
        .split("\n---\n")
        .find(|d| d.contains("kind: Deployment") && d.contains("\n  name: webhook-handler\n"))
        .expect("the chart has Deployment webhook-handler");
    let deployment: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .map(|a| {
            if a.starts_with("--listen=") {
                format!("--listen={listen}")
            } else if let Some(chart) = a.strip_prefix("--metrics-address=") {
                assert_eq!(chart, "127.0.0.1:9681", "where kube-rbac-proxy forwards");
                format!("--metrics-address={metrics}")
            } else {
                a.replace("/etc/webhook-handler/", &format!("{}/", dir.display()))
                    .replace("=/hooks", &format!("={}/hooks", dir.display()))
            }
        })
        .collect()
}

#[tokio::test]
async fn webhook_handler_runs_from_the_charts_arguments_as_its_service_account() {
    testkit::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let requests = d.join("requests.jsonl");
    let apiserver = apiserver_with_crds(&["deckhouse", "webhook-handler"], &requests).await;
    let admin = apiserver.admin();
    std::fs::write(d.join("sprockets.yaml"), SPROCKETS).unwrap();
    kubectl_ok(
        &admin,
        &[
            "apply",
            "-f",
            &d.join("sprockets.yaml").display().to_string(),
        ],
    );
    let rendered = render(&["monitoring.enabled=false"]);
    std::fs::write(d.join("chart.yaml"), &rendered).unwrap();
    kubectl_ok(
        &admin,
        &[
            "apply",
            "--server-side",
            "-f",
            &d.join("chart.yaml").display().to_string(),
        ],
    );
    let deckhouse = apiserver.kubeconfig("system-serviceaccount-d8-system-deckhouse");
    let _controller = controller(&deckhouse, d, "controller", &chart_flags(&rendered));
    eventually("the handler's Secret appears", || {
        !secret_key(&admin, "webhook-handler-tls", "ca.crt").is_empty()
    })
    .await;
    // The Secret's keys as the chart's volume projects them.
    let certs = d.join("handler-certs");
    std::fs::create_dir_all(&certs).unwrap();
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::write(
            certs.join(key),
            secret_key(&admin, "webhook-handler-tls", key),
        )
        .unwrap();
    }
    let ca = secret_key(&admin, "webhook-handler-tls", "ca.crt");

    let metrics = format!("127.0.0.1:{}", free_port());
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .args(handler_args(
            &rendered,
            &certs,
            &format!("127.0.0.1:{}", free_port()),
            &metrics,
        ))
        .arg("--kubeconfig")
        .arg(apiserver.kubeconfig("system-serviceaccount-d8-system-webhook-handler"));
    let mut handler = Service::spawn("d8 webhook-handler", command, d.join("handler.log")).unwrap();
    for (name, object) in [("handled", HANDLED), ("converted", CONVERTED)] {
        let file = d.join(format!("{name}.json"));
        std::fs::write(&file, object).unwrap();
        kubectl_ok(&admin, &["apply", "-f", &file.display().to_string()]);
    }
    for resource in [
        "validationwebhook/sprockets-cel",
        "conversionwebhook/sprockets.example.io",
    ] {
        eventually(&format!("{resource} is served"), || {
            handler.assert_running();
            jsonpath(&admin, &[resource], "{.status.conditions[0].status}") == "True"
        })
        .await;
    }
    // shell-operator's metrics where the chart's sidecar reads them.
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("shell_operator_live_ticks ")),
        "{text}"
    );
    // Registered behind the chart's Services with the Secret's CA.
    let bundle = base64::engine::general_purpose::STANDARD.encode(&ca);
    let config = [
        "validatingwebhookconfiguration",
        "d8-deckhouse-validating-webhook-handler",
    ];
    assert_eq!(
        jsonpath(
            &admin,
            &config,
            "{.webhooks[0].clientConfig.service.name} {.webhooks[0].clientConfig.caBundle}"
        ),
        format!("validating-webhook-handler {bundle}")
    );
    let crd = ["crd", "sprockets.example.io"];
    assert_eq!(
        jsonpath(
            &admin,
            &crd,
            "{.spec.conversion.webhook.clientConfig.service.name} {.spec.conversion.webhook.clientConfig.caBundle}"
        ),
        format!("conversion-webhook-handler {bundle}")
    );
    // A ValidationWebhook deleted: the handler takes its registration away, then its finalizer.
    kubectl_ok(
        &admin,
        &[
            "delete",
            "validationwebhook",
            "sprockets-cel",
            "--wait=false",
        ],
    );
    eventually("the ValidationWebhook is gone", || {
        !kubectl(&admin, &["get", "validationwebhook", "sprockets-cel"]).0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await; // the log is written every 200 ms
    handler.stop();
    crate::rbac::assert_role_matches(
        &requests,
        &crate::rbac::service_account("webhook-handler"),
        "webhook-handler",
        &[
            (
                "create",
                "authentication.k8s.io/tokenreviews",
                "its kube-rbac-proxy sidecar's, not this binary's",
            ),
            (
                "create",
                "authorization.k8s.io/subjectaccessreviews",
                "its kube-rbac-proxy sidecar's, not this binary's",
            ),
            (
                "create",
                "admissionregistration.k8s.io/validatingwebhookconfigurations",
                "kube-apiserver authorizes an apply that creates as create; d8 apiserver as patch",
            ),
        ],
    );
}
