//! Step two of the registry switch (issue #18, point 5): once ConfigMap
//! `d8-system/registry-image-address` publishes the in-cluster address, the platform's own
//! Deployment is named by it — at once for the running version, and for every version deployed
//! after — and it moves back to the install repository when the ConfigMap goes. Every other
//! component running the platform's image moves with it; sidecars from elsewhere stay.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use release_controller::apply::Deployer;

use crate::common::Cluster;

const IN_CLUSTER: &str = "registry.d8-system.svc:5001/system/deckhouse";

async fn image(deployments: &Api<Deployment>) -> String {
    let deployment = deployments.get("deckhouse").await.unwrap();
    deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap()
}

#[tokio::test]
async fn the_platform_image_follows_the_image_address_and_back() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    let deployments: Api<Deployment> = Api::namespaced(c.client.clone(), "d8-system");
    let config_maps: Api<ConfigMap> = Api::namespaced(c.client.clone(), "d8-system");
    let install = image(&deployments).await;
    assert!(install.ends_with(":v1.66.3"), "{install}");
    let install_repository = install.trim_end_matches(":v1.66.3").to_owned();

    // Nothing published: nothing moves.
    assert!(!c.deployer.follow_image_address().await.unwrap());
    assert_eq!(image(&deployments).await, install);

    // Every node applied its layout: the controller publishes the address.
    let published: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "registry-image-address", "namespace": "d8-system"},
        "data": {"base": IN_CLUSTER},
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &published)
        .await
        .unwrap();
    assert!(c.deployer.follow_image_address().await.unwrap());
    assert_eq!(image(&deployments).await, format!("{IN_CLUSTER}:v1.66.3"));
    assert!(
        !c.deployer.follow_image_address().await.unwrap(),
        "a second pass changes nothing"
    );
    assert_eq!(
        c.deployer.running_version().await.unwrap().as_deref(),
        Some("v1.66.3")
    );

    // A release deployed afterwards is named by the in-cluster address too.
    c.deployer.deploy("v1.67.0").await.unwrap();
    assert_eq!(image(&deployments).await, format!("{IN_CLUSTER}:v1.67.0"));

    // Unmanaged: the ConfigMap goes, the platform pulls from the install registry again.
    config_maps
        .delete("registry-image-address", &Default::default())
        .await
        .unwrap();
    assert!(c.deployer.follow_image_address().await.unwrap());
    assert_eq!(
        image(&deployments).await,
        format!("{install_repository}:v1.67.0")
    );
}

const PROXY: &str = "quay.io/brancz/kube-rbac-proxy:v0.18.2";

/// The chart's other components as `helm install` leaves them, named by the chart's repository
/// (`image.repository`, not the release engine's).
async fn install_components(c: &Cluster, chart: &str) {
    let pod = |name: &str| {
        serde_json::json!({
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [
                {"name": name, "image": format!("{chart}@sha256:abc")},
                {"name": "kube-rbac-proxy", "image": PROXY},
            ]},
        })
    };
    let workload = |name: &str| {
        serde_json::json!({
            "metadata": {"name": name, "namespace": "d8-system"},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": pod(name)},
        })
    };
    let deployments: Api<Deployment> = Api::namespaced(c.client.clone(), "d8-system");
    for name in ["d8-webhook", "webhook-handler"] {
        let object = serde_json::from_value(workload(name)).unwrap();
        deployments
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }
    let daemon_sets: Api<DaemonSet> = Api::namespaced(c.client.clone(), "d8-system");
    let object = serde_json::from_value(workload("registry-storage")).unwrap();
    daemon_sets
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(c.client.clone(), "d8-system");
    let object = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "registry-node-bootstrap", "namespace": "d8-system"},
        "data": {
            "bootstrap.sh": "#!/bin/bash\n",
            "registry-agent.yaml": format!("kind: Pod\nspec:\n  containers:\n    - name: registry-agent\n      image: {chart}@sha256:abc\n"),
        },
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

/// Every image of the chart's other components, in a fixed order.
async fn component_images(c: &Cluster) -> Vec<String> {
    let deployments: Api<Deployment> = Api::namespaced(c.client.clone(), "d8-system");
    let daemon_sets: Api<DaemonSet> = Api::namespaced(c.client.clone(), "d8-system");
    let config_maps: Api<ConfigMap> = Api::namespaced(c.client.clone(), "d8-system");
    let mut images = Vec::new();
    for name in ["d8-webhook", "webhook-handler"] {
        let spec = deployments.get(name).await.unwrap().spec.unwrap();
        images.extend(
            spec.template
                .spec
                .unwrap()
                .containers
                .into_iter()
                .map(|c| c.image.unwrap()),
        );
    }
    let spec = daemon_sets
        .get("registry-storage")
        .await
        .unwrap()
        .spec
        .unwrap();
    images.extend(
        spec.template
            .spec
            .unwrap()
            .containers
            .into_iter()
            .map(|c| c.image.unwrap()),
    );
    let data = config_maps
        .get("registry-node-bootstrap")
        .await
        .unwrap()
        .data
        .unwrap();
    let manifest = &data["registry-agent.yaml"];
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("image:"))
        .unwrap();
    images.push(
        line.trim_start()
            .trim_start_matches("image:")
            .trim()
            .to_owned(),
    );
    images
}

#[tokio::test]
async fn every_component_running_the_platform_image_follows_it_and_back() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    let deployments: Api<Deployment> = Api::namespaced(c.client.clone(), "d8-system");
    let install = image(&deployments).await;
    let install_repository = install.trim_end_matches(":v1.66.3").to_owned();
    // The chart names the deckhouse container by its own repository too.
    let chart = "registry.example.com/deckhouse/d8";
    let mut deckhouse = deployments.get("deckhouse").await.unwrap();
    deckhouse
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some(format!("{chart}:v1.66.3"));
    deployments
        .replace("deckhouse", &PostParams::default(), &deckhouse)
        .await
        .unwrap();
    install_components(&c, chart).await;
    let ours = |repository: &str| {
        let mut want = Vec::new();
        for _ in 0..3 {
            want.push(format!("{repository}@sha256:abc"));
            want.push(PROXY.to_owned());
        }
        want.push(format!("{repository}@sha256:abc"));
        want
    };
    assert!(
        !c.deployer.follow_image_address().await.unwrap(),
        "nothing published"
    );
    assert_eq!(component_images(&c).await, ours(chart));

    let config_maps: Api<ConfigMap> = Api::namespaced(c.client.clone(), "d8-system");
    let published: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "registry-image-address", "namespace": "d8-system"},
        "data": {"base": IN_CLUSTER},
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &published)
        .await
        .unwrap();
    assert!(c.deployer.follow_image_address().await.unwrap());
    assert_eq!(image(&deployments).await, format!("{IN_CLUSTER}:v1.66.3"));
    assert_eq!(component_images(&c).await, ours(IN_CLUSTER));
    assert!(
        !c.deployer.follow_image_address().await.unwrap(),
        "a second pass"
    );

    config_maps
        .delete("registry-image-address", &Default::default())
        .await
        .unwrap();
    assert!(c.deployer.follow_image_address().await.unwrap());
    assert_eq!(component_images(&c).await, ours(&install_repository));
}
