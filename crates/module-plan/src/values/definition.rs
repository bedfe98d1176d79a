//! What a module's files say about its values: the settings (`openapi/config-values.yaml` and
//! conversions, [`ModuleSettings`]), the values schema (`openapi/values.yaml`), the schema the
//! chart's values must meet (the values schema with `x-required-for-helm` as `required`), and
//! the static values (the module's `values.yaml`).
//!
//! The values schema is prepared as addon-operator prepares it: with `x-extend: {schema:
//! config-values.yaml}` it takes the config schema's properties, pattern properties,
//! definitions, `x-` extensions and `required` (its own win), title and description; then it is
//! closed like the config schema (see [`crate::settings`]).

use serde_json::{Map, Value, json};

use crate::Error;
use crate::config::ModuleSettings;
use crate::settings::SettingsSchema;

/// The keyword extending the values schema with the config-values schema.
pub const X_EXTEND: &str = "x-extend";
/// The keyword listing properties required only when rendering the chart.
pub const X_REQUIRED_FOR_HELM: &str = "x-required-for-helm";

/// A module's values files, compiled (cheap to share behind an `Arc`).
#[derive(Clone, Debug)]
pub struct ValuesDefinition {
    settings: ModuleSettings,
    values: Option<SettingsSchema>,
    helm: Option<SettingsSchema>,
    static_values: Value,
}

impl ValuesDefinition {
    /// The definition from the module's settings (already read from `config-values.yaml` and
    /// the conversions), the text of `openapi/values.yaml` and the text of `values.yaml`, when
    /// the module has them. `values.yaml` may hold the values under the module's camelCase key
    /// or directly.
    pub fn new(
        settings: ModuleSettings,
        values_schema: Option<&str>,
        static_values: Option<&str>,
    ) -> Result<Self, Error> {
        let values_openapi = values_schema
            .map(|text| parse_yaml("openapi/values.yaml", text))
            .transpose()?;
        let static_values = match static_values {
            Some(text) => static_section(&settings.values_key(), parse_yaml("values.yaml", text)?)?,
            None => Value::Object(Map::new()),
        };
        let mut definition = Self {
            settings,
            values: None,
            helm: None,
            static_values,
        };
        if let Some(openapi) = values_openapi {
            definition.compile_values(openapi)?;
        }
        Ok(definition)
    }

    /// The same definition with a `registry` object (`base`, `dockercfg`, `scheme`, `ca`) allowed
    /// in the values schema, for modules whose values carry the registry of their source (what
    /// addon-operator's `InjectRegistrySpec` does).
    pub fn with_registry_spec(mut self) -> Result<Self, Error> {
        if let Some(values) = &self.values {
            let mut openapi = values.openapi().clone();
            if let Some(Value::Object(properties)) = openapi.get_mut("properties") {
                properties.insert("registry".into(), registry_schema());
            } else if let Value::Object(root) = &mut openapi {
                root.insert("properties".into(), json!({"registry": registry_schema()}));
            }
            self.compile_values(openapi)?;
        }
        Ok(self)
    }

    fn compile_values(&mut self, openapi: Value) -> Result<(), Error> {
        let extended = extend(openapi, self.settings.schema().map(SettingsSchema::openapi));
        let helm = required_for_helm(extended.clone());
        self.values = Some(SettingsSchema::from_value(extended)?);
        self.helm = Some(SettingsSchema::from_value(helm)?);
        Ok(())
    }

    /// The module name (kebab-case, or `global`).
    pub fn module(&self) -> &str {
        self.settings.module()
    }

    /// The values key: the camelCase module name, or `global`.
    pub fn key(&self) -> String {
        self.settings.values_key()
    }

    /// The settings: config-values schema and conversions.
    pub fn settings(&self) -> &ModuleSettings {
        &self.settings
    }

    /// The values schema (`openapi/values.yaml`, extended), if the module has one.
    pub fn values_schema(&self) -> Option<&SettingsSchema> {
        self.values.as_ref()
    }

    /// The static values (`values.yaml`, the module's section).
    pub fn static_values(&self) -> &Value {
        &self.static_values
    }

    /// Config values with the config schema's defaults, checked against it.
    pub fn validate_config_values(&self, config_values: &Value) -> Result<(), Vec<String>> {
        match self.settings.schema() {
            Some(schema) => schema.validate(&self.key(), &schema.defaulted(config_values)),
            None => Ok(()),
        }
    }

