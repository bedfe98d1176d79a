//! The handler's metrics, with shell-operator's names, types and labels (Deckhouse's
//! `webhook-handler` is a shell-operator; `{PREFIX}` is its default, `shell_operator_`):
//!
//! - `shell_operator_live_ticks` (counter, no `_total`): +1 every 10 seconds while the handler
//!   runs;
//! - `shell_operator_tasks_queue_length{queue}` (gauge): shell-operator's `main` queue, always
//!   empty here — webhook hooks run at once, in no queue, as shell-operator runs them;
//! - `shell_operator_hook_run_seconds{hook, binding, queue}` (histogram, shell-operator's
//!   buckets): one observation per hook run — one per AdmissionReview of a ValidationWebhook,
//!   one per conversion step of a ConversionReview;
//! - `shell_operator_hook_run_success_total`, `shell_operator_hook_run_errors_total` and
//!   `shell_operator_hook_run_allowed_errors_total{hook, binding, queue}` (counters): the run's
//!   outcome. A hook that denies a request ran successfully; one that crashed, timed out or
//!   whose CEL rules could not be evaluated is an error. Webhook bindings have no
//!   `allowFailure`, so the allowed errors stay 0, as in shell-operator;
//! - `shell_operator_task_wait_in_queue_seconds_total{hook, binding, queue}` (counter): 0 for
//!   every run, as the runs wait in no queue.
//!
//! `hook` is the hook file under the hooks directory (`<object>/webhooks/validating/<object>.py`,
//! `<crd>/webhooks/conversion/<crd>.py`), `binding` the binding's name (the ValidationWebhook's
//! `validationObject.name`, `<from>_to_<to>` of a conversion), `queue` empty: shell-operator
//! gives a webhook binding no queue.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use release_controller::metrics::BareCounter;

type Labels = Vec<(&'static str, String)>;
type Seconds = Counter<f64, AtomicU64>;

/// How often `shell_operator_live_ticks` grows (shell-operator's tick).
pub const LIVE_TICK: Duration = Duration::from_secs(10);

/// shell-operator's metric name prefix.
const PREFIX: &str = "shell_operator_";

/// shell-operator's buckets of `hook_run_seconds`.
const HOOK_RUN_BUCKETS: [f64; 15] = [
    0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0,
];

fn hook_run_histogram() -> Histogram {
    Histogram::new(HOOK_RUN_BUCKETS)
}

/// How a hook run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It ran and answered (allowing, denying or converting).
    Success,
    /// It failed: a crash, a timeout, no answer, rules that could not be evaluated.
    Error,
}

/// Every family of the handler (cheap to clone: families are shared).
#[derive(Clone, Debug)]
pub struct Metrics {
    live_ticks: BareCounter,
    queue_length: Family<Labels, Gauge>,
    run_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    success: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    allowed_errors: Family<Labels, Counter>,
    waited: Family<Labels, Seconds>,
}

impl Default for Metrics {
    fn default() -> Self {
        let metrics = Self {
            live_ticks: BareCounter::default(),
            queue_length: Family::default(),
            run_seconds: Family::new_with_constructor(hook_run_histogram),
            success: Family::default(),
            errors: Family::default(),
            allowed_errors: Family::default(),
            waited: Family::default(),
        };
        metrics
            .queue_length
            .get_or_create(&vec![("queue", "main".to_owned())])
            .set(0);
        metrics
    }
}

impl Metrics {
    /// Registers every family.
    pub fn register(&self, registry: &mut Registry) {
        let name = |n: &str| format!("{PREFIX}{n}");
        registry.register(
            name("live_ticks"),
            "Counter that increases every 10 seconds to indicate the handler is alive",
            self.live_ticks.clone(),
        );
        registry.register(
            name("tasks_queue_length"),
            "Gauge showing the length of the task queue",
            self.queue_length.clone(),
        );
        registry.register(
            name("hook_run_seconds"),
            "Histogram of hook execution times in seconds",
            self.run_seconds.clone(),
        );
        // prometheus-client appends `_total` to a counter's samples.
        registry.register(
            name("hook_run_success"),
            "Counter of successful hook executions",
            self.success.clone(),
        );
        registry.register(
            name("hook_run_errors"),
            "Counter of hook execution errors (allowFailure: false)",
            self.errors.clone(),
        );
        registry.register(
            name("hook_run_allowed_errors"),
            "Counter of hook execution errors that are allowed to fail (allowFailure: true)",
            self.allowed_errors.clone(),
        );
        registry.register(
            name("task_wait_in_queue_seconds"),
            "Counter of seconds that hooks waited in queue before execution",
            self.waited.clone(),
        );
    }

