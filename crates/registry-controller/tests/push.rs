//! The push path follows the cache leader on the embedded API server (issue #18): EndpointSlice
//! `d8-system/registry-push-leader` of Service `registry-push` holds the node IP of the holder
//! of Lease `registry-storage` and nothing else; it follows the lease to another node, is
//! recreated when the leader's address family changes, is empty while nobody holds the lease,
//! other slices of the Service are deleted, and it goes with the cache.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{client, cluster, cluster_configuration};

use api::module_config::ModuleConfig;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use registry_controller::{Controller, Options};
use serde_json::json;

async fn put<K>(api: &Api<K>, name: &str, object: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let mut object: K = serde_json::from_value(object).unwrap();
    match api.get_opt(name).await.unwrap() {
        None => {
            api.create(&PostParams::default(), &object).await.unwrap();
        }
        Some(existing) => {
            object.meta_mut().resource_version = existing.meta().resource_version.clone();
            api.replace(name, &PostParams::default(), &object)
                .await
                .unwrap();
        }
    }
}

async fn node(admin: &Client, name: &str, ip: &str) {
    cluster::node(admin, name).await;
    Api::<Node>::all(admin.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"addresses": [
                {"type": "Hostname", "address": name},
                {"type": "InternalIP", "address": ip},
            ]}})),
        )
        .await
        .unwrap();
}

/// Lease `d8-system/registry-storage` held by `holder` (renewed now), or by nobody.
async fn lease(admin: &Client, holder: Option<&str>) {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "d8-system");
    let now = jiff::Timestamp::now().to_string();
    let mut spec = json!({"leaseDurationSeconds": 30, "renewTime": now, "acquireTime": now});
    if let Some(holder) = holder {
        spec["holderIdentity"] = holder.into();
    }
    put(
        &leases,
        "registry-storage",
        json!({"metadata": {"name": "registry-storage", "namespace": "d8-system"}, "spec": spec}),
    )
    .await;
}

async fn registry_settings(admin: &Client, settings: serde_json::Value) {
    let api: Api<ModuleConfig> = Api::all(admin.clone());
    put(
        &api,
        "registry",
        json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
            "metadata": {"name": "registry"},
            "spec": {"version": 1, "enabled": true, "settings": settings}}),
    )
    .await;
}

/// The slices of Service `registry-push`: (name, address type, addresses, owner kind, uid).
async fn slices(admin: &Client) -> Vec<(String, String, Vec<String>, String, String)> {
    let api: Api<EndpointSlice> = Api::namespaced(admin.clone(), "d8-system");
    let list = api
        .list(&kube::api::ListParams::default().labels("kubernetes.io/service-name=registry-push"))
        .await
        .unwrap();
    list.items
        .into_iter()
        .map(|s| {
            let owner = s
                .metadata
                .owner_references
                .clone()
                .unwrap_or_default()
                .first()
                .map(|o| o.kind.clone())
                .unwrap_or_default();
            (
                s.metadata.name.clone().unwrap_or_default(),
                s.address_type.clone(),
                s.endpoints
                    .iter()
                    .flat_map(|e| e.addresses.clone())
                    .collect(),
                owner,
                s.metadata.uid.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_push_slice_holds_the_lease_holder_alone_and_follows_the_lease() {
    let (server, _dir) = cluster().await;
    let admin = client(&server).await;
    node(&admin, "master-0", "10.0.0.4").await;
    node(&admin, "master-1", "10.0.0.5").await;
    node(&admin, "master-2", "fd00::6").await;
    cluster_configuration(&admin, "Static", "Containerd").await;
    let cache = json!({"mode": "Managed", "storage": {"cache": true, "source": {"bundleRef": "d8-mirror-bundle"}}});
    registry_settings(&admin, cache.clone()).await;
    let controller = Controller::new(
        admin.clone(),
        Options {
            probe_timeout: std::time::Duration::from_secs(2),
            ..Options::default()
        },
    );
    let pass = || async { assert_eq!(controller.reconcile().await.unwrap().invalid, None) };

    // No leader yet: the slice exists, empty — a push is refused, never sent to a follower.
    pass().await;
    let got = slices(&admin).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "registry-push-leader");
    assert_eq!(got[0].2, Vec::<String>::new());
    assert_eq!(got[0].3, "RegistryStorage");
    let slice = Api::<EndpointSlice>::namespaced(admin.clone(), "d8-system")
        .get("registry-push-leader")
        .await
        .unwrap();
    let labels = slice.metadata.labels.unwrap();
    assert_eq!(
        labels["endpointslice.kubernetes.io/managed-by"],
        "registry-controller.deckhouse.io"
    );
    let port = &slice.ports.unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("push"), Some(5003))
    );

    // master-0 leads: its node IP alone.
    lease(&admin, Some("master-0")).await;
    pass().await;
    let got = slices(&admin).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].1.as_str(), got[0].2.clone()),
        ("IPv4", vec!["10.0.0.4".to_owned()])
    );
    let uid = got[0].4.clone();

    // The lease moves: the same slice follows.
    lease(&admin, Some("master-1")).await;
    pass().await;
    let got = slices(&admin).await;
    assert_eq!(got[0].2, vec!["10.0.0.5".to_owned()]);
    assert_eq!(got[0].4, uid, "the same slice, replaced");

    // A leader on IPv6: the address type cannot change, the slice is recreated.
    lease(&admin, Some("master-2")).await;
    pass().await;
    let got = slices(&admin).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].1.as_str(), got[0].2.clone()),
        ("IPv6", vec!["fd00::6".to_owned()])
    );
    assert_ne!(got[0].4, uid, "a new slice");

    // Someone else's slice of the Service goes; nobody holds the lease: no endpoint.
    put(
        &Api::<EndpointSlice>::namespaced(admin.clone(), "d8-system"),
        "registry-push-xyz",
        json!({"metadata": {"name": "registry-push-xyz", "namespace": "d8-system",
                "labels": {"kubernetes.io/service-name": "registry-push"}},
            "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.9"]}],
            "ports": [{"name": "push", "port": 5003}]}),
    )
    .await;
    lease(&admin, None).await;
    pass().await;
    let got = slices(&admin).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "registry-push-leader");
    assert_eq!(got[0].2, Vec::<String>::new());

    // The cache turned off: the slice goes with it.
    lease(&admin, Some("master-0")).await;
    registry_settings(&admin, json!({"mode": "Managed", "storage": {"cache": false}, "primary": {"upstream": {"host": "127.0.0.1:9", "path": "/deckhouse/ee"}}})).await;
    pass().await;
    assert_eq!(slices(&admin).await, vec![]);
    // And comes back with it.
    registry_settings(&admin, cache).await;
    pass().await;
    let got = slices(&admin).await;
    assert_eq!(got[0].2, vec!["10.0.0.4".to_owned()]);
}
