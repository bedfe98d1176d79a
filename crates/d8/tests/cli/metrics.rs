//! `d8 controller --secure-metrics-address`: kube-rbac-proxy built in. Its metrics and debug
//! endpoints answer only a bearer token that `d8 apiserver` authenticates (TokenReview) and
//! whose user the RBAC objects stored allow (SubjectAccessReview), for the resource attributes
//! Deckhouse's chart gives kube-rbac-proxy.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use testkit::process::{Service, free_port};

use crate::kubectl_ok;

/// The bearer token in a kubeconfig `d8 apiserver` wrote.
fn token(kubeconfig: &Path) -> String {
    std::fs::read_to_string(kubeconfig)
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("a token kubeconfig")
        .trim_matches('"')
        .to_string()
}

/// Status and body of a GET with `token`.
async fn get(client: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (
        response.status().as_u16(),
        response.text().await.unwrap_or_default(),
    )
}

const GRANT: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: "prometheus-metrics", namespace: d8-system}
rules:
  - apiGroups: [apps]
    resources: [deployments/prometheus-metrics]
    resourceNames: [deckhouse]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: "prometheus-metrics", namespace: d8-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: "prometheus-metrics"}
subjects: [{kind: User, name: prometheus}]
"#;

#[tokio::test]
async fn secure_metrics_answer_only_reviewed_and_allowed_tokens() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let requests_dir = tempfile::tempdir().unwrap();
    let requests = requests_dir.path().join("requests.jsonl");
    let (apiserver, deckhouse) = crate::rbac::deckhouse_apiserver(
        &[
            "--user".into(),
            "prometheus".into(),
            "--user".into(),
            "nobody".into(),
        ],
        &requests,
    )
    .await;
    let admin = apiserver.admin();
    let dir = tempfile::tempdir().unwrap();
    let grant = dir.path().join("grant.yaml");
    std::fs::write(&grant, GRANT).unwrap();
    kubectl_ok(&admin, &["apply", "-f", &grant.display().to_string()]);

    let secure = format!("127.0.0.1:{}", free_port());
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&deckhouse)
        .args(["--identity", "metrics-test", "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg(format!("--secure-metrics-address={secure}"))
        .arg("--metrics-resource-attributes=namespace=d8-system,apiGroup=apps,apiVersion=v1,resource=deployments,subresource=prometheus-metrics,name=deckhouse");
    let mut controller =
        Service::spawn("d8 controller", command, dir.path().join("controller.log")).unwrap();
    // The certificate is self-signed, as kube-rbac-proxy's is without one given; Prometheus
    // scrapes such targets without verifying them.
    let client = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let base = format!("https://{secure}");
    testkit::process::wait_until(&mut controller, Duration::from_secs(30), || {
        let (client, url) = (client.clone(), format!("{base}/healthz"));
        async move {
            client
                .get(url)
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        }
    })
    .await;

    let prometheus = token(&apiserver.kubeconfig("prometheus"));
    let nobody = token(&apiserver.kubeconfig("nobody"));
    let metrics = format!("{base}/metrics");
    let queues = format!("{base}/queue/list");
    for url in [&metrics, &queues] {
        assert_eq!(
            get(&client, url, None).await,
            (401, "Unauthorized\n".into())
        );
        assert_eq!(
            get(&client, url, Some("not-a-token")).await,
            (401, "Unauthorized\n".into())
        );
        assert_eq!(
            get(&client, url, Some(&nobody)).await,
            (
                403,
                "Forbidden (user=nobody, verb=get, resource=deployments, subresource=prometheus-metrics)\n"
                    .into()
            )
        );
    }
    let (status, body) = get(&client, &metrics, Some(&prometheus)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("# TYPE "), "{body}");
    // The debug endpoint is behind the same check (no module runtime in this test: 404).
    assert_eq!(get(&client, &queues, Some(&prometheus)).await.0, 404);
    // The probes' path needs no token.
    assert_eq!(get(&client, &format!("{base}/healthz"), None).await.0, 200);
    crate::rbac::assert_deckhouse_calls("metrics", &requests).await;
}
