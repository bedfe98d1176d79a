use super::*;

fn parse(text: &str) -> Result<HookConfig, ConfigError> {
    HookConfig::parse(text.as_bytes(), HookScope::Module)
}

#[test]
fn v1_yaml_with_every_binding() {
    let c = parse(
        r#"
configVersion: v1
onStartup: 10
beforeHelm: 5
afterHelm: 7
afterDeleteHelm: 1
settings:
  executionMinInterval: 3s
  executionBurst: 1
schedule:
- name: every-ten
  crontab: "*/10 * * * * *"
  allowFailure: true
  queue: ten
  includeSnapshotsFrom: [pods]
- crontab: "0 * * * *"
  group: g
kubernetes:
- name: pods
  apiVersion: v1
  kind: Pod
  executeHookOnEvent: [Added]
  executeHookOnSynchronization: false
  keepFullObjectsInMemory: false
  jqFilter: .metadata.labels
  nameSelector: {matchNames: [a, b]}
  namespace:
    nameSelector: {matchNames: [default]}
  labelSelector:
    matchLabels: {app: x}
    matchExpressions: [{key: tier, operator: In, values: [cache]}]
  fieldSelector:
    matchExpressions: [{field: status.phase, operator: Equals, value: Running}]
  queue: pods
  waitForSynchronization: false
- kind: ConfigMap
  group: g
"#,
    )
    .unwrap();
    assert_eq!(c.version, ConfigVersion::V1);
    assert_eq!(
        (
            c.on_startup,
            c.before_helm,
            c.after_helm,
            c.after_delete_helm
        ),
        (Some(10.0), Some(5.0), Some(7.0), Some(1.0))
    );
    assert_eq!(
        c.settings,
        Some(Settings {
            execution_min_interval: std::time::Duration::from_secs(3),
            execution_burst: 1
        })
    );
    let s = &c.schedules[0];
    assert_eq!(
        (s.name.as_str(), s.queue.as_str(), s.allow_failure),
        ("every-ten", "ten", true)
    );
    assert_eq!(c.schedules[1].name, "schedule");
    assert_eq!(c.schedules[1].queue, "main");
    // The group brings its kubernetes bindings' snapshots.
    assert_eq!(c.schedules[1].include_snapshots_from, vec!["kubernetes"]);
    let k = &c.kubernetes[0];
    assert_eq!(k.execute_hook_on_event, vec![WatchEvent::Added]);
    assert!(!k.execute_hook_on_synchronization && !k.keep_full_objects_in_memory);
    assert!(
        !k.wait_for_synchronization,
        "a named queue may skip waiting"
    );
    assert_eq!(
        k.name_selector.as_ref().unwrap().match_names,
        vec!["a", "b"]
    );
    assert_eq!(k.field_selector[0].field, "status.phase");
    assert_eq!(k.jq_filter.as_ref().unwrap().source(), ".metadata.labels");
    let cm = &c.kubernetes[1];
    assert_eq!(cm.name, "kubernetes");
    assert_eq!(cm.execute_hook_on_event, WatchEvent::ALL.to_vec());
    assert!(cm.execute_hook_on_synchronization && cm.keep_full_objects_in_memory);
    assert!(cm.wait_for_synchronization);
    assert_eq!(cm.queue, "main");
    assert_eq!(cm.include_snapshots_from, vec!["kubernetes"]);
}

