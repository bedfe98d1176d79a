use serde_json::json;

use super::*;

#[test]
fn values_patches_stream_arrays_and_single_operations() {
    let data = br#"{"op":"add","path":"/a","value":1}
[{"op":"remove","path":"/b"},{"op":"add","path":"/c","value":{"x":true}}]
"#;
    let ops = parse_values_patch(data).unwrap();
    assert_eq!(ops.len(), 3);
    assert_eq!(ops[2], json!({"op":"add","path":"/c","value":{"x":true}}));
    assert!(parse_values_patch(b"").unwrap().is_empty());
    let e = parse_values_patch(br#"{"op":"frobnicate","path":"/a"}"#).unwrap_err();
    assert!(e.message.starts_with("bad json-patch data: "), "{e}");
    assert!(parse_values_patch(br#"{"op":"add","path":"/a"}"#).is_err());
}

#[test]
fn kube_operations_in_json_and_yaml() {
    let json_ops = br#"{"operation":"CreateOrUpdate","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"d8"}}}
{"operation":"Create","object":"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n"}
{"operation":"CreateIfNotExists","object":{"kind":"X","metadata":{"name":"x"}},"subresource":"status"}
{"operation":"Delete","kind":"Pod","namespace":"d8","name":"p"}
{"operation":"DeleteInBackground","kind":"Pod","namespace":"d8","name":"p"}
{"operation":"DeleteNonCascading","apiVersion":"apps/v1","kind":"Deployment","namespace":"d8","name":"d"}
{"operation":"JQPatch","kind":"ConfigMap","namespace":"d8","name":"a","jqFilter":".data.x = \"1\""}
{"operation":"MergePatch","kind":"ConfigMap","namespace":"d8","name":"a","mergePatch":{"data":{"y":"2"}},"ignoreMissingObject":true}
{"operation":"JSONPatch","kind":"Deployment","namespace":"d8","name":"d","subresource":"/status","jsonPatch":[{"op":"replace","path":"/status/replicas","value":1}],"ignoreHookError":true}
"#;
    let ops = parse_kube_operations(json_ops).unwrap();
    assert_eq!(ops.len(), 9);
    assert!(matches!(
        &ops[0],
        KubeOperation::Create {
            mode: CreateMode::CreateOrUpdate,
            ..
        }
    ));
    match &ops[1] {
        KubeOperation::Create { object, .. } => assert_eq!(object["kind"], "Secret"),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&ops[2], KubeOperation::Create { mode: CreateMode::CreateIfNotExists, subresource: Some(s), .. } if s == "status")
    );
    assert!(matches!(
        &ops[3],
        KubeOperation::Delete {
            propagation: Propagation::Foreground,
            ..
        }
    ));
    assert!(matches!(
        &ops[4],
        KubeOperation::Delete {
            propagation: Propagation::Background,
            ..
        }
    ));
    assert!(
        matches!(&ops[5], KubeOperation::Delete { propagation: Propagation::Orphan, target, .. } if target.api_version == "apps/v1")
    );
    assert!(matches!(
        &ops[6],
        KubeOperation::Patch {
            patch: Patch::Jq(_),
            ..
        }
    ));
    assert!(matches!(
        &ops[7],
        KubeOperation::Patch {
            patch: Patch::Merge(_),
            ignore_missing_object: true,
            ..
        }
    ));
    assert!(matches!(
        &ops[8],
        KubeOperation::Patch {
            patch: Patch::Json(_),
            ignore_hook_error: true,
            ..
        }
    ));

    let yaml = b"operation: Delete\nkind: Pod\nname: p\n---\noperation: MergePatch\nkind: Pod\nname: p\nmergePatch: |\n  metadata:\n    labels: {a: b}\n";
    let ops = parse_kube_operations(yaml).unwrap();
    assert_eq!(ops.len(), 2);
    match &ops[1] {
        KubeOperation::Patch {
            patch: Patch::Merge(p),
            ..
        } => assert_eq!(p["metadata"]["labels"]["a"], "b"),
        other => panic!("{other:?}"),
    }
    assert!(parse_kube_operations(b"").unwrap().is_empty());
}

#[test]
fn kube_operation_errors() {
    let rows: &[(&[u8], &str)] = &[
        (
            br#"{"operation":"Delete","kind":"Pod"}"#,
            "name in body is required",
        ),
        (br#"{"operation":"Create"}"#, "object in body is required"),
        (
            br#"{"operation":"Explode","kind":"Pod","name":"p"}"#,
            "operation in body should be one of",
        ),
        (
            br#"{"operation":"Delete","kind":"Pod","name":"p","colour":"red"}"#,
            "colour in body is a forbidden property",
        ),
        (
            br#"{"operation":"JSONPatch","kind":"Pod","name":"p","jsonPatch":[]}"#,
            "jsonPatch in body is required",
        ),
    ];
    for (data, want) in rows {
        let e = parse_kube_operations(data).unwrap_err().message;
        assert!(e.starts_with("can't validate document:"), "{e}");
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn metric_operations() {
    let data = br#"{"name":"a","set":1,"labels":{"l":"v"}}
{"name":"b","add":2}
{"name":"c","action":"set","value":3,"group":"g"}
{"group":"g","action":"expire"}
{"name":"h","action":"observe","value":0.5,"buckets":[1]}
"#;
    let ops = parse_metric_operations(data, None).unwrap();
    assert_eq!(ops.len(), 5);
    assert_eq!(ops[0].action, MetricAction::Set(1.0));
    assert_eq!(ops[0].labels, vec![("l".to_owned(), "v".to_owned())]);
    assert_eq!(ops[1].action, MetricAction::Add(2.0));
    assert_eq!(ops[2].group.as_deref(), Some("g"));
    assert_eq!(ops[3].action, MetricAction::Expire);
    let rows: &[(&[u8], &str)] = &[
        (
            br#"{"name":"a"}"#,
            "one of: 'action', 'set' or 'add' is required",
        ),
        (br#"{"set":1}"#, "'name' is required"),
        (
            br#"{"name":"a","action":"set"}"#,
            "'value' is required for action 'set'",
        ),
        (
            br#"{"name":"a","set":1,"add":1}"#,
            "'set' and 'add' are mutual exclusive",
        ),
        (
            br#"{"name":"a","action":"expire"}"#,
            "unsupported action 'expire'",
        ),
    ];
    for (data, want) in rows {
        let e = parse_metric_operations(data, None).unwrap_err().message;
        assert!(e.contains(want), "{e}");
    }
}
