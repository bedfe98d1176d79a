//! Object metadata helpers: names, timestamps, uids, generation.

use crate::schema::Cause;
use serde_json::{Map, Value};

/// The object's `metadata.<field>` as a string.
pub(crate) fn get<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
}

/// The object's `metadata`, created if missing.
pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = Value::Object(Map::new());
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just set to an object"),
    }
}

/// `metadata.finalizers`.
pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Sets `metadata.finalizers` (removing the field when empty).
pub(crate) fn set_finalizers(obj: &mut Value, f: &[String]) {
    let m = meta_mut(obj);
    if f.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert(
            "finalizers".into(),
            f.iter().cloned().map(Value::String).collect(),
        );
    }
}

/// Whether `metadata.deletionTimestamp` is set.
pub(crate) fn deleting(obj: &Value) -> bool {
    get(obj, "deletionTimestamp").is_some()
}

/// `metadata.ownerReferences[*].uid`.
pub(crate) fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The current time as Kubernetes writes it (`2024-01-02T03:04:05Z`).
pub(crate) fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A random version-4 UUID.
pub(crate) fn uuid() -> String {
    let h = crate::auth::random_hex(16);
    let mut b: Vec<char> = h.chars().collect();
    b[12] = '4';
    b[16] = ['8', '9', 'a', 'b'][usize::from(b[16].to_digit(16).unwrap_or(0) as u8 % 4)];
    let s: String = b.into_iter().collect();
    format!(
        "{}-{}-{}-{}-{}",
        &s[0..8],
        &s[8..12],
        &s[12..16],
        &s[16..20],
        &s[20..32]
    )
}

/// Five random characters Kubernetes appends to `generateName`.
pub(crate) fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    crate::auth::random_hex(5)
        .as_bytes()
        .chunks(2)
        .map(|c| {
            let n = u8::from_str_radix(std::str::from_utf8(c).unwrap_or("0"), 16).unwrap_or(0);
            ALPHABET[usize::from(n) % ALPHABET.len()] as char
        })
        .collect()
}

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Checks an object name: RFC 1123 subdomain (label for namespaces).
pub(crate) fn validate_name(name: &str, label_only: bool) -> Option<Cause> {
    let ok = if label_only {
        dns_label(name)
    } else {
        name.len() <= 253 && name.split('.').all(dns_label)
    };
    (!ok).then(|| Cause {
        reason: "FieldValueInvalid".into(),
        field: "metadata.name".into(),
        message: if label_only {
            format!("Invalid value: {name:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
        } else {
            format!("Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
        },
    })
}

/// Checks a name that only has to be a URL path segment (RBAC objects).
pub(crate) fn validate_path_segment(name: &str) -> Option<Cause> {
    let message = if name == "." || name == ".." {
        format!("Invalid value: {name:?}: may not be '{name}'")
    } else if let Some(bad) = ["/", "%"].iter().find(|c| name.contains(*c)) {
        format!("Invalid value: {name:?}: may not contain '{bad}'")
    } else {
        return None;
    };
    Some(Cause {
        reason: "FieldValueInvalid".into(),
        field: "metadata.name".into(),
        message,
    })
}

/// Checks labels and annotations are maps of strings.
pub(crate) fn validate_maps(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    for field in ["labels", "annotations"] {
        match obj.pointer(&format!("/metadata/{field}")) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    if !v.is_string() {
                        out.push(Cause {
                            reason: "FieldValueTypeInvalid".into(),
                            field: format!("metadata.{field}.{k}"),
                            message: format!("Invalid value: {v}: must be a string"),
                        });
                    }
                }
            }
            Some(_) => out.push(Cause {
                reason: "FieldValueTypeInvalid".into(),
                field: format!("metadata.{field}"),
                message: "Invalid value: must be a map of strings".into(),
            }),
        }
    }
    out
}

/// Whether the maps are equal but for the keys `skip` accepts.
fn equal_except(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    skip: impl Fn(&str) -> bool,
) -> bool {
    let kept = |m: &Map<String, Value>| m.keys().filter(|k| !skip(k)).count();
    kept(a) == kept(b) && a.iter().all(|(k, v)| skip(k) || b.get(k) == Some(v))
}

/// An object's `metadata` (`empty` when it has none); `None` when it is not a map.
fn metadata_of<'a>(
    obj: &'a Map<String, Value>,
    empty: &'a Map<String, Value>,
) -> Option<&'a Map<String, Value>> {
    match obj.get("metadata") {
        Some(Value::Object(meta)) => Some(meta),
        None => Some(empty),
        Some(_) => None,
    }
}

