//! The queue worker: what puts tasks into the [`queue`](super::queue)s and runs their heads.
//! A converge is queued at start and whenever the set of enabled modules or a ModuleConfig
//! changes; it expands into ModuleDelete and ModuleRun tasks in `main`. Each queue runs one
//! task at a time; a failed ModuleRun goes to the tail of `main` with shell-operator's backoff
//! (so one broken module does not hold the others), any other failed task stays at its head.
//! Queue lengths, heads and waits are exported under Deckhouse's metric names.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::module::{Module, ModuleConditionType};
use api::module_config::ModuleConfig;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use tokio::time::Instant;

use super::Runtime;
use super::queue::{MAIN, Queues, Task, TaskKind};
use crate::Error;

pub use super::metrics::QueueMetrics;

/// The queues of a running runtime, shared with `/queue/list`.
#[derive(Clone, Debug)]
pub struct QueueView {
    queues: Arc<Mutex<Queues>>,
    epoch: Instant,
    wake: Arc<tokio::sync::Notify>,
}

impl QueueView {
    pub(super) fn new() -> Self {
        Self {
            queues: Arc::new(Mutex::new(Queues::new())),
            epoch: Instant::now(),
            wake: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// Time since the queues' epoch.
    pub(crate) fn elapsed(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Queues a task at the tail of `queue` and wakes the worker.
    pub(crate) fn push(&self, queue: &str, kind: TaskKind) {
        let now = self.epoch.elapsed();
        if let Ok(mut q) = self.queues.lock() {
            q.add_last(queue, kind, now);
        }
        self.wake.notify_one();
    }

    /// `d8 queue list`'s text.
    pub fn render(&self) -> String {
        let now = self.epoch.elapsed();
        match self.queues.lock() {
            Ok(q) => super::queue::render_list(&q, now),
            Err(_) => String::new(),
        }
    }
}

/// What of a Module or ModuleConfig makes a converge worth queuing: a ModuleConfig's spec,
/// a Module's enabled state, weight and version.
fn trigger_hash_config(c: &ModuleConfig) -> Option<u64> {
    let mut h = DefaultHasher::new();
    c.meta().generation.hash(&mut h);
    c.meta().deletion_timestamp.is_some().hash(&mut h);
    Some(h.finish())
}

/// A change of the registry Secret's data.
fn trigger_hash_secret(s: &Secret) -> Option<u64> {
    let mut h = DefaultHasher::new();
    for (k, v) in s.data.iter().flatten() {
        k.hash(&mut h);
        v.0.hash(&mut h);
    }
    Some(h.finish())
}

fn enabled(m: &Module) -> bool {
    m.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == ModuleConditionType::EnabledByModuleManager.as_str() && c.status == "True"
        })
    })
}

fn trigger_hash_module(m: &Module) -> Option<u64> {
    let mut h = DefaultHasher::new();
    enabled(m).hash(&mut h);
    m.spec.properties.weight.hash(&mut h);
    m.spec.properties.version.hash(&mut h);
    Some(h.finish())
}

fn jitter() -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Duration::from_millis(u64::from(nanos % 1000))
}

impl Runtime {
    /// The queues (empty until [`Runtime::run`] starts).
    pub fn queue_view(&self) -> QueueView {
        self.queue_view.clone()
    }

    /// The queue metrics (register them where `/metrics` is served).
    pub fn queue_metrics(&self) -> &QueueMetrics {
        &self.queue_metrics
    }

    /// Queues a converge.
    pub fn queue_converge(&self) {
        let now = self.queue_view.epoch.elapsed();
        if let Ok(mut q) = self.queue_view.queues.lock() {
            q.add_last(MAIN, TaskKind::ConvergeModules, now);
        }
    }

