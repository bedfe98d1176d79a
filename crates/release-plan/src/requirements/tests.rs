use super::*;

fn v(text: &str) -> ReleaseVersion {
    ReleaseVersion::parse(text).unwrap()
}

/// Masterminds' answers, including the error text a user sees in the release status.
#[test]
fn constraints_read_and_explain_like_masterminds() {
    let cases: &[(&str, &str, Result<(), &str>)] = &[
        (">= 1.61", "1.61.0", Ok(())),
        (">= 1.61", "1.60.9", Err("1.60.9 is less than 1.61")),
        (">=1.61", "v1.60.0", Err("1.60.0 is less than 1.61")),
        ("=> 1.61", "1.60.0", Err("1.60.0 is less than 1.61")),
        ("< 1.70", "1.69.9", Ok(())),
        (
            "< 1.70",
            "1.70.0",
            Err("1.70.0 is greater than or equal to 1.70"),
        ),
        // Deckhouse's own documented example.
        (
            "> v1.64.0",
            "1.0.0",
            Err("1.0.0 is less than or equal to v1.64.0"),
        ),
        (
            "> 1.64",
            "1.64.9",
            Err("1.64.9 is less than or equal to 1.64"),
        ),
        ("> 1.64", "1.65.0", Ok(())),
        ("<= 1.68", "1.68.9", Ok(())),
        ("<= 1.68", "1.69.0", Err("1.69.0 is greater than 1.68")),
        ("=< 1.68.1", "1.68.2", Err("1.68.2 is greater than 1.68.1")),
        (
            ">= 1.60, < 1.70",
            "1.70.1",
            Err("1.70.1 is greater than or equal to 1.70"),
        ),
        (">= 1.60 < 1.70", "1.65.0", Ok(())),
        (">= 1.60 < 1.70 || >= 2.0", "2.1.0", Ok(())),
        (
            ">= 1.60 < 1.70 || >= 2.0",
            "1.75.0",
            Err("1.75.0 is greater than or equal to 1.70"),
        ),
        ("1.2 - 1.4", "1.4.7", Ok(())),
        ("1.2 - 1.4", "1.5.0", Err("1.5.0 is greater than 1.4")),
        ("1.2 - 1.4", "1.1.0", Err("1.1.0 is less than 1.2")),
        ("~1.68.0", "1.68.7", Ok(())),
        (
            "~1.68.0",
            "1.69.0",
            Err("1.69.0 does not have same major and minor version as 1.68.0"),
        ),
        ("~ 1.68.2", "1.68.1", Err("1.68.1 is less than 1.68.2")),
        ("^1.2", "1.9.0", Ok(())),
        (
            "^1.2",
            "2.0.0",
            Err("2.0.0 does not have same major version as 1.2"),
        ),
        (
            "^0.3.1",
            "0.4.0",
            Err("0.4.0 does not have same minor version as 0.3.1"),
        ),
        ("^0.0.3", "0.0.4", Err("0.0.4 does not equal 0.0.3")),
        ("1.68", "1.68.3", Ok(())),
        ("1.68.x", "1.68.3", Ok(())),
        (
            "1.68",
            "1.69.0",
            Err("1.69.0 does not have same major and minor version as 1.68"),
        ),
        ("1.68.0", "1.68.0", Ok(())),
        ("= 1.68.0", "1.68.3", Err("1.68.3 is not equal to 1.68.0")),
        ("!= 1.68.0", "1.68.0", Err("1.68.0 is equal to 1.68.0")),
        ("!= 1.68.0", "1.68.1", Ok(())),
        ("*", "1.68.1", Ok(())),
        (
            ">= 1.68",
            "1.68.0-rc.1",
            Err(
                "1.68.0-rc.1 is a prerelease version and the constraint is only looking for release versions",
            ),
        ),
    ];
    for (constraint, version, want) in cases {
        let got = Constraint::parse(constraint)
            .unwrap_or_else(|e| panic!("{constraint}: {e}"))
            .check(&v(version));
        assert_eq!(
            got,
            want.map_err(str::to_owned),
            "{constraint} against {version}"
        );
    }
}

#[test]
fn unreadable_constraints_are_refused_with_masterminds_words() {
    for text in [
        "",
        "   ",
        ">= banana",
        "1.2 -",
        ">=",
        "1.2.3.4",
        "|| >= 1.0",
        "1..2",
    ] {
        let err = Constraint::parse(text).expect_err(text);
        assert_eq!(err.to_string(), format!("improper constraint: {text}"));
    }
}

