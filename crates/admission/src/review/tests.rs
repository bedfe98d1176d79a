use serde_json::{Value, json};

use super::*;

/// An AdmissionReview as kube-apiserver sends it.
fn admission(operation: &str, kind: &str, object: Value, old: Value) -> Vec<u8> {
    let resource = format!("{}s", kind.to_lowercase());
    json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "deckhouse.io", "version": "v1alpha1", "kind": kind},
            "resource": {"group": "deckhouse.io", "version": "v1alpha1", "resource": resource},
            "requestKind": {"group": "deckhouse.io", "version": "v1alpha1", "kind": kind},
            "requestResource": {"group": "deckhouse.io", "version": "v1alpha1", "resource": resource},
            "name": "k", "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
            "object": object, "oldObject": old, "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    })
    .to_string()
    .into_bytes()
}

fn answer(body: &[u8]) -> Value {
    let request = AdmissionRequest::parse(body).unwrap();
    request.respond(&Default::default(), Verdicts::All)
}

fn keeper(spec: Value) -> Value {
    json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ObjectKeeper", "metadata": {"name": "k"}, "spec": spec})
}

#[test]
fn a_denial_echoes_the_uid_with_deckhouse_message() {
    let body = admission(
        "CREATE",
        "ObjectKeeper",
        keeper(json!({"mode": "TTL"})),
        Value::Null,
    );
    assert_eq!(
        answer(&body),
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": false,
            "status": {"code": 422, "reason": "Invalid",
                "message": "ttl is required when mode is TTL or FollowObjectWithTTL"}}})
    );
}

#[test]
fn an_admitted_request_carries_the_warnings() {
    let mc = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": "echo"}, "spec": {"version": 1}});
    let r = answer(&admission("CREATE", "ModuleConfig", mc, Value::Null));
    assert_eq!(r["response"]["allowed"], true);
    assert_eq!(
        r["response"]["warnings"],
        json!([
            "spec.version has no effect without spec.settings, defaults from the latest version of settings schema will be applied"
        ])
    );
    let ok = answer(&admission(
        "CREATE",
        "ObjectKeeper",
        keeper(json!({"mode": "TTL", "ttl": "1h"})),
        Value::Null,
    ));
    assert_eq!(
        ok["response"],
        json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true})
    );
}

#[test]
fn the_user_of_the_review_is_who_the_rules_see() {
    let module =
        json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "Module", "metadata": {"name": "m"}});
    let r = answer(&admission("UPDATE", "Module", module.clone(), module));
    assert_eq!(
        r["response"]["status"]["message"],
        "manual Module change is forbidden"
    );
    assert_eq!(r["response"]["status"]["code"], 403);
}

#[test]
fn malformed_reviews_are_refused_with_the_reason() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"{".to_vec(), "the body is not a JSON AdmissionReview: EOF while parsing an object at line 1 column 1"),
        (b"[]".to_vec(), "expected a admission.k8s.io/v1 AdmissionReview, got \"\" \"\""),
        (json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1", "request": {}}).to_string().into_bytes(),
            "expected a admission.k8s.io/v1 AdmissionReview, got \"admission.k8s.io/v1beta1\" \"AdmissionReview\""),
        (json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}).to_string().into_bytes(),
            "the AdmissionReview has no request"),
        (json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"kind": {"kind": "X"}}}).to_string().into_bytes(),
            "request.uid is missing"),
        (admission("PATCH", "ObjectKeeper", keeper(json!({})), Value::Null),
            "request.operation \"PATCH\" is not one of CREATE, UPDATE, DELETE, CONNECT"),
        (admission("CREATE", "ObjectKeeper", Value::Null, Value::Null), "request.object is missing for CREATE"),
        (admission("DELETE", "ObjectKeeper", Value::Null, Value::Null), "request.oldObject is missing for DELETE"),
        (admission("CREATE", "ObjectKeeper", json!("text"), Value::Null), "request.object is not an object"),
        (vec![b' '; MAX_REVIEW_BYTES + 1], "the AdmissionReview is 8388609 bytes, more than the 8388608 accepted"),
    ];
    for (body, message) in cases {
        assert_eq!(
            AdmissionRequest::parse(&body).unwrap_err().to_string(),
            message
        );
    }
}

fn conversion(desired: &str, objects: Value) -> Vec<u8> {
    json!({"kind": "ConversionReview", "apiVersion": "apiextensions.k8s.io/v1",
        "request": {"uid": "0000-1111", "desiredAPIVersion": desired, "objects": objects}})
    .to_string()
    .into_bytes()
}

fn mup(name: &str, api_version: &str, mode: &str) -> Value {
    json!({"apiVersion": api_version, "kind": "ModuleUpdatePolicy", "metadata": {"name": name},
        "spec": {"releaseChannel": "Stable", "update": {"mode": mode},
            "moduleReleaseSelector": {"labelSelector": {"matchLabels": {"source": "s"}}}}})
}

#[test]
fn converted_objects_come_back_in_order() {
    let objects = json!([
        mup("a", "deckhouse.io/v1alpha1", "Ignore"),
        mup("b", "deckhouse.io/v1alpha1", "Auto"),
        mup("c", "deckhouse.io/v1alpha2", "Manual"),
    ]);
    let r = conversion_review(&conversion("deckhouse.io/v1alpha2", objects)).unwrap();
    assert_eq!(r["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(r["kind"], "ConversionReview");
    assert_eq!(r["response"]["uid"], "0000-1111");
    assert_eq!(r["response"]["result"], json!({"status": "Success"}));
    let got: Vec<(String, String, String)> = r["response"]["convertedObjects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().into(),
                o["apiVersion"].as_str().unwrap().into(),
                o["spec"]["update"]["mode"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want = [("a", "Ignore"), ("b", "Auto"), ("c", "Manual")].map(|(n, m)| {
        (
            n.to_string(),
            "deckhouse.io/v1alpha2".to_string(),
            m.to_string(),
        )
    });
    assert_eq!(got, want);
}

#[test]
fn a_failed_conversion_converts_nothing_and_says_why() {
    let objects =
        json!([mup("a", "deckhouse.io/v1alpha1", "Auto"), {"apiVersion": "v1", "kind": "Pod"}]);
    let r = conversion_review(&conversion("deckhouse.io/v1alpha2", objects)).unwrap();
    assert_eq!(
        r["response"],
        json!({"uid": "0000-1111", "convertedObjects": [], "result": {"status": "Failure",
            "message": "objects[1]: Pod in \"\" is not a kind this webhook converts"}})
    );
}

#[test]
fn malformed_conversion_reviews_are_refused() {
    let no_objects = json!({"kind": "ConversionReview", "apiVersion": "apiextensions.k8s.io/v1",
        "request": {"uid": "u", "desiredAPIVersion": "deckhouse.io/v1alpha2"}});
    assert_eq!(
        conversion_review(no_objects.to_string().as_bytes())
            .unwrap_err()
            .to_string(),
        "request.objects is missing"
    );
    assert_eq!(
        conversion_review(b"null").unwrap_err().to_string(),
        "expected a apiextensions.k8s.io/v1 ConversionReview, got \"\" \"\""
    );
}