    /// Runs the queues until `shutdown` resolves: a converge first, then one on every change of
    /// the enabled modules or of a ModuleConfig.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        let (changed, mut changes) = tokio::sync::mpsc::channel::<()>(16);
        let watches = [
            {
                let api: Api<ModuleConfig> = Api::all(self.client.clone());
                let changed = changed.clone();
                tokio::spawn(async move {
                    let stream = watcher(api, watcher::Config::default())
                        .default_backoff()
                        .touched_objects()
                        .predicate_filter(trigger_hash_config, Default::default());
                    let mut stream = std::pin::pin!(stream);
                    while let Some(e) = stream.next().await {
                        if e.is_ok() {
                            let _ = changed.try_send(());
                        }
                    }
                })
            },
            {
                // The registry module's Secret: its registry is `global.modulesImages.registry`.
                let (ns, name) = super::values::REGISTRY_SECRET;
                let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
                let changed = changed.clone();
                let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
                tokio::spawn(async move {
                    let stream = watcher(api, config)
                        .default_backoff()
                        .touched_objects()
                        .predicate_filter(trigger_hash_secret, Default::default());
                    let mut stream = std::pin::pin!(stream);
                    while let Some(e) = stream.next().await {
                        if e.is_ok() {
                            let _ = changed.try_send(());
                        }
                    }
                })
            },
            {
                let api: Api<Module> = Api::all(self.client.clone());
                tokio::spawn(async move {
                    let stream = watcher(api, watcher::Config::default())
                        .default_backoff()
                        .touched_objects()
                        .predicate_filter(trigger_hash_module, Default::default());
                    let mut stream = std::pin::pin!(stream);
                    while let Some(e) = stream.next().await {
                        if e.is_ok() {
                            let _ = changed.try_send(());
                        }
                    }
                })
            },
        ];
        self.detect_chroot_mode().await;
        if let Ok(mut q) = self.queue_view.queues.lock() {
            q.add_startup(
                MAIN,
                TaskKind::ConvergeModules,
                self.queue_view.epoch.elapsed(),
            );
        }
        let mut running = tokio::task::JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        // shell-operator's live ticks: Prometheus sees the runtime is alive.
        let mut ticks = tokio::time::interval_at(
            Instant::now() + super::metrics::LIVE_TICK,
            super::metrics::LIVE_TICK,
        );
        let mut config_checks = tokio::time::interval_at(
            Instant::now() + super::metrics::CONFIG_CHECK,
            super::metrics::CONFIG_CHECK,
        );
        tracing::info!("module runtime started");
        loop {
            let now = self.queue_view.epoch.elapsed();
            let started = match self.queue_view.queues.lock() {
                Ok(mut q) => {
                    let started = q.start_ready(now);
                    self.queue_metrics.refresh(&q, now);
                    started
                }
                Err(_) => break,
            };
            for (queue, task) in started {
                self.queue_metrics.started(&queue, &task, now);
                let me = self.clone();
                let run = super::hooks::RunLabels {
                    queue: queue.clone(),
                    startup: task.startup,
                };
                running.spawn(async move {
                    let result = super::hooks::RUN_LABELS.scope(run, me.execute(&task)).await;
                    (queue, task, result)
                });
            }
            let next = self
                .queue_view
                .queues
                .lock()
                .ok()
                .and_then(|q| q.next_ready())
                .map(|at| at.saturating_sub(self.queue_view.epoch.elapsed()))
                .unwrap_or(Duration::from_secs(5))
                .clamp(Duration::from_millis(10), Duration::from_secs(5));
            tokio::select! {
                () = &mut shutdown => break,
                Some(()) = changes.recv() => {
                    while changes.try_recv().is_ok() {}
                    self.queue_converge();
                }
                Some(Ok((queue, task, result))) = running.join_next() => {
                    self.finish(&queue, &task, result);
                }
                () = self.queue_view.wake.notified() => {}
                _ = ticks.tick() => self.queue_metrics.live_ticks().inc(),
                _ = config_checks.tick() => self.queue_metrics.check_config(),
                () = tokio::time::sleep(next) => {}
            }
        }
        for w in watches {
            w.abort();
        }
        running.shutdown().await;
        tracing::info!("module runtime stopped");
    }

    fn finish(&self, queue: &str, task: &Task, result: Result<Vec<TaskKind>, Error>) {
        let now = self.queue_view.epoch.elapsed();
        let Ok(mut q) = self.queue_view.queues.lock() else {
            return;
        };
        match result {
            Ok(follow) => {
                q.done(queue, task.id);
                if !follow.is_empty() {
                    // What a converge expands into runs next, ahead of later triggers.
                    q.add_after_head(queue, follow, now, task.startup);
                }
            }
            Err(e) => {
                tracing::warn!(queue, task = %task.kind.describe(), error = %e, "task failed, will retry");
                self.queue_metrics.task_failed(&task.kind);
                if matches!(task.kind, TaskKind::ModuleRun { .. }) {
                    q.failed_to_tail(queue, task.id, e.to_string(), now, jitter());
                } else {
                    q.failed(queue, task.id, e.to_string(), now, jitter());
                }
            }
        }
        self.queue_metrics.refresh(&q, now);
    }

    /// Runs one task; a converge returns the tasks it expands into.
    async fn execute(&self, task: &Task) -> Result<Vec<TaskKind>, Error> {
        match &task.kind {
            TaskKind::ConvergeModules => {
                // Global hooks start before the first converge (onStartup, bindings).
                self.start_global_hooks().await?;
                let (enabled, to_delete) = self.converge_plan().await?;
                let (before_all, after_all) = self.global_phase_hooks();
                Ok(super::queue::with_global_hooks(
                    &before_all,
                    super::queue::converge_tasks(&enabled, &to_delete),
                    &after_all,
                ))
            }
            TaskKind::ModuleRun { module } => self.run_module(module).await.map(|_| Vec::new()),
            TaskKind::ModuleDelete { module } => {
                self.delete_module(module).await.map(|_| Vec::new())
            }
            TaskKind::ModuleHookRun {
                module,
                hook,
                binding,
            } => {
                self.run_hook_task(module, hook, binding).await?;
                if task.failures > 0 {
                    // The hook passes again: a module run writes the status anew.
                    self.queue_view.push(
                        MAIN,
                        TaskKind::ModuleRun {
                            module: module.clone(),
                        },
                    );
                }
                Ok(Vec::new())
            }
            TaskKind::GlobalHookRun { hook, binding } => self
                .run_global_hook_task(hook, binding)
                .await
                .map(|_| Vec::new()),
        }
    }

    /// The enabled modules on disk (weight, name) and the other modules that still have a
    /// release.
    pub async fn converge_plan(&self) -> Result<(Vec<(i64, String)>, Vec<String>), Error> {
        let modules = Api::<Module>::all(self.client.clone())
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list Modules", e))?;
        let released = self.applier.released(super::RELEASE_NAMESPACE).await?;
        let mut on = Vec::new();
        let mut off = Vec::new();
        for m in &modules {
            let name = m.name_any();
            if enabled(m) && self.dirs.find(&name)?.is_some() {
                on.push((
                    m.spec
                        .properties
                        .weight
                        .unwrap_or(module_plan::definition::DOWNLOADED_WEIGHT),
                    name,
                ));
            } else if released.contains(&name) || self.values.module(&name).is_some() {
                off.push(name);
            }
        }
        // The global values every module of this converge is rendered with.
        let config = Api::<ModuleConfig>::all(self.client.clone())
            .get_opt("global")
            .await
            .map_err(|e| Error::kube("get ModuleConfig global", e))?
            .map(|c| c.spec);
        let version = self
            .client
            .apiserver_version()
            .await
            .ok()
            .map(|v| format!("{}.{}", v.major, v.minor.trim_end_matches('+')));
        let names: Vec<String> = on.iter().map(|(_, n)| n.clone()).collect();
        let mut facts = super::values::global_facts(&self.global, &names, version.as_deref());
        // `modulesImages.registry` from the registry module's Secret.
        let (ns, name) = super::values::REGISTRY_SECRET;
        let secret = Api::<Secret>::namespaced(self.client.clone(), ns)
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(format!("get Secret {ns}/{name}"), e))?;
        let data: std::collections::BTreeMap<String, Vec<u8>> = secret
            .and_then(|s| s.data)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        if let Some(registry) = super::values::registry_from_secret(&data) {
            facts.modules_images.registry = registry;
        }
        let global = match self.values.global() {
            Some(last) => last
                .with_config(config.as_ref())
                .and_then(|g| g.with_facts(&facts)),
            None => module_plan::values::ModuleValues::build_global(
                super::values::global_definition()?,
                config.as_ref(),
                &facts,
            ),
        };
        self.queue_metrics.config_checked("global", global.is_ok());
        let global = global.map_err(super::values::values_error)?;
        self.values.set_global(global);
        Ok((on, off))
    }
}
