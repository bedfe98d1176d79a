//! Package hooks, run as the module runtime runs module hooks — the same runner
//! (`module-hooks`: shell, Python and module-sdk hooks, their `--config`, binding contexts and
//! outputs) and the same Kubernetes operations ([`kube_ops::execute`]) — scoped to the
//! Application: a hook sees `{global: {}, <camelCasePackage>: <values>}`, may patch only its
//! package's values, and its Kubernetes operations must name objects in the Application's
//! namespace, or the hook fails and nothing else it asked for is done.
//!
//! The helm bindings run: `beforeHelm` (its values are the chart's), `afterHelm`, and
//! `afterDeleteHelm` once the release is removed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use module_controller::runtime::apply::Applier;
use module_controller::runtime::hooks::kube_ops;
use module_controller::runtime::hooks::plan::{self, Phase};
use module_hooks::output::ObjectRef;
use module_hooks::{BindingContext, Hook, KubeOperation, ModuleRef, Runner};
use module_plan::values::ValuesPatch;
use module_plan::values::{Operation, compact};
use serde_json::{Value, json};

use crate::Error;

/// Runs packages' hooks.
pub struct PackageHooks {
    runner: Runner,
    applier: Applier,
    /// Per Application (`<namespace>/<name>`): the values patches its hooks made, compacted,
    /// replayed over its settings at each pass — as addon-operator keeps a module's.
    patches: Mutex<HashMap<String, Vec<Operation>>>,
    /// The hooks of each bundle directory, configured once (a bundle never changes on disk).
    discovered: Mutex<HashMap<PathBuf, Vec<Hook>>>,
}

impl std::fmt::Debug for PackageHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackageHooks").finish_non_exhaustive()
    }
}

/// Why a hook's Kubernetes operation may not be carried out for an Application in
/// `namespace`: it names no namespace (or a cluster-wide object) or another one.
pub fn op_out_of_scope(op: &KubeOperation, namespace: &str) -> Option<String> {
    let (what, ns) = match op {
        KubeOperation::Create { object, .. } => (
            format!(
                "{} {}",
                object.get("kind").and_then(Value::as_str).unwrap_or(""),
                object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ),
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(""),
        ),
        KubeOperation::Delete { target, .. } | KubeOperation::Patch { target, .. } => {
            let ObjectRef {
                kind,
                name,
                namespace,
                ..
            } = target;
            (format!("{kind} {name}"), namespace.as_str())
        }
    };
    match ns {
        "" => Some(format!(
            "{what} names no namespace: an Application's hooks act only in its namespace {namespace}"
        )),
        ns if ns != namespace => Some(format!(
            "{what} is in namespace {ns}: an Application's hooks act only in its namespace {namespace}"
        )),
        _ => None,
    }
}

/// The values a hook's values patch leaves, and its operations: `patch` (RFC 6902) applied
/// to `{global, <key>: values}`, touching only `<key>`.
pub fn patched_values(
    key: &str,
    values: &Value,
    patch: &[Value],
) -> Result<(Value, Vec<Operation>), String> {
    if patch.is_empty() {
        return Ok((values.clone(), Vec::new()));
    }
    let bytes = serde_json::to_vec(patch).unwrap_or_default();
    let patch = ValuesPatch::parse(&bytes)?;
    patch.check_paths(key)?;
    let doc = json!({"global": {}, key: values});
    let out = patch.apply_strict(&doc)?;
    Ok((
        out.get(key).cloned().unwrap_or_else(|| json!({})),
        patch.operations,
    ))
}

/// `settings` with the stored values patches `stored` replayed (a `remove` of what is no
/// longer there is skipped).
pub fn replayed(key: &str, settings: &Value, stored: &[Operation]) -> Result<Value, String> {
    if stored.is_empty() {
        return Ok(settings.clone());
    }
    let doc = json!({"global": {}, key: settings});
    let out = ValuesPatch::new(stored.to_vec()).apply_lenient(&doc)?;
    Ok(out.get(key).cloned().unwrap_or_else(|| json!({})))
}

