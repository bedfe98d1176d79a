//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.
//! Server-side apply of objects is `managed::apply` (field ownership); here an apply body is
//! only parsed, or merged as a merge patch where no ownership is kept (the `scale` view).
//!
//! Strategic merge patch is implemented for built-in kinds with a fixed table of list merge
//! keys (`containers` by `name`, `ports` by `containerPort`, `conditions` by `type`, …) and the
//! `$patch`, `$retainKeys`, `$deleteFromPrimitiveList/` and `$setElementOrder/` directives
//! (the last is accepted and ignored: the order of merged lists is kept). For custom resources
//! a strategic patch is applied as a merge patch. Pure: no I/O.

use serde_json::{Map, Value};

/// The patch formats a client can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    /// From the request's `Content-Type`.
    pub(crate) fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Applies `body` of type `ty` to `doc`. `custom` selects merge semantics for strategic patches.
pub(crate) fn apply(
    ty: PatchType,
    doc: &mut Value,
    body: &[u8],
    custom: bool,
) -> Result<(), String> {
    match ty {
        PatchType::Merge => {
            let p: Value = serde_json::from_slice(body)
                .map_err(|e| format!("invalid JSON merge patch: {e}"))?;
            json_patch::merge(doc, &p);
        }
        PatchType::Json => {
            let p: json_patch::Patch =
                serde_json::from_slice(body).map_err(|e| format!("invalid JSON patch: {e}"))?;
            json_patch::patch(doc, &p)
                .map_err(|e| format!("the JSON patch could not be applied: {e}"))?;
        }
        PatchType::Strategic if custom => {
            let p: Value =
                serde_json::from_slice(body).map_err(|e| format!("invalid merge patch: {e}"))?;
            json_patch::merge(doc, &p);
        }
        PatchType::Strategic => {
            let p: Value = serde_json::from_slice(body)
                .map_err(|e| format!("invalid strategic merge patch: {e}"))?;
            strategic(doc, &p);
        }
        PatchType::Apply => {
            let p = parse_apply(body)?;
            json_patch::merge(doc, &p);
        }
    }
    Ok(())
}

/// Parses a server-side apply body (YAML or JSON) into an object.
pub(crate) fn parse_apply(body: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(body).map_err(|_| "apply body is not UTF-8".to_string())?;
    let v: Value = serde_saphyr::from_str(text).map_err(|e| format!("invalid apply body: {e}"))?;
    if !v.is_object() {
        return Err("apply body must be an object".into());
    }
    Ok(v)
}

/// The merge key of a list field in built-in kinds, or `None` for atomic lists.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        // Validating/MutatingWebhookConfiguration's `webhooks` and their `matchConditions`.
        | "webhooks"
        | "matchConditions" => "name",
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ownerReferences" => "uid",
        "conditions" => "type",
        "taints" => "key",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Lists of scalars merged as sets.
fn merged_primitive_list(field: &str) -> bool {
    field == "finalizers"
}

