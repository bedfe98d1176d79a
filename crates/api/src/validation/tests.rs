//! One test per refusal and warning message, asserting the exact text a user sees.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::*;

fn user(name: &str) -> UserInfo {
    UserInfo {
        username: name.into(),
        groups: vec!["system:authenticated".into()],
    }
}

fn req<'a>(
    kind: &'a str,
    operation: Operation,
    user: Option<&'a UserInfo>,
    old: Option<&'a Value>,
    new: Option<&'a Value>,
) -> Request<'a> {
    Request {
        kind,
        operation,
        user,
        old,
        new,
    }
}

fn denied(result: Result<Warnings, Denial>) -> Denial {
    result.expect_err("the request must be refused")
}

// --- ObjectKeeper -------------------------------------------------------------------------

fn keeper(spec: Value) -> Value {
    json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ObjectKeeper", "metadata": {"name": "k"}, "spec": spec})
}

#[test]
fn object_keeper_follow_modes_need_a_reference() {
    let d = denied(validate(
        "ObjectKeeper",
        None,
        &keeper(json!({"mode": "FollowObject"})),
    ));
    assert_eq!(
        d.message(),
        "followObjectRef is required when mode is FollowObject or FollowObjectWithTTL"
    );
    assert_eq!(d.code(), 422);
    assert_eq!(
        d.status_message("ObjectKeeper", "objectkeepers", "deckhouse.io", "k"),
        "ObjectKeeper.deckhouse.io \"k\" is invalid: spec: Invalid value: \"object\": followObjectRef is required when mode is FollowObject or FollowObjectWithTTL"
    );
}

#[test]
fn object_keeper_ttl_modes_need_a_ttl() {
    let d = denied(validate(
        "ObjectKeeper",
        None,
        &keeper(json!({"mode": "TTL"})),
    ));
    assert_eq!(
        d.message(),
        "ttl is required when mode is TTL or FollowObjectWithTTL"
    );
}

#[test]
fn object_keeper_ttl_mode_forbids_a_reference() {
    let r =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "n", "name": "c", "uid": "u"});
    let d = denied(validate(
        "ObjectKeeper",
        None,
        &keeper(json!({"mode": "TTL", "ttl": "1h", "followObjectRef": r})),
    ));
    assert_eq!(
        d.message(),
        "followObjectRef must not be set when mode is TTL"
    );
}

#[test]
fn object_keeper_follow_mode_forbids_a_ttl() {
    let r =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "n", "name": "c", "uid": "u"});
    let d = denied(validate(
        "ObjectKeeper",
        None,
        &keeper(json!({"mode": "FollowObject", "ttl": "1h", "followObjectRef": r})),
    ));
    assert_eq!(d.message(), "ttl must not be set when mode is FollowObject");
}

#[test]
fn object_keeper_reports_every_failed_rule_like_the_api_server() {
    let d = denied(validate(
        "ObjectKeeper",
        None,
        &keeper(json!({"mode": "FollowObjectWithTTL"})),
    ));
    assert_eq!(d.causes.len(), 2);
    assert_eq!(
        d.status_message("ObjectKeeper", "objectkeepers", "deckhouse.io", "k"),
        "ObjectKeeper.deckhouse.io \"k\" is invalid: [spec: Invalid value: \"object\": followObjectRef is required when mode is FollowObject or FollowObjectWithTTL, spec: Invalid value: \"object\": ttl is required when mode is TTL or FollowObjectWithTTL]"
    );
    assert_eq!(
        validate(
            "ObjectKeeper",
            None,
            &keeper(json!({"mode": "TTL", "ttl": "24h"}))
        ),
        Ok(vec![])
    );
}

// --- update windows -----------------------------------------------------------------------

fn policy(windows: Value) -> Value {
    json!({"apiVersion": "deckhouse.io/v1alpha2", "kind": "ModuleUpdatePolicy", "metadata": {"name": "p"},
           "spec": {"update": {"mode": "Auto", "windows": windows}}})
}

