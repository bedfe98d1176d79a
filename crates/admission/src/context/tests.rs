use api::validation::{Operation, Request, validate_request};
use serde_json::{Value, json};

use super::*;

fn module(name: &str, properties: Value, enabled: bool) -> Value {
    json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "Module", "metadata": {"name": name},
        "properties": properties,
        "status": {"conditions": [{"type": "EnabledByModuleManager",
            "status": if enabled { "True" } else { "False" }}]}})
}

fn definition(name: &str, version: &str, schema: Value) -> Value {
    json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleSettingsDefinition",
        "metadata": {"name": name}, "spec": {"versions": [{"name": version, "schema": schema}]}})
}

fn config(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": name}, "spec": spec})
}

fn cluster() -> ClusterObjects {
    ClusterObjects {
        modules: vec![
            module("echo", json!({"stage": "General Availability"}), true),
            module("exp", json!({"stage": "Experimental"}), false),
            module(
                "keep",
                json!({"disableOptions": {"confirmation": true, "message": "Disabling deletes the data"}}),
                true,
            ),
            module("cni-a", json!({"exclusiveGroup": "cni"}), true),
            module("cni-b", json!({"exclusiveGroup": "cni"}), false),
            module(
                "child",
                json!({"requirements": {"modules": {"exp": ">= 0.0.0"}}}),
                false,
            ),
        ],
        settings_definitions: vec![definition(
            "echo",
            "2",
            json!({"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1}}}),
        )],
        update_policies: vec![json!({"metadata": {"name": "weekly"}})],
        pull_overrides: vec![json!({"metadata": {"name": "keep"}})],
        module_configs: vec![config(
            "deckhouse",
            json!({"settings": {"allowedExperimentalModules": ["other"]}}),
        )],
    }
}

/// The refusal (or `Ok`) of writing `new` over `old`.
fn verdict(old: Option<&Value>, new: Option<&Value>) -> Result<Vec<String>, String> {
    let operation = match (old, new) {
        (None, _) => Operation::Create,
        (Some(_), Some(_)) => Operation::Update,
        (Some(_), None) => Operation::Delete,
    };
    validate_request(
        &Request {
            kind: "ModuleConfig",
            operation,
            user: None,
            old,
            new,
        },
        &context(&cluster()),
    )
    .map_err(|d| d.message())
}

#[test]
fn settings_are_checked_against_the_published_schema() {
    let bad = config("echo", json!({"version": 2, "settings": {"replicas": 0}}));
    assert_eq!(
        verdict(None, Some(&bad)).unwrap_err(),
        "spec.settings are not valid (version 2):  1 error occurred: * echo.replicas should be greater than or equal to 1  "
    );
    let good = config("echo", json!({"version": 2, "settings": {"replicas": 3}}));
    assert_eq!(verdict(None, Some(&good)), Ok(vec![]));
    let unknown = config("echo", json!({"version": 3, "settings": {"replicas": 3}}));
    assert_eq!(
        verdict(None, Some(&unknown)).unwrap_err(),
        "spec.version=3 is unsupported. Use latest version 2, or one of previous versions: 1"
    );
}

#[test]
fn experimental_modules_need_the_deckhouse_settings() {
    let exp = config("exp", json!({"enabled": true}));
    assert_eq!(
        verdict(None, Some(&exp)).unwrap_err(),
        "the 'exp' module is experimental; to allow it, in the 'deckhouse' ModuleConfig either set spec.settings.allowExperimentalModules: true (allows all experimental modules) or add 'exp' to spec.settings.allowedExperimentalModules"
    );
    let mut objects = cluster();
    objects.module_configs = vec![config(
        "deckhouse",
        json!({"settings": {"allowedExperimentalModules": ["exp"]}}),
    )];
    let request = Request {
        kind: "ModuleConfig",
        operation: Operation::Create,
        user: None,
        old: None,
        new: Some(&exp),
    };
    assert!(validate_request(&request, &context(&objects)).is_ok());
}

#[test]
fn disabling_a_module_that_asks_for_confirmation_needs_the_annotation() {
    let on = config("keep", json!({"enabled": true}));
    let off = config("keep", json!({"enabled": false}));
    assert_eq!(
        verdict(Some(&on), Some(&off)).unwrap_err(),
        "Disabling deletes the data. Please annotate ModuleConfig with `modules.deckhouse.io/allow-disabling=true` if you're sure that you want to disable the module."
    );
    let mut confirmed = off.clone();
    confirmed["metadata"]["annotations"] = json!({"modules.deckhouse.io/allow-disabling": "true"});
    assert_eq!(verdict(Some(&on), Some(&confirmed)), Ok(vec![]));
}

#[test]
fn deleting_needs_the_confirmation_and_no_pull_override() {
    let on = config("keep", json!({"enabled": true}));
    assert!(
        verdict(Some(&on), None)
            .unwrap_err()
            .starts_with("Disabling deletes the data.")
    );
    let mut confirmed = on.clone();
    confirmed["metadata"]["annotations"] = json!({"modules.deckhouse.io/allow-disabling": "true"});
    assert_eq!(
        verdict(Some(&confirmed), None).unwrap_err(),
        "delete the ModulePullOverride before deleting the module config"
    );
}

#[test]
fn a_pull_override_guards_the_config_of_a_module_the_cluster_lists_no_module_for() {
    let mut objects = cluster();
    objects
        .pull_overrides
        .push(json!({"metadata": {"name": "dev"}}));
    let dev = config("dev", json!({"enabled": true}));
    let request = Request {
        kind: "ModuleConfig",
        operation: Operation::Delete,
        user: None,
        old: Some(&dev),
        new: None,
    };
    assert_eq!(
        validate_request(&request, &context(&objects))
            .unwrap_err()
            .message(),
        "delete the ModulePullOverride before deleting the module config"
    );
}

#[test]
fn an_exclusive_group_allows_one_enabled_module() {
    let b = config("cni-b", json!({"enabled": true}));
    assert_eq!(
        verdict(None, Some(&b)).unwrap_err(),
        "can't enable module \"cni-b\" because different module \"cni-a\" with same exclusiveGroup cni enabled"
    );
}

#[test]
fn a_module_needing_a_disabled_module_cannot_be_enabled() {
    let child = config("child", json!({"enabled": true}));
    assert_eq!(
        verdict(None, Some(&child)).unwrap_err(),
        "the 'child' module depends on disabled module(s): exp"
    );
}

#[test]
fn update_policies_must_exist() {
    let missing = config("echo", json!({"updatePolicy": "daily"}));
    assert_eq!(
        verdict(None, Some(&missing)).unwrap_err(),
        "the 'daily' module policy does not exist"
    );
    let there = config("echo", json!({"updatePolicy": "weekly"}));
    assert_eq!(verdict(None, Some(&there)), Ok(vec![]));
}

#[test]
fn an_empty_cluster_knows_nothing_and_refuses_nothing_it_cannot_know() {
    let ctx = context(&ClusterObjects::default());
    assert!(ctx.modules.is_empty());
    let any = config(
        "whatever",
        json!({"enabled": true, "version": 1, "settings": {"x": 1}}),
    );
    let request = Request {
        kind: "ModuleConfig",
        operation: Operation::Create,
        user: None,
        old: None,
        new: Some(&any),
    };
    assert!(validate_request(&request, &ctx).is_ok());
}
