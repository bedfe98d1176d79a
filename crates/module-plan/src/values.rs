//! Module values as addon-operator builds, changes and hands them to hooks and to Helm.
//!
//! # Layers
//! A module's values are recomputed from layers, in addon-operator's order (its
//! `ValuesStorage`):
//! 1. the static values (`values.yaml`, the section under the module's camelCase key or the
//!    whole file);
//! 2. the defaults of `openapi/config-values.yaml`;
//! 3. the *config values*: the ModuleConfig's `spec.settings` converted to the latest settings
//!    version (no defaults), checked by Deckhouse's ModuleConfig validator;
//! 4. the defaults of `openapi/values.yaml` (which, with `x-extend`, includes the config schema);
//! 5. the hooks' values patches, kept compacted (one operation per path) and replayed;
//! 6. for downloaded modules, `registry` (their source's registry); for `global`, what Deckhouse
//!    puts there ([`GlobalFacts`]: `enabledModules`, `modulesImages`, `discovery`, …).
//!
//! Maps merge key by key, anything else replaces. `global` is built the same way with the
//! `global` ModuleConfig and the global schemas; its key is `global`.
//!
//! # API for the runtime
//! ```no_run
//! # use std::sync::Arc;
//! # use module_plan::config::ModuleSettings;
//! # use module_plan::values::*;
//! # fn main() -> Result<(), ValuesError> {
//! // Once per module release: its files.
//! let settings = ModuleSettings::from_files("echo-server", Some("type: object"), &[])?;
//! let definition = Arc::new(ValuesDefinition::new(settings, Some("type: object"), None)?);
//! let global_definition = Arc::new(ValuesDefinition::new(
//!     ModuleSettings::from_files("global", None, &[])?, None, None)?);
//! // Whenever the ModuleConfig (or the facts) change: build, keeping hook patches with
//! // `with_config`.
//! let global = ModuleValues::build_global(global_definition, None, &GlobalFacts::default())?;
//! let module = ModuleValues::build(definition, None, None)?;
//! // A hook ran: apply its VALUES_JSON_PATCH_PATH (all or nothing, validated).
//! let patch = ValuesPatch::parse(br#"[{"op":"add","path":"/echoServer/internal","value":{}}]"#)
//!     .map_err(|reason| ValuesError::PatchParse {
//!         module: "echo-server".into(), kind: PatchKind::Values, reason })?;
//! let module = module.apply_values_patch(&patch)?;
//! // Before rendering: x-required-for-helm, then the chart's values and their checksum.
//! module.check_helm()?;
//! let chart_values = helm_values(&global, &module);
//! let _sum = checksum(&chart_values);
//! # Ok(()) }
//! ```
//! - [`ModuleValues::values`] / [`ModuleValues::config_values`] are what addon-operator calls
//!   values and config values; [`hook_values`] / [`hook_config_values`] are the
//!   `VALUES_PATH` / `CONFIG_VALUES_PATH` documents of a module hook (a global hook gets
//!   [`ModuleValues::prefixed_values`] of `global`).
//! - [`ModuleValues::apply_config_values_patch`] gives new config values
//!   ([`ModuleValues::config_values`]): the runtime writes them to the ModuleConfig's
//!   `spec.settings` at version [`ModuleValues::settings_version`].
//! - A global hook's patch may also enable modules: [`ValuesPatch::enabled_modules`].
//! - [`ModuleValues::checksum`] is addon-operator's values checksum (MD5 of Go's JSON of the
//!   values): a hook that changed it means the module must be rendered again.
//! - [`DeckhouseSettings::from_settings`] reads `logLevel` and `bundle`.
//!
//! Errors ([`ValuesError`]) carry addon-operator's messages; [`ValuesError::for_hook`] and
//! [`ValuesError::status_message`] give the text for hook errors and status fields.

use std::sync::Arc;

use api::module_config::ModuleConfigSpec;
use serde_json::{Map, Value};

mod deckhouse;
mod definition;
mod error;
mod global;
pub mod gojson;
mod patch;

pub use deckhouse::{Bundle, DeckhouseSettings, LogLevel};
pub use definition::{ValuesDefinition, X_EXTEND, X_REQUIRED_FOR_HELM};
pub use error::{PatchKind, ValuesError, go_multierror, one_line};
pub use global::{Discovery, GlobalFacts, GlobalRegistry, ModulesImages};
pub use gojson::{checksum, strings_checksum};
pub use patch::{ENABLED_SUFFIX, GLOBAL_KEY, Operation, ValuesPatch, compact};

