//! An Application's hooks between passes: `onStartup` at their start, one watch per
//! `kubernetes` binding — in the Application's namespace only, whatever namespace the binding
//! names — feeding its [`Monitor`] (the first list is the Synchronization run, before the
//! release unless the binding sets `waitForSynchronization: false`; later changes are Event
//! runs), one task firing the `schedule` bindings, and one worker running what those
//! queue, one hook at a time with the Application's current values.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use kube::Api;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use module_controller::runtime::hooks::plan::{self, Phase};
use module_hooks::{BindingContext, Hook, KubernetesBinding, Monitor, Runner, WatchEvent};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::{AppRef, Inner};
use crate::Error;

/// How long a start waits for a binding's first list.
const FIRST_LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// A binding context waiting for its hook (by index).
type Queued = (usize, BindingContext);

/// What the hook runs of one Application share.
pub(crate) struct Shared {
    pub(crate) app: AppRef,
    pub(crate) runner: Runner,
    pub(crate) hooks: Vec<Hook>,
    /// Per hook (same index): its kubernetes bindings' caches, by binding name.
    monitors: Mutex<Vec<BTreeMap<String, Monitor>>>,
    /// The values the hooks start from (before their patches) as of the last pass.
    settings: Mutex<Value>,
    /// The settings with their defaults as of the last pass: the hooks' config values
    /// (`CONFIG_VALUES_PATH`), as Deckhouse hands package hooks the settings.
    config: Mutex<Value>,
    /// One hook run at a time.
    pub(crate) lock: tokio::sync::Mutex<()>,
    /// The hooks whose last run between passes failed, by hook name, with the error; a hook's
    /// entry goes when it next succeeds.
    errors: Mutex<BTreeMap<String, String>>,
}

impl Shared {
    pub(crate) fn new(
        app: AppRef,
        runner: Runner,
        hooks: Vec<Hook>,
        settings: &Value,
        config: &Value,
    ) -> Self {
        let monitors = hooks
            .iter()
            .map(|h| module_hooks::context::monitors_for(&h.config))
            .collect();
        Self {
            app,
            runner,
            hooks,
            monitors: Mutex::new(monitors),
            settings: Mutex::new(settings.clone()),
            config: Mutex::new(config.clone()),
            lock: tokio::sync::Mutex::new(()),
            errors: Mutex::default(),
        }
    }

    /// Records how hook `index`'s run between passes ended; `true` when that changes what
    /// the Application should show.
    fn record(&self, index: usize, error: Option<String>) -> bool {
        let Ok(mut errors) = self.errors.lock() else {
            return false;
        };
        let name = self.hooks[index].name.clone();
        match error {
            Some(e) => errors.insert(name, e.clone()).as_ref() != Some(&e),
            None => errors.remove(&name).is_some(),
        }
    }

    /// The error of the first hook (by name) whose last run between passes failed.
    pub(crate) fn hook_error(&self) -> Option<String> {
        self.errors
            .lock()
            .ok()
            .and_then(|e| e.values().next().cloned())
    }

    pub(crate) fn set_settings(&self, settings: &Value, config: &Value) {
        if let Ok(mut s) = self.settings.lock() {
            *s = settings.clone();
        }
        if let Ok(mut c) = self.config.lock() {
            *c = config.clone();
        }
    }

