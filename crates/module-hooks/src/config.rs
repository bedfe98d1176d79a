//! A hook's `--config` answer parsed into typed bindings, with shell-operator's defaults and
//! its error messages (the OpenAPI check of the document first, then the cross-field checks).
//!
//! Pure: bytes in, [`HookConfig`] or [`ConfigError`] out.

mod check;
mod sdk;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

pub use sdk::{BatchHookConfig, batch_configs};

use crate::duration::parse_go_duration;
use crate::jq::JqProgram;

/// The name of the default queue.
pub const MAIN_QUEUE: &str = "main";

/// Which schema version the hook declared (`configVersion`; absent means v0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigVersion {
    V0,
    V1,
}

impl ConfigVersion {
    /// As written in `configVersion`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0 => "v0",
            Self::V1 => "v1",
        }
    }
}

/// Module hooks may declare the helm bindings, global hooks `beforeAll` / `afterAll`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookScope {
    Module,
    Global,
}

/// The events of a `kubernetes` binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum WatchEvent {
    Added,
    Modified,
    Deleted,
}

impl WatchEvent {
    pub const ALL: [WatchEvent; 3] = [Self::Added, Self::Modified, Self::Deleted];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "Added",
            Self::Modified => "Modified",
            Self::Deleted => "Deleted",
        }
    }
}

/// `matchNames` of a name selector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NameSelector {
    pub match_names: Vec<String>,
}

/// A Kubernetes label selector, kept as written (`matchLabels`, `matchExpressions`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector {
    pub match_labels: Vec<(String, String)>,
    pub match_expressions: Vec<LabelRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    /// `=`, `==`, `Equals`, `!=` or `NotEquals`.
    pub operator: String,
    pub value: String,
}

/// `namespace:` of a `kubernetes` binding.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NamespaceSelector {
    pub name_selector: Option<NameSelector>,
    pub label_selector: Option<LabelSelector>,
}

/// One `schedule` binding.
#[derive(Debug, Clone)]
pub struct ScheduleBinding {
    /// `name`, or `schedule` when unnamed.
    pub name: String,
    pub crontab: String,
    pub cron: croner::Cron,
    pub allow_failure: bool,
    pub queue: String,
    /// Explicit `includeSnapshotsFrom`, merged with the kubernetes bindings of its group.
    pub include_snapshots_from: Vec<String>,
    pub group: Option<String>,
}

impl ScheduleBinding {
    /// The first time strictly after `after` at which the schedule fires.
    pub fn next_after(&self, after: jiff::Zoned) -> Option<jiff::Zoned> {
        self.cron.find_next_occurrence(&after, false).ok()
    }
}

/// One `kubernetes` binding.
#[derive(Debug, Clone)]
pub struct KubernetesBinding {
    /// `name`, or `kubernetes` when unnamed (`onKubernetesEvent` in v0).
    pub name: String,
    pub api_version: Option<String>,
    pub kind: String,
    pub name_selector: Option<NameSelector>,
    pub label_selector: Option<LabelSelector>,
    pub field_selector: Vec<FieldRequirement>,
    pub namespace: Option<NamespaceSelector>,
    pub jq_filter: Option<JqProgram>,
    /// The events that run the hook (all three unless `executeHookOnEvent` says otherwise).
    pub execute_hook_on_event: Vec<WatchEvent>,
    pub execute_hook_on_synchronization: bool,
    /// Only a named queue may opt out; in `main` it is always true.
    pub wait_for_synchronization: bool,
    pub keep_full_objects_in_memory: bool,
    pub allow_failure: bool,
    pub queue: String,
    pub include_snapshots_from: Vec<String>,
    pub group: Option<String>,
    pub resynchronization_period: Option<String>,
}

/// `settings:`: the token bucket that throttles executions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub execution_min_interval: std::time::Duration,
    pub execution_burst: u32,
}

/// The typed configuration of one hook.
#[derive(Debug, Clone)]
pub struct HookConfig {
    pub version: ConfigVersion,
    pub on_startup: Option<f64>,
    pub before_helm: Option<f64>,
    pub after_helm: Option<f64>,
    pub after_delete_helm: Option<f64>,
    pub before_all: Option<f64>,
    pub after_all: Option<f64>,
    pub schedules: Vec<ScheduleBinding>,
    pub kubernetes: Vec<KubernetesBinding>,
    pub settings: Option<Settings>,
}

