//! The encoding functions run through the template engine, as a chart calls them: Go's
//! argument checks, printing of the results, and errors — each row checked against Helm.

use go_template::{ErrorKind, MissingKey, Templates, Value};

/// The chart's values, read by our own values reader.
const VALUES: &str = "s: \"<b>&\"\nnum: 1\nf: 1.5\nbig: 12345678\nyes: yes\nlist: [1, a, null]\nm: {b: 2, a: {c: [x]}}\nml: \"a\\nb\\n\"\nempty: {}\n";

const CASE: &str = "t/templates/case.yaml";

/// (snippet, Helm's output or Helm's error).
const ROWS: &[(&str, Result<&str, &str>)] = &[
    (
        "{{ toYaml .Values }}",
        Ok(
            "big: 12345678\nempty: {}\nf: 1.5\nlist:\n- 1\n- a\n- null\nm:\n  a:\n    c:\n    - x\n  b: 2\nml: |\n  a\n  b\nnum: 1\ns: <b>&\n\"true\": true",
        ),
    ),
    (
        "{{ toYaml 3 }}|{{ toYaml 1.5 }}|{{ toYaml \"3\" }}|{{ toYaml nil }}|{{ toYaml true }}",
        Ok("3|1.5|\"3\"|null|true"),
    ),
    (
        "{{ toJson .Values.s }}|{{ toRawJson .Values.s }}|{{ toJson 3 }}|{{ toJson .Values.big }}",
        Ok("\"\\u003cb\\u003e\\u0026\"|\"<b>&\"|3|12345678"),
    ),
    (
        "{{ toPrettyJson .Values.m }}",
        Ok("{\n  \"a\": {\n    \"c\": [\n      \"x\"\n    ]\n  },\n  \"b\": 2\n}"),
    ),
    (
        "{{ mustToJson .Values.list }}|{{ mustToPrettyJson .Values.empty }}|{{ mustToRawJson .Values.num }}",
        Ok("[1,\"a\",null]|{}|1"),
    ),
    (
        "{{ toYamlPretty .Values.m }}",
        Ok("a:\n  c:\n    - x\nb: 2"),
    ),
    (
        "{{ toToml .Values.m }}",
        Ok("b = 2.0\n\n[a]\n  c = [\"x\"]\n"),
    ),
    (
        "{{ toToml 3 }}|{{ toToml .Values.list }}",
        Ok("3|toml: cannot encode array with nil element"),
    ),
    ("{{ fromYaml \"a: [1, x]\" }}", Ok("map[a:[1 x]]")),
    ("{{ (fromYaml \"a: {b: yes}\").a.b }}", Ok("true")),
    (
        "{{ fromYaml \"- 1\" }}",
        Ok(
            "map[Error:error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}]",
        ),
    ),
    ("{{ fromYamlArray \"[1, {a: b}]\" }}", Ok("[1 map[a:b]]")),
    ("{{ fromYamlArray \"a: b\" | len }}", Ok("1")),
    ("{{ fromJson \"{\\\"a\\\": 1e3}\" }}", Ok("map[a:1000]")),
    (
        "{{ fromJson \"{\" }}",
        Ok("map[Error:unexpected end of JSON input]"),
    ),
    (
        "{{ fromJsonArray \"[1,2]\" }}|{{ fromJsonArray \"x\" }}",
        Ok("[1 2]|[invalid character 'x' looking for beginning of value]"),
    ),
    (
        "{{ (fromJson \"{\\\"a\\\": 1}\").a | printf \"%T\" }}|{{ toYaml .Values.f | printf \"%T\" }}",
        Ok("float64|string"),
    ),
    (
        "{{ toYaml }}",
        Err(
            "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <toYaml>: wrong number of args for toYaml: want 1 got 0",
        ),
    ),
    (
        "{{ fromYaml 1 }}",
        Err(
            "template: t/templates/case.yaml:1:12: executing \"t/templates/case.yaml\" at <1>: expected string; found 1",
        ),
    ),
    (
        "{{ fromJson .Values.num }}",
        Err(
            "template: t/templates/case.yaml:1:19: executing \"t/templates/case.yaml\" at <.Values.num>: wrong type for value; expected string; got float64",
        ),
    ),
    (
        "{{ fromYaml .Values.nothing }}",
        Err(
            "template: t/templates/case.yaml:1:19: executing \"t/templates/case.yaml\" at <.Values.nothing>: wrong type for value; expected string; got interface {}",
        ),
    ),
    (
        "{{ toToml nil }}",
        Err(
            "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <toToml nil>: error calling toToml: reflect: call of reflect.Value.Type on zero Value",
        ),
    ),
];

fn ours(snippet: &str) -> Result<String, String> {
    let mut funcs = sprig::funcs();
    funcs.extend(crate::encoding_funcs());
    let mut t = Templates::new(funcs);
    t.set_missing_key(MissingKey::Zero);
    t.parse(CASE, snippet).map_err(|e| e.message.clone())?;
    let mut top = go_template::Map::new();
    let values = crate::parse_values(VALUES).expect("VALUES parse");
    top.insert("Values".into(), Value::map(values));
    t.execute(CASE, &Value::map(top)).map_err(|e| match e.kind {
        ErrorKind::Exec | ErrorKind::Parse => e.message.clone(),
    })
}

#[test]
fn encoding_rows_match_ours() {
    let mut failures = Vec::new();
    for (snippet, want) in ROWS {
        let got = ours(snippet);
        if got.as_deref().map_err(String::as_str) != *want {
            failures.push(format!("{snippet}\n   want {want:?}\n    got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn encoding_rows_match_helm() {
    let oks: Vec<&str> = ROWS
        .iter()
        .filter(|(_, w)| w.is_ok())
        .map(|(s, _)| *s)
        .collect();
    let mut got = helm_oracle::eval(&oks, VALUES).into_iter();
    let errors: Vec<&str> = ROWS
        .iter()
        .filter(|(_, w)| w.is_err())
        .map(|(s, _)| *s)
        .collect();
    let errs: Vec<Result<String, String>> = std::thread::scope(|s| {
        let runs: Vec<_> = errors
            .iter()
            .map(|snippet| s.spawn(move || helm_oracle::eval_one(snippet, VALUES)))
            .collect();
        runs.into_iter()
            .map(|r| r.join().expect("helm ran"))
            .collect()
    });
    let mut errs = errs.into_iter();
    for (snippet, want) in ROWS {
        match want {
            Ok(out) => assert_eq!(got.next(), Some(Ok((*out).to_owned())), "{snippet}"),
            Err(msg) => assert_eq!(errs.next(), Some(Err(format!("Error: {msg}"))), "{snippet}"),
        }
    }
}
