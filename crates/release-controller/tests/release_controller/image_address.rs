//! Step two of the registry switch (issue #18, point 5): once ConfigMap
//! `d8-system/registry-image-address` publishes the in-cluster address, the platform's own
//! Deployment is named by it — at once for the running version, and for every version deployed
//! after — and it moves back to the install repository when the ConfigMap goes.

use k8s_openapi::api::apps::v1::Deployment;
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