/// A `--config` answer that shell-operator would refuse; the message is its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl HookConfig {
    /// Parses what a hook printed for `--config` (YAML or JSON).
    pub fn parse(output: &[u8], scope: HookScope) -> Result<Self, ConfigError> {
        let doc = parse_document(output)?;
        let version = detect_version(&doc)?;
        check::validate_schema(&doc, version, scope)?;
        convert(&doc, version)
    }

    /// The kubernetes binding named `name`.
    pub fn kubernetes_binding(&self, name: &str) -> Option<&KubernetesBinding> {
        self.kubernetes.iter().find(|b| b.name == name)
    }

    /// A short description for logs: `onStartup, beforeHelm, kubernetes(pods), …`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (name, v) in [
            ("onStartup", self.on_startup),
            ("beforeHelm", self.before_helm),
            ("afterHelm", self.after_helm),
            ("afterDeleteHelm", self.after_delete_helm),
            ("beforeAll", self.before_all),
            ("afterAll", self.after_all),
        ] {
            if v.is_some() {
                parts.push(name.to_owned());
            }
        }
        parts.extend(
            self.schedules
                .iter()
                .map(|s| format!("schedule({})", s.name)),
        );
        parts.extend(
            self.kubernetes
                .iter()
                .map(|k| format!("kubernetes({})", k.name)),
        );
        parts.join(", ")
    }
}

/// YAML or JSON into a JSON object.
pub(crate) fn parse_document(output: &[u8]) -> Result<Map<String, Value>, ConfigError> {
    let text = String::from_utf8_lossy(output);
    let value: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(_) => serde_saphyr::from_str(&text)
            .map_err(|e| ConfigError::new(format!("json unmarshal: {e}")))?,
    };
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => Err(ConfigError::new(format!(
            "json unmarshal: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_type(&other)
        ))),
    }
}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn detect_version(doc: &Map<String, Value>) -> Result<ConfigVersion, ConfigError> {
    match doc.get("configVersion") {
        None => Ok(ConfigVersion::V0),
        Some(Value::Null) => Err(ConfigError::new(
            "config version: missing 'configVersion' value",
        )),
        Some(Value::String(s)) if s == "v1" => Ok(ConfigVersion::V1),
        Some(Value::String(s)) if s == "v0" => Ok(ConfigVersion::V0),
        Some(Value::String(s)) => Err(ConfigError::new(format!(
            "config version: 'configVersion' value '{s}' is unsupported"
        ))),
        Some(_) => Err(ConfigError::new(
            "config version: string value is expected for key 'configVersion'",
        )),
    }
}

fn order(doc: &Map<String, Value>, key: &str) -> Option<f64> {
    doc.get(key).and_then(Value::as_f64)
}

fn string(v: &Map<String, Value>, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn flag(v: &Map<String, Value>, key: &str, default: bool) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(default)
}

