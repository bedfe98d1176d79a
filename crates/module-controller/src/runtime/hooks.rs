//! Module hooks in the runtime, as addon-operator runs them: discovered and configured at a
//! module's first run, `onStartup` once, `kubernetes` bindings watched (Synchronization, then
//! Event contexts, snapshots kept by [`module_hooks::Monitor`]), `schedule` bindings fired by
//! their crontab, `beforeHelm` / `afterHelm` around the release and `afterDeleteHelm` when the
//! module is disabled. A hook's outputs are applied: its values patch to the module's values
//! (a changed checksum means a new module run), its Kubernetes operations ([`kube_ops`]), its
//! metrics to the store served on `/metrics`. Decisions are in [`plan`].

mod global;
pub mod kube_ops;
pub mod plan;
pub mod settings;
mod watch;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use module_hooks::{BindingContext, Hook, MetricStore, Monitor, Runner};
use module_plan::values::{ModuleValues, PatchKind, ValuesError, ValuesPatch};
use serde_json::Value;

use self::plan::Phase;
use super::Runtime;
use super::queue::{MAIN, TaskKind};
use crate::Error;

/// addon-operator's `queue` and `activation` labels of the hook runs a task makes: the queue the
/// task runs in and whether it belongs to the startup converge ([`super::queue::Task::startup`]).
#[derive(Clone, Debug)]
pub(crate) struct RunLabels {
    /// The task's queue.
    pub(crate) queue: String,
    /// Queued by the startup converge.
    pub(crate) startup: bool,
}

tokio::task_local! {
    /// The labels of the task being run, set by the worker around each task as addon-operator
    /// carries them in a task's log labels. A hook run outside a task (a converge run at once)
    /// is counted as `main`'s, not at startup.
    pub(crate) static RUN_LABELS: RunLabels;
}

/// The `queue` and `activation` labels of a hook run now.
fn run_labels() -> (String, &'static str) {
    RUN_LABELS
        .try_with(|l| (l.queue.clone(), plan::activation(l.startup)))
        .unwrap_or_else(|_| (MAIN.to_owned(), plan::activation(false)))
}

/// The ConfigMap in `d8-system` whose presence turns chroot mode on.
pub const CHROOT_CONFIG_MAP: &str = "chroot-mode";
/// Where modules' chroots are assembled.
pub const CHROOT_ROOT: &str = "/chroot";
/// The key of the global hooks' state, beside the modules' (no module is named `global`).
pub const GLOBAL: &str = "global";

/// A failing hook's error, with the sequence number of its failure (the latest shows).
type HookErrors = BTreeMap<String, (u64, String)>;

/// The hooks of one running module.
#[derive(Debug)]
pub(crate) struct ModuleHooks {
    hooks: Vec<Hook>,
    /// Per hook (same index): its kubernetes bindings' caches, by binding name.
    monitors: Vec<BTreeMap<String, Monitor>>,
    /// Contexts waiting for their ModuleHookRun task, by (hook name, binding).
    pending: BTreeMap<(String, String), Vec<BindingContext>>,
    /// Watches and schedules.
    tasks: Vec<tokio::task::AbortHandle>,
    /// The hooks' `settings` throttles, by hook name.
    limits: BTreeMap<String, plan::RateLimit>,
}

impl ModuleHooks {
    fn new(hooks: Vec<Hook>, monitors: Vec<BTreeMap<String, Monitor>>) -> Self {
        let limits = hooks
            .iter()
            .filter_map(|h| {
                plan::RateLimit::new(h.config.settings.as_ref()).map(|l| (h.name.clone(), l))
            })
            .collect();
        Self {
            hooks,
            monitors,
            pending: BTreeMap::new(),
            tasks: Vec::new(),
            limits,
        }
    }
}

