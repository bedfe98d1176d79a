use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::config::ModuleSettings;

const CONFIG: &str = r#"
type: object
x-config-version: 2
properties:
  replicas:
    type: integer
    default: 2
    minimum: 1
  https:
    type: object
    default: {}
    properties:
      mode:
        type: string
        enum: [CertManager, Disabled]
        default: CertManager
  nodeSelector:
    type: object
    additionalProperties: {type: string}
"#;

const VALUES: &str = r#"
x-extend:
  schema: config-values.yaml
type: object
properties:
  internal:
    type: object
    default: {}
    x-required-for-helm: [cert]
    properties:
      cert:
        type: string
      replicasSeen:
        type: integer
        default: 0
      tags:
        type: array
        items: {type: string}
"#;

const V2: &str = "version: 2\nconversions:\n  - 'if has(\"count\") then .replicas = .count | del(.count) else . end'\n";

fn settings(module: &str) -> ModuleSettings {
    ModuleSettings::from_files(
        module,
        Some(CONFIG),
        &[("openapi/conversions/v2.yaml".into(), V2.into())],
    )
    .unwrap()
}

fn definition(module: &str, static_values: Option<&str>) -> Arc<ValuesDefinition> {
    Arc::new(ValuesDefinition::new(settings(module), Some(VALUES), static_values).unwrap())
}

fn spec(version: Option<i64>, settings: Value) -> ModuleConfigSpec {
    ModuleConfigSpec {
        enabled: Some(true),
        version,
        settings: Some(settings),
        ..Default::default()
    }
}

fn global() -> ModuleValues {
    let definition = Arc::new(
        ValuesDefinition::new(
            ModuleSettings::from_files("global", None, &[]).unwrap(),
            None,
            None,
        )
        .unwrap(),
    );
    ModuleValues::build_global(definition, None, &GlobalFacts::default()).unwrap()
}

fn patch(ops: Vec<Operation>) -> ValuesPatch {
    ValuesPatch::new(ops)
}

#[test]
fn layers_defaults_and_conversions() {
    // (static values.yaml, ModuleConfig, expected config values, expected values)
    let rows: Vec<(Option<&str>, Option<ModuleConfigSpec>, Value, Value)> = vec![
        (
            None,
            None,
            json!({}),
            json!({"replicas": 2, "https": {"mode": "CertManager"}, "internal": {"replicasSeen": 0}}),
        ),
        // Settings at the latest version: config values are the settings as written.
        (
            None,
            Some(spec(Some(2), json!({"replicas": 5}))),
            json!({"replicas": 5}),
            json!({"replicas": 5, "https": {"mode": "CertManager"}, "internal": {"replicasSeen": 0}}),
        ),
        // Version 1 settings are converted before use.
        (
            None,
            Some(spec(Some(1), json!({"count": 3}))),
            json!({"replicas": 3}),
            json!({"replicas": 3, "https": {"mode": "CertManager"}, "internal": {"replicasSeen": 0}}),
        ),
        // Static values under the module's key, then the schema defaults, then the settings.
        (
            Some("echoServer:\n  replicas: 7\n  internal:\n    tags: [a]\n"),
            None,
            json!({}),
            json!({"replicas": 7, "https": {"mode": "CertManager"}, "internal": {"replicasSeen": 0, "tags": ["a"]}}),
        ),
        (
            Some("replicas: 7\n"),
            Some(spec(
                Some(2),
                json!({"replicas": 4, "https": {"mode": "Disabled"}}),
            )),
            json!({"replicas": 4, "https": {"mode": "Disabled"}}),
            json!({"replicas": 4, "https": {"mode": "Disabled"}, "internal": {"replicasSeen": 0}}),
        ),
    ];
    for (static_values, config, config_values, values) in rows {
        let built = ModuleValues::build(
            definition("echo-server", static_values),
            config.as_ref(),
            None,
        )
        .unwrap();
        assert_eq!(built.key(), "echoServer");
        assert_eq!(
            built.config_values(),
            &config_values,
            "{static_values:?} {config:?}"
        );
        assert_eq!(built.values(), &values, "{static_values:?} {config:?}");
        assert_eq!(built.settings_version(), 2);
    }
}

