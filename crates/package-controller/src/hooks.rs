//! Package hooks, run as the module runtime runs module hooks — the same runner
//! (`module-hooks`: shell, Python and module-sdk hooks, their `--config`, binding contexts and
//! outputs), the same snapshots ([`module_hooks::Monitor`]) and the same Kubernetes operations
//! ([`kube_ops::execute`]) — scoped to the Application: a hook sees
//! `{global: {}, <camelCasePackage>: <values>}` and the Application in `APPLICATION_NAME` and
//! `APPLICATION_NAMESPACE` (module-sdk's application hooks read them), may patch only its
//! package's values, watches only the Application's namespace, and its Kubernetes operations
//! must name objects there, or the hook fails and nothing else it asked for is done.
//!
//! Every binding runs: `onStartup` when the controller first installs the Application (and
//! after it restarts, or when the version changes), `kubernetes` (Synchronization, then
//! events) and `schedule` from then on, `beforeHelm`/`afterHelm` around each
//! release, `afterDeleteHelm` once the release is removed. What the hooks patch is compacted
//! and kept in the Application's namespace ([`stored`]) and replayed over its settings; a
//! hook run between passes that changes it wakes the controller, which releases again.

mod instance;
pub mod stored;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use module_controller::runtime::apply::Applier;
use module_controller::runtime::hooks::kube_ops;
use module_controller::runtime::hooks::plan::{self, Phase};
use module_hooks::output::ObjectRef;
use module_hooks::{BindingContext, Hook, KubeOperation, ModuleRef, Runner};
use module_plan::values::ValuesPatch;
use module_plan::values::{Operation, compact};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::Error;
use instance::{Instance, Shared};

/// The environment variables a package hook finds its Application in (module-sdk's
/// `EnvApplicationName` / `EnvApplicationNamespace`).
pub const ENV_APPLICATION_NAME: &str = "APPLICATION_NAME";
/// See [`ENV_APPLICATION_NAME`].
pub const ENV_APPLICATION_NAMESPACE: &str = "APPLICATION_NAMESPACE";

/// An installed Application, as its hooks know it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The package it installs.
    pub package: String,
}

impl AppRef {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The package's values key (`camelCase` of its name).
    fn values_key(&self) -> String {
        module_plan::definition::camel_case(&self.package)
    }
}

/// Runs packages' hooks.
pub struct PackageHooks {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PackageHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackageHooks").finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    client: kube::Client,
    applier: Applier,
    /// Per Application (`<namespace>/<name>`): the values patches its hooks made, compacted
    /// (read from [`stored`] the first time).
    patches: Mutex<HashMap<String, Vec<Operation>>>,
    /// The hooks of each bundle directory, configured once (a bundle never changes on disk).
    discovered: Mutex<HashMap<PathBuf, Vec<Hook>>>,
    /// Per Application: its hooks' bindings, running.
    instances: Mutex<HashMap<String, Instance>>,
    /// Told when a hook run between passes changed an Application's values.
    wake: Arc<Notify>,
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

/// The runner of Application `app`'s hooks: its name and namespace in their environment.
pub fn runner_for(app: &AppRef) -> Runner {
    Runner::new(
        module_hooks::RunnerOptions {
            env: vec![
                (ENV_APPLICATION_NAME.to_owned(), app.name.clone()),
                (ENV_APPLICATION_NAMESPACE.to_owned(), app.namespace.clone()),
            ],
            ..Default::default()
        },
        None,
    )
}

impl Inner {
    /// The values of `app`: its `settings` with what its hooks patched so far.
    async fn values(&self, app: &AppRef, settings: &Value) -> Result<Value, Error> {
        let key = app.key();
        let cached = self.patches.lock().ok().and_then(|p| p.get(&key).cloned());
        let stored = match cached {
            Some(s) => s,
            None => {
                let s = stored::load(&self.client, &app.namespace, &app.name).await?;
                if let Ok(mut p) = self.patches.lock() {
                    p.insert(key, s.clone());
                }
                s
            }
        };
        replayed(&app.values_key(), settings, &stored)
            .map_err(|e| Error::Install(format!("the values package hooks patched: {e}")))
    }

