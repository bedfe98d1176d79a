//! Root objects besides Helm's (`RenderOptions::root`, nelm's root values): a chart and its
//! subchart read them at `$`, inside `include` and `tpl` too; Helm's own objects are never
//! replaced; without any, the output is exactly what it was.

use std::collections::BTreeMap;

use helm_render::{RenderOptions, load_files, render};
use serde_json::json;

const CHART: &str =
    "apiVersion: v2\nname: t\nversion: 0.1.0\ndependencies:\n- name: sub\n  version: 0.1.0\n";
const SUB_CHART: &str = "apiVersion: v2\nname: sub\nversion: 0.1.0\n";

const CM: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
data:
  instance: {{ printf "%s/%s" .Application.Instance.Namespace .Application.Instance.Name | quote }}
  domain: {{ .Platform.discovery.clusterDomain | quote }}
  helper: {{ include "t.pkg" . | quote }}
  tpl: {{ tpl "{{ .Application.Package.Name }}" . | quote }}
  values: {{ .Values.greeting | quote }}
  release: {{ .Release.Name | quote }}
"#;

const HELPERS: &str = r#"{{- define "t.pkg" -}}{{ $.Application.Package.Name }}@{{ $.Application.Package.Version }}{{- end -}}"#;

const SUB_CM: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: sub-cm
data:
  name: {{ .Application.Instance.Name | quote }}
"#;

fn files() -> Vec<(String, Vec<u8>)> {
    [
        ("Chart.yaml", CHART),
        ("values.yaml", "greeting: hi\n"),
        ("templates/cm.yaml", CM),
        ("templates/_helpers.tpl", HELPERS),
        ("charts/sub/Chart.yaml", SUB_CHART),
        ("charts/sub/templates/cm.yaml", SUB_CM),
    ]
    .iter()
    .map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec()))
    .collect()
}

fn run(root: BTreeMap<String, serde_json::Value>) -> Result<String, String> {
    let opts = RenderOptions {
        release_name: "shop".into(),
        root,
        ..RenderOptions::default()
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .stack_size(helm_render::engine::RENDER_THREAD_STACK)
        .spawn(move || {
            let out = load_files(files())
                .map_err(|e| e.to_string())
                .and_then(|chart| {
                    render(chart, &Default::default(), &opts).map_err(|e| e.stderr())
                });
            tx.send(out).unwrap();
        })
        .unwrap();
    rx.recv().unwrap()
}

fn runtime() -> BTreeMap<String, serde_json::Value> {
    [
        (
            "Application".to_owned(),
            json!({
                "Instance": {"Name": "shop", "Namespace": "a"},
                "Package": {"Name": "echo", "Version": "v1.0.0"},
            }),
        ),
        (
            "Platform".to_owned(),
            json!({"discovery": {"clusterDomain": "cluster.local"}}),
        ),
        // Helm's own objects stay Helm's.
        ("Values".to_owned(), json!({"greeting": "replaced"})),
        ("Release".to_owned(), json!({"Name": "replaced"})),
    ]
    .into()
}

#[test]
fn root_objects_reach_every_chart_and_never_replace_helms() {
    let out = run(runtime()).unwrap();
    for line in [
        "  instance: \"a/shop\"",
        "  domain: \"cluster.local\"",
        "  helper: \"echo@v1.0.0\"",
        "  tpl: \"echo\"",
        "  values: \"hi\"",
        "  release: \"shop\"",
        "  name: \"shop\"",
    ] {
        assert!(out.contains(line), "{line:?} not in\n{out}");
    }
}

#[test]
fn without_root_objects_a_chart_reading_them_fails_as_helm_template_does() {
    let err = run(BTreeMap::new()).unwrap_err();
    assert!(
        err.contains("nil pointer evaluating interface {}.Instance"),
        "{err}"
    );
}
