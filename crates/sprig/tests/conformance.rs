//! Sprig's functions against real Helm: every row of `conformance/table.rs` is a template
//! snippet with the output (or error) Helm 3.17.3 gives it. One test asserts Helm still
//! agrees with the table; the other runs each row through this crate's functions.

#[path = "conformance/mini.rs"]
mod mini;
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

#[test]
fn sprig_agrees_with_the_table() {
    let funcs = sprig::funcs();
    let values = values();
    let mut failures = Vec::new();
    for (snippet, want) in table::OUTPUTS {
        match mini::eval(&funcs, snippet, &values) {
            Ok(got) if got == *want => {}
            got => failures.push(format!("{snippet}\n   want {want:?}\n   got  {got:?}")),
        }
    }
    for (snippet, want) in table::ERRORS {
        // Errors the executor raises itself (argument conversion) are the engine's to check.
        if !want.starts_with("error calling ") && *snippet != r#"{{ fail "boom" }}"# {
            continue;
        }
        match mini::eval(&funcs, snippet, &values) {
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

/// Results no real chart needs are refused instead of exhausting memory (Helm would try).
#[test]
fn huge_results_are_refused() {
    let funcs = sprig::funcs();
    let values = values();
    for (snippet, want) in [
        (
            r#"{{ repeat 100000000 "ab" }}"#,
            "error calling repeat: repeat: the result would be 200000000 bytes, above the limit of 67108864",
        ),
        (
            "{{ until 20000000 }}",
            "error calling until: until: the result would have 20000000 elements, above the limit of 10000000",
        ),
        (
            "{{ untilStep 0 9223372036854775807 1 }}",
            "error calling untilStep: untilStep: the result would have 9223372036854775807 elements, above the limit of 10000000",
        ),
        (
            "{{ seq 0 100000000 }}",
            "error calling seq: seq: the result would have 100000001 elements, above the limit of 10000000",
        ),
        (
            r#"{{ indent 100000000 "a" }}"#,
            "error calling indent: indent: the result would be 100000000 bytes, above the limit of 67108864",
        ),
        (
            r#"{{ wrapWith 1 (repeat 1000000 "x") (repeat 1000 "ab") }}"#,
            "error calling wrapWith: wrapWith: the result would be",
        ),
    ] {
        let got = mini::eval(&funcs, snippet, &values);
        assert!(
            got.as_ref().is_err_and(|e| e.starts_with(want)),
            "{snippet}: {got:?}"
        );
    }
}
