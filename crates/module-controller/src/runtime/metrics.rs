//! The module runtime's metrics, with addon-operator's names as Deckhouse exposes them
//! (`{PREFIX}` = `deckhouse_`):
//!
//! - `deckhouse_live_ticks` (counter): +1 every 10 seconds while the runtime runs
//!   (`D8DeckhouseIsHung`);
//! - `deckhouse_tasks_queue_length{queue}` and `deckhouse_tasks_queue_head_info{queue, module,
//!   task_type, hook}` (gauges, the recording rule `d8:deckhouse_queue_is_hung:with_head`);
//! - `deckhouse_task_wait_in_queue_seconds_total{module, hook, binding, queue}` (counter);
//! - `d8_tasks_queue_oldest_task_age_seconds{queue}` (gauge, ours);
//! - `deckhouse_module_run_errors_total{module}`, `deckhouse_module_delete_errors_total{module}`,
//!   `deckhouse_modules_discover_errors_total` (counters): a ModuleRun, ModuleDelete or
//!   converge task that failed;
//! - `deckhouse_module_hook_errors_total{module, hook, binding, queue, activation}` and
//!   `deckhouse_module_hook_allowed_errors_total{…}`, `deckhouse_global_hook_errors_total{hook,
//!   binding, queue, activation}` and `deckhouse_global_hook_allowed_errors_total{…}`
//!   (counters): a hook task that failed, the `allowed` ones with `allowFailure: true` — every
//!   global hook run, a module hook's `kubernetes` and `schedule` runs (not the hooks a
//!   ModuleRun runs, as in addon-operator); `queue` the task's queue, `activation`
//!   `OperatorStartup` for the startup converge's tasks, else empty;
//! - `deckhouse_config_values_errors_total` (counter): +1 every [`CONFIG_CHECK`] while the
//!   settings of a ModuleConfig (or `global`) are refused, as addon-operator counts while its
//!   configuration is invalid (`D8DeckhouseConfigInvalid`);
//! - `deckhouse_kubernetes_client_watch_errors_total{error_type}` (counter): a `kubernetes`
//!   binding's watch failed and is restarted (shell-operator's `error_type`: `expired` for a
//!   410 from the API server, `unexpected-eof`, else `fail`; `D8DeckhouseWatchErrorOccurred`).
//!
//! prometheus-client names a counter's sample `<name>_total`, so the `_total` counters are
//! registered without it; `deckhouse_live_ticks` has no `_total` in Deckhouse and is encoded
//! by [`BareCounter`].

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::queue::{Queues, Task, TaskKind};

type Labels = Vec<(&'static str, String)>;

/// How often addon-operator checks whether its configuration is valid.
pub const CONFIG_CHECK: Duration = Duration::from_secs(5);

/// How often `deckhouse_live_ticks` grows (shell-operator's tick).
pub const LIVE_TICK: Duration = Duration::from_secs(10);

pub use release_controller::metrics::BareCounter;

/// How a hook's failure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HookFailure {
    /// `allowFailure: false`: the task is retried.
    Error,
    /// `allowFailure: true`: the run goes on.
    Allowed,
}

/// A hook run's labels in the hook error counters (addon-operator's `metricLabels`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HookRun<'a> {
    /// The hook's name (its path under the module).
    pub hook: &'a str,
    /// The binding type (`kubernetes`, `schedule`, `onStartup`, …).
    pub binding: &'a str,
    /// The queue of the task that ran it.
    pub queue: &'a str,
    /// `OperatorStartup` for a task of the startup converge, else empty.
    pub activation: &'a str,
}

/// The runtime's metrics (cheap to clone: families are shared).
#[derive(Clone, Debug, Default)]
pub struct QueueMetrics {
    length: Family<Labels, Gauge>,
    head: Family<Labels, Gauge>,
    oldest: Family<Labels, Gauge>,
    waited: Family<Labels, Counter<f64, AtomicU64>>,
    live_ticks: BareCounter,
    module_run_errors: Family<Labels, Counter>,
    module_delete_errors: Family<Labels, Counter>,
    discover_errors: Counter,
    module_hook_errors: Family<Labels, Counter>,
    module_hook_allowed_errors: Family<Labels, Counter>,
    global_hook_errors: Family<Labels, Counter>,
    global_hook_allowed_errors: Family<Labels, Counter>,
    watch_errors: Family<Labels, Counter>,
    config_values_errors: Counter,
    /// The ModuleConfigs (`global` included) whose settings are refused now.
    invalid_configs: Arc<Mutex<BTreeSet<String>>>,
}

