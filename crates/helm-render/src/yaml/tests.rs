//! YAML conformance tables: every expected text is what Helm 3.17.3 produced, and the
//! `*_match_helm` tests re-check that against the real binary.

use super::*;
use go_template::{CallError, Env, FuncMap};

/// (a value, written in values.yaml under a key, and what `toYaml` of it gives). The rows are
/// assembled into one values.yaml as `rN:` followed by the text indented by two spaces.
const TO_YAML: &[(&str, &str)] = &[
    // Strings a plain scalar would read back as something else are double-quoted.
    (r#""true""#, r#""true""#),
    (r#""1""#, r#""1""#),
    (r#""1.0""#, r#""1.0""#),
    (r#""null""#, r#""null""#),
    (r#""~""#, r#""~""#),
    (r#""yes""#, r#""yes""#),
    (r#""on""#, r#""on""#),
    (r#""Off""#, r#""Off""#),
    (r#""y""#, r#""y""#),
    (r#""n""#, r#""n""#),
    (r#""NULL""#, r#""NULL""#),
    (r#""0x1F""#, r#""0x1F""#),
    (r#""+1""#, r#""+1""#),
    (r#"".5""#, r#"".5""#),
    (r#""1e3""#, r#""1e3""#),
    (r#""1:20""#, r#""1:20""#),
    (r#""0777""#, r#""0777""#),
    (r#""1_000""#, r#""1_000""#),
    (r#"".inf""#, r#"".inf""#),
    (r#""-.inf""#, r#""-.inf""#),
    (r#""2001-12-14""#, r#""2001-12-14""#),
    (r#""2001-12-14T21:59:43.10-05:00""#, r#""2001-12-14T21:59:43.10-05:00""#),
    (r#""0b101""#, r#""0b101""#),
    (r#""0o17""#, r#""0o17""#),
    (r#""1.5e+3""#, r#""1.5e+3""#),
    (r#""false""#, r#""false""#),
    (r#""""#, r#""""#),
    // Strings plain would misread by syntax are single-quoted.
    (r#"" lead""#, "' lead'"),
    (r#""trail ""#, "'trail '"),
    (r#""a: b""#, "'a: b'"),
    (r##""#x""##, "'#x'"),
    (r#""x #y""#, "'x #y'"),
    (r#""*x""#, "'*x'"),
    (r#""&x""#, "'&x'"),
    (r#""- x""#, "'- x'"),
    (r#""@x""#, "'@x'"),
    (r#""`x""#, "'`x'"),
    (r#""x:""#, "'x:'"),
    (r#""{x}""#, "'{x}'"),
    (r#""[x]""#, "'[x]'"),
    (r#""%x""#, "'%x'"),
    (r#""!x""#, "'!x'"),
    (r#""|x""#, "'|x'"),
    (r#"">x""#, "'>x'"),
    (r#""? x""#, "'? x'"),
    (r#"",x""#, "',x'"),
    (r#""'x""#, "'''x'"),
    (r#""\"x""#, "'\"x'"),
    (r#""-""#, "'-'"),
    (r#""---""#, "'---'"),
    (r#""...""#, "'...'"),
    // And these stay plain.
    (r#""-x""#, "-x"),
    (r#""?x""#, "?x"),
    (r#""x,y""#, "x,y"),
    (r#""x]""#, "x]"),
    (r#""a'b""#, "a'b"),
    (r#""a\"b""#, "a\"b"),
    (r#""a  b""#, "a  b"),
    (r#""NaN""#, "NaN"),
    (r#""=x""#, "=x"),
    (r#""<<""#, "<<"),
    (r#""é unicode ✓""#, "é unicode ✓"),
    // Escapes and special characters: double quotes.
    (r#""a\tb""#, r#""a\tb""#),
    (r#""\ttab""#, r#""\ttab""#),
    (r#""a \nb""#, r#""a \nb""#),
    (r#""\u0001""#, r#""\x01""#),
    (r#""x\r\ny""#, r#""x\r\ny""#),
    (r#""x\n ""#, r#""x\n ""#),
    (r#""😀 x""#, r#""\U0001F600 x""#),
    (r#""a\u0085b""#, "a b"),
    (r#""x\u2028y""#, "'x\u{2028}  y'"),
    // Multi-line strings: literal blocks with their chomping and indentation hints.
    (r#""a\nb""#, "|-\n  a\n  b"),
    (r#""a\nb\n""#, "|\n  a\n  b"),
    (r#""a\nb\n\n""#, "|+\n  a\n  b\n"),
    (r#"" a\nb""#, "|2-\n   a\n  b"),
    (r#""\n""#, "|2+\n"),
    (r#""\nx""#, "|2-\n\n  x"),
    // Numbers, after the trip through JSON.
    ("1e7", "10000000"),
    ("1.5", "1.5"),
    ("1234567.5", "1.2345675e+06"),
    ("1e21", "1e+21"),
    ("0.000001", "1e-06"),
    ("1e-7", "1e-07"),
    ("0.1", "0.1"),
    ("-0", "0"),
    ("1e20", "1e+20"),
    ("12345678901234567890", "12345678901234567000"),
    ("123456789012345678901234567890", "1.2345678901234568e+29"),
    ("0777", "511"),
    ("1_000", "1000"),
    ("0x1F", "31"),
    ("0o17", "15"),
    ("+12", "12"),
    ("1e3", "1000"),
    ("09", "9"),
    ("-0x10", "-16"),
    ("0b101", "5"),
    ("1.0", "1"),
    // YAML 1.1 scalars.
    ("2001-12-14", r#""2001-12-14""#),
    ("2001-02-30", "2001-02-30"),
    ("2001-12-14 21:59:43.10", r#""2001-12-14 21:59:43.10""#),
    ("2001-12-14 21:59:43.10 -5", "2001-12-14 21:59:43.10 -5"),
    ("yes", "true"),
    ("On", "true"),
    ("NO", "false"),
    ("~", "null"),
    ("", "null"),
    ("1:20", r#""1:20""#),
    ("!!str 123", r#""123""#),
    ("!!float 1", "1"),
    ("!foo bar", "bar"),
    ("!!binary aGVsbG8=", "hello"),
    // Collections.
    ("{}", "{}"),
    ("[]", "[]"),
    ("[[a, b], [c]]", "- - a\n  - b\n- - c"),
    ("[{a: 1, b: [x]}, {}]", "- a: 1\n  b:\n  - x\n- {}"),
    ("{b: {c: [1, 2]}, a: null}", "a: null\nb:\n  c:\n  - 1\n  - 2"),
    ("{1: a, true: b, 1.5: d, 0x10: e, 1e3: f, 2001-12-14: g}",
        "\"1\": a\n\"1.5\": d\n\"16\": e\n\"1000\": f\n\"2001-12-14\": g\n\"true\": b"),
    ("{a10: 1, a9: 2, a_1: 3, A: 4, b: 5, \"0\": 6, \"00\": 7, \"-1\": 8, é: 9, a01: 10, a1: 11}",
        "\"-1\": 8\n\"0\": 6\n\"00\": 7\nA: 4\na_1: 3\na1: 11\na01: 10\na9: 2\na10: 1\nb: 5\né: 9"),
    ("{\"a\\nb\": 1}", "? |-\n  a\n  b\n: 1"),
    ("{k: [[]], l: [{}], m: {p: {}}}", "k:\n- []\nl:\n- {}\nm:\n  p: {}"),
    ("[\"a\\nb\", [\"c\\n\"]]", "- |-\n  a\n  b\n- - |\n    c"),
    // Anchors, aliases, merges.
    ("{base: &b {x: 1, z: 2}, m: {x: 0, <<: *b, w: 3}}", "base:\n  x: 1\n  z: 2\nm:\n  w: 3\n  x: 1\n  z: 2"),
    ("{m: {<<: [{x: a, q: 1}, {x: b, r: 2}], y: 9}}", "m:\n  q: 1\n  r: 2\n  \"true\": 9\n  x: a"),
    ("{a: 1, a: 2}", "a: 2"),
    // Long lines fold at column 80.
    ("\"aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg hhhhhhhhhh iiiiiiiiii jjjjjjjjjj\"",
        "aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg hhhhhhhhhh\n  iiiiiiiiii jjjjjjjjjj"),
    ("{long: \"aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg hhhhhhhhhh iiiiiiiiii jjjjjjjjjj\"}",
        "long: aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg\n  hhhhhhhhhh iiiiiiiiii jjjjjjjjjj"),
    ("{long: \"aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeeeffffffffffgggggggggghhhhhhhhhhiiiiiiiiiijjjjjjjjjj\"}",
        "long: aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeeeffffffffffgggggggggghhhhhhhhhhiiiiiiiiiijjjjjjjjjj"),
    ("{long: \"'aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg hhhhhhhhhh iiiiiiiiii jjjjjjjjjj\"}",
        "long: '''aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg\n  hhhhhhhhhh iiiiiiiiii jjjjjjjjjj'"),
    ("{long: \"aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg hhhhhhhhhh iiiiiiiiii jjjjjjjjjj\\u0001\"}",
        "long: \"aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg\n  hhhhhhhhhh iiiiiiiiii jjjjjjjjjj\\x01\""),
    ("{long: \"line1\\naaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg hhhhhhhhhh iiiiiiiiii jjjjjjjjjj\"}",
        "long: |-\n  line1\n  aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg hhhhhhhhhh iiiiiiiiii jjjjjjjjjj"),
    ("{k: \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
        "k: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
    ("{\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": 1}",
        "? xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
: 1"),
];

fn values_doc(rows: &[(&str, &str)]) -> String {
    rows.iter()
        .enumerate()
        .map(|(i, (v, _))| format!("r{i}: {v}\n"))
        .collect()
}

fn helm_to_yaml(v: &Value) -> String {
    let s = to_yaml(v).unwrap_or_default();
    s.strip_suffix('\n').unwrap_or(&s).to_owned()
}

#[test]
fn to_yaml_table_matches_ours() {
    let values = parse_values(&values_doc(TO_YAML)).expect("the table's values parse");
    let mut failures = Vec::new();
    for (i, (input, want)) in TO_YAML.iter().enumerate() {
        let v = values.get(&format!("r{i}")).cloned().unwrap_or_default();
        let got = helm_to_yaml(&v);
        if got != *want {
            failures.push(format!("{input}\n   want {want:?}\n    got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn to_yaml_table_matches_helm() {
    let snippets: Vec<String> = (0..TO_YAML.len())
        .map(|i| format!("{{{{ toYaml .Values.r{i} }}}}"))
        .collect();
    let snippets: Vec<&str> = snippets.iter().map(String::as_str).collect();
    let got = helm_oracle::eval(&snippets, &values_doc(TO_YAML));
    for ((input, want), got) in TO_YAML.iter().zip(got) {
        assert_eq!(got.as_deref(), Ok(*want), "{input}");
    }
}

fn call(name: &str, args: &[Value]) -> Result<Value, CallError> {
    struct NoEnv;
    impl Env for NoEnv {
        fn execute_template(&mut self, _: &str, _: &Value) -> Result<String, CallError> {
            unreachable!()
        }
        fn execute_text(&mut self, _: &str, _: &str, _: &Value) -> Result<String, CallError> {
            unreachable!()
        }
    }
    let m: FuncMap = crate::encoding_funcs();
    (m[name].body)(&mut NoEnv, args)
}

/// (function, its string argument, what `… | toJson` of the result gives).
const FROM: &[(&str, &str, &str)] = &[
    (
        "fromYaml",
        "a: 1\nb: [x, 2.5, true, null]",
        r#"{"a":1,"b":["x",2.5,true,null]}"#,
    ),
    (
        "fromYaml",
        "- a",
        r#"{"Error":"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}"}"#,
    ),
    (
        "fromYaml",
        "a: [",
        r#"{"Error":"error converting YAML to JSON: yaml: line 1: did not find expected node content"}"#,
    ),
    (
        "fromYaml",
        "a: b: c",
        r#"{"Error":"error converting YAML to JSON: yaml: mapping values are not allowed in this context"}"#,
    ),
    (
        "fromYaml",
        "a\n- b",
        r#"{"Error":"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go value of type map[string]interface {}"}"#,
    ),
    (
        "fromYamlArray",
        "a: 1",
        r#"["error unmarshaling JSON: while decoding JSON: json: cannot unmarshal object into Go value of type []interface {}"]"#,
    ),
    (
        "fromYaml",
        "a: *x",
        r#"{"Error":"error converting YAML to JSON: yaml: unknown anchor 'x' referenced"}"#,
    ),
    (
        "fromYaml",
        "a: &x [*x]",
        r#"{"Error":"error converting YAML to JSON: yaml: anchor 'x' value contains itself"}"#,
    ),
    (
        "fromYaml",
        "\"a",
        r#"{"Error":"error converting YAML to JSON: yaml: found unexpected end of stream"}"#,
    ),
    ("fromYaml", "a: 1\n---\nb: 2", r#"{"a":1}"#),
    ("fromYaml", "", "{}"),
    ("fromYaml", "a:\t1", r#"{"a":1}"#),
    (
        "fromYaml",
        "{a: 1",
        r#"{"Error":"error converting YAML to JSON: yaml: line 1: did not find expected ',' or '}'"}"#,
    ),
    (
        "fromYaml",
        "a: .nan",
        r#"{"Error":"error converting YAML to JSON: json: unsupported value: NaN"}"#,
    ),
    (
        "fromYaml",
        "a: !!int 1.5",
        r#"{"Error":"error converting YAML to JSON: yaml: cannot decode !!float `1.5` as a !!int"}"#,
    ),
    (
        "fromYaml",
        "@a",
        r#"{"Error":"error converting YAML to JSON: yaml: found character that cannot start any token"}"#,
    ),
    ("fromYaml", "  a: 1\n b: 2", r#"{"a":1}"#),
    (
        "fromYaml",
        "a: 'x",
        r#"{"Error":"error converting YAML to JSON: yaml: found unexpected end of stream"}"#,
    ),
    (
        "fromYaml",
        "a: |\n  x\n y",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: did not find expected key"}"#,
    ),
    (
        "fromYaml",
        "a:\n  b: 1\n c: 2",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: did not find expected key"}"#,
    ),
    (
        "fromYaml",
        "- [a, b",
        r#"{"Error":"error converting YAML to JSON: yaml: line 1: did not find expected ',' or ']'"}"#,
    ),
    ("fromYamlArray", "null", "[]"),
    ("fromYamlArray", "[1, {a: b}]", r#"[1,{"a":"b"}]"#),
    ("fromYaml", "null", "{}"),
    (
        "fromYaml",
        "x",
        r#"{"Error":"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go value of type map[string]interface {}"}"#,
    ),
    (
        "fromYaml",
        "a: 1\n\tb: 2",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: found a tab character that violates indentation"}"#,
    ),
    (
        "fromYaml",
        "~: e",
        r#"{"Error":"error converting YAML to JSON: unsupported map key of type: %!s(\u003cnil\u003e), key: \u003cnil\u003e, value: \"e\""}"#,
    ),
    (
        "fromYaml",
        "{1.1: a, 0.1234567891: b, -2: c, false: d}",
        r#"{"-2":"c","0.12345679":"b","1.1":"a","false":"d"}"#,
    ),
    (
        "fromYaml",
        "a: 1\nb:\n  - x\n  - c: [1, 2]\n  - y: 3\n",
        r#"{"a":1,"b":["x",{"c":[1,2]},{"true":3}]}"#,
    ),
    ("fromJson", r#"{"a": [1, "x"]}"#, r#"{"a":[1,"x"]}"#),
    (
        "fromJson",
        "[1]",
        r#"{"Error":"json: cannot unmarshal array into Go value of type map[string]interface {}"}"#,
    ),
    ("fromJsonArray", "[1, {\"a\": null}]", r#"[1,{"a":null}]"#),
    (
        "fromJsonArray",
        "{}",
        r#"["json: cannot unmarshal object into Go value of type []interface {}"]"#,
    ),
    (
        "fromJsonArray",
        "[1,",
        r#"["unexpected end of JSON input"]"#,
    ),
    (
        "fromYaml",
        "a: \"\\ud83d\\ude00\"",
        r#"{"Error":"error converting YAML to JSON: yaml: found invalid Unicode character escape code"}"#,
    ),
    (
        "fromYaml",
        "a: 1\nb: \"x\\uDC00\"",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: found invalid Unicode character escape code"}"#,
    ),
    (
        "fromYaml",
        "a: \"\\U0001F600 \\\\ud800\"",
        r#"{"a":"😀 \\ud800"}"#,
    ),
    // Common mistakes in values files, with goyaml's words for them.
    (
        "fromYaml",
        "a\n  b: c",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: mapping values are not allowed in this context"}"#,
    ),
    (
        "fromYaml",
        "a:\n\tb: 1",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: found character that cannot start any token"}"#,
    ),
    (
        "fromYaml",
        "a:\n  b: 1\n\tc: 2",
        r#"{"Error":"error converting YAML to JSON: yaml: line 3: found a tab character that violates indentation"}"#,
    ),
    (
        "fromYaml",
        "a: b: c\n",
        r#"{"Error":"error converting YAML to JSON: yaml: mapping values are not allowed in this context"}"#,
    ),
    (
        "fromYaml",
        "a:b\n",
        r#"{"Error":"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go value of type map[string]interface {}"}"#,
    ),
    (
        "fromYaml",
        "a: x\n b: y\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: mapping values are not allowed in this context"}"#,
    ),
    (
        "fromYaml",
        "a:\n  - x\n - y\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: did not find expected key"}"#,
    ),
    ("fromYaml", "a:\n- x\n  - y\n", r#"{"a":["x - y"]}"#),
    (
        "fromYaml",
        "a: [x, y\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 1: did not find expected ',' or ']'"}"#,
    ),
    (
        "fromYaml",
        "a: {x: 1\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 1: did not find expected ',' or '}'"}"#,
    ),
    (
        "fromYaml",
        "a: 'x\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: found unexpected end of stream"}"#,
    ),
    (
        "fromYaml",
        "a: \"x\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: found unexpected end of stream"}"#,
    ),
    ("fromYaml", "a: x\n  - y\n", r#"{"a":"x - y"}"#),
    (
        "fromYaml",
        "a:\n  b\n  c: d\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 3: mapping values are not allowed in this context"}"#,
    ),
    (
        "fromYaml",
        "- a\n b\n",
        r#"{"Error":"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}"}"#,
    ),
    ("fromYaml", "a: |\n x\n  y\n", r#"{"a":"x\n y\n"}"#),
    (
        "fromYaml",
        "a: >\n\tx\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 2: found a tab character where an indentation space is expected"}"#,
    ),
    ("fromYaml", "a: 1\n  # c\nb: 2", r#"{"a":1,"b":2}"#),
    (
        "fromYaml",
        "a: 'it's'\n",
        r#"{"Error":"error converting YAML to JSON: yaml: did not find expected key"}"#,
    ),
    (
        "fromYaml",
        "a: \"\\q\"\n",
        r#"{"Error":"error converting YAML to JSON: yaml: found unknown escape character"}"#,
    ),
    (
        "fromYaml",
        "a: @x\n",
        r#"{"Error":"error converting YAML to JSON: yaml: found character that cannot start any token"}"#,
    ),
    (
        "fromYaml",
        "a: `x\n",
        r#"{"Error":"error converting YAML to JSON: yaml: found character that cannot start any token"}"#,
    ),
    (
        "fromYaml",
        "a: %x\n",
        r#"{"Error":"error converting YAML to JSON: yaml: found character that cannot start any token"}"#,
    ),
    ("fromYaml", "key: value # comment\n", r#"{"key":"value"}"#),
    (
        "fromYaml",
        "a:\n  b: 1\n   c: 2\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 3: mapping values are not allowed in this context"}"#,
    ),
    (
        "fromYaml",
        "a: &x 1\nb: *y\n",
        r#"{"Error":"error converting YAML to JSON: yaml: unknown anchor 'y' referenced"}"#,
    ),
    (
        "fromYaml",
        "a: !!int x\n",
        r#"{"Error":"error converting YAML to JSON: yaml: cannot decode !!str `x` as a !!int"}"#,
    ),
    (
        "fromYaml",
        "a: !!float x\n",
        r#"{"Error":"error converting YAML to JSON: yaml: cannot decode !!str `x` as a !!float"}"#,
    ),
    (
        "fromYaml",
        "a: !!bool 1\n",
        r#"{"Error":"error converting YAML to JSON: yaml: cannot decode !!int `1` as a !!bool"}"#,
    ),
    ("fromYaml", "a: 1\n...\nb: 2\n", r#"{"a":1}"#),
    ("fromYaml", "a: 1\n---\n", r#"{"a":1}"#),
    (
        "fromYaml",
        "- a\n- b: c\n  d\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 4: could not find expected ':'"}"#,
    ),
    (
        "fromYaml",
        "a:\n  b:\n  - c\n   d: e\n",
        r#"{"Error":"error converting YAML to JSON: yaml: line 4: mapping values are not allowed in this context"}"#,
    ),
];

#[test]
fn from_table_matches_ours() {
    let mut failures = Vec::new();
    for (func, input, want) in FROM {
        let v = call(func, &[Value::string(*input)]).expect("never fails");
        let got = sprig::json::marshal(&v, true).unwrap();
        if got != *want {
            failures.push(format!("{func} {input:?}\n   want {want}\n    got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn from_table_matches_helm() {
    let values: String = FROM
        .iter()
        .enumerate()
        .map(|(i, (_, input, _))| format!("s{i}: {}\n", serde_json::to_string(input).unwrap()))
        .collect();
    let snippets: Vec<String> = FROM
        .iter()
        .enumerate()
        .map(|(i, (f, _, _))| format!("{{{{ {f} .Values.s{i} | toJson }}}}"))
        .collect();
    let snippets: Vec<&str> = snippets.iter().map(String::as_str).collect();
    let got = helm_oracle::eval(&snippets, &values);
    for ((func, input, want), got) in FROM.iter().zip(got) {
        assert_eq!(got.as_deref(), Ok(*want), "{func} {input:?}");
    }
}

/// (a value in values.yaml, `toYamlPretty` of it as Helm writes it).
const PRETTY: &[(&str, &str)] = &[
    (
        r#"{b: 1, a: "x", c: {d: [1, 2], e: {f: true}}, g: [{h: 1, i: [a]}, {}], k: [], l: {}, "m n": 1.5, o: null}"#,
        "a: x\nb: 1\nc:\n  d:\n    - 1\n    - 2\n  e:\n    f: true\ng:\n  - h: 1\n    i:\n      - a\n  - {}\nk: []\nl: {}\nm n: 1.5\no: null",
    ),
    (
        "[1e7, 1.0, 0.000001, 1e21, 12345678, 0.1, 1e20]",
        "- 1e+07\n- 1\n- 1e-06\n- 1e+21\n- 1.2345678e+07\n- 0.1\n- 1e+20",
    ),
    (
        r##"["true", "yes", "1", "", "~", "null", "a: b", " x", "x\ny", "x\ny\n", "2001-12-14", "0777", "1:20", "on", "y", "NO", "1_000", "0x1F", ".inf", "é", "😀", "a\tb", "-", "#x"]"##,
        "- \"true\"\n- \"yes\"\n- \"1\"\n- \"\"\n- \"~\"\n- \"null\"\n- 'a: b'\n- ' x'\n- |-\n  x\n  y\n- |\n  x\n  y\n- \"2001-12-14\"\n- \"0777\"\n- \"1:20\"\n- \"on\"\n- \"y\"\n- \"NO\"\n- \"1_000\"\n- \"0x1F\"\n- \".inf\"\n- é\n- \"\\U0001F600\"\n- \"a\\tb\"\n- '-'\n- '#x'",
    ),
    (
        r#""aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg hhhhhhhhhh iiiiiiiiii jjjjjjjjjj""#,
        "aaaaaaaaa bbbbbbbbbb cccccccccc dddddddddd eeeeeeeeee ffffffffff gggggggggg hhhhhhhhhh iiiiiiiiii jjjjjjjjjj",
    ),
    ("[[a, b], [c]]", "- - a\n  - b\n- - c"),
    (
        r#"{a10: 1, a9: 2, A: 3, b: 4, "1": 5, "10": 6, "9": 7}"#,
        "\"1\": 5\n\"9\": 7\n\"10\": 6\nA: 3\na9: 2\na10: 1\nb: 4",
    ),
    ("[]", "[]"),
    ("~", "null"),
];

#[test]
fn pretty_table_matches_ours() {
    let values = parse_values(&values_doc(PRETTY)).expect("the table's values parse");
    for (i, (input, want)) in PRETTY.iter().enumerate() {
        let v = values.get(&format!("r{i}")).cloned().unwrap_or_default();
        let got = call("toYamlPretty", &[v]).expect("never fails");
        assert_eq!(got.as_str(), Some(*want), "{input}");
    }
    let ints = Value::list(vec![
        Value::Int(1),
        Value::Int64(-3),
        Value::Float(f64::NAN),
    ]);
    let got = call("toYamlPretty", &[ints]).expect("never fails");
    assert_eq!(got.as_str(), Some("- 1\n- -3\n- .nan"));
}

#[test]
fn pretty_table_matches_helm() {
    let snippets: Vec<String> = (0..PRETTY.len())
        .map(|i| format!("{{{{ toYamlPretty .Values.r{i} }}}}"))
        .collect();
    let snippets: Vec<&str> = snippets.iter().map(String::as_str).collect();
    let got = helm_oracle::eval(&snippets, &values_doc(PRETTY));
    for ((input, want), got) in PRETTY.iter().zip(got) {
        assert_eq!(got.as_deref(), Ok(*want), "{input}");
    }
}

#[test]
fn alias_bombs_are_refused() {
    let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let p = i - 1;
        doc.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let err = parse_values(&doc).unwrap_err();
    assert_eq!(
        err.message(),
        "error converting YAML to JSON: yaml: document contains excessive aliasing"
    );
    assert_eq!(
        helm_oracle::eval_one("{{ .Values }}", &doc).unwrap_err(),
        format!("Error: cannot load values.yaml: {err}")
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for depth in [249, 251, 100_000] {
        let flow = format!("a: {}{}", "[".repeat(depth), "]".repeat(depth));
        let block: String = (0..depth.min(5000))
            .map(|i| format!("{}k:\n", " ".repeat(i)))
            .collect();
        let r = parse_values(&flow);
        assert_eq!(r.is_ok(), depth < 250, "flow depth {depth}: {r:?}");
        let _ = parse_values(&block);
    }
}

/// A value made of what values files hold: maps, lists, strings, float64s, booleans, nil.
fn values_value() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let string = prop_oneof![
        "[ -~]{0,12}",
        "[a-z0-9 :#'\"\\-\n\t]{0,12}",
        proptest::string::string_regex("[\\PC\n\r\t ]{0,8}").unwrap(),
        Just("yes".to_owned()),
        Just("0777".to_owned()),
        Just("1e3".to_owned()),
        Just("".to_owned()),
    ]
    .prop_filter(
        "goyaml refuses control characters, and folds NEL",
        |s: &String| {
            s.chars().all(|c| {
                let u = c as u32;
                !(u == 0x7f || (0x80..=0x9f).contains(&u) || u == 0xfffe || u == 0xffff)
            })
        },
    );
    let float = prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        (-1000i64..1000).prop_map(|i| i as f64),
        Just(1e21),
        Just(1e-7),
    ]
    .prop_map(|f| if f == 0.0 { 0.0 } else { f });
    let leaf = prop_oneof![
        Just(Value::Nil),
        any::<bool>().prop_map(Value::Bool),
        float.prop_map(Value::Float),
        string.clone().prop_map(Value::string),
    ];
    let key = string.prop_filter("a plain << is a merge key, for Helm too", |k| k != "<<");
    leaf.prop_recursive(4, 40, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::list),
            proptest::collection::btree_map(key.clone(), inner, 0..5).prop_map(Value::map),
        ]
    })
}

fn json(v: &Value) -> String {
    sprig::json::marshal(v, false).expect("finite values encode")
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    #[test]
    fn from_yaml_of_to_yaml_gives_the_value_back(v in values_value()) {
        let mut m = go_template::Map::new();
        m.insert("v".into(), v.clone());
        let text = to_yaml(&Value::map(m)).expect("encodes");
        let back = parse_values(&text).map_err(|e| format!("{e}\n{text}"));
        proptest::prop_assert!(back.is_ok(), "{:?}", back);
        let back = back.unwrap().get("v").cloned().unwrap_or_default();
        proptest::prop_assert_eq!(json(&back), json(&v), "{}", text);
    }

    #[test]
    fn decoders_never_panic(s in "\\PC{0,60}") {
        let _ = parse_document(&s);
        let _ = sprig::json::unmarshal(&s);
    }

    #[test]
    fn decoders_never_panic_on_yamlish_text(s in "[-:&*!|>'\"{}\\[\\], #?@%ab0.\n\t~<]{0,60}") {
        let _ = parse_document(&s);
        let _ = to_yaml(&Value::string(s.as_str()));
    }
}

#[test]
fn cycles_and_runaway_depth_write_nothing() {
    let m = Value::map(go_template::Map::new());
    if let Value::Map(inner) = &m {
        inner.borrow_mut().insert("self".into(), m.clone());
    }
    for f in ["toYaml", "toYamlPretty", "toJson"] {
        assert_eq!(
            call(f, std::slice::from_ref(&m)).unwrap().as_str(),
            Some(""),
            "{f}"
        );
    }
    assert!(crate::toml::encode(&m).is_err());
    if let Value::Map(inner) = &m {
        inner.borrow_mut().clear();
    }
    let mut deep = Value::string("x");
    for _ in 0..900 {
        deep = Value::list(vec![deep]);
    }
    for f in ["toYaml", "toYamlPretty", "toJson", "toToml"] {
        let got = call(f, &[deep.clone()]).unwrap();
        assert!(got.as_str().is_some_and(|s| s.contains('x')), "{f}");
    }
}

#[test]
fn to_toml_of_nil_fails_as_go_panics() {
    let err = call("toToml", &[Value::Nil]).unwrap_err();
    assert_eq!(
        err,
        CallError::Call("reflect: call of reflect.Value.Type on zero Value".into())
    );
    assert_eq!(
        helm_oracle::eval_one("{{ toToml nil }}", "").unwrap_err(),
        "Error: template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <toToml nil>: error calling toToml: reflect: call of reflect.Value.Type on zero Value"
    );
}

/// (a rendered document, Helm's error for it or "" when Helm accepts it).
const HEADS: &[(&str, &str)] = &[
    (
        "kind: [a]",
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go struct field SimpleHead.kind of type string",
    ),
    (
        "metadata: {annotations: {a: {b: c}}}",
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal object into Go struct field .metadata.annotations of type string",
    ),
    (
        "metadata: {name: [x]}",
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go struct field .metadata.name of type string",
    ),
    (
        "metadata: x",
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field SimpleHead.metadata of type struct { Name string \"json:\\\"name\\\"\"; Annotations map[string]string \"json:\\\"annotations\\\"\" }",
    ),
    (
        "metadata: {annotations: [1]}",
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go struct field .metadata.annotations of type map[string]string",
    ),
    (
        "- a",
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type releaseutil.SimpleHead",
    ),
    (
        "x",
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go value of type releaseutil.SimpleHead",
    ),
    (
        "a: .nan",
        "error converting YAML to JSON: json: unsupported value: NaN",
    ),
    ("Kind: 1.5e10\napiVersion: 12345678", ""),
    (
        "kind: Pod\nmetadata:\n  name: 1e3\n  annotations: {x: 1, y: true, z: null}",
        "",
    ),
    ("# only a comment", ""),
];

#[test]
fn heads_match_helm() {
    for (doc, want) in HEADS {
        let ours = parse_head(doc)
            .err()
            .map(|e| e.message().to_owned())
            .unwrap_or_default();
        assert_eq!(ours, *want, "{doc}");
    }
    // Each failing document needs a helm run of its own: run them side by side; the
    // documents Helm accepts go together in one chart.
    let (bad, good): (Vec<_>, Vec<_>) = HEADS.iter().partition(|(_, want)| !want.is_empty());
    let files: Vec<(String, &str)> = good
        .iter()
        .enumerate()
        .map(|(i, (doc, _))| (format!("templates/ok{i}.yaml"), *doc))
        .collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(p, d)| (p.as_str(), *d)).collect();
    assert!(helm_oracle::helm_template(&files, "", &[]).is_ok());
    let helm: Vec<String> = std::thread::scope(|s| {
        let runs: Vec<_> = bad
            .iter()
            .map(|(doc, _)| {
                s.spawn(move || {
                    helm_oracle::helm_template(&[("templates/a.yaml", doc)], "", &[])
                        .err()
                        .unwrap_or_default()
                })
            })
            .collect();
        runs.into_iter()
            .map(|r| r.join().expect("helm ran"))
            .collect()
    });
    for ((doc, want), helm) in bad.iter().zip(helm) {
        let helm = helm
            .strip_prefix("Error: YAML parse error on t/templates/a.yaml: ")
            .unwrap_or(&helm);
        assert_eq!(helm, *want, "{doc}");
    }
}

#[test]
fn heads_coerce_scalars_as_helm_does() {
    let head = parse_head("Kind: 1.5e10\napiVersion: 12345678\nmetadata:\n  name: 1e3\n  annotations: {x: 1, y: true, z: null}").unwrap();
    assert_eq!(head.kind, "1.5e+10");
    assert_eq!(head.api_version, "12345678");
    let meta = head.metadata.unwrap();
    assert_eq!(meta.name, "1000");
    let a = meta.annotations.unwrap();
    assert_eq!(a["x"], "1");
    assert_eq!(a["true"], "true", "the key y is a YAML 1.1 boolean");
    assert_eq!(a["z"], "");
}

/// (a whole values.yaml, `.Values | toJson` as Helm prints it, or Helm's error after
/// `cannot load values.yaml: `).
const VALUES: &[(&str, &str)] = &[
    (
        "a: |\n  x\n   y\n\n  z\nb: 1\n",
        r#"{"a":"x\n y\n\nz\n","b":1}"#,
    ),
    (
        "a: |-\n  x\n\n\nb: >\n  folded\n  text\n\n  para\nc: >-\n  x\n",
        r#"{"a":"x","b":"folded text\npara\n","c":"x"}"#,
    ),
    (
        "a: |+\n  x\n\n\nb: |2\n    indented\n",
        r#"{"a":"x\n\n\n","b":"  indented\n"}"#,
    ),
    (
        "a: plain\n  continued\n  lines\nb: 'it''s'\nc: \"tab\\tnl\\nuni\\u00e9\\x41\"\n",
        r#"{"a":"plain continued lines","b":"it's","c":"tab\tnl\nuniéA"}"#,
    ),
    ("# comment\n---\na: 1 # trailing\n...\n", r#"{"a":1}"#),
    ("\u{feff}a: 1\r\nb: [1, 2]\r\n", r#"{"a":1,"b":[1,2]}"#),
    (
        "? complex\n: value\n? [1, 2]\n: x\n",
        "error converting YAML to JSON: yaml: invalid map key: []interface {}{1, 2}",
    ),
    ("? complex\n: value\n", r#"{"complex":"value"}"#),
    (
        "a: !!map {b: 1}\nc: !!seq [1]\nd: !!null ''\ne: !!bool yes\nf: !!timestamp 2001-12-14\n",
        r#"{"a":{"b":1},"c":[1],"d":null,"e":true,"f":"2001-12-14"}"#,
    ),
    (
        "a: &x {b: 1}\nc: *x\nd: {<<: *x, b: 2}\ne: {b: 2, <<: *x}\n",
        r#"{"a":{"b":1},"c":{"b":1},"d":{"b":2},"e":{"b":1}}"#,
    ),
    (
        "a:\nb: ~\nc: null\nd: Null\n",
        r#"{"a":null,"b":null,"c":null,"d":null}"#,
    ),
    (
        "key with spaces: 1\n\"quoted key\": 2\n'single': 3\nkey:value: 4\n",
        r#"{"key with spaces":1,"key:value":4,"quoted key":2,"single":3}"#,
    ),
    (
        "a: [1, [2, {b: c}], {d: [e]}]\n",
        r#"{"a":[1,[2,{"b":"c"}],{"d":["e"]}]}"#,
    ),
    (
        "a:\n- 1\n- - 2\n  - 3\n-\n  b: 4\n",
        r#"{"a":[1,[2,3],{"b":4}]}"#,
    ),
    (
        "a: 0.1e1\nb: -.5\nc: +.5\nd: 1.\ne: 6.8523015e+5\nf: 685230.15\ng: 0x_1F\nh: 1__0\n",
        r#"{"a":1,"b":-0.5,"c":0.5,"d":1,"e":685230.15,"f":685230.15,"g":31,"h":10}"#,
    ),
    (
        "a: 9223372036854775807\nb: 9223372036854775808\nc: -9223372036854775809\n",
        r#"{"a":9223372036854776000,"b":9223372036854776000,"c":-9223372036854776000}"#,
    ),
    (
        "[1, 2]\n",
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}",
    ),
    (
        "a: b\n c: d\n",
        "error converting YAML to JSON: yaml: line 2: mapping values are not allowed in this context",
    ),
    (
        "a:\n  - b\n  c: d\n",
        "error converting YAML to JSON: yaml: line 2: did not find expected '-' indicator",
    ),
    (
        "a: 'unterminated\nb: 1\n",
        "error converting YAML to JSON: yaml: line 3: found unexpected end of stream",
    ),
    (
        "a: [1, 2\nb: 3\n",
        "error converting YAML to JSON: yaml: line 1: did not find expected ',' or ']'",
    ),
    (
        "a: *nope\n",
        "error converting YAML to JSON: yaml: unknown anchor 'nope' referenced",
    ),
    ("a: 1\na: 2\n", r#"{"a":2}"#),
    ("", "{}"),
    ("---\n", "{}"),
    ("a: !!binary aGk=\n", r#"{"a":"hi"}"#),
    ("{a: 1, b: {c: [x, y]}}", r#"{"a":1,"b":{"c":["x",true]}}"#),
    (
        "a: \"multi\n  line\n\n  quoted\"\n",
        r#"{"a":"multi line\nquoted"}"#,
    ),
    ("a: >\n  x\n\n   more\n  y\n", r#"{"a":"x\n\n more\ny\n"}"#),
];

#[test]
fn values_files_match_helm() {
    let mut failures = Vec::new();
    for (doc, want) in VALUES {
        let ours = match parse_values(doc) {
            Ok(m) => sprig::json::marshal(&Value::map(m), true).unwrap(),
            Err(e) => e.message().to_owned(),
        };
        if ours != *want {
            failures.push(format!("{doc:?}\n   want {want}\n    got {ours}"));
        }
    }
    // A values file is read exactly as `fromYaml` reads its argument (both are
    // `sigs.k8s.io/yaml.Unmarshal` into a map), so one batched helm run checks every row.
    let values: String = VALUES
        .iter()
        .enumerate()
        .map(|(i, (doc, _))| format!("s{i}: {}\n", serde_json::to_string(doc).unwrap()))
        .collect();
    let snippets: Vec<String> = (0..VALUES.len())
        .map(|i| format!("{{{{ fromYaml .Values.s{i} | toJson }}}}"))
        .collect();
    let snippets: Vec<&str> = snippets.iter().map(String::as_str).collect();
    let helm = helm_oracle::eval(&snippets, &values);
    for ((doc, want), helm) in VALUES.iter().zip(helm) {
        let want = if want.starts_with('{') {
            (*want).to_owned()
        } else {
            format!("{{\"Error\":{}}}", serde_json::to_string(want).unwrap())
        };
        if helm.as_deref() != Ok(want.as_str()) {
            failures.push(format!("HELM {doc:?}\n   want {want}\n   helm {helm:?}"));
        }
    }
    // And once through a real values.yaml, with Helm's prefix.
    let doc = "a:\n  - b\n  c: d\n";
    assert_eq!(
        helm_oracle::eval_one("{{ .Values }}", doc).unwrap_err(),
        format!(
            "Error: cannot load values.yaml: {}",
            parse_values(doc).unwrap_err()
        )
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Strings drawn from YAML's special characters, as keys and values, written by Helm and by
/// us: a fixed pseudo-random sample, so a failure reproduces.
#[test]
fn random_strings_are_written_as_helm_writes_them() {
    random_strings_match("toYaml", helm_to_yaml);
}

#[test]
fn random_strings_are_written_as_helm_writes_them_pretty() {
    random_strings_match("toYamlPretty", |v| {
        call("toYamlPretty", std::slice::from_ref(v))
            .expect("never fails")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
}

fn random_strings_match(func: &str, ours_of: impl Fn(&Value) -> String) {
    const ALPHABET: &[&str] = &[
        "a",
        "b",
        "Z",
        "0",
        "1",
        "9",
        " ",
        " ",
        "  ",
        "-",
        ":",
        "#",
        "'",
        "\"",
        "\\",
        "\n",
        "\n",
        "\t",
        "\r",
        "?",
        "|",
        ">",
        "&",
        "*",
        "!",
        "%",
        "@",
        "`",
        ",",
        "[",
        "]",
        "{",
        "}",
        "~",
        ".",
        "e",
        "_",
        "é",
        "\u{2028}",
        "\u{85}",
        "\u{a0}",
        "😀",
        "\u{1}",
        "\u{feff}",
        "yes",
        "null",
        "0x",
        "true",
        "1.5",
        "---",
        "...",
        "<<",
        "=",
        "aaaaaaaaaaaaaaa ",
    ];
    let mut seed: u64 = 0x5eed;
    let mut next = move |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % n
    };
    let strings: Vec<String> = (0..400)
        .map(|i| {
            let len = if i % 10 == 0 { 12 + next(20) } else { next(7) };
            (0..len).map(|_| ALPHABET[next(ALPHABET.len())]).collect()
        })
        .collect();
    let values: String = strings
        .iter()
        .enumerate()
        .map(|(i, s)| {
            // Every non-ASCII character escaped: goyaml (YAML 1.1) takes a raw U+0085, U+2028
            // or U+2029 for a line break even inside quotes, and the reader here does not.
            let js = ascii_json(s);
            format!("v{i}: {js}\nk{i}: {{{js}: {js}}}\n")
        })
        .collect();
    let snippets: Vec<String> = (0..strings.len())
        .flat_map(|i| {
            [
                format!("{{{{ {func} .Values.v{i} }}}}"),
                format!("{{{{ {func} .Values.k{i} }}}}"),
            ]
        })
        .collect();
    let snippets: Vec<&str> = snippets.iter().map(String::as_str).collect();
    let helm = helm_oracle::eval(&snippets, &values);
    let ours = parse_values(&values).expect("values parse");
    let mut failures = Vec::new();
    for (i, s) in strings.iter().enumerate() {
        for (j, key) in [format!("v{i}"), format!("k{i}")].iter().enumerate() {
            let mine = ours_of(&ours[key]);
            let theirs = &helm[2 * i + j];
            if theirs.as_deref() != Ok(mine.as_str()) {
                failures.push(format!("{key} {s:?}\n   helm {theirs:?}\n   ours {mine:?}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn ascii_json(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c if (c as u32) > 0xffff => out.push_str(&format!("\\U{:08x}", c as u32)),
            c => out.push_str(&format!("\\u{:04x}", c as u32)),
        }
    }
    out.push('"');
    out
}
