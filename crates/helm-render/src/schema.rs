//! `values.schema.json`: the coalesced values checked against each chart's schema as Helm 3
//! checks them (`chartutil.ValidateAgainstSchema`, which runs `xeipuuv/gojsonschema`), and the
//! failures reported in that library's words and order.
//!
//! The validation itself is the `jsonschema` crate's; this module maps its errors onto
//! gojsonschema's report: one `- <field>: <description>` line per failure, the field being the
//! instance path joined with `.` (`(root)` at the top), the errors of one value in the order
//! gojsonschema checks its keywords (combinators, then the type's own keywords, `const` and
//! `enum`, then the properties), `anyOf`/`oneOf` followed by the errors of the closest branch,
//! `allOf` by a line of its own after its branches' errors.
//!
//! Where gojsonschema's order is Go's random map order (properties, additional properties),
//! the order here is the key order.

use std::collections::BTreeSet;

use go_template::{Map, Value};
use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{Draft, PatternOptions, ValidationError};
use serde_json::Value as Json;

use crate::chart::Chart;

/// Helm's `ValidateAgainstSchema`: `chart`'s schema checked against `values`, then each
/// subchart's against the values under its name. `Err` holds Helm's report (per chart, its
/// name and a line per failure), without the heading Helm puts above it (see [`heading`]).
pub fn validate_against_schema(chart: &Chart, values: &Map) -> Result<(), String> {
    let mut out = String::new();
    if let Some(schema) = &chart.schema
        && let Err(e) = validate_single(values, schema)
    {
        out.push_str(&format!("{}:\n{e}", chart.name()));
    }
    for sub in &chart.dependencies {
        let sub_values = match values.get(sub.name()) {
            Some(Value::Map(m)) => m.borrow().clone(),
            _ => Map::new(),
        };
        if let Err(e) = validate_against_schema(sub, &sub_values) {
            out.push_str(&e);
        }
    }
    if out.is_empty() { Ok(()) } else { Err(out) }
}

/// The text Helm puts above [`validate_against_schema`]'s report.
pub fn heading(report: &str) -> String {
    format!(
        "values don't meet the specifications of the schema(s) in the following chart(s):\n{report}"
    )
}

/// Helm's `ValidateAgainstSingleSchema`: `Err` is one `- field: description\n` line per
/// failure, or the bare reason the schema could not be read.
pub fn validate_single(values: &Map, schema: &[u8]) -> Result<(), String> {
    let mut schema: Json = serde_json::from_slice(schema).map_err(|e| go_json_error(&e))?;
    let draft = match schema.get("$schema").and_then(Json::as_str) {
        Some(s) if s.contains("draft-04") => Draft::Draft4,
        Some(s) if s.contains("draft-06") => Draft::Draft6,
        _ => {
            // gojsonschema reads draft 4's boolean exclusiveMinimum/Maximum in any schema.
            draft4_exclusive_bounds(&mut schema, 0);
            Draft::Draft7
        }
    };
    let validator = jsonschema::options()
        .with_draft(draft)
        .should_validate_formats(true)
        .should_ignore_unknown_formats(true)
        .with_pattern_options(PatternOptions::regex())
        .with_format("date-time", go_date_time)
        .build(&schema)
        .map_err(|e| e.to_string())?;
    let instance = values_json(values)?;
    let mut report = Report::new(&schema);
    for err in validator.iter_errors(&instance) {
        report.add(&err);
    }
    report.finish()
}