#[test]
fn json_config_and_v0() {
    let c = parse(r#"{"configVersion":"v1","onStartup":1,"kubernetes":[{"kind":"Namespace"}]}"#)
        .unwrap();
    assert_eq!(c.kubernetes[0].kind, "Namespace");
    let v0 = parse(
        r#"{"onStartup": 2, "beforeHelm": 1, "schedule":[{"crontab":"* * * * *"}], "onKubernetesEvent":[{"kind":"Pod","event":["add","delete"],"objectName":"x"}]}"#,
    )
    .unwrap();
    assert_eq!(v0.version, ConfigVersion::V0);
    assert_eq!(v0.before_helm, Some(1.0));
    assert_eq!(v0.kubernetes[0].name, "onKubernetesEvent");
    assert_eq!(
        v0.kubernetes[0].execute_hook_on_event,
        vec![WatchEvent::Added, WatchEvent::Deleted]
    );
    assert_eq!(
        v0.kubernetes[0].name_selector.as_ref().unwrap().match_names,
        vec!["x"]
    );
}

#[test]
fn errors_in_shell_operators_words() {
    let rows: &[(&str, &str)] = &[
        (
            "configVersion: v2\nonStartup: 1",
            "config version: 'configVersion' value 'v2' is unsupported",
        ),
        (
            "configVersion: 1\nonStartup: 1",
            "config version: string value is expected for key 'configVersion'",
        ),
        (
            "configVersion: v1\nkubernetes:\n- name: x\n",
            "kubernetes.0.kind in body is required",
        ),
        (
            "configVersion: v1\nschedule:\n- name: x\n",
            "schedule.0.crontab in body is required",
        ),
        (
            "configVersion: v1\nonStartup: x\n",
            "onStartup in body must be of type integer: \"string\"",
        ),
        (
            "configVersion: v1\nonStartup: 1\nfoo: 1\n",
            "foo in body is a forbidden property",
        ),
        (
            "configVersion: v1\nonStartup: 1\nbeforeAll: 1\n",
            "beforeAll in body is a forbidden property",
        ),
        (
            "configVersion: v1\nkubernetes:\n- kind: Pod\n  executeHookOnEvent: [Updated]\n",
            "kubernetes.0.executeHookOnEvent.0 in body should be one of [Added Modified Deleted]",
        ),
        (
            "configVersion: v1\nschedule:\n- crontab: 'bad'\n",
            "invalid schedule config [0]: 1 error occurred:\n\t* crontab is invalid: Expected 5 or 6 fields, found 1: bad",
        ),
        (
            "configVersion: v1\nschedule:\n- crontab: '* * * * *'\n  includeSnapshotsFrom: [nope]\n",
            "includeSnapshotsFrom is invalid: 'nope' binding name not found",
        ),
        (
            "configVersion: v1\nkubernetes:\n- kind: Pod\n  includeSnapshotsFrom: [nope]\n",
            "invalid kubernetes config [0]: includeSnapshots 'nope' binding name not found",
        ),
        (
            "configVersion: v1\nkubernetes:\n- kind: Pod\n  nameSelector: {matchNames: [a]}\n  fieldSelector: {matchExpressions: [{field: metadata.name, operator: Equals, value: a}]}\n",
            "fieldSelector 'metadata.name' and nameSelector.matchNames are mutually exclusive",
        ),
        (
            "configVersion: v1\nkubernetes:\n- kind: Pod\n  labelSelector: {matchExpressions: [{key: a, operator: In}]}\n",
            "labelSelector is invalid: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            "configVersion: v1\nsettings: {executionMinInterval: 3x, executionBurst: 1}\n",
            "executionMinInterval is invalid: time: unknown unit \"x\" in duration \"3x\"",
        ),
        (
            "configVersion: v1\nkubernetes:\n- kind: Pod\n  jqFilter: '.a | ('\n",
            "jqFilter is invalid",
        ),
    ];
    for (text, want) in rows {
        let e = parse(text).expect_err(text).message;
        assert!(e.contains(want), "{text}\n got: {e}\nwant: {want}");
    }
    let global = HookConfig::parse(
        b"configVersion: v1\nbeforeAll: 1\nafterHelm: 2",
        HookScope::Global,
    )
    .unwrap_err()
    .message;
    assert!(
        global.contains("afterHelm in body is a forbidden property"),
        "{global}"
    );
}

#[test]
fn crontabs_with_and_without_seconds() {
    for ok in [
        "* * * * *",
        "*/10 * * * * *",
        "0 2 */3 * * *",
        "@hourly",
        "0 0 * * MON",
    ] {
        assert!(parse_crontab(ok).is_ok(), "{ok}");
    }
    for bad in ["* * * *", "* * * * * * *", "61 * * * *"] {
        assert!(parse_crontab(bad).is_err(), "{bad}");
    }
    let s = &parse("configVersion: v1\nschedule:\n- crontab: '*/10 * * * * *'\n")
        .unwrap()
        .schedules[0];
    let now: jiff::Zoned = "2025-01-01T00:00:03+00:00[UTC]".parse().unwrap();
    assert_eq!(s.next_after(now).unwrap().second(), 10);
}

#[test]
fn module_sdk_configs_are_remapped() {
    let out = br#"[{"configVersion":"v1","metadata":{"name":"main","path":"hooks/x"},"onBeforeHelm":null,"beforeHelm":10,
      "kubernetes":[{"name":"nodes","apiVersion":"v1","kind":"Node","jqFilter":".metadata.name","executeHookOnEvent":false}],
      "settings":{"executionMinInterval":3000000000,"executionBurst":2}},
      {"configVersion":"v1","metadata":{"name":"cron","path":""},"schedule":[{"name":"s","crontab":"*/5 * * * *"}]}]"#;
    let list = batch_configs(out).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!((list[0].index, list[0].name.as_str()), (0, "main"));
    let c = &list[0].config;
    assert_eq!(c.before_helm, Some(10.0));
    let k = &c.kubernetes[0];
    assert!(k.execute_hook_on_event.is_empty());
    assert!(!k.keep_full_objects_in_memory);
    assert_eq!(k.group.as_deref(), Some("main"));
    assert_eq!(k.include_snapshots_from, vec!["nodes"]);
    assert_eq!(
        c.settings.unwrap().execution_min_interval,
        std::time::Duration::from_secs(3)
    );
    assert_eq!(list[1].config.schedules[0].name, "s");
    assert!(
        batch_configs(b"not json")
            .unwrap_err()
            .message
            .starts_with("decode: ")
    );
}
