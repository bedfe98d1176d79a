//! Pure decisions about hooks: which hooks run for a binding and in what order, what a watch
//! asks the API server for and which objects it keeps, when schedules fire, what a hook run
//! leads to, and the words of a hook failure.

use std::collections::BTreeSet;

use module_hooks::config::{KubernetesBinding, LabelSelector, ScheduleBinding};
use module_hooks::{Hook, HookConfig, WatchEvent};
use serde_json::Value;

/// The bindings a module run goes through, in addon-operator's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Once, at the module's first run.
    OnStartup,
    /// Before the chart is rendered.
    BeforeHelm,
    /// After the release is applied.
    AfterHelm,
    /// After the module's release was deleted.
    AfterDeleteHelm,
    /// Global hooks, at the start of a converge.
    BeforeAll,
    /// Global hooks, after every module of a converge ran.
    AfterAll,
}

/// addon-operator's `activation` label of a hook run: `OperatorStartup` for the tasks of the
/// startup converge, empty otherwise.
pub fn activation(startup: bool) -> &'static str {
    if startup { "OperatorStartup" } else { "" }
}

/// addon-operator's `binding` label of a hook run: the binding's type (`kubernetes`,
/// `schedule`) for a binding named in `config`, else the phase binding itself (`beforeHelm`, …).
pub fn binding_type<'a>(config: &HookConfig, binding: &'a str) -> &'a str {
    if config.kubernetes.iter().any(|k| k.name == binding) {
        "kubernetes"
    } else if config.schedules.iter().any(|s| s.name == binding) {
        "schedule"
    } else {
        binding
    }
}

/// Whether a failed hook run counts in addon-operator's hook error counters
/// (`deckhouse_{global,module}_hook_{,allowed_}errors_total`): every global hook run (each is a
/// GlobalHookRun task there) and a module hook's `kubernetes` or `schedule` run (a ModuleHookRun
/// task). A module's `onStartup`, `beforeHelm`, `afterHelm` and `afterDeleteHelm` hooks run
/// inside its ModuleRun or ModuleDelete, whose failure counts in
/// `deckhouse_module_{run,delete}_errors_total` instead. `binding` is the binding's type
/// ([`binding_type`]).
pub fn counts_hook_errors(global: bool, binding: &str) -> bool {
    global || Phase::of_binding(binding).is_none()
}

impl Phase {
    /// The binding name (`beforeHelm`).
    pub fn binding(self) -> &'static str {
        match self {
            Phase::OnStartup => "onStartup",
            Phase::BeforeHelm => "beforeHelm",
            Phase::AfterHelm => "afterHelm",
            Phase::AfterDeleteHelm => "afterDeleteHelm",
            Phase::BeforeAll => "beforeAll",
            Phase::AfterAll => "afterAll",
        }
    }

    /// The phase a helm-like binding name stands for (`beforeAll` → [`Phase::BeforeAll`]).
    pub fn of_binding(binding: &str) -> Option<Self> {
        [
            Phase::OnStartup,
            Phase::BeforeHelm,
            Phase::AfterHelm,
            Phase::AfterDeleteHelm,
            Phase::BeforeAll,
            Phase::AfterAll,
        ]
        .into_iter()
        .find(|p| p.binding() == binding)
    }

    fn order(self, config: &HookConfig) -> Option<f64> {
        match self {
            Phase::OnStartup => config.on_startup,
            Phase::BeforeHelm => config.before_helm,
            Phase::AfterHelm => config.after_helm,
            Phase::AfterDeleteHelm => config.after_delete_helm,
            Phase::BeforeAll => config.before_all,
            Phase::AfterAll => config.after_all,
        }
    }
}

/// The indexes of the hooks bound to `phase`, by their order, then by name (addon-operator's
/// sort).
pub fn hooks_for(hooks: &[Hook], phase: Phase) -> Vec<usize> {
    let mut out: Vec<(f64, &str, usize)> = hooks
        .iter()
        .enumerate()
        .filter_map(|(i, h)| phase.order(&h.config).map(|o| (o, h.name.as_str(), i)))
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
    out.into_iter().map(|(_, _, i)| i).collect()
}

/// What a watch asks the API server for: one namespace (or all), and the label and field
/// selectors it can pass on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchRequest {
    /// `None`: every namespace (or a cluster-wide kind).
    pub namespace: Option<String>,
    /// `matchLabels` and `matchExpressions` as a selector string.
    pub label_selector: Option<String>,
    /// `fieldSelector`, plus `metadata.name=` for a single `nameSelector` name.
    pub field_selector: Option<String>,
}

