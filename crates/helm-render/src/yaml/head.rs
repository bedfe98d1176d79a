//! What Helm reads of each rendered document to sort it: `apiVersion`, `kind`,
//! `metadata.name` and `metadata.annotations`, decoded as `sigs.k8s.io/yaml.Unmarshal` into
//! Helm's `releaseutil.SimpleHead` — numbers and booleans turned into the strings the fields
//! want, field names matched without regard to case, and Go's type errors word for word.

use std::collections::BTreeMap;

use super::YamlError;
use super::decode::{self, Yaml};

/// The head of a rendered manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManifestHead {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata`, when present and not null.
    pub metadata: Option<ManifestMetadata>,
}

/// The part of `metadata` Helm reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManifestMetadata {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.annotations` (`None` when absent or null).
    pub annotations: Option<BTreeMap<String, String>>,
}

const METADATA_TYPE: &str = "struct { Name string \"json:\\\"name\\\"\"; Annotations map[string]string \"json:\\\"annotations\\\"\" }";

/// Decodes a rendered document's head as Helm's manifest sorter does; the error is what Helm
/// prints after `YAML parse error on FILE: `.
pub fn parse_head(text: &str) -> Result<ManifestHead, YamlError> {
    let Some(y) = decode::parse_first(text)? else {
        return Ok(ManifestHead::default());
    };
    // Conversion to JSON first: bad keys and NaN fail the whole document.
    decode::to_value(&y)?;
    let mut d = HeadDecoder { error: None };
    let head = d.head(&y);
    match d.error {
        Some(e) => Err(YamlError::unmarshal(e)),
        None => Ok(head),
    }
}

struct HeadDecoder {
    error: Option<String>,
}

fn json_kind(y: &Yaml) -> &'static str {
    match y {
        Yaml::Null => "null",
        Yaml::Bool(_) => "bool",
        Yaml::Int(_) | Yaml::Uint(_) | Yaml::BigInt(_) | Yaml::Float(_) => "number",
        Yaml::Str(_) => "string",
        Yaml::Seq(_) => "array",
        Yaml::Map(_) => "object",
    }
}

/// The object's entries as JSON would list them: keys made strings, sorted, later
/// duplicates winning.
fn sorted_entries(entries: &[(Yaml, Yaml)]) -> Vec<(String, &Yaml)> {
    let mut m: BTreeMap<String, &Yaml> = BTreeMap::new();
    for (k, v) in entries {
        let key = match k {
            Yaml::Str(s) => s.clone(),
            Yaml::Int(i) => i.to_string(),
            Yaml::Bool(b) => b.to_string(),
            Yaml::Float(f) => sprig::json::format_float_g(*f),
            _ => continue,
        };
        m.insert(key, v);
    }
    m.into_iter().collect()
}

/// Whether a JSON key selects a field: an exact match, or one that differs only in case.
fn matches(key: &str, field: &str) -> bool {
    key == field || key.eq_ignore_ascii_case(field)
}

impl HeadDecoder {
    fn fail(&mut self, msg: String) {
        if self.error.is_none() {
            self.error = Some(msg);
        }
    }

    /// A string field: numbers and booleans become their text (as `sigs.k8s.io/yaml` coerces
    /// them for a string target), null leaves the field as it is.
    fn string(&mut self, y: &Yaml, field: &str, into: &mut String) {
        match y {
            Yaml::Null => {}
            Yaml::Str(s) => *into = s.clone(),
            Yaml::Int(i) => *into = i.to_string(),
            Yaml::Uint(u) => *into = u.to_string(),
            Yaml::Bool(b) => *into = b.to_string(),
            Yaml::Float(f) => *into = float32_text(*f),
            other => self.fail(format!(
                "json: cannot unmarshal {} into Go struct field {field} of type string",
                json_kind(other)
            )),
        }
    }

    fn head(&mut self, y: &Yaml) -> ManifestHead {
        let mut head = ManifestHead::default();
        let entries = match y {
            Yaml::Null => return head,
            Yaml::Map(entries) => entries,
            other => {
                self.fail(format!(
                    "json: cannot unmarshal {} into Go value of type releaseutil.SimpleHead",
                    json_kind(other)
                ));
                return head;
            }
        };
        for (k, v) in sorted_entries(entries) {
            if matches(&k, "apiVersion") {
                self.string(v, "SimpleHead.apiVersion", &mut head.api_version);
            } else if matches(&k, "kind") {
                self.string(v, "SimpleHead.kind", &mut head.kind);
            } else if matches(&k, "metadata") {
                match v {
                    Yaml::Null => head.metadata = None,
                    Yaml::Map(entries) => {
                        let mut meta = head.metadata.take().unwrap_or_default();
                        self.metadata(entries, &mut meta);
                        head.metadata = Some(meta);
                    }
                    other => self.fail(format!(
                        "json: cannot unmarshal {} into Go struct field SimpleHead.metadata of type {METADATA_TYPE}",
                        json_kind(other)
                    )),
                }
            }
        }
        head
    }

    fn metadata(&mut self, entries: &[(Yaml, Yaml)], meta: &mut ManifestMetadata) {
        for (k, v) in sorted_entries(entries) {
            if matches(&k, "name") {
                self.string(v, ".metadata.name", &mut meta.name);
            } else if matches(&k, "annotations") {
                match v {
                    Yaml::Null => meta.annotations = None,
                    Yaml::Map(entries) => {
                        let mut a = meta.annotations.take().unwrap_or_default();
                        for (key, value) in sorted_entries(entries) {
                            let mut s = String::new();
                            self.string(value, ".metadata.annotations", &mut s);
                            a.insert(key, s);
                        }
                        meta.annotations = Some(a);
                    }
                    other => self.fail(format!(
                        "json: cannot unmarshal {} into Go struct field .metadata.annotations of type map[string]string",
                        json_kind(other)
                    )),
                }
            }
        }
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 32)`, as the coercion to a string field writes a float.
fn float32_text(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    decode::format_float32_g(f)
}
