//! Custom-resource schemas: OpenAPI v3 (`openAPIV3Schema`) validation, defaulting and pruning.
//!
//! The CRD schema is converted to JSON Schema draft 4 before compiling (OpenAPI's `nullable`
//! and `x-kubernetes-int-or-string` have no draft-4 meaning), defaults are applied by our own
//! walker, and unknown fields are pruned unless `x-kubernetes-preserve-unknown-fields` is set,
//! as the Kubernetes API server does for structural schemas. Pure: no I/O.

use serde_json::{Map, Value};

mod list_type;

/// One field-level problem, shaped like a Kubernetes `StatusCause`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueNotSupported`, `FieldValueInvalid`, …
    pub reason: String,
    /// The field path, e.g. `spec.mode`.
    pub field: String,
    /// The human message, without the field prefix.
    pub message: String,
}

impl Cause {
    /// The `field: message` form Kubernetes joins into a Status message.
    pub fn render(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }
}

/// A compiled structural schema of one CRD version.
pub(crate) struct Structural {
    raw: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for Structural {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Structural")
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

/// Rewrites an OpenAPI v3 schema into JSON Schema draft 4.
fn to_draft4(schema: &Value) -> Value {
    let Value::Object(m) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let v = match k.as_str() {
            "properties" | "patternProperties" | "definitions" => match v {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(pk, pv)| (pk.clone(), to_draft4(pv)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" => to_draft4(v),
            "allOf" | "anyOf" | "oneOf" => match v {
                Value::Array(items) => Value::Array(items.iter().map(to_draft4).collect()),
                other => other.clone(),
            },
            // Formats are advisory here; `description`/`example` and `x-*` are inert.
            "format" | "example" | "externalDocs" => continue,
            "required" if v.as_array().is_some_and(Vec::is_empty) => continue,
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if m.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
        out.remove("type");
        if !out.contains_key("anyOf") {
            out.insert(
                "anyOf".into(),
                serde_json::json!([{"type": "integer"}, {"type": "string"}]),
            );
        }
    }
    if m.get("nullable").and_then(Value::as_bool) == Some(true) {
        if let Some(Value::String(t)) = out.get("type").cloned() {
            out.insert("type".into(), serde_json::json!([t, "null"]));
        } else if out.contains_key("anyOf") || out.contains_key("oneOf") {
            // A nullable junction: accept null besides whatever the branches accept.
            let inner = Value::Object(std::mem::take(&mut out));
            out.insert("anyOf".into(), serde_json::json!([{"type": "null"}, inner]));
        }
        if let Some(Value::Array(e)) = out.get_mut("enum")
            && !e.contains(&Value::Null)
        {
            e.push(Value::Null);
        }
    }
    Value::Object(out)
}

fn is_true(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// Turns a JSON pointer into a Kubernetes field path (`spec.items[0].name`).
fn field_path(pointer: &str, obj: &Value) -> String {
    let mut out = String::new();
    let mut cur = Some(obj);
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        match cur {
            Some(Value::Array(a)) => {
                out.push_str(&format!("[{seg}]"));
                cur = seg.parse::<usize>().ok().and_then(|i| a.get(i));
            }
            _ => {
                if !out.is_empty() {
                    out.push('.');
                }
                cur = cur.and_then(|c| c.get(&seg));
                out.push_str(&seg);
            }
        }
    }
    out
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Structural {
    /// Compiles an `openAPIV3Schema`; the error says why it is unusable.
    pub(crate) fn compile(openapi: &Value) -> Result<Self, String> {
        if !openapi.is_object() {
            return Err("openAPIV3Schema must be an object".into());
        }
        if let Some(t) = openapi.get("type")
            && t != "object"
        {
            return Err("openAPIV3Schema.type: Invalid value: must be object at the root".into());
        }
        let validator = jsonschema::draft4::options()
            .should_validate_formats(false)
            .build(&to_draft4(openapi))
            .map_err(|e| format!("openAPIV3Schema is not a valid schema: {e}"))?;
        Ok(Self {
            raw: openapi.clone(),
            validator,
        })
    }

    /// The original OpenAPI schema.
    pub(crate) fn raw(&self) -> &Value {
        &self.raw
    }

    /// Fills in `default`s for missing fields, recursively, as Kubernetes does on every write.
    pub(crate) fn apply_defaults(&self, obj: &mut Value) {
        default_walk(&self.raw, obj);
    }

    /// Removes fields the schema does not know; returns their paths.
    pub(crate) fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        if let (Value::Object(m), Some(Value::Object(props))) =
            (&mut *obj, self.raw.get("properties"))
        {
            if !is_true(&self.raw, "x-kubernetes-preserve-unknown-fields") {
                m.retain(|k, _| {
                    let keep = props.contains_key(k)
                        || ["apiVersion", "kind", "metadata"].contains(&k.as_str());
                    if !keep {
                        pruned.push(k.clone());
                    }
                    keep
                });
            }
            for (k, v) in m.iter_mut() {
                if k == "metadata" {
                    continue;
                }
                if let Some(s) = props.get(k) {
                    prune_walk(s, v, k, &mut pruned);
                }
            }
        }
        pruned
    }

    /// Validates against the schema; the causes carry Kubernetes-style field paths and messages.
    pub(crate) fn validate(&self, obj: &Value) -> Vec<Cause> {
        let mut causes: Vec<Cause> = self
            .validator
            .iter_errors(obj)
            .map(|e| {
                let path = field_path(e.instance_path().as_str(), obj);
                let inst = e.instance();
                match e.kind() {
                    jsonschema::error::ValidationErrorKind::Required { property } => {
                        let p = property.as_str().unwrap_or_default();
                        Cause {
                            reason: "FieldValueRequired".into(),
                            field: if path.is_empty() {
                                p.to_string()
                            } else {
                                format!("{path}.{p}")
                            },
                            message: "Required value".into(),
                        }
                    }
                    jsonschema::error::ValidationErrorKind::Enum { options } => {
                        let supported = options
                            .as_array()
                            .map(|o| {
                                o.iter()
                                    .filter(|v| !v.is_null())
                                    .map(show)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            })
                            .unwrap_or_default();
                        Cause {
                            reason: "FieldValueNotSupported".into(),
                            field: path,
                            message: format!(
                                "Unsupported value: {}: supported values: {supported}",
                                show(inst)
                            ),
                        }
                    }
                    jsonschema::error::ValidationErrorKind::Type { .. } => {
                        let want = e
                            .schema_path()
                            .as_str()
                            .rsplit_once('/')
                            .map(|(parent, _)| parent.to_string())
                            .and_then(|p| {
                                let p = if p.is_empty() { String::new() } else { p };
                                self.raw
                                    .pointer(&format!("{p}/type"))
                                    .and_then(Value::as_str)
                                    .map(str::to_string)
                            })
                            .unwrap_or_else(|| "the declared type".into());
                        Cause {
                            reason: "FieldValueTypeInvalid".into(),
                            message: format!(
                                "Invalid value: {:?}: {} in body must be of type {want}: {:?}",
                                type_name(inst),
                                path,
                                type_name(inst)
                            ),
                            field: path,
                        }
                    }
                    _ => Cause {
                        reason: "FieldValueInvalid".into(),
                        message: format!("Invalid value: {}: {}", show(inst), e.masked()),
                        field: path,
                    },
                }
            })
            .collect();
        causes.extend(list_type::duplicates(&self.raw, obj));
        causes.dedup();
        causes
    }
}

fn default_walk(schema: &Value, v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (k, ps) in props {
                    let Some(d) = ps.get("default") else { continue };
                    let missing = match m.get(k) {
                        None => true,
                        Some(Value::Null) => !is_true(ps, "nullable"),
                        Some(_) => false,
                    };
                    if missing {
                        m.insert(k.clone(), d.clone());
                    }
                }
                for (k, child) in m.iter_mut() {
                    if let Some(ps) = props.get(k) {
                        default_walk(ps, child);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for child in m.values_mut() {
                    default_walk(ap, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = schema.get("items") {
                for child in items {
                    default_walk(is, child);
                }
            }
        }
        _ => {}
    }
}

fn prune_walk(schema: &Value, v: &mut Value, path: &str, pruned: &mut Vec<String>) {
    let preserve = is_true(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = is_true(schema, "x-kubernetes-embedded-resource");
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            if let Some(ap) = additional.filter(|a| a.is_object()) {
                for (k, child) in m.iter_mut() {
                    prune_walk(ap, child, &format!("{path}.{k}"), pruned);
                }
                return;
            }
            if additional == Some(&Value::Bool(true)) {
                return;
            }
            if !preserve {
                m.retain(|k, _| {
                    let keep = props.is_some_and(|p| p.contains_key(k))
                        || (embedded && ["apiVersion", "kind", "metadata"].contains(&k.as_str()));
                    if !keep {
                        pruned.push(format!("{path}.{k}"));
                    }
                    keep
                });
            }
            if let Some(props) = props {
                for (k, child) in m.iter_mut() {
                    if let Some(ps) = props.get(k) {
                        prune_walk(ps, child, &format!("{path}.{k}"), pruned);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = schema.get("items") {
                for (i, child) in items.iter_mut().enumerate() {
                    prune_walk(is, child, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Structural {
        Structural::compile(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["mode"],
                    "properties": {
                        "mode": {"type": "string", "enum": ["Direct", "Proxy"]},
                        "replicas": {"type": "integer", "default": 1},
                        "port": {"x-kubernetes-int-or-string": true},
                        "note": {"type": "string", "nullable": true},
                        "opts": {"type": "object", "default": {}, "properties": {
                            "ttl": {"type": "string", "default": "1h"}
                        }},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "map": {"type": "object", "additionalProperties": {"type": "string"}},
                        "items": {"type": "array", "items": {"type": "object", "properties": {
                            "name": {"type": "string"}
                        }}}
                    }
                },
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }
        }))
        .unwrap()
    }

    #[test]
    fn defaults_fill_missing_fields_recursively() {
        let s = schema();
        let mut o = json!({"spec": {"mode": "Direct"}});
        s.apply_defaults(&mut o);
        assert_eq!(o["spec"]["replicas"], 1);
        assert_eq!(o["spec"]["opts"]["ttl"], "1h");
        let mut o = json!({"spec": {"mode": "Direct", "replicas": 3}});
        s.apply_defaults(&mut o);
        assert_eq!(o["spec"]["replicas"], 3);
    }

    #[test]
    fn pruning_keeps_known_and_preserved_fields() {
        let s = schema();
        let mut o = json!({
            "apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a", "x": 1},
            "extra": 1,
            "spec": {"mode": "Direct", "bogus": true, "free": {"any": {"thing": 1}},
                      "map": {"k": "v"}, "items": [{"name": "a", "junk": 2}]}
        });
        let pruned = s.prune(&mut o);
        assert_eq!(pruned, vec!["extra", "spec.bogus", "spec.items[0].junk"]);
        assert_eq!(o["spec"]["free"]["any"]["thing"], 1);
        assert_eq!(o["spec"]["map"]["k"], "v");
        assert_eq!(o["metadata"]["x"], 1);
    }

    #[test]
    fn validation_messages_are_kubernetes_shaped() {
        let s = schema();
        assert!(
            s.validate(&json!({"spec": {"mode": "Proxy", "port": 80, "note": null}}))
                .is_empty()
        );
        assert!(
            s.validate(&json!({"spec": {"mode": "Proxy", "port": "http"}}))
                .is_empty()
        );
        let c = s.validate(&json!({"spec": {}}));
        assert_eq!(c[0].render(), "spec.mode: Required value");
        let c = s.validate(&json!({"spec": {"mode": "Bad"}}));
        assert_eq!(
            c[0].render(),
            r#"spec.mode: Unsupported value: "Bad": supported values: "Direct", "Proxy""#
        );
        let c = s.validate(&json!({"spec": {"mode": "Direct", "replicas": "x"}}));
        assert_eq!(
            c[0].render(),
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
        );
        let c = s.validate(&json!({"spec": {"mode": "Direct", "items": [{"name": 5}]}}));
        assert_eq!(c[0].field, "spec.items[0].name");
    }

    #[test]
    fn non_object_root_is_rejected() {
        assert!(Structural::compile(&json!({"type": "string"})).is_err());
        assert!(Structural::compile(&json!([])).is_err());
    }
}
