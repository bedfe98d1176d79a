use std::collections::BTreeMap;

use api::module::{Accessibility, EditionAccess, ModuleRequirements};

use super::*;

fn facts() -> Facts {
    Facts {
        bundle: "Default".into(),
        edition: "ce".into(),
        deckhouse_version: version_of("v1.69.3"),
        kubernetes_version: version_of("1.29.3"),
        bootstrapped: true,
        ..Default::default()
    }
}

fn module(name: &str) -> Input {
    Input {
        name: name.into(),
        ..Default::default()
    }
}

fn in_bundles(bundles: &[&str]) -> Option<Accessibility> {
    let mut editions = BTreeMap::new();
    editions.insert(
        "_default".to_owned(),
        EditionAccess {
            available: Some(true),
            enabled_in_bundles: bundles.iter().map(|b| (*b).to_owned()).collect(),
        },
    );
    Some(Accessibility { editions })
}

fn requirements(f: impl FnOnce(&mut ModuleRequirements)) -> Option<ModuleRequirements> {
    let mut r = ModuleRequirements::default();
    f(&mut r);
    Some(r)
}

fn one(input: Input, facts: &Facts) -> Decision {
    let name = input.name.clone();
    decide_all(&[input], facts).remove(&name).unwrap()
}

#[test]
fn each_extender_decides_with_its_message() {
    let f = facts();
    let cases: Vec<(Input, bool, Reason, &str)> = vec![
        (
            module("plain"),
            false,
            Reason::Bundle,
            "turned off by bundle",
        ),
        (
            Input {
                properties: ModuleProperties {
                    accessibility: in_bundles(&["default"]),
                    ..Default::default()
                },
                ..module("bundled")
            },
            true,
            Reason::Bundle,
            "",
        ),
        (
            Input {
                properties: ModuleProperties {
                    accessibility: in_bundles(&["Minimal"]),
                    ..Default::default()
                },
                ..module("minimal-only")
            },
            false,
            Reason::Bundle,
            "turned off by bundle",
        ),
        (
            Input {
                legacy_default: true,
                config_enabled: Some(false),
                ..module("off")
            },
            false,
            Reason::ModuleConfig,
            "turned off by module config",
        ),
        (
            Input {
                config_enabled: Some(true),
                ..module("on")
            },
            true,
            Reason::ModuleConfig,
            "",
        ),
        (
            Input {
                config_enabled: Some(true),
                dynamic: Some(false),
                ..module("hook")
            },
            false,
            Reason::DynamicGlobalHookExtender,
            "turned off by global hook",
        ),
        (
            Input {
                config_enabled: Some(true),
                script_refusal: Some("no cloud".into()),
                ..module("script")
            },
            false,
            Reason::EnabledScriptExtender,
            "turned off by enabled script: no cloud",
        ),
        (
            Input {
                config_enabled: Some(true),
                properties: ModuleProperties {
                    requirements: requirements(|r| r.deckhouse = Some(">= 1.70".into())),
                    ..Default::default()
                },
                ..module("dh")
            },
            false,
            Reason::DeckhouseVersionExtender,
            "turned off by deckhouse version: 1.69.3 does not satisfy \">= 1.70\"",
        ),
        (
            Input {
                config_enabled: Some(true),
                properties: ModuleProperties {
                    requirements: requirements(|r| r.kubernetes = Some("< 1.29".into())),
                    ..Default::default()
                },
                ..module("k8s")
            },
            false,
            Reason::KubernetesVersionExtender,
            "turned off by kubernetes version: 1.29.3 does not satisfy \"< 1.29\"",
        ),
        (
            Input {
                config_enabled: Some(true),
                properties: ModuleProperties {
                    stage: Some("Experimental".into()),
                    ..Default::default()
                },
                ..module("exp")
            },
            false,
            Reason::ExperimentalExtender,
            "turned off because the module is experimental",
        ),
    ];
    for (input, enabled, reason, message) in cases {
        let name = input.name.clone();
        let d = one(input, &f);
        assert_eq!(
            (d.enabled, d.reason, d.message.as_str()),
            (enabled, reason, message),
            "{name}"
        );
    }
}

