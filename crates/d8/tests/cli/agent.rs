//! `d8 registry agent` on `d8 apiserver`: an operator applies a RegistryNode and its Secret with
//! kubectl; containerd then pulls through the agent, and the agent reports back.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use testkit::containerd::Binaries;
use testkit::image::Layout as ImageLayout;
use testkit::process::{Service, free_port};
use testkit::push::Registry;
use testkit::{Containerd, ImageBuilder, Upstream, UpstreamOptions};

use crate::{Apiserver, kubectl_ok};

/// An upstream (token auth) holding `dkp/app:v1`, `d8 apiserver` with node `local`'s
/// RegistryNode and Secret applied with kubectl (the layout: that upstream under `/dkp`), and
/// the credential in its two spellings (to look for where it must not be).
async fn upstream_and_layout() -> (Upstream, testkit::Image, Apiserver, [String; 2]) {
    let upstream =
        Upstream::start(UpstreamOptions::default().token_auth("license-token", "s3cret")).await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("app").layer(40_000).build(&images);
    Registry::of(&upstream)
        .push_image("dkp/app", Some("v1"), &image)
        .await
        .unwrap();

    let server = Apiserver::start_with(&[
        "--agent-node".to_owned(),
        "local".to_owned(),
        "--request-log".to_owned(),
        upstream
            .scratch_dir()
            .join("requests.jsonl")
            .display()
            .to_string(),
    ])
    .await;
    let manifests = upstream.scratch_dir().join("node.yaml");
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
    kubectl_ok(
        &server.admin(),
        &["apply", "-f", &manifests.display().to_string()],
    );
    (upstream, image, server, ["s3cret".to_owned(), auth])
}

/// `d8 registry agent` for node `local`, writing containerd's drop-in directory `registry_dir`
/// (its other files under `state`), started once it has written `_default/hosts.toml`; its
/// metrics port.
async fn start_agent(server: &Apiserver, registry_dir: &Path, state: &Path) -> (Service, u16) {
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
        .arg(registry_dir)
        .arg("--pki-dir")
        .arg(state.join("pki"))
        .arg("--bootstrap-layout")
        .arg(state.join("none.json"))
        .arg("--layout-cache")
        .arg(state.join("cache/layout.json"))
        .arg("--trust-dir")
        .arg(state.join("trust"));
    let mut agent = Service::spawn("d8 registry agent", command, state.join("agent.log")).unwrap();
    let hosts = registry_dir.join("_default/hosts.toml");
    testkit::process::wait_until(&mut agent, Duration::from_secs(30), || {
        let hosts = hosts.clone();
        async move { hosts.exists() }
    })
    .await;
    (agent, metrics_port)
}

