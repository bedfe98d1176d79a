//! Task queues as addon-operator keeps them: the `main` queue and named queues (declared by
//! hooks), each run one task at a time, first in first out; a failed task stays at its queue's
//! head and is retried after shell-operator's exponential backoff (5 s, then 5 s + 2^(n-1) s
//! plus up to a second of jitter, capped at 32 s), blocking only its own queue; a task equal to
//! one already waiting (not running) is not queued twice (addon-operator compacts duplicates).
//!
//! Pure: time is passed in, jitter too.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// The main queue.
pub const MAIN: &str = "main";

/// The first retry's delay (shell-operator's `DelayOnFailedTask`).
pub const INITIAL_DELAY: Duration = Duration::from_secs(5);
/// The longest retry delay.
pub const MAX_DELAY: Duration = Duration::from_secs(32);

/// What a task does, named as addon-operator names its task types.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TaskKind {
    /// Run every enabled module in weight order, remove disabled ones.
    ConvergeModules,
    /// One module's run: beforeHelm hooks → render → apply → afterHelm hooks.
    ModuleRun {
        /// The module.
        module: String,
    },
    /// Remove a disabled module: afterDeleteHelm hooks, its resources and release.
    ModuleDelete {
        /// The module.
        module: String,
    },
    /// A module hook run for one binding.
    ModuleHookRun {
        /// The module.
        module: String,
        /// The hook.
        hook: String,
        /// The binding that triggered it.
        binding: String,
    },
    /// A global hook run for one binding.
    GlobalHookRun {
        /// The hook.
        hook: String,
        /// The binding.
        binding: String,
    },
}

impl TaskKind {
    /// addon-operator's task type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            TaskKind::ConvergeModules => "ConvergeModules",
            TaskKind::ModuleRun { .. } => "ModuleRun",
            TaskKind::ModuleDelete { .. } => "ModuleDelete",
            TaskKind::ModuleHookRun { .. } => "ModuleHookRun",
            TaskKind::GlobalHookRun { .. } => "GlobalHookRun",
        }
    }

    /// The module it concerns (`""` for none).
    pub fn module(&self) -> &str {
        match self {
            TaskKind::ModuleRun { module }
            | TaskKind::ModuleDelete { module }
            | TaskKind::ModuleHookRun { module, .. } => module,
            _ => "",
        }
    }

    /// The hook it runs (`""` for none).
    pub fn hook(&self) -> &str {
        match self {
            TaskKind::ModuleHookRun { hook, .. } | TaskKind::GlobalHookRun { hook, .. } => hook,
            _ => "",
        }
    }

    /// The binding that triggered it (`""` for none).
    pub fn binding(&self) -> &str {
        match self {
            TaskKind::ModuleHookRun { binding, .. } | TaskKind::GlobalHookRun { binding, .. } => {
                binding
            }
            _ => "",
        }
    }

    /// How `d8 queue list` shows it.
    pub fn describe(&self) -> String {
        match self {
            TaskKind::ConvergeModules => "ConvergeModules".into(),
            TaskKind::ModuleRun { module } => format!("ModuleRun:{module}"),
            TaskKind::ModuleDelete { module } => format!("ModuleDelete:{module}"),
            TaskKind::ModuleHookRun {
                module,
                hook,
                binding,
            } => format!("ModuleHookRun:{binding}:{module}:{hook}"),
            TaskKind::GlobalHookRun { hook, binding } => format!("GlobalHookRun:{binding}:{hook}"),
        }
    }
}

/// A queued task. Times are offsets from the queues' epoch (the caller's clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    /// Unique in the queue set.
    pub id: u64,
    /// What it does.
    pub kind: TaskKind,
    /// When it was queued.
    pub queued_at: Duration,
    /// Failed attempts so far.
    pub failures: u32,
    /// The last failure.
    pub last_error: Option<String>,
    /// Not to be started before this (set after a failure).
    pub not_before: Duration,
    /// Being run now.
    pub running: bool,
    /// Queued by the startup converge or what it expanded into (addon-operator's tasks with
    /// `event.type: OperatorStartup`; their hook runs are labelled `activation="OperatorStartup"`).
    pub startup: bool,
}

