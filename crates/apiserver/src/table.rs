//! `Table` responses (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) for `kubectl get`,
//! with columns from `additionalPrinterColumns` or the built-in kinds' usual columns.

use crate::resources::{Column, ResourceDef};
use serde_json::{Value, json};

pub(crate) mod builtin;

/// Evaluates the JSONPath subset printer columns use: `.a.b`, `.a[0]`, `.a[*].b`,
/// `.a[?(@.k=="v")].b`; plus `#count .path`, `#object .path` and `#ready` for built-ins.
pub(crate) fn eval(obj: &Value, path: &str) -> Option<Value> {
    if let Some(special) = path.strip_prefix('#') {
        let (name, arg) = special.split_once(' ').unwrap_or((special, ""));
        return builtin::eval(obj, name, arg);
    }
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut cur: Vec<Value> = vec![obj.clone()];
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let field = &r[..end];
            rest = &r[end..];
            if field.is_empty() {
                continue;
            }
            cur = cur.iter().filter_map(|v| v.get(field).cloned()).collect();
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let sel = &r[..end];
            rest = &r[end + 1..];
            let mut next = Vec::new();
            for v in &cur {
                let Some(items) = v.as_array() else { continue };
                if sel == "*" {
                    next.extend(items.iter().cloned());
                } else if let Ok(i) = sel.parse::<i64>() {
                    let idx = if i < 0 { items.len() as i64 + i } else { i };
                    if let Some(x) = usize::try_from(idx).ok().and_then(|i| items.get(i)) {
                        next.push(x.clone());
                    }
                } else if let Some(f) = sel.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                    let (field, want) = f.split_once("==")?;
                    let want = want.trim().trim_matches(|c| c == '"' || c == '\'');
                    next.extend(
                        items
                            .iter()
                            .filter(|x| match x.get(field.trim()) {
                                Some(Value::String(s)) => s == want,
                                Some(other) => *other == want,
                                None => false,
                            })
                            .cloned(),
                    );
                }
            }
            cur = next;
        } else {
            return None;
        }
    }
    match cur.len() {
        0 => None,
        1 => cur.pop(),
        _ => Some(Value::Array(cur)),
    }
}

/// Kubernetes' short human durations: `45s`, `3m12s`, `5h`, `4d`, `2y`.
pub(crate) fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..120 => format!("{s}s"),
        120..600 => format!("{}m{}s", s / 60, s % 60),
        600..10_800 => format!("{}m", s / 60),
        10_800..28_800 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        28_800..172_800 => format!("{}h", s / 3600),
        172_800..691_200 => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
        _ if s < 86_400 * 365 * 2 => format!("{}d", s / 86_400),
        _ => format!("{}y", s / (86_400 * 365)),
    }
}

fn cell(col: &Column, obj: &Value) -> Value {
    let v = eval(obj, &col.json_path);
    match (col.type_.as_str(), v) {
        (_, None) => Value::Null,
        ("date", Some(Value::String(ts))) => match ts.parse::<jiff::Timestamp>() {
            Ok(t) => json!(human_duration(
                jiff::Timestamp::now().as_second() - t.as_second()
            )),
            Err(_) => json!(ts),
        },
        (_, Some(Value::Array(a))) => json!(
            a.iter()
                .map(|x| match x {
                    Value::String(s) => s.clone(),
                    o => o.to_string(),
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
        (_, Some(v)) => v,
    }
}

/// The `metadata` of a Table, as kube-apiserver's table convertors fill it: a list's
/// `resourceVersion`, `continue` and `remainingItemCount`, or the one object's
/// `resourceVersion`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TableMeta {
    pub(crate) resource_version: Option<String>,
    pub(crate) continue_token: Option<String>,
    pub(crate) remaining: Option<u64>,
}

impl TableMeta {
    /// The metadata of the Table of one object: its `resourceVersion`.
    pub(crate) fn of_object(obj: &Value) -> Self {
        Self {
            resource_version: obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
            ..Self::default()
        }
    }

    fn to_json(&self) -> Value {
        let mut meta = json!({});
        if let Some(rv) = &self.resource_version {
            meta["resourceVersion"] = json!(rv);
        }
        if let Some(c) = &self.continue_token {
            meta["continue"] = json!(c);
        }
        if let Some(n) = self.remaining {
            meta["remainingItemCount"] = json!(n);
        }
        meta
    }
}

/// Builds a `meta.k8s.io/v1` Table of `objects` with the columns of `version`.
pub(crate) fn table(
    def: &ResourceDef,
    version: &str,
    objects: &[Value],
    meta: &TableMeta,
    include_object: &str,
) -> Value {
    let columns = def
        .version(version)
        .map(|v| v.columns.clone())
        .unwrap_or_default();
    let mut defs = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace."
    })];
    defs.extend(columns.iter().map(|c| {
        json!({"name": c.name, "type": if c.type_ == "date" { "string" } else { c.type_.as_str() }, "format": c.format, "description": c.description, "priority": c.priority})
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![o.pointer("/metadata/name").cloned().unwrap_or(Value::Null)];
            cells.extend(columns.iter().map(|c| cell(c, o)));
            let object = match include_object {
                "None" => Value::Null,
                "Object" => o.clone(),
                _ => json!({
                    "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                    "metadata": o.get("metadata").cloned().unwrap_or(json!({}))
                }),
            };
            json!({"cells": cells, "object": object})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta.to_json(), "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_subset() {
        let o = json!({"spec": {"mode": "Direct", "l": [{"n": "a"}, {"n": "b"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "False"}]},
            "data": {"a": "1", "b": "2"}});
        assert_eq!(eval(&o, ".spec.mode"), Some(json!("Direct")));
        assert_eq!(eval(&o, ".spec.l[1].n"), Some(json!("b")));
        assert_eq!(eval(&o, ".spec.l[-1].n"), Some(json!("b")));
        assert_eq!(eval(&o, ".spec.l[*].n"), Some(json!(["a", "b"])));
        assert_eq!(
            eval(&o, r#".status.conditions[?(@.type=="Ready")].status"#),
            Some(json!("True"))
        );
        assert_eq!(eval(&o, ".spec.missing"), None);
        assert_eq!(eval(&o, "#count .data"), Some(json!(2)));
    }

    #[test]
    fn table_metadata_like_kube_apiservers_convertors() {
        let cases = [
            (TableMeta::default(), json!({})),
            (
                TableMeta::of_object(&json!({"metadata": {"name": "a", "resourceVersion": "12"}})),
                json!({"resourceVersion": "12"}),
            ),
            (
                TableMeta {
                    resource_version: Some("7".into()),
                    continue_token: Some("tok".into()),
                    remaining: Some(3),
                },
                json!({"resourceVersion": "7", "continue": "tok", "remainingItemCount": 3}),
            ),
            (
                TableMeta {
                    resource_version: Some("7".into()),
                    continue_token: None,
                    remaining: None,
                },
                json!({"resourceVersion": "7"}),
            ),
        ];
        for (meta, want) in cases {
            assert_eq!(meta.to_json(), want, "{meta:?}");
        }
    }

    #[test]
    fn durations_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(192), "3m12s");
        assert_eq!(human_duration(3000), "50m");
        assert_eq!(human_duration(4 * 86_400), "4d0h");
        assert_eq!(human_duration(20 * 86_400), "20d");
    }
}
