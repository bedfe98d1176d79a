//! `kubectl` (the preinstalled one) against the server with its generated kubeconfig.

#[path = "support/common.rs"]
mod common;

use std::path::Path;
use std::time::Duration;

struct Kubectl<'a> {
    kubeconfig: &'a Path,
    home: &'a Path,
}

impl Kubectl<'_> {
    /// Runs kubectl with `args` and `stdin`; returns (success, stdout, stderr).
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use tokio::io::AsyncWriteExt as _;
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.args(args)
            .arg("--kubeconfig")
            .arg(self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.home.join("cache"))
            .env("HOME", self.home)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("kubectl is installed");
        let mut input = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).await.unwrap();
        }
        drop(input);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("kubectl finished in time")
            .unwrap();
        let r = (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        eprintln!("$ kubectl {}\n{}{}", args.join(" "), r.1, r.2);
        r
    }
}

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
