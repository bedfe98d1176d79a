//! The `scale` subresource (`autoscaling/v1` `Scale`) of workloads and of custom resources
//! that declare `subresources.scale`: what `kubectl scale` and autoscalers read and write.
//! Pure: objects in, objects out.

use crate::resources::ScalePaths;
use serde_json::{Value, json};

/// A `.a.b` path as a JSON pointer.
fn pointer(path: &str) -> String {
    path.split('.')
        .filter(|s| !s.is_empty())
        .fold(String::new(), |p, s| format!("{p}/{s}"))
}

/// The `Scale` view of `obj`.
pub(crate) fn to_scale(paths: &ScalePaths, obj: &Value, builtin: bool) -> Value {
    let m = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut meta = serde_json::Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = m.get(f) {
            meta.insert(f.into(), v.clone());
        }
    }
    let replicas = |p: &str| obj.pointer(&pointer(p)).cloned().unwrap_or(json!(0));
    let mut status = json!({"replicas": replicas(&paths.status_replicas)});
    let selector = if builtin {
        obj.pointer("/spec/selector")
            .and_then(crate::table::builtin::selector_text)
            .map(Value::String)
    } else {
        paths
            .label_selector
            .as_deref()
            .and_then(|p| obj.pointer(&pointer(p)).cloned())
    };
    if let Some(s) = selector {
        status["selector"] = s;
    }
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta,
        "spec": {"replicas": replicas(&paths.spec_replicas)}, "status": status,
    })
}

/// Writes the replicas of `scale` into `obj`.
pub(crate) fn set_replicas(
    paths: &ScalePaths,
    obj: &mut Value,
    scale: &Value,
) -> Result<(), String> {
    let n = match scale.pointer("/spec/replicas") {
        None => 0,
        Some(v) => v.as_i64().filter(|n| *n >= 0).ok_or_else(|| {
            "spec.replicas: Invalid value: must be greater than or equal to 0".to_string()
        })?,
    };
    let p = pointer(&paths.spec_replicas);
    let (parent, field) = p.rsplit_once('/').unwrap_or(("", &p));
    if obj.pointer(parent).is_none() {
        let mut cur = &mut *obj;
        for seg in parent.split('/').filter(|s| !s.is_empty()) {
            if !cur.get(seg).is_some_and(Value::is_object) {
                cur[seg] = json!({});
            }
            cur = &mut cur[seg];
        }
    }
    if let Some(Value::Object(m)) = obj.pointer_mut(parent) {
        m.insert(field.to_string(), json!(n));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_reads_and_writes_replicas() {
        let paths = ScalePaths::workload();
        let mut d = json!({"metadata": {"name": "web", "namespace": "d8", "uid": "u", "labels": {"a": "b"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}, "status": {"replicas": 1}});
        let s = to_scale(&paths, &d, true);
        assert_eq!(s["spec"]["replicas"], 2);
        assert_eq!(s["status"], json!({"replicas": 1, "selector": "app=web"}));
        assert!(s["metadata"].get("labels").is_none());
        set_replicas(&paths, &mut d, &json!({"spec": {"replicas": 5}})).unwrap();
        assert_eq!(d["spec"]["replicas"], 5);
        assert!(set_replicas(&paths, &mut d, &json!({"spec": {"replicas": -1}})).is_err());
        let mut empty = json!({});
        set_replicas(&paths, &mut empty, &json!({"spec": {"replicas": 1}})).unwrap();
        assert_eq!(empty, json!({"spec": {"replicas": 1}}));
    }
}
