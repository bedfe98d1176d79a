use api::conditions::ModuleCondition;
use api::packages::{
    ApplicationPackageVersionSpec, ApplicationPackageVersionStatus, ApplicationSpec,
    CompatibilityRule, PackageMetadata, VersionCompatibilityRules,
};
use serde_json::json;

use super::*;

fn app(version: &str) -> Application {
    let mut a = Application::new(
        "shop",
        ApplicationSpec {
            package_name: "echo".into(),
            package_version: version.into(),
            package_repository_name: Some("main".into()),
            ..Default::default()
        },
    );
    a.metadata.namespace = Some("a".into());
    a
}

fn apv(
    version: &str,
    loaded: bool,
    rules: Option<VersionCompatibilityRules>,
) -> ApplicationPackageVersion {
    let mut v = ApplicationPackageVersion::new(
        &ApplicationPackageVersion::name_for("main", "echo", version),
        ApplicationPackageVersionSpec {
            package_name: Some("echo".into()),
            package_repository_name: Some("main".into()),
            package_version: Some(version.into()),
        },
    );
    if loaded {
        v.status = Some(ApplicationPackageVersionStatus {
            conditions: vec![ModuleCondition {
                type_: crate::versions::METADATA_LOADED.into(),
                status: "True".into(),
                ..Default::default()
            }],
            package_metadata: Some(PackageMetadata {
                version_compatibility_rules: rules,
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    v
}

#[test]
fn judging_an_application() {
    let available: Vec<String> = ["v1.0.0", "v1.1.0", "v1.2.0", "v2.0.0"]
        .map(String::from)
        .to_vec();
    let no_skip = VersionCompatibilityRules {
        upgrade: Some(CompatibilityRule {
            allow_skip_minor: Some(0),
            ..Default::default()
        }),
        downgrade: Some(CompatibilityRule {
            max_rollback: Some(1),
            ..Default::default()
        }),
    };
    let v100 = apv("v1.0.0", true, None);
    let v110 = apv("v1.1.0", true, Some(no_skip.clone()));
    let v120 = apv("v1.2.0", true, Some(no_skip.clone()));
    let draft = apv("v2.0.0", false, None);
    let facts = |target, current| Facts {
        package_exists: true,
        target,
        current,
        available: &available,
        channel_version: None,
    };
    let reason = |r: Result<Move, Blocked>| r.map_err(|b| b.reason);
    assert_eq!(
        reason(judge(&app("v1.0.0"), None, Facts::default())),
        Err(REASON_PACKAGE_NOT_FOUND)
    );
    assert_eq!(
        reason(judge(&app("v9.0.0"), None, facts(None, None))),
        Err(REASON_VERSION_NOT_FOUND)
    );
    let b = judge(&app("v2.0.0"), None, facts(Some(&draft), None)).unwrap_err();
    assert_eq!(
        (b.reason, b.message.as_str()),
        (
            REASON_VERSION_IS_DRAFT,
            "ApplicationPackageVersion main-echo-v2.0.0 is draft"
        )
    );
    assert_eq!(
        reason(judge(&app("v1.0.0"), None, facts(Some(&v100), None))),
        Ok(Move::Install)
    );
    assert_eq!(
        reason(judge(
            &app("v1.1.0"),
            Some("v1.0.0"),
            facts(Some(&v110), Some(&v100))
        )),
        Ok(Move::Upgrade)
    );
    // A channel's version is judged in place of spec.packageVersion, with the same rules.
    let on_channel = Facts {
        channel_version: Some("v1.2.0"),
        ..facts(Some(&v120), Some(&v100))
    };
    assert_eq!(wanted(&app("v1.0.0"), on_channel.channel_version), "v1.2.0");
    let refused = judge(&app("v1.0.0"), Some("v1.0.0"), on_channel).unwrap_err();
    assert_eq!(refused.reason, REASON_VERSION_CHANGE_REFUSED);
    let refused = judge(
        &app("v1.2.0"),
        Some("v1.0.0"),
        facts(Some(&v120), Some(&v100)),
    )
    .unwrap_err();
    assert_eq!(refused.reason, REASON_VERSION_CHANGE_REFUSED);
    assert!(
        refused
            .message
            .contains("versionCompatibilityRules.upgrade.allowSkipMinor"),
        "{}",
        refused.message
    );
    assert_eq!(
        reason(judge(
            &app("v1.1.0"),
            Some("v1.2.0"),
            facts(Some(&v110), Some(&v120))
        )),
        Ok(Move::Downgrade)
    );
    let too_far = judge(
        &app("v1.0.0"),
        Some("v1.2.0"),
        facts(Some(&v100), Some(&v120)),
    )
    .unwrap_err();
    assert!(
        too_far.message.contains("maxRollback"),
        "{}",
        too_far.message
    );
    assert_eq!(
        reason(judge(
            &app("v1.1.0"),
            Some("v1.1.0"),
            facts(Some(&v110), Some(&v110))
        )),
        Ok(Move::Same)
    );
}

#[test]
fn settings_against_the_schema() {
    let schema = "type: object\nproperties:\n  replicas: {type: integer, default: 1, maximum: 3}\n  greeting: {type: string, default: hello}\n";
    assert_eq!(
        check_settings("echo-server", Some(schema), None),
        Ok(json!({"replicas": 1, "greeting": "hello"}))
    );
    assert_eq!(
        check_settings("echo-server", Some(schema), Some(&json!({"replicas": 2}))),
        Ok(json!({"replicas": 2, "greeting": "hello"}))
    );
    let b = check_settings(
        "echo-server",
        Some(schema),
        Some(&json!({"replicas": 5, "typo": 1})),
    )
    .unwrap_err();
    assert_eq!(b.reason, REASON_SETTINGS_INVALID);
    assert_eq!(
        b.message,
        "spec.settings are not valid:  2 errors occurred: * echoServer.replicas should be less than or equal to 3 * echoServer.typo is a forbidden property  "
    );
    // Without a schema a package takes no settings.
    let b = check_settings("echo", None, Some(&json!({"x": 1}))).unwrap_err();
    assert_eq!(
        (b.reason, b.message.as_str()),
        (
            REASON_SETTINGS_INVALID,
            "spec.settings are not valid: config schema is not defined but config values were provided"
        )
    );
    assert_eq!(check_settings("echo", None, None), Ok(json!({})));
    assert_eq!(
        check_settings("echo", None, Some(&json!({}))),
        Ok(json!({}))
    );
    assert_eq!(check_settings("echo", Some(" \n"), None), Ok(json!({})));
}

#[test]
fn requirements() {
    let req = ModuleReleaseRequirements {
        kubernetes: Some(">= 1.29".into()),
        deckhouse: Some(">= 1.70".into()),
        ..Default::default()
    };
    let v = |s: &str| loose_version(s).unwrap();
    assert_eq!(
        check_requirements(Some(&req), Some(&v("v1.31.2+k3s1")), None),
        Ok(())
    );
    assert_eq!(check_requirements(None, Some(&v("1.20")), None), Ok(()));
    let b = check_requirements(Some(&req), Some(&v("1.28")), None).unwrap_err();
    assert_eq!(
        b.message,
        "requirement kubernetes >= 1.29 is not met: the cluster runs 1.28.0"
    );
    let b = check_requirements(Some(&req), Some(&v("1.30")), Some(&v("1.69.3"))).unwrap_err();
    assert_eq!(b.reason, REASON_REQUIREMENTS);
    assert_eq!(
        b.message,
        "requirement deckhouse >= 1.70 is not met: the cluster runs 1.69.3"
    );
    assert_eq!(
        check_requirements(Some(&req), Some(&v("1.30")), Some(&v("1.70.1"))),
        Ok(())
    );
    // Deckhouse's constraint syntax, as module requirements are read.
    let either = ModuleReleaseRequirements {
        deckhouse: Some("~1.68 || >= 1.71".into()),
        ..Default::default()
    };
    for (have, ok) in [("1.68.4", true), ("1.69.0", false), ("1.72.0", true)] {
        assert_eq!(
            check_requirements(Some(&either), None, Some(&v(have))).is_ok(),
            ok,
            "{have}"
        );
    }
    assert!(
        check_requirements(
            Some(&ModuleReleaseRequirements {
                deckhouse: Some(">= banana".into()),
                ..Default::default()
            }),
            None,
            Some(&v("1.70.0"))
        )
        .unwrap_err()
        .message
        .starts_with("requirements.deckhouse \">= banana\" cannot be parsed")
    );
    assert_eq!(loose_version("garbage"), None);
}

#[test]
fn objects_stay_in_the_namespace() {
    let k = |what: &str, ns: Option<&str>| (what.to_owned(), ns.map(str::to_owned));
    assert_eq!(out_of_scope(&[k("ConfigMap/x", Some("a"))], "a"), None);
    assert_eq!(
        out_of_scope(
            &[k("ConfigMap/x", Some("a")), k("ClusterRole/r", None)],
            "a"
        )
        .unwrap(),
        "ClusterRole/r is cluster-wide: an Application installs only into its namespace a"
    );
    assert_eq!(
        out_of_scope(&[k("Secret/s", Some("kube-system"))], "a").unwrap(),
        "Secret/s is in namespace kube-system: an Application installs only into its namespace a"
    );
}

#[test]
fn endpoints_from_annotated_ingresses() {
    let objects = vec![
        json!({"kind": "Ingress", "metadata": {"annotations": {ENDPOINT_ANNOTATION: "true"}},
               "spec": {"tls": [{"hosts": ["shop.example.com"]}],
                        "rules": [{"host": "shop.example.com", "http": {"paths": [{"path": "/ui"}]}}]}}),
        json!({"kind": "Ingress", "metadata": {"annotations": {ENDPOINT_ANNOTATION: "Admin panel"}},
               "spec": {"rules": [{"host": "admin.example.com"}]}}),
        json!({"kind": "Ingress", "metadata": {}, "spec": {"rules": [{"host": "hidden"}]}}),
        json!({"kind": "Service", "metadata": {"annotations": {ENDPOINT_ANNOTATION: "true"}}}),
    ];
    assert_eq!(
        urls(&objects),
        vec![
            ApplicationUrl {
                url: "https://shop.example.com/ui".into(),
                description: None
            },
            ApplicationUrl {
                url: "http://admin.example.com/".into(),
                description: Some("Admin panel".into())
            },
        ]
    );
}

#[test]
fn status_as_deckhouse_writes_it() {
    let refused = Outcome::Blocked(Blocked::new(REASON_VERSION_CHANGE_REFUSED, "no"));
    let (conds, summary) = status(&refused, Some("v1.0.0"));
    assert_eq!(
        conds[0],
        (PROCESSED, false, REASON_VERSION_CHANGE_REFUSED, "no".into())
    );
    assert_eq!(summary.state.as_deref(), Some("Degraded"));
    assert_eq!(
        summary.message.as_deref(),
        Some("no (v1.0.0 keeps running)")
    );
    let (_, summary) = status(
        &Outcome::Blocked(Blocked::new(REASON_VERSION_IS_DRAFT, "draft")),
        None,
    );
    assert_eq!(summary.state.as_deref(), Some("Pending"));
    let (_, summary) = status(
        &Outcome::Blocked(Blocked::new(REASON_SETTINGS_INVALID, "bad")),
        None,
    );
    assert_eq!(summary.state.as_deref(), Some("Failed"));
    let (conds, summary) = status(
        &Outcome::Installed {
            waiting: None,
            failed: false,
        },
        Some("v1.0.0"),
    );
    assert!(conds.iter().all(|c| c.1));
    assert_eq!(
        (summary.state.as_deref(), summary.message),
        (Some("Ready"), None)
    );
    let (conds, summary) = status(
        &Outcome::Installed {
            waiting: Some("Deployment a/x: 0 of 1 ready".into()),
            failed: false,
        },
        Some("v1.0.0"),
    );
    assert_eq!(conds[2].0, READY);
    assert!(!conds[2].1);
    assert_eq!(summary.state.as_deref(), Some("Updating"));
}

#[test]
fn used_by_lists() {
    let a = app("v1.0.0");
    let mut b = app("v1.0.0");
    b.metadata.namespace = Some("b".into());
    let list = with_user(&with_user(&[], &b), &a);
    let list = with_user(&list, &a);
    assert_eq!(
        list.iter()
            .map(|u| u.namespace.clone().unwrap())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(without_user(&list, &a).len(), 1);
}

#[test]
fn release_channels() {
    for (channel, tag) in [
        (None, None),
        (Some(""), None),
        (Some("Alpha"), Some("alpha")),
        (Some("Beta"), Some("beta")),
        (Some("EarlyAccess"), Some("early-access")),
        (Some("early-access"), Some("early-access")),
        (Some("Stable"), Some("stable")),
        (Some("RockSolid"), Some("rock-solid")),
        (Some("LTS"), Some("lts")),
        (Some("Lts"), Some("lts")),
    ] {
        assert_eq!(channel_tag(channel), Ok(tag), "{channel:?}");
    }
    let b = channel_tag(Some("Nightly")).unwrap_err();
    assert_eq!(b.reason, REASON_CHANNEL);
    assert_eq!(
        b.message,
        "release channel \"Nightly\" is unknown: Alpha, Beta, EarlyAccess, Stable, RockSolid or LTS"
    );
    let available = ["v1.0.0", "v1.1.0"].map(String::from);
    assert_eq!(channel_pick(&available, "1.1.0").as_deref(), Some("v1.1.0"));
    assert_eq!(
        channel_pick(&available, "v1.0.0").as_deref(),
        Some("v1.0.0")
    );
    assert_eq!(channel_pick(&available, "v1.2.0"), None);
    assert_eq!(channel_pick(&available, "garbage"), None);
}

#[test]
fn a_hook_failing_between_passes_makes_it_degraded() {
    let installed = Outcome::Installed {
        waiting: None,
        failed: false,
    };
    let (mut conds, mut summary) = status(&installed, Some("v1.0.0"));
    with_hook_error(
        &mut conds,
        &mut summary,
        "module hook 'w/hooks/x.py' failed: boom",
    );
    let ready: Vec<_> = conds.iter().filter(|c| c.0 == READY).collect();
    assert_eq!(
        ready,
        [&(
            READY,
            false,
            REASON_HOOK_ERROR,
            "module hook 'w/hooks/x.py' failed: boom".to_owned()
        )]
    );
    assert!(
        conds.iter().filter(|c| c.0 != READY).all(|c| c.1),
        "still installed"
    );
    assert_eq!(summary.state.as_deref(), Some("Degraded"));
    assert_eq!(
        summary.message.as_deref(),
        Some("module hook 'w/hooks/x.py' failed: boom")
    );
}

#[test]
fn maintenance_mode_of_the_spec() {
    let mut a = app("v1.0.0");
    assert_eq!(maintenance(&a), None);
    a.spec.maintenance = Some(api::module_config::Maintenance::NoResourceReconciliation);
    assert_eq!(maintenance(&a), Some("NoResourceReconciliation"));
}

#[test]
fn package_values_are_layered_as_deckhouse_layers_them() {
    let settings_schema = "type: object\nproperties:\n  replicas: {type: integer, default: 1}\n  color: {type: string, default: red}\n";
    let values_schema = "x-extend:\n  schema: config-values.yaml\ntype: object\nproperties:\n  internal:\n    type: object\n    default: {}\n    properties:\n      tier: {type: string, default: gold}\n";
    // (settings, static values.yaml, want)
    let table: &[(Option<Value>, Option<&str>, Value)] = &[
        (
            None,
            None,
            json!({"replicas": 1, "color": "red", "internal": {"tier": "gold"}}),
        ),
        // Static values win over the settings schema's defaults, settings over both.
        (
            None,
            Some("color: blue\n"),
            json!({"replicas": 1, "color": "blue", "internal": {"tier": "gold"}}),
        ),
        (
            Some(json!({"color": "green"})),
            Some("echoServer: {color: blue, internal: {tier: silver}}\n"),
            json!({"replicas": 1, "color": "green", "internal": {"tier": "silver"}}),
        ),
    ];
    for (settings, static_values, want) in table {
        assert_eq!(
            package_values(
                "echo-server",
                Some(settings_schema),
                settings.as_ref(),
                *static_values,
                Some(values_schema),
            )
            .as_ref(),
            Ok(want),
            "{settings:?} {static_values:?}"
        );
    }
    // No files at all: the settings as they are (a package without a schema takes none).
    assert_eq!(
        package_values("echo", None, None, None, None),
        Ok(json!({}))
    );
    let b = package_values("echo", None, None, Some("[not: a map"), None).unwrap_err();
    assert_eq!(b.reason, REASON_INSTALL_FAILED);
    assert!(
        b.message.starts_with("the values files of package echo: "),
        "{}",
        b.message
    );
}
