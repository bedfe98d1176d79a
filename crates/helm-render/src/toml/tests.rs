//! `toToml` against a table Helm confirms.

use go_template::Value;

/// (a value written in values.yaml, `toToml` of it as Helm writes it).
const TOML: &[(&str, &str)] = &[
    (
        r#"{b: 1, a: "x", c: {d: [1, 2], e: {f: true}}, g: [{h: 1}, {i: "j"}], k: [], l: {}, "m n": 1.5, o: null}"#,
        "a = \"x\"\nb = 1.0\nk = []\n\"m n\" = 1.5\n\n[c]\n  d = [1.0, 2.0]\n  [c.e]\n    f = true\n\n[[g]]\n  h = 1.0\n\n[[g]]\n  i = \"j\"\n\n[l]\n",
    ),
    (
        r#"{a: [1, {b: 2}], c: "q\"u\\o\te\u0001\u007f"}"#,
        "a = [1.0, {b = 2.0}]\nc = \"q\\\"u\\\\o\\te\\u0001\\u007f\"\n",
    ),
    (
        r#"{a: [1, null]}"#,
        "toml: cannot encode array with nil element",
    ),
    (
        r#"{x: 1e21, y: 1e-7, z: 100, w: 0.5}"#,
        "true = 0.0000001\nw = 0.5\nx = 1000000000000000000000.0\nz = 100.0\n",
    ),
    (
        r#"{a: {b: {c: {d: 1}}, e: 2}, f: [[{g: 1}]], "": 1, "é": 2, "a.b": 3}"#,
        "\"\" = 1.0\n\"a.b\" = 3.0\nf = [[{g = 1.0}]]\n\"é\" = 2.0\n\n[a]\n  e = 2.0\n  [a.b]\n    [a.b.c]\n      d = 1.0\n",
    ),
    (r#""x""#, "\"x\""),
    ("[1, 2]", "[1.0, 2.0]"),
    ("1.5", "1.5"),
    (
        "{a: [{b: {c: 1}, d: 2}], e: [1, [2, {f: 3}]]}",
        "e = [1.0, [2.0, {f = 3.0}]]\n\n[[a]]\n  d = 2.0\n  [a.b]\n    c = 1.0\n",
    ),
    ("{a: [{b: [{c: 1}]}]}", "[[a]]\n\n  [[a.b]]\n    c = 1.0\n"),
    (
        "{a: [1, {b: {c: 1}, d: 2}]}",
        "a = [1.0, {d = 2.0, b = {c = 1.0}}]\n",
    ),
];

fn values_doc() -> String {
    TOML.iter()
        .enumerate()
        .map(|(i, (v, _))| format!("r{i}: {v}\n"))
        .collect()
}

#[test]
fn toml_table_matches_ours() {
    let values = crate::parse_values(&values_doc()).expect("the table's values parse");
    let mut failures = Vec::new();
    for (i, (input, want)) in TOML.iter().enumerate() {
        let v = values.get(&format!("r{i}")).cloned().unwrap_or(Value::Nil);
        let got = super::encode(&v).unwrap_or_else(|e| e);
        if got != *want {
            failures.push(format!("{input}\n   want {want:?}\n    got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn toml_table_matches_helm() {
    let snippets: Vec<String> = (0..TOML.len())
        .map(|i| format!("{{{{ toToml .Values.r{i} }}}}"))
        .collect();
    let snippets: Vec<&str> = snippets.iter().map(String::as_str).collect();
    let got = helm_oracle::eval(&snippets, &values_doc());
    for ((input, want), got) in TOML.iter().zip(got) {
        assert_eq!(got.as_deref(), Ok(*want), "{input}");
    }
}
