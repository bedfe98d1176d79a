//! Reading YAML into Go structs (`Chart.yaml`, `requirements.yaml`, the heads of rendered
//! documents). `sigs.k8s.io/yaml` turns a scalar into the string a `string` field wants
//! using the scalar's YAML type (`1` → "1", `1.10` → "1.1"), so these readers need integers
//! kept apart from floats, which [`crate::yaml`] (Helm's values semantics) does not keep.
//!
//! Errors are Helm's, from [`crate::yaml::parse_document`]; the typed view comes from
//! serde-saphyr, and from the values view where serde-saphyr disagrees.

use go_template::Value;

/// Parses one document, keeping integers apart from floats. The error is Go's text.
pub(crate) fn parse_typed(text: &str) -> Result<serde_json::Value, String> {
    let v = crate::yaml::parse_document(text).map_err(|e| e.message().to_owned())?;
    if matches!(v, Value::Nil) {
        return Ok(serde_json::Value::Null);
    }
    Ok(serde_saphyr::from_str(text).unwrap_or_else(|_| v.to_json().unwrap_or_default()))
}

/// `toYaml` of a value.
pub(crate) fn to_yaml(v: &Value) -> String {
    crate::yaml::to_yaml(v).unwrap_or_default()
}
