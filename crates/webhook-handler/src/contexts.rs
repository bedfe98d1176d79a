//! The `context` of a webhook object: one kept watch (a reflector store) per binding, and the
//! snapshots a handler gets from them (selectors and `jqFilter` applied, as shell-operator's
//! monitors do).

use futures_util::StreamExt as _;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::runtime::{WatchStreamExt as _, reflector, watcher};
use module_hooks::config::{FieldRequirement, LabelSelector, NamespaceSelector};
use module_hooks::{KubernetesBinding, Monitor};
use serde_json::Value;
use std::collections::BTreeMap;

/// One watched binding.
struct Watched {
    binding: KubernetesBinding,
    store: reflector::Store<DynamicObject>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The kept watches of one webhook object.
#[derive(Default)]
pub(crate) struct Contexts(Vec<Watched>);

impl std::fmt::Debug for Contexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|w| &w.binding.name))
            .finish()
    }
}

fn labels_match(sel: &LabelSelector, obj: &Value) -> bool {
    let labels = obj.pointer("/metadata/labels");
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    sel.match_labels.iter().all(|(k, v)| get(k) == Some(v))
        && sel.match_expressions.iter().all(|e| {
            let v = get(&e.key);
            match e.operator.as_str() {
                "In" => v.is_some_and(|v| e.values.iter().any(|x| x == v)),
                "NotIn" => v.is_none_or(|v| !e.values.iter().any(|x| x == v)),
                "Exists" => v.is_some(),
                "DoesNotExist" => v.is_none(),
                _ => false,
            }
        })
}

/// A binding's `fieldSelector` as the watch's field selector, as shell-operator formats it
/// (`=`, `==`, `Equals`, `!=`, `NotEquals`; values escaped as apimachinery's `fields` does).
fn field_selector(reqs: &[FieldRequirement]) -> Result<Option<String>, String> {
    let escape = |v: &str| {
        v.replace('\\', "\\\\")
            .replace(',', "\\,")
            .replace('=', "\\=")
    };
    let terms = reqs
        .iter()
        .map(|r| {
            let op = match r.operator.as_str() {
                "=" | "==" | "Equals" => "=",
                "!=" | "NotEquals" => "!=",
                other => {
                    return Err(format!(
                        "{}{}{}: operator '{other}' is not recognized",
                        r.field, r.operator, r.value
                    ));
                }
            };
            Ok(format!("{}{op}{}", r.field, escape(&r.value)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((!terms.is_empty()).then(|| terms.join(",")))
}

/// Whether a watched object belongs to the binding (names, namespaces, labels).
fn selected(b: &KubernetesBinding, obj: &Value) -> bool {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let names_ok = b
        .name_selector
        .as_ref()
        .is_none_or(|s| s.match_names.iter().any(|n| n == name));
    let ns_ok = match &b.namespace {
        Some(NamespaceSelector {
            name_selector: Some(s),
            ..
        }) => s.match_names.iter().any(|n| n == ns),
        _ => true,
    };
    names_ok
        && ns_ok
        && b.label_selector
            .as_ref()
            .is_none_or(|s| labels_match(s, obj))
}

impl Contexts {
    /// Starts a watch per binding; the error names the binding whose kind is not served.
    pub(crate) async fn start(
        client: &kube::Client,
        bindings: &[KubernetesBinding],
    ) -> Result<Self, String> {
        let mut out = Vec::new();
        for b in bindings {
            let av = b.api_version.clone().unwrap_or_else(|| "v1".into());
            let (group, version) = av.rsplit_once('/').unwrap_or(("", &av));
            let gvk = GroupVersionKind::gvk(group, version, &b.kind);
            let (ar, _) = kube::discovery::pinned_kind(client, &gvk)
                .await
                .map_err(|e| format!("context {:?}: {av} {} is not served: {e}", b.name, b.kind))?;
            let fields = field_selector(&b.field_selector)
                .map_err(|e| format!("context {:?}: fieldSelector: {e}", b.name))?;
            let mut config = watcher::Config::default();
            if let Some(f) = &fields {
                config = config.fields(f);
            }
            let api = Api::<DynamicObject>::all_with(client.clone(), &ar);
            let writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
            let store = writer.as_reader();
            let stream = watcher(api, config)
                .default_backoff()
                .reflect(writer)
                .for_each(|_| async {});
            let task = tokio::spawn(stream);
            out.push(Watched {
                binding: b.clone(),
                store,
                task,
            });
        }
        for w in &out {
            let _ = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                w.store.wait_until_ready(),
            )
            .await;
        }
        Ok(Self(out))
    }

    /// The snapshots of every binding, as monitors keep them (`jqFilter` applied); the error is
    /// a filter's.
    pub(crate) fn monitors(&self) -> Result<BTreeMap<String, Monitor>, String> {
        let mut out = BTreeMap::new();
        for w in &self.0 {
            let objects: Vec<Value> = w
                .store
                .state()
                .iter()
                .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
                .filter(|o| selected(&w.binding, o))
                .collect();
            let mut m = Monitor::new(w.binding.clone());
            m.synchronize(objects)?;
            out.insert(w.binding.name.clone(), m);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(field: &str, operator: &str, value: &str) -> FieldRequirement {
        FieldRequirement {
            field: field.into(),
            operator: operator.into(),
            value: value.into(),
        }
    }

    /// Requirements, and the selector or error they give.
    type Case = (
        Vec<FieldRequirement>,
        Result<Option<&'static str>, &'static str>,
    );

    #[test]
    fn field_selectors_are_formatted_as_shell_operator_formats_them() {
        let cases: &[Case] = &[
            (vec![], Ok(None)),
            (
                vec![req("metadata.name", "=", "a")],
                Ok(Some("metadata.name=a")),
            ),
            (
                vec![
                    req("metadata.name", "==", "a"),
                    req("metadata.namespace", "NotEquals", "kube-system"),
                    req("status.phase", "Equals", "Running"),
                    req("spec.nodeName", "!=", ""),
                ],
                Ok(Some(
                    "metadata.name=a,metadata.namespace!=kube-system,status.phase=Running,spec.nodeName!=",
                )),
            ),
            (
                vec![req("metadata.name", "=", "a,b=c\\d")],
                Ok(Some("metadata.name=a\\,b\\=c\\\\d")),
            ),
            (
                vec![req("metadata.name", "In", "a")],
                Err("metadata.nameIna: operator 'In' is not recognized"),
            ),
        ];
        for (reqs, want) in cases {
            let got = field_selector(reqs);
            assert_eq!(
                got.as_ref().map(|o| o.as_deref()).map_err(String::as_str),
                *want,
                "{reqs:?}"
            );
        }
    }
}
