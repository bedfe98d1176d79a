//! The publish Ingress follows the cluster's state on the embedded API server (issue #18): the
//! registry controller creates Ingress `d8-system/registry-push` when the `registry`
//! ModuleConfig asks for air gap (the cache on, no primary upstream), with the module's
//! `ingressClass`, `whitelistSourceRanges` and `https`, the host from `global`'s
//! `publicDomainTemplate`; it follows a settings change, and goes away as soon as an upstream is
//! configured.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{client, cluster, cluster_configuration};

use k8s_openapi::api::networking::v1::Ingress;
use kube::Client;
use kube::api::{Api, PostParams};
use registry_controller::{Controller, Options};

use api::module_config::ModuleConfig;

async fn put_module_config(admin: &Client, name: &str, settings: serde_json::Value) {
    let api: Api<ModuleConfig> = Api::all(admin.clone());
    let mut mc: ModuleConfig = serde_json::from_value(serde_json::json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": name},
        "spec": {"version": 1, "enabled": true, "settings": settings},
    }))
    .unwrap();
    match api.get_opt(name).await.unwrap() {
        None => {
            api.create(&PostParams::default(), &mc).await.unwrap();
        }
        Some(existing) => {
            mc.metadata.resource_version = existing.metadata.resource_version;
            api.replace(name, &PostParams::default(), &mc)
                .await
                .unwrap();
        }
    }
}

fn annotation<'a>(ingress: &'a Ingress, key: &str) -> Option<&'a str> {
    ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

#[tokio::test]
async fn the_publish_ingress_appears_while_air_gapped_and_goes_when_an_upstream_is_configured() {
    let (server, _dir) = cluster().await;
    let admin = client(&server).await;
    cluster::node(&admin, "node-1").await;
    cluster_configuration(&admin, "Static", "Containerd").await;
    put_module_config(
        &admin,
        "global",
        serde_json::json!({"modules": {"publicDomainTemplate": "%s.kube.example.com"}}),
    )
    .await;
    let air_gapped = serde_json::json!({
        "mode": "Managed",
        "storage": {"cache": true, "source": {"bundleRef": "d8-mirror-bundle"}},
        "ingressClass": "private",
        "whitelistSourceRanges": ["10.0.0.0/8", "192.168.10.0/24"],
        "https": {"mode": "CustomCertificate", "customCertificate": {"secretName": "wildcard"}},
    });
    put_module_config(&admin, "registry", air_gapped.clone()).await;
    let controller = Controller::new(
        admin.clone(),
        Options {
            probe_timeout: std::time::Duration::from_secs(2),
            ..Options::default()
        },
    );
    let ingresses: Api<Ingress> = Api::namespaced(admin.clone(), "d8-system");

    let report = controller.reconcile().await.unwrap();
    assert_eq!(report.invalid, None);
    let ingress = ingresses
        .get_opt("registry-push")
        .await
        .unwrap()
        .expect("air-gapped: the publish Ingress exists");
    let spec = ingress.spec.clone().unwrap();
    assert_eq!(spec.ingress_class_name.as_deref(), Some("private"));
    let tls = &spec.tls.unwrap()[0];
    // Deckhouse's name for the copy of the operator's certificate.
    assert_eq!(
        tls.secret_name.as_deref(),
        Some("registry-ingress-tls-customcertificate")
    );
    assert_eq!(
        tls.hosts,
        Some(vec!["registry.kube.example.com".to_owned()])
    );
    let rule = &spec.rules.unwrap()[0];
    assert_eq!(rule.host.as_deref(), Some("registry.kube.example.com"));
    let backend = rule.http.as_ref().unwrap().paths[0]
        .backend
        .service
        .clone()
        .unwrap();
    assert_eq!(backend.name, "registry-push");
    assert_eq!(
        annotation(
            &ingress,
            "nginx.ingress.kubernetes.io/whitelist-source-range"
        ),
        Some("10.0.0.0/8,192.168.10.0/24")
    );
    // Deckhouse's Ingress asks nothing of the pushing client's certificate.
    assert_eq!(
        annotation(
            &ingress,
            "nginx.ingress.kubernetes.io/auth-tls-verify-client"
        ),
        None
    );
    assert_eq!(
        annotation(&ingress, "nginx.ingress.kubernetes.io/proxy-ssl-secret"),
        Some("d8-system/registry-storage-ingress-client")
    );

    // A second pass changes nothing.
    let version = ingress.metadata.resource_version.clone();
    controller.reconcile().await.unwrap();
    let again = ingresses.get("registry-push").await.unwrap();
    assert_eq!(again.metadata.resource_version, version);

    // The settings change: the Ingress follows.
    let mut changed = air_gapped.clone();
    changed["https"] = serde_json::json!({"mode": "CertManager"});
    changed["whitelistSourceRanges"] = serde_json::json!(["172.16.0.0/12"]);
    put_module_config(&admin, "registry", changed).await;
    controller.reconcile().await.unwrap();
    let ingress = ingresses.get("registry-push").await.unwrap();
    assert_eq!(
        annotation(
            &ingress,
            "nginx.ingress.kubernetes.io/whitelist-source-range"
        ),
        Some("172.16.0.0/12")
    );
    assert_eq!(
        ingress.spec.unwrap().tls.unwrap()[0].secret_name.as_deref(),
        Some("registry-ingress-tls")
    );

    // An upstream is configured: the Ingress goes (whether or not the upstream answers yet).
    let mut with_upstream = air_gapped.clone();
    with_upstream["primary"] =
        serde_json::json!({"upstream": {"host": "127.0.0.1:9", "path": "/deckhouse/ee"}});
    put_module_config(&admin, "registry", with_upstream).await;
    controller.reconcile().await.unwrap();
    assert!(ingresses.get_opt("registry-push").await.unwrap().is_none());

    // Air gap again: it comes back.
    put_module_config(&admin, "registry", air_gapped).await;
    controller.reconcile().await.unwrap();
    assert!(ingresses.get_opt("registry-push").await.unwrap().is_some());
}