#[test]
fn update_policy_windows_must_start_before_they_end() {
    let d = denied(validate(
        "ModuleUpdatePolicy",
        None,
        &policy(json!([{"from": "8:00", "to": "10:00"}, {"from": "19:30", "to": "18:00"}])),
    ));
    assert_eq!(
        d.message(),
        "Invalid update windows. Start time (windows.from) should be less than the end time of the update window (windows.to)"
    );
    assert_eq!(d.code(), 403);
    assert_eq!(
        d.status_message(
            "ModuleUpdatePolicy",
            "moduleupdatepolicies",
            "deckhouse.io",
            "p"
        ),
        "moduleupdatepolicies.deckhouse.io \"p\" is forbidden: ValidatingAdmissionPolicy 'mup-update-windows.deckhouse.io' with binding 'mup-update-windows.deckhouse.io' denied request: Invalid update windows. Start time (windows.from) should be less than the end time of the update window (windows.to)"
    );
    let equal = policy(json!([{"from": "10:00", "to": "10:00"}]));
    assert!(validate("ModuleUpdatePolicy", Some(&equal), &equal).is_err());
    assert_eq!(
        validate(
            "ModuleUpdatePolicy",
            None,
            &policy(json!([{"from": "9:00", "to": "18:30"}]))
        ),
        Ok(vec![])
    );
    assert_eq!(
        validate("ModuleUpdatePolicy", None, &policy(json!([]))),
        Ok(vec![])
    );
}

#[test]
fn update_policy_window_times_must_match_the_pattern() {
    let d = denied(validate(
        "ModuleUpdatePolicy",
        None,
        &policy(json!([{"from": "24:00", "to": "25:00"}])),
    ));
    assert_eq!(d.causes.len(), 2);
    assert_eq!(
        d.status_message(
            "ModuleUpdatePolicy",
            "moduleupdatepolicies",
            "deckhouse.io",
            "p"
        ),
        "ModuleUpdatePolicy.deckhouse.io \"p\" is invalid: [spec.update.windows[0].from: Invalid value: \"24:00\": spec.update.windows[0].from in body should match '^(?:\\d|[01]\\d|2[0-3]):[0-5]\\d$', spec.update.windows[0].to: Invalid value: \"25:00\": spec.update.windows[0].to in body should match '^(?:\\d|[01]\\d|2[0-3]):[0-5]\\d$']"
    );
}

#[test]
fn deckhouse_module_config_windows_must_start_before_they_end() {
    let mc = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig", "metadata": {"name": "deckhouse"},
        "spec": {"version": 1, "settings": {"releaseChannel": "Stable", "update": {"mode": "Auto", "windows": [{"from": "19:30", "to": "18:00", "days": ["Tue"]}]}}}});
    let d = denied(validate("ModuleConfig", None, &mc));
    assert_eq!(
        d.message(),
        "Invalid update windows. Start time (windows.from) should be less than the end time of the update window (windows.to)"
    );
    assert_eq!(
        d.by,
        DeniedBy::Policy {
            policy: "mc-update-windows.deckhouse.io",
            binding: "mc-update-windows.deckhouse.io"
        }
    );
    // Other module configs are not checked.
    let mut other = mc.clone();
    other["metadata"]["name"] = "prometheus".into();
    assert_eq!(validate("ModuleConfig", None, &other), Ok(vec![]));
}

#[test]
fn a_policy_in_use_cannot_be_deleted() {
    let p = policy(json!([]));
    let context = Context {
        module_config_update_policies: Some(BTreeMap::from([(
            "echo".to_string(),
            "p".to_string(),
        )])),
        ..Default::default()
    };
    let d = denied(validate_delete("ModuleUpdatePolicy", &p, &context));
    assert_eq!(
        d.message(),
        "the 'p' update policy is used by the 'echo' module config"
    );
    assert_eq!(
        validate_delete("ModuleUpdatePolicy", &p, &Context::default()),
        Ok(vec![])
    );
}

// --- registry -----------------------------------------------------------------------------

fn rcfg(spec: Value) -> Value {
    json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "RegistryConfig", "metadata": {"name": "registry"}, "spec": spec})
}

#[test]
fn a_managed_registry_config_needs_a_source_of_images() {
    let d = denied(validate(
        "RegistryConfig",
        None,
        &rcfg(json!({"mode": "Managed", "storage": {"source": {"expectedDigests": 1}}})),
    ));
    assert_eq!(
        d.message(),
        "A Managed registry needs a source of images: set primary.upstream, or enable storage.cache for an air-gapped cluster."
    );
}