#[test]
fn deckhouse_version_check_names_the_first_module_that_refuses() {
    let modules = vec![
        ModuleConstraint::new("zeta", "< 2.0"),
        ModuleConstraint::new("echo", ">= 1.70"),
        ModuleConstraint::new("broken", "not a constraint"),
    ];
    assert_eq!(
        deckhouse_version(&v("v1.69.0"), &modules),
        Err("requirements of the 'echo' module are not satisfied: 1.69.0 deckhouse version is not suitable: 1.69.0 is less than 1.70".into())
    );
    assert_eq!(deckhouse_version(&v("v1.70.0"), &modules), Ok(()));
    assert_eq!(
        deckhouse_version(&v("v2.0.0"), &modules),
        Err("requirements of the 'zeta' module are not satisfied: 2.0.0 deckhouse version is not suitable: 2.0.0 is greater than or equal to 2.0".into())
    );
    assert_eq!(deckhouse_version(&v("v1.0.0"), &[]), Ok(()));
}

#[test]
fn auto_kubernetes_version_applies_only_to_automatic_clusters() {
    let modules = vec![ModuleConstraint::new("legacy-ingress", "< 1.31")];
    type Case<'a> = (Option<&'a str>, Option<&'a str>, Result<(), &'a str>);
    let cases: &[Case<'_>] = &[
        (Some("Automatic"), Some("1.30"), Ok(())),
        (
            Some("Automatic"),
            Some("1.31"),
            Err(
                "requirements of the 'legacy-ingress' module are not satisfied: 1.31 kubernetes version is not suitable: 1.31.0 is greater than or equal to 1.31",
            ),
        ),
        (Some("1.29"), Some("1.31"), Ok(())),
        (None, Some("1.31"), Ok(())),
        (Some("Automatic"), None, Ok(())),
        (Some("Automatic"), Some(""), Ok(())),
        (
            Some("Automatic"),
            Some("soon"),
            Err(
                "requirements cannot be checked: kubernetes version is invalid: Invalid Semantic Version",
            ),
        ),
    ];
    for (cluster, auto, want) in cases {
        assert_eq!(
            auto_kubernetes_version(*cluster, *auto, &modules),
            want.map_err(str::to_owned),
            "cluster {cluster:?}, autoK8sVersion {auto:?}"
        );
    }
}

/// Deckhouse's golden cases of the migrated-modules check.
#[test]
fn migrated_modules_must_be_offered_by_a_source_without_error() {
    let requirements = |list: &str| -> BTreeMap<String, String> {
        [(MIGRATED_MODULES.to_owned(), list.to_owned())].into()
    };
    let source = |module: &str, has_error: bool| SourceModule {
        source: "deckhouse".into(),
        module: module.into(),
        has_error,
    };
    let sources = vec![
        source("echo", false),
        source("broken", true),
        SourceModule {
            source: "other".into(),
            ..source("twice", false)
        },
        source("twice", true),
    ];
    let disabled: BTreeSet<String> = ["off".to_owned()].into();
    let cases: &[(Option<&str>, Result<(), &str>)] = &[
        (None, Ok(())),
        (Some(""), Ok(())),
        (Some(" , ,"), Ok(())),
        (Some("echo"), Ok(())),
        (Some("echo, twice"), Ok(())),
        (Some("echo,missing"), Err("missing")),
        (Some("broken"), Err("broken")),
        (Some("off"), Ok(())),
        (Some(" off , echo "), Ok(())),
    ];
    for (list, want) in cases {
        let reqs = list.map(requirements).unwrap_or_default();
        assert_eq!(
            migrated_modules(&reqs, &disabled, &sources),
            want.map_err(str::to_owned),
            "{list:?}"
        );
    }
    assert_eq!(
        crate::deploy::migrated_module_not_found_message("missing"),
        "migrated module 'missing' not found in any ModuleSource registry"
    );
}

#[test]
fn requirement_keys_are_classified_as_deckhouse_registers_them() {
    let registered: BTreeSet<String> = [K8S.to_owned()].into();
    assert_eq!(classify_key("k8s", &registered), RequirementKey::Registered);
    assert_eq!(
        classify_key("deckhouse", &registered),
        RequirementKey::Dedicated
    );
    assert_eq!(
        classify_key("kubernetes", &registered),
        RequirementKey::Dedicated
    );
    assert_eq!(
        classify_key(MIGRATED_MODULES, &registered),
        RequirementKey::Dedicated
    );
    assert_eq!(
        classify_key("ingressNginx", &registered),
        RequirementKey::Foreign
    );
    assert_eq!(
        classify_key(AUTO_K8S_VERSION, &registered),
        RequirementKey::Foreign
    );
    assert_eq!(classify_key("madeUp", &registered), RequirementKey::Unknown);
    assert_eq!(
        not_registered_message("madeUp"),
        "requirement with a key: madeUp: Not registered"
    );
}