/// The values as gojsonschema sees them after Helm's YAML round trip: whole floats are
/// integers, an empty document is `{}`.
fn values_json(values: &Map) -> Result<Json, String> {
    fn conv(v: &Value, depth: usize) -> Result<Json, String> {
        if depth > go_template::value::MAX_DEPTH {
            return Err("json: unsupported value: encountered a cycle".into());
        }
        Ok(match v {
            Value::Float(f) if !f.is_finite() => {
                return Err(format!(
                    "json: unsupported value: {}",
                    go_template::fmt::format_v(v)
                ));
            }
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Json::from(*f as i64),
            Value::List(l) => Json::Array(
                l.iter()
                    .map(|x| conv(x, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Map(m) => Json::Object(
                m.borrow()
                    .iter()
                    .map(|(k, x)| Ok((k.clone(), conv(x, depth + 1)?)))
                    .collect::<Result<_, String>>()?,
            ),
            other => other.to_json().unwrap_or(Json::Null),
        })
    }
    conv(&Value::map(values.clone()), 0)
}

/// Rewrites draft 4's `"exclusiveMinimum": true` (with `minimum`) into draft 6's numeric form,
/// which is how gojsonschema reads it whatever the draft.
fn draft4_exclusive_bounds(schema: &mut Json, depth: usize) {
    if depth > 512 {
        return;
    }
    match schema {
        Json::Object(o) => {
            for (flag, bound) in [
                ("exclusiveMinimum", "minimum"),
                ("exclusiveMaximum", "maximum"),
            ] {
                match o.get(flag) {
                    Some(Json::Bool(true)) => {
                        if let Some(b) = o.remove(bound) {
                            o.insert(flag.into(), b);
                        } else {
                            o.remove(flag);
                        }
                    }
                    Some(Json::Bool(false)) => {
                        o.remove(flag);
                    }
                    _ => {}
                }
            }
            for v in o.values_mut() {
                draft4_exclusive_bounds(v, depth + 1);
            }
        }
        Json::Array(a) => {
            for v in a {
                draft4_exclusive_bounds(v, depth + 1);
            }
        }
        _ => {}
    }
}

/// gojsonschema's `date-time`: RFC 3339, or a bare date, or a bare time (with or without a
/// zone).
fn go_date_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let date = |at: usize| {
        digits(at..at + 4)
            && b.get(at + 4) == Some(&b'-')
            && digits(at + 5..at + 7)
            && b.get(at + 7) == Some(&b'-')
            && digits(at + 8..at + 10)
    };
    let time = |at: usize| -> Option<usize> {
        if !(digits(at..at + 2)
            && b.get(at + 2) == Some(&b':')
            && digits(at + 3..at + 5)
            && b.get(at + 5) == Some(&b':')
            && digits(at + 6..at + 8))
        {
            return None;
        }
        let mut i = at + 8;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == start {
                return None;
            }
        }
        Some(i)
    };
    let zone = |at: usize| match b.get(at) {
        None => Some(false),
        Some(b'Z') => (at + 1 == b.len()).then_some(true),
        Some(b'+' | b'-') => (digits(at + 1..at + 3)
            && b.get(at + 3) == Some(&b':')
            && digits(at + 4..at + 6)
            && at + 6 == b.len())
        .then_some(true),
        _ => None,
    };
    if b.len() == 10 && date(0) {
        return true;
    }
    if let Some(end) = time(0) {
        return zone(end).is_some();
    }
    date(0) && b.get(10) == Some(&b'T') && time(11).and_then(zone).is_some_and(|zoned| zoned)
}

/// Go's `encoding/json` message for a schema that is not JSON (the common cases).
fn go_json_error(e: &serde_json::Error) -> String {
    if e.is_eof() {
        "unexpected EOF".into()
    } else {
        e.to_string()
    }
}

/// One step of the order gojsonschema reports in: `(rank, index, name)`.
type KeyPart = (u32, u64, String);

/// Ranks of the keywords of one schema node, in gojsonschema's checking order.
mod rank {
    pub(super) const TYPE: u32 = 0;
    pub(super) const ANY_OF: u32 = 1;
    pub(super) const ONE_OF: u32 = 2;
    pub(super) const ALL_OF: u32 = 3;
    pub(super) const NOT: u32 = 4;
    pub(super) const DEPENDENCIES: u32 = 5;
    pub(super) const CONDITION: u32 = 6;
    // Objects.
    pub(super) const MIN_PROPERTIES: u32 = 10;
    pub(super) const MAX_PROPERTIES: u32 = 11;
    pub(super) const REQUIRED: u32 = 12;
    pub(super) const ADDITIONAL: u32 = 13;
    pub(super) const PROPERTY_NAMES: u32 = 14;
    // Arrays.
    pub(super) const ITEMS: u32 = 10;
    pub(super) const MIN_ITEMS: u32 = 12;
    pub(super) const MAX_ITEMS: u32 = 13;
    pub(super) const UNIQUE: u32 = 14;
    pub(super) const CONTAINS: u32 = 15;
    // Numbers.
    pub(super) const MULTIPLE_OF: u32 = 10;
    pub(super) const MAXIMUM: u32 = 11;
    pub(super) const EXCLUSIVE_MAXIMUM: u32 = 12;
    pub(super) const MINIMUM: u32 = 13;
    pub(super) const EXCLUSIVE_MINIMUM: u32 = 14;
    pub(super) const NUMBER_FORMAT: u32 = 15;
    // Every type.
    pub(super) const CONST: u32 = 20;
    pub(super) const ENUM: u32 = 21;
    // Strings.
    pub(super) const MIN_LENGTH: u32 = 30;
    pub(super) const MAX_LENGTH: u32 = 31;
    pub(super) const PATTERN: u32 = 32;
    pub(super) const STRING_FORMAT: u32 = 33;
    // Objects again: the properties come last.
    pub(super) const PROPERTIES: u32 = 40;
}

/// The lines of a report, collected out of order and sorted at the end.
struct Report<'s> {
    schema: &'s Json,
    lines: Vec<(Vec<KeyPart>, String)>,
    seen: BTreeSet<Vec<KeyPart>>,
}

