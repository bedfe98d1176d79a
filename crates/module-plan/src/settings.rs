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

    /// Validates `values` (already defaulted); every error worded as go-openapi's validator
    /// words it with addon-operator's root name and no location (`echo.replicas should be less
    /// than or equal to 2`, `echo.typo is a forbidden property`), in the order found.
    /// `prefix` names the root (the module's camelCase key).
    pub fn validate(&self, prefix: &str, values: &Value) -> Result<(), Vec<String>> {
        let errors: Vec<String> = self
            .validator
            .iter_errors(values)
            .flat_map(|e| {
                let path = render_path(prefix, e.instance_path().as_str());
                go_openapi_messages(&path, &e)
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// go-openapi's JSON type name of a value as Kubernetes decodes it (integers stay integers).
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A number as Go's `%v` prints it (`2`, not `2.0`).
fn go_number(value: &Value) -> String {
    match value.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        Some(f) => format!("{f}"),
        None => value.to_string(),
    }
}

/// A value inside Go's `%v` of a `[]interface{}`: strings bare, the rest as JSON.
fn go_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(_) => go_number(value),
        Value::Null => "<nil>".into(),
        other => other.to_string(),
    }
}

/// The go-openapi messages (errors package, "NoIn" variants) for one validation error.
fn go_openapi_messages(path: &str, e: &jsonschema::ValidationError<'_>) -> Vec<String> {
    use jsonschema::error::{TypeKind, ValidationErrorKind as K};
    let one = |m: String| vec![m];
    match e.kind() {
        K::Type { kind } => {
            let names: Vec<&str> = match kind {
                TypeKind::Single(t) => vec![t.as_str()],
                TypeKind::Multiple(set) => set
                    .iter()
                    .map(|t| t.as_str())
                    .filter(|t| *t != "null")
                    .collect(),
            };
            one(format!(
                "{path} must be of type {}: {:?}",
                names.join(","),
                go_type(e.instance())
            ))
        }
        K::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|key| format!("{path}.{key} is a forbidden property"))
            .collect(),
        K::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            one(format!("{path}.{name} is required"))
        }
        K::Enum { options } => {
            let values: Vec<String> = options
                .as_array()
                .map(|a| a.iter().map(go_value).collect())
                .unwrap_or_default();
            one(format!("{path} should be one of [{}]", values.join(" ")))
        }
        K::Constant { expected_value } => one(format!(
            "{path} should be one of [{}]",
            go_value(expected_value)
        )),
        K::Maximum { limit } => one(format!(
            "{path} should be less than or equal to {}",
            go_number(limit)
        )),
        K::ExclusiveMaximum { limit } => {
            one(format!("{path} should be less than {}", go_number(limit)))
        }
        K::Minimum { limit } => one(format!(
            "{path} should be greater than or equal to {}",
            go_number(limit)
        )),
        K::ExclusiveMinimum { limit } => one(format!(
            "{path} should be greater than {}",
            go_number(limit)
        )),
        K::MultipleOf { multiple_of } => one(format!(
            "{path} should be a multiple of {}",
            go_number(&Value::from(*multiple_of))
        )),
        K::MaxLength { limit } => one(format!("{path} should be at most {limit} chars long")),
        K::MinLength { limit } => one(format!("{path} should be at least {limit} chars long")),
        K::Pattern { pattern } => one(format!("{path} should match '{pattern}'")),
        K::MaxItems { limit } => one(format!("{path} should have at most {limit} items")),
        K::MinItems { limit } => one(format!("{path} should have at least {limit} items")),
        K::UniqueItems => one(format!("{path} shouldn't contain duplicates")),
        K::MaxProperties { limit } => one(format!("{path} should have at most {limit} properties")),
        K::MinProperties { limit } => {
            one(format!("{path} should have at least {limit} properties"))
        }
        K::AdditionalItems { .. } => one(format!("{path} can't have additional items")),
        K::Format { format } => one(format!(
            "{path} must be of type {format}: {:?}",
            go_value(e.instance())
        )),
        K::OneOfMultipleValid { .. } | K::OneOfNotValid { .. } => one(format!(
            "{path:?} must validate one and only one schema (oneOf)"
        )),
        K::AnyOf { .. } => one(format!(
            "{path:?} must validate at least one schema (anyOf)"
        )),
        K::Not { .. } => one(format!("{path:?} must not validate the schema (not)")),
        _ => one(format!("{path}: {e}")),
    }
}

/// How addon-operator reports a non-empty list of validation errors (hashicorp's multierror),
/// passed through Deckhouse's `cleanupMultilineError`, which joins the lines with a space in
/// front of each (so the text starts with a space and ends with two).
pub fn multierror_one_line(errors: &[String]) -> String {
    let head = match errors.len() {
        1 => "1 error occurred:".to_owned(),
        n => format!("{n} errors occurred:"),
    };
    let mut out = format!(" {head}");
    for e in errors {
        out.push_str(" * ");
        out.push_str(e);
    }
    out.push_str("  ");
    out
}

/// A JSON pointer (`/a/b/0`) as go-openapi's dotted path under `prefix` (`prefix.a.b.0`).
fn render_path(prefix: &str, pointer: &str) -> String {
    let mut out = prefix.to_owned();
    for part in pointer.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&part);
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