/// Every queue.
#[derive(Clone, Debug, Default)]
pub struct Queues {
    queues: BTreeMap<String, VecDeque<Task>>,
    next_id: u64,
}

/// The retry delay after `failures` failed attempts (1 = the first failure), with `jitter`
/// (0..1 s) added as shell-operator adds its random milliseconds.
pub fn backoff(failures: u32, jitter: Duration) -> Duration {
    let retry = failures.saturating_sub(1);
    if retry == 0 {
        return INITIAL_DELAY;
    }
    // log2(32 s): after 5 doublings the delay is the maximum.
    let exponential = if retry <= 5 {
        Duration::from_secs(1u64 << (retry - 1))
    } else {
        MAX_DELAY
    };
    let jitter = jitter.min(Duration::from_millis(999));
    let delay = INITIAL_DELAY + exponential + jitter;
    // Truncated to 100 ms.
    let delay = Duration::from_millis(delay.as_millis() as u64 / 100 * 100);
    delay.min(MAX_DELAY)
}

impl Queues {
    /// Empty queues with `main`.
    pub fn new() -> Self {
        let mut q = Self::default();
        q.queues.insert(MAIN.into(), VecDeque::new());
        q
    }

    /// Queues `kind` at the tail of `queue` (created if new) unless the same task already
    /// waits there. Returns whether it was added.
    pub fn add_last(&mut self, queue: &str, kind: TaskKind, now: Duration) -> bool {
        self.push_back(queue, kind, now, false)
    }

    /// Queues the startup converge (see [`Task::startup`]), as [`Queues::add_last`].
    pub fn add_startup(&mut self, queue: &str, kind: TaskKind, now: Duration) -> bool {
        self.push_back(queue, kind, now, true)
    }

    fn push_back(&mut self, queue: &str, kind: TaskKind, now: Duration, startup: bool) -> bool {
        let q = self.queues.entry(queue.to_owned()).or_default();
        if q.iter().any(|t| !t.running && t.kind == kind) {
            return false;
        }
        self.next_id += 1;
        q.push_back(Task {
            id: self.next_id,
            kind,
            queued_at: now,
            failures: 0,
            last_error: None,
            not_before: now,
            running: false,
            startup,
        });
        true
    }

    /// Queues `kinds`, in order, at the front of `queue` — after its head if the head is
    /// running (addon-operator's AddAfter: what a converge expands into runs before what was
    /// queued later). Equal waiting tasks further back are dropped. `startup`: they are the
    /// startup converge's ([`Task::startup`]).
    pub fn add_after_head(
        &mut self,
        queue: &str,
        kinds: Vec<TaskKind>,
        now: Duration,
        startup: bool,
    ) {
        let q = self.queues.entry(queue.to_owned()).or_default();
        let at = usize::from(q.front().is_some_and(|t| t.running));
        for (i, kind) in kinds.into_iter().enumerate() {
            if let Some(pos) = q.iter().position(|t| !t.running && t.kind == kind) {
                q.remove(pos);
            }
            self.next_id += 1;
            q.insert(
                (at + i).min(q.len()),
                Task {
                    id: self.next_id,
                    kind,
                    queued_at: now,
                    failures: 0,
                    last_error: None,
                    not_before: now,
                    running: false,
                    startup,
                },
            );
        }
    }

    /// The heads that may start now (one per queue, not running, backoff elapsed), marked
    /// running.
    pub fn start_ready(&mut self, now: Duration) -> Vec<(String, Task)> {
        let mut out = Vec::new();
        for (name, q) in &mut self.queues {
            if let Some(head) = q.front_mut()
                && !head.running
                && head.not_before <= now
            {
                head.running = true;
                out.push((name.clone(), head.clone()));
            }
        }
        out
    }

