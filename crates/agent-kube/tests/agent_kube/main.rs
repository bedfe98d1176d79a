//! The agent on the embedded API server: its RegistryNode drives what containerd pulls through,
//! changes apply without a restart, an API outage falls back to the disk copy, a deletion
//! withdraws the drop-in, and the agent's credentials reach nothing else.

use std::path::Path;

use std::time::Duration;
use testkit::Cluster;

use agent::run::{Config, Running, start};
use agent_kube::{Connection, KubeNodeApi};
use api::registry::RegistryNode;
use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use testkit::image::Layout as ImageLayout;
use testkit::push::Registry;
use testkit::{Containerd, ImageBuilder, Upstream, UpstreamOptions};

const NODE: &str = "node-1";
const AGENT_USER: &str = "system:registry-agent:node-1";

fn auth(user: &str, password: &str) -> k8s_openapi::ByteString {
    let value = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    k8s_openapi::ByteString(value.into_bytes())
}

async fn cluster() -> Cluster {
    Cluster::start_with(|b| b.user(apiserver::User::registry_agent(NODE))).await
}

async fn put_secret(admin: &Client, entries: &[(&str, &str, &str)]) {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "d8-system");
    let data = entries
        .iter()
        .map(|(key, user, password)| ((*key).to_owned(), auth(user, password)))
        .collect();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("registry-resolved-auth".into()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

fn node_spec(upstream: &Upstream, path: &str) -> serde_json::Value {
    serde_json::json!({
        "backends": [{
            "name": "Upstream", "scheme": "HTTP", "host": upstream.host(), "path": path,
            "auth": {"secretRef": {"name": "registry-resolved-auth", "key": "upstream"}},
        }]
    })
}

async fn start_agent(cluster: &Cluster, containerd: &Containerd, state: &Path) -> Running {
    let kubeconfig = cluster.server().kubeconfig(AGENT_USER).unwrap().to_owned();
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        plain_http: false,
        metrics: None,
        containerd_registry_dir: containerd.hosts_dir(),
        pki_dir: state.join("pki"),
        trust_dir: None,
        bootstrap_layout: None,
        layout_cache: state.join("cache/layout.json"),
        interval: Duration::from_millis(200),
        timeouts: registry_client::Timeouts::default(),
        min_throughput: None,
    };
    let api = KubeNodeApi::new(NODE, Connection::Kubeconfig(kubeconfig));
    start(config, api).await.unwrap()
}

