use serde_json::json;

use super::*;

const SCHEMA: &str = r#"
type: object
x-config-version: 2
properties:
  replicas:
    type: integer
    default: 2
    minimum: 1
  logLevel:
    type: string
    enum: [Debug, Info]
    default: Info
  nodeSelector:
    type: object
    nullable: true
    additionalProperties:
      type: string
  https:
    type: object
    default: {}
    properties:
      mode:
        type: string
        default: CertManager
      certManager:
        type: object
        properties:
          clusterIssuerName:
            type: string
            default: letsencrypt
  tolerations:
    type: array
    items:
      type: object
      properties:
        operator:
          type: string
          default: Equal
        key:
          type: string
  extra:
    type: object
    x-kubernetes-preserve-unknown-fields: true
    properties:
      known: {type: string}
  mode:
    type: string
    nullable: true
    enum: [A, B]
"#;

fn schema() -> SettingsSchema {
    SettingsSchema::from_yaml(SCHEMA).unwrap()
}

#[test]
fn defaults_are_merged_depth_first_and_never_replace_values() {
    let s = schema();
    assert_eq!(s.config_version(), 2);
    assert_eq!(
        s.defaulted(&Value::Null),
        json!({"replicas": 2, "logLevel": "Info", "https": {"mode": "CertManager"}})
    );
    assert_eq!(
        s.defaulted(&json!({
            "replicas": 5,
            "https": {"certManager": {}},
            "tolerations": [{"key": "a"}, {"key": "b", "operator": "Exists"}],
            "mode": null
        })),
        json!({
            "replicas": 5, "logLevel": "Info", "mode": null,
            "https": {"mode": "CertManager", "certManager": {"clusterIssuerName": "letsencrypt"}},
            "tolerations": [{"key": "a", "operator": "Equal"}, {"key": "b", "operator": "Exists"}]
        })
    );
}

#[test]
fn validation_reads_openapi_as_deckhouse_does() {
    let s = schema();
    let ok = |v: Value| s.validate("echo", &s.defaulted(&v));
    assert_eq!(ok(json!({})), Ok(()));
    // nullable: null is accepted, also as an enum member.
    assert_eq!(ok(json!({"nodeSelector": null, "mode": null})), Ok(()));
    assert_eq!(ok(json!({"extra": {"anything": [1]}})), Ok(()));
    let errors =
        ok(json!({"replicas": "three", "logLevel": "Trace", "typo": 1, "https": {"mod": "x"}}))
            .unwrap_err();
    assert_eq!(errors.len(), 4, "{errors:?}");
    let all = errors.join("\n");
    for needle in [
        "echo.replicas: \"three\" is not of type \"integer\"",
        "echo.logLevel: ",
        "echo: Additional properties are not allowed ('typo' was unexpected)",
        "echo.https: Additional properties are not allowed ('mod' was unexpected)",
    ] {
        assert!(all.contains(needle), "{needle} not in\n{all}");
    }
    let errors = ok(json!({"tolerations": [{"key": 1}]})).unwrap_err();
    assert_eq!(
        errors,
        vec!["echo.tolerations[0].key: 1 is not of type \"string\"".to_owned()]
    );
    let errors = ok(json!({"replicas": 0})).unwrap_err();
    assert_eq!(
        errors,
        vec!["echo.replicas: 0 is less than the minimum of 1".to_owned()]
    );
}

#[test]
fn bad_schemas_are_refused() {
    assert!(matches!(
        SettingsSchema::from_yaml("type: [").unwrap_err(),
        Error::Parse { .. }
    ));
    assert!(matches!(
        SettingsSchema::from_yaml("- 1").unwrap_err(),
        Error::Schema { .. }
    ));
    let err =
        SettingsSchema::from_yaml("type: object\nproperties:\n  a:\n    type: 5\n").unwrap_err();
    assert!(matches!(err, Error::Schema { .. }), "{err}");
    // An empty file is the empty schema: everything passes, version 1.
    let empty = SettingsSchema::from_yaml("").unwrap();
    assert_eq!(empty.config_version(), 1);
    assert_eq!(empty.validate("m", &json!({"a": 1})), Ok(()));
}

#[test]
fn conversion_closes_objects_and_spells_nullable() {
    let converted = to_json_schema(&serde_json::from_value(json!({
        "type": "object",
        "properties": {"a": {"type": "string", "nullable": true, "enum": ["x"], "default": "x"}},
        "additionalProperties": true
    })).unwrap());
    assert_eq!(
        converted,
        json!({
            "type": "object",
            "properties": {"a": {"type": ["string", "null"], "enum": ["x", null]}},
            "additionalProperties": true
        })
    );
}
