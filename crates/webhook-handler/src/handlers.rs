//! Handlers built from webhook objects, and how they answer a review.

use crate::answer::{self, Decision};
use crate::cel;
use crate::contexts::Contexts;
use crate::metrics::{Metrics, Outcome};
use crate::render;
use module_hooks::{BindingContext, Hook, HookKind, Runner, RunnerOptions};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// How a handler runs.
enum Exec {
    Python { runner: Runner, hook: Box<Hook> },
    Cel(Vec<cel::Rule>),
}

/// A ValidationWebhook's handler.
pub(crate) struct Validator {
    pub(crate) webhook: String,
    /// The hook's file under the hooks directory (the `hook` label of its metrics).
    hook_file: String,
    exec: Exec,
    include: Vec<String>,
    contexts: Contexts,
}

/// A ConversionWebhook's handler.
pub(crate) struct Converter {
    group: String,
    /// The hook's file under the hooks directory (the `hook` label of its metrics).
    hook_file: String,
    pairs: Vec<(String, String)>,
    runner: Runner,
    hook: Box<Hook>,
    include: Vec<String>,
    contexts: Contexts,
}

/// How long a Python handler may run: the webhook's timeout less a margin, so the answer (a
/// 500 that the API server's `failurePolicy` decides on) arrives before the API server gives up.
pub(crate) fn kill_after(timeout_seconds: u64) -> Duration {
    let t = Duration::from_secs(timeout_seconds.clamp(1, 30));
    t - (t / 4).min(Duration::from_secs(1))
}

/// Writes a hook file (mode 0755) and makes the runner for it.
fn python_hook(
    dir: &Path,
    rel: &str,
    text: &str,
    config: module_hooks::HookConfig,
    timeout: Duration,
) -> Result<(Runner, Box<Hook>), String> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(rel);
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let runner = Runner::new(
        RunnerOptions {
            tmp_dir: dir.join("tmp"),
            timeout,
            ..RunnerOptions::default()
        },
        None,
    );
    let hook = Hook {
        name: rel.to_string(),
        path,
        kind: HookKind::Python { venv: None },
        module: None,
        config,
    };
    Ok((runner, Box::new(hook)))
}

fn snapshots_json(contexts: &Contexts, include: &[String]) -> Result<Value, String> {
    let monitors = contexts.monitors()?;
    Ok(Value::Object(
        include
            .iter()
            .map(|n| {
                let items = monitors
                    .get(n)
                    .map(|m| m.snapshot().iter().map(|o| o.to_json()).collect())
                    .unwrap_or_default();
                (n.clone(), Value::Array(items))
            })
            .collect(),
    ))
}

