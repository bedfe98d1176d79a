//! The OpenAPI check shell-operator runs on a `--config` document before converting it,
//! reporting in go-openapi's words (`kubernetes.0.kind in body is required`, …).

use serde_json::{Map, Value};

use super::{ConfigError, ConfigVersion, HookScope, LabelRequirement, json_type, multierror};

const TOP_V1: &[&str] = &[
    "configVersion",
    "settings",
    "onStartup",
    "schedule",
    "kubernetes",
    "kubernetesMutating",
    "kubernetesValidating",
    "kubernetesCustomResourceConversion",
];
const TOP_V0: &[&str] = &[
    "onStartup",
    "schedule",
    "onKubernetesEvent",
    "configVersion",
];
const MODULE_ORDERS: &[&str] = &["beforeHelm", "afterHelm", "afterDeleteHelm"];
const GLOBAL_ORDERS: &[&str] = &["beforeAll", "afterAll"];
const SCHEDULE_KEYS: &[&str] = &[
    "name",
    "crontab",
    "allowFailure",
    "includeSnapshotsFrom",
    "queue",
    "group",
];
const KUBERNETES_KEYS: &[&str] = &[
    "name",
    "watchEvent",
    "executeHookOnEvent",
    "apiVersion",
    "kind",
    "includeSnapshotsFrom",
    "queue",
    "jqFilter",
    "keepFullObjectsInMemory",
    "allowFailure",
    "executeHookOnSynchronization",
    "waitForSynchronization",
    "resynchronizationPeriod",
    "nameSelector",
    "labelSelector",
    "fieldSelector",
    "group",
    "namespace",
];

struct Errors(Vec<String>);

impl Errors {
    fn required(&mut self, path: &str) {
        self.0.push(format!("{path} in body is required"));
    }
    fn forbidden(&mut self, path: &str) {
        self.0
            .push(format!("{path} in body is a forbidden property"));
    }
    fn of_type(&mut self, path: &str, want: &str, got: &Value) {
        self.0.push(format!(
            "{path} in body must be of type {want}: \"{}\"",
            go_type(got)
        ));
    }
    fn enumeration(&mut self, path: &str, allowed: &[&str]) {
        self.0.push(format!(
            "{path} in body should be one of [{}]",
            allowed.join(" ")
        ));
    }
}

fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        other => json_type(other),
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

