//! How the lists and maps of a kind merge under server-side apply: from a CRD's schema
//! (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`), and for
//! built-in kinds from a table of the list-map keys and atomic maps Kubernetes' OpenAPI
//! declares (`containers` by `name`, container `ports` by `containerPort`+`protocol`, …).
//! Lists not named here are atomic, as in Kubernetes.

use super::Element;
use serde_json::{Value, json};

/// How a list merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListShape {
    /// Replaced as a whole, owned as one field.
    Atomic,
    /// A set of scalars, merged and owned by value.
    Set,
    /// An associative list: items merged and owned by these key fields (with a default for a
    /// missing key, as `protocol: TCP`).
    Map(Vec<(String, Option<Value>)>),
}

/// The merge rules of one kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape<'a> {
    group: &'a str,
    kind: &'a str,
    /// A CRD version's `openAPIV3Schema`; `None` for built-ins.
    schema: Option<&'a Value>,
}

fn keys(names: &[&str]) -> ListShape {
    ListShape::Map(names.iter().map(|n| ((*n).to_string(), None)).collect())
}

fn with_protocol(port: &str) -> ListShape {
    ListShape::Map(vec![
        (port.to_string(), None),
        ("protocol".to_string(), Some(json!("TCP"))),
    ])
}

fn field_names(path: &[Element]) -> Vec<&str> {
    path.iter()
        .filter_map(|e| match e {
            Element::Field(f) => Some(f.as_str()),
            _ => None,
        })
        .collect()
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// `metadata` is the same in every kind.
fn metadata_list(names: &[&str]) -> ListShape {
    match names {
        ["metadata", "ownerReferences"] => keys(&["uid"]),
        ["metadata", "finalizers"] => ListShape::Set,
        _ => ListShape::Atomic,
    }
}

impl<'a> Shape<'a> {
    /// The rules of a built-in kind.
    pub(crate) fn builtin(group: &'a str, kind: &'a str) -> Self {
        Self {
            group,
            kind,
            schema: None,
        }
    }

    /// The rules of a custom resource with `schema` (its `openAPIV3Schema`, if any).
    pub(crate) fn custom(group: &'a str, kind: &'a str, schema: Option<&'a Value>) -> Self {
        Self {
            group,
            kind,
            schema: Some(schema.unwrap_or(&Value::Null)),
        }
    }

    /// How the list at `path` merges.
    pub(crate) fn list(&self, path: &[Element]) -> ListShape {
        let names = field_names(path);
        if names.first() == Some(&"metadata") {
            return metadata_list(&names);
        }
        match self.schema {
            Some(schema) => schema_at(schema, path).map_or(ListShape::Atomic, schema_list),
            None => self.builtin_list(&names),
        }
    }

    /// Whether the map at `path` is atomic (owned and replaced as a whole).
    pub(crate) fn atomic_map(&self, path: &[Element]) -> bool {
        let names = field_names(path);
        if names.first() == Some(&"metadata") {
            return false;
        }
        match self.schema {
            Some(schema) => schema_at(schema, path).is_some_and(|s| {
                s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
            }),
            None => matches!(
                names.last().copied(),
                Some(
                    "selector"
                        | "podSelector"
                        | "namespaceSelector"
                        | "objectSelector"
                        | "labelSelector"
                        | "nodeSelector"
                )
            ),
        }
    }

    fn builtin_list(&self, names: &[&str]) -> ListShape {
        let Some((last, parents)) = names.split_last() else {
            return ListShape::Atomic;
        };
        let in_container = parents.iter().any(|p| CONTAINER_LISTS.contains(p));
        match *last {
            "containers"
            | "initContainers"
            | "ephemeralContainers"
            | "volumes"
            | "imagePullSecrets"
            | "resourceClaims"
            | "schedulingGates" => keys(&["name"]),
            "env" if in_container => keys(&["name"]),
            "volumeMounts" if in_container => keys(&["mountPath"]),
            "volumeDevices" if in_container => keys(&["devicePath"]),
            "ports" if in_container => with_protocol("containerPort"),
            "ports" if self.group.is_empty() && self.kind == "Service" => with_protocol("port"),
            "hostAliases" => keys(&["ip"]),
            "topologySpreadConstraints" => keys(&["topologyKey", "whenUnsatisfiable"]),
            "conditions" if parents.first() == Some(&"status") => keys(&["type"]),
            "podIPs" | "hostIPs" if parents.first() == Some(&"status") => keys(&["ip"]),
            "secrets" if self.group.is_empty() && self.kind == "ServiceAccount" => keys(&["name"]),
            "webhooks" if self.group == "admissionregistration.k8s.io" => keys(&["name"]),
            "taints" if self.kind == "Node" => keys(&["key", "effect"]),
            _ => ListShape::Atomic,
        }
    }
}

/// The schema node at `path`, following `properties`, `additionalProperties` and `items`.
fn schema_at<'s>(schema: &'s Value, path: &[Element]) -> Option<&'s Value> {
    let mut cur = schema;
    for e in path {
        cur = match e {
            Element::Field(f) => cur
                .get("properties")
                .and_then(|p| p.get(f))
                .or_else(|| cur.get("additionalProperties").filter(|a| a.is_object()))?,
            _ => cur.get("items")?,
        };
    }
    Some(cur)
}

fn schema_list(s: &Value) -> ListShape {
    match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListShape::Set,
        Some("map") => ListShape::Map(
            s.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|k| {
                    let default = s
                        .pointer(&format!("/items/properties/{k}/default"))
                        .cloned();
                    (k.to_string(), default)
                })
                .collect(),
        ),
        _ => ListShape::Atomic,
    }
}