async fn eventually<F: FnMut() -> Fut, Fut: std::future::Future<Output = bool>>(
    what: &str,
    mut check: F,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn upstream_with(repo: &str, name: &str) -> Upstream {
    let upstream =
        Upstream::start(UpstreamOptions::default().token_auth("license-token", "secret")).await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new(name).layer(20_000).build(&images);
    Registry::of(&upstream)
        .push_image(repo, Some("v1"), &image)
        .await
        .unwrap();
    upstream
}

fn origin(running: &Running, origin: &str) -> bool {
    running.metrics.encode().contains(&format!(
        "d8_registry_agent_layout_origin{{origin=\"{origin}\"}} 1"
    ))
}

#[tokio::test]
async fn the_registry_node_drives_pulls_and_changes_apply_live() {
    let cluster = cluster().await;
    let admin = testkit::cluster::client(cluster.server().admin_kubeconfig()).await;
    let first = upstream_with("dkp/app", "first").await;
    let second = upstream_with("mirror/dkp/other", "second").await;
    put_secret(&admin, &[("upstream", "license-token", "secret")]).await;
    let nodes: Api<RegistryNode> = Api::all(admin.clone());
    let node: RegistryNode = serde_json::from_value(serde_json::json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "RegistryNode",
        "metadata": {"name": NODE}, "spec": node_spec(&first, "/dkp"),
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();

    let containerd = Containerd::start().await;
    let state = tempfile::tempdir().unwrap();
    let running = start_agent(&cluster, &containerd, state.path()).await;
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/app:v1")
        .await
        .expect_success("pull on the layout from the API");
    eventually("the agent reports generation 1", || {
        let nodes = nodes.clone();
        async move {
            let status = nodes.get(NODE).await.unwrap().status.unwrap_or_default();
            status.reconciled == Some(true) && status.observed_generation == Some(1)
        }
    })
    .await;
    let status = nodes.get(NODE).await.unwrap().status.unwrap();
    assert_eq!(status.active_backends, ["Upstream"]);
    assert_eq!(status.conditions[0].reason, "Applied");
    assert!(origin(&running, "API"));
    let cached = std::fs::read_to_string(state.path().join("cache/layout.json")).unwrap();
    assert!(cached.contains("\"generation\":1"), "{cached}");

    // A new upstream, live: no restart, and the drop-in does not change.
    let hosts_before = std::fs::read(containerd.hosts_dir().join("_default/hosts.toml")).unwrap();
    nodes
        .patch(
            NODE,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": node_spec(&second, "/mirror/dkp")})),
        )
        .await
        .unwrap();
    eventually("the agent applies generation 2", || {
        let nodes = nodes.clone();
        async move {
            nodes
                .get(NODE)
                .await
                .unwrap()
                .status
                .unwrap_or_default()
                .observed_generation
                == Some(2)
        }
    })
    .await;
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/other:v1")
        .await
        .expect_success("pull on the changed layout");
    let hosts_after = std::fs::read(containerd.hosts_dir().join("_default/hosts.toml")).unwrap();
    assert_eq!(
        hosts_before, hosts_after,
        "routes change in memory, not on the node's disk"
    );

    // The API goes away: the agent keeps pulling on its disk copy.
    cluster.shutdown().await;
    eventually("the layout comes from the cache", || async {
        origin(&running, "Cache")
    })
    .await;
    containerd.clear().await;
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/other:v1")
        .await
        .expect_success("pull with the API down");
    running.stop().await;
}

#[tokio::test]
async fn deleting_the_registry_node_withdraws_the_drop_in_for_good() {
    let cluster = cluster().await;
    let admin = testkit::cluster::client(cluster.server().admin_kubeconfig()).await;
    let upstream = upstream_with("dkp/app", "app").await;
    put_secret(&admin, &[("upstream", "license-token", "secret")]).await;
    let nodes: Api<RegistryNode> = Api::all(admin.clone());
    let node: RegistryNode = serde_json::from_value(serde_json::json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "RegistryNode",
        "metadata": {"name": NODE}, "spec": node_spec(&upstream, "/dkp"),
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let containerd = Containerd::start().await;
    let state = tempfile::tempdir().unwrap();
    let running = start_agent(&cluster, &containerd, state.path()).await;
    let hosts = containerd.hosts_dir().join("_default/hosts.toml");
    assert!(hosts.exists());

    nodes.delete(NODE, &DeleteParams::default()).await.unwrap();
    eventually("the drop-in is withdrawn", || {
        let hosts = hosts.clone();
        async move { !hosts.exists() }
    })
    .await;
    // An API outage afterwards does not resurrect the deleted layout.
    cluster.shutdown().await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!hosts.exists());
    running.stop().await;
}

#[tokio::test]
async fn the_agents_credentials_reach_only_its_node_and_one_secret() {
    let cluster = cluster().await;
    let admin = testkit::cluster::client(cluster.server().admin_kubeconfig()).await;
    put_secret(&admin, &[("upstream", "u", "p")]).await;
    let other: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "other", "namespace": "d8-system"}, "stringData": {"x": "y"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), "d8-system")
        .create(&PostParams::default(), &other)
        .await
        .unwrap();
    let agent = testkit::cluster::client(cluster.server().kubeconfig(AGENT_USER).unwrap()).await;
    let secrets: Api<Secret> = Api::namespaced(agent.clone(), "d8-system");
    assert!(secrets.get("registry-resolved-auth").await.is_ok());
    let forbidden = |e: kube::Error| matches!(e, kube::Error::Api(s) if s.code == 403);
    assert!(forbidden(secrets.get("other").await.unwrap_err()));
    assert!(forbidden(
        secrets.list(&Default::default()).await.unwrap_err()
    ));
    let nodes: Api<RegistryNode> = Api::all(agent);
    assert!(forbidden(
        nodes.list(&Default::default()).await.unwrap_err()
    ));
    assert!(forbidden(nodes.get("node-2").await.unwrap_err()));
}