pub(super) fn validate_schema(
    doc: &Map<String, Value>,
    version: ConfigVersion,
    scope: HookScope,
) -> Result<(), ConfigError> {
    let mut e = Errors(Vec::new());
    let base = match version {
        ConfigVersion::V1 => TOP_V1,
        ConfigVersion::V0 => TOP_V0,
    };
    let orders = match scope {
        HookScope::Module => MODULE_ORDERS,
        HookScope::Global => GLOBAL_ORDERS,
    };
    for key in doc.keys() {
        if !base.contains(&key.as_str()) && !orders.contains(&key.as_str()) {
            e.forbidden(key);
        }
    }
    for key in ["onStartup"].iter().chain(orders) {
        if let Some(v) = doc.get(*key)
            && !is_integer(v)
        {
            e.of_type(key, "integer", v);
        }
    }
    if version == ConfigVersion::V1 {
        if doc.len() < 2 {
            e.0.push("body in body should have at least 2 properties".to_owned());
        }
        if let Some(settings) = doc.get("settings") {
            match settings.as_object() {
                Some(s) => {
                    for k in s.keys() {
                        if k != "executionMinInterval" && k != "executionBurst" {
                            e.forbidden(&join("settings", k));
                        }
                    }
                }
                None => e.of_type("settings", "object", settings),
            }
        }
        items(doc, "schedule", &mut e, |path, item, e| {
            keys(item, path, SCHEDULE_KEYS, e);
            match item.get("crontab") {
                None => e.required(&join(path, "crontab")),
                Some(Value::String(_)) => {}
                Some(v) => e.of_type(&join(path, "crontab"), "string", v),
            }
            boolean(item, path, "allowFailure", e);
        });
        items(doc, "kubernetes", &mut e, |path, item, e| {
            keys(item, path, KUBERNETES_KEYS, e);
            match item.get("kind") {
                None => e.required(&join(path, "kind")),
                Some(Value::String(_)) => {}
                Some(v) => e.of_type(&join(path, "kind"), "string", v),
            }
            for b in [
                "keepFullObjectsInMemory",
                "allowFailure",
                "executeHookOnSynchronization",
                "waitForSynchronization",
            ] {
                boolean(item, path, b, e);
            }
            for ev in ["executeHookOnEvent", "watchEvent"] {
                if let Some(v) = item.get(ev) {
                    match v.as_array() {
                        Some(list) => {
                            for (i, x) in list.iter().enumerate() {
                                if !matches!(x.as_str(), Some("Added" | "Modified" | "Deleted")) {
                                    e.enumeration(
                                        &format!("{path}.{ev}.{i}"),
                                        &["Added", "Modified", "Deleted"],
                                    );
                                }
                            }
                        }
                        None => e.of_type(&join(path, ev), "array", v),
                    }
                }
            }
            if let Some(fs) = item
                .get("fieldSelector")
                .and_then(|f| f.get("matchExpressions"))
            {
                for (i, x) in fs.as_array().into_iter().flatten().enumerate() {
                    let op = x.get("operator").and_then(Value::as_str);
                    if !matches!(op, Some("=" | "==" | "Equals" | "!=" | "NotEquals")) {
                        e.enumeration(
                            &format!("{path}.fieldSelector.matchExpressions.{i}.operator"),
                            &["=", "==", "Equals", "!=", "NotEquals"],
                        );
                    }
                }
            }
            if let Some(ns) = item.get("namespace").and_then(Value::as_object) {
                for k in ns.keys() {
                    if k != "nameSelector" && k != "labelSelector" {
                        e.forbidden(&format!("{path}.namespace.{k}"));
                    }
                }
            }
        });
    }
    if e.0.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::new(multierror(&e.0)))
    }
}

fn items(
    doc: &Map<String, Value>,
    key: &str,
    e: &mut Errors,
    mut each: impl FnMut(&str, &Map<String, Value>, &mut Errors),
) {
    let Some(v) = doc.get(key) else { return };
    let Some(list) = v.as_array() else {
        e.of_type(key, "array", v);
        return;
    };
    if list.is_empty() {
        e.0.push(format!("{key} in body should have at least 1 items"));
    }
    for (i, item) in list.iter().enumerate() {
        let path = format!("{key}.{i}");
        match item.as_object() {
            Some(obj) => each(&path, obj, e),
            None => e.of_type(&path, "object", item),
        }
    }
}

fn keys(item: &Map<String, Value>, path: &str, allowed: &[&str], e: &mut Errors) {
    for k in item.keys() {
        if !allowed.contains(&k.as_str()) {
            e.forbidden(&join(path, k));
        }
    }
}

fn boolean(item: &Map<String, Value>, path: &str, key: &str, e: &mut Errors) {
    if let Some(v) = item.get(key)
        && !v.is_boolean()
    {
        e.of_type(&join(path, key), "boolean", v);
    }
}

/// apimachinery's label requirement rules, in its words.
pub(super) fn label_requirement(r: &LabelRequirement) -> Result<(), String> {
    match r.operator.as_str() {
        "In" | "NotIn" if r.values.is_empty() => {
            Err("for 'in', 'notin' operators, values set can't be empty".to_owned())
        }
        "Exists" | "DoesNotExist" if !r.values.is_empty() => {
            Err("values set must be empty for exists and does not exist".to_owned())
        }
        "In" | "NotIn" | "Exists" | "DoesNotExist" => Ok(()),
        other => Err(format!(
            "\"{other}\" is not a valid label selector operator"
        )),
    }
}
