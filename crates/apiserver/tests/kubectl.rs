//! `kubectl` (the preinstalled one) against the server with its generated kubeconfig.

#[path = "support/common.rs"]
mod common;
#[path = "support/kubectl.rs"]
mod kubectl;

use kubectl::Kubectl;

const WIDGET: &str = r#"
apiVersion: example.io/v1
kind: Widget
metadata:
  name: w1
  namespace: default
spec:
  mode: Direct
  replicas: 2
"#;

const CONFIGMAP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
data:
  a: "1"
"#;

#[tokio::test]
async fn apply_get_delete_with_kubectl() {
    let s = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let k = Kubectl {
        kubeconfig: s.server.admin_kubeconfig(),
        home: home.path(),
    };

    let (ok, out, _) = k.run(&["apply", "-f", "-"], Some(WIDGET)).await;
    assert!(ok);
    assert_eq!(out.trim(), "widget.example.io/w1 created");
    let (ok, out, _) = k
        .run(
            &["apply", "-f", "-"],
            Some(&WIDGET.replace("Direct", "Proxy")),
        )
        .await;
    assert!(ok);
    assert_eq!(out.trim(), "widget.example.io/w1 configured");
    let (ok, out, _) = k
        .run(
            &["apply", "-f", "-"],
            Some(&WIDGET.replace("Direct", "Proxy")),
        )
        .await;
    assert!(ok);
    assert_eq!(out.trim(), "widget.example.io/w1 unchanged");

    // Printer columns from the CRD.
    let (ok, out, _) = k.run(&["get", "widgets", "-n", "default"], None).await;
    assert!(ok);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0]
            .split_whitespace()
            .collect::<Vec<_>>()
            .starts_with(&["NAME", "MODE", "REPLICAS", "PHASE", "AGE"]),
        "{out}"
    );
    assert!(
        lines[1]
            .split_whitespace()
            .collect::<Vec<_>>()
            .starts_with(&["w1", "Proxy", "2"]),
        "{out}"
    );
    let (ok, out, _) = k
        .run(&["get", "wd", "w1", "-o", "jsonpath={.spec.mode}"], None)
        .await;
    assert!(ok);
    assert_eq!(out, "Proxy");

    // Invalid objects are refused with the schema's message.
    let (ok, _, err) = k
        .run(
            &["apply", "-f", "-"],
            Some(&WIDGET.replace("Direct", "Sideways").replace("w1", "w2")),
        )
        .await;
    assert!(!ok);
    assert!(
        err.contains(r#"spec.mode: Unsupported value: "Sideways""#),
        "{err}"
    );
    // Unknown fields are refused: kubectl asks for strict server-side field validation.
    let (ok, _, err) = k
        .run(
            &["apply", "-f", "-"],
            Some(
                &WIDGET
                    .replace("replicas: 2", "replicas: 2\n  colour: red")
                    .replace("w1", "w3"),
            ),
        )
        .await;
    assert!(!ok);
    assert!(err.contains(r#"unknown field "spec.colour""#), "{err}");

    // Built-ins: create, then a strategic merge patch computed by kubectl.
    let (ok, out, _) = k.run(&["apply", "-f", "-"], Some(CONFIGMAP)).await;
    assert!(ok, "{out}");
    let (ok, _, _) = k
        .run(
            &["apply", "-f", "-"],
            Some(&CONFIGMAP.replace("a: \"1\"", "b: \"2\"")),
        )
        .await;
    assert!(ok);
    let (ok, out, _) = k
        .run(
            &["get", "configmap", "settings", "-o", "jsonpath={.data}"],
            None,
        )
        .await;
    assert!(ok);
    assert_eq!(
        out, r#"{"b":"2"}"#,
        "kubectl apply removed the key it no longer manages"
    );
    let (ok, out, _) = k.run(&["get", "cm"], None).await;
    assert!(ok);
    assert!(
        out.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .eq(["NAME", "DATA", "AGE"]),
        "{out}"
    );

    let (ok, out, _) = k.run(&["delete", "widget", "w1"], None).await;
    assert!(ok);
    assert_eq!(out.trim(), r#"widget.example.io "w1" deleted"#);
    let (ok, _, err) = k.run(&["get", "widget", "w1"], None).await;
    assert!(!ok);
    assert!(
        err.contains(r#"widgets.example.io "w1" not found"#),
        "{err}"
    );
}