impl Validator {
    /// Builds the handler of a ValidationWebhook; the error says why it cannot serve.
    pub(crate) async fn build(
        client: &kube::Client,
        hooks_dir: &Path,
        vw: &Value,
    ) -> Result<Self, String> {
        let webhook = vw
            .pointer("/validationObject/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if webhook.split('.').filter(|p| !p.is_empty()).count() < 3 {
            return Err(format!(
                "validationObject.name {webhook:?} must be a domain with at least three segments separated by dots"
            ));
        }
        let config = render::bindings(vw)?;
        let include =
            render::snapshot_names(vw, vw.pointer("/validationObject/includeSnapshotsFrom"));
        let hook_file = render::validating_hook_file(
            vw.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        let timeout = vw
            .pointer("/validationObject/timeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(10);
        let exec = match (
            vw.pointer("/handler/python").and_then(Value::as_str),
            vw.pointer("/handler/cel").and_then(Value::as_str),
        ) {
            (Some(_), _) => {
                let (runner, hook) = python_hook(
                    hooks_dir,
                    &hook_file,
                    &render::validation_hook(vw),
                    config.clone(),
                    kill_after(timeout),
                )?;
                Exec::Python { runner, hook }
            }
            (None, Some(text)) => Exec::Cel(cel::compile(text)?),
            (None, None) => return Err("handler: either python or cel is required".into()),
        };
        let contexts = Contexts::start(client, &config.kubernetes).await?;
        Ok(Self {
            webhook,
            hook_file,
            exec,
            include,
            contexts,
        })
    }

    /// Answers one AdmissionReview request, counting the run in `metrics`.
    pub(crate) async fn decide(&self, review: &Value, metrics: &Metrics) -> Decision {
        let started = Instant::now();
        let (decision, outcome) = self.run(review).await;
        metrics.hook_run(&self.hook_file, &self.webhook, started.elapsed(), outcome);
        decision
    }

    async fn run(&self, review: &Value) -> (Decision, Outcome) {
        match &self.exec {
            Exec::Python { runner, hook } => {
                let monitors = match self.contexts.monitors() {
                    Ok(m) => m,
                    Err(e) => {
                        let message = format!("Hook failed: {e}");
                        return (Decision::Deny { message }, Outcome::Error);
                    }
                };
                let ctx = BindingContext::validating(&self.webhook, &self.include, review.clone())
                    .with_snapshots(&monitors);
                let result = runner.run(hook, &[ctx], &json!({}), &json!({})).await;
                let outcome = match &result {
                    Ok(_) => Outcome::Success,
                    Err(_) => Outcome::Error,
                };
                (answer::from_hook(result), outcome)
            }
            Exec::Cel(rules) => {
                let snapshots = match snapshots_json(&self.contexts, &self.include) {
                    Ok(s) => s,
                    Err(e) => {
                        let message = format!("Internal webhook error: {e}");
                        return (Decision::Deny { message }, Outcome::Error);
                    }
                };
                let request = review.get("request").cloned().unwrap_or(Value::Null);
                match cel::evaluate(rules, &request, &snapshots) {
                    cel::Verdict::Allow => (
                        Decision::Allow {
                            warnings: Vec::new(),
                        },
                        Outcome::Success,
                    ),
                    cel::Verdict::Deny(message) => (Decision::Deny { message }, Outcome::Success),
                    cel::Verdict::Error(e) => (
                        Decision::Deny {
                            message: format!("Internal webhook error: {e}"),
                        },
                        Outcome::Error,
                    ),
                }
            }
        }
    }
}

impl Converter {
    /// Builds the handler of a ConversionWebhook; the error says why it cannot serve.
    pub(crate) async fn build(
        client: &kube::Client,
        hooks_dir: &Path,
        cw: &Value,
    ) -> Result<Self, String> {
        let crd = cw
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let group = render::crd_group(crd).to_string();
        if group.is_empty() {
            return Err(format!(
                "metadata.name {crd:?} must name a CRD (<plural>.<group>)"
            ));
        }
        let pairs: Vec<(String, String)> = cw
            .get("conversions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let f = |k: &str| {
                    c.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                (f("from"), f("to"))
            })
            .collect();
        if pairs.is_empty() {
            return Err("conversions: at least one conversion is required".into());
        }
        let config = render::bindings(cw)?;
        let include = render::snapshot_names(cw, None);
        let hook_file = render::conversion_hook_file(crd);
        let (runner, hook) = python_hook(
            hooks_dir,
            &hook_file,
            &render::conversion_hook(cw),
            config.clone(),
            Duration::from_secs(25),
        )?;
        let contexts = Contexts::start(client, &config.kubernetes).await?;
        Ok(Self {
            group,
            hook_file,
            pairs,
            runner,
            hook,
            include,
            contexts,
        })
    }

    /// Converts the objects of a ConversionReview request to `desiredAPIVersion`, counting each
    /// step's run in `metrics`.
    pub(crate) async fn convert(
        &self,
        request: &Value,
        metrics: &Metrics,
    ) -> Result<Vec<Value>, String> {
        let desired = request
            .get("desiredAPIVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let to = desired.rsplit('/').next().unwrap_or_default();
        let mut objects: Vec<Value> = request
            .get("objects")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let monitors = self.contexts.monitors()?;
        for _ in 0..8 {
            let Some(from) = objects
                .iter()
                .filter_map(|o| o.get("apiVersion").and_then(Value::as_str))
                .find(|v| *v != desired)
                .map(|v| v.rsplit('/').next().unwrap_or_default().to_string())
            else {
                return Ok(objects);
            };
            let steps = answer::chain(&self.pairs, &from, to)
                .ok_or_else(|| format!("Conversion to {desired} was not successuful"))?;
            for (a, b) in steps {
                let review = json!({"request": {
                    "uid": request.get("uid"),
                    "desiredAPIVersion": format!("{}/{b}", self.group),
                    "objects": objects,
                }});
                let binding = render::conversion_name(&a, &b);
                let ctx = BindingContext::conversion(
                    &binding,
                    &self.include,
                    &format!("{}/{a}", self.group),
                    &format!("{}/{b}", self.group),
                    review,
                )
                .with_snapshots(&monitors);
                let started = Instant::now();
                let result = self
                    .runner
                    .run(&self.hook, &[ctx], &json!({}), &json!({}))
                    .await;
                let outcome = match &result {
                    Ok(_) => Outcome::Success,
                    Err(_) => Outcome::Error,
                };
                metrics.hook_run(&self.hook_file, &binding, started.elapsed(), outcome);
                let out =
                    result.map_err(|e| format!("Hook failed to convert to {desired}: {e}"))?;
                let resp = out.conversion_response.unwrap_or(Value::Null);
                if let Some(m) = resp.get("failedMessage").and_then(Value::as_str) {
                    return Err(m.to_string());
                }
                objects = resp
                    .get("convertedObjects")
                    .and_then(Value::as_array)
                    .cloned()
                    .ok_or_else(|| {
                        format!("Hook failed to convert to {desired}: no conversion response")
                    })?;
            }
        }
        Err(format!("Conversion to {desired} was not successuful"))
    }
}