#[test]
fn minimal_kubernetes_version_uses_control_plane_manager_words() {
    assert_eq!(minimal_kubernetes("1.27", Some("1.29.3")), Ok(()));
    assert_eq!(minimal_kubernetes("1.29", Some("1.29.0")), Ok(()));
    assert_eq!(
        minimal_kubernetes("1.30", Some("1.29.3")),
        Err("current kubernetes version is lower than required".into())
    );
    assert_eq!(
        minimal_kubernetes("1.30", None),
        Err("\nminUsedControlPlaneKubernetesVersion\n is not set".into())
    );
    assert_eq!(
        minimal_kubernetes("soon", Some("1.29")),
        Err("Invalid Semantic Version".into())
    );
    assert_eq!(
        minimal_kubernetes("1.29", Some("v?")),
        Err("Invalid Semantic Version".into())
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn version() -> impl Strategy<Value = (u64, u64, u64)> {
        (0u64..4, 0u64..4, 0u64..4)
    }

    proptest! {
        /// On fully written versions every comparator means what it says, and a refusal
        /// always quotes the version checked and the bound as written.
        #[test]
        fn comparators_on_full_versions((a, b, c) in version(), (x, y, z) in version(), op in 0usize..6) {
            let (symbol, holds): (&str, fn(&semver::Version, &semver::Version) -> bool) = [
                ("=", (|v: &semver::Version, b: &semver::Version| v == b) as fn(&_, &_) -> bool),
                ("!=", |v, b| v != b),
                (">", |v, b| v > b),
                ("<", |v, b| v < b),
                (">=", |v, b| v >= b),
                ("<=", |v, b| v <= b),
            ][op];
            let bound = format!("{x}.{y}.{z}");
            let checked = ReleaseVersion::new(a, b, c);
            let result = Constraint::parse(&format!("{symbol} {bound}")).unwrap().check(&checked);
            let expected = holds(checked.semver(), &semver::Version::new(x, y, z));
            prop_assert_eq!(result.is_ok(), expected);
            if let Err(message) = result {
                let prefix = format!("{a}.{b}.{c} ");
                let suffix = format!(" {bound}");
                prop_assert!(message.starts_with(&prefix));
                prop_assert!(message.ends_with(&suffix));
            }
        }

        /// `a || b` holds exactly when one of them does.
        #[test]
        fn alternatives_are_ored((a, b, c) in version(), low in version(), high in version()) {
            let v = ReleaseVersion::new(a, b, c);
            let left = format!("< {}.{}.{}", low.0, low.1, low.2);
            let right = format!(">= {}.{}.{}", high.0, high.1, high.2);
            let either = Constraint::parse(&format!("{left} || {right}")).unwrap().check(&v).is_ok();
            let one = Constraint::parse(&left).unwrap().check(&v).is_ok()
                || Constraint::parse(&right).unwrap().check(&v).is_ok();
            prop_assert_eq!(either, one);
        }
    }
}

#[test]
fn migrated_modules_offered_but_not_deployed_are_not_downloaded() {
    let requirements = |list: &str| -> BTreeMap<String, String> {
        [(MIGRATED_MODULES.to_owned(), list.to_owned())].into()
    };
    let source = |module: &str, has_error: bool| SourceModule {
        source: "deckhouse".into(),
        module: module.into(),
        has_error,
    };
    let sources = vec![
        source("echo", false),
        source("fresh", false),
        source("broken", true),
        source("off", false),
    ];
    let disabled: BTreeSet<String> = ["off".to_owned()].into();
    let deployed: BTreeSet<String> = ["echo".to_owned()].into();
    let cases: &[(Option<&str>, &[&str])] = &[
        (None, &[]),
        (Some("echo"), &[]),
        (Some("fresh, echo"), &["fresh"]),
        (Some("missing,broken"), &[]),
        (Some("off"), &[]),
        (Some("fresh,off,missing"), &["fresh"]),
    ];
    for (list, want) in cases {
        let reqs = list.map(requirements).unwrap_or_default();
        assert_eq!(
            migrated_modules_not_downloaded(&reqs, &disabled, &sources, &deployed),
            want.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
            "{list:?}"
        );
    }
}