fn convert(doc: &Map<String, Value>, version: ConfigVersion) -> Result<HookConfig, ConfigError> {
    let settings = match doc.get("settings").and_then(Value::as_object) {
        Some(s) => Some(convert_settings(s)?),
        None => None,
    };
    let mut kubernetes = Vec::new();
    let mut schedules = Vec::new();
    match version {
        ConfigVersion::V1 => {
            for (i, raw) in doc
                .get("kubernetes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let raw = raw.as_object().cloned().unwrap_or_default();
                kubernetes.push(convert_kubernetes_v1(&raw).map_err(|e| {
                    ConfigError::new(format!("invalid kubernetes config [{i}]: {e}"))
                })?);
            }
            for (i, k) in kubernetes.iter().enumerate() {
                check_includes(&kubernetes, &k.include_snapshots_from).map_err(|e| {
                    ConfigError::new(format!(
                        "invalid kubernetes config [{i}]: includeSnapshots {e}"
                    ))
                })?;
            }
            for (i, raw) in doc
                .get("schedule")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let raw = raw.as_object().cloned().unwrap_or_default();
                schedules.push(convert_schedule(&raw, &kubernetes, true).map_err(|e| {
                    ConfigError::new(format!("invalid schedule config [{i}]: {e}"))
                })?);
            }
        }
        ConfigVersion::V0 => {
            for (i, raw) in doc
                .get("schedule")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let raw = raw.as_object().cloned().unwrap_or_default();
                schedules.push(convert_schedule(&raw, &[], false).map_err(|e| {
                    ConfigError::new(format!("invalid schedule config [{i}]: {e}"))
                })?);
            }
            for raw in doc
                .get("onKubernetesEvent")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let raw = raw.as_object().cloned().unwrap_or_default();
                kubernetes.push(convert_kubernetes_v0(&raw)?);
            }
        }
    }
    merge_group_snapshots(&mut kubernetes, &mut schedules);
    Ok(HookConfig {
        version,
        on_startup: order(doc, "onStartup"),
        before_helm: order(doc, "beforeHelm"),
        after_helm: order(doc, "afterHelm"),
        after_delete_helm: order(doc, "afterDeleteHelm"),
        before_all: order(doc, "beforeAll"),
        after_all: order(doc, "afterAll"),
        schedules,
        kubernetes,
        settings,
    })
}

fn convert_settings(s: &Map<String, Value>) -> Result<Settings, ConfigError> {
    let interval_raw = match s.get("executionMinInterval") {
        Some(Value::String(v)) => v.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let mut errors = Vec::new();
    let interval = match parse_go_duration(&interval_raw) {
        Ok(d) => Some(d),
        Err(e) => {
            errors.push(format!("executionMinInterval is invalid: {e}"));
            None
        }
    };
    let burst = match s.get("executionBurst") {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Some(Value::String(v)) => v.parse::<u32>().ok(),
        _ => None,
    };
    if burst.is_none() {
        // shell-operator names the wrong field here; its words are kept.
        errors.push(format!(
            "executionMinInterval is invalid: strconv.ParseInt: parsing \"{}\": invalid syntax",
            s.get("executionBurst")
                .map(|v| v
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string()))
                .unwrap_or_default()
        ));
    }
    match (interval, burst) {
        (Some(execution_min_interval), Some(execution_burst)) if errors.is_empty() => {
            Ok(Settings {
                execution_min_interval,
                execution_burst,
            })
        }
        _ => Err(ConfigError::new(multierror(&errors))),
    }
}

/// hashicorp/go-multierror's rendering, as shell-operator prints it.
pub(crate) fn multierror(errors: &[String]) -> String {
    if errors.len() == 1 {
        return format!("1 error occurred:\n\t* {}\n\n", errors[0]);
    }
    let mut out = format!("{} errors occurred:\n", errors.len());
    for e in errors {
        out.push_str(&format!("\t* {e}\n"));
    }
    out.push('\n');
    out
}

fn parse_name_selector(v: Option<&Value>) -> Option<NameSelector> {
    let v = v?.as_object()?;
    Some(NameSelector {
        match_names: strings(v.get("matchNames")),
    })
}

fn parse_label_selector(v: Option<&Value>) -> Option<LabelSelector> {
    let v = v?.as_object()?;
    let match_labels = v
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let match_expressions = v
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .map(|e| LabelRequirement {
            key: string(e, "key").unwrap_or_default(),
            operator: string(e, "operator").unwrap_or_default(),
            values: strings(e.get("values")),
        })
        .collect();
    Some(LabelSelector {
        match_labels,
        match_expressions,
    })
}

