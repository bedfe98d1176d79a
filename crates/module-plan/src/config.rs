//! A module's settings as a whole — its schema and its conversions — and what Deckhouse's
//! ModuleConfig validator (`go_lib/configtools`) concludes about a ModuleConfig with them: the
//! error that refuses it, the warnings, the values the module runs with, and the status message.

use std::collections::BTreeSet;

use api::module_config::{
    GLOBAL, MESSAGE_UNKNOWN_MODULE, ModuleConfigSpec, ModuleConfigStatus, message_error,
    message_invalid_version, message_update_available,
};
use api::module_settings_definition::{ModuleSettingsDefinitionSpec, SettingsVersion};
use api::validation::SettingsVersions;
use serde_json::Value;

use crate::Error;
use crate::conversion::Conversions;
use crate::definition::camel_case;
use crate::settings::SettingsSchema;

/// Refusal: settings without a version.
pub const MSG_VERSION_REQUIRED: &str = "spec.version is required when spec.settings are specified";
/// Warning: a version without settings.
pub const MSG_VERSION_WITHOUT_SETTINGS: &str = "spec.version has no effect without spec.settings, defaults from the latest version of settings schema will be applied";

/// The settings schema and conversions of one module.
#[derive(Clone, Debug)]
pub struct ModuleSettings {
    module: String,
    schema: Option<SettingsSchema>,
    conversions: Conversions,
}

/// What the validator concluded about a ModuleConfig.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checked {
    /// The refusal, in Deckhouse's words; `None` when admitted.
    pub error: Option<String>,
    /// Warnings for an admitted config (none when refused).
    pub warnings: Vec<String>,
    /// The values the module runs with: converted to the latest version, defaults merged.
    /// `None` when refused.
    pub values: Option<Value>,
    /// The settings converted to the latest version, without defaults: addon-operator's
    /// *config values* (what `CONFIG_VALUES_PATH` shows a hook). `None` when refused.
    pub settings: Option<Value>,
    /// The settings version the values are written for (the latest, after conversion).
    pub version: i64,
    /// `spec.version` names a version the module does not know (with settings).
    pub unknown_version: bool,
}

impl ModuleSettings {
    /// Settings of `module` with an optional schema and its conversions.
    pub fn new(module: &str, schema: Option<SettingsSchema>, conversions: Conversions) -> Self {
        Self {
            module: module.to_owned(),
            schema,
            conversions,
        }
    }

    /// Reads `openapi/config-values.yaml` (when the module has one) and the
    /// `openapi/conversions/*.yaml` files (name and text).
    pub fn from_files(
        module: &str,
        config_values: Option<&str>,
        conversions: &[(String, String)],
    ) -> Result<Self, Error> {
        let schema = config_values.map(SettingsSchema::from_yaml).transpose()?;
        let mut all = Conversions::new();
        for (file, text) in conversions {
            all.add_file(file, text)?;
        }
        Ok(Self::new(module, schema, all))
    }

    /// The module name.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The schema, if the module has one.
    pub fn schema(&self) -> Option<&SettingsSchema> {
        self.schema.as_ref()
    }

    /// The conversions.
    pub fn conversions(&self) -> &Conversions {
        &self.conversions
    }

    /// The latest settings version: the highest conversion, or the schema's `x-config-version`.
    pub fn latest(&self) -> i64 {
        let from_schema = self
            .schema
            .as_ref()
            .map_or(1, SettingsSchema::config_version);
        self.conversions.latest().max(from_schema)
    }

    /// The versions ModuleConfigs may be written for (for the admission rules).
    pub fn versions(&self) -> SettingsVersions {
        let latest = self.latest();
        let mut known: BTreeSet<i64> = self.conversions.known_versions();
        known.insert(latest);
        SettingsVersions { latest, known }
    }

    /// The key the module's values live under: the camelCase name (`global` for global).
    pub fn values_key(&self) -> String {
        if self.module == GLOBAL {
            GLOBAL.to_owned()
        } else {
            camel_case(&self.module)
        }
    }

    /// The values for `settings` written for `version` (0 or `None` = the latest): converted,
    /// defaults merged, validated. `Err` carries Deckhouse's message.
    pub fn values(&self, settings: Option<&Value>, version: Option<i64>) -> Result<Value, String> {
        let spec = ModuleConfigSpec {
            enabled: Some(true),
            version: version
                .filter(|v| *v != 0)
                .or(settings.map(|_| self.latest())),
            settings: settings.cloned(),
            ..Default::default()
        };
        let checked = self.check(&spec);
        match checked.error {
            Some(error) => Err(error),
            None => Ok(checked.values.unwrap_or(Value::Null)),
        }
    }

