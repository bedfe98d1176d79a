//! The `ingressNginx` disruption check Deckhouse registers, computed from the cluster's
//! IngressNginxControllers: a release declaring it waits for `disruption-approved` when
//! `disruptionApprovalMode` is `Manual` — with Deckhouse's reason when a controller without a
//! version would move from the default 0.33 to 1.1 beside a 1.x controller of its class, and
//! with no reason while the ingress-nginx module has stored no verdict — and is applied once
//! approved; when the module's verdict is "no disruption" it is applied at once.

use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use release_controller::requirements::ingress_nginx_controller_resource;
use serde_json::json;

use crate::common::Cluster;

const CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "ingressnginxcontrollers.deckhouse.io"},
  "spec": {
    "group": "deckhouse.io", "scope": "Cluster",
    "names": {"plural": "ingressnginxcontrollers", "singular": "ingressnginxcontroller", "kind": "IngressNginxController"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"ingressClass": {"type": "string"}, "controllerVersion": {"type": "string"}, "inlet": {"type": "string"}}}}}}}]
  }
}"#;

async fn create(c: &Cluster, resource: &ApiResource, object: serde_json::Value) {
    let api: Api<DynamicObject> = Api::all_with(c.client.clone(), resource);
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

async fn controller(c: &Cluster, name: &str, version: Option<&str>) {
    let mut spec = json!({"ingressClass": "nginx", "inlet": "HostPort"});
    if let Some(v) = version {
        spec["controllerVersion"] = json!(v);
    }
    create(
        c,
        &ingress_nginx_controller_resource(),
        json!({"apiVersion": "deckhouse.io/v1", "kind": "IngressNginxController",
               "metadata": {"name": name}, "spec": spec}),
    )
    .await;
}

async fn ingress_nginx_default(c: &Cluster, version: &str) {
    let configs: Api<api::module_config::ModuleConfig> = Api::all(c.client.clone());
    let config = serde_json::from_value(json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": "ingress-nginx"},
        "spec": {"enabled": true, "version": 1, "settings": {"defaultControllerVersion": version}}
    }))
    .unwrap();
    configs
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
}

async fn disruptive_channel(c: &Cluster) {
    c.publish_version("v1.67.0").await;
    c.publish_channel(
        "stable",
        json!({"version": "v1.67.0", "disruptions": {"1.67": ["ingressNginx"]}}),
    )
    .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {
        "mode": "Auto", "disruptionApprovalMode": "Manual"
    }}))
    .await;
    c.engine.sync_channel().await.unwrap();
}

async fn crd(c: &Cluster) {
    let crds = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    create(c, &crds, serde_json::from_str(CRD).unwrap()).await;
}

#[tokio::test]
async fn a_controller_moving_off_0_33_needs_disruption_approval() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    crd(&c).await;
    ingress_nginx_default(&c, "0.33").await;
    controller(&c, "main", Some("1.1")).await;
    controller(&c, "legacy", None).await;
    disruptive_channel(&c).await;
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.67.0").await,
        (
            "Pending".into(),
            "release blocked, disruption approval required: (`kubectl annotate DeckhouseRelease v1.67.0 release.deckhouse.io/disruption-approved=true`): Default IngressNginxController version 0.33 will be automatically changed to 1.1, this action will restart all controllers with non-specified version".into()
        )
    );
    assert_eq!(c.running().await, "v1.66.3");
    c.annotate(
        "v1.67.0",
        "release.deckhouse.io/disruption-approved",
        "true",
    )
    .await;
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.0");
}

#[tokio::test]
async fn without_a_verdict_the_release_waits_with_no_reason() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    disruptive_channel(&c).await;
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.67.0").await,
        (
            "Pending".into(),
            "release blocked, disruption approval required: (`kubectl annotate DeckhouseRelease v1.67.0 release.deckhouse.io/disruption-approved=true`): ".into()
        )
    );
}

#[tokio::test]
async fn a_compatible_fallback_is_no_disruption() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    crd(&c).await;
    ingress_nginx_default(&c, "0.33").await;
    controller(&c, "legacy", None).await;
    disruptive_channel(&c).await;
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.0");
}
