//! The resources the server knows: built-in kinds and those defined by CRDs.

use crate::schema::Structural;
use serde_json::{Value, json};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

mod builtins;
pub(crate) use builtins::age;

/// A printer column (`additionalPrinterColumns` or a built-in's `kubectl get` columns).
#[derive(Debug, Clone)]
pub(crate) struct Column {
    pub(crate) name: String,
    pub(crate) type_: String,
    pub(crate) format: String,
    pub(crate) description: String,
    pub(crate) priority: i64,
    /// A simple JSONPath such as `.spec.mode` (see `table::eval`).
    pub(crate) json_path: String,
}

/// One served version of a resource.
#[derive(Debug)]
pub(crate) struct VersionDef {
    pub(crate) name: String,
    pub(crate) storage: bool,
    pub(crate) status: bool,
    /// The `scale` subresource, if served.
    pub(crate) scale: Option<ScalePaths>,
    pub(crate) schema: Option<Structural>,
    pub(crate) columns: Vec<Column>,
    pub(crate) deprecation_warning: Option<String>,
}

/// Where a `scale` subresource reads and writes (`subresources.scale` of a CRD).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScalePaths {
    /// `.spec.replicas`.
    pub(crate) spec_replicas: String,
    /// `.status.replicas`.
    pub(crate) status_replicas: String,
    /// `.status.selector` (a label selector in string form), if any.
    pub(crate) label_selector: Option<String>,
}

impl ScalePaths {
    /// The paths of the built-in workloads.
    pub(crate) fn workload() -> Self {
        Self {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".status.selector".into()),
        }
    }
}

/// A resource: a kind under a group, with its served versions.
#[derive(Debug)]
pub(crate) struct ResourceDef {
    pub(crate) group: String,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) kind: String,
    pub(crate) list_kind: String,
    pub(crate) namespaced: bool,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) versions: Vec<VersionDef>,
    /// Whether `metadata.generation` is maintained (CRs, Deployments).
    pub(crate) generation: bool,
    /// Defined by a CRD (validated by its schema, merge patch for strategic patches).
    pub(crate) custom: bool,
    /// The CRD's conversion webhook (`spec.conversion.strategy: Webhook`).
    pub(crate) conversion: Option<crate::webhook::ConversionWebhook>,
}

impl ResourceDef {
    /// The served version named `v`.
    pub(crate) fn version(&self, v: &str) -> Option<&VersionDef> {
        self.versions.iter().find(|x| x.name == v)
    }

    /// `apiVersion` for version `v`.
    pub(crate) fn api_version(&self, v: &str) -> String {
        if self.group.is_empty() {
            v.to_string()
        } else {
            format!("{}/{}", self.group, v)
        }
    }

