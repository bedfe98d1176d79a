//! The module's prerequisites on the embedded API server (issue #18, point 4): a Managed
//! `registry` ModuleConfig is refused — nothing laid out, `RegistryConfig` condition `Valid`
//! False with reason `PrerequisitesNotMet` and the seed's meaning, `d8_registry_config_valid 0` —
//! in a Managed Kubernetes (no ClusterConfiguration), with the cache on a cloud cluster, and on
//! nodes that do not run containerd; once ClusterConfiguration says a static cluster of
//! containerd v2 nodes, the node is laid out.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{client, cluster, cluster_configuration};

use kube::Client;
use kube::api::{Api, PostParams};
use prometheus_client::registry::Registry as MetricsRegistry;
use registry_controller::{Controller, Options, metrics};

use api::registry::{RegistryConfig, RegistryNode};

/// `(status, reason, message)` of condition `Valid`.
async fn valid(admin: &Client) -> (String, String, String) {
    let config = Api::<RegistryConfig>::all(admin.clone())
        .get("registry")
        .await
        .unwrap();
    let status = config.status.expect("RegistryConfig has a status");
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Valid")
        .expect("condition Valid")
        .clone();
    (
        serde_json::to_value(condition.status)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned(),
        condition.reason,
        condition.message.unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_cluster_that_does_not_meet_the_requirements_is_refused_and_told_why() {
    let (server, _dir) = cluster().await;
    let admin = client(&server).await;
    cluster::node(&admin, "node-1").await;
    // Air-gapped, the cache on the masters.
    let mc: api::module_config::ModuleConfig = serde_json::from_value(serde_json::json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": "registry"},
        "spec": {"version": 1, "enabled": true, "settings": {
            "mode": "Managed",
            "storage": {"cache": true, "source": {"bundleRef": "d8-mirror-bundle"}},
        }},
    }))
    .unwrap();
    Api::<api::module_config::ModuleConfig>::all(admin.clone())
        .create(&PostParams::default(), &mc)
        .await
        .unwrap();

    let controller = Controller::new(admin.clone(), Options::default());
    let mut registry = MetricsRegistry::default();
    controller.metrics().register(&mut registry);
    let nodes: Api<RegistryNode> = Api::all(admin.clone());

    let refusals = [
        (None, "does not work in Managed Kubernetes"),
        (
            Some(("Cloud", "Containerd")),
            "is supported on static clusters only, clusterType is Cloud",
        ),
        (
            Some(("Static", "Docker")),
            "must use containerd or containerd v2 (defaultCRI Containerd or ContainerdV2 in \
             ClusterConfiguration), defaultCRI is Docker",
        ),
    ];
    for (configuration, expected) in refusals {
        if let Some((cluster_type, cri)) = configuration {
            cluster_configuration(&admin, cluster_type, cri).await;
        }
        let report = controller.reconcile().await.unwrap();
        let invalid = report.invalid.unwrap_or_default();
        assert!(invalid.contains(expected), "{configuration:?}: {invalid}");
        let (status, reason, message) = valid(&admin).await;
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "PrerequisitesNotMet"),
            "{configuration:?}"
        );
        assert!(
            message.starts_with("the cluster does not meet the registry module's requirements: ")
                && message.contains(expected),
            "{configuration:?}: {message}"
        );
        assert!(
            nodes
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty(),
            "{configuration:?}: nothing is laid out"
        );
        let text = metrics::encode(&registry);
        assert!(text.contains("d8_registry_config_valid 0"), "{text}");
    }

    // A static cluster of containerd v2 nodes: the node is laid out.
    cluster_configuration(&admin, "Static", "ContainerdV2").await;
    let report = controller.reconcile().await.unwrap();
    assert_eq!(report.invalid, None);
    assert_eq!(valid(&admin).await.0, "True");
    assert!(nodes.get_opt("node-1").await.unwrap().is_some());
    assert!(metrics::encode(&registry).contains("d8_registry_config_valid 1"));
}
