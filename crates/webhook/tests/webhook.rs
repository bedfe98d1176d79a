//! `d8 webhook` at the HTTP level: AdmissionReview and ConversionReview bodies as
//! kube-apiserver sends them, over TLS, with the cluster's facts read from a real (embedded) API
//! server through kube-rs; malformed and oversized reviews; a certificate rotated on disk.

use std::path::Path;
use std::sync::Arc;

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use testkit::Cluster;
use testkit::certs::Certs;

struct Running {
    url: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn write_pair(dir: &Path, certs: &Certs) {
    let pair = certs.server(&[]);
    std::fs::write(dir.join("tls.crt"), pair.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), pair.key_pem).unwrap();
}

async fn start(cluster: &Cluster, dir: &Path) -> Running {
    let certificate =
        webhook::CertificateFiles::load(dir.join("tls.crt"), dir.join("tls.key")).unwrap();
    let facts = Arc::new(webhook::KubeFacts::new(cluster.client().await));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(webhook::serve(
        listener,
        certificate,
        webhook::Webhook::new(facts),
        async {
            let _ = stopped.await;
        },
    ));
    Running { url, _stop: stop }
}

async fn post(client: &reqwest::Client, url: &str, body: Vec<u8>) -> (u16, String) {
    let r = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// An AdmissionReview exactly as kube-apiserver v1.33 sends it.
fn admission(
    uid: &str,
    operation: &str,
    kind: &str,
    plural: &str,
    object: Value,
    old: Value,
) -> Vec<u8> {
    let name = object["metadata"]["name"].clone();
    json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid,
            "kind": {"group": "deckhouse.io", "version": "v1alpha1", "kind": kind},
            "resource": {"group": "deckhouse.io", "version": "v1alpha1", "resource": plural},
            "requestKind": {"group": "deckhouse.io", "version": "v1alpha1", "kind": kind},
            "requestResource": {"group": "deckhouse.io", "version": "v1alpha1", "resource": plural},
            "name": name, "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["kubeadm:cluster-admins", "system:authenticated"]},
            "object": object, "oldObject": old, "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-client-side-apply", "fieldValidation": "Strict"}
        }
    })
    .to_string()
    .into_bytes()
}

