use super::*;
use serde_json::json;

const T0: &str = "2024-01-01T00:00:00Z";
const T1: &str = "2024-01-02T00:00:00Z";

fn shape() -> Shape<'static> {
    Shape::builtin("apps", "Deployment")
}

fn w<'a>(manager: &'a str, now: &'a str) -> Writer<'a> {
    Writer {
        manager,
        api_version: "apps/v1",
        subresource: None,
        has_status: true,
        now,
    }
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "d8", "labels": {"app": "web"}},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "web", "image": image}]}}}
    })
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap().to_string(),
                e["operation"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn apply_creates_then_is_a_no_op() {
    let created = apply(
        &json!({}),
        &deployment(2, "nginx:1"),
        &shape(),
        &w("d8", T0),
        false,
    )
    .unwrap();
    assert_eq!(created["spec"]["replicas"], 2);
    assert_eq!(
        managers(&created),
        [("d8".to_string(), "Apply".to_string())]
    );
    let mf = &created["metadata"]["managedFields"][0];
    assert_eq!(mf["time"], T0);
    assert_eq!(mf["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
    assert!(mf["fieldsV1"]["f:metadata"].get("f:name").is_none());
    let again = apply(
        &created,
        &deployment(2, "nginx:1"),
        &shape(),
        &w("d8", T1),
        false,
    )
    .unwrap();
    assert_eq!(again, created, "same manifest, same object, same time");
}

#[test]
fn a_field_no_longer_applied_is_removed_unless_shared() {
    let live = apply(
        &json!({}),
        &deployment(2, "nginx:1"),
        &shape(),
        &w("d8", T0),
        false,
    )
    .unwrap();
    let mut cfg = deployment(2, "nginx:1");
    cfg["metadata"].as_object_mut().unwrap().remove("labels");
    cfg["spec"].as_object_mut().unwrap().remove("replicas");
    let out = apply(&live, &cfg, &shape(), &w("d8", T1), false).unwrap();
    assert!(out["spec"].get("replicas").is_none());
    assert!(
        out["metadata"].get("labels").is_none(),
        "the emptied map goes too"
    );
    assert_eq!(out["metadata"]["managedFields"][0]["time"], T1);

    // Another applier sharing replicas with the same value keeps it alive.
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}});
    let shared = apply(&live, &other, &shape(), &w("hpa", T0), false).unwrap();
    let out = apply(&shared, &cfg, &shape(), &w("d8", T1), false).unwrap();
    assert_eq!(out["spec"]["replicas"], 2);
}

#[test]
fn conflicts_are_kubernetes_409s_and_force_takes_over() {
    let live = apply(
        &json!({}),
        &deployment(2, "nginx:1"),
        &shape(),
        &w("d8", T0),
        false,
    )
    .unwrap();
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 5, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}});
    let e = apply(&live, &other, &shape(), &w("ops", T1), false).unwrap_err();
    assert_eq!((e.code, e.reason), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Apply failed with 2 conflicts: conflicts with \"d8\":\n- .spec.replicas\n- .spec.template.spec.containers[name=\"web\"].image"
    );
    let causes = &e.details.as_ref().unwrap()["causes"];
    assert_eq!(causes[0]["reason"], "FieldManagerConflict");
    assert_eq!(causes[0]["field"], ".spec.replicas");
    assert_eq!(causes[0]["message"], "conflict with \"d8\"");

    let forced = apply(&live, &other, &shape(), &w("ops", T1), true).unwrap();
    assert_eq!(forced["spec"]["replicas"], 5);
    let d8 = fields::decode(&forced["metadata"]["managedFields"][0]["fieldsV1"]);
    assert!(!d8.contains(&vec![
        Element::Field("spec".into()),
        Element::Field("replicas".into())
    ]));
    // d8 applying its manifest again now conflicts with ops.
    let e = apply(
        &forced,
        &deployment(2, "nginx:1"),
        &shape(),
        &w("d8", T1),
        false,
    )
    .unwrap_err();
    assert!(
        e.message
            .starts_with("Apply failed with 2 conflicts: conflicts with \"ops\":"),
        "{}",
        e.message
    );
    // The same value is shared ownership, not a conflict.
    let same = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}});
    assert!(apply(&live, &same, &shape(), &w("ops", T1), false).is_ok());
}

#[test]
fn update_takes_changed_fields_and_conflicts_name_it() {
    let live = apply(
        &json!({}),
        &deployment(2, "nginx:1"),
        &shape(),
        &w("d8", T0),
        false,
    )
    .unwrap();
    let mut edited = live.clone();
    edited["spec"]["replicas"] = json!(3);
    update(Some(&live), &mut edited, &shape(), &w("kubectl-edit", T1));
    assert_eq!(
        managers(&edited),
        [
            ("d8".into(), "Apply".into()),
            ("kubectl-edit".into(), "Update".into())
        ]
    );
    let e = apply(
        &edited,
        &deployment(2, "nginx:1"),
        &shape(),
        &w("d8", T1),
        false,
    )
    .unwrap_err();
    assert_eq!(
        e.message,
        format!(
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using apps/v1 at {T1}: .spec.replicas"
        )
    );
    // An update that changes nothing records nothing.
    let mut same = edited.clone();
    update(Some(&edited), &mut same, &shape(), &w("other", T1));
    assert_eq!(same, edited);
}

#[test]
fn status_is_owned_through_the_subresource_only() {
    let mut cfg = deployment(1, "nginx:1");
    cfg["status"] = json!({"replicas": 1});
    let live = apply(&json!({}), &cfg, &shape(), &w("d8", T0), false).unwrap();
    assert!(
        live.get("status").is_none(),
        "status is ignored on the main resource"
    );
    let mut with_status = live.clone();
    with_status["status"] = json!({"availableReplicas": 1});
    let kubelet = Writer {
        subresource: Some("status"),
        ..w("kubelet", T1)
    };
    update(Some(&live), &mut with_status, &shape(), &kubelet);
    let mf = with_status["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf[1]["subresource"], "status");
    assert_eq!(
        mf[1]["fieldsV1"],
        json!({"f:status": {"f:availableReplicas": {}}})
    );
    // The applier's next apply leaves status alone.
    let again = apply(
        &with_status,
        &deployment(1, "nginx:1"),
        &shape(),
        &w("d8", T1),
        false,
    )
    .unwrap();
    assert_eq!(again["status"]["availableReplicas"], 1);
}