#[test]
fn an_air_gapped_registry_config_needs_a_storage_source() {
    let d = denied(validate(
        "RegistryConfig",
        None,
        &rcfg(json!({"mode": "Managed", "storage": {"cache": true}})),
    ));
    assert_eq!(
        d.message(),
        "storage.source is required when primary.upstream is not set: in air-gap there is no upstream to fall back on, so cache completeness must be decidable."
    );
    assert_eq!(
        validate("RegistryConfig", None, &rcfg(json!({"mode": "Unmanaged"}))),
        Ok(vec![])
    );
    assert_eq!(
        validate(
            "RegistryConfig",
            None,
            &rcfg(json!({"primary": {"upstream": {"host": "r"}}}))
        ),
        Ok(vec![])
    );
    // The CRD defaults mode to Managed, so an empty spec fails both rules.
    assert_eq!(
        denied(validate("RegistryConfig", None, &rcfg(json!({}))))
            .causes
            .len(),
        2
    );
}

fn registry_mc(settings: Value) -> Value {
    json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig", "metadata": {"name": "registry"},
           "spec": {"enabled": true, "version": 1, "settings": settings}})
}

fn registry_denial(settings: Value) -> String {
    denied(validate("ModuleConfig", None, &registry_mc(settings))).message()
}

#[test]
fn registry_settings_managed_needs_a_source_of_images() {
    assert_eq!(
        registry_denial(json!({"mode": "Managed", "storage": {"source": {"bundleRef": "b"}}})),
        "spec.settings are not valid (version 1): registry: a Managed registry needs a source of images: set 'primary.upstream', or enable 'storage.cache' for an air-gapped cluster."
    );
}

#[test]
fn registry_settings_air_gap_needs_a_storage_source() {
    assert_eq!(
        registry_denial(json!({"mode": "Managed", "storage": {"cache": true}})),
        "spec.settings are not valid (version 1): registry: 'storage.source' is required when 'primary.upstream' is not set: in air-gap there is no upstream to fall back on."
    );
}

#[test]
fn registry_settings_need_managed_mode() {
    assert_eq!(
        registry_denial(json!({"primary": {"upstream": {"host": "registry.example.com"}}})),
        "spec.settings are not valid (version 1): registry: set 'mode: Managed' to apply these settings; with the default 'Unmanaged' the module manages nothing and they have no effect."
    );
}

#[test]
fn registry_settings_license_excludes_username_and_password() {
    assert_eq!(
        registry_denial(
            json!({"mode": "Managed", "primary": {"upstream": {"host": "r", "auth": {"license": "x", "username": "u", "password": "p"}}}})
        ),
        "spec.settings are not valid (version 1): 'license' and 'username'/'password' are mutually exclusive."
    );
}

#[test]
fn registry_settings_username_needs_a_password() {
    assert_eq!(
        registry_denial(
            json!({"mode": "Managed", "primary": {"upstream": {"host": "r", "auth": {"username": "u"}}}})
        ),
        "spec.settings are not valid (version 1): 'password' is required when 'username' is provided."
    );
}

#[test]
fn registry_settings_password_needs_a_username() {
    assert_eq!(
        registry_denial(
            json!({"mode": "Managed", "primary": {"upstream": {"host": "r", "mirrors": [{"host": "m", "auth": {"password": "p"}}]}}})
        ),
        "spec.settings are not valid (version 1): 'username' is required when 'password' is provided."
    );
}

#[test]
fn registry_settings_accept_the_three_layouts_and_skip_a_disabled_module() {
    for ok in [
        json!({}),
        json!({"mode": "Unmanaged"}),
        json!({"mode": "Managed", "primary": {"upstream": {"host": "r", "auth": {"license": "x"}}}}),
        json!({"mode": "Managed", "primary": {"upstream": {"host": "r"}}, "storage": {"cache": true}}),
        json!({"mode": "Managed", "storage": {"cache": true, "source": {"expectedDigests": 459}}}),
    ] {
        assert_eq!(
            validate("ModuleConfig", None, &registry_mc(ok.clone())),
            Ok(vec![]),
            "{ok}"
        );
    }
    let mut disabled = registry_mc(json!({"primary": {}}));
    disabled["spec"]["enabled"] = false.into();
    assert_eq!(validate("ModuleConfig", None, &disabled), Ok(vec![]));
    assert_eq!(
        registry_settings_errors(&json!({"mode": "Managed"})).len(),
        2
    );
}