/// Where an error sits: its order key so far and the field name gojsonschema prints.
struct Place {
    key: Vec<KeyPart>,
    field: Vec<String>,
}

impl Place {
    fn field(&self) -> String {
        if self.field.is_empty() {
            "(root)".into()
        } else {
            self.field.join(".")
        }
    }
}

impl<'s> Report<'s> {
    fn new(schema: &'s Json) -> Self {
        Report {
            schema,
            lines: Vec::new(),
            seen: BTreeSet::new(),
        }
    }

    fn finish(mut self) -> Result<(), String> {
        if self.lines.is_empty() {
            return Ok(());
        }
        self.lines.sort_by(|a, b| a.0.cmp(&b.0));
        Err(self.lines.iter().map(|(_, l)| format!("- {l}\n")).collect())
    }

    fn push(&mut self, key: Vec<KeyPart>, field: &str, text: &str) {
        if self.seen.insert(key.clone()) {
            self.lines.push((key, format!("{field}: {text}")));
        }
    }

    /// Walks the error's evaluation path (schema keywords) alongside its instance path,
    /// building the order key; lines of the combinators passed on the way (`allOf`, `then`)
    /// are added too. Returns the place of the failing keyword and the keyword itself.
    fn walk(&mut self, err: &ValidationError) -> (Place, String) {
        let segs = pointer_segments(err.evaluation_path().as_str());
        let inst = pointer_segments(err.instance_path().as_str());
        let mut place = Place {
            key: Vec::new(),
            field: Vec::new(),
        };
        let (mut i, mut j) = (0, 0);
        let next_inst = |j: &mut usize| {
            let s = inst.get(*j).cloned().unwrap_or_default();
            *j += 1;
            s
        };
        while i + 1 < segs.len() {
            let seg = segs[i].as_str();
            match seg {
                "$ref" | "$dynamicRef" => i += 1,
                "properties" => {
                    let name = segs[i + 1].clone();
                    next_inst(&mut j);
                    place.key.push((rank::PROPERTIES, 0, name.clone()));
                    place.field.push(name);
                    i += 2;
                }
                "patternProperties" => {
                    let key = next_inst(&mut j);
                    place.key.push((rank::ADDITIONAL, 0, key.clone()));
                    place.field.push(key);
                    i += 2;
                }
                "additionalProperties" => {
                    let key = next_inst(&mut j);
                    place.key.push((rank::ADDITIONAL, 0, key.clone()));
                    place.field.push(key);
                    i += 1;
                }
                "items" | "additionalItems" | "prefixItems" => {
                    if seg != "additionalItems" && is_index(&segs[i + 1]) {
                        i += 1;
                    }
                    let idx = next_inst(&mut j);
                    place
                        .key
                        .push((rank::ITEMS, idx.parse().unwrap_or(0), String::new()));
                    place.field.push(idx);
                    i += 1;
                }
                "anyOf" | "oneOf" => {
                    let r = if seg == "anyOf" {
                        rank::ANY_OF
                    } else {
                        rank::ONE_OF
                    };
                    place.key.push((r, 1, String::new()));
                    i += 2;
                }
                "allOf" => {
                    let mut key = place.key.clone();
                    key.push((rank::ALL_OF, u64::MAX, String::new()));
                    self.push(key, &place.field(), "Must validate all the schemas (allOf)");
                    let k = segs[i + 1].parse().unwrap_or(0);
                    place.key.push((rank::ALL_OF, k, String::new()));
                    i += 2;
                }
                "then" | "else" => {
                    let mut key = place.key.clone();
                    key.push((rank::CONDITION, 0, String::new()));
                    let text = format!("Must validate {seg:?} as \"if\" was {}", {
                        if seg == "then" { "valid" } else { "not valid" }
                    });
                    self.push(key, &place.field(), &text);
                    place.key.push((rank::CONDITION, 1, String::new()));
                    i += 1;
                }
                "dependencies" | "dependentSchemas" | "dependentRequired" => {
                    place.key.push((rank::DEPENDENCIES, 0, segs[i + 1].clone()));
                    if i + 2 == segs.len() {
                        return (place, "dependencies".into());
                    }
                    i += 2;
                }
                "not" | "contains" | "propertyNames" | "if" => i += 1,
                _ => i += 1,
            }
        }
        (place, segs.last().cloned().unwrap_or_default())
    }

