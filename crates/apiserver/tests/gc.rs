//! Finalizers, deletionTimestamp, ownerReferences cascading deletion, namespace termination.

#[path = "support/common.rs"]
mod common;

use common::eventually;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::json;

fn cm(name: &str, owners: &[&ConfigMap], finalizers: &[&str]) -> ConfigMap {
    let refs: Vec<_> = owners
        .iter()
        .map(|o| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": o.metadata.name, "uid": o.metadata.uid, "blockOwnerDeletion": true}))
        .collect();
    serde_json::from_value(
        json!({"metadata": {"name": name, "ownerReferences": refs, "finalizers": finalizers}}),
    )
    .unwrap()
}

async fn gone(api: &Api<ConfigMap>, name: &str) {
    eventually(10, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let s = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.admin().await, "default");
    api.create(
        &PostParams::default(),
        &cm("held", &[], &["example.io/hold"]),
    )
    .await
    .unwrap();
    let r = api.delete("held", &DeleteParams::default()).await.unwrap();
    let marked = r
        .left()
        .expect("the object is returned while finalizers remain");
    assert!(marked.metadata.deletion_timestamp.is_some());
    let still = api.get("held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    let err = api
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.io/hold", "new"]}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref e) if e.code == 422 && e.message.contains("no new finalizers")),
        "{err:?}"
    );
    // Other updates are still allowed while deleting.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "y"}})),
    )
    .await
    .unwrap();
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        api.get_opt("held").await.unwrap().is_none(),
        "removing the last finalizer deletes"
    );
}

#[tokio::test]
async fn background_cascade_deletes_dependents() {
    let s = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.admin().await, "default");
    let owner = api
        .create(&PostParams::default(), &cm("owner", &[], &[]))
        .await
        .unwrap();
    let other = api
        .create(&PostParams::default(), &cm("other-owner", &[], &[]))
        .await
        .unwrap();
    let child = api
        .create(&PostParams::default(), &cm("child", &[&owner], &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("grandchild", &[&child], &[]))
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &cm("shared", &[&owner, &other], &[]),
    )
    .await
    .unwrap();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    gone(&api, "child").await;
    gone(&api, "grandchild").await;
    // A dependent with another live owner stays, minus the reference to the deleted owner.
    let shared = eventually(10, || async {
        let s = api.get("shared").await.unwrap();
        (s.metadata.owner_references.as_ref().map(Vec::len) == Some(1)).then_some(s)
    })
    .await;
    assert_eq!(
        shared.metadata.owner_references.unwrap()[0].name,
        "other-owner"
    );
}

#[tokio::test]
async fn foreground_waits_for_dependents_and_orphan_keeps_them() {
    let s = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.admin().await, "default");
    let owner = api
        .create(&PostParams::default(), &cm("fg-owner", &[], &[]))
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &cm("fg-child", &[&owner], &["example.io/hold"]),
    )
    .await
    .unwrap();
    api.delete("fg-owner", &DeleteParams::foreground())
        .await
        .unwrap();
    // The owner waits, marked, with the foregroundDeletion finalizer; the child is being deleted.
    let child = eventually(10, || async {
        let c = api.get("fg-child").await.unwrap();
        c.metadata.deletion_timestamp.is_some().then_some(c)
    })
    .await;
    assert!(child.metadata.deletion_timestamp.is_some());
    let o = api.get("fg-owner").await.unwrap();
    assert!(o.metadata.deletion_timestamp.is_some());
    assert_eq!(o.metadata.finalizers.unwrap(), ["foregroundDeletion"]);
    api.patch(
        "fg-child",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    gone(&api, "fg-child").await;
    gone(&api, "fg-owner").await;

    let owner = api
        .create(&PostParams::default(), &cm("or-owner", &[], &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("or-child", &[&owner], &[]))
        .await
        .unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    api.delete("or-owner", &dp).await.unwrap();
    gone(&api, "or-owner").await;
    let child = api.get("or-child").await.unwrap();
    assert!(
        child
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty(),
        "orphaned"
    );
}

#[tokio::test]
async fn dangling_owner_references_are_collected() {
    let s = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.admin().await, "default");
    let ghost: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "ghost", "uid": "00000000-0000-4000-8000-000000000000"}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &cm("orphan", &[&ghost], &[]))
        .await
        .unwrap();
    gone(&api, "orphan").await;
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_contents() {
    let s = common::start().await;
    let client = s.admin().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "temp"}})).unwrap(),
    )
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "temp");
    api.create(&PostParams::default(), &cm("a", &[], &["example.io/hold"]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("b", &[], &[]))
        .await
        .unwrap();
    nss.delete("temp", &DeleteParams::default()).await.unwrap();
    let ns = nss.get("temp").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let err = api
        .create(&PostParams::default(), &cm("c", &[], &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref e) if e.code == 403),
        "{err:?}"
    );
    gone(&api, "b").await;
    // "a" holds the namespace until its finalizer is removed.
    assert!(nss.get_opt("temp").await.unwrap().is_some());
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(10, || async {
        nss.get_opt("temp").await.unwrap().is_none().then_some(())
    })
    .await;
}
