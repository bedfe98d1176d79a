//! Binding contexts: what a hook finds at `BINDING_CONTEXT_PATH`, built from pure events and
//! rendered in the JSON shapes shell-operator writes; and the per-binding object cache that
//! decides whether a watch event runs the hook at all (an unchanged filter result does not).

mod monitor;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::config::{ConfigVersion, HookConfig, KubernetesBinding, ScheduleBinding, WatchEvent};

pub use monitor::{Monitor, resource_id};

/// A cached object of a `kubernetes` binding with its `jqFilter` result.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectAndFilterResult {
    /// `namespace/kind/name`, the sort key of snapshots.
    pub resource_id: String,
    /// The full object; `None` when the binding sets `keepFullObjectsInMemory: false`.
    pub object: Option<Value>,
    /// `Some` exactly when the binding has a `jqFilter`.
    pub filter_result: Option<Value>,
    /// Checksum of the filter result (or of the object without a filter).
    pub checksum: u64,
}

impl ObjectAndFilterResult {
    /// `{"object": …, "filterResult": …}` as shell-operator renders a snapshot item.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(o) = &self.object {
            m.insert("object".into(), o.clone());
        }
        if let Some(f) = &self.filter_result {
            m.insert("filterResult".into(), f.clone());
        }
        Value::Object(m)
    }
}

/// What happened, per binding type.
#[derive(Debug, Clone, PartialEq)]
pub enum ContextKind {
    OnStartup,
    /// `beforeHelm`, `afterHelm`, `afterDeleteHelm`, `beforeAll`, `afterAll`: the binding
    /// name is the type; they see every snapshot of the hook.
    Helm,
    Schedule,
    Synchronization {
        objects: Vec<ObjectAndFilterResult>,
    },
    Event {
        watch_event: WatchEvent,
        object: ObjectAndFilterResult,
    },
    /// A `kubernetesValidating` binding: the AdmissionReview to answer.
    Validating {
        review: Value,
    },
    /// A `kubernetesCustomResourceConversion` binding: the ConversionReview and the step.
    Conversion {
        from_version: String,
        to_version: String,
        review: Value,
    },
}

/// One binding context, before rendering.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingContext {
    pub binding: String,
    pub kind: ContextKind,
    pub group: Option<String>,
    /// Kubernetes bindings whose snapshots go into `snapshots`.
    pub include_snapshots_from: Vec<String>,
    /// The helm bindings include every snapshot.
    pub include_all_snapshots: bool,
    /// Filled by [`BindingContext::with_snapshots`] just before the run.
    pub snapshots: BTreeMap<String, Vec<ObjectAndFilterResult>>,
}

impl BindingContext {
    fn base(binding: &str, kind: ContextKind) -> Self {
        Self {
            binding: binding.to_owned(),
            kind,
            group: None,
            include_snapshots_from: Vec::new(),
            include_all_snapshots: false,
            snapshots: BTreeMap::new(),
        }
    }

    /// `[{"binding": "onStartup"}]`.
    pub fn on_startup() -> Self {
        Self::base("onStartup", ContextKind::OnStartup)
    }

    /// A helm binding (`beforeHelm`, `afterHelm`, `afterDeleteHelm`, `beforeAll`, `afterAll`).
    pub fn helm(binding: &str) -> Self {
        let mut c = Self::base(binding, ContextKind::Helm);
        c.include_all_snapshots = true;
        c
    }

    /// A schedule binding fired.
    pub fn schedule(binding: &ScheduleBinding) -> Self {
        let mut c = Self::base(&binding.name, ContextKind::Schedule);
        c.group = binding.group.clone();
        c.include_snapshots_from = binding.include_snapshots_from.clone();
        c
    }

    /// An AdmissionReview for a `kubernetesValidating` binding.
    pub fn validating(binding: &str, include_snapshots_from: &[String], review: Value) -> Self {
        let mut c = Self::base(binding, ContextKind::Validating { review });
        c.include_snapshots_from = include_snapshots_from.to_vec();
        c
    }

    /// A ConversionReview for a `kubernetesCustomResourceConversion` binding, one step
    /// (`fromVersion` → `toVersion`, both `group/version`).
    pub fn conversion(
        binding: &str,
        include_snapshots_from: &[String],
        from_version: &str,
        to_version: &str,
        review: Value,
    ) -> Self {
        let mut c = Self::base(
            binding,
            ContextKind::Conversion {
                from_version: from_version.to_owned(),
                to_version: to_version.to_owned(),
                review,
            },
        );
        c.include_snapshots_from = include_snapshots_from.to_vec();
        c
    }

    pub(crate) fn kubernetes(binding: &KubernetesBinding, kind: ContextKind) -> Self {
        let mut c = Self::base(&binding.name, kind);
        c.group = binding.group.clone();
        c.include_snapshots_from = binding.include_snapshots_from.clone();
        c
    }

