//! A module's settings schema: `openapi/config-values.yaml`, an OpenAPI v3 schema.
//!
//! Two things the `jsonschema` crate does not do for OpenAPI schemas are done here:
//! - **Conversion** ([`to_json_schema`]): `nullable: true` becomes a `null` type (and a `null`
//!   enum member), and objects that declare `properties` but say nothing about
//!   `additionalProperties` are closed, as addon-operator closes them — a typo in a setting is an
//!   error, not a silently ignored key. `x-kubernetes-preserve-unknown-fields: true` keeps an
//!   object open.
//! - **Defaulting** ([`apply_defaults`]): every missing property with a `default` gets it, then
//!   the walk goes on inside it, so `{a: {default: {}, properties: {b: {default: 1}}}}` yields
//!   `{a: {b: 1}}`. Arrays are defaulted item by item, maps through `additionalProperties`.
//!   Present values (including `null`) are never replaced.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::Error;

/// The keyword holding a settings schema's version (`"1"` when absent).
pub const CONFIG_VERSION_KEY: &str = "x-config-version";

/// A compiled settings schema (cheap to clone).
#[derive(Clone, Debug)]
pub struct SettingsSchema {
    openapi: Value,
    validator: Arc<jsonschema::Validator>,
}

impl SettingsSchema {
    /// Reads `config-values.yaml` (YAML or JSON).
    pub fn from_yaml(text: &str) -> Result<Self, Error> {
        let openapi: Value = serde_saphyr::from_str(text).map_err(|e| Error::Parse {
            what: "openapi/config-values.yaml".into(),
            reason: e.to_string(),
        })?;
        Self::from_value(openapi)
    }

    /// Compiles an OpenAPI schema already read (an empty document is the empty object schema).
    pub fn from_value(openapi: Value) -> Result<Self, Error> {
        let openapi = match openapi {
            Value::Null => Value::Object(Map::new()),
            Value::Object(_) => openapi,
            other => {
                return Err(Error::Schema {
                    reason: format!("the schema must be an object, got {}", kind(&other)),
                });
            }
        };
        let validator =
            jsonschema::draft4::new(&to_json_schema(&openapi)).map_err(|e| Error::Schema {
                reason: e.to_string(),
            })?;
        Ok(Self {
            openapi,
            validator: Arc::new(validator),
        })
    }

    /// The schema as written.
    pub fn openapi(&self) -> &Value {
        &self.openapi
    }

    /// `x-config-version` (a number or a numeric string), 1 when absent or unreadable.
    pub fn config_version(&self) -> i64 {
        match self.openapi.get(CONFIG_VERSION_KEY) {
            Some(Value::Number(n)) => n.as_i64().unwrap_or(1),
            Some(Value::String(s)) => s.trim().parse().unwrap_or(1),
            _ => 1,
        }
        .max(1)
    }

    /// `values` with the schema's defaults merged in.
    pub fn defaulted(&self, values: &Value) -> Value {
        let mut values = if values.is_null() {
            Value::Object(Map::new())
        } else {
            values.clone()
        };
        apply_defaults(&self.openapi, &mut values);
        values
    }

    /// Validates `values` (already defaulted); every error as `<path>: <reason>`, in the order
    /// the validator found them. `prefix` names the root (the module's camelCase key).
    pub fn validate(&self, prefix: &str, values: &Value) -> Result<(), Vec<String>> {
        let errors: Vec<String> = self
            .validator
            .iter_errors(values)
            .map(|e| {
                let path = render_path(prefix, e.instance_path().as_str());
                format!("{path}: {e}")
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// A JSON pointer (`/a/b/0`) as a dotted path under `prefix` (`prefix.a.b[0]`).
fn render_path(prefix: &str, pointer: &str) -> String {
    let mut out = prefix.to_owned();
    for part in pointer.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&part);
        }
    }
    if out.is_empty() {
        "settings".into()
    } else {
        out
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The JSON schema (draft 4) equivalent of an OpenAPI v3 settings schema; see the module docs.
pub fn to_json_schema(openapi: &Value) -> Value {
    let Value::Object(node) = openapi else {
        return openapi.clone();
    };
    let mut out = Map::new();
    for (key, value) in node {
        let converted = match key.as_str() {
            "properties" | "patternProperties" | "definitions" => match value {
                Value::Object(children) => Value::Object(
                    children
                        .iter()
                        .map(|(k, v)| (k.clone(), to_json_schema(v)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" | "additionalItems" => match value {
                Value::Array(list) => Value::Array(list.iter().map(to_json_schema).collect()),
                other => to_json_schema(other),
            },
            "allOf" | "anyOf" | "oneOf" => match value {
                Value::Array(list) => Value::Array(list.iter().map(to_json_schema).collect()),
                other => other.clone(),
            },
            // OpenAPI-only keywords the validator must not see.
            "nullable" | "default" | "example" => continue,
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    if node.get("nullable") == Some(&Value::Bool(true)) {
        if let Some(Value::String(t)) = out.get("type").cloned() {
            out.insert(
                "type".into(),
                Value::Array(vec![Value::String(t), Value::String("null".into())]),
            );
        }
        if let Some(Value::Array(members)) = out.get_mut("enum")
            && !members.contains(&Value::Null)
        {
            members.push(Value::Null);
        }
    }
    let preserve = node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if node.contains_key("properties") && !node.contains_key("additionalProperties") && !preserve {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    Value::Object(out)
}

/// Merges the `default`s of the OpenAPI `schema` into `value`; see the module docs.
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    let Value::Object(schema) = schema else {
        return;
    };
    match value {
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(properties) = properties {
                for (key, child) in properties {
                    if !object.contains_key(key)
                        && let Some(default) = child.get("default")
                    {
                        object.insert(key.clone(), default.clone());
                    }
                    if let Some(v) = object.get_mut(key) {
                        apply_defaults(child, v);
                    }
                }
            }
            if let Some(extra @ Value::Object(_)) = schema.get("additionalProperties") {
                for (key, v) in object.iter_mut() {
                    if properties.is_some_and(|p| p.contains_key(key)) {
                        continue;
                    }
                    apply_defaults(extra, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema @ Value::Object(_)) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
