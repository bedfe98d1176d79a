//! Conformance tables for Go's `fmt`: every expected output is checked against real Helm
//! (through `helm_oracle`) and against our printer, on the same arguments.

use super::{format_v, sprint, sprintf, sprintln};
use crate::{Map, Value};

/// An operand: the template expression that yields it in Helm, and the value it is.
#[derive(Clone)]
struct Arg {
    expr: String,
    value: Value,
}

/// A Go string literal for `s`, for building template source.
fn go_literal(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A template constant `1`: Go's `int`.
fn int(i: i64) -> Arg {
    Arg {
        expr: if i < 0 { format!("({i})") } else { i.to_string() },
        value: Value::Int(i),
    }
}

/// sprig's `int64 n`.
fn int64(i: i64) -> Arg {
    Arg {
        expr: format!("(int64 {})", go_literal(&i.to_string())),
        value: Value::Int64(i),
    }
}

/// A `float64`, through sprig's `float64 "…"` (Go's `strconv.ParseFloat`).
fn float(x: f64) -> Arg {
    let text = if x.is_nan() {
        "NaN".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{x:e}")
    };
    Arg {
        expr: format!("(float64 {})", go_literal(&text)),
        value: Value::Float(x),
    }
}

fn string(s: &str) -> Arg {
    Arg {
        expr: go_literal(s),
        value: Value::string(s),
    }
}

fn boolean(b: bool) -> Arg {
    Arg {
        expr: b.to_string(),
        value: Value::Bool(b),
    }
}

fn nil() -> Arg {
    Arg {
        expr: "nil".into(),
        value: Value::Nil,
    }
}

/// sprig's `list …`: a `[]interface{}`.
fn list(items: Vec<Arg>) -> Arg {
    let exprs: Vec<String> = items.iter().map(|a| a.expr.clone()).collect();
    Arg {
        expr: format!("(list {})", exprs.join(" ")),
        value: Value::list(items.into_iter().map(|a| a.value).collect()),
    }
}

/// sprig's `dict …`: a `map[string]interface{}`.
fn dict(entries: Vec<(&str, Arg)>) -> Arg {
    let mut expr = String::from("(dict");
    let mut map = Map::new();
    for (k, v) in entries {
        expr.push(' ');
        expr.push_str(&go_literal(k));
        expr.push(' ');
        expr.push_str(&v.expr);
        map.insert(k.to_string(), v.value);
    }
    expr.push(')');
    Arg {
        expr,
        value: Value::map(map),
    }
}

/// A value from `.Values.<name>` (YAML numbers there are `float64`).
fn values(name: &str, value: Value) -> Arg {
    Arg {
        expr: format!(".Values.{name}"),
        value,
    }
}

/// The `values.yaml` the `.Values` operands come from.
const VALUES: &str = "big: 12345678\nhundredk: 100000\nmillion: 1000000\nsmall: 0.0001\n\
tiny: 0.00001\nhuge: 1e21\nthird: 0.3333333333333333\nneg: -2.5\nwhole: 3\n";

/// One row: a format (`None` for `print`) with its operands, and Helm's output.
struct Row {
    format: Option<&'static str>,
    args: Vec<Arg>,
    expected: &'static str,
}

fn print_row(args: Vec<Arg>, expected: &'static str) -> Row {
    Row {
        format: None,
        args,
        expected,
    }
}

fn printf_row(format: &'static str, args: Vec<Arg>, expected: &'static str) -> Row {
    Row {
        format: Some(format),
        args,
        expected,
    }
}

impl Row {
    fn snippet(&self) -> String {
        let args: Vec<&str> = self.args.iter().map(|a| a.expr.as_str()).collect();
        match self.format {
            None => format!("{{{{ print {} }}}}", args.join(" ")),
            Some(f) => format!("{{{{ printf {} {} }}}}", go_literal(f), args.join(" ")),
        }
    }

    fn ours(&self) -> String {
        let args: Vec<Value> = self.args.iter().map(|a| a.value.clone()).collect();
        match self.format {
            None => sprint(&args),
            Some(f) => sprintf(f, &args),
        }
    }
}

/// Asserts Helm produces each row's expected output (one helm run for the table).
fn assert_helm_agrees(rows: &[Row]) {
    let snippets: Vec<String> = rows.iter().map(Row::snippet).collect();
    let refs: Vec<&str> = snippets.iter().map(String::as_str).collect();
    let got = helm_oracle::eval(&refs, VALUES);
    let mut failures = Vec::new();
    for ((row, snippet), got) in rows.iter().zip(&snippets).zip(got) {
        if got.as_deref() != Ok(row.expected) {
            failures.push(format!("{snippet}\n  table: {:?}\n  helm:  {got:?}", row.expected));
        }
    }
    assert!(failures.is_empty(), "helm disagrees:\n{}", failures.join("\n"));
}

fn assert_we_agree(rows: &[Row]) {
    let mut failures = Vec::new();
    for row in rows {
        let ours = row.ours();
        if ours != row.expected {
            failures.push(format!("{}\n  table: {:?}\n  ours:  {ours:?}", row.snippet(), row.expected));
        }
    }
    assert!(failures.is_empty(), "we disagree:\n{}", failures.join("\n"));
}

/// `print`/`%v` of every kind of value: Go's `Fprint`, as a pipeline's result is written.
fn print_table() -> Vec<Row> {
    vec![
        print_row(vec![int(1)], "1"),
        print_row(vec![int(-42)], "-42"),
        print_row(vec![int64(9223372036854775807)], "9223372036854775807"),
        print_row(vec![int64(-9223372036854775808)], "-9223372036854775808"),
        print_row(vec![boolean(true)], "true"),
        print_row(vec![boolean(false)], "false"),
        print_row(vec![string("hi there")], "hi there"),
        print_row(vec![nil()], "<nil>"),
        print_row(vec![float(1.5)], "1.5"),
        print_row(vec![float(3.0)], "3"),
        print_row(vec![values("big", Value::Float(12345678.0))], "1.2345678e+07"),
        print_row(vec![values("hundredk", Value::Float(100000.0))], "100000"),
        print_row(vec![values("million", Value::Float(1000000.0))], "1e+06"),
        print_row(vec![values("small", Value::Float(0.0001))], "0.0001"),
        print_row(vec![values("tiny", Value::Float(0.00001))], "1e-05"),
        print_row(vec![values("huge", Value::Float(1e21))], "1e+21"),
        print_row(vec![values("third", Value::Float(1.0 / 3.0))], "0.3333333333333333"),
        print_row(vec![values("neg", Value::Float(-2.5))], "-2.5"),
        print_row(vec![values("whole", Value::Float(3.0))], "3"),
        print_row(vec![float(123456.0)], "123456"),
        print_row(vec![float(1234567.0)], "1.234567e+06"),
        print_row(vec![float(0.1 + 0.2)], "0.30000000000000004"),
        print_row(vec![float(-0.0)], "-0"),
        print_row(vec![float(0.0)], "0"),
        print_row(vec![float(f64::NAN)], "NaN"),
        print_row(vec![float(f64::INFINITY)], "+Inf"),
        print_row(vec![float(f64::NEG_INFINITY)], "-Inf"),
        print_row(vec![float(5e-324)], "5e-324"),
        print_row(vec![float(f64::MAX)], "1.7976931348623157e+308"),
        print_row(vec![float(1e100)], "1e+100"),
        print_row(vec![list(vec![string("a"), string("b")])], "[a b]"),
        print_row(vec![list(vec![])], "[]"),
        print_row(vec![list(vec![int(1), nil(), float(2.5), boolean(true)])], "[1 <nil> 2.5 true]"),
        print_row(
            vec![dict(vec![("b", list(vec![string("x"), string("y")])), ("a", int(1))])],
            "map[a:1 b:[x y]]",
        ),
        print_row(vec![dict(vec![])], "map[]"),
        print_row(
            vec![dict(vec![("n", nil()), ("m", dict(vec![("k", string("v"))]))])],
            "map[m:map[k:v] n:<nil>]",
        ),
        print_row(vec![list(vec![list(vec![int(1)]), dict(vec![("a", string(""))])])], "[[1] map[a:]]"),
        // Spaces go between operands when neither is a string.
        print_row(vec![int(1), int(2)], "1 2"),
        print_row(vec![string("a"), string("b")], "ab"),
        print_row(vec![string("a"), int(1), string("b")], "a1b"),
        print_row(vec![int(1), string("a"), int(2)], "1a2"),
        print_row(vec![int(1), boolean(true), nil(), float(1.5)], "1 true <nil> 1.5"),
        print_row(vec![nil(), nil()], "<nil> <nil>"),
        print_row(vec![list(vec![]), dict(vec![])], "[] map[]"),
        print_row(vec![string(""), int(1)], "1"),
        print_row(vec![], ""),
    ]
}

#[test]
fn print_table_matches_helm() {
    assert_helm_agrees(&print_table());
}

#[test]
fn print_table_matches_ours() {
    assert_we_agree(&print_table());
}

#[test]
fn format_v_is_print_of_one_value() {
    for row in print_table().iter().filter(|r| r.args.len() == 1) {
        assert_eq!(format_v(&row.args[0].value), row.expected, "{}", row.snippet());
    }
}

#[test]
fn println_always_separates_and_ends_with_a_newline() {
    let rows: Vec<(Vec<Arg>, &str)> = vec![
        (vec![string("a"), string("b")], "a b\n"),
        (vec![int(1), string("a"), nil()], "1 a <nil>\n"),
        (vec![], "\n"),
    ];
    let snippets: Vec<String> = rows
        .iter()
        .map(|(args, _)| {
            let exprs: Vec<&str> = args.iter().map(|a| a.expr.as_str()).collect();
            format!("{{{{ println {} }}}}", exprs.join(" "))
        })
        .collect();
    let refs: Vec<&str> = snippets.iter().map(String::as_str).collect();
    let helm = helm_oracle::eval(&refs, VALUES);
    for ((args, expected), helm) in rows.iter().zip(helm) {
        assert_eq!(helm.as_deref(), Ok(*expected));
        let values: Vec<Value> = args.iter().map(|a| a.value.clone()).collect();
        assert_eq!(sprintln(&values), *expected);
    }
}