/// shell-operator's `error_type` of a failed watch: `expired` (410 Gone or Expired from the API
/// server), `unexpected-eof` (the stream broke mid-event), `fail` otherwise.
pub fn watch_error_type(error: &kube::runtime::watcher::Error) -> &'static str {
    use kube::runtime::watcher::Error as W;
    let expired = |status: &kube::core::Status| {
        status.code == 410 || status.reason == "Expired" || status.reason == "Gone"
    };
    match error {
        W::WatchError(status) if expired(status) => "expired",
        W::InitialListFailed(kube::Error::Api(status))
        | W::WatchStartFailed(kube::Error::Api(status))
        | W::WatchFailed(kube::Error::Api(status))
            if expired(status) =>
        {
            "expired"
        }
        W::WatchFailed(kube::Error::ReadEvents(e))
            if e.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            "unexpected-eof"
        }
        _ => "fail",
    }
}

impl QueueMetrics {
    /// Registers every family.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "deckhouse_live_ticks",
            "Grows by one every 10 seconds while the module runtime runs (D8DeckhouseIsHung).",
            self.live_ticks.clone(),
        );
        registry.register(
            "deckhouse_tasks_queue_length",
            "Length of each task queue (what D8DeckhouseQueueIsHung watches).",
            self.length.clone(),
        );
        registry.register(
            "deckhouse_tasks_queue_head_info",
            "The head of each non-empty task queue (module, task_type, hook).",
            self.head.clone(),
        );
        registry.register(
            "d8_tasks_queue_oldest_task_age_seconds",
            "Age of the oldest task of each queue.",
            self.oldest.clone(),
        );
        registry.register(
            "deckhouse_task_wait_in_queue_seconds",
            "Seconds tasks waited in their queue before they started.",
            self.waited.clone(),
        );
        registry.register(
            "deckhouse_module_run_errors",
            "Failed ModuleRun tasks per module.",
            self.module_run_errors.clone(),
        );
        registry.register(
            "deckhouse_module_delete_errors",
            "Failed ModuleDelete tasks per module.",
            self.module_delete_errors.clone(),
        );
        registry.register(
            "deckhouse_modules_discover_errors",
            "Failed converges (the enabled modules could not be listed or their values built).",
            self.discover_errors.clone(),
        );
        registry.register(
            "deckhouse_module_hook_errors",
            "Failed runs of module hooks with allowFailure: false.",
            self.module_hook_errors.clone(),
        );
        registry.register(
            "deckhouse_module_hook_allowed_errors",
            "Failed runs of module hooks with allowFailure: true.",
            self.module_hook_allowed_errors.clone(),
        );
        registry.register(
            "deckhouse_global_hook_errors",
            "Failed runs of global hooks with allowFailure: false.",
            self.global_hook_errors.clone(),
        );
        registry.register(
            "deckhouse_global_hook_allowed_errors",
            "Failed runs of global hooks with allowFailure: true.",
            self.global_hook_allowed_errors.clone(),
        );
        registry.register(
            "deckhouse_config_values_errors",
            "Configuration checks that found refused ModuleConfig settings (every 5 s).",
            self.config_values_errors.clone(),
        );
        registry.register(
            "deckhouse_kubernetes_client_watch_errors",
            "Failed watches of kubernetes bindings, by error_type.",
            self.watch_errors.clone(),
        );
    }

    /// The live ticks (the runtime ticks them every [`LIVE_TICK`]).
    pub fn live_ticks(&self) -> &BareCounter {
        &self.live_ticks
    }

    pub(crate) fn refresh(&self, queues: &Queues, now: Duration) {
        self.length.clear();
        self.oldest.clear();
        self.head.clear();
        for (queue, len, oldest) in queues.lengths(now) {
            let l = vec![("queue", queue.clone())];
            self.length.get_or_create(&l).set(len as i64);
            self.oldest.get_or_create(&l).set(oldest.as_secs() as i64);
        }
        for (queue, _, head) in queues.list() {
            if let Some(t) = head {
                self.head
                    .get_or_create(&vec![
                        ("queue", queue.to_owned()),
                        ("module", t.kind.module().to_owned()),
                        ("task_type", t.kind.type_name().to_owned()),
                        ("hook", t.kind.hook().to_owned()),
                    ])
                    .set(1);
            }
        }
    }

    pub(crate) fn started(&self, queue: &str, task: &Task, now: Duration) {
        let waited = now.saturating_sub(task.queued_at).as_secs_f64();
        self.waited
            .get_or_create(&vec![
                ("module", task.kind.module().to_owned()),
                ("hook", task.kind.hook().to_owned()),
                ("binding", task.kind.binding().to_owned()),
                ("queue", queue.to_owned()),
            ])
            .inc_by(waited);
    }

    /// Counts a failed task of the module lifecycle (hook tasks count through
    /// [`QueueMetrics::hook_failed`], where the hook runs).
    pub(crate) fn task_failed(&self, kind: &TaskKind) {
        match kind {
            TaskKind::ConvergeModules => {
                self.discover_errors.inc();
            }
            TaskKind::ModuleRun { module } => {
                self.module_run_errors
                    .get_or_create(&vec![("module", module.clone())])
                    .inc();
            }
            TaskKind::ModuleDelete { module } => {
                self.module_delete_errors
                    .get_or_create(&vec![("module", module.clone())])
                    .inc();
            }
            TaskKind::ModuleHookRun { .. } | TaskKind::GlobalHookRun { .. } => {}
        }
    }

    /// Records whether the settings of ModuleConfig `name` were accepted when last read.
    pub(crate) fn config_checked(&self, name: &str, valid: bool) {
        let mut invalid = self
            .invalid_configs
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if valid {
            invalid.remove(name);
        } else {
            invalid.insert(name.to_owned());
        }
    }

    /// The periodic configuration check: one more config values error while any settings are
    /// refused.
    pub(crate) fn check_config(&self) {
        let invalid = self
            .invalid_configs
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !invalid.is_empty() {
            self.config_values_errors.inc();
        }
    }

    /// Counts a failed watch of a `kubernetes` binding.
    pub(crate) fn watch_failed(&self, error: &kube::runtime::watcher::Error) {
        self.watch_errors
            .get_or_create(&vec![("error_type", watch_error_type(error).to_owned())])
            .inc();
    }

    /// Counts a failed hook run; `module` is `None` for a global hook.
    pub(crate) fn hook_failed(&self, module: Option<&str>, run: HookRun<'_>, failure: HookFailure) {
        let (family, labels) = match (module, failure) {
            (Some(m), HookFailure::Error) => (&self.module_hook_errors, Some(m)),
            (Some(m), HookFailure::Allowed) => (&self.module_hook_allowed_errors, Some(m)),
            (None, HookFailure::Error) => (&self.global_hook_errors, None),
            (None, HookFailure::Allowed) => (&self.global_hook_allowed_errors, None),
        };
        let mut l: Labels = labels
            .map(|m| vec![("module", m.to_owned())])
            .unwrap_or_default();
        l.extend([
            ("hook", run.hook.to_owned()),
            ("binding", run.binding.to_owned()),
            ("queue", run.queue.to_owned()),
            ("activation", run.activation.to_owned()),
        ]);
        family.get_or_create(&l).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(m: &QueueMetrics) -> String {
        let mut registry = Registry::default();
        m.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn live_ticks_is_a_counter_named_as_deckhouse_names_it() {
        let m = QueueMetrics::default();
        m.live_ticks().inc();
        m.live_ticks().inc();
        let text = encode(&m);
        assert!(
            text.contains("# TYPE deckhouse_live_ticks counter\ndeckhouse_live_ticks 2\n"),
            "{text}"
        );
    }

    #[test]
    fn failures_count_under_deckhouse_names() {
        let m = QueueMetrics::default();
        let table: [(TaskKind, &str); 3] = [
            (
                TaskKind::ModuleRun {
                    module: "echo".into(),
                },
                "deckhouse_module_run_errors_total{module=\"echo\"} 1",
            ),
            (
                TaskKind::ModuleDelete {
                    module: "echo".into(),
                },
                "deckhouse_module_delete_errors_total{module=\"echo\"} 1",
            ),
            (
                TaskKind::ConvergeModules,
                "deckhouse_modules_discover_errors_total 1",
            ),
        ];
        for (kind, _) in &table {
            m.task_failed(kind);
        }
        let run = |hook, binding, queue, activation| HookRun {
            hook,
            binding,
            queue,
            activation,
        };
        let a = run("hooks/a.py", "kubernetes", "main", "");
        m.hook_failed(Some("echo"), a, HookFailure::Error);
        m.hook_failed(Some("echo"), a, HookFailure::Error);
        let b = run("hooks/b.py", "schedule", "echo-queue", "");
        m.hook_failed(Some("echo"), b, HookFailure::Allowed);
        let g = run("global-hooks/g.py", "onStartup", "main", "OperatorStartup");
        m.hook_failed(None, g, HookFailure::Error);
        let h = run("global-hooks/h.py", "onStartup", "main", "OperatorStartup");
        m.hook_failed(None, h, HookFailure::Allowed);
        let text = encode(&m);
        let lines = table.iter().map(|(_, line)| *line).chain([
            "deckhouse_module_hook_errors_total{module=\"echo\",hook=\"hooks/a.py\",binding=\"kubernetes\",queue=\"main\",activation=\"\"} 2",
            "deckhouse_module_hook_allowed_errors_total{module=\"echo\",hook=\"hooks/b.py\",binding=\"schedule\",queue=\"echo-queue\",activation=\"\"} 1",
            "deckhouse_global_hook_errors_total{hook=\"global-hooks/g.py\",binding=\"onStartup\",queue=\"main\",activation=\"OperatorStartup\"} 1",
            "deckhouse_global_hook_allowed_errors_total{hook=\"global-hooks/h.py\",binding=\"onStartup\",queue=\"main\",activation=\"OperatorStartup\"} 1",
        ]);
        for line in lines {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }

    #[test]
    fn watch_errors_by_shell_operator_error_type() {
        use kube::runtime::watcher::Error as W;
        let status = |code: u16, reason: &str| kube::core::Status {
            code,
            reason: reason.into(),
            ..Default::default()
        };
        let table: Vec<(W, &str)> = vec![
            (W::WatchError(Box::new(status(410, "Expired"))), "expired"),
            (W::WatchError(Box::new(status(0, "Gone"))), "expired"),
            (
                W::WatchStartFailed(kube::Error::Api(Box::new(status(410, "Gone")))),
                "expired",
            ),
            (
                W::WatchError(Box::new(status(500, "InternalError"))),
                "fail",
            ),
            (
                W::WatchFailed(kube::Error::ReadEvents(std::io::Error::from(
                    std::io::ErrorKind::UnexpectedEof,
                ))),
                "unexpected-eof",
            ),
            (
                W::WatchFailed(kube::Error::ReadEvents(std::io::Error::from(
                    std::io::ErrorKind::ConnectionReset,
                ))),
                "fail",
            ),
            (W::NoResourceVersion, "fail"),
        ];
        for (error, want) in &table {
            assert_eq!(watch_error_type(error), *want, "{error}");
        }
        let m = QueueMetrics::default();
        m.watch_failed(&table[0].0);
        m.watch_failed(&table[3].0);
        m.watch_failed(&table[6].0);
        let mut registry = Registry::default();
        m.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "deckhouse_kubernetes_client_watch_errors_total{error_type=\"expired\"} 1",
            "deckhouse_kubernetes_client_watch_errors_total{error_type=\"fail\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }

    #[test]
    fn config_values_errors_grow_while_settings_are_refused() {
        let m = QueueMetrics::default();
        let count = |m: &QueueMetrics| {
            let mut registry = Registry::default();
            m.register(&mut registry);
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text.lines()
                .find_map(|l| l.strip_prefix("deckhouse_config_values_errors_total "))
                .map(str::to_owned)
        };
        m.check_config();
        assert_eq!(count(&m).as_deref(), Some("0"));
        m.config_checked("echo", false);
        m.config_checked("global", false);
        m.check_config();
        m.check_config();
        assert_eq!(count(&m).as_deref(), Some("2"));
        m.config_checked("echo", true);
        m.check_config();
        assert_eq!(count(&m).as_deref(), Some("3"), "global is still refused");
        m.config_checked("global", true);
        m.check_config();
        assert_eq!(count(&m).as_deref(), Some("3"));
    }
}