#[test]
fn registry_settings_fields_are_checked_when_written() {
    // Before, a bad size was admitted and surfaced only as a RegistryConfig error later.
    assert_eq!(
        registry_denial(
            json!({"mode": "Managed", "primary": {"upstream": {"host": "r"}}, "storage": {"cache": true, "size": "50GB"}})
        ),
        "spec.settings are not valid (version 1): storage.size in body should match '^[0-9]+(\\.[0-9]+)?(E|P|T|G|M|k|Ei|Pi|Ti|Gi|Mi|Ki)?$'"
    );
    assert_eq!(
        registry_denial(
            json!({"mode": "Managed", "primary": {"upstream": {"host": "r"}}, "https": {"mode": "Always"}, "whitelistSourceRanges": ["any"]})
        ),
        "spec.settings are not valid (version 1): https.mode in body should be one of [Disabled CertManager CustomCertificate OnlyInURI]; whitelistSourceRanges.0 in body should match '^[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}/[0-9]{1,2}$'"
    );
}

#[test]
fn registry_gc_schedule_is_read_by_the_cron_parser_when_written() {
    // Five fields, so the schema's pattern lets it through; a replica could never run it.
    let denial = registry_denial(
        json!({"mode": "Managed", "primary": {"upstream": {"host": "r"}},
        "storage": {"cache": true, "garbageCollection": {"schedule": "61 3 * * *"}}}),
    );
    assert!(
        denial.starts_with(
            "spec.settings are not valid (version 1): storage.garbageCollection.schedule in body must be of type cron: \"61 3 * * *\" ("
        ),
        "{denial}"
    );
}

// --- ModuleConfig webhook -----------------------------------------------------------------

fn mc(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig", "metadata": {"name": name}, "spec": spec})
}

fn module_config_denial(
    context: &Context,
    operation: Operation,
    old: Option<&Value>,
    new: Option<&Value>,
) -> Denial {
    denied(validate_request(
        &req("ModuleConfig", operation, None, old, new),
        context,
    ))
}

fn facts(f: impl FnOnce(&mut ModuleFacts)) -> ModuleFacts {
    let mut facts = ModuleFacts {
        available_sources: Some(vec!["deckhouse".into()]),
        ..Default::default()
    };
    f(&mut facts);
    facts
}

fn context_with(name: &str, facts: ModuleFacts) -> Context {
    Context {
        modules: BTreeMap::from([(name.to_string(), facts)]),
        modules_complete: true,
        ..Default::default()
    }
}

#[test]
fn settings_need_a_version() {
    let d = denied(validate(
        "ModuleConfig",
        None,
        &mc("echo", json!({"settings": {"a": 1}})),
    ));
    assert_eq!(
        d.message(),
        "spec.version is required when spec.settings are specified"
    );
    assert_eq!(
        d.status_message("ModuleConfig", "moduleconfigs", "deckhouse.io", "echo"),
        "admission webhook \"module-configs.deckhouse-webhook.deckhouse.io\" denied the request: spec.version is required when spec.settings are specified"
    );
}

#[test]
fn a_version_without_settings_only_warns() {
    assert_eq!(
        validate("ModuleConfig", None, &mc("echo", json!({"version": 1}))),
        Ok(vec!["spec.version has no effect without spec.settings, defaults from the latest version of settings schema will be applied".to_string()])
    );
}

#[test]
fn an_unknown_version_with_settings_is_refused() {
    let context = context_with(
        "echo",
        facts(|f| {
            f.settings_versions = Some(SettingsVersions {
                latest: 3,
                known: BTreeSet::from([1, 2, 3]),
            });
        }),
    );
    let new = mc("echo", json!({"version": 5, "settings": {}}));
    let d = module_config_denial(&context, Operation::Create, None, Some(&new));
    assert_eq!(
        d.message(),
        "spec.version=5 is unsupported. Use latest version 3, or one of previous versions: 1, 2"
    );
    // Without settings it is only a warning.
    let bare = mc("echo", json!({"version": 5}));
    assert_eq!(
        validate_request(&req("ModuleConfig", Operation::Create, None, None, Some(&bare)), &context),
        Ok(vec!["spec.version=5 is unsupported. Use latest version 3, or one of previous versions: 1, 2".to_string()])
    );
}