    /// Adds a hook's patch to what `app`'s hooks patched and keeps it; `true` when that
    /// changed.
    async fn remember(&self, app: &AppRef, ops: &[Operation]) -> Result<bool, Error> {
        if ops.is_empty() {
            return Ok(false);
        }
        let changed = {
            let Ok(mut p) = self.patches.lock() else {
                return Ok(false);
            };
            let stored = p.entry(app.key()).or_default();
            let next = compact(stored, ops);
            if next == *stored {
                None
            } else {
                *stored = next.clone();
                Some(next)
            }
        };
        match changed {
            Some(next) => {
                stored::save(&self.client, &app.namespace, &app.name, &next).await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Runs hook `index` of `shared` with `contexts` and carries out its outputs; returns the
    /// values it leaves and whether what the hooks patched changed.
    async fn run_hook(
        &self,
        shared: &Shared,
        index: usize,
        contexts: Vec<BindingContext>,
        values: Value,
    ) -> Result<(Value, bool), Error> {
        let app = &shared.app;
        let hook = &shared.hooks[index];
        let failed = |e: String| Error::Install(plan::hook_failure(false, &hook.name, &e));
        let key = app.values_key();
        let doc = json!({"global": {}, key.as_str(): values});
        let config = json!({"global": {}, key.as_str(): shared.config()});
        let contexts = module_hooks::context::compact_groups(contexts);
        let binding = contexts
            .first()
            .map(|c| c.binding.clone())
            .unwrap_or_default();
        let output = match shared.runner.run(hook, &contexts, &doc, &config).await {
            Ok(o) => o,
            Err(e) if module_hooks::retry::allow_failure(&hook.config, &contexts) => {
                tracing::warn!(namespace = %app.namespace, application = %app.name, hook = %hook.name, error = %e, "package hook failed, allowFailure: go on");
                return Ok((values, false));
            }
            Err(e) => return Err(failed(e.to_string())),
        };
        if let Some(why) = output
            .kube_operations
            .iter()
            .find_map(|op| op_out_of_scope(op, &app.namespace))
        {
            return Err(failed(why));
        }
        for op in &output.kube_operations {
            kube_ops::execute(&self.applier, op)
                .await
                .map_err(|e| failed(e.to_string()))?;
        }
        let (next, ops) = patched_values(&key, &values, &output.values_patch).map_err(failed)?;
        let changed = self.remember(app, &ops).await?;
        tracing::info!(namespace = %app.namespace, application = %app.name, hook = %hook.name, binding, "package hook ran");
        Ok((next, changed))
    }

    /// Runs the hooks of `shared` bound to `phase`, in order, with `values`; returns the
    /// values they leave.
    async fn run_phase(
        &self,
        shared: &Shared,
        phase: Phase,
        values: Value,
    ) -> Result<Value, Error> {
        let _one = shared.lock.lock().await;
        let mut values = values;
        for i in plan::hooks_for(&shared.hooks, phase) {
            let context = match phase {
                Phase::OnStartup => BindingContext::on_startup(),
                other => BindingContext::helm(other.binding()),
            };
            let contexts = vec![shared.with_snapshots(i, context)];
            values = self.run_hook(shared, i, contexts, values).await?.0;
        }
        Ok(values)
    }

    /// The hooks of the bundle of `package` in `dir` (its `hooks/`), configured; named
    /// `<package>/hooks/…` whatever version directory holds them, as a downloaded module's are.
    async fn discover(
        &self,
        runner: &Runner,
        package: &str,
        dir: &Path,
    ) -> Result<Vec<Hook>, Error> {
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
        let hooks = runner
            .discover_module(&found)
            .await
            .map_err(|e| Error::Install(format!("package hooks: {e}")))?;
        if let Ok(mut d) = self.discovered.lock() {
            d.insert(dir.to_owned(), hooks.clone());
        }
        Ok(hooks)
    }
}

impl PackageHooks {
    /// Hooks acting through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            inner: Arc::new(Inner {
                applier: Applier::new(client.clone()),
                client,
                patches: Mutex::default(),
                discovered: Mutex::default(),
                instances: Mutex::default(),
                wake: Arc::new(Notify::new()),
            }),
        }
    }

