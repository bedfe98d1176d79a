//! `x-kubernetes-list-type` uniqueness, as kube-apiserver checks it on every write: the items of
//! a `map` list must differ in their `x-kubernetes-list-map-keys`, the items of a `set` list must
//! differ. A repeat is `<path>[<i>]: Duplicate value: <key>` with Go's `%#v` of the key
//! (`map[string]interface {}{"type":"Ready"}` for a map list, `"a"` for a set of strings).

use serde_json::Value;

use super::Cause;

/// The duplicates in `obj` of every list `schema` declares a `map` or a `set`.
pub(super) fn duplicates(schema: &Value, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    walk(schema, obj, String::new(), &mut causes);
    causes
}

fn walk(schema: &Value, v: &Value, path: String, causes: &mut Vec<Cause>) {
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in m {
                let child_path = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if let Some(s) = props.and_then(|p| p.get(k)).or(additional) {
                    walk(s, child, child_path, causes);
                }
            }
        }
        Value::Array(items) => {
            match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("map") => {
                    let keys: Vec<&str> = schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|k| k.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let mut seen: Vec<Vec<(&str, Option<&Value>)>> = Vec::new();
                    for (i, item) in items.iter().enumerate() {
                        let key: Vec<(&str, Option<&Value>)> =
                            keys.iter().map(|k| (*k, item.get(*k))).collect();
                        if seen.contains(&key) {
                            causes.push(duplicate(&path, i, go_map(&key)));
                        } else {
                            seen.push(key);
                        }
                    }
                }
                Some("set") => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].contains(item) {
                            causes.push(duplicate(&path, i, go_value(item)));
                        }
                    }
                }
                _ => {}
            }
            if let Some(s) = schema.get("items") {
                for (i, child) in items.iter().enumerate() {
                    walk(s, child, format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

fn duplicate(path: &str, index: usize, shown: String) -> Cause {
    Cause {
        reason: "FieldValueDuplicate".into(),
        field: format!("{path}[{index}]"),
        message: format!("Duplicate value: {shown}"),
    }
}

/// Go's `%#v` of the `map[string]interface{}` kube-apiserver builds from an item's keys (sorted,
/// missing keys left out).
fn go_map(key: &[(&str, Option<&Value>)]) -> String {
    let mut present: Vec<(&str, &Value)> =
        key.iter().filter_map(|(k, v)| Some((*k, (*v)?))).collect();
    present.sort_by_key(|(k, _)| *k);
    let fields: Vec<String> = present
        .iter()
        .map(|(k, v)| format!("{k:?}:{}", go_value(v)))
        .collect();
    format!("map[string]interface {{}}{{{}}}", fields.join(", "))
}

fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn repeats_in_map_and_set_lists() {
        let schema = json!({"type": "object", "properties": {"status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"], "items": {"type": "object"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["protocol", "port"], "items": {"type": "object"}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "plain": {"type": "array", "items": {"type": "object"}}
        }}}});
        let table = [
            (
                json!({"status": {"conditions": [{"type": "Ready"}, {"type": "Ready", "status": "False"}]}}),
                vec![(
                    "status.conditions[1]",
                    "Duplicate value: map[string]interface {}{\"type\":\"Ready\"}",
                )],
            ),
            (
                json!({"status": {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"}]}}),
                vec![(
                    "status.ports[1]",
                    "Duplicate value: map[string]interface {}{\"port\":80, \"protocol\":\"TCP\"}",
                )],
            ),
            (
                json!({"status": {"tags": ["a", "b", "a"]}}),
                vec![("status.tags[2]", "Duplicate value: \"a\"")],
            ),
            (
                json!({"status": {"conditions": [{"type": "Ready"}, {"type": "Installed"}], "plain": [{"a": 1}, {"a": 1}]}}),
                vec![],
            ),
        ];
        for (obj, want) in table {
            let got: Vec<(String, String)> = duplicates(&schema, &obj)
                .into_iter()
                .map(|c| (c.field, c.message))
                .collect();
            let want: Vec<(String, String)> = want
                .into_iter()
                .map(|(f, m)| (f.to_owned(), m.to_owned()))
                .collect();
            assert_eq!(got, want, "{obj}");
        }
    }
}
