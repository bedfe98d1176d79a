//! YAML as Helm reads and writes it through `sigs.k8s.io/yaml` (goyaml.v2 underneath, every
//! value passing through `encoding/json`): values files, `fromYaml`, `toYaml`, and the
//! rendered documents Helm reads back to sort them.

mod analyze;
mod decode;
mod emit;
mod head;
mod resolve;

pub(crate) use decode::format_float32_g;
use go_template::{Map, Value};

pub use head::{ManifestHead, ManifestMetadata, parse_head};

/// A YAML document Helm could not read; the text is Go's `err.Error()` (for example
/// `error converting YAML to JSON: yaml: line 2: did not find expected key`). Helm's callers
/// put their own prefix before it (`cannot load values.yaml: `, `YAML parse error on FILE: `).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct YamlError {
    message: String,
}

impl YamlError {
    /// A goyaml error (syntax, aliases, tags).
    fn yaml(msg: impl AsRef<str>) -> YamlError {
        YamlError {
            message: format!("error converting YAML to JSON: yaml: {}", msg.as_ref()),
        }
    }

    /// An error converting goyaml's result to JSON (a key JSON cannot carry, NaN).
    fn convert(msg: impl AsRef<str>) -> YamlError {
        YamlError {
            message: format!("error converting YAML to JSON: {}", msg.as_ref()),
        }
    }

    /// An error decoding the JSON into the target type.
    fn unmarshal(msg: impl AsRef<str>) -> YamlError {
        YamlError {
            message: format!(
                "error unmarshaling JSON: while decoding JSON: {}",
                msg.as_ref()
            ),
        }
    }

    /// Go's error text.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Decodes YAML as `sigs.k8s.io/yaml.Unmarshal` into an `interface{}`: the first document
/// only, YAML 1.1 scalars as goyaml.v2 resolves them, every number a `float64`, keys made
/// strings. An empty document is `Nil`.
pub fn parse_document(text: &str) -> Result<Value, YamlError> {
    match decode::parse_first(text)? {
        None => Ok(Value::Nil),
        Some(y) => decode::to_value(&y),
    }
}

/// Decodes a document as [`parse_document`] does (same errors), but into JSON that keeps
/// integers apart from floats: what `sigs.k8s.io/yaml` hands a Go struct (`Chart.yaml`,
/// `requirements.yaml`), whose string fields take an integer's digits (`1` → "1") and a
/// float's shortest form (`1.10` → "1.1").
pub(crate) fn parse_typed(text: &str) -> Result<serde_json::Value, YamlError> {
    match decode::parse_first(text)? {
        None => Ok(serde_json::Value::Null),
        Some(y) => {
            decode::to_value(&y)?;
            Ok(decode::to_typed_json(&y))
        }
    }
}

/// Decodes a values file (`values.yaml`, `--values`) as Helm does: into a
/// `map[string]interface{}`. An empty file (or `null`) is an empty map; any other non-mapping
/// document is Go's type error.
pub fn parse_values(text: &str) -> Result<Map, YamlError> {
    match parse_document(text)? {
        Value::Nil => Ok(Map::new()),
        Value::Map(m) => Ok(m.borrow().clone()),
        other => Err(YamlError::unmarshal(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&other)
        ))),
    }
}

/// Decodes YAML into a `[]interface{}` (Helm's `fromYamlArray`). `null` is an empty list.
pub fn parse_list(text: &str) -> Result<Vec<Value>, YamlError> {
    match parse_document(text)? {
        Value::Nil => Ok(Vec::new()),
        Value::List(l) => Ok((*l).clone()),
        other => Err(YamlError::unmarshal(format!(
            "json: cannot unmarshal {} into Go value of type []interface {{}}",
            json_kind(&other)
        ))),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::Float(_) | Value::Int(_) | Value::Int64(_) => "number",
        Value::String(_) => "string",
        Value::List(_) => "array",
        _ => "object",
    }
}

/// `sigs.k8s.io/yaml.Marshal(v)`: the YAML text with its trailing newline, or Go's error.
pub fn to_yaml(v: &Value) -> Result<String, String> {
    emit::marshal(v)
}

/// gopkg.in/yaml.v3's encoder with a 2-space indent (Helm's `toYamlPretty`), trailing newline
/// included.
pub fn to_yaml_pretty(v: &Value) -> Result<String, String> {
    emit::marshal_v3(v)
}

#[cfg(test)]
mod tests;