    /// Fills `snapshots` from the hook's monitors (by binding name), as shell-operator does
    /// right before running the hook.
    pub fn with_snapshots(mut self, monitors: &BTreeMap<String, Monitor>) -> Self {
        let names: Vec<String> = if self.include_all_snapshots {
            monitors.keys().cloned().collect()
        } else {
            self.include_snapshots_from.clone()
        };
        self.snapshots = names
            .into_iter()
            .filter_map(|n| monitors.get(&n).map(|m| (n, m.snapshot())))
            .collect();
        self
    }

    /// The JSON object shell-operator writes for this context.
    pub fn to_json(&self, version: ConfigVersion) -> Value {
        match version {
            ConfigVersion::V1 => self.to_json_v1(),
            ConfigVersion::V0 => self.to_json_v0(),
        }
    }

    fn to_json_v1(&self) -> Value {
        let mut m = Map::new();
        m.insert("binding".into(), json!(self.binding));
        if self.kind == ContextKind::OnStartup {
            return Value::Object(m);
        }
        if !self.include_snapshots_from.is_empty() || self.include_all_snapshots {
            let snaps: Map<String, Value> = self
                .snapshots
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        Value::Array(v.iter().map(|o| o.to_json()).collect()),
                    )
                })
                .collect();
            m.insert("snapshots".into(), Value::Object(snaps));
        }
        match &self.kind {
            ContextKind::Validating { review } => {
                m.insert("type".into(), json!("Validating"));
                m.insert("review".into(), review.clone());
                return Value::Object(m);
            }
            ContextKind::Conversion {
                from_version,
                to_version,
                review,
            } => {
                m.insert("type".into(), json!("Conversion"));
                m.insert("fromVersion".into(), json!(from_version));
                m.insert("toVersion".into(), json!(to_version));
                m.insert("review".into(), review.clone());
                return Value::Object(m);
            }
            _ => {}
        }
        if let Some(group) = &self.group {
            m.insert("binding".into(), json!(group));
            m.insert("type".into(), json!("Group"));
            return Value::Object(m);
        }
        match &self.kind {
            ContextKind::OnStartup
            | ContextKind::Helm
            | ContextKind::Validating { .. }
            | ContextKind::Conversion { .. } => {}
            ContextKind::Schedule => {
                m.insert("type".into(), json!("Schedule"));
            }
            ContextKind::Synchronization { objects } => {
                m.insert("type".into(), json!("Synchronization"));
                m.insert(
                    "objects".into(),
                    Value::Array(objects.iter().map(|o| o.to_json()).collect()),
                );
            }
            ContextKind::Event {
                watch_event,
                object,
            } => {
                m.insert("type".into(), json!("Event"));
                m.insert("watchEvent".into(), json!(watch_event.as_str()));
                if let Value::Object(o) = object.to_json() {
                    m.extend(o);
                }
            }
        }
        Value::Object(m)
    }

    fn to_json_v0(&self) -> Value {
        let mut m = Map::new();
        m.insert("binding".into(), json!(self.binding));
        if let ContextKind::Event {
            watch_event,
            object,
        } = &self.kind
        {
            let ev = match watch_event {
                WatchEvent::Added => "add",
                WatchEvent::Modified => "update",
                WatchEvent::Deleted => "delete",
            };
            m.insert("resourceEvent".into(), json!(ev));
            let obj = object.object.clone().unwrap_or(Value::Null);
            let md = &obj["metadata"];
            m.insert(
                "resourceNamespace".into(),
                json!(md["namespace"].as_str().unwrap_or_default()),
            );
            m.insert(
                "resourceKind".into(),
                json!(obj["kind"].as_str().unwrap_or_default()),
            );
            m.insert(
                "resourceName".into(),
                json!(md["name"].as_str().unwrap_or_default()),
            );
        }
        Value::Object(m)
    }
}

/// Several queued contexts of one hook become one run; contexts of the same group are
/// compacted so that only the last of each group stays, in its place.
pub fn compact_groups(contexts: Vec<BindingContext>) -> Vec<BindingContext> {
    let mut out: Vec<BindingContext> = Vec::with_capacity(contexts.len());
    for c in contexts {
        if let Some(g) = &c.group
            && let Some(pos) = out.iter().position(|o| o.group.as_ref() == Some(g))
        {
            out.remove(pos);
        }
        out.push(c);
    }
    out
}

/// The file content for `BINDING_CONTEXT_PATH`: a JSON array, indented as shell-operator does.
pub fn render(contexts: &[BindingContext], version: ConfigVersion) -> String {
    let list: Vec<Value> = contexts.iter().map(|c| c.to_json(version)).collect();
    serde_json::to_string_pretty(&Value::Array(list)).unwrap_or_else(|_| "[]".to_owned())
}

/// Monitors for every kubernetes binding of a hook, keyed by binding name.
pub fn monitors_for(config: &HookConfig) -> BTreeMap<String, Monitor> {
    config
        .kubernetes
        .iter()
        .map(|b| (b.name.clone(), Monitor::new(b.clone())))
        .collect()
}