fn convert_kubernetes_v1(raw: &Map<String, Value>) -> Result<KubernetesBinding, String> {
    let mut errors = Vec::new();
    let api_version = string(raw, "apiVersion");
    if let Some(av) = &api_version
        && (av.split('/').count() > 2 || av.starts_with('/') || av.ends_with('/'))
    {
        errors.push("apiVersion is invalid".to_owned());
    }
    let label_selector = parse_label_selector(raw.get("labelSelector"));
    if let Some(ls) = &label_selector {
        for e in &ls.match_expressions {
            if let Err(msg) = check::label_requirement(e) {
                errors.push(format!("labelSelector is invalid: {msg}"));
            }
        }
    }
    let field_selector: Vec<FieldRequirement> = raw
        .get("fieldSelector")
        .and_then(|f| f.get("matchExpressions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .map(|e| FieldRequirement {
            field: string(e, "field").unwrap_or_default(),
            operator: string(e, "operator").unwrap_or_default(),
            value: e
                .get("value")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        })
        .collect();
    let name_selector = parse_name_selector(raw.get("nameSelector"));
    if name_selector
        .as_ref()
        .is_some_and(|n| !n.match_names.is_empty())
    {
        for f in &field_selector {
            if f.field == "metadata.name" {
                errors.push(
                    "fieldSelector 'metadata.name' and nameSelector.matchNames are mutually exclusive"
                        .to_owned(),
                );
            }
        }
    }
    let jq_filter = match string(raw, "jqFilter") {
        Some(p) => match JqProgram::compile(&p) {
            Ok(p) => Some(p),
            Err(e) => {
                errors.push(format!("jqFilter is invalid: {e}"));
                None
            }
        },
        None => None,
    };
    if !errors.is_empty() {
        return Err(multierror(&errors));
    }
    let execute_hook_on_event = match raw
        .get("executeHookOnEvent")
        .or_else(|| raw.get("watchEvent"))
    {
        Some(Value::Array(events)) => events
            .iter()
            .filter_map(|e| serde_json::from_value(e.clone()).ok())
            .collect(),
        _ => WatchEvent::ALL.to_vec(),
    };
    let queue = string(raw, "queue");
    let namespace = raw
        .get("namespace")
        .and_then(Value::as_object)
        .map(|ns| NamespaceSelector {
            name_selector: parse_name_selector(ns.get("nameSelector")),
            label_selector: parse_label_selector(ns.get("labelSelector")),
        });
    Ok(KubernetesBinding {
        name: string(raw, "name").unwrap_or_else(|| "kubernetes".to_owned()),
        api_version,
        kind: string(raw, "kind").unwrap_or_default(),
        name_selector,
        label_selector,
        field_selector,
        namespace,
        jq_filter,
        execute_hook_on_event,
        execute_hook_on_synchronization: flag(raw, "executeHookOnSynchronization", true),
        wait_for_synchronization: queue.is_none() || flag(raw, "waitForSynchronization", true),
        keep_full_objects_in_memory: flag(raw, "keepFullObjectsInMemory", true),
        allow_failure: flag(raw, "allowFailure", false),
        queue: queue.unwrap_or_else(|| MAIN_QUEUE.to_owned()),
        include_snapshots_from: strings(raw.get("includeSnapshotsFrom")),
        group: string(raw, "group"),
        resynchronization_period: string(raw, "resynchronizationPeriod"),
    })
}

fn convert_kubernetes_v0(raw: &Map<String, Value>) -> Result<KubernetesBinding, ConfigError> {
    let mut events = Vec::new();
    for e in strings(raw.get("event")) {
        events.push(match e.as_str() {
            "add" => WatchEvent::Added,
            "update" => WatchEvent::Modified,
            "delete" => WatchEvent::Deleted,
            other => {
                return Err(ConfigError::new(format!("event '{other}' is unsupported")));
            }
        });
    }
    let jq_filter = match string(raw, "jqFilter") {
        Some(p) => Some(JqProgram::compile(&p).map_err(ConfigError::new)?),
        None => None,
    };
    let namespace = raw
        .get("namespaceSelector")
        .and_then(Value::as_object)
        .filter(|ns| !flag(ns, "any", false))
        .map(|ns| NamespaceSelector {
            name_selector: Some(NameSelector {
                match_names: strings(ns.get("matchNames")),
            }),
            label_selector: None,
        });
    Ok(KubernetesBinding {
        name: string(raw, "name").unwrap_or_else(|| "onKubernetesEvent".to_owned()),
        api_version: None,
        kind: string(raw, "kind").unwrap_or_default(),
        name_selector: string(raw, "objectName").map(|n| NameSelector {
            match_names: vec![n],
        }),
        label_selector: parse_label_selector(raw.get("selector")),
        field_selector: Vec::new(),
        namespace,
        jq_filter,
        execute_hook_on_event: events,
        execute_hook_on_synchronization: false,
        wait_for_synchronization: true,
        keep_full_objects_in_memory: true,
        allow_failure: flag(raw, "allowFailure", false),
        queue: MAIN_QUEUE.to_owned(),
        include_snapshots_from: Vec::new(),
        group: None,
        resynchronization_period: None,
    })
}

