//! Pure decisions of a module run: which objects a manifest holds, whether the release must be
//! applied again (addon-operator's rule: no release, a last release not `deployed`, another
//! manifest checksum, or a resource missing), and which resources left the chart.

use std::collections::BTreeSet;

use serde_json::Value;

use super::release::{Release, Status};

/// An object's identity: API group, kind, namespace (`None` when cluster-wide or unknown
/// before discovery), name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// `apiVersion` as written (`apps/v1`).
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of an object; a namespaced object without a namespace gets `default_namespace`
    /// when `namespaced` says it is namespaced.
    pub fn of(object: &Value) -> Option<ObjectKey> {
        Some(ObjectKey {
            api_version: object.get("apiVersion")?.as_str()?.to_owned(),
            kind: object.get("kind")?.as_str()?.to_owned(),
            namespace: object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
            name: object.pointer("/metadata/name")?.as_str()?.to_owned(),
        })
    }

    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// Same object, whatever version of its group it is written in.
    fn same_object(&self, other: &ObjectKey) -> bool {
        self.group() == other.group()
            && self.kind == other.kind
            && self.namespace == other.namespace
            && self.name == other.name
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// Whether the rendered release must be applied: there is no release, the last one is not
/// `deployed`, its `moduleChecksum` differs, or some resource is absent from the cluster.
pub fn needs_apply(last: Option<&Release>, checksum: &str, any_absent: bool) -> bool {
    match last {
        None => true,
        Some(r) if r.status != Status::Deployed => true,
        Some(r) if r.checksum() != Some(checksum) => true,
        Some(_) => any_absent,
    }
}

/// Objects of the previous release that the new one no longer holds (in reverse install
/// order, as Helm deletes), except those annotated `helm.sh/resource-policy: keep`.
/// `previous` and `current` are keys with namespaces already defaulted.
pub fn removed(previous: &[(ObjectKey, bool)], current: &[ObjectKey]) -> Vec<ObjectKey> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<ObjectKey> = previous
        .iter()
        .filter(|(key, keep)| !*keep && !current.iter().any(|c| c.same_object(key)))
        .filter(|(key, _)| seen.insert(key.clone()))
        .map(|(key, _)| key.clone())
        .collect();
    out.reverse();
    out
}

/// Which of the `current` objects must be applied: those the last deployed revision
/// (`previous`, decorated and settled the same way) did not hold as they are now. The others
/// are applied only if they are missing from the cluster.
pub fn to_apply(previous: &[(ObjectKey, Value)], current: &[(ObjectKey, Value)]) -> Vec<bool> {
    current
        .iter()
        .map(|(key, object)| {
            !previous
                .iter()
                .any(|(k, o)| k.same_object(key) && k.api_version == key.api_version && o == object)
        })
        .collect()
}

/// Whether an object carries `helm.sh/resource-policy: keep`.
pub fn kept(object: &Value) -> bool {
    object
        .pointer("/metadata/annotations/helm.sh~1resource-policy")
        .and_then(Value::as_str)
        == Some("keep")
}

/// The checksum addon-operator stores as `moduleChecksum`: of the rendered manifests.
pub fn checksum(manifest: &str) -> String {
    crate::install::md5_hex(manifest.as_bytes())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn key(api: &str, kind: &str, ns: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            api_version: api.into(),
            kind: kind.into(),
            namespace: ns.map(Into::into),
            name: name.into(),
        }
    }

    fn release(status: Status, checksum: &str) -> Release {
        Release {
            name: "m".into(),
            namespace: "d8-system".into(),
            version: 1,
            status,
            manifest: String::new(),
            config: json!({}),
            chart: ("m".into(), "0.2.0".into()),
            first_deployed: String::new(),
            last_deployed: String::new(),
            description: String::new(),
            labels: BTreeMap::from([("moduleChecksum".into(), checksum.into())]),
        }
    }

    #[test]
    fn apply_or_not() {
        let deployed = release(Status::Deployed, "a");
        let failed = release(Status::Failed, "a");
        let rows: &[(Option<&Release>, &str, bool, bool)] = &[
            (None, "a", false, true),
            (Some(&deployed), "a", false, false),
            (Some(&deployed), "a", true, true),
            (Some(&deployed), "b", false, true),
            (Some(&failed), "a", false, true),
        ];
        for (i, (last, sum, absent, want)) in rows.iter().enumerate() {
            assert_eq!(needs_apply(*last, sum, *absent), *want, "row {i}");
        }
    }

    #[test]
    fn what_left_the_chart() {
        let cm = key("v1", "ConfigMap", Some("d8-echo"), "a");
        let old_cm = key("v1", "ConfigMap", Some("d8-echo"), "old");
        let kept_cm = key("v1", "ConfigMap", Some("d8-echo"), "kept");
        let deploy_v1 = key("apps/v1", "Deployment", Some("d8-echo"), "echo");
        let deploy_beta = key("apps/v1beta1", "Deployment", Some("d8-echo"), "echo");
        let ns = key("v1", "Namespace", None, "d8-echo");
        let previous = vec![
            (ns.clone(), false),
            (cm.clone(), false),
            (old_cm.clone(), false),
            (kept_cm.clone(), true),
            (deploy_beta, false),
        ];
        // Same resource in another version of its group is not removed.
        assert_eq!(
            removed(&previous, &[ns.clone(), cm.clone(), deploy_v1.clone()]),
            vec![old_cm.clone()]
        );
        // Everything gone: reverse order, kept one stays.
        assert_eq!(
            removed(&previous, &[]),
            vec![
                key("apps/v1beta1", "Deployment", Some("d8-echo"), "echo"),
                old_cm,
                cm,
                ns
            ]
        );
        // Applying the plan and planning again removes nothing.
        assert!(removed(&[], &[deploy_v1]).is_empty());
    }

    #[test]
    fn only_what_changed_is_applied() {
        let cm = |name: &str, v: &str| {
            (
                key("v1", "ConfigMap", Some("n"), name),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": v}}),
            )
        };
        let previous = vec![cm("a", "1"), cm("b", "1")];
        let current = vec![cm("a", "1"), cm("b", "2"), cm("c", "1")];
        assert_eq!(to_apply(&previous, &current), vec![false, true, true]);
        // After the apply, planning again applies nothing.
        assert_eq!(to_apply(&current, &current), vec![false, false, false]);
        // Another version of the same kind is applied (its fields may differ).
        let moved = vec![(key("v2", "ConfigMap", Some("n"), "a"), current[0].1.clone())];
        assert_eq!(to_apply(&current, &moved), vec![true]);
    }

    #[test]
    fn keys_and_policies() {
        let o = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "x", "namespace": "", "annotations": {"helm.sh/resource-policy": "keep"}}});
        let k = ObjectKey::of(&o).unwrap();
        assert_eq!(k, key("apps/v1", "Deployment", None, "x"));
        assert_eq!(k.group(), "apps");
        assert!(kept(&o));
        assert_eq!(key("v1", "Secret", None, "s").group(), "");
        assert!(ObjectKey::of(&json!({"kind": "X"})).is_none());
        assert_eq!(k.to_string(), "Deployment x");
        assert_eq!(checksum(""), "d41d8cd98f00b204e9800998ecf8427e");
    }
}