/// The registry a downloaded module's images come from, put under `<moduleKey>.registry`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registry {
    /// `base`: `registry.example.com/modules/echo`.
    pub base: String,
    /// `dockercfg`: the base64 of the `.dockerconfigjson`.
    pub dockercfg: String,
    /// `scheme`: `http` or `https`.
    pub scheme: String,
    /// `ca`: the CA certificate, when the registry has one.
    pub ca: Option<String>,
}

impl Registry {
    fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("base".into(), Value::String(self.base.clone()));
        map.insert("dockercfg".into(), Value::String(self.dockercfg.clone()));
        map.insert("scheme".into(), Value::String(self.scheme.clone()));
        if let Some(ca) = self.ca.as_ref().filter(|c| !c.is_empty()) {
            map.insert("ca".into(), Value::String(ca.clone()));
        }
        Value::Object(map)
    }
}

/// The values of one module (or of `global`): its layers and their result. Cheap to clone;
/// every change returns a new value and leaves the old one as it was.
#[derive(Clone, Debug)]
pub struct ModuleValues {
    definition: Arc<ValuesDefinition>,
    config_values: Value,
    settings_version: i64,
    patches: Vec<Operation>,
    registry: Option<Registry>,
    facts: Option<Value>,
    values: Value,
}

impl ModuleValues {
    /// A module's values from its definition, its ModuleConfig's spec (if it has one) and, for
    /// a downloaded module, its source's registry. Config values are refused with Deckhouse's
    /// ModuleConfig message; the result must match `openapi/values.yaml`.
    pub fn build(
        definition: Arc<ValuesDefinition>,
        config: Option<&ModuleConfigSpec>,
        registry: Option<Registry>,
    ) -> Result<Self, ValuesError> {
        let (config_values, settings_version) = config_values(&definition, config)?;
        Self::assemble(
            definition,
            config_values,
            settings_version,
            Vec::new(),
            registry,
            None,
        )
    }

    /// The `global` values: the global definition (module name `global`), the `global`
    /// ModuleConfig's spec, and what Deckhouse puts under `global`.
    pub fn build_global(
        definition: Arc<ValuesDefinition>,
        config: Option<&ModuleConfigSpec>,
        facts: &GlobalFacts,
    ) -> Result<Self, ValuesError> {
        let (config_values, settings_version) = config_values(&definition, config)?;
        Self::assemble(
            definition,
            config_values,
            settings_version,
            Vec::new(),
            None,
            Some(facts.to_values()),
        )
    }

    /// The same values with a new ModuleConfig spec; hooks' patches are kept and replayed, as
    /// addon-operator keeps them when config values change.
    pub fn with_config(&self, config: Option<&ModuleConfigSpec>) -> Result<Self, ValuesError> {
        let (config_values, settings_version) = config_values(&self.definition, config)?;
        Self::assemble(
            self.definition.clone(),
            config_values,
            settings_version,
            self.patches.clone(),
            self.registry.clone(),
            self.facts.clone(),
        )
    }

    /// The same `global` values with new facts.
    pub fn with_facts(&self, facts: &GlobalFacts) -> Result<Self, ValuesError> {
        Self::assemble(
            self.definition.clone(),
            self.config_values.clone(),
            self.settings_version,
            self.patches.clone(),
            self.registry.clone(),
            Some(facts.to_values()),
        )
    }

    /// The same values for a new release of the module (new definition), keeping the config
    /// values and the hooks' patches.
    pub fn with_definition(&self, definition: Arc<ValuesDefinition>) -> Result<Self, ValuesError> {
        Self::assemble(
            definition,
            self.config_values.clone(),
            self.settings_version,
            self.patches.clone(),
            self.registry.clone(),
            self.facts.clone(),
        )
    }

    fn assemble(
        definition: Arc<ValuesDefinition>,
        config_values: Value,
        settings_version: i64,
        patches: Vec<Operation>,
        registry: Option<Registry>,
        facts: Option<Value>,
    ) -> Result<Self, ValuesError> {
        let values = compute(
            &definition,
            &config_values,
            &patches,
            registry.as_ref(),
            facts.as_ref(),
        )
        .map_err(|reason| ValuesError::Commit {
            module: definition.module().to_owned(),
            reason,
        })?;
        definition
            .validate_values(&values)
            .map_err(|errors| ValuesError::Invalid {
                module: definition.module().to_owned(),
                errors,
            })?;
        Ok(Self {
            definition,
            config_values,
            settings_version,
            patches,
            registry,
            facts,
            values,
        })
    }

    /// The definition the values are built from.
    pub fn definition(&self) -> &Arc<ValuesDefinition> {
        &self.definition
    }

    /// The module name (`global` for global values).
    pub fn module(&self) -> &str {
        self.definition.module()
    }

    /// The values key (`echoServer`, `global`).
    pub fn key(&self) -> String {
        self.definition.key()
    }