/// Parses a crontab as robfig/cron.v2 does: five fields, or six with seconds first.
pub fn parse_crontab(crontab: &str) -> Result<croner::Cron, String> {
    let parser = croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .year(croner::parser::Year::Disallowed)
        .dom_and_dow(false)
        .build();
    let fields = crontab.split_whitespace().count();
    if !crontab.trim_start().starts_with('@') && !(5..=6).contains(&fields) {
        return Err(format!("Expected 5 or 6 fields, found {fields}: {crontab}"));
    }
    parser.parse(crontab).map_err(|e| e.to_string())
}

fn convert_schedule(
    raw: &Map<String, Value>,
    kubernetes: &[KubernetesBinding],
    v1: bool,
) -> Result<ScheduleBinding, String> {
    let crontab = raw
        .get("crontab")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut errors = Vec::new();
    let cron = match parse_crontab(&crontab) {
        Ok(c) => Some(c),
        Err(e) => {
            errors.push(format!("crontab is invalid: {e}"));
            None
        }
    };
    let include = if v1 {
        strings(raw.get("includeSnapshotsFrom"))
    } else {
        Vec::new()
    };
    if let Err(e) = check_includes(kubernetes, &include) {
        errors.push(format!("includeSnapshotsFrom is invalid: {e}"));
    }
    let cron = match cron {
        Some(c) if errors.is_empty() => c,
        _ => return Err(multierror(&errors)),
    };
    Ok(ScheduleBinding {
        name: string(raw, "name").unwrap_or_else(|| "schedule".to_owned()),
        crontab,
        cron,
        allow_failure: flag(raw, "allowFailure", false),
        queue: if v1 {
            string(raw, "queue").unwrap_or_else(|| MAIN_QUEUE.to_owned())
        } else {
            MAIN_QUEUE.to_owned()
        },
        include_snapshots_from: include,
        group: if v1 { string(raw, "group") } else { None },
    })
}

/// Every include must name exactly one kubernetes binding.
fn check_includes(kubernetes: &[KubernetesBinding], includes: &[String]) -> Result<(), String> {
    for include in includes {
        match kubernetes.iter().filter(|k| &k.name == include).count() {
            0 => return Err(format!("'{include}' binding name not found")),
            1 => {}
            n => return Err(format!("there are {n} '{include}' binding names")),
        }
    }
    Ok(())
}

/// A binding in a group also gets the snapshots of every kubernetes binding of that group.
fn merge_group_snapshots(kubernetes: &mut [KubernetesBinding], schedules: &mut [ScheduleBinding]) {
    let group_members = |group: &str, kubernetes: &[KubernetesBinding]| -> Vec<String> {
        kubernetes
            .iter()
            .filter(|k| k.group.as_deref() == Some(group))
            .map(|k| k.name.clone())
            .collect()
    };
    let merged: Vec<Vec<String>> = kubernetes
        .iter()
        .map(|k| match &k.group {
            Some(g) => merge(&k.include_snapshots_from, &group_members(g, kubernetes)),
            None => k.include_snapshots_from.clone(),
        })
        .collect();
    for (k, m) in kubernetes.iter_mut().zip(merged) {
        k.include_snapshots_from = m;
    }
    for s in schedules.iter_mut() {
        if let Some(g) = &s.group {
            let members = group_members(g, kubernetes);
            if !members.is_empty() {
                s.include_snapshots_from = merge(&s.include_snapshots_from, &members);
            }
        }
    }
}

fn merge(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = a.to_vec();
    for x in b {
        if !out.contains(x) {
            out.push(x.clone());
        }
    }
    out
}
