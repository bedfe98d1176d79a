//! YAML reading, in one place so that the stand-in can be swapped for the encoders' exact
//! reader (Helm's `sigs.k8s.io/yaml` semantics: YAML 1.1 scalars, every number a float64).
//!
//! Stand-in: serde-saphyr into JSON, then [`Value::from_json`].

use go_template::{Map, Value};

/// Parses a values-like document (`values.yaml`, `Chart.yaml`, a `--values` file): a map,
/// or nothing. The error is the text after Helm's `cannot load values.yaml: `.
pub(crate) fn parse_values(text: &str) -> Result<Map, String> {
    match parse_document(text)? {
        Value::Nil => Ok(Map::new()),
        Value::Map(m) => Ok(m.borrow().clone()),
        other => Err(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&other)
        )),
    }
}

/// Parses one YAML document into a value (nil for an empty document).
pub(crate) fn parse_document(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Nil);
    }
    let json: serde_json::Value = serde_saphyr::from_str(text)
        .map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))?;
    Ok(Value::from_json(&json))
}

/// The JSON kind name Go's `encoding/json` uses in "cannot unmarshal X into …".
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Nil => "null",
        Value::Bool(_) => "bool",
        Value::Int(_) | Value::Int64(_) | Value::Float(_) => "number",
        Value::String(_) | Value::Bytes(_) => "string",
        Value::List(_) => "array",
        Value::Map(_) | Value::Object(_) => "object",
    }
}

/// Parses a document keeping YAML's own scalar kinds (integers apart from floats), for files
/// decoded into Go structs (`Chart.yaml`, `requirements.yaml`): `sigs.k8s.io/yaml` turns a
/// scalar into the string a `string` field wants using the YAML type (`1` → "1", `1.10` →
/// "1.1").
pub(crate) fn parse_typed(text: &str) -> Result<serde_json::Value, String> {
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Null);
    }
    serde_saphyr::from_str(text).map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))
}

/// `toYaml` of a value (stand-in until the encoders land: goes through JSON).
pub(crate) fn to_yaml(v: &Value) -> String {
    let json = v.to_json().unwrap_or(serde_json::Value::Null);
    serde_saphyr::to_string(&json).unwrap_or_default()
}

/// `toYaml`, `fromYaml`, `toJson`, `fromJson` (stand-ins until the encoders land).
pub(crate) fn encoding_funcs() -> go_template::FuncMap {
    use go_template::{Func, Signature, Ty};
    let mut f = go_template::FuncMap::new();
    f.insert(
        "toYaml".into(),
        Func::new(Signature::fixed(&[Ty::Any]), |a| {
            Ok(Value::from(to_yaml(&a[0]).trim_end_matches('\n').to_owned()))
        }),
    );
    f.insert(
        "fromYaml".into(),
        Func::new(Signature::fixed(&[Ty::String]), |a| {
            let mut m = Map::new();
            match parse_document(a[0].as_str().unwrap_or_default()) {
                Ok(Value::Map(v)) => return Ok(Value::Map(v)),
                Ok(_) => {}
                Err(e) => {
                    m.insert("Error".into(), Value::from(e));
                }
            }
            Ok(Value::map(m))
        }),
    );
    f
}