fn is_directive(k: &str) -> bool {
    k.starts_with('$')
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !is_directive(k))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// A strategic merge patch of `patch` into `doc`.
pub(crate) fn strategic(doc: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *doc = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        *doc = strip_directives(patch);
        return;
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Some(d) = doc.as_object_mut() else { return };
    for (k, pv) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (d.get_mut(field), pv) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if is_directive(k) {
            continue;
        }
        match pv {
            Value::Null => {
                d.remove(k);
            }
            Value::Object(po) if po.get("$patch").and_then(Value::as_str) == Some("delete") => {
                d.remove(k);
            }
            Value::Object(_) => strategic(d.entry(k.clone()).or_insert(Value::Null), pv),
            Value::Array(items) => {
                let replace = items
                    .iter()
                    .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
                let cur = d.entry(k.clone()).or_insert(Value::Array(Vec::new()));
                if replace || !cur.is_array() {
                    *cur = Value::Array(
                        items
                            .iter()
                            .filter(|i| i.get("$patch").is_none())
                            .map(strip_directives)
                            .collect(),
                    );
                } else if let (Some(key), Some(list)) = (merge_key(k), cur.as_array_mut()) {
                    for item in items {
                        let id = item.get(key);
                        let pos =
                            id.and_then(|id| list.iter().position(|x| x.get(key) == Some(id)));
                        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                        match (pos, delete) {
                            (Some(i), true) => {
                                list.remove(i);
                            }
                            (None, true) => {}
                            (Some(i), false) => strategic(&mut list[i], item),
                            (None, false) => list.push(strip_directives(item)),
                        }
                    }
                } else if let (true, Some(list)) = (merged_primitive_list(k), cur.as_array_mut()) {
                    for item in items {
                        if !list.contains(item) {
                            list.push(item.clone());
                        }
                    }
                } else {
                    *cur = strip_directives(pv);
                }
            }
            other => {
                d.insert(k.clone(), other.clone());
            }
        }
    }
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        d.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml"),
            Some(PatchType::Apply)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
    }

    #[test]
    fn merge_and_json_patch() {
        let mut d = json!({"a": 1, "b": {"c": 2}, "l": [1, 2]});
        apply(
            PatchType::Merge,
            &mut d,
            br#"{"a": null, "b": {"d": 3}, "l": [3]}"#,
            true,
        )
        .unwrap();
        assert_eq!(d, json!({"b": {"c": 2, "d": 3}, "l": [3]}));
        apply(
            PatchType::Json,
            &mut d,
            br#"[{"op": "add", "path": "/l/-", "value": 4}]"#,
            true,
        )
        .unwrap();
        assert_eq!(d["l"], json!([3, 4]));
        let e = apply(
            PatchType::Json,
            &mut d,
            br#"[{"op": "test", "path": "/l/0", "value": 9}]"#,
            true,
        );
        assert!(e.is_err());
        assert!(apply(PatchType::Merge, &mut d, b"{", true).is_err());
    }

    #[test]
    fn strategic_merges_lists_by_key() {
        let mut d = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}
        ]}, "metadata": {"finalizers": ["f1"]}});
        let p = json!({
            "metadata": {"finalizers": ["f2"]},
            "spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [
                    {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
                    {"name": "b", "$patch": "delete"},
                    {"name": "c", "image": "c:1"}
                ]
            }
        });
        strategic(&mut d, &p);
        assert_eq!(d["metadata"]["finalizers"], json!(["f1", "f2"]));
        assert_eq!(
            d["spec"]["containers"],
            json!([
                {"name": "a", "image": "a:2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "c", "image": "c:1"}
            ])
        );
        strategic(
            &mut d,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}}),
        );
        assert_eq!(d["metadata"]["finalizers"], json!(["f2"]));
        // A webhook configuration's webhooks merge by name (kubectl apply of one changed field).
        let mut d = json!({"webhooks": [{"name": "w", "rules": [1], "failurePolicy": "Fail",
            "matchConditions": [{"name": "c1", "expression": "false"}]}]});
        strategic(
            &mut d,
            &json!({"webhooks": [{"name": "w", "failurePolicy": "Ignore",
                "matchConditions": [{"name": "c1", "$patch": "delete"}, {"name": "c2", "expression": "true"}]}]}),
        );
        assert_eq!(
            d["webhooks"],
            json!([{"name": "w", "rules": [1], "failurePolicy": "Ignore",
                "matchConditions": [{"name": "c2", "expression": "true"}]}])
        );
        // Lists without a merge key are replaced, as in Kubernetes.
        let mut d = json!({"spec": {"args": ["a", "b"]}});
        strategic(&mut d, &json!({"spec": {"args": ["c"]}}));
        assert_eq!(d["spec"]["args"], json!(["c"]));
    }

    #[test]
    fn apply_body_may_be_yaml() {
        let mut d = json!({"spec": {"a": 1}});
        apply(PatchType::Apply, &mut d, b"spec:\n  b: two\n", true).unwrap();
        assert_eq!(d, json!({"spec": {"a": 1, "b": "two"}}));
        assert!(parse_apply(b"- 1").is_err());
    }
}