    /// The values (without the key).
    pub fn values(&self) -> &Value {
        &self.values
    }

    /// `{<key>: values}`.
    pub fn prefixed_values(&self) -> Value {
        patch::prefixed(&self.key(), &self.values)
    }

    /// The config values: the settings converted to the latest version, without defaults.
    pub fn config_values(&self) -> &Value {
        &self.config_values
    }

    /// `{<key>: config values}`.
    pub fn prefixed_config_values(&self) -> Value {
        patch::prefixed(&self.key(), &self.config_values)
    }

    /// The settings version the config values are written for (the latest).
    pub fn settings_version(&self) -> i64 {
        self.settings_version
    }

    /// The hooks' values patches kept so far (compacted).
    pub fn patches(&self) -> &[Operation] {
        &self.patches
    }

    /// addon-operator's values checksum of the values (without the key).
    pub fn checksum(&self) -> String {
        checksum(&self.values)
    }

    /// Checks the values against the values schema with `x-required-for-helm`, as
    /// addon-operator does before every Helm run.
    pub fn check_helm(&self) -> Result<(), ValuesError> {
        self.definition
            .validate_helm_values(&self.values)
            .map_err(|errors| ValuesError::Helm {
                module: self.module().to_owned(),
                errors,
            })
    }

    fn patch_error(&self, kind: PatchKind, reason: String) -> ValuesError {
        let module = self.module().to_owned();
        let reason = if module == GLOBAL_KEY {
            format!("merge global values failed: {reason}")
        } else {
            format!("merge module '{module}' values failed: {reason}")
        };
        ValuesError::Patch {
            module,
            kind,
            reason,
        }
    }

    /// Applies a hook's patch to `{<key>: doc}`: paths checked, strictly applied, the section
    /// taken back out. `None` when nothing changed (or a global patch has no `global` part).
    fn patched(
        &self,
        kind: PatchKind,
        doc: &Value,
        patch: &ValuesPatch,
    ) -> Result<Option<(Value, ValuesPatch)>, ValuesError> {
        let key = self.key();
        patch
            .check_paths(&key)
            .map_err(|reason| self.patch_error(kind, reason))?;
        let patch = if key == GLOBAL_KEY {
            patch.filter(GLOBAL_KEY)
        } else {
            patch.clone()
        };
        if patch.is_empty() {
            return Ok(None);
        }
        let before = patch::prefixed(&key, doc);
        let after = patch
            .apply_strict(&before)
            .map_err(|reason| self.patch_error(kind, reason))?;
        if after == before {
            return Ok(None);
        }
        match after.get(&key) {
            Some(section @ Value::Object(_)) => Ok(Some((section.clone(), patch))),
            other => {
                let what = if key == GLOBAL_KEY {
                    "global"
                } else {
                    "module"
                };
                Err(ValuesError::Patch {
                    module: self.module().to_owned(),
                    kind,
                    reason: format!(
                        "unknown {what} values type: {}",
                        go_type_name(other.unwrap_or(&Value::Null))
                    ),
                })
            }
        }
    }

    /// A hook's values patch (`VALUES_JSON_PATCH_PATH`): paths checked, applied strictly,
    /// the result validated against `openapi/values.yaml`; on any failure nothing changes.
    /// On success the patch is kept (compacted) and replayed whenever the values are rebuilt.
    pub fn apply_values_patch(&self, patch: &ValuesPatch) -> Result<Self, ValuesError> {
        let Some((values, patch)) = self.patched(PatchKind::Values, &self.values, patch)? else {
            return Ok(self.clone());
        };
        self.definition
            .validate_values(&values)
            .map_err(|errors| ValuesError::PatchInvalid {
                module: self.module().to_owned(),
                kind: PatchKind::Values,
                errors,
            })?;
        Self::assemble(
            self.definition.clone(),
            self.config_values.clone(),
            self.settings_version,
            compact(&self.patches, &patch.operations),
            self.registry.clone(),
            self.facts.clone(),
        )
    }

    /// A hook's config values patch (`CONFIG_VALUES_JSON_PATCH_PATH`): paths checked, applied
    /// strictly to the config values, the result (with the config schema's defaults) validated;
    /// on any failure nothing changes. The runtime saves [`Self::config_values`] of the result
    /// to the ModuleConfig.
    pub fn apply_config_values_patch(&self, patch: &ValuesPatch) -> Result<Self, ValuesError> {
        let Some((config_values, _)) =
            self.patched(PatchKind::ConfigValues, &self.config_values, patch)?
        else {
            return Ok(self.clone());
        };
        self.definition
            .validate_config_values(&config_values)
            .map_err(|errors| ValuesError::PatchInvalid {
                module: self.module().to_owned(),
                kind: PatchKind::ConfigValues,
                errors,
            })?;
        Self::assemble(
            self.definition.clone(),
            config_values,
            self.settings_version,
            self.patches.clone(),
            self.registry.clone(),
            self.facts.clone(),
        )
    }
}

