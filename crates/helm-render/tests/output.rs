//! Conformance: how `helm template` orders, splits and prints documents, hooks, CRDs and
//! `--show-only`, and its errors there. Templates here hold no template actions, so the
//! rows exercise the stages after the engine ([`helm_render::assemble`]) on their own; each
//! row is also checked against the real `helm`.

#[path = "support/common.rs"]
mod common;

use helm_render::{RenderOptions, assemble, load_files};

struct Row {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    args: &'static [&'static str],
    want: Result<&'static str, &'static str>,
}

const DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n";

const ROWS: &[Row] = &[
    Row {
        name: "kinds in install order, unknown kinds last by kind, ties by file then position",
        files: &[
            (
                "templates/a.yaml",
                "kind: Foo\nmetadata:\n  name: f1\n---\nkind: Deployment\nmetadata:\n  name: d1\n---\nkind: Bar\nmetadata:\n  name: b1\n---\nkind: ConfigMap\nmetadata:\n  name: zz\n",
            ),
            (
                "templates/b.yaml",
                "kind: ConfigMap\nmetadata:\n  name: aa\n---\nkind: Namespace\nmetadata:\n  name: n\n---\nkind: Service\nmetadata:\n  name: s\n---\nkind: Foo\nmetadata:\n  name: f0\n",
            ),
            (
                "templates/c.yaml",
                "kind: ValidatingWebhookConfiguration\nmetadata:\n  name: v\n---\nkind: PriorityClass\nmetadata:\n  name: p\n---\nkind: IngressClass\nmetadata:\n  name: ic\n---\nkind: SecretList\nmetadata:\n  name: sl\n---\nkind: MutatingWebhookConfiguration\nmetadata:\n  name: m\n",
            ),
        ],
        args: &[],
        want: Ok(
            "---\n# Source: t/templates/c.yaml\nkind: PriorityClass\nmetadata:\n  name: p\n---\n# Source: t/templates/b.yaml\nkind: Namespace\nmetadata:\n  name: n\n---\n# Source: t/templates/c.yaml\nkind: SecretList\nmetadata:\n  name: sl\n---\n# Source: t/templates/a.yaml\nkind: ConfigMap\nmetadata:\n  name: zz\n---\n# Source: t/templates/b.yaml\nkind: ConfigMap\nmetadata:\n  name: aa\n---\n# Source: t/templates/b.yaml\nkind: Service\nmetadata:\n  name: s\n---\n# Source: t/templates/a.yaml\nkind: Deployment\nmetadata:\n  name: d1\n---\n# Source: t/templates/c.yaml\nkind: IngressClass\nmetadata:\n  name: ic\n---\n# Source: t/templates/a.yaml\nkind: Bar\nmetadata:\n  name: b1\n---\n# Source: t/templates/a.yaml\nkind: Foo\nmetadata:\n  name: f1\n---\n# Source: t/templates/b.yaml\nkind: Foo\nmetadata:\n  name: f0\n---\n# Source: t/templates/c.yaml\nkind: MutatingWebhookConfiguration\nmetadata:\n  name: m\n---\n# Source: t/templates/c.yaml\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: v\n",
        ),
    },
    Row {
        name: "hooks after manifests, by kind; unknown hook dropped; test hooks kept",
        files: &[
            (
                "templates/hooks.yaml",
                "kind: Pod\nmetadata:\n  name: t1\n  annotations:\n    helm.sh/hook: test\n---\nkind: Job\nmetadata:\n  name: j1\n  annotations:\n    helm.sh/hook: pre-install,post-install\n    helm.sh/hook-weight: \"5\"\n---\nkind: ConfigMap\nmetadata:\n  name: c1\n  annotations:\n    helm.sh/hook: Pre-Upgrade\n---\nkind: Secret\nmetadata:\n  name: x\n  annotations:\n    helm.sh/hook: bogus\n---\nkind: ConfigMap\nmetadata:\n  name: plain\n  annotations:\n    other: yes\n",
            ),
            ("templates/deploy.yaml", DEPLOY),
        ],
        args: &[],
        want: Ok(
            "---\n# Source: t/templates/hooks.yaml\nkind: ConfigMap\nmetadata:\n  name: plain\n  annotations:\n    other: yes\n---\n# Source: t/templates/deploy.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n---\n# Source: t/templates/hooks.yaml\nkind: ConfigMap\nmetadata:\n  name: c1\n  annotations:\n    helm.sh/hook: Pre-Upgrade\n---\n# Source: t/templates/hooks.yaml\nkind: Pod\nmetadata:\n  name: t1\n  annotations:\n    helm.sh/hook: test\n---\n# Source: t/templates/hooks.yaml\nkind: Job\nmetadata:\n  name: j1\n  annotations:\n    helm.sh/hook: pre-install,post-install\n    helm.sh/hook-weight: \"5\"\n",
        ),
    },
    Row {
        name: "only hooks: the empty manifest part still prints its newline",
        files: &[(
            "templates/hook.yaml",
            "kind: Job\nmetadata:\n  name: j\n  annotations:\n    helm.sh/hook: post-install\n",
        )],
        args: &[],
        want: Ok(
            "\n---\n# Source: t/templates/hook.yaml\nkind: Job\nmetadata:\n  name: j\n  annotations:\n    helm.sh/hook: post-install\n",
        ),
    },
    Row {
        name: "separators, blank documents, comment-only documents, partials and NOTES",
        files: &[
            (
                "templates/a.yaml",
                "\n\n---\n---\n# just a comment\n---   \nkind: ConfigMap\nmetadata:\n  name: a\n  \n---\n\n",
            ),
            ("templates/_helpers.tpl", "kind: ConfigMap\n"),
            ("templates/NOTES.txt", "thanks\n"),
            ("templates/empty.yaml", "   \n"),
            ("templates/sep.yaml", "a: 1\n---\n\n---  \nb: 2\n"),
        ],
        args: &[],
        want: Ok(
            "---\n# Source: t/templates/a.yaml\nkind: ConfigMap\nmetadata:\n  name: a\n---\n# Source: t/templates/a.yaml\n---\n# just a comment\n---\n# Source: t/templates/sep.yaml\na: 1\n---\n# Source: t/templates/sep.yaml\n---  \nb: 2\n",
        ),
    },
    Row {
        name: "--include-crds: CRDs first, chart then subcharts, raw",
        files: &[
            (
                "crds/b.yaml",
                "kind: CustomResourceDefinition\nmetadata:\n  name: b\n---\nkind: CustomResourceDefinition\nmetadata:\n  name: b2\n",
            ),
            ("crds/a.JSON", "{\"kind\": \"CustomResourceDefinition\"}"),
            ("crds/notes.txt", "not a crd"),
            (
                "charts/sub/Chart.yaml",
                "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
            ),
            (
                "charts/sub/crds/s.yml",
                "kind: CustomResourceDefinition\nmetadata:\n  name: s\n",
            ),
            (
                "charts/sub/templates/cm.yaml",
                "kind: ConfigMap\nmetadata:\n  name: sub\n",
            ),
            ("templates/deploy.yaml", DEPLOY),
        ],
        args: &["--include-crds"],
        want: Ok(
            "---\n# Source: t/crds/a.JSON\n{\"kind\": \"CustomResourceDefinition\"}\n---\n# Source: t/crds/b.yaml\nkind: CustomResourceDefinition\nmetadata:\n  name: b\n---\nkind: CustomResourceDefinition\nmetadata:\n  name: b2\n\n---\n# Source: t/charts/sub/crds/s.yml\nkind: CustomResourceDefinition\nmetadata:\n  name: s\n\n---\n# Source: t/charts/sub/templates/cm.yaml\nkind: ConfigMap\nmetadata:\n  name: sub\n---\n# Source: t/templates/deploy.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n",
        ),
    },
    Row {
        name: "CRDs are not printed without --include-crds",
        files: &[
            (
                "crds/b.yaml",
                "kind: CustomResourceDefinition\nmetadata:\n  name: b\n",
            ),
            ("templates/deploy.yaml", DEPLOY),
        ],
        args: &[],
        want: Ok(
            "---\n# Source: t/templates/deploy.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n",
        ),
    },
    Row {
        name: "--show-only: pattern by pattern, globs, subchart paths",
        files: &[
            (
                "templates/a.yaml",
                "kind: ConfigMap\nmetadata:\n  name: a\n---\nkind: Secret\nmetadata:\n  name: a2\n",
            ),
            (
                "templates/b.yaml",
                "kind: Namespace\nmetadata:\n  name: b\n",
            ),
            (
                "charts/sub/Chart.yaml",
                "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
            ),
            (
                "charts/sub/templates/cm.yaml",
                "kind: ConfigMap\nmetadata:\n  name: sub\n",
            ),
            (
                "templates/hook.yaml",
                "kind: Job\nmetadata:\n  name: j\n  annotations:\n    helm.sh/hook: post-install\n",
            ),
        ],
        args: &[
            "--show-only",
            "templates/hook.yaml",
            "--show-only",
            "templates/a.yaml",
            "--show-only",
            "charts/*/templates/*",
            "--show-only",
            "templates/a.yaml",
        ],
        want: Ok(
            "---\n# Source: t/templates/hook.yaml\nkind: Job\nmetadata:\n  name: j\n  annotations:\n    helm.sh/hook: post-install\n---\n# Source: t/templates/a.yaml\nkind: Secret\nmetadata:\n  name: a2\n---\n# Source: t/templates/a.yaml\nkind: ConfigMap\nmetadata:\n  name: a\n---\n# Source: t/charts/sub/templates/cm.yaml\nkind: ConfigMap\nmetadata:\n  name: sub\n---\n# Source: t/templates/a.yaml\nkind: Secret\nmetadata:\n  name: a2\n---\n# Source: t/templates/a.yaml\nkind: ConfigMap\nmetadata:\n  name: a\n",
        ),
    },
    Row {
        name: "--show-only of a template that is not there",
        files: &[(
            "templates/a.yaml",
            "kind: ConfigMap\nmetadata:\n  name: a\n",
        )],
        args: &[
            "--show-only",
            "templates/a.yaml",
            "--show-only",
            "templates/nope.yaml",
        ],
        want: Err("Error: could not find template templates/nope.yaml in chart"),
    },
    Row {
        name: "a document that is not a map",
        files: &[("templates/a.yaml", "- a\n- b\n")],
        args: &[],
        want: Err(
            "Error: YAML parse error on t/templates/a.yaml: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type releaseutil.SimpleHead",
        ),
    },
    Row {
        name: "a kind that is not a string",
        files: &[("templates/a.yaml", "kind: [1]\n")],
        args: &[],
        want: Err(
            "Error: YAML parse error on t/templates/a.yaml: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go struct field SimpleHead.kind of type string",
        ),
    },
];