/// `matchLabels` and `matchExpressions` as the API server's selector string (`app=echo,tier
/// in (a,b),!gone`).
pub fn selector_string(sel: &LabelSelector) -> String {
    let mut labels: Vec<String> = sel
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in &sel.match_expressions {
        labels.push(match e.operator.as_str() {
            "In" => format!("{} in ({})", e.key, e.values.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, e.values.join(",")),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    labels.join(",")
}

/// The selector of the namespaces a binding watches in (`namespace.labelSelector`), when it
/// has one: a Namespace watch with it keeps the set [`keeps`] filters with.
pub fn namespace_selector(binding: &KubernetesBinding) -> Option<String> {
    binding
        .namespace
        .as_ref()
        .and_then(|n| n.label_selector.as_ref())
        .map(selector_string)
}

/// The request of a binding. Several namespaces or several names are watched wider and
/// filtered with [`keeps`].
pub fn watch_request(binding: &KubernetesBinding) -> WatchRequest {
    let names = binding
        .namespace
        .as_ref()
        .and_then(|n| n.name_selector.as_ref())
        .map(|s| s.match_names.clone())
        .unwrap_or_default();
    let namespace = (names.len() == 1).then(|| names[0].clone());
    let labels = binding
        .label_selector
        .as_ref()
        .map(selector_string)
        .unwrap_or_default();
    let mut fields: Vec<String> = binding
        .field_selector
        .iter()
        .map(|f| {
            let op = match f.operator.as_str() {
                "!=" | "NotEquals" => "!=",
                "==" => "==",
                _ => "=",
            };
            format!("{}{op}{}", f.field, f.value)
        })
        .collect();
    if let Some(sel) = &binding.name_selector
        && sel.match_names.len() == 1
    {
        fields.push(format!("metadata.name={}", sel.match_names[0]));
    }
    WatchRequest {
        namespace,
        label_selector: (!labels.is_empty()).then_some(labels),
        field_selector: (!fields.is_empty()).then(|| fields.join(",")),
    }
}

/// Whether an object the watch returned belongs to the binding (the name and namespace lists
/// the request could not express).
pub fn keeps(
    binding: &KubernetesBinding,
    namespaces: Option<&BTreeSet<String>>,
    object: &Value,
) -> bool {
    let name = object.pointer("/metadata/name").and_then(Value::as_str);
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(sel) = &binding.name_selector
        && !sel.match_names.is_empty()
        && !name.is_some_and(|n| sel.match_names.iter().any(|m| m == n))
    {
        return false;
    }
    if let Some(names) = binding
        .namespace
        .as_ref()
        .and_then(|n| n.name_selector.as_ref())
        && !names.match_names.is_empty()
        && !names.match_names.iter().any(|m| m == namespace)
    {
        return false;
    }
    // `namespace.labelSelector`: only objects of the namespaces it matches now.
    if let Some(matching) = namespaces
        && !matching.contains(namespace)
    {
        return false;
    }
    true
}

/// An object that arrived through a watch: Added when the binding had not seen it.
pub fn applied_event(seen: bool) -> WatchEvent {
    if seen {
        WatchEvent::Modified
    } else {
        WatchEvent::Added
    }
}

/// The next time any schedule fires strictly after `after`, and which (hook index, binding
/// index) pairs fire then.
pub fn next_fire(
    schedules: &[(usize, usize, &ScheduleBinding)],
    after: &jiff::Zoned,
) -> Option<(jiff::Zoned, Vec<(usize, usize)>)> {
    let mut best: Option<(jiff::Zoned, Vec<(usize, usize)>)> = None;
    for (hook, index, s) in schedules {
        let Some(at) = s.next_after(after.clone()) else {
            continue;
        };
        match &mut best {
            Some((t, list)) if *t == at => list.push((*hook, *index)),
            Some((t, _)) if *t < at => {}
            _ => best = Some((at, vec![(*hook, *index)])),
        }
    }
    best
}

/// What follows a hook run outside the module run (kubernetes, schedule): a new module run
/// when the hook changed the module's values (addon-operator compares the values checksums).
pub fn rerun_module(before: &str, after: &str) -> bool {
    before != after
}

/// Whether a global hook run that changed the global values from `before` to `after` queues
/// a converge of every module: any binding but `beforeAll` (its converge runs the modules
/// next anyway), as addon-operator reloads all modules when global values change.
pub fn reconverge_after_global_hook(binding: &str, before: &str, after: &str) -> bool {
    before != after && binding != Phase::BeforeAll.binding()
}

/// How many times a module run renders again because its afterHelm hooks changed the values
/// (addon-operator renders once more when they did).
pub const AFTER_HELM_RERENDERS: usize = 1;

/// addon-operator's error of a hook whose process failed (`error` is the process's stderr, or
/// `cmd run: exit status 1` when it wrote none): `module hook '<hook>' failed: <error>`, or
/// `global hook '<hook>' failed: <error>` for a global hook.
pub fn hook_failure(global: bool, hook: &str, error: &str) -> String {
    let scope = if global { "global" } else { "module" };
    format!("{scope} hook '{hook}' failed: {error}")
}

/// The Module status of a module whose hooks failed, as Deckhouse's status reporter writes it
/// from addon-operator's hook errors (hook → its error, a hook that passed again removed):
/// the IsReady message is one failing hook's `<hook>: <error>` (here the latest to fail), and
/// `status.hooksState` lists every failing hook's `<hook>: <error>`, sorted, one per line.
/// `None` when no hook fails.
pub fn hook_errors_status(
    errors: &std::collections::BTreeMap<String, (u64, String)>,
) -> Option<(String, String)> {
    let (latest, (_, error)) = errors.iter().max_by_key(|(_, (at, _))| *at)?;
    let mut lines: Vec<String> = errors
        .iter()
        .map(|(h, (_, e))| format!("{h}: {e}"))
        .collect();
    lines.sort();
    Some((format!("{latest}: {error}"), lines.join("\n")))
}

/// A hook's `settings` (`executionMinInterval`, `executionBurst`) as shell-operator enforces
/// them: a token bucket refilled with one token per interval, holding at most `burst`, full at
/// the start; each run takes a token and waits until there is one. Times are offsets from any
/// fixed instant. Pure.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimit {
    interval: std::time::Duration,
    burst: f64,
    tokens: f64,
    last: std::time::Duration,
}

impl RateLimit {
    /// The bucket of a hook's settings (`None`: no settings, no limit).
    pub fn new(settings: Option<&module_hooks::config::Settings>) -> Option<Self> {
        let s = settings?;
        if s.execution_min_interval.is_zero() {
            return None;
        }
        let burst = f64::from(s.execution_burst.max(1));
        Some(Self {
            interval: s.execution_min_interval,
            burst,
            tokens: burst,
            last: std::time::Duration::ZERO,
        })
    }

    /// Takes a token for a run at `now`; how long the run waits for it.
    pub fn take(&mut self, now: std::time::Duration) -> std::time::Duration {
        let elapsed = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        let per = self.interval.as_secs_f64();
        self.tokens = (self.tokens + elapsed.as_secs_f64() / per).min(self.burst);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            std::time::Duration::ZERO
        } else {
            std::time::Duration::from_secs_f64(-self.tokens * per)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hook_error_counters_count_hook_tasks_as_addon_operator() {
        for (global, binding, want) in [
            (false, "kubernetes", true),
            (false, "schedule", true),
            (false, "onStartup", false),
            (false, "beforeHelm", false),
            (false, "afterHelm", false),
            (false, "afterDeleteHelm", false),
            (true, "onStartup", true),
            (true, "beforeAll", true),
            (true, "afterAll", true),
            (true, "kubernetes", true),
        ] {
            assert_eq!(
                super::counts_hook_errors(global, binding),
                want,
                "{global} {binding}"
            );
        }
        let config = module_hooks::HookConfig::parse(
            br#"{"configVersion": "v1", "beforeHelm": 10,
                "kubernetes": [{"name": "pods", "kind": "Pod"}],
                "schedule": [{"name": "every-minute", "crontab": "* * * * *"}]}"#,
            module_hooks::config::HookScope::Module,
        )
        .unwrap();
        for (binding, want) in [
            ("pods", "kubernetes"),
            ("every-minute", "schedule"),
            ("beforeHelm", "beforeHelm"),
        ] {
            assert_eq!(super::binding_type(&config, binding), want);
        }
        assert_eq!(super::activation(true), "OperatorStartup");
        assert_eq!(super::activation(false), "");
    }

    #[test]
    fn settings_throttle_runs() {
        use std::time::Duration;
        let settings = |interval: u64, burst: u32| module_hooks::config::Settings {
            execution_min_interval: Duration::from_secs(interval),
            execution_burst: burst,
        };
        assert_eq!(RateLimit::new(None), None);
        assert_eq!(RateLimit::new(Some(&settings(0, 3))), None);
        let s = Duration::from_secs;
        // (interval, burst, run times, waits)
        let rows: &[(u64, u32, &[u64], &[u64])] = &[
            // A burst of 2 passes at once, the third waits a whole interval.
            (10, 2, &[0, 0, 0], &[0, 0, 10]),
            // One every 10 s: a run 4 s after the last waits 6 s.
            (10, 1, &[0, 4], &[0, 6]),
            // Runs far apart never wait, and the bucket refills no further than the burst.
            (10, 2, &[0, 100, 100, 100], &[0, 0, 0, 10]),
        ];
        for (interval, burst, at, want) in rows {
            let mut limit = RateLimit::new(Some(&settings(*interval, *burst))).unwrap();
            let got: Vec<Duration> = at.iter().map(|t| limit.take(s(*t))).collect();
            let want: Vec<Duration> = want.iter().map(|w| s(*w)).collect();
            assert_eq!(got, want, "{interval}s x{burst} at {at:?}");
        }
    }

    use module_hooks::HookScope;
    use serde_json::json;

    use super::*;

    fn hook(name: &str, config: &str) -> Hook {
        Hook {
            name: name.into(),
            path: name.into(),
            kind: module_hooks::HookKind::Shell,
            module: None,
            config: HookConfig::parse(config.as_bytes(), HookScope::Module).unwrap(),
        }
    }

    #[test]
    fn hooks_by_phase_in_order() {
        let hooks = vec![
            hook("c", r#"{"configVersion":"v1","beforeHelm":10}"#),
            hook(
                "a",
                r#"{"configVersion":"v1","beforeHelm":10,"afterHelm":5}"#,
            ),
            hook("b", r#"{"configVersion":"v1","beforeHelm":1}"#),
            hook("d", r#"{"configVersion":"v1","onStartup":1}"#),
        ];
        let rows: &[(Phase, &[usize])] = &[
            (Phase::BeforeHelm, &[2, 1, 0]),
            (Phase::AfterHelm, &[1]),
            (Phase::OnStartup, &[3]),
            (Phase::AfterDeleteHelm, &[]),
        ];
        for (phase, want) in rows {
            assert_eq!(hooks_for(&hooks, *phase), *want, "{phase:?}");
        }
        assert_eq!(Phase::AfterDeleteHelm.binding(), "afterDeleteHelm");
    }

    fn binding(k: &str) -> KubernetesBinding {
        let h = hook(
            "h",
            &format!(r#"{{"configVersion":"v1","kubernetes":[{k}]}}"#),
        );
        h.config.kubernetes[0].clone()
    }

    #[test]
    fn watch_requests_and_filters() {
        let one = binding(
            r#"{"apiVersion":"v1","kind":"ConfigMap","nameSelector":{"matchNames":["x"]},
               "namespace":{"nameSelector":{"matchNames":["d8-echo"]}},
               "labelSelector":{"matchLabels":{"app":"echo"},
                 "matchExpressions":[{"key":"tier","operator":"In","values":["a","b"]},{"key":"gone","operator":"DoesNotExist"}]}}"#,
        );
        assert_eq!(
            watch_request(&one),
            WatchRequest {
                namespace: Some("d8-echo".into()),
                label_selector: Some("app=echo,tier in (a,b),!gone".into()),
                field_selector: Some("metadata.name=x".into()),
            }
        );
        let many = binding(
            r#"{"kind":"ConfigMap","nameSelector":{"matchNames":["x","y"]},
               "namespace":{"nameSelector":{"matchNames":["a","b"]}}}"#,
        );
        assert_eq!(
            watch_request(&many),
            WatchRequest {
                namespace: None,
                label_selector: None,
                field_selector: None
            }
        );
        let obj = |ns: &str, name: &str| json!({"metadata": {"namespace": ns, "name": name}});
        let rows = [
            (obj("a", "x"), true),
            (obj("b", "y"), true),
            (obj("c", "x"), false),
            (obj("a", "z"), false),
        ];
        for (o, want) in rows {
            assert_eq!(keeps(&many, None, &o), want, "{o}");
        }
        let all = binding(r#"{"kind":"Pod"}"#);
        assert!(keeps(&all, None, &obj("any", "thing")));
        // namespace.labelSelector: the objects of the namespaces the selector matches now.
        let labelled = binding(
            r#"{"kind":"ConfigMap","namespace":{"labelSelector":{"matchLabels":{"watch":"yes"},
               "matchExpressions":[{"key":"tier","operator":"NotIn","values":["x"]}]}}}"#,
        );
        assert_eq!(
            namespace_selector(&labelled).as_deref(),
            Some("watch=yes,tier notin (x)")
        );
        assert_eq!(watch_request(&labelled).namespace, None);
        assert_eq!(namespace_selector(&all), None);
        let matching: BTreeSet<String> = ["a".to_owned(), "b".to_owned()].into();
        let rows = [
            (obj("a", "x"), Some(&matching), true),
            (obj("b", "y"), Some(&matching), true),
            (obj("c", "x"), Some(&matching), false),
            (obj("c", "x"), None, true),
            (
                json!({"metadata": {"name": "cluster-wide"}}),
                Some(&matching),
                false,
            ),
        ];
        for (o, set, want) in rows {
            assert_eq!(keeps(&labelled, set, &o), want, "{o} {set:?}");
        }
        let empty = BTreeSet::new();
        assert!(!keeps(&labelled, Some(&empty), &obj("a", "x")));
        assert_eq!(applied_event(false), WatchEvent::Added);
        assert_eq!(applied_event(true), WatchEvent::Modified);
    }

    #[test]
    fn schedules_fire_together() {
        let h = hook(
            "h",
            r#"{"configVersion":"v1","schedule":[
                {"name":"every5s","crontab":"*/5 * * * * *"},
                {"name":"every10s","crontab":"*/10 * * * * *"},
                {"name":"minute","crontab":"* * * * *"}]}"#,
        );
        let s: Vec<(usize, usize, &ScheduleBinding)> = h
            .config
            .schedules
            .iter()
            .enumerate()
            .map(|(i, b)| (0, i, b))
            .collect();
        let at = |t: &str| -> jiff::Zoned { format!("{t}[UTC]").parse().unwrap() };
        let rows = [
            (
                "2026-01-01T00:00:01+00:00",
                "2026-01-01T00:00:05+00:00",
                vec![(0, 0)],
            ),
            (
                "2026-01-01T00:00:05+00:00",
                "2026-01-01T00:00:10+00:00",
                vec![(0, 0), (0, 1)],
            ),
            (
                "2026-01-01T00:00:59+00:00",
                "2026-01-01T00:01:00+00:00",
                vec![(0, 0), (0, 1), (0, 2)],
            ),
        ];
        for (from, when, which) in rows {
            let (t, fired) = next_fire(&s, &at(from)).unwrap();
            assert_eq!(t, at(when), "{from}");
            assert_eq!(fired, which, "{from}");
        }
        assert!(next_fire(&[], &at("2026-01-01T00:00:00+00:00")).is_none());
    }

    #[test]
    fn follow_ups_and_words() {
        assert!(rerun_module("a", "b"));
        assert!(!rerun_module("a", "a"));
        assert_eq!(
            hook_failure(false, "echo/hooks/fail.sh", "cmd run: exit status 1"),
            "module hook 'echo/hooks/fail.sh' failed: cmd run: exit status 1"
        );
        assert_eq!(
            hook_failure(true, "discovery.sh", "boom"),
            "global hook 'discovery.sh' failed: boom"
        );
        let rows = [
            ("kubernetes", "a", "b", true),
            ("schedule", "a", "b", true),
            ("afterAll", "a", "b", true),
            ("onStartup", "a", "b", true),
            ("beforeAll", "a", "b", false),
            ("kubernetes", "a", "a", false),
        ];
        for (binding, before, after, want) in rows {
            assert_eq!(
                reconverge_after_global_hook(binding, before, after),
                want,
                "{binding}"
            );
        }
        assert_eq!(Phase::of_binding("afterAll"), Some(Phase::AfterAll));
        assert_eq!(Phase::of_binding("kubernetes-x"), None);
    }

    #[test]
    fn hook_errors_on_the_module_status() {
        let mut errors = std::collections::BTreeMap::new();
        assert_eq!(hook_errors_status(&errors), None);
        errors.insert(
            "hooked/hooks/b.sh".to_owned(),
            (2, "module hook 'hooked/hooks/b.sh' failed: two".to_owned()),
        );
        errors.insert(
            "hooked/hooks/a.sh".to_owned(),
            (1, "module hook 'hooked/hooks/a.sh' failed: one".to_owned()),
        );
        let (message, state) = hook_errors_status(&errors).unwrap();
        assert_eq!(
            message,
            "hooked/hooks/b.sh: module hook 'hooked/hooks/b.sh' failed: two"
        );
        assert_eq!(
            state,
            "hooked/hooks/a.sh: module hook 'hooked/hooks/a.sh' failed: one\nhooked/hooks/b.sh: module hook 'hooked/hooks/b.sh' failed: two"
        );
    }
}