#[test]
fn an_obsolete_version_warns() {
    let context = context_with(
        "echo",
        facts(|f| {
            f.settings_versions = Some(SettingsVersions {
                latest: 2,
                known: BTreeSet::from([1, 2]),
            });
        }),
    );
    let new = mc("echo", json!({"version": 1, "settings": {}}));
    assert_eq!(
        validate_request(
            &req("ModuleConfig", Operation::Create, None, None, Some(&new)),
            &context
        ),
        Ok(vec![
            "spec.version=1 is obsolete. Please migrate spec.settings to the latest version 2"
                .to_string()
        ])
    );
}

#[test]
fn embedded_is_a_forbidden_source() {
    let d = denied(validate(
        "ModuleConfig",
        None,
        &mc("echo", json!({"source": "Embedded"})),
    ));
    assert_eq!(d.message(), "'Embedded' is a forbidden source");
}

#[test]
fn disabling_a_guarded_module_needs_the_annotation() {
    let context = context_with(
        "cni-cilium",
        facts(|f| {
            f.enabled = true;
            f.enabled_by_default = true;
            f.disable_confirmation = Some("Disabling the CNI breaks the cluster network".into());
        }),
    );
    let old = mc("cni-cilium", json!({"enabled": true}));
    let new = mc("cni-cilium", json!({"enabled": false}));
    let expected = "Disabling the CNI breaks the cluster network. Please annotate ModuleConfig with `modules.deckhouse.io/allow-disabling=true` if you're sure that you want to disable the module.";
    assert_eq!(
        module_config_denial(&context, Operation::Update, Some(&old), Some(&new)).message(),
        expected
    );
    assert_eq!(
        module_config_denial(&context, Operation::Create, None, Some(&new)).message(),
        expected
    );
    assert_eq!(
        module_config_denial(&context, Operation::Delete, Some(&old), None).message(),
        expected
    );
    let mut annotated = new.clone();
    annotated["metadata"]["annotations"] = json!({"modules.deckhouse.io/allow-disabling": "true"});
    assert_eq!(
        validate_request(
            &req(
                "ModuleConfig",
                Operation::Update,
                None,
                Some(&old),
                Some(&annotated)
            ),
            &context
        ),
        Ok(vec![])
    );
}

#[test]
fn experimental_modules_need_permission() {
    let mut context = context_with("echo", facts(|f| f.experimental = true));
    let new = mc("echo", json!({"enabled": true}));
    assert_eq!(
        module_config_denial(&context, Operation::Create, None, Some(&new)).message(),
        "the 'echo' module is experimental; to allow it, in the 'deckhouse' ModuleConfig either set spec.settings.allowExperimentalModules: true (allows all experimental modules) or add 'echo' to spec.settings.allowedExperimentalModules"
    );
    context.allowed_experimental_modules.insert("echo".into());
    assert_eq!(
        validate_request(
            &req("ModuleConfig", Operation::Create, None, None, Some(&new)),
            &context
        ),
        Ok(vec![])
    );
}

#[test]
fn enabling_needs_the_required_modules() {
    let context = context_with(
        "echo",
        facts(|f| f.disabled_parents = vec!["b".into(), "a".into()]),
    );
    let new = mc("echo", json!({"enabled": true}));
    assert_eq!(
        module_config_denial(&context, Operation::Create, None, Some(&new)).message(),
        "the 'echo' module depends on disabled module(s): a, b"
    );
}

#[test]
fn an_unknown_module_is_refused_on_create_and_warned_about_otherwise() {
    let context = Context {
        modules_complete: true,
        ..Default::default()
    };
    let new = mc("nope", json!({"enabled": true}));
    assert_eq!(
        module_config_denial(&context, Operation::Create, None, Some(&new)).message(),
        "the 'nope' module not found"
    );
    let old = mc("nope", json!({"enabled": true}));
    assert_eq!(
        validate_request(
            &req(
                "ModuleConfig",
                Operation::Update,
                None,
                Some(&old),
                Some(&new)
            ),
            &context
        ),
        Ok(vec!["the 'nope' module not found".to_string()])
    );
}