impl Drop for ModuleHooks {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The runtime's hook state: the runner, each module's hooks, and the hooks' metrics.
#[derive(Debug)]
pub struct HookHost {
    runner: Mutex<Runner>,
    pub(crate) modules: Arc<Mutex<HashMap<String, ModuleHooks>>>,
    metrics: Arc<Mutex<MetricStore>>,
    /// Per module: its failing hooks (addon-operator's hook errors; a hook that passes again
    /// is removed).
    errors: Mutex<HashMap<String, HookErrors>>,
    failures: AtomicU64,
}

impl Default for HookHost {
    fn default() -> Self {
        Self {
            runner: Mutex::new(Runner::new(Default::default(), None)),
            modules: Arc::default(),
            metrics: Arc::new(Mutex::new(MetricStore::new())),
            errors: Mutex::default(),
            failures: AtomicU64::new(0),
        }
    }
}

impl HookHost {
    /// The metrics the hooks wrote (Prometheus text).
    pub fn metrics(&self) -> Arc<Mutex<MetricStore>> {
        self.metrics.clone()
    }

    /// Replaces the runner (chroot mode, options).
    pub fn set_runner(&self, runner: Runner) {
        if let Ok(mut r) = self.runner.lock() {
            *r = runner;
        }
    }

    fn record_error(&self, module: &str, hook: &str, error: Option<&str>) {
        let Ok(mut all) = self.errors.lock() else {
            return;
        };
        match error {
            Some(e) => {
                let at = self.failures.fetch_add(1, Ordering::Relaxed);
                all.entry(module.to_owned())
                    .or_default()
                    .insert(hook.to_owned(), (at, e.to_owned()));
            }
            None => {
                if let Some(m) = all.get_mut(module) {
                    m.remove(hook);
                }
            }
        }
    }

    /// The IsReady message and `status.hooksState` of a module whose hooks fail.
    pub(crate) fn error_status(&self, module: &str) -> Option<(String, String)> {
        let all = self.errors.lock().ok()?;
        plan::hook_errors_status(all.get(module)?)
    }

    fn forget_errors(&self, module: &str) {
        if let Ok(mut all) = self.errors.lock() {
            all.remove(module);
        }
    }

    fn runner(&self) -> Runner {
        self.runner
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|_| Runner::new(Default::default(), None))
    }
}

fn patch_of(module: &str, kind: PatchKind, ops: &[Value]) -> Result<ValuesPatch, ValuesError> {
    let bytes = serde_json::to_vec(ops).unwrap_or_default();
    ValuesPatch::parse(&bytes).map_err(|reason| ValuesError::PatchParse {
        module: module.to_owned(),
        kind,
        reason,
    })
}

impl Runtime {
    /// The hooks' metrics (served on `/metrics` beside the registry's).
    pub fn hook_metrics(&self) -> Arc<Mutex<MetricStore>> {
        self.hooks.metrics()
    }

    /// The hook host (runner, state).
    pub fn hook_host(&self) -> &HookHost {
        &self.hooks
    }