    /// Notified when a hook run between passes (kubernetes, schedule) changed an
    /// Application's values: a pass should release it again.
    pub fn wake(&self) -> Arc<Notify> {
        self.inner.wake.clone()
    }

    /// The values of `app`: its `settings` with what its hooks patched so far.
    pub async fn values(&self, app: &AppRef, settings: &Value) -> Result<Value, Error> {
        self.inner.values(app, settings).await
    }

    /// Starts the hooks of `app`'s bundle in `dir` unless they run already: `onStartup`, the
    /// kubernetes bindings' Synchronization, then their events and the schedules between
    /// passes. A new bundle (another version) stops the old one's first. `settings` are the
    /// values the hooks start from, `config` their config values (the settings with defaults).
    pub async fn start(
        &self,
        app: &AppRef,
        dir: &Path,
        settings: &Value,
        config: &Value,
    ) -> Result<(), Error> {
        let key = app.key();
        if let Ok(instances) = self.inner.instances.lock()
            && let Some(running) = instances.get(&key)
            && running.dir == dir
        {
            running.shared.set_settings(settings, config);
            return Ok(());
        }
        self.stop(app);
        let runner = runner_for(app);
        let hooks = self.inner.discover(&runner, &app.package, dir).await?;
        let started =
            instance::start(&self.inner, app, runner, hooks, dir, settings, config).await?;
        if let Ok(mut instances) = self.inner.instances.lock() {
            instances.insert(key, started);
        }
        Ok(())
    }

    /// Why `app`'s hooks fail between passes: the error of the first hook (by name) whose last
    /// kubernetes or schedule run failed; `None` once each has succeeded again.
    pub fn hook_error(&self, app: &AppRef) -> Option<String> {
        let instances = self.inner.instances.lock().ok()?;
        instances.get(&app.key())?.shared.hook_error()
    }

    /// `app`'s release is applied: the Synchronizations of its `waitForSynchronization: false`
    /// bindings run now, between passes.
    pub fn released(&self, app: &AppRef) {
        if let Ok(mut instances) = self.inner.instances.lock()
            && let Some(running) = instances.get_mut(&app.key())
        {
            running.released();
        }
    }

    /// Stops `app`'s bindings (watches, schedules).
    pub fn stop(&self, app: &AppRef) {
        let gone = self
            .inner
            .instances
            .lock()
            .ok()
            .and_then(|mut i| i.remove(&app.key()));
        drop(gone);
    }

    /// Runs `app`'s hooks bound to the helm `phase` with `values`; returns the values they
    /// leave (their patches are kept).
    pub async fn run_phase(
        &self,
        app: &AppRef,
        phase: Phase,
        values: Value,
    ) -> Result<Value, Error> {
        let shared = self
            .inner
            .instances
            .lock()
            .ok()
            .and_then(|i| i.get(&app.key()).map(|r| r.shared.clone()));
        match shared {
            Some(shared) => self.inner.run_phase(&shared, phase, values).await,
            None => Ok(values),
        }
    }

    /// Runs the `afterDeleteHelm` hooks of `app`'s bundle in `dir` with `values`.
    pub async fn after_delete(
        &self,
        app: &AppRef,
        dir: &Path,
        values: Value,
    ) -> Result<Value, Error> {
        let runner = runner_for(app);
        let hooks = self.inner.discover(&runner, &app.package, dir).await?;
        let config = values.clone();
        let shared = Shared::new(app.clone(), runner, hooks, &values, &config);
        self.inner
            .run_phase(&shared, Phase::AfterDeleteHelm, values)
            .await
    }

    /// Forgets what `app`'s hooks patched (it is gone) and stops its bindings.
    pub async fn forget(&self, app: &AppRef) -> Result<(), Error> {
        self.stop(app);
        if let Ok(mut p) = self.inner.patches.lock() {
            p.remove(&app.key());
        }
        stored::delete(&self.inner.client, &app.namespace, &app.name).await
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
