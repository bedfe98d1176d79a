use super::*;
use serde_json::json;

fn deploy() -> Shape<'static> {
    Shape::builtin("apps", "Deployment")
}

fn f(s: &str) -> Element {
    Element::Field(s.into())
}

#[test]
fn leaves_follow_list_types() {
    let obj = json!({
        "metadata": {"labels": {"app": "web"}, "finalizers": ["a"]},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [
                {"name": "web", "image": "nginx", "args": ["-v"], "ports": [{"containerPort": 80}]}
            ]}}
        }
    });
    let set = leaves(&obj, &deploy());
    let c = Element::Key(r#"{"name":"web"}"#.into());
    let spec_c = vec![
        f("spec"),
        f("template"),
        f("spec"),
        f("containers"),
        c.clone(),
    ];
    let mut port = spec_c.clone();
    port.extend([
        f("ports"),
        Element::Key(r#"{"containerPort":80,"protocol":"TCP"}"#.into()),
    ]);
    let expected: FieldSet = [
        vec![f("metadata"), f("labels"), f("app")],
        vec![
            f("metadata"),
            f("finalizers"),
            Element::Value(r#""a""#.into()),
        ],
        vec![f("spec"), f("selector")],
        spec_c.clone(),
        [spec_c.clone(), vec![f("name")]].concat(),
        [spec_c.clone(), vec![f("image")]].concat(),
        [spec_c.clone(), vec![f("args")]].concat(),
        port.clone(),
        [port.clone(), vec![f("containerPort")]].concat(),
    ]
    .into_iter()
    .collect();
    assert_eq!(set, expected);
    assert_eq!(
        display(&[spec_c.clone(), vec![f("image")]].concat()),
        r#".spec.template.spec.containers[name="web"].image"#
    );
    assert_eq!(
        get(&obj, &[spec_c, vec![f("image")]].concat(), &deploy()),
        Some(&json!("nginx"))
    );
    assert_eq!(get(&obj, &port, &deploy()).unwrap()["containerPort"], 80);
}

#[test]
fn fields_v1_round_trips() {
    let obj = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"template": {"spec": {"containers": [{"name": "x", "image": "i"}]}}}});
    let set = leaves(&obj, &deploy());
    let enc = encode(&set);
    assert_eq!(
        enc,
        json!({
            "f:metadata": {"f:labels": {"f:a": {}}},
            "f:spec": {"f:template": {"f:spec": {"f:containers": {
                r#"k:{"name":"x"}"#: {".": {}, "f:image": {}, "f:name": {}}
            }}}}
        })
    );
    assert_eq!(decode(&enc), set);
}

#[test]
fn merge_and_remove_by_key() {
    let shape = Shape::builtin("", "Service");
    let mut live = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "name": "http"}, {"port": 53, "protocol": "UDP"}], "selector": {"a": "1", "b": "2"}}});
    let cfg = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}], "selector": {"a": "1"}}});
    merge(&mut live, &cfg, &mut Vec::new(), &shape);
    assert_eq!(
        live,
        json!({"spec": {"ports": [
            {"port": 80, "protocol": "TCP", "name": "http", "targetPort": 8080},
            {"port": 53, "protocol": "UDP"},
            {"port": 443}
        ], "selector": {"a": "1"}}})
    );
    let udp = vec![
        f("spec"),
        f("ports"),
        Element::Key(r#"{"port":53,"protocol":"UDP"}"#.into()),
    ];
    assert!(remove(&mut live, &udp, &shape));
    assert!(!remove(&mut live, &udp, &shape));
    assert_eq!(live["spec"]["ports"].as_array().unwrap().len(), 2);
}

#[test]
fn crd_schema_markers_decide() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
                  "items": {"type": "object", "properties": {"id": {"type": "string"}, "v": {"type": "string"}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "plain": {"type": "array", "items": {"type": "string"}},
        "sel": {"type": "object", "x-kubernetes-map-type": "atomic"}
    }}}});
    let shape = Shape::custom("example.io", "Widget", Some(&schema));
    assert_eq!(
        shape.list(&[f("spec"), f("items")]),
        ListShape::Map(vec![("id".into(), None)])
    );
    assert_eq!(shape.list(&[f("spec"), f("tags")]), ListShape::Set);
    assert_eq!(shape.list(&[f("spec"), f("plain")]), ListShape::Atomic);
    assert!(shape.atomic_map(&[f("spec"), f("sel")]));
    assert_eq!(
        shape.list(&[f("metadata"), f("finalizers")]),
        ListShape::Set
    );
    let no_schema = Shape::custom("example.io", "Widget", None);
    assert_eq!(no_schema.list(&[f("spec"), f("items")]), ListShape::Atomic);
}
