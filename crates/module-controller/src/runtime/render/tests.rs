use serde_json::json;

use super::*;

fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

#[test]
fn a_module_without_chart_yaml_gets_addon_operators() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("templates/cm.yaml", "kind: ConfigMap\n"),
            ("openapi/config-values.yaml", "type: object\n"),
            (".helmignore", "openapi\n"),
        ],
    );
    let files = read_chart("echo-server", dir.path()).unwrap().unwrap();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        vec![".helmignore", "templates/cm.yaml", "Chart.yaml"]
    );
    assert_eq!(
        files[2].1,
        b"apiVersion: v2\nname: echo-server\nversion: 0.2.0\n".to_vec()
    );
    // Neither Chart.yaml nor templates/: not a Helm module.
    let empty = tempfile::tempdir().unwrap();
    write(empty.path(), &[("hooks/a.sh", "#!/bin/sh\n")]);
    assert!(read_chart("x", empty.path()).unwrap().is_none());
}

#[test]
fn values_sit_under_global_and_the_camel_case_key() {
    assert_eq!(
        chart_values("cert-manager", &json!({"a": 1}), &json!({"replicas": 2})),
        json!({"global": {"a": 1}, "certManager": {"replicas": 2}})
    );
}

#[test]
fn manifests_become_objects() {
    let manifest = "---\n# Source: m/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  n: \"1\"\n---\n# Source: m/templates/d.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: 3\n---\n# Source: m/templates/hook.yaml\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: h\n  annotations:\n    helm.sh/hook: pre-install\n";
    let objects = parse_manifest(manifest).unwrap();
    assert_eq!(objects.len(), 2);
    // Integers stay integers (kubectl's reading, not Helm's values reading).
    assert_eq!(objects[1]["spec"]["replicas"], json!(3));
    let rows: &[(&str, &str)] = &[
        (
            "---\n# Source: m/templates/x.yaml\nmetadata:\n  name: x\n",
            "m/templates/x.yaml: Object 'Kind' is missing or apiVersion is not set",
        ),
        (
            "---\n# Source: m/templates/x.yaml\napiVersion: v1\nkind: ConfigMap\n",
            "m/templates/x.yaml: ConfigMap has no metadata.name",
        ),
        (
            "---\n# Source: m/templates/x.yaml\n- a\n",
            "m/templates/x.yaml: a document is not an object",
        ),
    ];
    for (text, want) in rows {
        assert_eq!(parse_manifest(text).unwrap_err(), *want, "{text}");
    }
}

#[test]
fn decorated_as_helm_marks_release_resources() {
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"heritage": "deckhouse"}}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "labels": null}}),
    ];
    decorate(
        &mut objects,
        "echo",
        "d8-echo",
        &[(api::keys::LABEL_MAINTENANCE_NO_RESOURCE_RECONCILIATION, "")],
    );
    assert_eq!(
        objects[0]["metadata"],
        json!({"name": "a",
            "labels": {"heritage": "deckhouse", "app.kubernetes.io/managed-by": "Helm",
                "maintenance.deckhouse.io/no-resource-reconciliation": ""},
            "annotations": {"meta.helm.sh/release-name": "echo", "meta.helm.sh/release-namespace": "d8-echo"}})
    );
    assert_eq!(
        objects[1]["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "Helm"
    );
}

#[tokio::test]
async fn a_module_renders_with_helm_lib_and_values() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            (
                "charts/helm_lib/Chart.yaml",
                "apiVersion: v2\nname: deckhouse_lib_helm\nversion: 1.0.0\ntype: library\n",
            ),
            (
                "charts/helm_lib/templates/_labels.tpl",
                "{{- define \"helm_lib_module_labels\" }}\n{{- $context := index . 0 -}}\nlabels:\n  heritage: deckhouse\n  module: {{ $context.Chart.Name }}\n{{- end }}\n",
            ),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: echo\n  {{- include \"helm_lib_module_labels\" (list .) | nindent 2 }}\ndata:\n  replicas: {{ .Values.echoServer.replicas | quote }}\n  domain: {{ .Values.global.clusterDomain }}\n  ns: {{ .Release.Namespace }}\n",
            ),
        ],
    );
    let files = read_chart("echo-server", dir.path()).unwrap().unwrap();
    let values = chart_values(
        "echo-server",
        &json!({"clusterDomain": "cluster.local"}),
        &json!({"replicas": 2}),
    );
    let rendered = render("echo-server", files, &values, Default::default(), "d8-echo")
        .await
        .unwrap();
    assert!(
        rendered
            .manifest
            .starts_with("---\n# Source: echo-server/templates/cm.yaml\n"),
        "{}",
        rendered.manifest
    );
    assert_eq!(
        rendered.objects,
        vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "echo", "labels": {"heritage": "deckhouse", "module": "echo-server"}},
            "data": {"replicas": "2", "domain": "cluster.local", "ns": "d8-echo"}})]
    );
    // Helm's error, with the module named.
    let bad = tempfile::tempdir().unwrap();
    write(
        bad.path(),
        &[("templates/x.yaml", "{{ .Values.nope.deeper }}\n")],
    );
    let files = read_chart("bad", bad.path()).unwrap().unwrap();
    let err = render("bad", files, &json!({}), Default::default(), "d8-system")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("module bad: template: bad/templates/x.yaml:1:"),
        "{err}"
    );
}
