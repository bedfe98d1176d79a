use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::config::{HookConfig, HookScope};

fn config(text: &str) -> HookConfig {
    HookConfig::parse(text.as_bytes(), HookScope::Module).unwrap()
}

fn cm(name: &str, data: &str, extra: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "d8", "annotations": {"x": extra}}, "data": {"k": data}})
}

#[test]
fn synchronization_and_events_with_filter_results() {
    let c = config(
        "configVersion: v1\nkubernetes:\n- name: cms\n  kind: ConfigMap\n  jqFilter: .data\n",
    );
    let mut monitors = monitors_for(&c);
    let m = monitors.get_mut("cms").unwrap();
    let sync = m
        .synchronize(vec![cm("b", "1", "a"), cm("a", "1", "a")])
        .unwrap()
        .unwrap();
    assert_eq!(
        sync.to_json(ConfigVersion::V1),
        json!({"binding": "cms", "type": "Synchronization", "objects": [
            {"object": cm("a", "1", "a"), "filterResult": {"k": "1"}},
            {"object": cm("b", "1", "a"), "filterResult": {"k": "1"}},
        ]})
    );
    // Only an annotation changed: the filter result is the same, the hook does not run.
    assert!(
        m.event(WatchEvent::Modified, cm("a", "1", "changed"))
            .unwrap()
            .is_none()
    );
    // The data changed: it runs, with the object at the moment of the event.
    let ev = m
        .event(WatchEvent::Modified, cm("a", "2", "changed"))
        .unwrap()
        .unwrap();
    assert_eq!(
        ev.to_json(ConfigVersion::V1),
        json!({"binding": "cms", "type": "Event", "watchEvent": "Modified",
               "object": cm("a", "2", "changed"), "filterResult": {"k": "2"}})
    );
    let del = m
        .event(WatchEvent::Deleted, cm("b", "1", "a"))
        .unwrap()
        .unwrap();
    assert_eq!(del.to_json(ConfigVersion::V1)["watchEvent"], "Deleted");
    assert_eq!(m.snapshot().len(), 1);
}

#[test]
fn without_filter_every_change_runs_and_filter_result_is_absent() {
    let c = config(
        "configVersion: v1\nkubernetes:\n- kind: ConfigMap\n  executeHookOnEvent: [Added, Modified]\n",
    );
    let mut monitors = monitors_for(&c);
    let m = monitors.get_mut("kubernetes").unwrap();
    let sync = m.synchronize(vec![]).unwrap().unwrap();
    assert_eq!(
        sync.to_json(ConfigVersion::V1),
        json!({"binding": "kubernetes", "type": "Synchronization", "objects": []})
    );
    let ev = m
        .event(WatchEvent::Added, cm("a", "1", "a"))
        .unwrap()
        .unwrap();
    assert!(ev.to_json(ConfigVersion::V1).get("filterResult").is_none());
    assert!(
        m.event(WatchEvent::Added, cm("a", "1", "a"))
            .unwrap()
            .is_none(),
        "same object again"
    );
    assert!(
        m.event(WatchEvent::Modified, cm("a", "1", "b"))
            .unwrap()
            .is_some()
    );
    assert!(
        m.event(WatchEvent::Deleted, cm("a", "1", "b"))
            .unwrap()
            .is_none(),
        "Deleted is not executed"
    );
}

#[test]
fn groups_snapshots_and_helm_contexts() {
    let c = config(
        r#"
configVersion: v1
schedule:
- name: periodic
  crontab: "0 */3 * * *"
  group: pods
kubernetes:
- name: monitor-pods
  kind: Pod
  jqFilter: .metadata.labels
  keepFullObjectsInMemory: false
  group: pods
- name: settings
  kind: ConfigMap
  executeHookOnSynchronization: false
  executeHookOnEvent: []
"#,
    );
    let mut monitors = monitors_for(&c);
    let pod =
        json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"}}});
    let sync = monitors
        .get_mut("monitor-pods")
        .unwrap()
        .synchronize(vec![pod])
        .unwrap()
        .unwrap();
    assert!(
        monitors
            .get_mut("settings")
            .unwrap()
            .synchronize(vec![cm("s", "1", "")])
            .unwrap()
            .is_none()
    );
    assert!(
        monitors
            .get_mut("settings")
            .unwrap()
            .event(WatchEvent::Modified, cm("s", "2", ""))
            .unwrap()
            .is_none()
    );
    let group = sync.with_snapshots(&monitors).to_json(ConfigVersion::V1);
    assert_eq!(
        group,
        json!({"binding": "pods", "type": "Group", "snapshots": {"monitor-pods": [{"filterResult": {"a": "b"}}]}})
    );
    let sched = BindingContext::schedule(&c.schedules[0]).with_snapshots(&monitors);
    assert_eq!(sched.to_json(ConfigVersion::V1)["type"], "Group");
    let helm = BindingContext::helm("beforeHelm")
        .with_snapshots(&monitors)
        .to_json(ConfigVersion::V1);
    assert_eq!(helm["binding"], "beforeHelm");
    assert_eq!(helm["snapshots"]["settings"][0]["object"]["data"]["k"], "2");
    assert!(helm.get("type").is_none());
    assert_eq!(
        BindingContext::on_startup().to_json(ConfigVersion::V1),
        json!({"binding": "onStartup"})
    );
    let plain = config("configVersion: v1\nschedule:\n- name: s\n  crontab: '* * * * *'\n");
    assert_eq!(
        BindingContext::schedule(&plain.schedules[0])
            .with_snapshots(&BTreeMap::new())
            .to_json(ConfigVersion::V1),
        json!({"binding": "s", "type": "Schedule"})
    );
    // Several queued group contexts compact into the last one.
    let compacted = compact_groups(vec![sched.clone(), BindingContext::on_startup(), sched]);
    assert_eq!(compacted.len(), 2);
    assert_eq!(compacted[0].binding, "onStartup");
}

#[test]
fn v0_event_context() {
    let c = config(r#"{"onKubernetesEvent":[{"kind":"ConfigMap","event":["update"]}]}"#);
    let mut monitors = monitors_for(&c);
    let m = monitors.get_mut("onKubernetesEvent").unwrap();
    assert!(m.synchronize(vec![cm("a", "1", "")]).unwrap().is_none());
    let ev = m
        .event(WatchEvent::Modified, cm("a", "2", ""))
        .unwrap()
        .unwrap();
    assert_eq!(
        ev.to_json(ConfigVersion::V0),
        json!({"binding": "onKubernetesEvent", "resourceEvent": "update", "resourceNamespace": "d8", "resourceKind": "ConfigMap", "resourceName": "a"})
    );
}

#[test]
fn validating_and_conversion_contexts_render_as_shell_operator_writes_them() {
    let review = json!({"request": {"uid": "u"}});
    let v = BindingContext::validating("w.example.io", &[], review.clone());
    assert_eq!(
        v.to_json(ConfigVersion::V1),
        json!({"binding": "w.example.io", "type": "Validating", "review": review})
    );
    let c = BindingContext::conversion(
        "v1_to_v2",
        &[],
        "example.io/v1",
        "example.io/v2",
        review.clone(),
    );
    assert_eq!(
        c.to_json(ConfigVersion::V1),
        json!({"binding": "v1_to_v2", "type": "Conversion", "fromVersion": "example.io/v1",
            "toVersion": "example.io/v2", "review": review})
    );
}