#[test]
fn bootstrapped_edition_and_experimental_allowances() {
    let mut f = facts();
    f.bootstrapped = false;
    let input = Input {
        config_enabled: Some(true),
        properties: ModuleProperties {
            requirements: requirements(|r| r.bootstrapped = Some("true".into())),
            ..Default::default()
        },
        ..module("boot")
    };
    let d = one(input.clone(), &f);
    assert_eq!(
        d.message,
        "turned off because the cluster not bootstrapped yet"
    );
    f.bootstrapped = true;
    assert!(one(input, &f).enabled);

    let mut access = in_bundles(&["Default"]).unwrap();
    access.editions.insert(
        "ce".into(),
        EditionAccess {
            available: Some(false),
            enabled_in_bundles: vec![],
        },
    );
    let input = Input {
        config_enabled: Some(true),
        properties: ModuleProperties {
            accessibility: Some(access),
            ..Default::default()
        },
        ..module("ee-only")
    };
    let d = one(input.clone(), &f);
    assert!(d.is_unavailable(), "{d:?}");
    f.edition = "ee".into();
    assert!(one(input, &f).enabled);

    let exp = Input {
        config_enabled: Some(true),
        properties: ModuleProperties {
            stage: Some("Experimental".into()),
            ..Default::default()
        },
        ..module("exp")
    };
    f.allowed_experimental.insert("exp".into());
    assert!(one(exp.clone(), &f).enabled);
    f.allowed_experimental.clear();
    f.allow_experimental = true;
    assert!(one(exp, &f).enabled);
}

#[test]
fn dependencies_cascade_and_optional_ones_do_not_block() {
    let f = facts();
    let needs = |name: &str, deps: &[(&str, &str)]| Input {
        config_enabled: Some(true),
        version: version_of("1.0.0"),
        properties: ModuleProperties {
            requirements: requirements(|r| {
                for (d, c) in deps {
                    r.modules.insert((*d).into(), (*c).into());
                }
            }),
            ..Default::default()
        },
        ..module(name)
    };
    let base = Input {
        config_enabled: Some(false),
        ..module("base")
    };
    let inputs = vec![
        base,
        needs("mid", &[("base", ">= 0.1")]),
        needs("top", &[("mid", ">= 0.1")]),
        needs("opt", &[("base", ">= 0.1 !optional")]),
        needs("old", &[("opt", ">= 2.0")]),
    ];
    let d = decide_all(&inputs, &f);
    assert_eq!(d["mid"].reason, Reason::ModuleDependencyExtender);
    assert_eq!(
        d["mid"].message,
        "turned off because of unmet module dependencies: base"
    );
    assert_eq!(
        d["top"].message,
        "turned off because of unmet module dependencies: mid"
    );
    assert!(d["opt"].enabled, "{:?}", d["opt"]);
    assert_eq!(
        d["old"].message,
        "turned off because of unmet module dependencies: opt (1.0.0 does not satisfy \">= 2.0\")"
    );
}

#[test]
fn the_deckhouse_module_config_decides_bundle_and_experimental_modules() {
    use serde_json::json;
    let flag = Facts {
        bundle: "Minimal".into(),
        allow_experimental: true,
        ..facts()
    };
    // (settings, bundle, allowExperimentalModules, allowedExperimentalModules)
    let cases = [
        // No settings: the flags' facts.
        (None, "Minimal", true, vec![]),
        (Some(json!({})), "Minimal", false, vec![]),
        (Some(json!({"bundle": "Managed"})), "Managed", false, vec![]),
        (Some(json!({"bundle": "Default"})), "Default", false, vec![]),
        // A word the schema refuses does not replace the flag.
        (Some(json!({"bundle": "Huge"})), "Minimal", false, vec![]),
        (
            Some(
                json!({"bundle": "Default", "allowExperimentalModules": true,
                "allowedExperimentalModules": ["a", "b"]}),
            ),
            "Default",
            true,
            vec!["a", "b"],
        ),
    ];
    for (settings, bundle, allow, allowed) in cases {
        let got = flag.with_deckhouse_settings(settings.as_ref());
        assert_eq!(got.bundle, bundle, "{settings:?}");
        assert_eq!(got.allow_experimental, allow, "{settings:?}");
        let allowed: BTreeSet<String> = allowed.into_iter().map(str::to_owned).collect();
        assert_eq!(got.allowed_experimental, allowed, "{settings:?}");
        assert_eq!(got.edition, flag.edition);
    }
    // The bundle decides which modules are on by default.
    let mut input = module("x");
    input.properties.accessibility = in_bundles(&["Managed"]);
    let managed = flag.with_deckhouse_settings(Some(&json!({"bundle": "Managed"})));
    assert!(one(input.clone(), &managed).enabled);
    assert!(!one(input, &flag).enabled);
}
