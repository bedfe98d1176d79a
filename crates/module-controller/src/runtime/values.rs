//! The values a chart and its hooks see, assembled by `module_plan::values` as addon-operator
//! assembles them: `global` (the global ModuleConfig's settings, the runtime's base facts,
//! `enabledModules`, `discovery`) and the module's own (static values, schema defaults, config
//! values, the hooks' patches), each checked against its schemas. This room holds the runtime's
//! side: what it knows becomes [`GlobalFacts`], a module's files become a
//! [`ValuesDefinition`], and the values of the last run are kept so that hook patches survive
//! a settings change.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use api::module_config::ModuleConfigSpec;
use module_plan::config::ModuleSettings;
use module_plan::values::{
    Discovery, GlobalFacts, GlobalRegistry, ModuleValues, ValuesDefinition, ValuesError,
};
use serde_json::{Map, Value};

use crate::Error;

/// What Deckhouse puts under `global` besides the settings: `base` is what the caller knows
/// (e.g. `clusterConfiguration`), merged last; `enabled` the enabled modules; the API server's
/// version goes to `discovery.kubernetesVersion`. Pure.
pub fn global_facts(
    base: &Value,
    enabled: &[String],
    kubernetes_version: Option<&str>,
) -> GlobalFacts {
    let mut extra = Map::new();
    if let Value::Object(map) = base {
        extra = map.clone();
    }
    // The cluster domain the caller's cluster configuration names is what Deckhouse
    // discovers as `discovery.clusterDomain`.
    let cluster_domain = extra
        .get("clusterConfiguration")
        .and_then(|c| c.get("clusterDomain"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut discovery = Discovery {
        kubernetes_version: kubernetes_version.map(str::to_owned),
        cluster_domain,
        ..Default::default()
    };
    // `discovery` given by the caller goes under the discovered facts.
    if let Some(Value::Object(d)) = extra.remove("discovery") {
        discovery.extra = d;
    }
    GlobalFacts {
        enabled_modules: enabled.to_vec(),
        discovery,
        extra,
        ..Default::default()
    }
}

/// The Secret the registry module keeps with the registry modules' images come from.
pub const REGISTRY_SECRET: (&str, &str) = ("d8-system", "deckhouse-registry");

/// `global.modulesImages.registry` from Secret `d8-system/deckhouse-registry`'s data, as
/// Deckhouse's registry discovery reads it: `base` = `address` + `path`, `dockercfg` = the
/// base64 of `.dockerconfigjson`, `scheme` (`https` when absent), `CA` from `ca`. `None`
/// without `.dockerconfigjson` or `address` (Deckhouse's hook then fails; the values keep
/// no registry). Pure.
pub fn registry_from_secret(
    data: &std::collections::BTreeMap<String, Vec<u8>>,
) -> Option<GlobalRegistry> {
    use base64::Engine;
    let text = |key: &str| {
        data.get(key)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let dockercfg = data.get(".dockerconfigjson").filter(|v| !v.is_empty())?;
    let address = text("address").filter(|a| !a.is_empty())?;
    let path = text("path").unwrap_or_default();
    Some(GlobalRegistry {
        base: Some(format!("{address}{path}")),
        dockercfg: Some(base64::engine::general_purpose::STANDARD.encode(dockercfg)),
        scheme: Some(text("scheme").unwrap_or_else(|| "https".to_owned())),
        ca: Some(text("ca").unwrap_or_default()),
        address: Some(address),
        path: Some(path),
    })
}

/// A module's values for this run: the values of its last run (hook patches kept) moved to its
/// current files and ModuleConfig, or built afresh. Pure.
pub fn next_module_values(
    last: Option<&ModuleValues>,
    definition: Arc<ValuesDefinition>,
    config: Option<&ModuleConfigSpec>,
) -> Result<ModuleValues, ValuesError> {
    match last {
        Some(last) => last.with_definition(definition)?.with_config(config),
        None => ModuleValues::build(definition, config, None),
    }
}

/// The definition of `global` (no schemas in `d8`: Deckhouse's global ones are not shipped).
pub fn global_definition() -> Result<Arc<ValuesDefinition>, Error> {
    let settings = ModuleSettings::from_files("global", None, &[])?;
    Ok(Arc::new(ValuesDefinition::new(settings, None, None)?))
}

/// Reads a module's values files (`openapi/values.yaml`, `values.yaml`) next to its settings.
pub fn module_definition(
    dir: &Path,
    settings: &ModuleSettings,
) -> Result<Arc<ValuesDefinition>, Error> {
    let read = |rel: &str| -> Result<Option<String>, Error> {
        let path = dir.join(rel);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_file() => std::fs::read_to_string(&path)
                .map(Some)
                .map_err(|e| Error::io("read", &path, e)),
            _ => Ok(None),
        }
    };
    let schema = read("openapi/values.yaml")?;
    let statics = read("values.yaml")?;
    Ok(Arc::new(ValuesDefinition::new(
        settings.clone(),
        schema.as_deref(),
        statics.as_deref(),
    )?))
}

/// The values of every module's last run, and of `global`.
#[derive(Debug, Default)]
pub struct ValuesStore {
    modules: Mutex<HashMap<String, ModuleValues>>,
    global: Mutex<Option<ModuleValues>>,
}

impl ValuesStore {
    /// A module's values of its last run.
    pub fn module(&self, module: &str) -> Option<ModuleValues> {
        self.modules.lock().ok()?.get(module).cloned()
    }

    /// Keeps a module's values.
    pub fn set_module(&self, values: ModuleValues) {
        if let Ok(mut m) = self.modules.lock() {
            m.insert(values.module().to_owned(), values);
        }
    }

    /// Forgets a module's values (it was disabled).
    pub fn forget(&self, module: &str) {
        if let Ok(mut m) = self.modules.lock() {
            m.remove(module);
        }
    }

    /// The `global` values.
    pub fn global(&self) -> Option<ModuleValues> {
        self.global.lock().ok()?.clone()
    }

    /// Keeps the `global` values.
    pub fn set_global(&self, values: ModuleValues) {
        if let Ok(mut g) = self.global.lock() {
            *g = Some(values);
        }
    }
}

/// A values error as the runtime reports it (addon-operator's message).
pub fn values_error(e: ValuesError) -> Error {
    Error::Values {
        module: e.module().to_owned(),
        message: e.status_message(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_registry_secret_becomes_modules_images_registry() {
        use std::collections::BTreeMap;
        let data = |pairs: &[(&str, &str)]| -> BTreeMap<String, Vec<u8>> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                .collect()
        };
        let cfg = r#"{"auths":{"r.example.com":{"auth":"dTpw"}}}"#;
        let full = registry_from_secret(&data(&[
            (".dockerconfigjson", cfg),
            ("address", "r.example.com"),
            ("path", "/deckhouse/ce"),
            ("scheme", "http"),
            ("ca", "PEM"),
        ]))
        .unwrap();
        assert_eq!(full.base.as_deref(), Some("r.example.com/deckhouse/ce"));
        assert_eq!(
            full.dockercfg.as_deref(),
            Some("eyJhdXRocyI6eyJyLmV4YW1wbGUuY29tIjp7ImF1dGgiOiJkVHB3In19fQ==")
        );
        assert_eq!(full.scheme.as_deref(), Some("http"));
        assert_eq!(full.ca.as_deref(), Some("PEM"));
        assert_eq!(full.address.as_deref(), Some("r.example.com"));
        assert_eq!(full.path.as_deref(), Some("/deckhouse/ce"));
        // Defaults: https, no CA, no path.
        let least =
            registry_from_secret(&data(&[(".dockerconfigjson", cfg), ("address", "r")])).unwrap();
        assert_eq!(least.base.as_deref(), Some("r"));
        assert_eq!(least.scheme.as_deref(), Some("https"));
        assert_eq!(least.ca.as_deref(), Some(""));
        // Without the docker config or the address: no registry.
        assert_eq!(registry_from_secret(&data(&[("address", "r")])), None);
        assert_eq!(
            registry_from_secret(&data(&[(".dockerconfigjson", cfg)])),
            None
        );
    }

    #[test]
    fn global_facts_become_values() {
        let base = json!({"clusterConfiguration": {"clusterDomain": "cluster.local"}, "discovery": {"a": 1}});
        let facts = global_facts(&base, &["b".into(), "a".into(), "a".into()], Some("1.29"));
        let global =
            ModuleValues::build_global(global_definition().unwrap(), None, &facts).unwrap();
        assert_eq!(
            global.values(),
            &json!({
                "clusterConfiguration": {"clusterDomain": "cluster.local"},
                "enabledModules": ["a", "b"],
                "discovery": {"a": 1, "kubernetesVersion": "1.29", "clusterDomain": "cluster.local"},
            })
        );
        let empty = global_facts(&Value::Null, &[], None);
        assert_eq!(empty.to_values(), json!({}));
    }

    #[test]
    fn hook_patches_survive_a_settings_change() {
        let schema = "type: object\nproperties:\n  message: {type: string, default: hi}\n";
        let settings = ModuleSettings::from_files("echo", Some(schema), &[]).unwrap();
        let definition = Arc::new(ValuesDefinition::new(settings, None, None).unwrap());
        let first = next_module_values(None, definition.clone(), None).unwrap();
        assert_eq!(first.values(), &json!({"message": "hi"}));
        let patch = module_plan::values::ValuesPatch::parse(
            br#"[{"op":"add","path":"/echo/internal","value":{"x":1}}]"#,
        )
        .unwrap();
        let patched = first.apply_values_patch(&patch).unwrap();
        let spec: ModuleConfigSpec =
            serde_json::from_value(json!({"version": 1, "settings": {"message": "bye"}})).unwrap();
        let next = next_module_values(Some(&patched), definition.clone(), Some(&spec)).unwrap();
        assert_eq!(
            next.values(),
            &json!({"message": "bye", "internal": {"x": 1}})
        );
        // A refused setting: Deckhouse's message, nothing kept.
        let bad: ModuleConfigSpec =
            serde_json::from_value(json!({"version": 1, "settings": {"message": 5}})).unwrap();
        let e = next_module_values(Some(&next), definition, Some(&bad)).unwrap_err();
        assert!(
            e.status_message().contains("message"),
            "{}",
            e.status_message()
        );
    }
}
