//! Rendered files into ordered documents, as Helm's `releaseutil.SortManifests` does: each
//! file split on `---` lines, empty documents dropped, each document's head (`kind`,
//! `metadata.name`, annotations) read, hooks (`helm.sh/hook`) set apart, and both lists
//! sorted by kind in install order (stable: file path, then position in the file).

use crate::decode::scalar_string;
use crate::yaml_read;

/// The order Helm installs kinds in; unknown kinds come last, alphabetically by kind.
pub const INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
];

/// The hook events Helm knows (`helm.sh/hook` values, compared lower-cased).
const HOOK_EVENTS: &[&str] = &[
    "pre-install",
    "post-install",
    "pre-delete",
    "post-delete",
    "pre-upgrade",
    "post-upgrade",
    "pre-rollback",
    "post-rollback",
    "test",
    "test-success",
];

/// One document of a rendered file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The file it came from (`t/templates/x.yaml`).
    pub path: String,
    /// The document, trimmed.
    pub content: String,
    /// Its `kind`.
    pub kind: String,
    /// Its `metadata.name`.
    pub name: String,
    /// The `helm.sh/hook` events, if it is a hook.
    pub hook_events: Option<Vec<String>>,
}

/// Helm's `SplitManifests`: documents of a file in order, trimmed, empty ones dropped. The
/// separator is `---` at the start or after a newline (with any whitespace before that
/// newline), and any whitespace after it.
pub fn split_manifests(file: &str) -> Vec<String> {
    let text = file.trim_matches(go_space);
    let mut docs = Vec::new();
    let b = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    // Find each separator: (^ | \s*\n) --- \s*
    while i <= b.len() {
        let at_start = i == 0 && b.starts_with(b"---");
        let mut sep: Option<(usize, usize)> = None;
        if at_start {
            let mut end = 3;
            while end < b.len() && is_go_space(b[end]) {
                end += 1;
            }
            sep = Some((0, end));
        } else if i < b.len() && b[i] == b'\n' && b[i + 1..].starts_with(b"---") {
            // Extend backwards over whitespace before the newline (leftmost match).
            let mut s = i;
            while s > start && is_go_space(b[s - 1]) {
                s -= 1;
            }
            let mut end = i + 4;
            while end < b.len() && is_go_space(b[end]) {
                end += 1;
            }
            sep = Some((s, end));
        }
        match sep {
            Some((s, e)) => {
                docs.push(&text[start..s]);
                start = e;
                i = e.max(i + 1);
            }
            None => i += 1,
        }
    }
    docs.push(&text[start..]);
    docs.into_iter()
        .filter(|d| !d.is_empty())
        .map(|d| d.trim_matches(go_space).to_owned())
        .collect()
}

fn is_go_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
}

fn go_space(c: char) -> bool {
    c.is_whitespace()
}

/// Sorts rendered files (`(path, content)`) into manifests and hooks, each in install order.
/// The error is Helm's `YAML parse error on <path>: …`.
pub fn sort_manifests(
    files: &[(String, String)],
) -> Result<(Vec<Manifest>, Vec<Manifest>), String> {
    let mut sorted: Vec<&(String, String)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut generic = Vec::new();
    let mut hooks = Vec::new();
    for (path, content) in sorted {
        if crate::chart::go_base(path).starts_with('_') || content.trim().is_empty() {
            continue;
        }
        for doc in split_manifests(content) {
            let head = read_head(&doc).map_err(|e| format!("YAML parse error on {path}: {e}"))?;
            let m = Manifest {
                path: path.clone(),
                content: doc,
                kind: head.kind,
                name: head.name,
                hook_events: None,
            };
            let Some(hook) = head.annotations.iter().find(|(k, _)| k == "helm.sh/hook") else {
                generic.push(m);
                continue;
            };
            let events: Vec<String> = hook.1.split(',').map(|e| e.trim().to_lowercase()).collect();
            if events.iter().any(|e| !HOOK_EVENTS.contains(&e.as_str())) {
                // Helm logs "info: skipping unknown hook" and drops the document.
                continue;
            }
            hooks.push(Manifest {
                hook_events: Some(events),
                ..m
            });
        }
    }
    sort_by_kind(&mut generic);
    sort_by_kind(&mut hooks);
    Ok((generic, hooks))
}

