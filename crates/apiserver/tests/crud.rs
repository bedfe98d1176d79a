//! CRUD, status, generation, conflicts, schema validation and patches through kube-rs.

#[path = "support/common.rs"]
mod common;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Discovery;
use serde_json::json;

fn widgets(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.io", "v1", "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn widget(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

#[tokio::test]
async fn discovery_finds_builtins_and_crds() {
    let s = common::start().await;
    let client = s.admin().await;
    let d = Discovery::new(client.clone()).run().await.unwrap();
    let groups: Vec<String> = d.groups().map(|g| g.name().to_string()).collect();
    for g in [
        "",
        "apps",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "example.io",
    ] {
        assert!(
            groups.iter().any(|x| x == g),
            "group {g:?} missing from {groups:?}"
        );
    }
    let (ar, caps) = d
        .resolve_gvk(&GroupVersionKind::gvk("example.io", "v1", "Widget"))
        .unwrap();
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(r, _)| r.plural == "widgets/status" || r.plural == "status")
    );
    let v = client.apiserver_version().await.unwrap();
    assert_eq!(v.major, "1");
}

#[tokio::test]
async fn configmap_crud_with_conflicts() {
    let s = common::start().await;
    let client = s.admin().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "a", "labels": {"app": "x"}}, "data": {"k": "v"}}),
    )
    .unwrap();
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    assert!(created.metadata.creation_timestamp.is_some());
    let err = cms.create(&PostParams::default(), &cm).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref e) if e.code == 409 && e.reason == "AlreadyExists"),
        "{err:?}"
    );

    let mut stale = created.clone();
    let mut fresh = created.clone();
    fresh.data = Some([("k".to_string(), "v2".to_string())].into());
    let replaced = cms
        .replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(replaced.metadata.uid.as_deref(), Some(uid.as_str()));
    stale.data = Some([("k".to_string(), "lost".to_string())].into());
    let err = cms
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref e) if e.code == 409 && e.reason == "Conflict"),
        "{err:?}"
    );

    // Strategic merge patch (kubectl's default for built-ins) merges maps.
    let p = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"k2": "v"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.data.unwrap().len(), 2);
    // JSON patch.
    let p = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([{"op": "remove", "path": "/data/k2"}])).unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.data.unwrap().len(), 1);

    let got = cms.get("a").await.unwrap();
    assert_eq!(got.data.unwrap()["k"], "v2");
    let none = cms.get_opt("missing").await.unwrap();
    assert!(none.is_none());
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(cms.get_opt("a").await.unwrap().is_none());

    // Namespaces must exist.
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let err = other.create(&PostParams::default(), &cm).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref e) if e.code == 404),
        "{err:?}"
    );
    let nss: Api<Namespace> = Api::all(client);
    assert_eq!(
        nss.get("default")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Active")
    );
}

