//! The controller on the embedded API server with a real upstream and the real agent: Unmanaged
//! creates nothing; Managed with an upstream lays out the node and containerd pulls through the
//! agent; the image address appears once the agent applied; a wrong credential is refused by the
//! probe and changes nothing; a RegistryUpstream (accepted or rejected) changes no file on the
//! node but the agent's cache; back to Unmanaged the drain withdraws everything.

use std::collections::BTreeMap;
use std::path::Path;

use std::sync::Arc;
use std::time::Duration;
use testkit::Cluster;

use agent::run::{Config, Running, start};
use agent_kube::{Connection, KubeNodeApi};
use api::registry::{RegistryConfig, RegistryNode, RegistryStorage, RegistryUpstream};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::api::PostParams;
use kube::{Api, Client};
use prometheus_client::registry::Registry as MetricsRegistry;
use registry_controller::{Controller, Options, metrics};
use testkit::image::Layout as ImageLayout;
use testkit::push::Registry;
use testkit::{Containerd, ImageBuilder, Upstream, UpstreamOptions};

const NODE: &str = "node-1";
const AGENT_USER: &str = "system:registry-agent:node-1";

async fn cluster() -> Cluster {
    Cluster::start_with(|b| b.user(apiserver::User::registry_agent(NODE))).await
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
    start(
        config,
        KubeNodeApi::new(NODE, Connection::Kubeconfig(kubeconfig)),
    )
    .await
    .unwrap()
}

async fn eventually<F: FnMut() -> Fut, Fut: std::future::Future<Output = bool>>(
    what: &str,
    timeout: Duration,
    mut check: F,
) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An upstream with token auth holding `<repo_prefix>/app:v1` and the release-channel sentinel.
async fn upstream(prefix: &str, name: &str) -> Upstream {
    let upstream =
        Upstream::start(UpstreamOptions::default().token_auth("license-token", "secret")).await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let registry = Registry::of(&upstream);
    let app = ImageBuilder::new(name).layer(20_000).build(&images);
    registry
        .push_image(&format!("{prefix}/app"), Some("v1"), &app)
        .await
        .unwrap();
    let channel = ImageBuilder::new("channel").layer(100).build(&images);
    registry
        .push_image(
            &format!("{prefix}/release-channel"),
            Some("stable"),
            &channel,
        )
        .await
        .unwrap();
    upstream
}

fn module_config(settings: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": "registry"},
        "spec": {"version": 1, "enabled": true, "settings": settings},
    })
}

fn managed(upstream: &Upstream, password: &str) -> serde_json::Value {
    serde_json::json!({"mode": "Managed", "primary": {"upstream": {
        "scheme": "HTTP", "host": upstream.host(), "path": "/dkp",
        "auth": {"username": "license-token", "password": password},
    }}})
}

async fn apply_module_config(admin: &Client, settings: serde_json::Value) {
    let api: Api<api::module_config::ModuleConfig> = Api::all(admin.clone());
    let object: api::module_config::ModuleConfig =
        serde_json::from_value(module_config(settings)).unwrap();
    match api.get_opt("registry").await.unwrap() {
        None => {
            api.create(&PostParams::default(), &object).await.unwrap();
        }
        Some(existing) => {
            let mut object = object;
            object.metadata.resource_version = existing.metadata.resource_version;
            api.replace("registry", &PostParams::default(), &object)
                .await
                .unwrap();
        }
    }
}