fn sort_by_kind(list: &mut [Manifest]) {
    let rank = |k: &str| INSTALL_ORDER.iter().position(|o| *o == k);
    list.sort_by(|a, b| match (rank(&a.kind), rank(&b.kind)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.kind.cmp(&b.kind),
    });
}

struct Head {
    kind: String,
    name: String,
    annotations: Vec<(String, String)>,
}

/// Reads a document into Helm's `SimpleHead`.
fn read_head(doc: &str) -> Result<Head, String> {
    let v = yaml_read::parse_typed(doc)?;
    let mut head = Head {
        kind: String::new(),
        name: String::new(),
        annotations: Vec::new(),
    };
    let obj = match &v {
        serde_json::Value::Null => return Ok(head),
        serde_json::Value::Object(o) => o,
        other => {
            return Err(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type releaseutil.SimpleHead",
                json_kind(other)
            ));
        }
    };
    let mismatch = |field: &str, v: &serde_json::Value, ty: &str| {
        format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field {field} of type {ty}",
            json_kind(v)
        )
    };
    if let Some(k) = lookup(obj, "kind") {
        match scalar_string(k) {
            Some(s) => head.kind = s,
            None if k.is_null() => {}
            None => return Err(mismatch("SimpleHead.kind", k, "string")),
        }
    }
    if let Some(av) = lookup(obj, "apiVersion")
        && scalar_string(av).is_none()
        && !av.is_null()
    {
        return Err(mismatch("SimpleHead.apiVersion", av, "string"));
    }
    let Some(md) = lookup(obj, "metadata") else {
        return Ok(head);
    };
    let md = match md {
        serde_json::Value::Null => return Ok(head),
        serde_json::Value::Object(o) => o,
        other => {
            return Err(mismatch(
                "SimpleHead.metadata",
                other,
                "struct { Name string \"json:\\\"name\\\"\"; Annotations map[string]string \"json:\\\"annotations\\\"\" }",
            ));
        }
    };
    if let Some(n) = lookup(md, "name") {
        match scalar_string(n) {
            Some(s) => head.name = s,
            None if n.is_null() => {}
            None => return Err(mismatch("SimpleHead.metadata.name", n, "string")),
        }
    }
    if let Some(a) = lookup(md, "annotations") {
        match a {
            serde_json::Value::Null => {}
            serde_json::Value::Object(o) => {
                for (k, v) in o {
                    match scalar_string(v) {
                        Some(s) => head.annotations.push((k.clone(), s)),
                        None if v.is_null() => head.annotations.push((k.clone(), String::new())),
                        None => {
                            return Err(mismatch("SimpleHead.metadata.annotations", v, "string"));
                        }
                    }
                }
            }
            other => {
                return Err(mismatch(
                    "SimpleHead.metadata.annotations",
                    other,
                    "map[string]string",
                ));
            }
        }
    }
    Ok(head)
}

fn lookup<'a>(
    obj: &'a serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<&'a serde_json::Value> {
    obj.get(key).or_else(|| {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_like_helm() {
        // The whitespace after one separator swallows the newline the next one needs, as
        // Go's regexp does.
        assert_eq!(
            split_manifests("---\na: 1\n---\n\n---  \nb: 2\n"),
            vec!["a: 1", "---  \nb: 2"]
        );
        assert_eq!(split_manifests("a: 1  \n---b: 2"), vec!["a: 1", "b: 2"]);
        assert_eq!(
            split_manifests("a: '---'\nb: x---y"),
            vec!["a: '---'\nb: x---y"]
        );
        assert!(split_manifests("  \n").is_empty());
    }
}
