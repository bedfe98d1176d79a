//! Label selectors (equality- and set-based) and field selectors, parsed from query strings.
//!
//! Pure: no I/O.

use serde_json::Value;
use std::collections::BTreeSet;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Exists(String),
    NotExists(String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<Requirement>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn parse_set(key: &str, rest: &str) -> Result<BTreeSet<String>, String> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("values for {key:?} must be in parentheses"))?;
    inner
        .split(',')
        .map(|v| {
            let v = v.trim();
            if valid_value(v) {
                Ok(v.to_string())
            } else {
                Err(format!("invalid label value: {v:?}"))
            }
        })
        .collect()
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let req = if let Some(k) = part.strip_prefix('!') {
                Requirement::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotIn(k.trim().into(), [v.trim().to_string()].into())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::In(k.trim().into(), [v.trim().to_string()].into())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                Requirement::NotIn(k.trim().into(), parse_set(k, rest)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Requirement::In(k.trim().into(), parse_set(k, rest)?)
            } else {
                Requirement::Exists(part.to_string())
            };
            let (key, values) = match &req {
                Requirement::Exists(k) | Requirement::NotExists(k) => (k, None),
                Requirement::In(k, v) | Requirement::NotIn(k, v) => (k, Some(v)),
            };
            if !valid_key(key) {
                return Err(format!("invalid label key {key:?} in selector {s:?}"));
            }
            if let Some(bad) = values.into_iter().flatten().find(|v| !valid_value(v)) {
                return Err(format!("invalid label value {bad:?} in selector {s:?}"));
            }
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`); `None` when absent
    /// or empty (it matches everything). An invalid one matches nothing.
    pub(crate) fn from_object(v: Option<&Value>) -> Option<Self> {
        let v = v.filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))?;
        let mut terms = Vec::new();
        if let Some(m) = v.get("matchLabels").and_then(Value::as_object) {
            for (k, val) in m {
                terms.push(format!("{k}={}", val.as_str().unwrap_or_default()));
            }
        }
        for e in v
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let values = values.join(",");
            terms.push(match e.get("operator").and_then(Value::as_str) {
                Some("In") => format!("{key} in ({values})"),
                Some("NotIn") => format!("{key} notin ({values})"),
                Some("Exists") => key.to_string(),
                Some("DoesNotExist") => format!("!{key}"),
                _ => "!".to_string(), // invalid: matches nothing below
            });
        }
        Some(Self::parse(&terms.join(",")).unwrap_or_else(|_| Self::nothing()))
    }

    /// A selector no object satisfies.
    fn nothing() -> Self {
        Self::parse("d8.invalid/selector,!d8.invalid/selector").unwrap_or_default()
    }

    /// Whether the selector selects everything.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether an object (its `metadata.labels`) satisfies every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
            Requirement::In(k, vs) => get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

/// A parsed field selector: `path=value` / `path!=value` terms on dotted object paths
/// (`metadata.name`, `metadata.namespace`, `involvedObject.name`, …).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<(Vec<String>, bool, String)>);

impl FieldSelector {
    /// Parses `metadata.name=x,metadata.namespace!=y`.
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, eq, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (p, true, v)
            } else {
                return Err(format!(
                    "invalid field selector term {part:?}: expected field=value"
                ));
            };
            let path: Vec<String> = path.trim().split('.').map(str::to_string).collect();
            if path.iter().any(String::is_empty) {
                return Err(format!("invalid field path in {part:?}"));
            }
            terms.push((path, eq, value.trim().to_string()));
        }
        Ok(Self(terms))
    }

    /// Whether the selector selects everything.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value required for `metadata.name`, if the selector pins it (used by watches).
    pub(crate) fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(p, eq, _)| *eq && p.len() == 2 && p[0] == "metadata" && p[1] == "name")
            .map(|(_, _, v)| v.as_str())
    }

    /// Whether the object satisfies every term (a missing field compares as the empty string).
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let mut cur = obj;
            let mut found = true;
            for seg in path {
                match cur.get(seg) {
                    Some(v) => cur = v,
                    None => {
                        found = false;
                        break;
                    }
                }
            }
            let have = match (found, cur) {
                (false, _) | (true, Value::Null) => String::new(),
                (true, Value::String(s)) => s.clone(),
                (true, other) => other.to_string(),
            };
            (have == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n1", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn equality_and_set_based() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        for (sel, want) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=db", false),
            ("app in (web, db)", true),
            ("app notin (web,db)", false),
            ("tier,app=web", true),
            ("!tier", false),
            ("!missing", true),
            ("missing!=x", true),
            ("missing in (x)", false),
            ("app in (db),tier", false),
        ] {
            let s = LabelSelector::parse(sel).unwrap();
            assert_eq!(s.matches(&o), want, "{sel}");
        }
    }

    #[test]
    fn bad_label_selectors_are_errors() {
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
        assert!(LabelSelector::parse("a=b c").is_err());
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let s = FieldSelector::parse("metadata.name=n1,metadata.namespace!=other").unwrap();
        assert!(s.matches(&o));
        assert_eq!(s.pinned_name(), Some("n1"));
        assert!(
            !FieldSelector::parse("metadata.name=n2")
                .unwrap()
                .matches(&o)
        );
        assert!(FieldSelector::parse("metadata.name").is_err());
        assert!(FieldSelector::parse("spec.nodeName=").unwrap().matches(&o));
    }
}
