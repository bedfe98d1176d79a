//! A module's settings validator as the rules see it: module-plan's [`ModuleSettings`] behind
//! `api::validation::SettingsCheck`.

use api::module_config::ModuleConfigSpec;
use api::validation::{SettingsCheck, Warnings};
use module_plan::config::ModuleSettings;
use serde_json::Value;

/// The settings of a module as published in its ModuleSettingsDefinition: the schema of the
/// latest version. Conversions from older versions are not published there, so a config
/// written for an older version is not checked against the schema (it would need them).
#[derive(Debug)]
pub(crate) struct Published {
    pub(crate) settings: ModuleSettings,
}

impl SettingsCheck for Published {
    fn check(
        &self,
        version: i64,
        settings: Option<&Value>,
        enabled: Option<bool>,
    ) -> Result<Warnings, String> {
        let latest = self.settings.latest();
        if version != 0 && version < latest && self.settings.conversions().steps().is_empty() {
            return Ok(Vec::new());
        }
        let spec = ModuleConfigSpec {
            enabled,
            version: (version != 0).then_some(version),
            settings: settings.cloned(),
            ..Default::default()
        };
        let checked = self.settings.check(&spec);
        match checked.error {
            Some(error) => Err(error),
            // Deckhouse's validator keeps one warning, the last.
            None => Ok(checked.warnings.last().cloned().into_iter().collect()),
        }
    }
}