    /// The exposition text of every family.
    pub fn encode(&self) -> String {
        release_controller::metrics::text(|r| self.register(r))
    }

    /// The live ticks (the handler ticks them every [`LIVE_TICK`]).
    pub fn live_ticks(&self) -> &BareCounter {
        &self.live_ticks
    }

    /// Records one run of `hook` for `binding` that took `took` and ended as `outcome`.
    pub fn hook_run(&self, hook: &str, binding: &str, took: Duration, outcome: Outcome) {
        let labels = vec![
            ("hook", hook.to_owned()),
            ("binding", binding.to_owned()),
            ("queue", String::new()),
        ];
        self.run_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        self.waited.get_or_create(&labels).inc_by(0.0);
        self.allowed_errors.get_or_create(&labels).inc_by(0);
        let (hit, other) = match outcome {
            Outcome::Success => (&self.success, &self.errors),
            Outcome::Error => (&self.errors, &self.success),
        };
        hit.get_or_create(&labels).inc();
        other.get_or_create(&labels).inc_by(0);
    }

    /// Ticks `live_ticks` every [`LIVE_TICK`] until the task is dropped.
    pub async fn tick(self) {
        loop {
            self.live_ticks.inc();
            tokio::time::sleep(LIVE_TICK).await;
        }
    }
}

/// Serves `/metrics` (and `/healthz`) over plain HTTP on `listener` (the loopback address the
/// chart's `kube-rbac-proxy` sidecar forwards to) until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, metrics: Metrics) {
    use axum::http::StatusCode;
    use axum::response::IntoResponse as _;
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [("content-type", "text/plain; version=0.0.4")],
                        metrics.encode(),
                    )
                }
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .fallback(|| async { StatusCode::NOT_FOUND.into_response() });
    let service = move |_: http_serve::Connection| {
        let app = app.clone();
        hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
            use tower::ServiceExt as _;
            app.clone().oneshot(request)
        })
    };
    http_serve::serve(
        listener,
        None,
        http_serve::Bounds::default(),
        service,
        std::future::pending(),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_counted_with_shell_operators_names_and_labels() {
        let m = Metrics::default();
        let hook = "w/webhooks/validating/w.py";
        m.hook_run(
            hook,
            "w.example.io",
            Duration::from_millis(30),
            Outcome::Success,
        );
        m.hook_run(
            hook,
            "w.example.io",
            Duration::from_millis(30),
            Outcome::Error,
        );
        m.live_ticks().inc();
        let text = m.encode();
        let labels = r#"{hook="w/webhooks/validating/w.py",binding="w.example.io",queue=""}"#;
        for line in [
            "# TYPE shell_operator_live_ticks counter".to_owned(),
            "shell_operator_live_ticks 1".to_owned(),
            r#"shell_operator_tasks_queue_length{queue="main"} 0"#.to_owned(),
            "# TYPE shell_operator_hook_run_seconds histogram".to_owned(),
            format!("shell_operator_hook_run_seconds_count{labels} 2"),
            format!(
                "shell_operator_hook_run_seconds_bucket{{le=\"0.05\",hook=\"{hook}\",binding=\"w.example.io\",queue=\"\"}} 2"
            ),
            format!(
                "shell_operator_hook_run_seconds_bucket{{le=\"0.02\",hook=\"{hook}\",binding=\"w.example.io\",queue=\"\"}} 0"
            ),
            format!("shell_operator_hook_run_success_total{labels} 1"),
            format!("shell_operator_hook_run_errors_total{labels} 1"),
            format!("shell_operator_hook_run_allowed_errors_total{labels} 0"),
            format!("shell_operator_task_wait_in_queue_seconds_total{labels} 0.0"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }
}
