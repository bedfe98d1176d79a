//! Sprig's functions against real Helm: every row of `conformance/table.rs` is a template
//! snippet with the output (or error) Helm 3.17.3 gives it. One test asserts Helm still
//! agrees with the table; the other runs each row through go-template's engine with this
//! crate's functions.

#[path = "support/engine.rs"]
mod engine;
#[path = "conformance/table.rs"]
mod table;

use go_template::Value;

fn values() -> Value {
    let json: serde_json::Value = serde_json::from_str(table::VALUES).expect("VALUES is JSON");
    Value::map(
        [("Values".to_owned(), Value::from_json(&json))]
            .into_iter()
            .collect(),
    )
}

#[test]
fn helm_agrees_with_the_table() {
    let snippets: Vec<&str> = table::OUTPUTS.iter().map(|(s, _)| *s).collect();
    let got = helm_oracle::eval(&snippets, table::VALUES);
    for ((snippet, want), got) in table::OUTPUTS.iter().zip(got) {
        assert_eq!(got.as_deref(), Ok(*want), "helm on {snippet}");
    }
    // Each failing snippet needs a helm run of its own; run them four at a time.
    std::thread::scope(|scope| {
        let rows: Vec<_> = table::ERRORS
            .chunks(table::ERRORS.len().div_ceil(4))
            .collect();
        for chunk in rows {
            scope.spawn(move || {
                for (snippet, want) in chunk {
                    let got = helm_oracle::eval_one(snippet, table::VALUES);
                    match got {
                        Err(e) => {
                            assert!(e.ends_with(&format!(": {want}")), "helm on {snippet}: {e}")
                        }
                        Ok(out) => {
                            panic!("helm rendered {snippet} as {out:?}, the table expects {want}")
                        }
                    }
                }
            });
        }
    });
}

/// Results no real chart needs are refused instead of exhausting memory (Helm would try).
#[test]
fn huge_results_are_refused() {
    for (snippet, want) in [
        (
            r#"{{ repeat 100000000 "ab" }}"#,
            "error calling repeat: the result would be 200000000 bytes, above the limit of 67108864",
        ),
        (
            "{{ until 20000000 }}",
            "error calling until: the result would have 20000000 elements, above the limit of 10000000",
        ),
        (
            "{{ untilStep 0 9223372036854775807 1 }}",
            "error calling untilStep: the result would have 9223372036854775807 elements, above the limit of 10000000",
        ),
        (
            "{{ seq 0 100000000 }}",
            "error calling seq: the result would have 100000001 elements, above the limit of 10000000",
        ),
        (
            r#"{{ indent 100000000 "a" }}"#,
            "error calling indent: the result would be 100000000 bytes, above the limit of 67108864",
        ),
        (
            r#"{{ wrapWith 1 (repeat 1000000 "x") (repeat 1000 "ab") }}"#,
            "error calling wrapWith: the result would be",
        ),
    ] {
        let got = render(snippet);
        assert!(
            got.as_ref().is_err_and(|e| e.contains(want)),
            "{snippet}: {got:?}"
        );
    }
}

/// Runs a snippet through the template engine as Helm's engine would, with the table's
/// values.
fn render(snippet: &str) -> Result<String, String> {
    engine::render_with(snippet, &values())
}

#[test]
fn the_engine_with_sprig_agrees_with_the_table() {
    let mut failures = Vec::new();
    for (snippet, want) in table::OUTPUTS {
        match render(snippet) {
            Ok(got) if got == *want => {}
            got => failures.push(format!("{snippet}\n   want {want:?}\n   got  {got:?}")),
        }
    }
    for (snippet, want) in table::ERRORS {
        match render(snippet) {
            Err(e) if e.ends_with(want) => {}
            got => failures.push(format!(
                "{snippet}\n   want error {want:?}\n   got  {got:?}"
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} rows differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