    /// The hook runner: chrooted (under the runtime's chroot root, [`CHROOT_ROOT`] unless
    /// [`Runtime::with_chroot_root`] says otherwise) when ConfigMap `d8-system/chroot-mode`
    /// exists, as the Deckhouse controller decides at start.
    pub(crate) async fn hook_runner(&self) -> Runner {
        let chroot = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
            self.client.clone(),
            super::RELEASE_NAMESPACE,
        )
        .get_opt(CHROOT_CONFIG_MAP)
        .await
        .ok()
        .flatten()
        .is_some();
        let root = self.chroot_root.clone();
        let manager = chroot.then(|| {
            tracing::info!(root = %root.display(), "chroot mode: shell hooks run chrooted");
            Arc::new(module_hooks::ChrootManager::new(
                module_hooks::ChrootOptions::deckhouse(root),
            ))
        });
        Runner::new(Default::default(), manager)
    }

    /// Looks for ConfigMap `d8-system/chroot-mode` and runs the hooks chrooted or not from
    /// now on ([`Runtime::run`] does it when it starts).
    pub async fn detect_chroot_mode(&self) {
        self.hooks.set_runner(self.hook_runner().await);
    }

    fn hook_started(&self, module: &str) -> bool {
        self.hooks
            .modules
            .lock()
            .is_ok_and(|m| m.contains_key(module))
    }

    /// At a module's first run: discovers its hooks, runs `onStartup`, starts the kubernetes
    /// bindings (their Synchronization run here when `waitForSynchronization`, queued
    /// otherwise) and the schedules. Later runs do nothing.
    pub(crate) async fn start_hooks(
        &self,
        module: &str,
        dir: &Path,
        values: &mut ModuleValues,
    ) -> Result<(), Error> {
        if self.hook_started(module) {
            return Ok(());
        }
        let runner = self.hooks.runner();
        let hooks = runner
            .discover_module(&self.dirs.hooks_ref(module, dir))
            .await
            .map_err(|e| Error::Hook {
                module: module.to_owned(),
                hook: String::new(),
                message: e.to_string(),
            })?;
        if !hooks.is_empty() {
            tracing::info!(module, hooks = hooks.len(), "module hooks discovered");
        }
        let monitors = hooks
            .iter()
            .map(|h| module_hooks::context::monitors_for(&h.config))
            .collect();
        let state = ModuleHooks::new(hooks, monitors);
        self.hooks
            .modules
            .lock()
            .map_err(|_| poisoned(module))?
            .insert(module.to_owned(), state);
        let result = self.start_bindings(module, values).await;
        if result.is_err() {
            // Started again from scratch at the next run.
            if let Ok(mut m) = self.hooks.modules.lock() {
                m.remove(module);
            }
        }
        result
    }

    async fn start_bindings(&self, module: &str, values: &mut ModuleValues) -> Result<(), Error> {
        self.run_phase(module, Phase::OnStartup, values).await?;
        let syncs = self.start_watches(module).await?;
        for (hook, binding, context, wait) in syncs {
            if wait {
                let contexts = self.with_snapshots(module, &hook, vec![context])?;
                self.run_hook(module, &hook, &binding, contexts, values)
                    .await?;
            } else {
                self.queue_hook_context(module, &hook, &binding, context);
            }
        }
        self.start_schedules(module);
        Ok(())
    }

    /// Runs the hooks bound to `phase`, each with its one context, in order; the values
    /// change as they go.
    pub(crate) async fn run_phase(
        &self,
        module: &str,
        phase: Phase,
        values: &mut ModuleValues,
    ) -> Result<(), Error> {
        let names: Vec<String> = {
            let modules = self.hooks.modules.lock().map_err(|_| poisoned(module))?;
            let Some(state) = modules.get(module) else {
                return Ok(());
            };
            plan::hooks_for(&state.hooks, phase)
                .into_iter()
                .map(|i| state.hooks[i].name.clone())
                .collect()
        };
        for name in names {
            let context = match phase {
                Phase::OnStartup => BindingContext::on_startup(),
                other => BindingContext::helm(other.binding()),
            };
            let contexts = self.with_snapshots(module, &name, vec![context])?;
            self.run_hook(module, &name, phase.binding(), contexts, values)
                .await?;
        }
        Ok(())
    }

    fn with_snapshots(
        &self,
        module: &str,
        hook: &str,
        contexts: Vec<BindingContext>,
    ) -> Result<Vec<BindingContext>, Error> {
        let modules = self.hooks.modules.lock().map_err(|_| poisoned(module))?;
        let Some((i, _)) = modules
            .get(module)
            .and_then(|s| s.hooks.iter().enumerate().find(|(_, h)| h.name == hook))
        else {
            return Ok(contexts);
        };
        let monitors = &modules[module].monitors[i];
        Ok(contexts
            .into_iter()
            .map(|c| c.with_snapshots(monitors))
            .collect())
    }

    /// Runs one hook with `contexts` and applies its outputs; `values` become the patched
    /// values (the global values for a global hook). A failure is kept as the hook's error
    /// (addon-operator's words) until the hook passes again.
    pub(crate) async fn run_hook(
        &self,
        module: &str,
        hook_name: &str,
        binding: &str,
        contexts: Vec<BindingContext>,
        values: &mut ModuleValues,
    ) -> Result<(), Error> {
        let hook = {
            let modules = self.hooks.modules.lock().map_err(|_| poisoned(module))?;
            modules
                .get(module)
                .and_then(|s| s.hooks.iter().find(|h| h.name == hook_name).cloned())
        };
        let Some(hook) = hook else {
            return Ok(());
        };
        // `settings`: executionMinInterval / executionBurst.
        let wait = {
            let now = self.queue_view.elapsed();
            let mut modules = self.hooks.modules.lock().map_err(|_| poisoned(module))?;
            modules
                .get_mut(module)
                .and_then(|s| s.limits.get_mut(hook_name))
                .map(|l| l.take(now))
                .unwrap_or_default()
        };
        if !wait.is_zero() {
            tracing::debug!(
                module,
                hook = hook_name,
                ?wait,
                "hook settings: waiting for the rate limit"
            );
            tokio::time::sleep(wait).await;
        }
        match self
            .hook_outputs(module, &hook, binding, contexts, values)
            .await?
        {
            Ok(Some(next)) => {
                self.hooks.record_error(module, &hook.name, None);
                tracing::info!(module, hook = %hook.name, binding, "hook ran");
                *values = next;
                if module == GLOBAL {
                    self.values.set_global(values.clone());
                } else {
                    self.values.set_module(values.clone());
                }
                Ok(())
            }
            Ok(None) => {
                self.count_hook_failure(
                    module,
                    &hook,
                    binding,
                    super::metrics::HookFailure::Allowed,
                );
                Ok(())
            }
            Err(message) => {
                self.count_hook_failure(module, &hook, binding, super::metrics::HookFailure::Error);
                self.hooks.record_error(module, &hook.name, Some(&message));
                Err(Error::Hook {
                    module: module.to_owned(),
                    hook: hook.name.clone(),
                    message,
                })
            }
        }
    }

    /// Runs the hook and carries out its outputs: the patched values (`None`: it failed with
    /// `allowFailure`), or addon-operator's error text.
    async fn hook_outputs(
        &self,
        module: &str,
        hook: &Hook,
        binding: &str,
        contexts: Vec<BindingContext>,
        values: &ModuleValues,
    ) -> Result<Result<Option<ModuleValues>, String>, Error> {
        let global_scope = module == GLOBAL;
        let (hook_values, config_values) = if global_scope {
            (values.prefixed_values(), values.prefixed_config_values())
        } else {
            let global = self.global_module_values()?;
            (
                module_plan::values::hook_values(&global, values),
                module_plan::values::hook_config_values(&global, values),
            )
        };
        let contexts = module_hooks::context::compact_groups(contexts);
        let output = match self
            .hooks
            .runner()
            .run(hook, &contexts, &hook_values, &config_values)
            .await
        {
            Ok(o) => o,
            Err(e) => {
                if module_hooks::retry::allow_failure(&hook.config, &contexts) {
                    tracing::warn!(module, hook = %hook.name, binding, error = %e, "hook failed, allowFailure: go on");
                    return Ok(Ok(None));
                }
                return Ok(Err(plan::hook_failure(
                    global_scope,
                    &hook.name,
                    &e.to_string(),
                )));
            }
        };
        let name = values.module().to_owned();
        // addon-operator's order: Kubernetes operations, metrics, config values, values.
        for op in &output.kube_operations {
            if let Err(e) = kube_ops::execute(&self.applier, op).await {
                return Ok(Err(e.to_string()));
            }
        }
        if !output.metrics.is_empty() {
            let owner = if global_scope { "" } else { module };
            let ops = kube_ops::label_metrics(output.metrics, owner, &hook.name);
            if let Ok(mut store) = self.hooks.metrics.lock() {
                store.apply(&ops);
            }
        }
        let mut next = values.clone();
        let config_patch = patch_of(&name, PatchKind::ConfigValues, &output.config_values_patch)
            .and_then(|p| next.apply_config_values_patch(&p));
        match config_patch {
            Ok(patched) => {
                if patched.config_values() != next.config_values() {
                    // Saved to the ModuleConfig, as addon-operator's config manager does.
                    if let Err(e) = self.save_config_values(&patched).await {
                        let scope = if global_scope { "global" } else { "module" };
                        return Ok(Err(format!(
                            "{scope} hook '{}': set kube {scope} config failed: {e}",
                            hook.name
                        )));
                    }
                }
                next = patched;
            }
            Err(e) => return Ok(Err(e.for_hook(&hook.name))),
        }
        match patch_of(&name, PatchKind::Values, &output.values_patch)
            .and_then(|p| next.apply_values_patch(&p))
        {
            Ok(patched) => next = patched,
            Err(e) => return Ok(Err(e.for_hook(&hook.name))),
        }
        Ok(Ok(Some(next)))
    }

    /// Counts a failed hook run in addon-operator's hook error counters, when it counts there
    /// ([`plan::counts_hook_errors`]).
    fn count_hook_failure(
        &self,
        module: &str,
        hook: &Hook,
        binding: &str,
        failure: super::metrics::HookFailure,
    ) {
        let global = module == GLOBAL;
        let binding = plan::binding_type(&hook.config, binding);
        if !plan::counts_hook_errors(global, binding) {
            return;
        }
        let (queue, activation) = run_labels();
        self.queue_metrics.hook_failed(
            (!global).then_some(module),
            super::metrics::HookRun {
                hook: &hook.name,
                binding,
                queue: &queue,
                activation,
            },
            failure,
        );
    }

    /// A queued hook run (kubernetes events, schedules): runs the waiting contexts; a change of
    /// the module's values queues a module run.
    pub(crate) async fn run_hook_task(
        &self,
        module: &str,
        hook: &str,
        binding: &str,
    ) -> Result<(), Error> {
        let contexts = {
            let mut modules = self.hooks.modules.lock().map_err(|_| poisoned(module))?;
            let Some(state) = modules.get_mut(module) else {
                return Ok(());
            };
            state
                .pending
                .remove(&(hook.to_owned(), binding.to_owned()))
                .unwrap_or_default()
        };
        if contexts.is_empty() {
            return Ok(());
        }
        let values = if module == GLOBAL {
            Some(self.global_module_values()?)
        } else {
            self.values.module(module)
        };
        let Some(mut values) = values else {
            return Ok(());
        };
        let before = values.checksum();
        let with = self.with_snapshots(module, hook, contexts.clone())?;
        if let Err(e) = self
            .run_hook(module, hook, binding, with, &mut values)
            .await
        {
            // The contexts wait for the retry.
            if let Ok(mut modules) = self.hooks.modules.lock()
                && let Some(state) = modules.get_mut(module)
            {
                let slot = state
                    .pending
                    .entry((hook.to_owned(), binding.to_owned()))
                    .or_default();
                let later = std::mem::take(slot);
                *slot = contexts;
                slot.extend(later);
            }
            self.write_hook_error(module, &e).await;
            return Err(e);
        }
        if module == GLOBAL {
            if plan::reconverge_after_global_hook(binding, &before, &values.checksum()) {
                tracing::info!(
                    hook,
                    binding,
                    "global values changed: converging every module"
                );
                self.queue_view.push(MAIN, TaskKind::ConvergeModules);
            }
        } else if plan::rerun_module(&before, &values.checksum()) {
            self.queue_view.push(
                MAIN,
                TaskKind::ModuleRun {
                    module: module.to_owned(),
                },
            );
        }
        Ok(())
    }

    async fn write_hook_error(&self, module: &str, e: &Error) {
        if module == GLOBAL {
            return;
        }
        let message = self
            .hooks
            .error_status(module)
            .map_or_else(|| e.to_string(), |(m, _)| m);
        let (phase, conditions) = super::status::ended(&super::status::Ending::HookError(message));
        if let Err(e) = self.write_status(module, phase, conditions).await {
            tracing::warn!(module, error = %e, "cannot write the Module status");
        }
    }

    pub(crate) fn queue_hook_context(
        &self,
        module: &str,
        hook: &str,
        binding: &str,
        context: BindingContext,
    ) {
        queue_context(
            &self.hooks.modules,
            &self.queue_view,
            module,
            hook,
            binding,
            context,
        );
    }

    /// A disabled module: `afterDeleteHelm` with its last values, then its watches and
    /// schedules stop and its state is forgotten.
    pub(crate) async fn stop_hooks(&self, module: &str) -> Result<(), Error> {
        if let Some(mut values) = self.values.module(module) {
            if !self.hook_started(module)
                && let Some((dir, _)) = self.dirs.find(module)?
            {
                let runner = self.hooks.runner();
                if let Ok(hooks) = runner
                    .discover_module(&self.dirs.hooks_ref(module, &dir))
                    .await
                {
                    let monitors = hooks
                        .iter()
                        .map(|h| module_hooks::context::monitors_for(&h.config))
                        .collect();
                    if let Ok(mut m) = self.hooks.modules.lock() {
                        m.insert(module.to_owned(), ModuleHooks::new(hooks, monitors));
                    }
                }
            }
            self.run_phase(module, Phase::AfterDeleteHelm, &mut values)
                .await?;
        }
        if let Ok(mut m) = self.hooks.modules.lock() {
            m.remove(module);
        }
        self.hooks.forget_errors(module);
        self.values.forget(module);
        // A deleted module's settings no longer count as a configuration error.
        self.queue_metrics.config_checked(module, true);
        Ok(())
    }

    fn start_schedules(&self, module: &str) {
        let schedules: Vec<(String, module_hooks::ScheduleBinding)> = {
            let Ok(modules) = self.hooks.modules.lock() else {
                return;
            };
            let Some(state) = modules.get(module) else {
                return;
            };
            state
                .hooks
                .iter()
                .flat_map(|h| {
                    h.config
                        .schedules
                        .iter()
                        .map(|s| (h.name.clone(), s.clone()))
                })
                .collect()
        };
        if schedules.is_empty() {
            return;
        }
        let modules = self.hooks.modules.clone();
        let queues = self.queue_view.clone();
        let name = module.to_owned();
        let clock = self.clock.clone();
        let task = tokio::spawn(async move {
            let refs: Vec<(usize, usize, &module_hooks::ScheduleBinding)> = schedules
                .iter()
                .enumerate()
                .map(|(i, (_, s))| (i, 0, s))
                .collect();
            // Crontab times are local, as robfig/cron reads them in shell-operator.
            let mut after = clock.now().to_zoned(jiff::tz::TimeZone::system());
            loop {
                let Some((at, fired)) = plan::next_fire(&refs, &after) else {
                    return;
                };
                let wait = at
                    .timestamp()
                    .duration_since(clock.now())
                    .try_into()
                    .unwrap_or(std::time::Duration::ZERO);
                tokio::time::sleep(wait).await;
                for (i, _) in fired {
                    let (hook, binding) = &schedules[i];
                    queue_context(
                        &modules,
                        &queues,
                        &name,
                        hook,
                        &binding.name,
                        BindingContext::schedule(binding),
                    );
                }
                after = at;
            }
        });
        if let Ok(mut m) = self.hooks.modules.lock()
            && let Some(state) = m.get_mut(module)
        {
            state.tasks.push(task.abort_handle());
        }
    }

    /// The `global` values of the last converge (built empty before the first one).
    pub(crate) fn global_module_values(&self) -> Result<ModuleValues, Error> {
        if let Some(g) = self.values.global() {
            return Ok(g);
        }
        let facts = super::values::global_facts(&self.global, &[], None);
        ModuleValues::build_global(super::values::global_definition()?, None, &facts)
            .map_err(super::values::values_error)
    }
}