impl PackageHooks {
    /// Hooks acting through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            runner: Runner::new(Default::default(), None),
            applier: Applier::new(client),
            patches: Mutex::default(),
            discovered: Mutex::default(),
        }
    }

    /// The values of Application `app` (`<namespace>/<name>`) of `package`: its `settings`
    /// with what its hooks patched so far.
    pub fn values(&self, app: &str, package: &str, settings: &Value) -> Result<Value, Error> {
        let stored = self
            .patches
            .lock()
            .ok()
            .and_then(|p| p.get(app).cloned())
            .unwrap_or_default();
        let key = module_plan::definition::camel_case(package);
        replayed(&key, settings, &stored)
            .map_err(|e| Error::Install(format!("the values package hooks patched: {e}")))
    }

    /// Forgets what the hooks of Application `app` patched (it is gone).
    pub fn forget(&self, app: &str) {
        if let Ok(mut p) = self.patches.lock() {
            p.remove(app);
        }
    }

    /// The hooks of the bundle of `package` in `dir` (its `hooks/`), configured; named
    /// `<package>/hooks/…` whatever version directory holds them, as a downloaded module's are.
    pub async fn discover(&self, package: &str, dir: &Path) -> Result<Vec<Hook>, Error> {
        if let Some(hooks) = self
            .discovered
            .lock()
            .ok()
            .and_then(|d| d.get(dir).cloned())
        {
            return Ok(hooks);
        }
        let mut found = ModuleRef::new(package, dir);
        found.dir_name = package.to_owned();
        let hooks = self
            .runner
            .discover_module(&found)
            .await
            .map_err(|e| Error::Install(format!("package hooks: {e}")))?;
        if let Ok(mut d) = self.discovered.lock() {
            d.insert(dir.to_owned(), hooks.clone());
        }
        Ok(hooks)
    }

    /// Runs the hooks bound to `phase`, in order, for Application `app`
    /// (`<namespace>/<name>`) with the package's `values`; returns the values they leave (their
    /// patches are kept for the next passes).
    pub async fn run_phase(
        &self,
        hooks: &[Hook],
        phase: Phase,
        app: &str,
        package: &str,
        values: Value,
    ) -> Result<Value, Error> {
        let namespace = app.split_once('/').map_or(app, |(ns, _)| ns);
        let key = module_plan::definition::camel_case(package);
        let mut values = values;
        for i in plan::hooks_for(hooks, phase) {
            let hook = &hooks[i];
            let failed = |e: String| Error::Install(plan::hook_failure(false, &hook.name, &e));
            let doc = json!({"global": {}, key.as_str(): values});
            let contexts = [BindingContext::helm(phase.binding())];
            let output = match self.runner.run(hook, &contexts, &doc, &doc).await {
                Ok(o) => o,
                Err(e) if module_hooks::retry::allow_failure(&hook.config, &contexts) => {
                    tracing::warn!(namespace, hook = %hook.name, error = %e, "package hook failed, allowFailure: go on");
                    continue;
                }
                Err(e) => return Err(failed(e.to_string())),
            };
            if let Some(why) = output
                .kube_operations
                .iter()
                .find_map(|op| op_out_of_scope(op, namespace))
            {
                return Err(failed(why));
            }
            for op in &output.kube_operations {
                kube_ops::execute(&self.applier, op)
                    .await
                    .map_err(|e| failed(e.to_string()))?;
            }
            let (next, ops) =
                patched_values(&key, &values, &output.values_patch).map_err(failed)?;
            if !ops.is_empty()
                && let Ok(mut p) = self.patches.lock()
            {
                let stored = p.entry(app.to_owned()).or_default();
                *stored = compact(stored, &ops);
            }
            values = next;
            tracing::info!(namespace, hook = %hook.name, binding = phase.binding(), "package hook ran");
        }
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_stay_in_the_namespace() {
        let create = |ns: Option<&str>| {
            let mut object =
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
            if let Some(ns) = ns {
                object["metadata"]["namespace"] = json!(ns);
            }
            KubeOperation::Create {
                mode: module_hooks::output::CreateMode::CreateOrUpdate,
                object,
                subresource: None,
            }
        };
        assert_eq!(op_out_of_scope(&create(Some("a")), "a"), None);
        assert_eq!(
            op_out_of_scope(&create(Some("b")), "a").unwrap(),
            "ConfigMap x is in namespace b: an Application's hooks act only in its namespace a"
        );
        assert_eq!(
            op_out_of_scope(&create(None), "a").unwrap(),
            "ConfigMap x names no namespace: an Application's hooks act only in its namespace a"
        );
        let delete = KubeOperation::Delete {
            target: ObjectRef {
                api_version: String::new(),
                kind: "Secret".into(),
                namespace: "kube-system".into(),
                name: "s".into(),
            },
            propagation: module_hooks::output::Propagation::Background,
            subresource: None,
        };
        assert!(
            op_out_of_scope(&delete, "a")
                .unwrap()
                .starts_with("Secret s is in namespace kube-system")
        );
    }

    #[test]
    fn values_patches_touch_only_the_package() {
        let values = json!({"greeting": "hi"});
        let set = json!([{"op": "add", "path": "/echo/greeting", "value": "yo"}]);
        let (next, ops) = patched_values("echo", &values, set.as_array().unwrap()).unwrap();
        assert_eq!(next, json!({"greeting": "yo"}));
        assert_eq!(ops.len(), 1);
        assert_eq!(
            patched_values("echo", &values, &[]),
            Ok((values.clone(), Vec::new()))
        );
        let global = json!([{"op": "add", "path": "/global/x", "value": 1}]);
        assert!(patched_values("echo", &values, global.as_array().unwrap()).is_err());
        // Replayed over new settings; a remove of what is gone is skipped.
        let remove = json!([{"op": "remove", "path": "/echo/old"}]);
        let (_, more) =
            patched_values("echo", &json!({"old": 1}), remove.as_array().unwrap()).unwrap();
        let stored = compact(&ops, &more);
        assert_eq!(
            replayed("echo", &json!({"greeting": "hi", "replicas": 2}), &stored),
            Ok(json!({"greeting": "yo", "replicas": 2}))
        );
        assert_eq!(replayed("echo", &values, &[]), Ok(values.clone()));
    }
}