fn chart_files(row: &Row) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = row
        .files
        .iter()
        .map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec()))
        .collect();
    files.push((
        "Chart.yaml".into(),
        b"apiVersion: v2\nname: t\nversion: 0.1.0\n".to_vec(),
    ));
    files.push(("values.yaml".into(), Vec::new()));
    // The order Helm's directory walk gives.
    files.sort();
    files
}

fn options(args: &[&str]) -> RenderOptions {
    let mut opts = RenderOptions {
        release_name: "t".into(),
        ..RenderOptions::default()
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "--include-crds" => opts.include_crds = true,
            "--show-only" => opts.show_only.push((*it.next().expect("value")).to_owned()),
            other => panic!("unknown flag {other}"),
        }
    }
    opts
}

/// The engine's output for templates without actions: each non-partial template as is.
fn literal_render(chart: &helm_render::Chart, prefix: &str, out: &mut Vec<(String, String)>) {
    for t in &chart.templates {
        out.push((
            format!("{prefix}/{}", t.name),
            String::from_utf8_lossy(&t.data).into_owned(),
        ));
    }
    for d in &chart.dependencies {
        literal_render(d, &format!("{prefix}/charts/{}", d.name()), out);
    }
}

fn ours(row: &Row) -> Result<String, String> {
    let chart = load_files(chart_files(row)).map_err(|e| format!("Error: {e}"))?;
    let mut rendered = Vec::new();
    literal_render(&chart, "t", &mut rendered);
    assemble(&chart, rendered, &options(row.args)).map_err(|e| {
        e.stderr()
            .trim_end()
            .trim_end_matches("Use --debug flag to render out invalid YAML")
            .trim_end()
            .to_owned()
    })
}

fn check(got: &[(&str, Result<String, String>)]) {
    let wants: Vec<(&str, Result<&str, &str>)> = ROWS.iter().map(|r| (r.name, r.want)).collect();
    let got: Vec<Result<String, String>> = got.iter().map(|(_, g)| g.clone()).collect();
    common::check(&wants, &got);
}

#[test]
fn output_table_is_what_helm_prints() {
    let got: Vec<_> = ROWS
        .iter()
        .map(|r| (r.name, helm_oracle::helm_template(r.files, "", r.args)))
        .collect();
    check(&got);
}

#[test]
fn output_table_is_what_we_print() {
    let got: Vec<_> = ROWS.iter().map(|r| (r.name, ours(r))).collect();
    check(&got);
}
