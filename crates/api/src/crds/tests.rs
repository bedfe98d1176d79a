use serde_json::json;

use super::*;

#[test]
fn the_checker_accepts_a_structural_schema() {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
            },
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "port": {"x-kubernetes-int-or-string": true},
        },
    });
    assert_eq!(structural_violations(&schema), Vec::<String>::new());
    assert_eq!(preserve_unknown_paths(&schema), vec![".free".to_string()]);
}

#[test]
fn the_checker_reports_each_rule() {
    let schema = json!({
        "type": "object",
        "properties": {
            "noType": {"description": "x"},
            "ref": {"$ref": "#/definitions/x", "type": "object"},
            "both": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
            "junctor": {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "anyOf": [{"type": "object"}, {"properties": {"zzz": {}}}],
            },
            "list": {
                "type": "array",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
        },
    });
    let found = structural_violations(&schema);
    let expected = [
        ".noType: `type` is required",
        ".ref: `$ref` is not allowed",
        ".both: `properties` and `additionalProperties` are mutually exclusive",
        ".junctor.anyOf[0]: `type` is not allowed inside a junctor",
        ".junctor.anyOf[1].zzz: a property inside a junctor must also be declared outside it",
        ".list: list-map keys need `x-kubernetes-list-type: map`",
        ".list: list-map key `name` must be required or defaulted",
    ];
    for e in expected {
        assert!(found.iter().any(|f| f == e), "missing {e:?} in {found:#?}");
    }
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    assert_eq!(
        structural_violations(&json!({"type": "string"})),
        vec!["<root>: the root schema must be of type object".to_string()]
    );
}