    /// The hooks' config values (the settings with their defaults).
    pub(crate) fn config(&self) -> Value {
        self.config.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn settings(&self) -> Value {
        self.settings.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// `context` with the snapshots hook `index` asks for.
    pub(crate) fn with_snapshots(&self, index: usize, context: BindingContext) -> BindingContext {
        match self.monitors.lock() {
            Ok(m) => context.with_snapshots(&m[index]),
            Err(_) => context,
        }
    }

    /// Runs `f` on the monitor of binding `name` of hook `index`.
    fn monitor<T>(
        &self,
        index: usize,
        name: &str,
        f: impl FnOnce(&mut Monitor) -> Result<Option<T>, String>,
    ) -> Result<Option<T>, String> {
        let Ok(mut m) = self.monitors.lock() else {
            return Err("hook state lock poisoned".into());
        };
        match m[index].get_mut(name) {
            Some(monitor) => f(monitor),
            None => Ok(None),
        }
    }
}

/// The running hooks of one Application's bundle.
pub(crate) struct Instance {
    pub(crate) dir: PathBuf,
    pub(crate) shared: Arc<Shared>,
    tasks: Vec<tokio::task::AbortHandle>,
    /// Synchronizations of `waitForSynchronization: false` bindings, queued once the release
    /// is applied ([`Instance::released`]).
    deferred: Vec<Queued>,
    queue: Option<mpsc::UnboundedSender<Queued>>,
}

impl Instance {
    /// The release is applied: the deferred Synchronizations go to the worker, after it.
    pub(crate) fn released(&mut self) {
        if let Some(queue) = &self.queue {
            for queued in self.deferred.drain(..) {
                let _ = queue.send(queued);
            }
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Why a binding may not watch `kind` for an Application in `namespace`.
pub(crate) fn cluster_wide_refusal(binding: &str, kind: &str, namespace: &str) -> String {
    format!(
        "kubernetes binding {binding} watches {kind}, a cluster-wide kind: an Application's hooks watch only its namespace {namespace}"
    )
}

/// The binding as an Application's hook watches it: in the Application's namespace, whatever
/// namespace the hook named (module-sdk's application bindings have no namespace selector).
pub(crate) fn scoped(binding: &KubernetesBinding) -> KubernetesBinding {
    let mut b = binding.clone();
    b.namespace = None;
    b
}

/// Starts `app`'s hooks of the bundle in `dir`: `onStartup`, then the kubernetes bindings
/// (their Synchronization run before this returns), the schedules and the worker.
pub(crate) async fn start(
    inner: &Arc<Inner>,
    app: &AppRef,
    runner: Runner,
    hooks: Vec<Hook>,
    dir: &Path,
    settings: &Value,
    config: &Value,
) -> Result<Instance, Error> {
    let shared = Arc::new(Shared::new(app.clone(), runner, hooks, settings, config));
    let mut instance = Instance {
        dir: dir.to_owned(),
        shared: shared.clone(),
        tasks: Vec::new(),
        deferred: Vec::new(),
        queue: None,
    };
    let values = inner.values(app, settings).await?;
    inner.run_phase(&shared, Phase::OnStartup, values).await?;
    let (tx, rx) = mpsc::unbounded_channel::<Queued>();
    let mut firsts = Vec::new();
    for (i, hook) in shared.hooks.iter().enumerate() {
        for binding in &hook.config.kubernetes {
            let first = watch(inner, &shared, i, binding, tx.clone(), &mut instance.tasks).await?;
            firsts.push((
                i,
                binding.name.clone(),
                binding.wait_for_synchronization,
                first,
            ));
        }
    }
    {
        let _one = shared.lock.lock().await;
        for (i, name, wait, first) in firsts {
            let hook = &shared.hooks[i].name;
            let failed = |m: String| Error::Install(plan::hook_failure(false, hook, &m));
            let first = tokio::time::timeout(FIRST_LIST_TIMEOUT, first)
                .await
                .map_err(|_| {
                    failed(format!(
                        "binding {name}: no list of the watched objects in time"
                    ))
                })?;
            let context = match first {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => return Err(failed(e)),
                Err(_) => {
                    return Err(failed(format!(
                        "binding {name}: the watch stopped before its first list"
                    )));
                }
            };
            // `waitForSynchronization: false`: the release does not wait for the
            // Synchronization; it is queued once the release is applied, as addon-operator
            // queues it behind the module's run.
            match context {
                Some(context) if wait => {
                    let values = inner.values(app, &shared.settings()).await?;
                    let contexts = vec![shared.with_snapshots(i, context)];
                    inner.run_hook(&shared, i, contexts, values).await?;
                }
                Some(context) => instance.deferred.push((i, context)),
                None => {}
            }
        }
    }
    instance.queue = Some(tx.clone());
    if let Some(t) = schedules(&shared, tx) {
        instance.tasks.push(t);
    }
    let worker = tokio::spawn(work(Arc::downgrade(inner), shared.clone(), rx));
    instance.tasks.push(worker.abort_handle());
    Ok(instance)
}

/// Starts the watch of `binding` (hook `index`) in the Application's namespace; the receiver
/// gets the Synchronization context of its first list.
async fn watch(
    inner: &Arc<Inner>,
    shared: &Arc<Shared>,
    index: usize,
    binding: &KubernetesBinding,
    tx: mpsc::UnboundedSender<Queued>,
    tasks: &mut Vec<tokio::task::AbortHandle>,
) -> Result<oneshot::Receiver<Result<Option<BindingContext>, String>>, Error> {
    let namespace = shared.app.namespace.clone();
    let hook = shared.hooks[index].name.clone();
    let failed = |m: String| Error::Install(plan::hook_failure(false, &hook, &m));
    let api_version = binding.api_version.clone().unwrap_or_else(|| "v1".into());
    let (resource, namespaced) = inner
        .applier
        .resolve(&api_version, &binding.kind)
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !namespaced {
        return Err(failed(cluster_wide_refusal(
            &binding.name,
            &binding.kind,
            &namespace,
        )));
    }
    let binding = scoped(binding);
    let request = plan::watch_request(&binding);
    let api: Api<DynamicObject> = Api::namespaced_with(inner.client.clone(), &namespace, &resource);
    let mut config = watcher::Config::default();
    if let Some(l) = &request.label_selector {
        config = config.labels(l);
    }
    if let Some(f) = &request.field_selector {
        config = config.fields(f);
    }
    let (first_tx, first_rx) = oneshot::channel();
    let shared = shared.clone();
    let task = tokio::spawn(async move {
        let mut first = Some(first_tx);
        let mut listed: Vec<Value> = Vec::new();
        let mut stream = std::pin::pin!(watcher(api, config).default_backoff());
        let name = binding.name.clone();
        while let Some(event) = stream.next().await {
            let value = |o: DynamicObject| serde_json::to_value(o).unwrap_or_default();
            let keeps = |o: &Value| plan::keeps(&binding, None, o);
            let context = match event {
                Err(e) => {
                    tracing::warn!(application = %shared.app.key(), binding = %name, error = %e, "package hook watch failed, retrying");
                    continue;
                }
                Ok(watcher::Event::Init) => {
                    listed.clear();
                    continue;
                }
                Ok(watcher::Event::InitApply(o)) => {
                    let o = value(o);
                    if keeps(&o) {
                        listed.push(o);
                    }
                    continue;
                }
                Ok(watcher::Event::InitDone) => {
                    let objects = std::mem::take(&mut listed);
                    let result = shared.monitor(index, &name, |m| m.synchronize(objects));
                    if let Some(tx) = first.take() {
                        let _ = tx.send(result);
                        continue;
                    }
                    result
                }
                Ok(watcher::Event::Apply(o)) => {
                    let o = value(o);
                    if !keeps(&o) {
                        continue;
                    }
                    let id = module_hooks::context::resource_id(&o);
                    shared.monitor(index, &name, |m| {
                        let seen = m.snapshot().iter().any(|s| s.resource_id == id);
                        m.event(plan::applied_event(seen), o)
                    })
                }
                Ok(watcher::Event::Delete(o)) => {
                    let o = value(o);
                    if !keeps(&o) {
                        continue;
                    }
                    shared.monitor(index, &name, |m| m.event(WatchEvent::Deleted, o))
                }
            };
            match context {
                Ok(Some(c)) => {
                    let _ = tx.send((index, c));
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(application = %shared.app.key(), binding = %name, error = %e, "event dropped")
                }
            }
        }
    });
    tasks.push(task.abort_handle());
    Ok(first_rx)
}

/// The task firing the schedule bindings of `shared`'s hooks (`None`: they have none).
fn schedules(
    shared: &Arc<Shared>,
    tx: mpsc::UnboundedSender<Queued>,
) -> Option<tokio::task::AbortHandle> {
    let any = shared.hooks.iter().any(|h| !h.config.schedules.is_empty());
    if !any {
        return None;
    }
    let shared = shared.clone();
    let task = tokio::spawn(async move {
        let refs: Vec<(usize, usize, &module_hooks::ScheduleBinding)> = shared
            .hooks
            .iter()
            .enumerate()
            .flat_map(|(i, h)| {
                h.config
                    .schedules
                    .iter()
                    .enumerate()
                    .map(move |(j, s)| (i, j, s))
            })
            .collect();
        // Crontab times are local, as robfig/cron reads them in shell-operator.
        let mut after = jiff::Zoned::now();
        loop {
            let Some((at, fired)) = plan::next_fire(&refs, &after) else {
                return;
            };
            let wait = at
                .timestamp()
                .duration_since(jiff::Timestamp::now())
                .try_into()
                .unwrap_or(Duration::ZERO);
            tokio::time::sleep(wait).await;
            for (i, j) in fired {
                let binding = &shared.hooks[i].config.schedules[j];
                if tx.send((i, BindingContext::schedule(binding))).is_err() {
                    return;
                }
            }
            after = at;
        }
    });
    Some(task.abort_handle())
}

/// Runs what the watches and schedules queue: the contexts waiting for one hook together,
/// in the order they came; a run that changed the values, or that failed or succeeded again
/// (the Application shows it), wakes the controller.
async fn work(inner: Weak<Inner>, shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Queued>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let mut changed = false;
        let _one = shared.lock.lock().await;
        for (i, contexts) in by_hook(batch) {
            let contexts = contexts
                .into_iter()
                .map(|c| shared.with_snapshots(i, c))
                .collect();
            let ran = async {
                let values = inner.values(&shared.app, &shared.settings()).await?;
                inner.run_hook(&shared, i, contexts, values).await
            }
            .await;
            match ran {
                Ok((_, c)) => changed |= c | shared.record(i, None),
                Err(e) => {
                    tracing::warn!(application = %shared.app.key(), error = %e, "package hook failed");
                    changed |= shared.record(i, Some(e.to_string()));
                }
            }
        }
        if changed {
            inner.wake.notify_one();
        }
    }
}

/// The queued contexts grouped by hook, hooks in the order of their first context.
pub(crate) fn by_hook<C>(queued: Vec<(usize, C)>) -> Vec<(usize, Vec<C>)> {
    let mut out: Vec<(usize, Vec<C>)> = Vec::new();
    for (i, c) in queued {
        match out.iter_mut().find(|(h, _)| *h == i) {
            Some((_, list)) => list.push(c),
            None => out.push((i, vec![c])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_are_grouped_per_hook_in_arrival_order() {
        assert_eq!(
            by_hook(vec![(2, "a"), (0, "b"), (2, "c"), (1, "d")]),
            vec![(2, vec!["a", "c"]), (0, vec!["b"]), (1, vec!["d"])]
        );
        assert!(by_hook::<u8>(Vec::new()).is_empty());
    }

    #[test]
    fn bindings_are_scoped_to_the_application() {
        let config = module_hooks::config::HookConfig::parse(
            br#"{"configVersion":"v1","kubernetes":[{"name":"cms","kind":"ConfigMap","namespace":{"nameSelector":{"matchNames":["kube-system"]}}}]}"#,
            module_hooks::config::HookScope::Module,
        )
        .unwrap();
        assert_eq!(
            plan::watch_request(&config.kubernetes[0])
                .namespace
                .as_deref(),
            Some("kube-system")
        );
        let b = scoped(&config.kubernetes[0]);
        assert!(b.namespace.is_none());
        assert_eq!(plan::watch_request(&b).namespace, None);
        assert_eq!(
            cluster_wide_refusal("nodes", "Node", "a"),
            "kubernetes binding nodes watches Node, a cluster-wide kind: an Application's hooks watch only its namespace a"
        );
    }
}