#[test]
fn refused_settings_carry_deckhouses_message() {
    for (config, message) in [
        (
            spec(Some(2), json!({"replicas": 0})),
            "spec.settings are not valid (version 2): ",
        ),
        (
            spec(Some(2), json!({"typo": 1})),
            "spec.settings are not valid (version 2): ",
        ),
        (
            spec(Some(9), json!({})),
            "spec.version=9 is unsupported. Use latest version 2",
        ),
        (
            spec(None, json!({"replicas": 1})),
            crate::config::MSG_VERSION_REQUIRED,
        ),
    ] {
        let err =
            ModuleValues::build(definition("echo-server", None), Some(&config), None).unwrap_err();
        let ValuesError::ConfigValues {
            module,
            message: got,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(module, "echo-server");
        assert!(got.starts_with(message), "{got}");
    }
    let err = ModuleValues::build(
        definition("echo-server", None),
        Some(&spec(Some(2), json!({"replicas": 0}))),
        None,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.settings are not valid (version 2):  1 error occurred: * echoServer.replicas should be greater than or equal to 1  "
    );
}

#[test]
fn camel_case_keys() {
    for (module, key) in [
        ("echo-server", "echoServer"),
        ("user-authn", "userAuthn"),
        ("prometheus", "prometheus"),
        ("cni-cilium", "cniCilium"),
    ] {
        let values = ModuleValues::build(definition(module, None), None, None).unwrap();
        assert_eq!(values.key(), key);
        assert_eq!(values.prefixed_values()[key]["replicas"], json!(2));
        let chart = helm_values(&global(), &values);
        let mut keys: Vec<&String> = chart.as_object().unwrap().keys().collect();
        keys.sort();
        let mut want = vec!["global", key];
        want.sort();
        assert_eq!(keys, want);
        // Patch paths are written under the camelCase key.
        let ok = values
            .apply_values_patch(&patch(vec![Operation::add(
                &format!("/{key}/internal/cert"),
                json!("x"),
            )]))
            .unwrap();
        assert_eq!(ok.values()["internal"]["cert"], json!("x"));
        if module != key {
            let err = values
                .apply_values_patch(&patch(vec![Operation::add(
                    &format!("/{module}/internal/cert"),
                    json!("x"),
                )]))
                .unwrap_err();
            assert!(matches!(err, ValuesError::Patch { .. }), "{err}");
        }
    }
}

#[test]
fn required_for_helm_only_when_rendering() {
    let values = ModuleValues::build(definition("echo-server", None), None, None).unwrap();
    // Building and validating the values does not need internal.cert…
    let err = values.check_helm().unwrap_err();
    // …rendering does.
    assert_eq!(
        err.to_string(),
        "check helm values: 1 error occurred:\n\t* echoServer.internal.cert is required\n\n"
    );
    assert_eq!(
        err.status_message(),
        " check helm values: 1 error occurred: * echoServer.internal.cert is required  "
    );
    let values = values
        .apply_values_patch(&patch(vec![Operation::add(
            "/echoServer/internal/cert",
            json!("PEM"),
        )]))
        .unwrap();
    values.check_helm().unwrap();
    // A string form of x-required-for-helm works too.
    let d = ValuesDefinition::new(
        ModuleSettings::from_files("a", None, &[]).unwrap(),
        Some("type: object\nx-required-for-helm: token\nproperties:\n  token: {type: string}\n"),
        None,
    )
    .unwrap();
    let v = ModuleValues::build(Arc::new(d), None, None).unwrap();
    assert_eq!(
        v.check_helm().unwrap_err().to_string(),
        "check helm values: 1 error occurred:\n\t* a.token is required\n\n"
    );
}

#[test]
fn values_schema_without_x_extend_forbids_settings() {
    let d = ValuesDefinition::new(
        settings("echo"),
        Some("type: object\nproperties:\n  internal:\n    type: object\n    default: {}\n"),
        None,
    )
    .unwrap();
    let err = ModuleValues::build(Arc::new(d), None, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "validate values: 2 errors occurred:\n\t* echo.https is a forbidden property\n\t* echo.replicas is a forbidden property\n\n"
    );
}

#[test]
fn patch_paths_allowed_and_refused() {
    let values = ModuleValues::build(definition("user-authn", None), None, None).unwrap();
    for (op, result) in [
        (
            Operation::add("/userAuthn/internal/cert", json!("c")),
            Ok(()),
        ),
        (
            Operation::add("/global/discovery/x", json!(1)),
            Err(
                "merge module 'user-authn' values failed: unacceptable patch operation for path 'global' (only 'userAuthn' accepted): '1'",
            ),
        ),
        (
            Operation::add("/prometheus/internal", json!({})),
            Err(
                "merge module 'user-authn' values failed: unacceptable patch operation for path 'prometheus' (only 'userAuthn' accepted): '{}'",
            ),
        ),
        (
            Operation {
                op: "replace".into(),
                path: "/userAuthn/replicas".into(),
                value: Some(json!(3)),
                from: None,
            },
            Err(
                "merge module 'user-authn' values failed: unsupported patch operation 'replace': '3'",
            ),
        ),
        (
            Operation::remove("/userAuthn/internal/nothing"),
            Err(
                "merge module 'user-authn' values failed: error in remove for path: '/userAuthn/internal/nothing': Unable to remove nonexistent key: nothing: missing value",
            ),
        ),
        (
            Operation::add("/userAuthn/missing/x", json!(1)),
            Err(
                "merge module 'user-authn' values failed: add operation does not apply: doc is missing path: \"/userAuthn/missing/x\": missing value",
            ),
        ),
        (
            Operation::remove("/userAuthn"),
            Err("unknown module values type: <nil>"),
        ),
    ] {
        let got = values
            .apply_values_patch(&patch(vec![op.clone()]))
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(got, result.map_err(str::to_owned), "{op:?}");
    }
    let err = values
        .apply_values_patch(&patch(vec![Operation::add("/global/x", json!(1))]))
        .unwrap_err();
    assert_eq!(
        err.for_hook("001-user-authn/hooks/a.py"),
        "module hook '001-user-authn/hooks/a.py': dynamic module values update error: merge module 'user-authn' values failed: unacceptable patch operation for path 'global' (only 'userAuthn' accepted): '1'"
    );
}

#[test]
fn a_patch_is_applied_whole_or_not_at_all() {
    let values = ModuleValues::build(definition("echo", None), None, None).unwrap();
    let before = values.checksum();
    // The second operation breaks the schema; the first must not stay.
    let err = values
        .apply_values_patch(&patch(vec![
            Operation::add("/echo/internal/cert", json!("c")),
            Operation::add("/echo/internal/replicasSeen", json!("many")),
            Operation::add("/echo/internal/typo", json!(1)),
        ]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "3 errors occurred:\n\t* cannot apply values patch for module values\n\t* echo.internal.replicasSeen must be of type integer: \"string\"\n\t* echo.internal.typo is a forbidden property\n\n"
    );
    assert_eq!(err.for_hook("h"), err.to_string());
    assert_eq!(values.checksum(), before);
    assert!(values.values()["internal"].get("cert").is_none());
    // A later operation failing to apply also drops the earlier ones.
    let err = values
        .apply_values_patch(&patch(vec![
            Operation::add("/echo/internal/cert", json!("c")),
            Operation::remove("/echo/nothing"),
        ]))
        .unwrap_err();
    assert!(matches!(err, ValuesError::Patch { .. }), "{err}");
    assert!(values.patches().is_empty());
}

#[test]
fn patches_are_kept_compacted_and_survive_new_settings() {
    let values = ModuleValues::build(definition("echo", None), None, None).unwrap();
    let values = values
        .apply_values_patch(&patch(vec![
            Operation::add("/echo/internal/cert", json!("one")),
            Operation::add("/echo/internal/tags", json!(["a"])),
        ]))
        .unwrap();
    let values = values
        .apply_values_patch(&patch(vec![Operation::add(
            "/echo/internal/cert",
            json!("two"),
        )]))
        .unwrap();
    assert_eq!(
        values.patches(),
        &[
            Operation::add("/echo/internal/cert", json!("two")),
            Operation::add("/echo/internal/tags", json!(["a"])),
        ]
    );
    // A new ModuleConfig: settings change, hook values stay.
    let changed = values
        .with_config(Some(&spec(Some(2), json!({"replicas": 9}))))
        .unwrap();
    assert_eq!(changed.values()["replicas"], json!(9));
    assert_eq!(changed.values()["internal"]["cert"], json!("two"));
    assert_ne!(changed.checksum(), values.checksum());
    // An unchanged patch changes nothing, checksum included.
    let same = changed
        .apply_values_patch(&patch(vec![Operation::add(
            "/echo/internal/cert",
            json!("two"),
        )]))
        .unwrap();
    assert_eq!(same.checksum(), changed.checksum());
    // A remove of the patched value is kept as the last word.
    let removed = same
        .apply_values_patch(&patch(vec![Operation::remove("/echo/internal/tags")]))
        .unwrap();
    assert!(removed.values()["internal"].get("tags").is_none());
    let rebuilt = removed.with_config(None).unwrap();
    assert!(rebuilt.values()["internal"].get("tags").is_none());
    assert_eq!(rebuilt.values()["replicas"], json!(2));
}

#[test]
fn config_values_patches() {
    let values = ModuleValues::build(
        definition("echo", None),
        Some(&spec(Some(2), json!({"replicas": 3}))),
        None,
    )
    .unwrap();
    let patched = values
        .apply_config_values_patch(&patch(vec![Operation::add(
            "/echo/nodeSelector",
            json!({"role": "system"}),
        )]))
        .unwrap();
    assert_eq!(
        patched.config_values(),
        &json!({"replicas": 3, "nodeSelector": {"role": "system"}})
    );
    assert_eq!(patched.values()["nodeSelector"], json!({"role": "system"}));
    let err = values
        .apply_config_values_patch(&patch(vec![Operation::add("/echo/replicas", json!(0))]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "2 errors occurred:\n\t* cannot apply config values patch for module values\n\t* echo.replicas should be greater than or equal to 1\n\n"
    );
    let err = values
        .apply_config_values_patch(&patch(vec![Operation::add("/other/x", json!(0))]))
        .unwrap_err();
    assert_eq!(
        err.for_hook("h"),
        "module hook 'h': kube module config values update error: merge module 'echo' values failed: unacceptable patch operation for path 'other' (only 'echo' accepted): '0'"
    );
    assert_eq!(values.config_values(), &json!({"replicas": 3}));
}

#[test]
fn global_values_facts_and_global_hook_patches() {
    let config = "type: object\nproperties:\n  modules:\n    type: object\n    default: {}\n    properties:\n      publicDomainTemplate: {type: string}\n      placement:\n        type: object\n        default: {}\n";
    let schema = "x-extend:\n  schema: config-values.yaml\ntype: object\nadditionalProperties: true\nproperties:\n  discovery:\n    type: object\n    default: {}\n    additionalProperties: true\n    properties:\n      prometheusScrapeInterval: {type: integer, default: 30}\n";
    let d = Arc::new(
        ValuesDefinition::new(
            ModuleSettings::from_files("global", Some(config), &[]).unwrap(),
            Some(schema),
            None,
        )
        .unwrap(),
    );
    let facts = GlobalFacts {
        enabled_modules: vec!["prometheus".into(), "cert-manager".into()],
        modules_images: ModulesImages {
            registry: GlobalRegistry {
                base: Some("registry.example.com/deckhouse".into()),
                scheme: Some("https".into()),
                dockercfg: Some("e30=".into()),
                ..Default::default()
            },
            digests: [(
                "echoServer".to_owned(),
                [("server".to_owned(), "sha256:aa".to_owned())].into(),
            )]
            .into(),
        },
        discovery: Discovery {
            kubernetes_version: Some("1.31.2".into()),
            cluster_domain: Some("cluster.local".into()),
            api_versions: vec!["v1".into(), "apps/v1".into()],
            ..Default::default()
        },
        deckhouse_version: Some("v1.70.0".into()),
        ..Default::default()
    };
    let config_spec = spec(
        Some(1),
        json!({"modules": {"publicDomainTemplate": "%s.example.com"}}),
    );
    let global = ModuleValues::build_global(d, Some(&config_spec), &facts).unwrap();
    assert_eq!(global.key(), "global");
    assert_eq!(
        global.values(),
        &json!({
            "modules": {"publicDomainTemplate": "%s.example.com", "placement": {}},
            "enabledModules": ["cert-manager", "prometheus"],
            "modulesImages": {
                "registry": {"base": "registry.example.com/deckhouse", "scheme": "https", "dockercfg": "e30="},
                "digests": {"echoServer": {"server": "sha256:aa"}}
            },
            "discovery": {
                "prometheusScrapeInterval": 30,
                "kubernetesVersion": "1.31.2",
                "clusterDomain": "cluster.local",
                "apiVersions": ["apps/v1", "v1"]
            },
            "deckhouseVersion": "v1.70.0"
        })
    );
    // A global hook: `global` and `*Enabled` paths; the enabling part goes to the chain.
    let hook_patch = patch(vec![
        Operation::add("/global/discovery/clusterUUID", json!("u")),
        Operation::add("/echoServerEnabled", json!(true)),
    ]);
    let patched = global.apply_values_patch(&hook_patch).unwrap();
    assert_eq!(patched.values()["discovery"]["clusterUUID"], json!("u"));
    assert_eq!(
        hook_patch.enabled_modules().into_iter().collect::<Vec<_>>(),
        vec![("echo-server".to_owned(), Some(true))]
    );
    // Only `*Enabled`: values unchanged.
    let only_enabled = patch(vec![Operation::add("/echoServerEnabled", json!(false))]);
    assert_eq!(
        global.apply_values_patch(&only_enabled).unwrap().checksum(),
        global.checksum()
    );
    let err = global
        .apply_values_patch(&patch(vec![Operation::add("/echoServer/x", json!(1))]))
        .unwrap_err();
    assert_eq!(
        err.for_hook("global-hooks/a"),
        "global hook 'global-hooks/a': dynamic global values update error: merge global values failed: unacceptable patch operation for path 'echoServer' (only 'global' and '*Enabled' are permitted): '1'"
    );
    let err = global
        .apply_values_patch(&patch(vec![Operation::add(
            "/global/discovery/prometheusScrapeInterval",
            json!("x"),
        )]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot apply values patch for global values: 1 error occurred:\n\t* global.discovery.prometheusScrapeInterval must be of type integer: \"string\"\n\n"
    );
    // New facts keep hook patches.
    let refreshed = patched
        .with_facts(&GlobalFacts {
            enabled_modules: vec!["echo-server".into()],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(refreshed.values()["enabledModules"], json!(["echo-server"]));
    assert_eq!(refreshed.values()["discovery"]["clusterUUID"], json!("u"));
}

#[test]
fn hook_documents_and_enabled_script_values() {
    let global = global();
    let module = ModuleValues::build(
        definition("echo-server", None),
        Some(&spec(Some(2), json!({"replicas": 3}))),
        None,
    )
    .unwrap();
    assert_eq!(
        hook_config_values(&global, &module),
        json!({"global": {}, "echoServer": {"replicas": 3}})
    );
    assert_eq!(hook_values(&global, &module), helm_values(&global, &module));
    assert_eq!(
        enabled_script_values(&global, &module, &["a".into(), "b".into()])["global"],
        json!({"enabledModules": ["a", "b"]})
    );
}

#[test]
fn registry_of_a_downloaded_module() {
    let registry = Registry {
        base: "registry.example.com/modules/echo".into(),
        dockercfg: "e30=".into(),
        scheme: "https".into(),
        ca: None,
    };
    // Without the registry spec in the schema the values are refused (closed schema)…
    let err =
        ModuleValues::build(definition("echo", None), None, Some(registry.clone())).unwrap_err();
    assert!(
        err.to_string()
            .contains("echo.registry is a forbidden property"),
        "{err}"
    );
    // …with it they carry the registry.
    let d = Arc::new(
        ValuesDefinition::new(settings("echo"), Some(VALUES), None)
            .unwrap()
            .with_registry_spec()
            .unwrap(),
    );
    let values = ModuleValues::build(d, None, Some(registry)).unwrap();
    assert_eq!(
        values.values()["registry"],
        json!({"base": "registry.example.com/modules/echo", "dockercfg": "e30=", "scheme": "https"})
    );
}

#[test]
fn static_values_files() {
    let bad = ValuesDefinition::new(settings("echo"), None, Some("echo: [1]\n")).unwrap_err();
    assert!(bad.to_string().starts_with("values.yaml: "), "{bad}");
    let bad = ValuesDefinition::new(settings("echo"), Some("type: [\n"), None).unwrap_err();
    assert!(
        bad.to_string().starts_with("openapi/values.yaml: "),
        "{bad}"
    );
    let empty = ValuesDefinition::new(settings("echo"), None, Some("")).unwrap();
    assert_eq!(empty.static_values(), &json!({}));
    // No openapi/values.yaml: no values schema, nothing required for helm.
    let d = Arc::new(ValuesDefinition::new(settings("echo"), None, Some("extra: 1\n")).unwrap());
    let v = ModuleValues::build(d, None, None).unwrap();
    assert_eq!(v.values()["extra"], json!(1));
    v.check_helm().unwrap();
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..20).prop_map(|n| json!(n)),
        "[a-z]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("replicas".to_owned()),
                    Just("https".to_owned()),
                    Just("mode".to_owned()),
                    Just("internal".to_owned()),
                    Just("tags".to_owned()),
                    "[a-z]{1,3}",
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn applying_defaults_twice_changes_nothing(value in arb_value()) {
        let d = definition("echo", None);
        for schema in [d.settings().schema().unwrap(), d.values_schema().unwrap()] {
            let once = schema.defaulted(&value);
            prop_assert_eq!(schema.defaulted(&once), once);
        }
    }

    #[test]
    fn building_is_deterministic_and_idempotent(settings in arb_value()) {
        let d = definition("echo", None);
        let config = spec(Some(2), settings);
        let first = ModuleValues::build(d.clone(), Some(&config), None);
        let second = ModuleValues::build(d, Some(&config), None);
        match (first, second) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(a.values(), b.values());
                prop_assert_eq!(a.checksum(), b.checksum());
                // Rebuilding with the same config changes nothing.
                let again = a.with_config(Some(&config)).unwrap();
                prop_assert_eq!(again.values(), a.values());
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "{:?} vs {:?}", a, b),
        }
    }
}