/// Whether two objects are the same but for `metadata.resourceVersion` (an update that
/// changes nothing else is a no-op), compared in place.
pub(crate) fn same_but_revision(a: &Value, b: &Value) -> bool {
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        return a == b;
    };
    let empty = Map::new();
    let (Some(ma), Some(mb)) = (metadata_of(a, &empty), metadata_of(b, &empty)) else {
        return a == b;
    };
    equal_except(a, b, |k| k == "metadata") && equal_except(ma, mb, |k| k == "resourceVersion")
}

/// Whether two objects are the same in everything but `metadata`, `apiVersion`, `kind` and
/// (when `status_separate`) `status`: whether `generation` stays.
pub(crate) fn same_spec(a: &Value, b: &Value, status_separate: bool) -> bool {
    let skip = |k: &str| {
        matches!(k, "metadata" | "apiVersion" | "kind") || (status_separate && k == "status")
    };
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => equal_except(a, b, skip),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names() {
        assert!(validate_name("a.b-c", false).is_none());
        assert!(validate_name("a.b", true).is_some());
        assert!(validate_name("Upper", false).is_some());
        assert!(validate_name("-x", false).is_some());
        assert!(validate_name("", false).is_some());
    }

    #[test]
    fn generated_ids_have_kubernetes_shapes() {
        let u = uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(uuid(), u);
        let s = name_suffix();
        assert_eq!(s.len(), 5);
        assert!(validate_name(&format!("x-{s}"), true).is_none());
        assert_eq!(now().len(), 20);
    }

    #[test]
    fn same_but_revision_ignores_only_the_revision() {
        let base = json!({"kind": "K", "metadata": {"name": "a", "resourceVersion": "1"}, "data": {"x": "1"}});
        let cases = [
            (
                json!({"kind": "K", "metadata": {"name": "a", "resourceVersion": "2"}, "data": {"x": "1"}}),
                true,
            ),
            (
                json!({"kind": "K", "metadata": {"name": "a"}, "data": {"x": "1"}}),
                true,
            ),
            (
                json!({"kind": "K", "metadata": {"name": "b", "resourceVersion": "1"}, "data": {"x": "1"}}),
                false,
            ),
            (
                json!({"kind": "K", "metadata": {"name": "a", "resourceVersion": "1"}, "data": {"x": "2"}}),
                false,
            ),
            (
                json!({"kind": "K", "metadata": {"name": "a", "resourceVersion": "1"}}),
                false,
            ),
            (
                json!({"kind": "K", "metadata": {"name": "a", "resourceVersion": "1", "labels": {}}, "data": {"x": "1"}}),
                false,
            ),
            (
                json!({"kind": "K", "metadata": {"name": "a", "resourceVersion": "1"}, "data": {"x": "1"}, "extra": null}),
                false,
            ),
        ];
        for (other, want) in cases {
            assert_eq!(same_but_revision(&base, &other), want, "{other}");
            assert_eq!(same_but_revision(&other, &base), want, "{other}");
        }
        assert!(same_but_revision(
            &json!({"metadata": {"resourceVersion": "3"}}),
            &json!({})
        ));
        assert!(!same_but_revision(&json!({"metadata": 1}), &json!({})));
    }

    #[test]
    fn same_spec_ignores_metadata_and_maybe_status() {
        let o = json!({"apiVersion": "v1", "metadata": {"x": 1}, "spec": 1, "status": 2});
        let cases = [
            (
                json!({"apiVersion": "v2", "kind": "K", "metadata": {"x": 2}, "spec": 1, "status": 2}),
                true,
                true,
            ),
            (
                json!({"apiVersion": "v1", "metadata": {"x": 1}, "spec": 1, "status": 3}),
                true,
                false,
            ),
            (
                json!({"apiVersion": "v1", "metadata": {"x": 1}, "spec": 1}),
                true,
                false,
            ),
            (
                json!({"apiVersion": "v1", "metadata": {"x": 1}, "spec": 2, "status": 2}),
                false,
                false,
            ),
            (json!({"metadata": {"x": 1}, "status": 2}), false, false),
            (
                json!({"metadata": {}, "spec": 1, "status": 2, "data": 1}),
                false,
                false,
            ),
        ];
        for (other, with_status_apart, with_status) in cases {
            assert_eq!(same_spec(&o, &other, true), with_status_apart, "{other}");
            assert_eq!(same_spec(&other, &o, false), with_status, "{other}");
        }
        assert_eq!(
            validate_maps(&json!({"metadata": {"labels": {"a": 1}}})).len(),
            1
        );
        assert_eq!(
            owner_uids(&json!({"metadata": {"ownerReferences": [{"uid": "u"}]}})),
            ["u"]
        );
    }
}