    /// The task `id` at the head of `queue` succeeded: it leaves the queue.
    pub fn done(&mut self, queue: &str, id: u64) {
        if let Some(q) = self.queues.get_mut(queue)
            && q.front().is_some_and(|t| t.id == id)
        {
            q.pop_front();
        }
    }

    /// The task failed: it stays at the head and waits [`backoff`].
    pub fn failed(&mut self, queue: &str, id: u64, error: String, now: Duration, jitter: Duration) {
        if let Some(q) = self.queues.get_mut(queue)
            && let Some(head) = q.front_mut()
            && head.id == id
        {
            head.running = false;
            head.failures += 1;
            head.last_error = Some(error);
            head.not_before = now + backoff(head.failures, jitter);
        }
    }

    /// The task failed and goes to the tail of its queue (a failed ModuleRun in addon-operator),
    /// to start again after [`backoff`] once it is the head.
    pub fn failed_to_tail(
        &mut self,
        queue: &str,
        id: u64,
        error: String,
        now: Duration,
        jitter: Duration,
    ) {
        if let Some(q) = self.queues.get_mut(queue)
            && q.front().is_some_and(|t| t.id == id)
            && let Some(mut task) = q.pop_front()
        {
            task.running = false;
            task.failures += 1;
            task.last_error = Some(error);
            task.not_before = now + backoff(task.failures, jitter);
            q.push_back(task);
        }
    }

    /// When the next head becomes ready (for the caller's sleep), if any waits.
    pub fn next_ready(&self) -> Option<Duration> {
        self.queues
            .values()
            .filter_map(|q| q.front())
            .filter(|t| !t.running)
            .map(|t| t.not_before)
            .min()
    }

    /// Each queue: name, length, head.
    pub fn list(&self) -> Vec<(&str, usize, Option<&Task>)> {
        self.queues
            .iter()
            .map(|(name, q)| (name.as_str(), q.len(), q.front()))
            .collect()
    }

    /// Each queue's length and the age of its oldest task.
    pub fn lengths(&self, now: Duration) -> Vec<(String, usize, Duration)> {
        self.queues
            .iter()
            .map(|(name, q)| {
                let oldest = q
                    .iter()
                    .map(|t| now.saturating_sub(t.queued_at))
                    .max()
                    .unwrap_or_default();
                (name.clone(), q.len(), oldest)
            })
            .collect()
    }
}

/// `d8 queue list`: each queue with its length and head, `main` first.
pub fn render_list(queues: &Queues, now: Duration) -> String {
    let mut rows: Vec<(&str, usize, Option<&Task>)> = queues.list();
    rows.sort_by_key(|(name, _, _)| (*name != MAIN, name.to_string()));
    let mut out = String::new();
    let total: usize = rows.iter().map(|r| r.1).sum();
    out.push_str(&format!(
        "Summary: {} queues, {} tasks\n",
        rows.len(),
        total
    ));
    for (name, len, head) in rows {
        out.push_str(&format!("Queue '{name}': length {len}"));
        match head {
            None => out.push_str(", empty\n"),
            Some(t) => {
                let age = now.saturating_sub(t.queued_at).as_secs();
                out.push_str(&format!(", head: {} (queued {age}s ago", t.kind.describe()));
                if t.failures > 0 {
                    out.push_str(&format!(", failed {} times", t.failures));
                }
                out.push(')');
                if let Some(e) = &t.last_error {
                    out.push_str(&format!(": {e}"));
                }
                out.push('\n');
            }
        }
    }
    out
}

/// What a converge expands into: deletes of disabled modules that still have a release, then
/// a run of every enabled module, in weight then name order.
pub fn converge_tasks(enabled: &[(i64, String)], to_delete: &[String]) -> Vec<TaskKind> {
    let mut enabled = enabled.to_vec();
    enabled.sort();
    to_delete
        .iter()
        .map(|m| TaskKind::ModuleDelete { module: m.clone() })
        .chain(
            enabled
                .into_iter()
                .map(|(_, module)| TaskKind::ModuleRun { module }),
        )
        .collect()
}