    /// `plural.group` (`plural` for the core group), as in Kubernetes messages.
    pub(crate) fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// Orders versions as Kubernetes does: GA before beta before alpha, higher numbers first,
/// then anything else alphabetically.
pub(crate) fn version_priority(a: &str, b: &str) -> Ordering {
    fn parse(v: &str) -> Option<(u64, u8, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((major, 2, 0));
        }
        let (stage, num) = if let Some(n) = tail.strip_prefix("beta") {
            (1, n)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (0, n)
        } else {
            return None;
        };
        Some((major, stage, num.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Reads a CRD object into a resource definition, compiling the schema of every served version.
pub(crate) fn from_crd(crd: &Value) -> Result<ResourceDef, String> {
    let spec = crd.get("spec").ok_or("spec: Required value")?;
    let s = |p: &str| {
        spec.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let group = s("/group");
    let plural = s("/names/plural");
    let kind = s("/names/kind");
    if group.is_empty() {
        return Err("spec.group: Required value".into());
    }
    if plural.is_empty() {
        return Err("spec.names.plural: Required value".into());
    }
    if kind.is_empty() {
        return Err("spec.names.kind: Required value".into());
    }
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name != format!("{plural}.{group}") {
        return Err(format!(
            "metadata.name: Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"
        ));
    }
    let namespaced = match s("/scope").as_str() {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            return Err(format!(
                "spec.scope: Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
            ));
        }
    };
    let mut versions = Vec::new();
    let mut storage = 0;
    for (i, v) in spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("spec.versions: Required value")?
        .iter()
        .enumerate()
    {
        let vname = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or(format!("spec.versions[{i}].name: Required value"))?;
        let is_storage = v.get("storage").and_then(Value::as_bool) == Some(true);
        storage += usize::from(is_storage);
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let schema = match v.pointer("/schema/openAPIV3Schema") {
            Some(raw) => Some(
                Structural::compile(raw).map_err(|e| format!("spec.versions[{i}].schema.{e}"))?,
            ),
            None => None,
        };
        let mut columns: Vec<Column> = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| {
                        let g = |k: &str| {
                            c.get(k)
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_string()
                        };
                        Column {
                            name: g("name"),
                            type_: g("type"),
                            format: g("format"),
                            description: g("description"),
                            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                            json_path: g("jsonPath"),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        if columns.is_empty() {
            columns.push(age());
        }
        versions.push(VersionDef {
            name: vname.into(),
            storage: is_storage,
            status: v.pointer("/subresources/status").is_some(),
            scale: v.pointer("/subresources/scale").map(|sc| {
                let p = |k: &str| sc.get(k).and_then(Value::as_str).map(str::to_string);
                ScalePaths {
                    spec_replicas: p("specReplicasPath").unwrap_or_else(|| ".spec.replicas".into()),
                    status_replicas: p("statusReplicasPath")
                        .unwrap_or_else(|| ".status.replicas".into()),
                    label_selector: p("labelSelectorPath"),
                }
            }),
            schema,
            columns,
            deprecation_warning: (v.get("deprecated").and_then(Value::as_bool) == Some(true)).then(
                || {
                    v.get("deprecationWarning")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("{group}/{vname} {kind} is deprecated"))
                },
            ),
        });
    }
    if storage != 1 {
        return Err(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        );
    }
    versions.sort_by(|a, b| version_priority(&a.name, &b.name));
    Ok(ResourceDef {
        singular: {
            let sg = s("/names/singular");
            if sg.is_empty() {
                kind.to_lowercase()
            } else {
                sg
            }
        },
        list_kind: {
            let lk = s("/names/listKind");
            if lk.is_empty() {
                format!("{kind}List")
            } else {
                lk
            }
        },
        short_names: strs(spec.pointer("/names/shortNames")),
        categories: strs(spec.pointer("/names/categories")),
        group,
        plural,
        kind,
        namespaced,
        versions,
        generation: true,
        custom: true,
        conversion: crate::webhook::conversion_of_crd(crd),
    })
}

/// The set of served resources; rebuilt whenever a CRD changes.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    by_gr: BTreeMap<(String, String), Arc<ResourceDef>>,
}

impl Registry {
    /// Built-ins plus the given CRDs; CRDs that do not parse are returned with their error.
    pub(crate) fn build<'a>(
        crds: impl IntoIterator<Item = &'a Value>,
    ) -> (Self, Vec<(String, String)>) {
        let mut by_gr = BTreeMap::new();
        for def in builtins::all() {
            by_gr.insert((def.group.clone(), def.plural.clone()), Arc::new(def));
        }
        let mut errors = Vec::new();
        for crd in crds {
            match from_crd(crd) {
                Ok(def) => {
                    by_gr.insert((def.group.clone(), def.plural.clone()), Arc::new(def));
                }
                Err(e) => errors.push((
                    crd.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    e,
                )),
            }
        }
        (Self { by_gr }, errors)
    }

    /// The resource `plural` in `group`, if it serves `version`.
    pub(crate) fn lookup(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceDef>> {
        self.by_gr
            .get(&(group.to_string(), plural.to_string()))
            .filter(|d| d.version(version).is_some())
            .cloned()
    }

    /// The resource `plural` in `group`, whatever its versions.
    pub(crate) fn get(&self, group: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.by_gr
            .get(&(group.to_string(), plural.to_string()))
            .cloned()
    }

    /// Every resource.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.by_gr.values()
    }

    /// API groups with their served versions, preferred version first.
    pub(crate) fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for d in self.by_gr.values() {
            let vs = groups.entry(d.group.clone()).or_default();
            for v in &d.versions {
                if !vs.contains(&v.name) {
                    vs.push(v.name.clone());
                }
            }
        }
        let mut out: Vec<_> = groups
            .into_iter()
            .map(|(g, mut vs)| {
                vs.sort_by(|a, b| version_priority(a, b));
                (g, vs)
            })
            .collect();
        // Built-in groups first, as Kubernetes lists them.
        out.sort_by_key(|(g, _)| (!(g.is_empty() || builtins::is_builtin_group(g)), g.clone()));
        out
    }

    /// The resources served at `group/version`.
    pub(crate) fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceDef>> {
        self.by_gr
            .values()
            .filter(|d| d.group == group && d.version(version).is_some())
            .cloned()
            .collect()
    }
}

/// The `status` of a CRD the server has accepted: Established and NamesAccepted.
pub(crate) fn crd_status(crd: &Value, now: &str) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let stored: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    let cond = |t: &str, reason: &str, msg: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg});
    json!({
        "acceptedNames": names,
        "storedVersions": stored,
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_order_matches_kubernetes() {
        let mut v = vec![
            "v1alpha1", "foo", "v2", "v1beta2", "v1", "v1alpha2", "v1beta1", "v10",
        ];
        v.sort_by(|a, b| version_priority(a, b));
        assert_eq!(
            v,
            [
                "v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha2", "v1alpha1", "foo"
            ]
        );
    }

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.io"},
            "spec": {
                "group": "example.io", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1alpha1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "schema": {"openAPIV3Schema": {"type": "object"}},
                     "additionalPrinterColumns": [{"name": "Mode", "type": "string", "jsonPath": ".spec.mode"}]}
                ]
            }
        })
    }

    #[test]
    fn crd_becomes_a_resource() {
        let (reg, errs) = Registry::build([&crd()]);
        assert!(errs.is_empty());
        let d = reg.lookup("example.io", "v1", "widgets").unwrap();
        assert!(d.namespaced && d.custom);
        assert_eq!(d.versions[0].name, "v1");
        assert!(d.version("v1").unwrap().status);
        assert!(!d.version("v1alpha1").unwrap().status);
        assert_eq!(d.version("v1").unwrap().columns[0].name, "Mode");
        assert!(reg.lookup("example.io", "v2", "widgets").is_none());
        assert!(reg.lookup("", "v1", "secrets").is_some());
        let groups = reg.groups();
        assert_eq!(groups[0].0, "");
        assert_eq!(
            groups.last().unwrap(),
            &(
                "example.io".to_string(),
                vec!["v1".to_string(), "v1alpha1".to_string()]
            )
        );
    }

    #[test]
    fn bad_crds_are_reported() {
        let mut c = crd();
        c["spec"]["versions"][0]["storage"] = json!(true);
        assert!(from_crd(&c).unwrap_err().contains("exactly one"));
        let mut c = crd();
        c["metadata"]["name"] = json!("other");
        assert!(from_crd(&c).unwrap_err().contains("metadata.name"));
        let mut c = crd();
        c["spec"]["scope"] = json!("Global");
        assert!(from_crd(&c).unwrap_err().contains("Unsupported value"));
    }
}