#[test]
fn the_source_must_offer_the_module() {
    let context = context_with(
        "echo",
        facts(|f| f.available_sources = Some(vec!["deckhouse".into(), "example".into()])),
    );
    let new = mc("echo", json!({"source": "other"}));
    assert_eq!(
        module_config_denial(&context, Operation::Create, None, Some(&new)).message(),
        "the 'other' module source is an unavailable source for the 'echo' module, available sources: [deckhouse example]"
    );
}

#[test]
fn several_sources_without_a_choice_warn() {
    let context = context_with(
        "echo",
        facts(|f| f.available_sources = Some(vec!["deckhouse".into(), "example".into()])),
    );
    let new = mc("echo", json!({"enabled": true}));
    assert_eq!(
        validate_request(&req("ModuleConfig", Operation::Create, None, None, Some(&new)), &context),
        Ok(vec!["module 'echo' is enabled but didn\u{2019}t run because multiple sources were found (deckhouse, example), please specify a source in ModuleConfig resource ".to_string()])
    );
}

#[test]
fn the_update_policy_must_exist() {
    let context = Context {
        update_policies: Some(BTreeSet::from(["stable".to_string()])),
        ..Default::default()
    };
    let new = mc("echo", json!({"updatePolicy": "missing"}));
    assert_eq!(
        module_config_denial(&context, Operation::Create, None, Some(&new)).message(),
        "the 'missing' module policy does not exist"
    );
}

#[test]
fn only_one_module_of_an_exclusive_group_runs() {
    let mut context = context_with(
        "cni-cilium",
        facts(|f| f.exclusive_group = Some("cni".into())),
    );
    context.modules.insert(
        "cni-flannel".into(),
        facts(|f| {
            f.enabled = true;
            f.exclusive_group = Some("cni".into());
        }),
    );
    let new = mc("cni-cilium", json!({"enabled": true}));
    assert_eq!(
        module_config_denial(&context, Operation::Create, None, Some(&new)).message(),
        "can't enable module \"cni-cilium\" because different module \"cni-flannel\" with same exclusiveGroup cni enabled"
    );
}

#[test]
fn a_module_config_with_a_pull_override_cannot_be_deleted() {
    let context = context_with("echo", facts(|f| f.pull_override = true));
    let old = mc("echo", json!({"enabled": false}));
    assert_eq!(
        module_config_denial(&context, Operation::Delete, Some(&old), None).message(),
        "delete the ModulePullOverride before deleting the module config"
    );
}

#[test]
fn a_fractional_version_is_refused_clearly() {
    let d = denied(validate(
        "ModuleConfig",
        None,
        &mc("echo", json!({"version": 1.5, "settings": {}})),
    ));
    assert_eq!(d.message(), "spec.version must be a whole number, got 1.5");
}

// --- users and policies -------------------------------------------------------------------

#[test]
fn only_deckhouse_changes_modules() {
    let module = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "Module", "metadata": {"name": "echo"}, "properties": {}});
    let alice = user("alice");
    let d = denied(validate_request(
        &req(
            "Module",
            Operation::Update,
            Some(&alice),
            Some(&module),
            Some(&module),
        ),
        &Context::default(),
    ));
    assert_eq!(d.message(), "manual Module change is forbidden");
    let deckhouse = user("system:serviceaccount:d8-system:deckhouse");
    assert_eq!(
        validate_request(
            &req(
                "Module",
                Operation::Update,
                Some(&deckhouse),
                Some(&module),
                Some(&module)
            ),
            &Context::default()
        ),
        Ok(vec![])
    );
}

