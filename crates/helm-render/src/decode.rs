//! Decoding YAML into Go structs the way `sigs.k8s.io/yaml` does (YAML → JSON →
//! `encoding/json`): scalars turn into the strings a `string` field wants, keys match field
//! names exactly or else case-insensitively, unknown keys are ignored, and a type mismatch is
//! Go's `json: cannot unmarshal …` error.

use go_template::Value;

use crate::yaml::format_float32_g;

type JsonMap = serde_json::Map<String, serde_json::Value>;

/// Walks a document for one top-level struct, keeping the context Go's errors print.
pub(crate) struct Decoder {
    /// The innermost struct type being decoded.
    structs: Vec<&'static str>,
    /// The field path from the top-level struct.
    path: Vec<&'static str>,
    top: &'static str,
}

impl Decoder {
    pub(crate) fn new(top: &'static str) -> Decoder {
        Decoder {
            structs: vec![top],
            path: Vec::new(),
            top,
        }
    }

    pub(crate) fn push(&mut self, field: &'static str) {
        self.path.push(field);
    }

    pub(crate) fn pop(&mut self) {
        self.path.pop();
    }

    pub(crate) fn enter_struct(&mut self, name: &'static str) -> usize {
        self.structs.push(name);
        self.structs.len() - 1
    }

    pub(crate) fn leave_struct(&mut self, depth: usize) {
        self.structs.truncate(depth);
    }

    fn mismatch(&self, val: &serde_json::Value, ty: &str) -> String {
        let kind = match val {
            serde_json::Value::Null => "null",
            serde_json::Value::Bool(_) => "bool",
            serde_json::Value::Number(_) => "number",
            serde_json::Value::String(_) => "string",
            serde_json::Value::Array(_) => "array",
            serde_json::Value::Object(_) => "object",
        };
        if self.path.is_empty() {
            return format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {kind} into Go value of type chart.{}",
                self.top
            );
        }
        format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {kind} into Go struct field {}.{} of type {ty}",
            self.structs.last().copied().unwrap_or(self.top),
            self.path.join(".")
        )
    }

    /// An object (`None` for null).
    pub(crate) fn object<'v>(
        &self,
        val: &'v serde_json::Value,
    ) -> Result<Option<&'v JsonMap>, String> {
        match val {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::Object(o) => Ok(Some(o)),
            other => Err(self.mismatch(
                other,
                &format!("chart.{}", self.structs.last().copied().unwrap_or(self.top)),
            )),
        }
    }

    /// An array (`None` for null).
    pub(crate) fn array<'v>(
        &self,
        val: &'v serde_json::Value,
        ty: &str,
    ) -> Result<Option<&'v Vec<serde_json::Value>>, String> {
        match val {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::Array(a) => Ok(Some(a)),
            other => Err(self.mismatch(other, ty)),
        }
    }

    /// A `string` field: scalars become strings as `sigs.k8s.io/yaml` makes them; null keeps
    /// the old value.
    pub(crate) fn string(&self, val: &serde_json::Value, out: &mut String) -> Result<(), String> {
        match scalar_string(val) {
            Some(s) => *out = s,
            None if val.is_null() => {}
            None => return Err(self.mismatch(val, "string")),
        }
        Ok(())
    }

    /// A `[]string` field; returns whether it is non-nil.
    pub(crate) fn strings(
        &self,
        val: &serde_json::Value,
        out: &mut Vec<String>,
    ) -> Result<bool, String> {
        let Some(items) = self.array(val, "[]string")? else {
            out.clear();
            return Ok(false);
        };
        out.clear();
        for item in items {
            let mut s = String::new();
            self.string(item, &mut s)?;
            out.push(s);
        }
        Ok(true)
    }

    /// A `bool` field.
    pub(crate) fn bool(&self, val: &serde_json::Value, out: &mut bool) -> Result<(), String> {
        match val {
            serde_json::Value::Null => {}
            serde_json::Value::Bool(b) => *out = *b,
            other => return Err(self.mismatch(other, "bool")),
        }
        Ok(())
    }

    /// A `map[string]string` field.
    pub(crate) fn string_map(
        &self,
        val: &serde_json::Value,
        out: &mut Option<Vec<(String, String)>>,
    ) -> Result<(), String> {
        match val {
            serde_json::Value::Null => *out = None,
            serde_json::Value::Object(o) => {
                let mut entries = out.take().unwrap_or_default();
                for (k, v) in o {
                    let mut s = String::new();
                    self.string(v, &mut s)?;
                    entries.retain(|(ek, _)| ek != k);
                    entries.push((k.clone(), s));
                }
                entries.sort();
                *out = Some(entries);
            }
            other => return Err(self.mismatch(other, "map[string]string")),
        }
        Ok(())
    }

    /// A `[]interface{}` field.
    pub(crate) fn any_list(
        &self,
        val: &serde_json::Value,
        out: &mut Vec<Value>,
    ) -> Result<(), String> {
        let Some(items) = self.array(val, "[]interface {}")? else {
            out.clear();
            return Ok(());
        };
        *out = items.iter().map(Value::from_json).collect();
        Ok(())
    }
}

/// The Go field a JSON key sets: the exact name, else one equal under case folding.
pub(crate) fn field(key: &str, fields: &[&'static str]) -> Option<&'static str> {
    fields
        .iter()
        .find(|f| **f == key)
        .or_else(|| fields.iter().find(|f| f.eq_ignore_ascii_case(key)))
        .copied()
}

/// The string `sigs.k8s.io/yaml` makes of a YAML scalar for a `string` target.
pub(crate) fn scalar_string(val: &serde_json::Value) -> Option<String> {
    match val {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Number(n) => Some(if let Some(i) = n.as_i64() {
            i.to_string()
        } else if let Some(u) = n.as_u64() {
            u.to_string()
        } else {
            format_float32_g(n.as_f64().unwrap_or(f64::NAN))
        }),
        _ => None,
    }
}