/// The agent's `/metrics`.
async fn agent_metrics(port: u16) -> String {
    testkit::http_client(None)
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

const SERVED: &str = r#"d8_registry_agent_requests_total{kind="Primary",result="served"}"#;

#[tokio::test]
async fn the_agent_binary_serves_containerd_on_the_layout_applied_with_kubectl() {
    let (upstream, _image, server, secrets) = upstream_and_layout().await;
    let admin = server.admin();
    let state = tempfile::tempdir().unwrap();
    let containerd = Containerd::start().await;
    let (mut agent, metrics_port) =
        start_agent(&server, &containerd.hosts_dir(), state.path()).await;

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
    let metrics = agent_metrics(metrics_port).await;
    assert!(metrics.contains(SERVED), "{metrics}");
    let status = kubectl_ok(&admin, &["get", "rnode", "local", "-o", "yaml"]);
    // Its calls, verbs included, are exactly what its Role in the chart grants.
    tokio::time::sleep(Duration::from_millis(500)).await; // the log is written every 200 ms
    crate::rbac::assert_role_matches(
        &upstream.scratch_dir().join("requests.jsonl"),
        "system:registry-agent:local",
        "registry-agent",
        &[],
    );
    assert!(status.contains("reconciled: true"), "{status}");
    for (place, text) in [
        ("log", agent.log()),
        ("metrics", metrics),
        ("status", status),
    ] {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "the credential reached the {place}:\n{text}"
            );
        }
    }
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A node as the chart prepares it: containerd's own default configuration (its directories
/// moved under the test's), the node bootstrap script run on it, containerd started with the
/// result and the CRI plugin on — then a pull as kubelet makes it (CRI `PullImage`, which reads
/// `config_path` from that file, not `ctr --hosts-dir`) goes through the running agent. Without
/// the script's change containerd has no drop-in directory and the cluster-internal name does
/// not resolve.
async fn a_node_prepared_by_the_bootstrap_script_pulls_through_the_agent(binaries: &Binaries) {
    let (_upstream, image, server, _secrets) = upstream_and_layout().await;
    let default = binaries.config_default();
    let containerd = Containerd::start_of_with(binaries, |dir, socket| {
        let config = dir.join("node/etc/containerd/config.toml");
        std::fs::create_dir_all(config.parent().unwrap()).unwrap();
        std::fs::write(&config, localize(&default, dir, socket)).unwrap();
        let changed = crate::install::bootstrap_with(
            &dir.join("node"),
            &config,
            &[("CONTAINERD_REGISTRY_DIR", &dir.join("registry.d"))],
        );
        assert!(changed.contains("config.toml"), "{changed}");
        std::fs::read_to_string(&config).unwrap()
    })
    .await;
    let state = tempfile::tempdir().unwrap();
    let (_agent, metrics_port) =
        start_agent(&server, &containerd.root().join("registry.d"), state.path()).await;

    let id = containerd
        .cri_pull("registry.d8-system.svc:5001/system/deckhouse/app:v1")
        .await
        .unwrap_or_else(|e| panic!("CRI pull through the agent: {e}\n{}", containerd.log()));
    assert_eq!(id, image.config.digest);
    let metrics = agent_metrics(metrics_port).await;
    assert!(metrics.contains(SERVED), "{metrics}");
}

/// The system's containerd 1.6 (config version 2, CRI plugin `io.containerd.grpc.v1.cri`).
#[tokio::test]
async fn a_node_prepared_by_the_bootstrap_script_pulls_through_the_agent_over_cri() {
    a_node_prepared_by_the_bootstrap_script_pulls_through_the_agent(&Binaries::system()).await;
}

/// containerd 2 (config version 3, CRI images plugin `io.containerd.cri.v1.images`), with its own
/// default configuration.
#[tokio::test]
async fn a_containerd_2_node_prepared_by_the_bootstrap_script_pulls_through_the_agent_over_cri() {
    a_node_prepared_by_the_bootstrap_script_pulls_through_the_agent(&Binaries::v2()).await;
}

/// containerd's default configuration (1.x's double-quoted or 2.x's single-quoted) with its root,
/// state, socket, plugin directory and NRI socket (2.x) under `dir`, so that it runs beside
/// anything else on the machine; nothing else changed.
fn localize(default: &str, dir: &Path, socket: &Path) -> String {
    let dir = dir.display();
    default
        .lines()
        .map(|line| {
            let indent = &line[..line.len() - line.trim_start().len()];
            let value = match line.trim_start().replace('\'', "\"").as_str() {
                "root = \"/var/lib/containerd\"" => format!("root = \"{dir}/root\""),
                "state = \"/run/containerd\"" => format!("state = \"{dir}/state\""),
                "address = \"/run/containerd/containerd.sock\"" => {
                    format!("address = \"{}\"", socket.display())
                }
                "path = \"/opt/containerd\"" => format!("path = \"{dir}/opt\""),
                "socket_path = \"/var/run/nri/nri.sock\"" => {
                    format!("socket_path = \"{dir}/nri.sock\"")
                }
                _ => return line.to_owned(),
            };
            format!("{indent}{value}")
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}
