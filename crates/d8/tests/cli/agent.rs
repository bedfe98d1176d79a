//! `d8 registry agent` on `d8 apiserver`: an operator applies a RegistryNode and its Secret with
//! kubectl; containerd then pulls through the agent, and the agent reports back.

use std::process::Command;
use std::time::Duration;

use testkit::image::Layout as ImageLayout;
use testkit::process::{Service, free_port};
use testkit::push::Registry;
use testkit::{Containerd, ImageBuilder, Upstream, UpstreamOptions};

use crate::{Apiserver, kubectl_ok};

#[tokio::test]
async fn the_agent_binary_serves_containerd_on_the_layout_applied_with_kubectl() {
    let upstream =
        Upstream::start(UpstreamOptions::default().token_auth("license-token", "s3cret")).await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("app").layer(40_000).build(&images);
    Registry::of(&upstream)
        .push_image("dkp/app", Some("v1"), &image)
        .await
        .unwrap();

    let server = Apiserver::start(&["local"]).await;
    let admin = server.admin();
    let state = tempfile::tempdir().unwrap();
    let manifests = state.path().join("node.yaml");
    let auth = base64_of("license-token:s3cret");
    std::fs::write(
        &manifests,
        format!(
            "apiVersion: v1
kind: Secret
metadata:
  name: registry-resolved-auth
  namespace: d8-system
data:
  upstream: {auth_b64}
---
apiVersion: deckhouse.io/v1alpha1
kind: RegistryNode
metadata:
  name: local
spec:
  backends:
    - name: Upstream
      scheme: HTTP
      host: \"{host}\"
      path: /dkp
      auth:
        secretRef:
          name: registry-resolved-auth
          key: upstream
",
            auth_b64 = base64_of(&auth),
            host = upstream.host(),
        ),
    )
    .unwrap();
    kubectl_ok(&admin, &["apply", "-f", &manifests.display().to_string()]);

    let containerd = Containerd::start().await;
    let port = free_port();
    let metrics_port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .env("RUST_LOG", "debug")
        .args([
            "registry",
            "agent",
            "--node-name",
            "local",
            "--interval",
            "1s",
        ])
        .arg(format!("--listen-address=127.0.0.1:{port}"))
        .arg(format!("--metrics-address=127.0.0.1:{metrics_port}"))
        .arg("--kubeconfig")
        .arg(server.kubeconfig("system-registry-agent-local"))
        .arg("--containerd-registry-dir")
        .arg(containerd.hosts_dir())
        .arg("--pki-dir")
        .arg(state.path().join("pki"))
        .arg("--bootstrap-layout")
        .arg(state.path().join("none.json"))
        .arg("--layout-cache")
        .arg(state.path().join("cache/layout.json"))
        .arg("--trust-dir")
        .arg(state.path().join("trust"));
    let mut agent =
        Service::spawn("d8 registry agent", command, state.path().join("agent.log")).unwrap();
    let hosts = containerd.hosts_dir().join("_default/hosts.toml");
    testkit::process::wait_until(&mut agent, Duration::from_secs(30), || {
        let hosts = hosts.clone();
        async move { hosts.exists() }
    })
    .await;

    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/app:v1")
        .await
        .expect_success("pull through the d8 agent");
    testkit::process::wait_until(&mut agent, Duration::from_secs(30), || {
        let admin = admin.clone();
        async move {
            let reconciled = kubectl_ok(
                &admin,
                &[
                    "get",
                    "rnode",
                    "local",
                    "-o",
                    "jsonpath={.status.reconciled}",
                ],
            );
            reconciled == "true"
        }
    })
    .await;
    // The credential appears nowhere an operator or a scraper can see.
    let metrics = testkit::http_client(None)
        .get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"d8_registry_agent_requests_total{kind="Primary",result="served"}"#),
        "{metrics}"
    );
    let status = kubectl_ok(&admin, &["get", "rnode", "local", "-o", "yaml"]);
    assert!(status.contains("reconciled: true"), "{status}");
    for (place, text) in [
        ("log", agent.log()),
        ("metrics", metrics),
        ("status", status),
    ] {
        for secret in ["s3cret", auth.as_str()] {
            assert!(
                !text.contains(secret),
                "the credential reached the {place}:\n{text}"
            );
        }
    }
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}
