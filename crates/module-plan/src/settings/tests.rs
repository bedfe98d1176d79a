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
        "echo.replicas must be of type integer: \"string\"",
        "echo.logLevel should be one of [Debug Info]",
        "echo.typo is a forbidden property",
        "echo.https.mod is a forbidden property",
    ] {
        assert!(all.contains(needle), "{needle} not in\n{all}");
    }
    let errors = ok(json!({"tolerations": [{"key": 1}]})).unwrap_err();
    assert_eq!(
        errors,
        vec!["echo.tolerations.0.key must be of type string: \"integer\"".to_owned()]
    );
    let errors = ok(json!({"replicas": 0})).unwrap_err();
    assert_eq!(
        errors,
        vec!["echo.replicas should be greater than or equal to 1".to_owned()]
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

#[test]
fn messages_are_worded_as_go_openapi_words_them() {
    let s = SettingsSchema::from_yaml(
        r#"
type: object
required: [name]
properties:
  name: {type: string, pattern: "^[a-z]+$", minLength: 2, maxLength: 5}
  ratio: {type: number, maximum: 2.5, minimum: 0, exclusiveMinimum: true, multipleOf: 0.5}
  ports: {type: array, maxItems: 1, uniqueItems: true, items: {type: integer, enum: [80, 443]}}
  labels: {type: object, minProperties: 1, additionalProperties: {type: string}}
"#,
    )
    .unwrap();
    let cases: &[(Value, &[&str])] = &[
        (json!({}), &["m.name is required"]),
        (
            json!({"name": "A"}),
            &[
                "m.name should match '^[a-z]+$'",
                "m.name should be at least 2 chars long",
            ],
        ),
        (
            json!({"name": "abcdef"}),
            &["m.name should be at most 5 chars long"],
        ),
        (
            json!({"name": "ab", "ratio": 3.0}),
            &["m.ratio should be less than or equal to 2.5"],
        ),
        (
            json!({"name": "ab", "ratio": 0}),
            &["m.ratio should be greater than 0"],
        ),
        (
            json!({"name": "ab", "ratio": 0.7}),
            &["m.ratio should be a multiple of 0.5"],
        ),
        (
            json!({"name": "ab", "ports": [80, 80]}),
            &[
                "m.ports should have at most 1 items",
                "m.ports shouldn't contain duplicates",
            ],
        ),
        (
            json!({"name": "ab", "ports": [8080]}),
            &["m.ports.0 should be one of [80 443]"],
        ),
        (
            json!({"name": "ab", "labels": {}}),
            &["m.labels should have at least 1 properties"],
        ),
        (
            json!({"name": "ab", "labels": {"a": true}}),
            &["m.labels.a must be of type string: \"boolean\""],
        ),
        (
            json!({"name": null}),
            &["m.name must be of type string: \"null\""],
        ),
        (
            json!({"name": "ab", "ratio": "x"}),
            &["m.ratio must be of type number: \"string\""],
        ),
    ];
    for (values, want) in cases {
        let mut got = s.validate("m", values).err().unwrap_or_default();
        got.sort();
        let mut want: Vec<String> = want.iter().map(|w| (*w).to_owned()).collect();
        want.sort();
        assert_eq!(got, want, "{values}");
    }
}

#[test]
fn several_errors_read_as_deckhouse_prints_a_multierror_on_one_line() {
    assert_eq!(
        multierror_one_line(&["m.a is required".into()]),
        " 1 error occurred: * m.a is required  "
    );
    assert_eq!(
        multierror_one_line(&[
            "m.a is required".into(),
            "m.b is a forbidden property".into()
        ]),
        " 2 errors occurred: * m.a is required * m.b is a forbidden property  "
    );
}
