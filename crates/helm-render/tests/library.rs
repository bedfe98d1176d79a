//! A module-like chart with a library chart in `charts/`: the library's defines used by the
//! chart and by a subchart (one template set across charts), the library's non-partial
//! template never rendered, subchart values, `global`, a `condition`, and an `alias` of the
//! same subchart. Rendered by us and by the real `helm template`: the outputs must be equal.

#[path = "support/common.rs"]
mod common;

const LIB_CHART: &str = "apiVersion: v2\nname: lib\nversion: 0.1.0\ntype: library\n";

const LIB_HELPERS: &str = r#"{{- define "lib.fullname" -}}
{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "lib.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
heritage: {{ .Release.Service }}
{{- with .Values.global }}
env: {{ .env | quote }}
{{- end }}
{{- end -}}

{{- define "lib.configmap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "lib.fullname" . }}
  labels:
    {{- include "lib.labels" . | nindent 4 }}
data:
  {{- range $k, $v := .Values.config }}
  {{ $k }}: {{ $v | quote }}
  {{- end }}
{{- end -}}
"#;

const FILES: &[(&str, &str)] = &[
    (
        "Chart.yaml",
        "apiVersion: v2\nname: app\nversion: 1.0.0\nappVersion: \"2.3\"\ndependencies:\n- name: lib\n  version: 0.1.0\n- name: worker\n  version: \"~0.2\"\n  condition: worker.enabled\n- name: worker\n  alias: cron\n  version: \"~0.2\"\n  condition: cron.enabled\n",
    ),
    ("charts/lib/Chart.yaml", LIB_CHART),
    ("charts/lib/templates/_helpers.tpl", LIB_HELPERS),
    (
        "charts/lib/templates/never.yaml",
        "kind: ConfigMap\nmetadata:\n  name: never\n",
    ),
    (
        "charts/worker/Chart.yaml",
        "apiVersion: v2\nname: worker\nversion: 0.2.1\ndependencies:\n- name: lib\n  version: 0.1.0\n",
    ),
    ("charts/worker/charts/lib/Chart.yaml", LIB_CHART),
    (
        "charts/worker/charts/lib/templates/_helpers.tpl",
        LIB_HELPERS,
    ),
    (
        "charts/worker/values.yaml",
        "replicas: 1\nschedule: \"\"\nconfig:\n  mode: worker\n",
    ),
    (
        "charts/worker/templates/deployment.yaml",
        r#"apiVersion: apps/v1
kind: {{ if .Values.schedule }}CronJob{{ else }}Deployment{{ end }}
metadata:
  name: {{ include "lib.fullname" . }}
  labels:
    {{- include "lib.labels" . | nindent 4 }}
spec:
  {{- if .Values.schedule }}
  schedule: {{ .Values.schedule | quote }}
  {{- else }}
  replicas: {{ .Values.replicas }}
  {{- end }}
  image: {{ .Values.global.registry }}/worker:{{ .Chart.Version }}
"#,
    ),
    (
        "charts/worker/templates/configmap.yaml",
        "{{ include \"lib.configmap\" . }}\n",
    ),
    (
        "templates/configmap.yaml",
        "{{ include \"lib.configmap\" . }}\n",
    ),
    (
        "templates/service.yaml",
        r#"apiVersion: v1
kind: Service
metadata:
  name: {{ include "lib.fullname" . }}
  labels:
    {{- include "lib.labels" . | nindent 4 }}
spec:
  ports:
  {{- range .Values.ports }}
  - port: {{ . }}
  {{- end }}
  # subcharts: {{ keys .Subcharts | sortAlpha | join "," }}
"#,
    ),
    ("templates/NOTES.txt", "Installed {{ .Release.Name }}.\n"),
];

const VALUES: &str = r#"global:
  env: production
  registry: registry.example.com
config:
  greeting: hello
  count: 3
ports: [80, 443]
worker:
  replicas: 3
cron:
  enabled: true
  schedule: "*/5 * * * *"
  config:
    mode: cron
"#;

#[test]
fn library_chart_renders_as_helm_renders_it() {
    let args = [
        "--set",
        "worker.config.extra=from-set",
        "--namespace",
        "modules",
    ];
    let helm = helm_oracle::helm_template(FILES, VALUES, &args);
    let ours = common::ours(FILES, VALUES, &args);
    let helm = helm.expect("helm renders the chart");
    assert!(helm.contains("kind: CronJob"), "the alias renders: {helm}");
    assert!(!helm.contains("never"), "library templates do not render");
    assert_eq!(ours.as_deref(), Ok(helm.as_str()));
}

#[test]
fn library_chart_with_the_worker_disabled() {
    let args = [
        "--set",
        "worker.enabled=false",
        "--show-only",
        "charts/*/templates/*",
    ];
    let helm = helm_oracle::helm_template(FILES, VALUES, &args);
    let ours = common::ours(FILES, VALUES, &args);
    let helm = helm.expect("helm renders the chart");
    assert!(
        !helm.contains("charts/worker/"),
        "condition false drops the subchart: {helm}"
    );
    assert_eq!(ours.as_deref(), Ok(helm.as_str()));
}