/// A converge's tasks framed by the global hooks: a `GlobalHookRun` per `beforeAll` hook
/// first, then the modules' tasks, then one per `afterAll` hook (addon-operator's converge
/// phases). Pure.
pub fn with_global_hooks(
    before_all: &[String],
    modules: Vec<TaskKind>,
    after_all: &[String],
) -> Vec<TaskKind> {
    let global = |binding: &'static str| {
        move |hook: &String| TaskKind::GlobalHookRun {
            hook: hook.clone(),
            binding: binding.to_owned(),
        }
    };
    before_all
        .iter()
        .map(global("beforeAll"))
        .chain(modules)
        .chain(after_all.iter().map(global("afterAll")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_hooks_frame_a_converge() {
        let g = |hook: &str, binding: &str| TaskKind::GlobalHookRun {
            hook: hook.into(),
            binding: binding.into(),
        };
        let modules = vec![run("a"), run("b")];
        let rows: Vec<(Vec<String>, Vec<String>, Vec<TaskKind>)> = vec![
            (vec![], vec![], modules.clone()),
            (
                vec!["x".into(), "y".into()],
                vec!["z".into()],
                vec![
                    g("x", "beforeAll"),
                    g("y", "beforeAll"),
                    run("a"),
                    run("b"),
                    g("z", "afterAll"),
                ],
            ),
            (
                vec![],
                vec!["z".into()],
                vec![run("a"), run("b"), g("z", "afterAll")],
            ),
        ];
        for (before, after, want) in rows {
            assert_eq!(with_global_hooks(&before, modules.clone(), &after), want);
        }
        assert_eq!(
            with_global_hooks(&["x".into()], vec![], &[]),
            vec![g("x", "beforeAll")]
        );
    }

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn run(m: &str) -> TaskKind {
        TaskKind::ModuleRun { module: m.into() }
    }

    #[test]
    fn backoff_as_shell_operator() {
        let rows: &[(u32, u64, u64)] = &[
            (1, 0, 5_000),
            (2, 0, 6_000),
            (2, 999, 6_900),
            (3, 0, 7_000),
            (4, 250, 9_200),
            (5, 0, 13_000),
            (6, 0, 21_000),
            (7, 0, 32_000),
            (100, 999, 32_000),
            (0, 0, 5_000),
        ];
        for (failures, jitter, want) in rows {
            assert_eq!(
                backoff(*failures, Duration::from_millis(*jitter)),
                Duration::from_millis(*want),
                "failures {failures}"
            );
        }
    }

    #[test]
    fn the_startup_converge_marks_what_it_expands_into() {
        let mut q = Queues::new();
        assert!(q.add_startup(MAIN, TaskKind::ConvergeModules, S(0)));
        let head = q.start_ready(S(0)).remove(0).1;
        assert!(head.startup);
        q.add_after_head(MAIN, vec![run("a")], S(1), head.startup);
        q.done(MAIN, head.id);
        q.add_last(MAIN, TaskKind::ConvergeModules, S(2));
        let marks: Vec<(String, bool)> = q.queues[MAIN]
            .iter()
            .map(|t| (t.kind.describe(), t.startup))
            .collect();
        assert_eq!(
            marks,
            vec![
                (run("a").describe(), true),
                (TaskKind::ConvergeModules.describe(), false)
            ]
        );
    }

    #[test]
    fn one_task_at_a_time_per_queue_and_failures_block_only_their_queue() {
        let mut q = Queues::new();
        assert!(q.add_last(MAIN, TaskKind::ConvergeModules, S(0)));
        assert!(q.add_last(MAIN, run("a"), S(0)));
        // A duplicate waiting task is compacted.
        assert!(!q.add_last(MAIN, run("a"), S(1)));
        assert!(q.add_last("/modules/a/hooks", run("b"), S(1)));
        let started = q.start_ready(S(1));
        assert_eq!(started.len(), 2);
        assert_eq!(started[0].0, "/modules/a/hooks");
        assert_eq!(started[1].1.kind, TaskKind::ConvergeModules);
        // Running heads are not started again.
        assert!(q.start_ready(S(1)).is_empty());
        // The converge expands right after itself.
        q.add_after_head(
            MAIN,
            converge_tasks(&[(20, "z".into()), (10, "a".into())], &["old".into()]),
            S(2),
            false,
        );
        q.done(MAIN, started[1].1.id);
        let kinds: Vec<String> = q.list()[1].2.iter().map(|t| t.kind.describe()).collect();
        assert_eq!(kinds, vec!["ModuleDelete:old"]);
        let main: Vec<String> = q.queues[MAIN].iter().map(|t| t.kind.describe()).collect();
        assert_eq!(main, vec!["ModuleDelete:old", "ModuleRun:a", "ModuleRun:z"]);
        // A failure keeps the task at the head, waiting the backoff; other queues go on.
        let named = started[0].1.id;
        q.failed(
            "/modules/a/hooks",
            named,
            "hook failed".into(),
            S(2),
            Duration::ZERO,
        );
        let now = q.start_ready(S(2));
        assert_eq!(now.len(), 1);
        assert_eq!(now[0].0, MAIN);
        assert_eq!(q.next_ready(), Some(S(7)));
        assert!(q.start_ready(S(6)).is_empty());
        let retried = q.start_ready(S(7));
        assert_eq!(retried[0].1.failures, 1);
        assert_eq!(retried[0].1.last_error.as_deref(), Some("hook failed"));
        let lengths = q.lengths(S(10));
        assert_eq!(lengths[0], ("/modules/a/hooks".into(), 1, S(9)));
        assert_eq!(lengths[1], (MAIN.into(), 3, S(8)));
    }

    #[test]
    fn a_failed_module_run_goes_to_the_tail() {
        let mut q = Queues::new();
        q.add_last(MAIN, run("a"), S(0));
        q.add_last(MAIN, run("b"), S(0));
        let a = q.start_ready(S(0))[0].1.id;
        q.failed_to_tail(MAIN, a, "boom".into(), S(1), Duration::ZERO);
        let b = q.start_ready(S(1));
        assert_eq!(b[0].1.kind, run("b"));
        q.done(MAIN, b[0].1.id);
        // a waits its backoff at the head now.
        assert!(q.start_ready(S(2)).is_empty());
        assert_eq!(q.start_ready(S(6))[0].1.failures, 1);
    }

    #[test]
    fn list_shows_heads() {
        let mut q = Queues::new();
        q.add_last(MAIN, run("echo"), S(0));
        q.add_last(MAIN, run("other"), S(0));
        q.add_last(
            "/modules/echo/schedule",
            TaskKind::ModuleHookRun {
                module: "echo".into(),
                hook: "hooks/cron.py".into(),
                binding: "schedule".into(),
            },
            S(3),
        );
        let id = q.start_ready(S(3))[1].1.id;
        q.failed(
            MAIN,
            id,
            "module echo: template: boom".into(),
            S(3),
            Duration::ZERO,
        );
        q.add_last("empty", run("x"), S(0));
        let t = q
            .start_ready(S(4))
            .into_iter()
            .find(|(n, _)| n == "empty")
            .unwrap();
        q.done("empty", t.1.id);
        assert_eq!(
            render_list(&q, S(10)),
            "Summary: 3 queues, 3 tasks\n\
             Queue 'main': length 2, head: ModuleRun:echo (queued 10s ago, failed 1 times): module echo: template: boom\n\
             Queue '/modules/echo/schedule': length 1, head: ModuleHookRun:schedule:echo:hooks/cron.py (queued 7s ago)\n\
             Queue 'empty': length 0, empty\n"
        );
    }
}
