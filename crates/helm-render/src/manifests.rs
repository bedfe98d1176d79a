//! Rendered files into ordered documents, as Helm's `releaseutil.SortManifests` does: each
//! file split on `---` lines, empty documents dropped, each document's head (`kind`,
//! `metadata.name`, annotations) read, hooks (`helm.sh/hook`) set apart, and both lists
//! sorted by kind in install order (stable: file path, then position in the file).

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
            let head = crate::yaml::parse_head(&doc)
                .map_err(|e| format!("YAML parse error on {path}: {}", e.message()))?;
            let metadata = head.metadata.unwrap_or_default();
            let hook = metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("helm.sh/hook").cloned());
            let m = Manifest {
                path: path.clone(),
                content: doc,
                kind: head.kind,
                name: metadata.name,
                hook_events: None,
            };
            let Some(hook) = hook else {
                generic.push(m);
                continue;
            };
            let events: Vec<String> = hook.split(',').map(|e| e.trim().to_lowercase()).collect();
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