    /// Values checked against the values schema (none: valid).
    pub fn validate_values(&self, values: &Value) -> Result<(), Vec<String>> {
        match &self.values {
            Some(schema) => schema.validate(&self.key(), values),
            None => Ok(()),
        }
    }

    /// Values checked against the values schema with `x-required-for-helm` (none: valid).
    pub fn validate_helm_values(&self, values: &Value) -> Result<(), Vec<String>> {
        match &self.helm {
            Some(schema) => schema.validate(&self.key(), values),
            None => Ok(()),
        }
    }
}

fn parse_yaml(what: &str, text: &str) -> Result<Value, Error> {
    let value: Value = serde_saphyr::from_str(text).map_err(|e| Error::Parse {
        what: what.into(),
        reason: e.to_string(),
    })?;
    Ok(value)
}

/// The module's part of `values.yaml`: the section under its key when there is one, else the
/// whole document. An empty file is no values.
fn static_section(key: &str, document: Value) -> Result<Value, Error> {
    match document {
        Value::Null => Ok(Value::Object(Map::new())),
        Value::Object(mut map) => match map.remove(key) {
            Some(Value::Object(section)) => Ok(Value::Object(section)),
            Some(Value::Null) => Ok(Value::Object(Map::new())),
            Some(other) => Err(Error::Parse {
                what: "values.yaml".into(),
                reason: format!("the {key:?} section must be a map, got {other}"),
            }),
            None => Ok(Value::Object(map)),
        },
        other => Err(Error::Parse {
            what: "values.yaml".into(),
            reason: format!("values must be a map, got {other}"),
        }),
    }
}

fn registry_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "base": {"type": "string"},
            "dockercfg": {"type": "string"},
            "scheme": {"type": "string"},
            "ca": {"type": "string"},
        }
    })
}

/// The values schema extended with the config-values schema when it says `x-extend`.
pub(crate) fn extend(mut schema: Value, parent: Option<&Value>) -> Value {
    let (Some(Value::Object(parent)), Value::Object(node)) = (parent, &mut schema) else {
        return schema;
    };
    let wants = node
        .get(X_EXTEND)
        .and_then(|x| x.get("schema"))
        .is_some_and(|s| !s.is_null());
    if !wants {
        return schema;
    }
    for key in ["properties", "patternProperties", "definitions"] {
        let mut merged = parent
            .get(key)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(own) = node.get(key).and_then(Value::as_object) {
            merged.extend(own.clone());
        }
        if !merged.is_empty() {
            node.insert(key.into(), Value::Object(merged));
        }
    }
    for (key, value) in parent {
        if key.starts_with("x-") && !node.contains_key(key) {
            node.insert(key.clone(), value.clone());
        }
    }
    let mut required: Vec<Value> = parent
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for name in node
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        if !required.contains(&name) {
            required.push(name);
        }
    }
    if !required.is_empty() {
        node.insert("required".into(), Value::Array(required));
    }
    for key in ["title", "description"] {
        let own = node.get(key).and_then(Value::as_str).unwrap_or_default();
        if own.is_empty()
            && let Some(inherited) = parent.get(key)
        {
            node.insert(key.into(), inherited.clone());
        }
    }
    schema
}

/// `x-required-for-helm` (a name or a list) added to `required`, at the root and through
/// `properties` (addon-operator's `RequiredForHelmTransformer`).
pub(crate) fn required_for_helm(mut schema: Value) -> Value {
    add_required_for_helm(&mut schema);
    schema
}

fn add_required_for_helm(schema: &mut Value) {
    let Value::Object(node) = schema else { return };
    let extra: Vec<Value> = match node.get(X_REQUIRED_FOR_HELM) {
        Some(Value::String(name)) => vec![Value::String(name.clone())],
        Some(Value::Array(names)) => names.iter().filter(|n| n.is_string()).cloned().collect(),
        _ => Vec::new(),
    };
    if !extra.is_empty() {
        let mut required = node
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for name in extra {
            if !required.contains(&name) {
                required.push(name);
            }
        }
        node.insert("required".into(), Value::Array(required));
    }
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        for child in properties.values_mut() {
            add_required_for_helm(child);
        }
    }
}