/// Every file under `dir` except the agent's own layout cache, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if !path.ends_with("cache/layout.json") {
                out.insert(path.display().to_string(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

fn text(registry: &MetricsRegistry) -> String {
    metrics::encode(registry)
}

#[tokio::test]
async fn unmanaged_to_managed_and_back_with_the_real_agent() {
    let cluster = cluster().await;
    let admin = testkit::cluster::client(cluster.server().admin_kubeconfig()).await;
    let first = upstream("dkp", "first").await;
    let second = upstream("other", "second").await;

    // A static cluster of containerd nodes: the module's prerequisites are met.
    Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": "d8-cluster-configuration"},
                "stringData": {"cluster-configuration.yaml":
                    "apiVersion: deckhouse.io/v1\nkind: ClusterConfiguration\nclusterType: Static\ndefaultCRI: Containerd\n"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let node: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NODE, "labels": {
            // bashible found registry fields in a containerd conf.d file on this node
            "node.deckhouse.io/containerd-config-registry": "custom",
        }}}))
        .unwrap();
    Api::<Node>::all(admin.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();

    let controller = Arc::new(Controller::new(
        admin.clone(),
        Options {
            interval: Duration::from_millis(200),
            probe_timeout: Duration::from_secs(10),
            ..Options::default()
        },
    ));
    let mut registry = MetricsRegistry::default();
    controller.metrics().register(&mut registry);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn({
        let controller = controller.clone();
        async move {
            controller
                .run(async {
                    let _ = stopped.await;
                })
                .await
        }
    });

    let containerd = Containerd::start().await;
    let state = tempfile::tempdir().unwrap();
    let agent = start_agent(&cluster, &containerd, state.path()).await;

    // Unmanaged: nothing is created (the migration marker aside).
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "d8-system");
    eventually(
        "the migration marker is written",
        Duration::from_secs(10),
        || {
            let secrets = secrets.clone();
            async move {
                secrets
                    .get_opt("registry-v2-switch")
                    .await
                    .unwrap()
                    .is_some()
            }
        },
    )
    .await;
    let nodes: Api<RegistryNode> = Api::all(admin.clone());
    let configs: Api<RegistryConfig> = Api::all(admin.clone());
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "d8-system");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        nodes
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(configs.get_opt("registry").await.unwrap().is_none());
    assert!(
        secrets
            .get_opt("registry-resolved-auth")
            .await
            .unwrap()
            .is_none()
    );
    assert!(text(&registry).contains("d8_registry_managed 0"));

    // Managed with an upstream: the node is laid out and containerd pulls through the agent.
    apply_module_config(&admin, managed(&first, "secret")).await;
    eventually(
        "the agent applied its RegistryNode",
        Duration::from_secs(20),
        || {
            let nodes = nodes.clone();
            async move {
                nodes.get_opt(NODE).await.unwrap().is_some_and(|n| {
                    let status = n.status.unwrap_or_default();
                    status.reconciled == Some(true)
                        && status.observed_generation == n.metadata.generation
                })
            }
        },
    )
    .await;
    let rnode = nodes.get(NODE).await.unwrap();
    let owner = &rnode.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Node", NODE));
    let spec = serde_json::to_string(&rnode.spec).unwrap();
    assert!(
        !spec.contains("secret\""),
        "no credential in the RegistryNode: {spec}"
    );
    assert!(
        spec.contains("\"secretRef\":{\"name\":\"registry-resolved-auth\",\"key\":\"upstream\"}"),
        "{spec}"
    );
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/app:v1")
        .await
        .expect_success("pull through the agent on the controller's layout");
    eventually(
        "the image address is published",
        Duration::from_secs(10),
        || {
            let config_maps = config_maps.clone();
            async move {
                config_maps
                    .get_opt("registry-image-address")
                    .await
                    .unwrap()
                    .is_some()
            }
        },
    )
    .await;
    let address = config_maps.get("registry-image-address").await.unwrap();
    assert_eq!(
        address.data.unwrap()["base"],
        "registry.d8-system.svc:5001/system/deckhouse"
    );
    let status = configs.get("registry").await.unwrap().status.unwrap();
    assert_eq!(
        status.effective_upstream.unwrap().host.as_deref(),
        Some(first.host().as_str())
    );
    let upstream_valid = status
        .conditions
        .iter()
        .find(|c| c.type_ == "UpstreamValid")
        .unwrap();
    assert_eq!(upstream_valid.status.as_str(), "True");
    let metrics = text(&registry);
    for line in [
        "d8_registry_managed 1",
        "d8_registry_config_valid 1",
        "d8_registry_nodes 1",
        "d8_registry_upstream_probes_total{outcome=\"accepted\"} 1",
        "d8_registry_node_reconciled{node=\"node-1\"} 1",
        "d8_registry_node_foreign_registry_config{node=\"node-1\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    assert!(nodes.get(NODE).await.unwrap().spec.cache == Some(false));
    assert!(
        Api::<RegistryStorage>::all(admin.clone())
            .get_opt("registry")
            .await
            .unwrap()
            .is_none()
    );

    let node_files = |containerd: &Containerd| {
        let mut all = files(&containerd.hosts_dir());
        all.extend(files(state.path()));
        all
    };
    let before = node_files(&containerd);

    // A wrong credential: the probe refuses it, the cluster stays on what works.
    apply_module_config(&admin, managed(&first, "wrong")).await;
    eventually(
        "UpstreamValid turns False with AuthFailed",
        Duration::from_secs(15),
        || {
            let configs = configs.clone();
            async move {
                configs
                    .get("registry")
                    .await
                    .unwrap()
                    .status
                    .unwrap_or_default()
                    .conditions
                    .iter()
                    .any(|c| {
                        c.type_ == "UpstreamValid"
                            && c.status.as_str() == "False"
                            && c.reason == "AuthFailed"
                    })
            }
        },
    )
    .await;
    assert!(text(&registry).contains("d8_registry_upstream_probes_total{outcome=\"auth\"} 1"));
    let resolved = secrets
        .get("registry-resolved-auth")
        .await
        .unwrap()
        .data
        .unwrap();
    let kept = String::from_utf8(resolved["upstream"].0.clone()).unwrap();
    use base64::Engine;
    let kept = base64::engine::general_purpose::STANDARD
        .decode(kept)
        .unwrap();
    assert_eq!(
        kept, b"license-token:secret",
        "the working credential is kept"
    );
    containerd.clear().await;
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/app:v1")
        .await
        .expect_success("pulls keep working on the held upstream");
    apply_module_config(&admin, managed(&first, "secret")).await;

    // RegistryUpstreams: one accepted, one shadowing the primary.
    let upstreams: Api<RegistryUpstream> = Api::all(admin.clone());
    for (name, matched) in [
        ("quay", "quay.example:5000"),
        ("shadow", first.host().to_uppercase().as_str()),
    ] {
        let object: RegistryUpstream = serde_json::from_value(serde_json::json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "RegistryUpstream",
            "metadata": {"name": name},
            "spec": {"match": matched, "upstream": {
                "scheme": "HTTP", "host": second.host(), "path": "/other",
                "auth": {"username": "license-token", "password": "secret"},
            }},
        }))
        .unwrap();
        upstreams
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }
    eventually(
        "the agent applied the route",
        Duration::from_secs(15),
        || {
            let nodes = nodes.clone();
            async move {
                let n = nodes.get(NODE).await.unwrap();
                let status = n.status.clone().unwrap_or_default();
                n.spec.additional_routes.len() == 1
                    && status.observed_generation == n.metadata.generation
                    && status.reconciled == Some(true)
            }
        },
    )
    .await;
    // A pass that started between the two creations routes `quay` (and the agent applies it)
    // before `shadow` is seen: its verdict comes with the next pass.
    eventually(
        "both RegistryUpstreams have a status",
        Duration::from_secs(15),
        || {
            let upstreams = upstreams.clone();
            async move {
                let mut done = true;
                for name in ["quay", "shadow"] {
                    done &= upstreams.get(name).await.unwrap().status.is_some();
                }
                done
            }
        },
    )
    .await;
    let shadow = upstreams.get("shadow").await.unwrap().status.unwrap();
    assert_eq!(shadow.accepted, Some(false));
    assert_eq!(shadow.conditions[0].reason, "ShadowsPrimary");
    assert_eq!(
        upstreams
            .get("quay")
            .await
            .unwrap()
            .status
            .unwrap()
            .accepted,
        Some(true)
    );
    assert!(
        text(&registry).contains("d8_registry_upstreams_rejected{reason=\"ShadowsPrimary\"} 1")
    );
    containerd
        .pull("quay.example:5000/app:v1")
        .await
        .expect_success("a pull of the intercepted host goes to the RegistryUpstream");
    assert_eq!(
        before,
        node_files(&containerd),
        "a RegistryUpstream and a refused credential change no file on the node but the agent's cache"
    );

    // The cluster was installed into the module: its install registry is the in-cluster one.
    let b64 = |v: &str| base64::engine::general_purpose::STANDARD.encode(v);
    let install: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "deckhouse-registry", "namespace": "d8-system"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {
            "address": b64("registry.d8-system.svc:5001"),
            "path": b64("/system/deckhouse"),
            "scheme": b64("https"),
            ".dockerconfigjson": b64(r#"{"auths":{"registry.d8-system.svc:5001":{}}}"#),
        },
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &install)
        .await
        .unwrap();

    // Back to Unmanaged: the address goes at once, the rest after the drain's two scans.
    apply_module_config(&admin, serde_json::json!({"mode": "Unmanaged"})).await;
    eventually(
        "the image address goes at once",
        Duration::from_secs(10),
        || {
            let config_maps = config_maps.clone();
            async move {
                config_maps
                    .get_opt("registry-image-address")
                    .await
                    .unwrap()
                    .is_none()
            }
        },
    )
    .await;
    assert!(
        nodes.get_opt(NODE).await.unwrap().is_some(),
        "still serving while draining"
    );
    assert!(secrets.get_opt("registry-drain").await.unwrap().is_some());
    let hosts = containerd.hosts_dir().join("_default/hosts.toml");
    eventually(
        "the drain withdraws everything",
        Duration::from_secs(60),
        || {
            let (nodes, secrets, configs, hosts) = (
                nodes.clone(),
                secrets.clone(),
                configs.clone(),
                hosts.clone(),
            );
            async move {
                nodes.get_opt(NODE).await.unwrap().is_none()
                    && secrets
                        .get_opt("registry-resolved-auth")
                        .await
                        .unwrap()
                        .is_none()
                    && secrets.get_opt("registry-drain").await.unwrap().is_none()
                    && configs.get_opt("registry").await.unwrap().is_none()
                    && !hosts.exists()
            }
        },
    )
    .await;
    assert!(text(&registry).contains("d8_registry_managed 0"));
    // The drain pointed the install registry back at the upstream.
    let install = secrets
        .get("deckhouse-registry")
        .await
        .unwrap()
        .data
        .unwrap();
    let value = |k: &str| String::from_utf8(install[k].0.clone()).unwrap();
    assert_eq!(value("address"), first.host());
    assert_eq!(value("path"), "/dkp");
    assert_eq!(value("scheme"), "http");
    let dockercfg: serde_json::Value = serde_json::from_str(&value(".dockerconfigjson")).unwrap();
    let auth = dockercfg["auths"][first.host().as_str()]["auth"]
        .as_str()
        .unwrap_or_else(|| panic!("no auth for the upstream in {dockercfg}"))
        .to_owned();
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(auth)
            .unwrap(),
        b"license-token:secret"
    );

    let _ = stop.send(());
    task.await.unwrap();
    agent.stop().await;
}
