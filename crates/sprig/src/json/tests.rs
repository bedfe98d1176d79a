//! JSON encoding and decoding, checked against a table whose every row real Helm confirms.

use super::*;
use go_template::Map;

/// (function, the value as JSON — it reaches Helm as `.Values.v`, so every number is a
/// float64 —, expected output). `None` as output: an error (for the `must` forms).
const ENCODE: &[(&str, &str, &str)] = &[
    (
        "toJson",
        r#"{"b":1,"a":[1.5,"x",null,true]}"#,
        r#"{"a":[1.5,"x",null,true],"b":1}"#,
    ),
    (
        "toJson",
        r#""<a href=\"x\">&amp;</a>""#,
        r#""\u003ca href=\"x\"\u003e\u0026amp;\u003c/a\u003e""#,
    ),
    (
        "toRawJson",
        r#""<a href=\"x\">&amp;</a>""#,
        r#""<a href=\"x\">&amp;</a>""#,
    ),
    ("toRawJson", r#""a\u2028b\u2029c""#, r#""a\u2028b\u2029c""#),
    (
        "toJson",
        r#""tab\t nl\n cr\r bs\b ff\f \u0001 \u001f é 😀 \\ /""#,
        r#""tab\t nl\n cr\r bs\b ff\f \u0001 \u001f é 😀 \\ /""#,
    ),
    ("toJson", "1e21", "1e+21"),
    ("toJson", "1e20", "100000000000000000000"),
    ("toJson", "123456789.125", "123456789.125"),
    ("toJson", "0.000001", "0.000001"),
    ("toJson", "0.0000001", "1e-7"),
    ("toJson", "-1.5e-300", "-1.5e-300"),
    (
        "toJson",
        "1.7976931348623157e308",
        "1.7976931348623157e+308",
    ),
    ("toJson", "5e-324", "5e-324"),
    ("toJson", "0.1", "0.1"),
    ("toJson", "100", "100"),
    ("toJson", "-0.5", "-0.5"),
    ("toJson", "{}", "{}"),
    ("toJson", "[]", "[]"),
    ("toJson", "null", "null"),
    (
        "toPrettyJson",
        r#"{"b":{"c":[1,{"d":[]},{}]},"a":"<"}"#,
        "{\n  \"a\": \"\\u003c\",\n  \"b\": {\n    \"c\": [\n      1,\n      {\n        \"d\": []\n      },\n      {}\n    ]\n  }\n}",
    ),
    ("toPrettyJson", "[]", "[]"),
    ("toPrettyJson", "\"x\"", "\"x\""),
    ("mustToRawJson", r#"{"k":"<&>"}"#, r#"{"k":"<&>"}"#),
    (
        "mustToPrettyJson",
        r#"{"k":["<&>"]}"#,
        "{\n  \"k\": [\n    \"\\u003c\\u0026\\u003e\"\n  ]\n}",
    ),
    (
        "mustToJson",
        r#"{"k":["<&>"]}"#,
        r#"{"k":["\u003c\u0026\u003e"]}"#,
    ),
];

fn call(name: &str, args: &[Value]) -> Result<Value, CallError> {
    let mut m = FuncMap::new();
    register(&mut m);
    let f = m
        .get(name)
        .unwrap_or_else(|| panic!("{name} is registered"));
    struct NoEnv;
    impl go_template::Env for NoEnv {
        fn execute_template(&mut self, _: &str, _: &Value) -> Result<String, CallError> {
            unreachable!()
        }
        fn execute_text(&mut self, _: &str, _: &str, _: &Value) -> Result<String, CallError> {
            unreachable!()
        }
    }
    (f.body)(&mut NoEnv, args)
}

fn from_json(text: &str) -> Value {
    let d = unmarshal(text);
    assert_eq!(d.error, None, "{text}");
    d.value
}

#[test]
fn encode_table_matches_ours() {
    for (func, value, want) in ENCODE {
        let got = call(func, &[from_json(value)]).expect("encodes");
        assert_eq!(got.as_str(), Some(*want), "{func} {value}");
    }
}

#[test]
fn encode_table_matches_helm() {
    let values: String = ENCODE
        .iter()
        .enumerate()
        .map(|(i, (_, v, _))| format!("v{i}: {v}\n"))
        .collect();
    let snippets: Vec<String> = ENCODE
        .iter()
        .enumerate()
        .map(|(i, (f, _, _))| format!("{{{{ {f} .Values.v{i} }}}}"))
        .collect();
    let snippets: Vec<&str> = snippets.iter().map(String::as_str).collect();
    let got = helm_oracle::eval(&snippets, &values);
    for ((func, value, want), got) in ENCODE.iter().zip(got) {
        assert_eq!(got.as_deref(), Ok(*want), "{func} {value}");
    }
}

#[test]
fn go_template_integers_and_bytes() {
    assert_eq!(marshal(&Value::Int(3), true).as_deref(), Ok("3"));
    assert_eq!(marshal(&Value::Int64(-9), true).as_deref(), Ok("-9"));
    assert_eq!(marshal(&Value::Float(3.0), true).as_deref(), Ok("3"));
    let bytes = Value::Bytes(Rc::from(&b"hi\xff"[..]));
    assert_eq!(marshal(&bytes, true).as_deref(), Ok("\"aGn/\""));
}

#[test]
fn nan_and_infinities_are_refused_as_go_refuses_them() {
    let list = Value::list(vec![Value::Float(f64::NAN)]);
    assert_eq!(
        marshal(&list, true),
        Err("json: unsupported value: NaN".into())
    );
    assert_eq!(
        marshal(&Value::Float(f64::INFINITY), false),
        Err("json: unsupported value: +Inf".into())
    );
    assert_eq!(
        marshal_indent(&Value::Float(f64::NEG_INFINITY), "  "),
        Err("json: unsupported value: -Inf".into())
    );
    assert_eq!(
        call("toJson", std::slice::from_ref(&list))
            .unwrap()
            .as_str(),
        Some("")
    );
    assert_eq!(
        call("mustToJson", &[list]).unwrap_err(),
        CallError::Call("json: unsupported value: NaN".into())
    );
}

#[test]
fn a_cyclic_map_is_an_error() {
    let m = Value::map(Map::new());
    if let Value::Map(inner) = &m {
        inner.borrow_mut().insert("self".into(), m.clone());
    }
    assert_eq!(
        marshal(&m, true),
        Err("json: unsupported value: encountered a cycle via map[string]interface {}".into())
    );
    if let Value::Map(inner) = &m {
        inner.borrow_mut().clear();
    }
}

#[test]
fn float_formats_follow_strconv() {
    for (f, g) in [
        (1e7, "1e+07"),
        (123456.0, "123456"),
        (1234567.5, "1.2345675e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-0.0, "-0"),
        (1e21, "1e+21"),
        (1.5, "1.5"),
    ] {
        assert_eq!(format_float_g(f), g, "{f}");
    }
    assert_eq!(json_float(-0.0).as_deref(), Ok("-0"));
    assert_eq!(json_float(1e-7).as_deref(), Ok("1e-7"));
    assert_eq!(json_float(1.5e-10).as_deref(), Ok("1.5e-10"));
    assert_eq!(json_float(1e100).as_deref(), Ok("1e+100"));
}

/// (input, the value `json.Unmarshal` into an `interface{}` gives, as our encoder writes it
/// back, and the error Helm's `fromJson` — into a `map[string]interface{}` — reports).
const DECODE: &[(&str, &str, &str)] = &[
    (
        r#" {"a": [1, 2.5e3, "x\u00e9\ud83d\ude00", true, null], "b": {}} "#,
        r#"{"a":[1,2500,"xé😀",true,null],"b":{}}"#,
        "",
    ),
    (r#"{"a":1,"a":2}"#, r#"{"a":2}"#, ""),
    ("", "null", "unexpected end of JSON input"),
    ("   ", "null", "unexpected end of JSON input"),
    ("{", "null", "unexpected end of JSON input"),
    (r#"{"a":"#, "null", "unexpected end of JSON input"),
    (
        "x",
        "null",
        "invalid character 'x' looking for beginning of value",
    ),
    (
        "{x",
        "null",
        "invalid character 'x' looking for beginning of object key string",
    ),
    (
        r#"{"a" 1}"#,
        "null",
        "invalid character '1' after object key",
    ),
    (
        r#"{"a":1 "b"}"#,
        "null",
        "invalid character '\"' after object key:value pair",
    ),
    (
        r#"{"a":1,}"#,
        "null",
        "invalid character '}' looking for beginning of object key string",
    ),
    ("[1 2]", "null", "invalid character '2' after array element"),
    (
        "[1,]",
        "null",
        "invalid character ']' looking for beginning of value",
    ),
    (
        "{} {}",
        "null",
        "invalid character '{' after top-level value",
    ),
    ("01", "null", "invalid character '1' after top-level value"),
    ("-x", "null", "invalid character 'x' in numeric literal"),
    (
        "1.x",
        "null",
        "invalid character 'x' after decimal point in numeric literal",
    ),
    (
        "1ex",
        "null",
        "invalid character 'x' in exponent of numeric literal",
    ),
    (
        "tru",
        "null",
        "invalid character ' ' in literal true (expecting 'e')",
    ),
    ("-", "null", "invalid character ' ' in numeric literal"),
    (
        "1.",
        "null",
        "invalid character ' ' after decimal point in numeric literal",
    ),
    (
        "1e+",
        "null",
        "invalid character ' ' in exponent of numeric literal",
    ),
    (
        "\"\\",
        "null",
        "invalid character ' ' in string escape code",
    ),
    (
        "\"\\u12",
        "null",
        "invalid character ' ' in \\u hexadecimal character escape",
    ),
    ("\"abc", "null", "unexpected end of JSON input"),
    ("[1,", "null", "unexpected end of JSON input"),
    (
        "12",
        "12",
        "json: cannot unmarshal number into Go value of type map[string]interface {}",
    ),
    (
        "[1]",
        "[1]",
        "json: cannot unmarshal array into Go value of type map[string]interface {}",
    ),
    (
        "trux",
        "null",
        "invalid character 'x' in literal true (expecting 'e')",
    ),
    (
        "nul1",
        "null",
        "invalid character '1' in literal null (expecting 'l')",
    ),
    (
        "\"a\\x\"",
        "null",
        "invalid character 'x' in string escape code",
    ),
    (
        "\"\\u12g4\"",
        "null",
        "invalid character 'g' in \\u hexadecimal character escape",
    ),
    (
        "\"a\tb\"",
        "null",
        "invalid character '\\t' in string literal",
    ),
    (
        "'a'",
        "null",
        "invalid character '\\'' looking for beginning of value",
    ),
    (
        "é",
        "null",
        "invalid character 'Ã' looking for beginning of value",
    ),
    (
        r#"{"a":1e400,"b":2}"#,
        r#"{"a":null,"b":2}"#,
        "json: cannot unmarshal number 1e400 into Go value of type float64",
    ),
];

#[test]
fn decode_table_matches_ours() {
    for (input, value, err) in DECODE {
        let d = unmarshal(input);
        assert_eq!(marshal(&d.value, false).as_deref(), Ok(*value), "{input:?}");
        let (_, error) = unmarshal_map(input);
        assert_eq!(error.as_deref().unwrap_or(""), *err, "{input:?}");
    }
}

/// Helm's `fromJson` shows the decoded map, or the error under `Error`, which gives the same
/// facts for every row that decodes to an object or fails.
#[test]
fn decode_table_matches_helm() {
    let values: String = DECODE
        .iter()
        .enumerate()
        .map(|(i, (input, _, _))| format!("v{i}: {}\n", serde_json::to_string(input).unwrap()))
        .collect();
    let snippets: Vec<String> = (0..DECODE.len())
        .map(|i| format!("{{{{ fromJson .Values.v{i} | toRawJson }}}}"))
        .collect();
    let snippets: Vec<&str> = snippets.iter().map(String::as_str).collect();
    let got = helm_oracle::eval(&snippets, &values);
    for ((input, value, err), got) in DECODE.iter().zip(got) {
        let (map, error) = unmarshal_map(input);
        assert_eq!(error.as_deref().unwrap_or(""), *err, "{input:?}");
        let mut map = map;
        if let Some(e) = error {
            map.insert("Error".into(), Value::string(e));
        }
        let want = marshal(&Value::map(map), false).unwrap();
        assert_eq!(
            got.as_deref(),
            Ok(want.as_str()),
            "{input:?} (value {value})"
        );
    }
}

proptest::proptest! {
    #[test]
    fn decoding_never_panics(s in ".{0,40}") {
        let _ = unmarshal(&s);
    }

    #[test]
    fn decoding_what_we_encode_gives_it_back(v in json_value()) {
        let text = marshal(&v, true).unwrap();
        let d = unmarshal(&text);
        proptest::prop_assert_eq!(d.error, None);
        proptest::prop_assert_eq!(marshal(&d.value, true).unwrap(), text.clone());
        let pretty = marshal_indent(&v, "  ").unwrap();
        proptest::prop_assert_eq!(marshal(&unmarshal(&pretty).value, true).unwrap(), text);
    }
}

fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Nil),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::Float),
        ".{0,8}".prop_map(Value::string),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::list),
            proptest::collection::btree_map(".{0,6}", inner, 0..6).prop_map(Value::map),
        ]
    })
}
