//! Configs of a Go `module-sdk` hook binary (`<binary> hook config`): a JSON array with one
//! entry per compiled hook, remapped to shell-operator bindings as addon-operator does.

use serde_json::{Map, Value, json};

use super::{ConfigError, ConfigVersion, HookConfig, convert};

/// One compiled hook of a batch binary: its index (`hook run <index>`), its name from
/// `metadata.name`, and its bindings.
#[derive(Debug, Clone)]
pub struct BatchHookConfig {
    pub index: usize,
    pub name: String,
    pub config: HookConfig,
}

/// Parses the output of `<binary> hook config`.
pub fn batch_configs(output: &[u8]) -> Result<Vec<BatchHookConfig>, ConfigError> {
    let list: Vec<Value> =
        serde_json::from_slice(output).map_err(|e| ConfigError::new(format!("decode: {e}")))?;
    list.iter()
        .enumerate()
        .map(|(index, raw)| {
            let raw = raw.as_object().cloned().unwrap_or_default();
            let name = raw
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let doc = remap(&raw);
            let config = convert(&doc, ConfigVersion::V1).map_err(|e| {
                ConfigError::new(format!("convert and check from hook config v1: {e}"))
            })?;
            Ok(BatchHookConfig {
                index,
                name,
                config,
            })
        })
        .collect()
}

/// The module-sdk fields in shell-operator's v1 form.
fn remap(raw: &Map<String, Value>) -> Map<String, Value> {
    let mut doc = Map::new();
    doc.insert("configVersion".into(), json!("v1"));
    for key in ["onStartup", "beforeHelm", "afterHelm", "afterDeleteHelm"] {
        if let Some(v) = raw.get(key).filter(|v| !v.is_null()) {
            doc.insert(key.into(), v.clone());
        }
    }
    if let Some(s) = raw.get("settings").and_then(Value::as_object) {
        let ns = s
            .get("executionMinInterval")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let burst = s.get("executionBurst").and_then(Value::as_u64).unwrap_or(0);
        doc.insert(
            "settings".into(),
            json!({"executionMinInterval": format!("{ns}ns"), "executionBurst": burst}),
        );
    }
    let schedules: Vec<Value> = raw
        .get("schedule")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| json!({"name": s.get("name").cloned().unwrap_or(json!("")), "crontab": s.get("crontab").cloned().unwrap_or(json!(""))}))
        .collect();
    if !schedules.is_empty() {
        doc.insert("schedule".into(), Value::Array(schedules));
    }
    let kubernetes: Vec<Value> = raw
        .get("kubernetes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .map(remap_kubernetes)
        .collect();
    if !kubernetes.is_empty() {
        doc.insert("kubernetes".into(), Value::Array(kubernetes));
    }
    doc
}

fn remap_kubernetes(k: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    for key in [
        "name",
        "apiVersion",
        "kind",
        "labelSelector",
        "jqFilter",
        "resynchronizationPeriod",
        "includeSnapshotsFrom",
        "queue",
        "nameSelector",
        "namespace",
        "fieldSelector",
        "allowFailure",
        "executeHookOnSynchronization",
        "waitForSynchronization",
    ] {
        if let Some(v) = k.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), v.clone());
        }
    }
    // module-sdk keeps only filter results unless told otherwise, and puts every binding of
    // a binary's hook into the group "main".
    out.insert(
        "keepFullObjectsInMemory".into(),
        k.get("keepFullObjectsInMemory")
            .cloned()
            .filter(Value::is_boolean)
            .unwrap_or(json!(false)),
    );
    out.insert("group".into(), json!("main"));
    if k.get("executeHookOnEvent") == Some(&json!(false)) {
        out.insert("executeHookOnEvent".into(), json!([]));
    }
    Value::Object(out)
}
