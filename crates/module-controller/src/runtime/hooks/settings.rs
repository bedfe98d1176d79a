//! A hook's config values patch saved where the settings live, as addon-operator's config
//! manager saves them through Deckhouse's ModuleConfig backend: the patched config values
//! become the ModuleConfig's `spec.settings` at the latest settings version (the values are
//! converted to it), the ModuleConfig created when there is none. The decision is pure
//! ([`config_write`]); the write is the edge.

use api::module_config::{ModuleConfig, ModuleConfigSpec};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use module_plan::values::ModuleValues;
use serde_json::{Value, json};

use super::Runtime;
use crate::Error;

/// What saving config values does to a module's ModuleConfig.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigWrite {
    /// The ModuleConfig already holds them.
    Unchanged,
    /// No ModuleConfig: one is created with this spec.
    Create(Value),
    /// A JSON patch (RFC 6902) of the existing ModuleConfig: settings replaced whole (keys a
    /// hook removed must go), version set.
    Patch(Value),
}

/// How `settings` (config values of settings version `version`) reach a ModuleConfig whose
/// spec is `current` (`None`: there is none). Pure.
pub fn config_write(
    current: Option<&ModuleConfigSpec>,
    settings: &Value,
    version: i64,
) -> ConfigWrite {
    let empty = settings.as_object().is_none_or(|m| m.is_empty());
    let Some(spec) = current else {
        if empty {
            return ConfigWrite::Unchanged;
        }
        return ConfigWrite::Create(json!({"version": version, "settings": settings}));
    };
    let same_settings = match &spec.settings {
        Some(s) => s == settings,
        None => empty,
    };
    if same_settings && (empty || spec.version == Some(version)) {
        return ConfigWrite::Unchanged;
    }
    ConfigWrite::Patch(json!([
        {"op": "add", "path": "/spec/settings", "value": settings},
        {"op": "add", "path": "/spec/version", "value": version},
    ]))
}

impl Runtime {
    /// Saves `values`' config values to the ModuleConfig of its module (`global` for global
    /// values).
    pub(crate) async fn save_config_values(&self, values: &ModuleValues) -> Result<(), Error> {
        let name = values.module().to_owned();
        let api: Api<ModuleConfig> = Api::all(self.client.clone());
        let current = api
            .get_opt(&name)
            .await
            .map_err(|e| Error::kube(format!("get ModuleConfig {name}"), e))?;
        match config_write(
            current.as_ref().map(|c| &c.spec),
            values.config_values(),
            values.settings_version(),
        ) {
            ConfigWrite::Unchanged => Ok(()),
            ConfigWrite::Create(spec) => {
                let object: ModuleConfig = serde_json::from_value(json!({
                    "apiVersion": "deckhouse.io/v1alpha1",
                    "kind": "ModuleConfig",
                    "metadata": {"name": name},
                    "spec": spec,
                }))
                .map_err(|e| Error::Render {
                    module: name.clone(),
                    message: format!("config values as a ModuleConfig: {e}"),
                })?;
                api.create(&PostParams::default(), &object)
                    .await
                    .map_err(|e| Error::kube(format!("create ModuleConfig {name}"), e))?;
                tracing::info!(module = %name, "config values saved to a new ModuleConfig");
                Ok(())
            }
            ConfigWrite::Patch(ops) => {
                let patch: json_patch::Patch =
                    serde_json::from_value(ops).map_err(|e| Error::Render {
                        module: name.clone(),
                        message: format!("config values patch: {e}"),
                    })?;
                api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                    .await
                    .map_err(|e| Error::kube(format!("patch ModuleConfig {name}"), e))?;
                tracing::info!(module = %name, "config values saved to the ModuleConfig");
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: Value) -> ModuleConfigSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn where_config_values_go() {
        let patch = |settings: Value, version: i64| {
            ConfigWrite::Patch(json!([
                {"op": "add", "path": "/spec/settings", "value": settings},
                {"op": "add", "path": "/spec/version", "value": version},
            ]))
        };
        let rows = [
            // No ModuleConfig: created, unless there is nothing to save.
            (
                None,
                json!({"a": 1}),
                2,
                ConfigWrite::Create(json!({"version": 2, "settings": {"a": 1}})),
            ),
            (None, json!({}), 2, ConfigWrite::Unchanged),
            // Same settings at the same version.
            (
                Some(spec(
                    json!({"enabled": true, "version": 2, "settings": {"a": 1}}),
                )),
                json!({"a": 1}),
                2,
                ConfigWrite::Unchanged,
            ),
            // No settings and none to save.
            (
                Some(spec(json!({"enabled": true}))),
                json!({}),
                1,
                ConfigWrite::Unchanged,
            ),
            // Changed, removed or converted: replaced whole at the latest version.
            (
                Some(spec(json!({"version": 2, "settings": {"a": 1}}))),
                json!({"a": 2}),
                2,
                patch(json!({"a": 2}), 2),
            ),
            (
                Some(spec(json!({"version": 2, "settings": {"a": 1, "b": 1}}))),
                json!({"a": 1}),
                2,
                patch(json!({"a": 1}), 2),
            ),
            (
                Some(spec(json!({"version": 1, "settings": {"a": 1}}))),
                json!({"a": 1}),
                2,
                patch(json!({"a": 1}), 2),
            ),
            (
                Some(spec(json!({"enabled": true}))),
                json!({"a": 1}),
                1,
                patch(json!({"a": 1}), 1),
            ),
        ];
        for (current, settings, version, want) in rows {
            assert_eq!(
                config_write(current.as_ref(), &settings, version),
                want,
                "{current:?} {settings}"
            );
        }
    }
}