    /// The validator on a ModuleConfig's spec.
    pub fn check(&self, spec: &ModuleConfigSpec) -> Checked {
        let latest = self.latest();
        let versions = self.versions();
        let version = spec.version.unwrap_or(0);
        let settings = spec.settings.as_ref().filter(|s| !s.is_null());
        let mut checked = Checked {
            version: latest,
            ..Default::default()
        };
        let refuse = |mut checked: Checked, error: String| {
            checked.error = Some(error);
            checked.values = None;
            checked.settings = None;
            checked.warnings.clear();
            checked
        };
        if version == 0 && settings.is_some() {
            return refuse(checked, MSG_VERSION_REQUIRED.to_owned());
        }
        if version != 0 && settings.is_none() {
            checked
                .warnings
                .push(MSG_VERSION_WITHOUT_SETTINGS.to_owned());
        }
        let mut converted = Value::Object(Default::default());
        if version != 0 {
            if !versions.known.contains(&version) {
                let previous: Vec<String> = versions
                    .known
                    .iter()
                    .filter(|v| **v != latest)
                    .map(i64::to_string)
                    .collect();
                let previous = if previous.is_empty() {
                    String::new()
                } else {
                    format!(", or one of previous versions: {}", previous.join(", "))
                };
                let message = format!(
                    "spec.version={version} is unsupported. Use latest version {latest}{previous}"
                );
                if settings.is_some() {
                    checked.unknown_version = true;
                    return refuse(checked, message);
                }
                checked.warnings.push(message);
            } else if let Some(settings) = settings {
                converted = match self.conversions.convert(version, latest, settings) {
                    Ok(v) => v,
                    Err(e) => return refuse(checked, e.to_string()),
                };
                if version != latest {
                    checked.warnings.push(format!(
                        "spec.version={version} is obsolete. Please migrate spec.settings to the latest version {latest}"
                    ));
                }
            }
        }
        let values = match &self.schema {
            Some(schema) => schema.defaulted(&converted),
            None => converted.clone(),
        };
        if spec.enabled != Some(false)
            && let Some(schema) = &self.schema
            && let Err(errors) = schema.validate(&self.values_key(), &values)
        {
            let converted_note = if version != 0 && version != latest {
                format!(" converted to {latest}")
            } else {
                String::new()
            };
            let shown = if version == 0 { latest } else { version };
            return refuse(
                checked,
                format!(
                    "spec.settings are not valid (version {shown}{converted_note}): {}",
                    crate::settings::multierror_one_line(&errors)
                ),
            );
        }
        checked.values = Some(values);
        checked.settings = Some(converted);
        checked
    }

    /// The ModuleConfig status: the version in use and Deckhouse's message.
    pub fn status(&self, spec: &ModuleConfigSpec) -> ModuleConfigStatus {
        let latest = self.latest();
        let checked = self.check(spec);
        let has_settings = spec.settings.as_ref().is_some_and(|s| !s.is_null());
        let version = match spec.version {
            Some(v) if v != 0 && has_settings => v,
            _ => latest,
        };
        let message = if checked.unknown_version {
            message_invalid_version(latest)
        } else if let Some(error) = &checked.error {
            message_error(error)
        } else if has_settings && version < latest {
            message_update_available(latest)
        } else {
            String::new()
        };
        ModuleConfigStatus {
            version: version.to_string(),
            message,
        }
    }

    /// The ModuleSettingsDefinition spec: one version, the latest, with the schema as written.
    pub fn definition(&self) -> ModuleSettingsDefinitionSpec {
        ModuleSettingsDefinitionSpec {
            versions: vec![SettingsVersion {
                name: self.latest().to_string(),
                schema: self.schema.as_ref().map(|s| s.openapi().clone()),
            }],
        }
    }
}

/// Modules the platform itself runs (no Module object, no ModuleSource): their ModuleConfigs
/// are never "unknown".
pub const BUILT_IN_MODULES: &[&str] = &["deckhouse", "registry"];

/// The status of the ModuleConfig of a built-in module: the version in use and, when the
/// module refuses its configuration (the registry module's prerequisites not met, its
/// settings invalid: RegistryConfig's `Valid=False`), the refusal as Deckhouse shows a
/// configuration error (`Error: …`); no message when it accepts it.
pub fn built_in_module_status(
    spec: &ModuleConfigSpec,
    refusal: Option<&str>,
) -> ModuleConfigStatus {
    ModuleConfigStatus {
        version: spec.version.filter(|v| *v > 0).unwrap_or(1).to_string(),
        message: refusal.map(message_error).unwrap_or_default(),
    }
}

/// The status of a ModuleConfig whose module is unknown.
pub fn unknown_module_status() -> ModuleConfigStatus {
    ModuleConfigStatus {
        version: String::new(),
        message: MESSAGE_UNKNOWN_MODULE.to_owned(),
    }
}

#[cfg(test)]
mod tests;