async fn create(cluster: &Cluster, kind: &str, plural: &str, object: Value) {
    let gvk = kube::api::GroupVersionKind::gvk("deckhouse.io", "v1alpha1", kind);
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::all_with(cluster.client().await, &resource);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn admission_and_conversion_reviews_over_https() {
    let cluster = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = Certs::new("webhook CA");
    write_pair(dir.path(), &ca);
    let running = start(&cluster, dir.path()).await;
    let client = testkit::http_client(Some(&ca.ca_pem()));
    // What the module manager publishes: the module's settings schema.
    create(
        &cluster,
        "ModuleSettingsDefinition",
        "modulesettingsdefinitions",
        json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleSettingsDefinition",
        "metadata": {"name": "echo"},
        "spec": {"versions": [{"name": "1", "schema": {"type": "object",
            "properties": {"replicas": {"type": "integer", "maximum": 3}}}}]}}),
    )
    .await;

    // A ModuleConfig whose settings break the module's schema is refused with Deckhouse's words.
    let mc = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": "echo"}, "spec": {"enabled": true, "version": 1, "settings": {"replicas": 5}}});
    let url = format!("{}/validate/v1alpha1/module-configs", running.url);
    let (status, body) = post(
        &client,
        &url,
        admission(
            "a-1",
            "CREATE",
            "ModuleConfig",
            "moduleconfigs",
            mc,
            Value::Null,
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], "a-1");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["message"],
        "spec.settings are not valid (version 1):  1 error occurred: * echo.replicas should be less than or equal to 3  "
    );
    // Within the schema, an older version without settings: admitted with Deckhouse's warning.
    let ok = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": "echo"}, "spec": {"enabled": true, "version": 1, "settings": {"replicas": 2}}});
    let (_, body) = post(
        &client,
        &url,
        admission(
            "a-2",
            "CREATE",
            "ModuleConfig",
            "moduleconfigs",
            ok,
            Value::Null,
        ),
    )
    .await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"], json!({"uid": "a-2", "allowed": true}));

    // Rules that need no facts: an ObjectKeeper without its ttl.
    let keeper = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ObjectKeeper",
        "metadata": {"name": "k"}, "spec": {"mode": "TTL"}});
    let (_, body) = post(
        &client,
        &format!("{}/validate/v1alpha1/object-keepers", running.url),
        admission(
            "a-3",
            "CREATE",
            "ObjectKeeper",
            "objectkeepers",
            keeper,
            Value::Null,
        ),
    )
    .await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["response"]["status"]["message"],
        "ttl is required when mode is TTL or FollowObjectWithTTL"
    );

    // A ConversionReview: every object, in order, in the desired version.
    let mup = |name: &str, mode: &str| {
        json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleUpdatePolicy",
        "metadata": {"name": name, "uid": "u", "resourceVersion": "1"},
        "spec": {"releaseChannel": "Stable", "update": {"mode": mode},
            "moduleReleaseSelector": {"labelSelector": {"matchLabels": {"source": "s"}}}}})
    };
    let review = json!({"kind": "ConversionReview", "apiVersion": "apiextensions.k8s.io/v1",
        "request": {"uid": "c-1", "desiredAPIVersion": "deckhouse.io/v1alpha2",
            "objects": [mup("z", "Ignore"), mup("a", "AutoPatch"), mup("m", "Manual")]}});
    let (status, body) = post(
        &client,
        &format!("{}/convert", running.url),
        review.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["uid"], "c-1");
    assert_eq!(answer["response"]["result"]["status"], "Success");
    let order: Vec<(&str, &str)> = answer["response"]["convertedObjects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap(),
                o["spec"]["update"]["mode"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [("z", "Ignore"), ("a", "AutoPatch"), ("m", "Manual")]
    );

    // Malformed and oversized reviews: a 400 that says why, and the server keeps serving.
    let (status, body) = post(&client, &url, b"{not json".to_vec()).await;
    assert_eq!(status, 400);
    assert!(
        body.starts_with("the body is not a JSON AdmissionReview: "),
        "{body}"
    );
    let (status, body) = post(&client, &format!("{}/convert", running.url), b"{\"kind\":\"ConversionReview\",\"apiVersion\":\"apiextensions.k8s.io/v1\",\"request\":{\"uid\":\"u\"}}".to_vec()).await;
    assert_eq!(
        (status, body.as_str()),
        (400, "request.desiredAPIVersion is missing\n")
    );
    let (status, body) = post(&client, &url, vec![b' '; admission::MAX_REVIEW_BYTES + 10]).await;
    assert_eq!(
        (status, body.as_str()),
        (
            400,
            "the review is larger than the 8388608 bytes accepted\n"
        )
    );
    let health = client
        .get(format!("{}/healthz", running.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
}

#[tokio::test]
async fn a_certificate_rotated_on_disk_is_served_without_a_restart() {
    let cluster = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (old_ca, new_ca) = (Certs::new("old CA"), Certs::new("new CA"));
    write_pair(dir.path(), &old_ca);
    let running = start(&cluster, dir.path()).await;
    let health = format!("{}/healthz", running.url);
    let get = |ca: String| {
        let health = health.clone();
        async move { testkit::http_client(Some(&ca)).get(health).send().await }
    };
    assert!(get(old_ca.ca_pem()).await.is_ok());
    assert!(get(new_ca.ca_pem()).await.is_err());
    // A half-written rotation (a key that does not parse) keeps the old pair in service.
    std::fs::write(dir.path().join("tls.key"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
    assert!(get(old_ca.ca_pem()).await.is_ok());
    write_pair(dir.path(), &new_ca);
    assert!(
        get(new_ca.ca_pem()).await.is_ok(),
        "the new certificate is served"
    );
    assert!(
        get(old_ca.ca_pem()).await.is_err(),
        "the old one is not any more"
    );
}
