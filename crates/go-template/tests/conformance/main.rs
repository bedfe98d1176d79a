//! Conformance tables: template snippets with the output (or the error) Go's text/template
//! gives under Helm. Every table is checked twice: against real Helm (`helm_oracle`, which
//! runs `helm template`), so that no entry is a guess, and against this crate.
//!
//! Snippets run as Helm runs a chart's template: named `t/templates/case.yaml`, dot holding
//! `.Values` (from [`VALUES`]), `missingkey=zero`, the defines of [`DEFINES`] parsed first from
//! `t/templates/_defs.tpl`. Output is compared through `include` (so `<no value>` stays, as
//! Go prints it; Helm removes it only from a file's own output). Functions besides Go's
//! builtins are test stand-ins with the Go signatures Helm's have (`upper`, `repeat`,
//! `list`, `atoi`, `include`, `tpl`).
//!
//! Expected errors are Go's own text (what [`go_template::Error`] displays); Helm shows exec
//! errors as they are and rewrites parse errors (`parse error at (NAME:LINE): <last part>`),
//! which [`helm_form`] reproduces for the comparison.

mod builtins;
mod constructs;

use std::sync::Mutex;

use go_template::{
    CallError, ErrorKind, Func, FuncMap, MissingKey, Signature, Templates, Ty, Value,
};

/// One row: a snippet and Go's output, or Go's error message.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row {
    pub(crate) snippet: &'static str,
    pub(crate) expect: Result<&'static str, &'static str>,
}

pub(crate) const fn ok(snippet: &'static str, out: &'static str) -> Row {
    Row {
        snippet,
        expect: Ok(out),
    }
}

pub(crate) const fn err(snippet: &'static str, message: &'static str) -> Row {
    Row {
        snippet,
        expect: Err(message),
    }
}

/// The chart's values (JSON is YAML): numbers are float64 in Helm.
pub(crate) const VALUES: &str = r#"{"s": "str", "n": 1, "f": 1.5, "big": 12345678, "t": true,
"list": [1, "a", null], "empty": [], "nums": [3, 1, 2],
"m": {"b": 2, "a": 1, "c": {"d": "deep"}}, "nul": null, "zero": 0, "emptys": "",
"html": "<a href='x'>&\"</a>", "sn": "5"}"#;

/// Templates every snippet can call, in their own file.
pub(crate) const DEFINES: &str = r#"{{- define "x" }}X{{ . }}{{ end -}}
{{- define "inc" }}[{{ . }}]{{ end -}}
{{- define "dollar" }}{{ $ }}{{ end -}}
{{- define "fails" }}
{{ .nope.deeper }}{{ end -}}
{{- define "self" }}{{ template "self" . }}{{ end -}}
{{- define "field" }}{{ .foo }}{{ end -}}
"#;

pub(crate) const CASE: &str = "t/templates/case.yaml";
const DEFS: &str = "t/templates/_defs.tpl";

fn stand_ins() -> FuncMap {
    let mut f = FuncMap::new();
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    f.insert(
        "upper".into(),
        Func::new(Signature::fixed(&[Ty::String]), move |a| {
            Ok(Value::string(s(&a[0]).to_uppercase()))
        }),
    );
    f.insert(
        "repeat".into(),
        Func::new(Signature::fixed(&[Ty::Int, Ty::String]), move |a| {
            let n = match a[0] {
                Value::Int(n) => n.max(0) as usize,
                _ => 0,
            };
            Ok(Value::string(s(&a[1]).repeat(n)))
        }),
    );
    f.insert(
        "list".into(),
        Func::new(Signature::variadic(&[], Ty::Any), |a| {
            Ok(Value::list(a.to_vec()))
        }),
    );
    f.insert(
        "atoi".into(),
        Func::new(Signature::fixed(&[Ty::String]), move |a| {
            Ok(Value::Int(s(&a[0]).parse().unwrap_or(0)))
        }),
    );
    f.insert(
        "include".into(),
        Func::with_env(Signature::fixed(&[Ty::String, Ty::Any]), move |env, a| {
            env.execute_template(&s(&a[0]), &a[1]).map(Value::string)
        }),
    );
    f.insert(
        "tpl".into(),
        Func::with_env(Signature::fixed(&[Ty::String, Ty::Any]), move |env, a| {
            env.execute_text("gotpl", &s(&a[0]), &a[1])
                .map(Value::string)
                .map_err(|e| match e {
                    CallError::Call(m) | CallError::Exec(m) | CallError::Parse(m) => {
                        CallError::Call(m)
                    }
                })
        }),
    );
    f
}

/// What this crate gives for a snippet: output, or the error's message.
pub(crate) fn ours(snippet: &str) -> Result<String, String> {
    let mut t = Templates::new(stand_ins());
    t.set_missing_key(MissingKey::Zero);
    t.parse(DEFS, DEFINES)
        .map_err(|e| format!("defines: {e}"))?;
    t.parse(CASE, snippet)
        .map_err(|e| helm_form(e.kind, &e.message))?;
    let values: serde_json::Value = serde_json::from_str(VALUES).expect("VALUES is JSON");
    let mut top = go_template::Map::new();
    top.insert("Values".into(), Value::from_json(&values));
    t.execute(CASE, &Value::map(top))
        .map_err(|e| helm_form(e.kind, &e.message))
}

