use serde_json::json;

use super::*;

const SCHEMA: &str = "type: object\nproperties:\n  replicas:\n    type: integer\n    default: 1\n  arrayField:\n    type: array\n    items: {type: string}\n  renamed: {type: string}\n";

fn echo() -> ModuleSettings {
    let conversions = vec![
        ("openapi/conversions/v2.yaml".to_owned(), "version: 2\nconversions:\n  - .renamed = .old | del(.old)\n".to_owned()),
        (
            "openapi/conversions/v3.yaml".to_owned(),
            "version: 3\nconversions:\n  - '.arrayField=[\"v1\",\"v2\",\"v3\"]'\n  - del(.tempField)\n".to_owned(),
        ),
    ];
    ModuleSettings::from_files("echo-server", Some(SCHEMA), &conversions).unwrap()
}

fn spec(enabled: Option<bool>, version: Option<i64>, settings: Option<Value>) -> ModuleConfigSpec {
    ModuleConfigSpec {
        enabled,
        version,
        settings,
        ..Default::default()
    }
}

#[test]
fn validator_table() {
    let m = echo();
    assert_eq!(m.latest(), 3);
    assert_eq!(m.values_key(), "echoServer");
    type Case = (
        Option<bool>,
        Option<i64>,
        Option<Value>,
        Option<&'static str>,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (None, None, None, None, vec![]),
        (
            None,
            None,
            Some(json!({"replicas": 2})),
            Some("spec.version is required when spec.settings are specified"),
            vec![],
        ),
        (
            None,
            Some(3),
            None,
            None,
            vec![MSG_VERSION_WITHOUT_SETTINGS],
        ),
        (
            None,
            Some(9),
            Some(json!({})),
            Some(
                "spec.version=9 is unsupported. Use latest version 3, or one of previous versions: 1, 2",
            ),
            vec![],
        ),
        (
            None,
            Some(9),
            None,
            None,
            vec![
                MSG_VERSION_WITHOUT_SETTINGS,
                "spec.version=9 is unsupported. Use latest version 3, or one of previous versions: 1, 2",
            ],
        ),
        (
            None,
            Some(1),
            Some(json!({"old": "x"})),
            None,
            vec![
                "spec.version=1 is obsolete. Please migrate spec.settings to the latest version 3",
            ],
        ),
        (
            None,
            Some(3),
            Some(json!({"replicas": "x"})),
            Some(
                "spec.settings are not valid (version 3):  1 error occurred: * echoServer.replicas must be of type integer: \"string\"  ",
            ),
            vec![],
        ),
        (
            None,
            Some(1),
            Some(json!({"old": 5})),
            Some(
                "spec.settings are not valid (version 1 converted to 3):  1 error occurred: * echoServer.renamed must be of type string: \"integer\"  ",
            ),
            vec![],
        ),
        (
            Some(false),
            Some(3),
            Some(json!({"replicas": "x"})),
            None,
            vec![],
        ),
    ];
    for (enabled, version, settings, error, warnings) in cases {
        let label = format!("{enabled:?} {version:?} {settings:?}");
        let checked = m.check(&spec(enabled, version, settings));
        assert_eq!(checked.error.as_deref(), error, "{label}");
        assert_eq!(checked.warnings, warnings, "{label}");
        assert_eq!(checked.values.is_some(), error.is_none(), "{label}");
    }
}

#[test]
fn values_are_converted_and_defaulted() {
    let m = echo();
    assert_eq!(
        m.values(Some(&json!({"old": "x", "tempField": 1})), Some(1))
            .unwrap(),
        json!({"renamed": "x", "replicas": 1, "arrayField": ["v1", "v2", "v3"]})
    );
    assert_eq!(m.values(None, None).unwrap(), json!({"replicas": 1}));
    assert!(
        m.values(Some(&json!({"replicas": []})), None)
            .unwrap_err()
            .starts_with("spec.settings are not valid (version 3)")
    );
}

#[test]
fn status_messages() {
    let m = echo();
    let status = |s: ModuleConfigSpec| {
        let st = m.status(&s);
        (st.version, st.message)
    };
    assert_eq!(
        status(spec(Some(true), None, None)),
        ("3".into(), String::new())
    );
    assert_eq!(
        status(spec(None, Some(1), Some(json!({"old": "a"})))),
        (
            "1".into(),
            "Update available, latest spec.settings schema version is 3".into()
        )
    );
    assert_eq!(
        status(spec(None, Some(7), Some(json!({})))),
        (
            "7".into(),
            "Error: invalid spec.version, use version 3".into()
        )
    );
    assert_eq!(
        status(spec(None, Some(3), Some(json!({"replicas": "x"})))).1,
        "Error: spec.settings are not valid (version 3):  1 error occurred: * echoServer.replicas must be of type integer: \"string\"  "
    );
    assert_eq!(
        unknown_module_status().message,
        "Ignored: unknown module name"
    );
}

#[test]
fn settings_definition_from_schema_and_conversions() {
    let m = echo();
    let d = m.definition();
    assert_eq!(d.versions.len(), 1);
    assert_eq!(d.versions[0].name, "3");
    assert_eq!(
        d.versions[0].schema.as_ref().unwrap()["properties"]["replicas"]["default"],
        json!(1)
    );
    let versions = m.versions();
    assert_eq!(versions.latest, 3);
    assert_eq!(
        versions.known.iter().copied().collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    // x-config-version alone raises the latest version.
    let m = ModuleSettings::from_files("global", Some("type: object\nx-config-version: 2\n"), &[])
        .unwrap();
    assert_eq!((m.latest(), m.values_key().as_str()), (2, "global"));
}
