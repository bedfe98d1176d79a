//! The cluster facts of admission ([`api::validation::Context`]), built from the objects the
//! module manager publishes: Modules (stage, exclusive group, disable options, requirements,
//! whether the manager runs them), ModuleSettingsDefinitions (each module's settings schema),
//! the `deckhouse` ModuleConfig (experimental modules allowed), every ModuleConfig's update
//! policy, ModuleUpdatePolicies and ModulePullOverrides.
//!
//! Both transports feed the same function: the embedded API server from its store, `d8 webhook`
//! from the API.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::validation::{Context, ModuleFacts};
use module_plan::config::ModuleSettings;
use module_plan::conversion::Conversions;
use module_plan::settings::SettingsSchema;
use serde_json::Value;

use crate::settings::Published;

/// The group of every kind admission reads.
pub const GROUP: &str = "deckhouse.io";

/// The kinds admission reads, all in [`GROUP`].
pub const KINDS: [&str; 5] = [
    "Module",
    "ModuleConfig",
    "ModuleSettingsDefinition",
    "ModuleUpdatePolicy",
    "ModulePullOverride",
];

/// Whether the rules of `kind` read cluster facts (others need no [`ClusterObjects`]).
pub fn needs_context(kind: &str) -> bool {
    matches!(kind, "ModuleConfig" | "ModuleUpdatePolicy")
}

/// The objects admission reads, as stored (JSON, any served version).
#[derive(Clone, Debug, Default)]
pub struct ClusterObjects {
    /// Modules.
    pub modules: Vec<Value>,
    /// ModuleConfigs.
    pub module_configs: Vec<Value>,
    /// ModuleSettingsDefinitions.
    pub settings_definitions: Vec<Value>,
    /// ModuleUpdatePolicies.
    pub update_policies: Vec<Value>,
    /// ModulePullOverrides.
    pub pull_overrides: Vec<Value>,
}

impl ClusterObjects {
    /// The list that holds objects of `kind` (one of [`KINDS`]).
    pub fn of_kind(&mut self, kind: &str) -> Option<&mut Vec<Value>> {
        Some(match kind {
            "Module" => &mut self.modules,
            "ModuleConfig" => &mut self.module_configs,
            "ModuleSettingsDefinition" => &mut self.settings_definitions,
            "ModuleUpdatePolicy" => &mut self.update_policies,
            "ModulePullOverride" => &mut self.pull_overrides,
            _ => return None,
        })
    }

    /// Reads every kind of [`KINDS`] with `list(group, kind)`.
    pub fn read(mut list: impl FnMut(&str, &str) -> Vec<Value>) -> Self {
        let mut objects = Self::default();
        for kind in KINDS {
            if let Some(slot) = objects.of_kind(kind) {
                *slot = list(GROUP, kind);
            }
        }
        objects
    }
}

fn name(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn text<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The module manager runs the module: its `EnabledByModuleManager` condition is true.
fn enabled_by_manager(module: &Value) -> bool {
    module
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("EnabledByModuleManager")
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

/// The module's settings validator from its ModuleSettingsDefinition (the latest version's
/// schema); `None` when it publishes none, or a schema that does not compile.
fn published_settings(definition: &Value) -> Option<Arc<dyn api::validation::SettingsCheck>> {
    let versions = definition.pointer("/spec/versions")?.as_array()?;
    let latest = versions
        .iter()
        .filter_map(|v| Some((v.get("name")?.as_str()?.parse::<i64>().ok()?, v)))
        .max_by_key(|(n, _)| *n)?;
    let schema = latest.1.get("schema").cloned().unwrap_or(Value::Null);
    let mut schema = SettingsSchema::from_value(schema).ok()?;
    if latest.0 > schema.config_version() {
        // The published version names the latest even when the schema does not say so.
        let mut openapi = schema.openapi().clone();
        openapi["x-config-version"] = latest.0.into();
        schema = SettingsSchema::from_value(openapi).ok()?;
    }
    let settings = ModuleSettings::new(name(definition), Some(schema), Conversions::new());
    Some(Arc::new(Published { settings }))
}

/// The facts of one Module.
fn module_facts(module: &Value) -> ModuleFacts {
    let properties = module.get("properties").cloned().unwrap_or(Value::Null);
    let disable = properties.get("disableOptions");
    let confirmation = disable
        .and_then(|d| d.get("confirmation"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    ModuleFacts {
        enabled: enabled_by_manager(module),
        experimental: text(&properties, "/stage") == Some("Experimental"),
        disable_confirmation: confirmation.then(|| {
            disable
                .and_then(|d| d.get("message"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        }),
        exclusive_group: text(&properties, "/exclusiveGroup").map(str::to_string),
        ..Default::default()
    }
}

/// The cluster facts of admission, from the objects.
pub fn context(objects: &ClusterObjects) -> Context {
    let mut modules: BTreeMap<String, ModuleFacts> = objects
        .modules
        .iter()
        .map(|m| (name(m).to_string(), module_facts(m)))
        .collect();
    // A required module that is not enabled blocks enabling the module that needs it.
    let enabled: BTreeSet<String> = modules
        .iter()
        .filter(|(_, f)| f.enabled)
        .map(|(n, _)| n.clone())
        .collect();
    for module in &objects.modules {
        let required = module
            .pointer("/properties/requirements/modules")
            .and_then(Value::as_object);
        let parents: Vec<String> = required
            .into_iter()
            .flat_map(|m| m.keys())
            .filter(|p| modules.contains_key(p.as_str()) && !enabled.contains(p.as_str()))
            .cloned()
            .collect();
        if let Some(f) = modules.get_mut(name(module)) {
            f.disabled_parents = parents;
        }
    }
    for definition in &objects.settings_definitions {
        if let Some(settings) = published_settings(definition) {
            modules
                .entry(name(definition).to_string())
                .or_default()
                .settings = Some(settings);
        }
    }
    for pull_override in &objects.pull_overrides {
        modules
            .entry(name(pull_override).to_string())
            .or_default()
            .pull_override = true;
    }
    let deckhouse = objects
        .module_configs
        .iter()
        .find(|c| name(c) == "deckhouse");
    let deckhouse_settings = deckhouse.and_then(|c| c.pointer("/spec/settings"));
    Context {
        modules,
        // Embedded modules have no Module object here: a module missing is unknown, not absent.
        modules_complete: false,
        allow_experimental_modules: deckhouse_settings
            .and_then(|s| s.get("allowExperimentalModules"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        allowed_experimental_modules: deckhouse_settings
            .and_then(|s| s.get("allowedExperimentalModules"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        update_policies: Some(
            objects
                .update_policies
                .iter()
                .map(|p| name(p).to_string())
                .collect(),
        ),
        module_config_update_policies: Some(
            objects
                .module_configs
                .iter()
                .filter_map(|c| {
                    Some((
                        name(c).to_string(),
                        text(c, "/spec/updatePolicy")?.to_string(),
                    ))
                })
                .collect(),
        ),
        unmet_release_requirements: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests;