    fn add(&mut self, err: &ValidationError) {
        let (mut place, keyword) = self.walk(err);
        let field = place.field();
        let instance: &Json = err.instance();
        let line = |report: &mut Self, r: u32, idx: u64, name: &str, text: String| {
            let mut key = place.key.clone();
            key.push((r, idx, name.to_owned()));
            report.push(key, &field, &text);
        };
        match err.kind() {
            ValidationErrorKind::Type { kind } => {
                let expected = self.type_names(err, kind);
                let text = format!(
                    "Invalid type. Expected: {expected}, given: {}",
                    json_type(instance)
                );
                line(self, rank::TYPE, 0, "", text);
            }
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default().to_owned();
                if keyword == "dependencies" {
                    line(
                        self,
                        rank::DEPENDENCIES,
                        1,
                        &name,
                        format!("Has a dependency on {name}"),
                    );
                    return;
                }
                let idx = self
                    .schema_at(err)
                    .and_then(Json::as_array)
                    .and_then(|a| a.iter().position(|p| p.as_str() == Some(&name)))
                    .unwrap_or(0) as u64;
                line(self, rank::REQUIRED, idx, "", format!("{name} is required"));
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                for k in unexpected {
                    line(
                        self,
                        rank::ADDITIONAL,
                        0,
                        k,
                        format!("Additional property {k} is not allowed"),
                    );
                }
            }
            ValidationErrorKind::Enum { options } => {
                let allowed: Vec<String> = options
                    .as_array()
                    .map(|a| a.iter().map(go_json).collect())
                    .unwrap_or_default();
                let text = format!(
                    "{field} must be one of the following: {}",
                    allowed.join(", ")
                );
                line(self, rank::ENUM, 0, "", text);
            }
            ValidationErrorKind::Constant { expected_value } => {
                let text = format!("{field} does not match: {}", go_json(expected_value));
                line(self, rank::CONST, 0, "", text);
            }
            ValidationErrorKind::MinLength { limit } => line(
                self,
                rank::MIN_LENGTH,
                0,
                "",
                format!("String length must be greater than or equal to {limit}"),
            ),
            ValidationErrorKind::MaxLength { limit } => line(
                self,
                rank::MAX_LENGTH,
                0,
                "",
                format!("String length must be less than or equal to {limit}"),
            ),
            ValidationErrorKind::Pattern { pattern } => line(
                self,
                rank::PATTERN,
                0,
                "",
                format!("Does not match pattern '{pattern}'"),
            ),
            ValidationErrorKind::Format { format } => {
                let r = if instance.is_string() {
                    rank::STRING_FORMAT
                } else {
                    rank::NUMBER_FORMAT
                };
                line(self, r, 0, "", format!("Does not match format '{format}'"));
            }
            ValidationErrorKind::MultipleOf { .. } => {
                let m = self.schema_at(err).map(go_number).unwrap_or_default();
                line(
                    self,
                    rank::MULTIPLE_OF,
                    0,
                    "",
                    format!("Must be a multiple of {m}"),
                );
            }
            ValidationErrorKind::Maximum { limit } => line(
                self,
                rank::MAXIMUM,
                0,
                "",
                format!("Must be less than or equal to {}", go_number(limit)),
            ),
            ValidationErrorKind::ExclusiveMaximum { limit } => line(
                self,
                rank::EXCLUSIVE_MAXIMUM,
                0,
                "",
                format!("Must be less than {}", go_number(limit)),
            ),
            ValidationErrorKind::Minimum { limit } => line(
                self,
                rank::MINIMUM,
                0,
                "",
                format!("Must be greater than or equal to {}", go_number(limit)),
            ),
            ValidationErrorKind::ExclusiveMinimum { limit } => line(
                self,
                rank::EXCLUSIVE_MINIMUM,
                0,
                "",
                format!("Must be greater than {}", go_number(limit)),
            ),
            ValidationErrorKind::MinItems { limit } => line(
                self,
                rank::MIN_ITEMS,
                0,
                "",
                format!("Array must have at least {limit} items"),
            ),
            ValidationErrorKind::MaxItems { limit } => line(
                self,
                rank::MAX_ITEMS,
                0,
                "",
                format!("Array must have at most {limit} items"),
            ),
            ValidationErrorKind::UniqueItems => {
                for (n, (i, j)) in duplicate_pairs(instance).into_iter().enumerate() {
                    line(
                        self,
                        rank::UNIQUE,
                        n as u64,
                        "",
                        format!("array items[{i},{j}] must be unique"),
                    );
                }
            }
            ValidationErrorKind::Contains => line(
                self,
                rank::CONTAINS,
                0,
                "",
                "At least one of the items must match".into(),
            ),
            ValidationErrorKind::AdditionalItems { .. } => line(
                self,
                rank::ITEMS,
                u64::MAX,
                "",
                "No additional items allowed on array".into(),
            ),
            ValidationErrorKind::MinProperties { limit } => line(
                self,
                rank::MIN_PROPERTIES,
                0,
                "",
                format!("Must have at least {limit} properties"),
            ),
            ValidationErrorKind::MaxProperties { limit } => line(
                self,
                rank::MAX_PROPERTIES,
                0,
                "",
                format!("Must have at most {limit} properties"),
            ),
            ValidationErrorKind::Not { .. } | ValidationErrorKind::FalseSchema => line(
                self,
                rank::NOT,
                0,
                "",
                "Must not validate the schema (not)".into(),
            ),
            ValidationErrorKind::AnyOf { context } => {
                line(
                    self,
                    rank::ANY_OF,
                    0,
                    "",
                    "Must validate at least one schema (anyOf)".into(),
                );
                self.add_closest(context);
            }
            ValidationErrorKind::OneOfNotValid { context } => {
                line(
                    self,
                    rank::ONE_OF,
                    0,
                    "",
                    "Must validate one and only one schema (oneOf)".into(),
                );
                self.add_closest(context);
            }
            ValidationErrorKind::OneOfMultipleValid { .. } => line(
                self,
                rank::ONE_OF,
                0,
                "",
                "Must validate one and only one schema (oneOf)".into(),
            ),
            ValidationErrorKind::PropertyNames { error } => {
                let name = error.instance().as_str().unwrap_or_default().to_owned();
                line(
                    self,
                    rank::PROPERTY_NAMES,
                    0,
                    &name,
                    format!("Property name of {name:?} does not match"),
                );
                // The name's own failure, reported at the object.
                place.key.push((rank::PROPERTY_NAMES, 1, name));
                let mut sub = Report::new(self.schema);
                sub.add(error);
                for (k, text) in sub.lines {
                    let mut key = place.key.clone();
                    key.extend(k);
                    let text = text
                        .split_once(": ")
                        .map_or(text.clone(), |(_, t)| t.into());
                    self.push(key, &field, &text);
                }
            }
            _ => line(self, 99, 0, "", err.to_string()),
        }
    }

    /// gojsonschema follows a failed `anyOf`/`oneOf` with the errors of the branch that came
    /// closest: here the one with the fewest errors (the first of equals).
    fn add_closest(&mut self, branches: &[Vec<ValidationError<'static>>]) {
        let best = branches
            .iter()
            .filter(|b| !b.is_empty())
            .min_by_key(|b| b.len());
        if let Some(errors) = best {
            for e in errors {
                self.add(e);
            }
        }
    }

    /// The schema value at the error's keyword (without `$ref` steps).
    fn schema_at(&self, err: &ValidationError) -> Option<&'s Json> {
        self.schema.pointer(err.schema_path().as_str())
    }

    /// gojsonschema's expected type text: the one type, or `[a,b]` in the schema's order.
    fn type_names(&self, err: &ValidationError, kind: &TypeKind) -> String {
        match self.schema_at(err) {
            Some(Json::String(s)) => s.clone(),
            Some(Json::Array(a)) => format!(
                "[{}]",
                a.iter()
                    .filter_map(Json::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            _ => match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(set) => format!(
                    "[{}]",
                    set.iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            },
        }
    }
}

fn is_index(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A JSON pointer's segments, unescaped.
fn pointer_segments(p: &str) -> Vec<String> {
    if p.is_empty() {
        return Vec::new();
    }
    p.trim_start_matches('/')
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// The JSON type gojsonschema names for a value (whole numbers are `integer`).
fn json_type(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                "integer"
            } else {
                "number"
            }
        }
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

/// A number as gojsonschema prints a limit: Go's `%v` of the float64.
fn go_number(v: &Json) -> String {
    match v.as_f64() {
        Some(f) => go_template::fmt::format_v(&Value::Float(f)),
        None => v.to_string(),
    }
}

/// Go's `json.Marshal` of a decoded value: compact, keys sorted, `<`, `>`, `&` escaped.
fn go_json(v: &Json) -> String {
    serde_json::to_string(v)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The `(i, j)` pairs gojsonschema reports for `uniqueItems`: each item equal to an earlier
/// one, with the latest earlier index.
fn duplicate_pairs(v: &Json) -> Vec<(usize, usize)> {
    let Some(items) = v.as_array() else {
        return Vec::new();
    };
    let mut seen: Vec<(String, usize)> = Vec::new();
    let mut out = Vec::new();
    for (j, item) in items.iter().enumerate() {
        let s = go_json(item);
        match seen.iter_mut().find(|(k, _)| *k == s) {
            Some((_, i)) => {
                out.push((*i, j));
                *i = j;
            }
            None => seen.push((s, j)),
        }
    }
    out
}