#[test]
fn users_cannot_change_the_update_policy_label() {
    let release = |policy: &str| {
        serde_json::to_value(
            crate::module_release::ModuleRelease::test("echo", "1.2.3").with_policy(policy),
        )
        .unwrap()
    };
    let (old, new) = (release("a"), release("b"));
    let alice = user("alice");
    let d = denied(validate_request(
        &req(
            "ModuleRelease",
            Operation::Update,
            Some(&alice),
            Some(&old),
            Some(&new),
        ),
        &Context::default(),
    ));
    assert_eq!(
        d.message(),
        "Manual update-policy change is forbidden. Please, remove the update-policy label to automatically find a new suitable policy"
    );
    let controller = user("system:serviceaccount:d8-system:deckhouse");
    assert_eq!(
        validate_request(
            &req(
                "ModuleRelease",
                Operation::Update,
                Some(&controller),
                Some(&old),
                Some(&new)
            ),
            &Context::default()
        ),
        Ok(vec![])
    );
}

#[test]
fn users_cannot_touch_heritage_deckhouse_objects() {
    let object = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleSettingsDefinition",
        "metadata": {"name": "echo", "labels": {"heritage": "deckhouse"}}, "spec": {}});
    let alice = user("alice");
    let d = denied(validate_request(
        &req(
            "ModuleSettingsDefinition",
            Operation::Delete,
            Some(&alice),
            Some(&object),
            None,
        ),
        &Context::default(),
    ));
    assert_eq!(
        d.message(),
        "Creating, updating and deleting an objects with the `heritage: deckhouse` label is forbidden"
    );
    assert_eq!(
        d.by,
        DeniedBy::Policy {
            policy: "label-objects.deckhouse.io",
            binding: "heritage-label-objects.deckhouse.io"
        }
    );
    let node = UserInfo {
        username: "system:node:n1".into(),
        groups: vec!["system:nodes".into()],
    };
    assert_eq!(
        validate_request(
            &req(
                "ModuleSettingsDefinition",
                Operation::Delete,
                Some(&node),
                Some(&object),
                None
            ),
            &Context::default()
        ),
        Ok(vec![])
    );
}

#[test]
fn users_cannot_create_system_namespaces() {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d8-foo"}});
    let alice = user("alice");
    let d = denied(validate_request(
        &req(
            "Namespace",
            Operation::Create,
            Some(&alice),
            None,
            Some(&ns),
        ),
        &Context::default(),
    ));
    assert_eq!(d.message(), "Creation of system namespaces is forbidden");
    let dhctl = user("dhctl");
    assert_eq!(
        validate_request(
            &req(
                "Namespace",
                Operation::Create,
                Some(&dhctl),
                None,
                Some(&ns)
            ),
            &Context::default()
        ),
        Ok(vec![])
    );
}

// --- DeckhouseRelease ---------------------------------------------------------------------

#[test]
fn a_release_with_unmet_requirements_cannot_be_approved() {
    let old =
        serde_json::to_value(crate::deckhouse_release::DeckhouseRelease::test("1.69.3").pending())
            .unwrap();
    let new = serde_json::to_value(
        crate::deckhouse_release::DeckhouseRelease::test("1.69.3")
            .pending()
            .approved(),
    )
    .unwrap();
    let context = Context {
        unmet_release_requirements: BTreeMap::from([("v1.69.3".to_string(), vec![
            "\"k8s\" requirement for DeckhouseRelease \"1.69.3\" not met: current kubernetes version is lower than required".to_string(),
        ])]),
        ..Default::default()
    };
    let d = denied(validate_request(
        &req(
            "DeckhouseRelease",
            Operation::Update,
            None,
            Some(&old),
            Some(&new),
        ),
        &context,
    ));
    assert_eq!(
        d.message(),
        "\n cannot approve DeckhouseRelease \"v1.69.3\": requirements not met: \n- \"k8s\" requirement for DeckhouseRelease \"1.69.3\" not met: current kubernetes version is lower than required"
    );
    // Once approved, further changes are not re-checked.
    assert_eq!(
        validate_request(
            &req(
                "DeckhouseRelease",
                Operation::Update,
                None,
                Some(&new),
                Some(&new)
            ),
            &context
        ),
        Ok(vec![])
    );
}

#[test]
fn kinds_without_rules_are_admitted() {
    let object = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleSource", "metadata": {"name": "s"}, "spec": {"registry": {"repo": "r"}}});
    assert_eq!(validate("ModuleSource", None, &object), Ok(vec![]));
}
