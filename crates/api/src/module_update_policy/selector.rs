//! Matching a `v1alpha1` policy's `moduleReleaseSelector` against a module's labels, with
//! apimachinery's `LabelSelectorAsSelector` rules: a selector naming an invalid key or value, or
//! an operator with the wrong number of values, is not a selector at all (Deckhouse skips the
//! policy); an empty one selects everything.

use std::collections::BTreeMap;

use super::v1alpha1::{LabelSelector, Operator};

impl LabelSelector {
    /// Whether the selector matches `labels`; `None` when it is not a valid selector.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> Option<bool> {
        let mut matched = true;
        for (key, value) in &self.match_labels {
            if !qualified_name(key) || !label_value(value) {
                return None;
            }
            matched &= labels.get(key) == Some(value);
        }
        for e in &self.match_expressions {
            if !qualified_name(&e.key) || !e.values.iter().all(|v| label_value(v)) {
                return None;
            }
            let value = labels.get(&e.key);
            matched &= match e.operator {
                Operator::In | Operator::NotIn if e.values.is_empty() => return None,
                Operator::Exists | Operator::DoesNotExist if !e.values.is_empty() => return None,
                Operator::In => value.is_some_and(|v| e.values.contains(v)),
                Operator::NotIn => value.is_none_or(|v| !e.values.contains(v)),
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
            };
        }
        Some(matched)
    }
}

/// A label name: at most 63 alphanumerics, `-`, `_` and `.`, starting and ending alphanumeric.
fn name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A label key: a name, optionally after a DNS subdomain prefix and `/`.
fn qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => dns_subdomain(prefix) && name_part(name),
        None => name_part(s),
    }
}

fn dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// A label value: empty, or a label name.
fn label_value(s: &str) -> bool {
    s.is_empty() || name_part(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selector(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn matches_as_apimachinery_does() {
        let labels: BTreeMap<String, String> = [("module", "echo"), ("source", "example")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let table = [
            (json!({"matchLabels": {"source": "example"}}), Some(true)),
            (
                json!({"matchLabels": {"source": "example", "module": "hello"}}),
                Some(false),
            ),
            (json!({}), Some(true)),
            (
                json!({"matchExpressions": [{"key": "module", "operator": "In", "values": ["echo", "x"]}]}),
                Some(true),
            ),
            (
                json!({"matchExpressions": [{"key": "module", "operator": "NotIn", "values": ["echo"]}]}),
                Some(false),
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}),
                Some(true),
            ),
            (
                json!({"matchExpressions": [{"key": "module", "operator": "Exists"}]}),
                Some(true),
            ),
            (
                json!({"matchExpressions": [{"key": "module", "operator": "DoesNotExist"}]}),
                Some(false),
            ),
            (
                json!({"matchLabels": {"source": "example"},
                       "matchExpressions": [{"key": "module", "operator": "In", "values": ["hello"]}]}),
                Some(false),
            ),
            // Deckhouse's way to retire a selector: the empty key is no label key.
            (json!({"matchLabels": {"": ""}}), None),
            (
                json!({"matchExpressions": [{"key": "module", "operator": "In"}]}),
                None,
            ),
            (
                json!({"matchExpressions": [{"key": "module", "operator": "Exists", "values": ["echo"]}]}),
                None,
            ),
            (json!({"matchLabels": {"source": "not valid!"}}), None),
            (
                json!({"matchLabels": {"deckhouse.io/source": "example"}}),
                Some(false),
            ),
            (json!({"matchLabels": {"Bad_Prefix/source": "x"}}), None),
        ];
        for (s, want) in table {
            assert_eq!(selector(s.clone()).matches(&labels), want, "{s}");
        }
    }
}