/// Keeps a context for the hook's ModuleHookRun and queues the task in the binding's queue
/// (a task already waiting takes the new context too).
fn queue_context(
    modules: &Mutex<HashMap<String, ModuleHooks>>,
    queues: &super::worker::QueueView,
    module: &str,
    hook: &str,
    binding: &str,
    context: BindingContext,
) {
    let queue = {
        let Ok(mut m) = modules.lock() else { return };
        let Some(state) = m.get_mut(module) else {
            return;
        };
        let queue = state
            .hooks
            .iter()
            .find(|h| h.name == hook)
            .and_then(|h| {
                h.config
                    .kubernetes
                    .iter()
                    .find(|k| k.name == binding)
                    .map(|k| k.queue.clone())
                    .or_else(|| {
                        h.config
                            .schedules
                            .iter()
                            .find(|s| s.name == binding)
                            .map(|s| s.queue.clone())
                    })
            })
            .unwrap_or_else(|| MAIN.to_owned());
        state
            .pending
            .entry((hook.to_owned(), binding.to_owned()))
            .or_default()
            .push(context);
        queue
    };
    let task = if module == GLOBAL {
        TaskKind::GlobalHookRun {
            hook: hook.to_owned(),
            binding: binding.to_owned(),
        }
    } else {
        TaskKind::ModuleHookRun {
            module: module.to_owned(),
            hook: hook.to_owned(),
            binding: binding.to_owned(),
        }
    };
    queues.push(&queue, task);
}

fn poisoned(module: &str) -> Error {
    Error::Hook {
        module: module.to_owned(),
        hook: String::new(),
        message: "hook state lock poisoned".into(),
    }
}