/// The ModuleConfig's settings as config values (converted, no defaults) and their version.
fn config_values(
    definition: &ValuesDefinition,
    config: Option<&ModuleConfigSpec>,
) -> Result<(Value, i64), ValuesError> {
    let spec = config.cloned().unwrap_or_default();
    let checked = definition.settings().check(&spec);
    if let Some(message) = checked.error {
        return Err(ValuesError::ConfigValues {
            module: definition.module().to_owned(),
            message,
        });
    }
    let settings = checked
        .settings
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(Map::new()));
    Ok((settings, checked.version))
}

/// The first four layers (see the module docs): the static values, the settings schema's
/// defaults, `config_values`, the values schema's defaults — no patches, not validated. What
/// Deckhouse's package values storage starts an Application's values from, too.
pub fn base_layers(definition: &ValuesDefinition, config_values: &Value) -> Value {
    let mut values = definition.static_values().clone();
    if let Some(schema) = definition.settings().schema() {
        crate::settings::apply_defaults(schema.openapi(), &mut values);
    }
    merge(&mut values, config_values);
    if let Some(schema) = definition.values_schema() {
        crate::settings::apply_defaults(schema.openapi(), &mut values);
    }
    values
}

/// The layers, in addon-operator's order (see the module docs).
fn compute(
    definition: &ValuesDefinition,
    config_values: &Value,
    patches: &[Operation],
    registry: Option<&Registry>,
    facts: Option<&Value>,
) -> Result<Value, String> {
    let mut values = base_layers(definition, config_values);
    let key = definition.key();
    if !patches.is_empty() {
        let doc =
            ValuesPatch::new(patches.to_vec()).apply_lenient(&patch::prefixed(&key, &values))?;
        values = match doc.get(&key) {
            Some(section @ Value::Object(_)) => section.clone(),
            _ => Value::Object(Map::new()),
        };
    }
    if let (Some(registry), Value::Object(map)) = (registry, &mut values) {
        map.insert("registry".into(), registry.to_value());
    }
    if let Some(facts) = facts {
        merge(&mut values, facts);
    }
    Ok(values)
}

/// Merges `src` into `dst` as addon-operator's `mergemap` does: maps key by key, recursively;
/// anything else from `src` replaces.
pub fn merge(dst: &mut Value, src: &Value) {
    match (dst, src) {
        (Value::Object(dst), Value::Object(src)) => {
            for (key, value) in src {
                match dst.get_mut(key) {
                    Some(existing @ Value::Object(_)) if value.is_object() => {
                        merge(existing, value)
                    }
                    _ => {
                        dst.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (dst, src) => *dst = src.clone(),
    }
}

/// Go's `%T` of a decoded JSON value.
fn go_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The values a module's chart is rendered with, as addon-operator writes them for Helm:
/// `{"global": <global values>, "<moduleKey>": <module values>}`.
pub fn helm_values(global: &ModuleValues, module: &ModuleValues) -> Value {
    let mut map = Map::new();
    map.insert(GLOBAL_KEY.into(), global.values().clone());
    map.insert(module.key(), module.values().clone());
    Value::Object(map)
}

/// `VALUES_PATH` of a module hook: the same document as the chart's values.
pub fn hook_values(global: &ModuleValues, module: &ModuleValues) -> Value {
    helm_values(global, module)
}

/// `CONFIG_VALUES_PATH` of a module hook: `{"global": <global config values>, "<moduleKey>":
/// <config values>}`.
pub fn hook_config_values(global: &ModuleValues, module: &ModuleValues) -> Value {
    let mut map = Map::new();
    map.insert(GLOBAL_KEY.into(), global.config_values().clone());
    map.insert(module.key(), module.config_values().clone());
    Value::Object(map)
}

/// `VALUES_PATH` of a module's `enabled` script: its values and `global`, with
/// `global.enabledModules` the modules enabled before it.
pub fn enabled_script_values(
    global: &ModuleValues,
    module: &ModuleValues,
    preceding_enabled: &[String],
) -> Value {
    let mut out = module.prefixed_values();
    merge(&mut out, &global.prefixed_values());
    let enabled: Vec<Value> = preceding_enabled
        .iter()
        .map(|m| Value::String(m.clone()))
        .collect();
    merge(
        &mut out,
        &serde_json::json!({GLOBAL_KEY: {"enabledModules": enabled}}),
    );
    out
}

#[cfg(test)]
mod tests;