#[tokio::test]
async fn custom_resources_are_defaulted_validated_and_versioned() {
    let s = common::start().await;
    let client = s.admin().await;
    let api = widgets(&client, "default");
    let w = api
        .create(
            &PostParams::default(),
            &widget("w1", json!({"mode": "Direct"})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["replicas"], 1, "default applied");
    assert_eq!(w.metadata.generation, Some(1));

    let err = api
        .create(
            &PostParams::default(),
            &widget("w2", json!({"mode": "Bogus"})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else {
        panic!("not an API error")
    };
    assert_eq!(e.code, 422);
    assert_eq!(e.reason, "Invalid");
    assert_eq!(
        e.message,
        r#"Widget.example.io "w2" is invalid: spec.mode: Unsupported value: "Bogus": supported values: "Direct", "Proxy""#
    );
    let err = api
        .create(
            &PostParams::default(),
            &widget("w3", json!({"replicas": -1})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else {
        panic!("not an API error")
    };
    assert!(
        e.message.contains("spec.mode: Required value"),
        "{}",
        e.message
    );

    // Status writes do not bump generation; spec writes do; status via main resource is ignored.
    let st = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"mode": "Proxy"}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["phase"], "Ready");
    assert_eq!(
        st.data["spec"]["mode"], "Direct",
        "status write ignores spec"
    );
    assert_eq!(st.metadata.generation, Some(1));
    let sp = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"mode": "Proxy"}, "status": {"phase": "Lost"}})),
        )
        .await
        .unwrap();
    assert_eq!(sp.metadata.generation, Some(2));
    assert_eq!(
        sp.data["status"]["phase"], "Ready",
        "spec write ignores status"
    );
    let meta_only = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(meta_only.metadata.generation, Some(2));

    // Server-side apply creates, then merges.
    let applied = api
        .patch("w9", &PatchParams::apply("test").force(), &Patch::Apply(json!({
            "apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w9"}, "spec": {"mode": "Proxy", "replicas": 3}
        })))
        .await
        .unwrap();
    assert_eq!(applied.data["spec"]["replicas"], 3);
    let applied = api
        .patch("w9", &PatchParams::apply("test").force(), &Patch::Apply(json!({
            "apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w9"}, "spec": {"mode": "Direct"}
        })))
        .await
        .unwrap();
    assert_eq!(applied.data["spec"]["mode"], "Direct");

    // Unknown fields: pruned with a warning by default, rejected with Strict.
    let pruned = api
        .create(
            &PostParams::default(),
            &widget("w4", json!({"mode": "Direct", "bogus": 1})),
        )
        .await
        .unwrap();
    assert!(pruned.data["spec"].get("bogus").is_none());

    // Label selectors and pagination.
    for i in 0..5 {
        let mut o = widget(&format!("p{i}"), json!({"mode": "Direct"}));
        o.metadata.labels = Some(
            [(
                "tier".to_string(),
                if i % 2 == 0 { "even" } else { "odd" }.to_string(),
            )]
            .into(),
        );
        api.create(&PostParams::default(), &o).await.unwrap();
    }
    let even = api
        .list(&ListParams::default().labels("tier=even"))
        .await
        .unwrap();
    assert_eq!(even.items.len(), 3);
    let set = api
        .list(&ListParams::default().labels("tier in (odd),tier notin (even)"))
        .await
        .unwrap();
    assert_eq!(set.items.len(), 2);
    let mut names = Vec::new();
    let mut lp = ListParams::default().labels("tier").limit(2);
    loop {
        let page = api.list(&lp).await.unwrap();
        names.extend(page.items.iter().map(|o| o.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=p3"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
}

#[tokio::test]
async fn the_validation_hook_denies_and_warns() {
    use apiserver::{Denial, GroupVersionKind};
    let s = common::start_with(|b| {
        b.validator(|gvk: &GroupVersionKind, old: Option<&serde_json::Value>, new: &serde_json::Value| {
            if gvk.kind != "Widget" {
                return Ok(Vec::new());
            }
            match new["spec"]["mode"].as_str() {
                Some("Proxy") if old.is_none() => Err(Denial::invalid(r#"Widget.example.io "p" is invalid: spec.mode: Invalid value: "Proxy": not on create"#).at("spec.mode")),
                Some("Proxy") => Err(Denial::forbidden("admission webhook \"widgets.example.io\" denied the request: no proxies")),
                _ => Ok(vec!["widgets are deprecated".to_string()]),
            }
        })
    })
    .await;
    let api = widgets(&s.admin().await, "default");
    let err = api
        .create(
            &PostParams::default(),
            &widget("p", json!({"mode": "Proxy"})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else { panic!() };
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        r#"Widget.example.io "p" is invalid: spec.mode: Invalid value: "Proxy": not on create"#,
        "verbatim"
    );
    // A hook that only warns does not block the write.
    api.create(
        &PostParams::default(),
        &widget("d", json!({"mode": "Direct"})),
    )
    .await
    .unwrap();
    let err = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"mode": "Proxy"}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else { panic!() };
    assert_eq!(e.code, 403);
    assert_eq!(
        e.message,
        "admission webhook \"widgets.example.io\" denied the request: no proxies"
    );
    assert_eq!(api.get("d").await.unwrap().data["spec"]["mode"], "Direct");
}

#[tokio::test]
async fn a_secret_written_with_string_data_is_stored_as_data() {
    use k8s_openapi::api::core::v1::Secret;
    let s = common::start().await;
    let client = s.admin().await;
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "upstream"},
        "stringData": {"auth": "user:pass"}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let stored = secrets.get("upstream").await.unwrap();
    assert!(stored.string_data.is_none(), "stringData is write-only");
    let data = stored.data.unwrap();
    assert_eq!(data["auth"].0, b"user:pass");

    // A patch with stringData replaces that key and keeps the others.
    secrets
        .patch(
            "upstream",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"token": "t0k3n"}})),
        )
        .await
        .unwrap();
    let data = secrets.get("upstream").await.unwrap().data.unwrap();
    assert_eq!(data["auth"].0, b"user:pass");
    assert_eq!(data["token"].0, b"t0k3n");
}