/// Helm's rendering of a Go error: exec errors as they are, parse errors rewritten by its
/// `cleanupParseError`; `Error: ` in front, as `helm template` prints it.
pub(crate) fn helm_form(kind: ErrorKind, message: &str) -> String {
    match kind {
        ErrorKind::Exec => format!("Error: {message}"),
        ErrorKind::Parse => {
            let tokens: Vec<&str> = message.split(": ").collect();
            let location = tokens.get(1).copied().unwrap_or_default();
            let last = tokens.last().copied().unwrap_or_default();
            format!("Error: parse error at ({location}): {last}")
        }
    }
}

/// The expected result of a row in Helm's words.
fn expected(row: &Row) -> Result<String, String> {
    match row.expect {
        Ok(out) => Ok(out.to_owned()),
        Err(msg) => {
            let kind = if msg.contains(": executing \"") || msg.starts_with("template: no template")
            {
                ErrorKind::Exec
            } else {
                ErrorKind::Parse
            };
            Err(helm_form(kind, msg))
        }
    }
}

/// What real Helm gives for each row: the rows that succeed in one `helm template` run
/// (through `include … | toJson`), each failing one alone, twelve at a time (a run mostly waits).
fn helm(rows: &[Row]) -> Vec<Result<String, String>> {
    let oks: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].expect.is_ok())
        .collect();
    let mut results: Vec<Option<Result<String, String>>> = vec![None; rows.len()];
    let mut cases = String::new();
    let mut uses = String::new();
    for &i in &oks {
        cases.push_str(&format!(
            "{{{{- define \"case{i}\" }}}}{}{{{{ end -}}}}\n",
            rows[i].snippet
        ));
        uses.push_str(&format!("c{i}: {{{{ include \"case{i}\" . | toJson }}}}\n"));
    }
    let batch = helm_oracle::helm_template(
        &[
            ("templates/_defs.tpl", DEFINES),
            ("templates/_cases.tpl", &cases),
            ("templates/cases.yaml", &uses),
        ],
        VALUES,
        &[],
    );
    match batch {
        Ok(out) => {
            for &i in &oks {
                let prefix = format!("c{i}: ");
                let line = out.lines().find_map(|l| l.strip_prefix(prefix.as_str()));
                results[i] = Some(match line {
                    Some(json) => {
                        Ok(serde_json::from_str(json).expect("toJson gives a JSON string"))
                    }
                    None => Err(format!("no output line for case {i}")),
                });
            }
        }
        // Some row that should succeed fails: find it by running every row alone.
        Err(e) => eprintln!("batch failed: {e}"),
    }
    let todo: Vec<usize> = (0..rows.len()).filter(|&i| results[i].is_none()).collect();
    let results = Mutex::new(results);
    let next = Mutex::new(todo.into_iter());
    std::thread::scope(|s| {
        for _ in 0..12 {
            s.spawn(|| {
                loop {
                    let Some(i) = next.lock().expect("lock").next() else {
                        break;
                    };
                    let r = alone(rows[i].snippet);
                    results.lock().expect("lock")[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("lock")
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("not run".into())))
        .collect()
}

/// One snippet as `templates/case.yaml` beside the defines: Helm's error, or (when it renders)
/// its output through `include`.
fn alone(snippet: &str) -> Result<String, String> {
    match helm_oracle::helm_template(
        &[
            ("templates/_defs.tpl", DEFINES),
            ("templates/case.yaml", snippet),
        ],
        VALUES,
        &[],
    ) {
        // It rendered, into something that is not a YAML document: fine, see below.
        Err(e) if !e.starts_with("Error: YAML parse error on ") => return Err(e),
        _ => {}
    }
    let define = format!("{{{{- define \"case\" }}}}{snippet}{{{{ end -}}}}\n");
    let out = helm_oracle::helm_template(
        &[
            ("templates/_defs.tpl", DEFINES),
            ("templates/_case.tpl", &define),
            (
                "templates/cases.yaml",
                "c: {{ include \"case\" . | toJson }}\n",
            ),
        ],
        VALUES,
        &[],
    )?;
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("c: "))
        .unwrap_or("\"\"");
    Ok(serde_json::from_str(line).expect("toJson gives a JSON string"))
}

pub(crate) fn assert_helm_agrees(rows: &[Row]) {
    let got = helm(rows);
    let mut bad = Vec::new();
    for (row, got) in rows.iter().zip(got) {
        let want = expected(row);
        if got != want {
            bad.push(format!(
                "{:?}\n   table: {want:?}\n   helm:  {got:?}",
                row.snippet
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} rows differ from helm:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

pub(crate) fn assert_we_agree(rows: &[Row]) {
    let mut bad = Vec::new();
    for row in rows {
        let want = expected(row);
        let got = ours(row.snippet);
        if got != want {
            bad.push(format!(
                "{:?}\n   table: {want:?}\n   ours:  {got:?}",
                row.snippet
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} rows differ from ours:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
