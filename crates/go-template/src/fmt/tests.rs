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
        expr: if i < 0 {
            format!("({i})")
        } else {
            i.to_string()
        },
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
            failures.push(format!(
                "{snippet}\n  table: {:?}\n  helm:  {got:?}",
                row.expected
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "helm disagrees:\n{}",
        failures.join("\n")
    );
}

fn assert_we_agree(rows: &[Row]) {
    let mut failures = Vec::new();
    for row in rows {
        let ours = row.ours();
        if ours != row.expected {
            failures.push(format!(
                "{}\n  table: {:?}\n  ours:  {ours:?}",
                row.snippet(),
                row.expected
            ));
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
        print_row(
            vec![values("big", Value::Float(12345678.0))],
            "1.2345678e+07",
        ),
        print_row(vec![values("hundredk", Value::Float(100000.0))], "100000"),
        print_row(vec![values("million", Value::Float(1000000.0))], "1e+06"),
        print_row(vec![values("small", Value::Float(0.0001))], "0.0001"),
        print_row(vec![values("tiny", Value::Float(0.00001))], "1e-05"),
        print_row(vec![values("huge", Value::Float(1e21))], "1e+21"),
        print_row(
            vec![values("third", Value::Float(1.0 / 3.0))],
            "0.3333333333333333",
        ),
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
        print_row(
            vec![list(vec![int(1), nil(), float(2.5), boolean(true)])],
            "[1 <nil> 2.5 true]",
        ),
        print_row(
            vec![dict(vec![
                ("b", list(vec![string("x"), string("y")])),
                ("a", int(1)),
            ])],
            "map[a:1 b:[x y]]",
        ),
        print_row(vec![dict(vec![])], "map[]"),
        print_row(
            vec![dict(vec![
                ("n", nil()),
                ("m", dict(vec![("k", string("v"))])),
            ])],
            "map[m:map[k:v] n:<nil>]",
        ),
        print_row(
            vec![list(vec![
                list(vec![int(1)]),
                dict(vec![("a", string(""))]),
            ])],
            "[[1] map[a:]]",
        ),
        // Spaces go between operands when neither is a string.
        print_row(vec![int(1), int(2)], "1 2"),
        print_row(vec![string("a"), string("b")], "ab"),
        print_row(vec![string("a"), int(1), string("b")], "a1b"),
        print_row(vec![int(1), string("a"), int(2)], "1a2"),
        print_row(
            vec![int(1), boolean(true), nil(), float(1.5)],
            "1 true <nil> 1.5",
        ),
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
        assert_eq!(
            format_v(&row.args[0].value),
            row.expected,
            "{}",
            row.snippet()
        );
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

/// `printf`: verbs, flags, width, precision, argument indexes and Go's error reports.
fn printf_table() -> Vec<Row> {
    vec![
        // Floats.
        printf_row("%5.2f|%x", vec![float(3.14158), string("hi")], " 3.14|6869"),
        printf_row("%f", vec![float(1.5)], "1.500000"),
        printf_row(
            "%.0f %.0f %.0f",
            vec![float(0.5), float(1.5), float(2.5)],
            "0 2 2",
        ),
        printf_row("%.2f", vec![float(0.125)], "0.12"),
        printf_row("%.2f", vec![float(1.005)], "1.00"),
        printf_row("%.1f", vec![float(0.05)], "0.1"),
        printf_row("%F", vec![float(2.0)], "2.000000"),
        printf_row("%e", vec![float(123456.789)], "1.234568e+05"),
        printf_row("%E", vec![float(0.000123)], "1.230000E-04"),
        printf_row("%.0e", vec![float(5.0)], "5e+00"),
        printf_row("%e", vec![float(1e100)], "1.000000e+100"),
        printf_row("%e", vec![float(0.0)], "0.000000e+00"),
        printf_row("%g", vec![float(100000.0)], "100000"),
        printf_row("%g", vec![float(1e6)], "1e+06"),
        printf_row("%G", vec![float(1e-7)], "1E-07"),
        printf_row("%.3g", vec![float(1.0)], "1"),
        printf_row("%.3g", vec![float(1234.0)], "1.23e+03"),
        printf_row("%.3g", vec![float(0.00012345)], "0.000123"),
        printf_row("%.10g", vec![float(1.0 / 3.0)], "0.3333333333"),
        printf_row("%#g", vec![float(1.0)], "1.00000"),
        printf_row("%#.3g", vec![float(2.0)], "2.00"),
        printf_row("%#.0f", vec![float(3.0)], "3."),
        printf_row("%#.0e", vec![float(3.0)], "3.e+00"),
        printf_row(
            "%+.2f|% .2f|%+.2f",
            vec![float(1.0), float(1.0), float(-1.0)],
            "+1.00| 1.00|-1.00",
        ),
        printf_row(
            "%08.3f|%-8.3f|%+08.2f",
            vec![float(-3.14158), float(2.5), float(2.5)],
            "-003.142|2.500   |+0002.50",
        ),
        printf_row(
            "%8.2f|%-8.2f|",
            vec![float(f64::INFINITY), float(f64::NAN)],
            "    +Inf|NaN     |",
        ),
        printf_row(
            "%08f|%+f|% f",
            vec![float(f64::NEG_INFINITY), float(f64::NAN), float(f64::NAN)],
            "    -Inf|+NaN| NaN",
        ),
        printf_row(
            "%v|%.2v|%10v|",
            vec![float(1e21), float(3.14158), float(1.5)],
            "1e+21|3.1|       1.5|",
        ),
        printf_row(
            "%x|%X|%.1x",
            vec![float(1.0), float(-3.5), float(1.75)],
            "0x1p+00|-0X1.CP+01|0x1.cp+00",
        ),
        printf_row("%b", vec![float(1.0)], "4503599627370496p-52"),
        printf_row("%f", vec![float(-0.0)], "-0.000000"),
        printf_row("%.3f", vec![float(1e20)], "100000000000000000000.000"),
        printf_row(
            "%6.2f%%",
            vec![values("neg", Value::Float(-2.5))],
            " -2.50%",
        ),
        printf_row(
            "%d",
            vec![values("whole", Value::Float(3.0))],
            "%!d(float64=3)",
        ),
        // Integers.
        printf_row(
            "%d|%5d|%-5d|%05d|%+d|% d",
            vec![int(42), int(42), int(42), int(42), int(42), int(42)],
            "42|   42|42   |00042|+42| 42",
        ),
        printf_row(
            "%05d|%+05d|%-05d|",
            vec![int(-42), int(42), int(42)],
            "-0042|+0042|42   |",
        ),
        printf_row(
            "%.3d|%8.3d|%08.3d|%.0d|%5.0d|",
            vec![int(7), int(-7), int(7), int(0), int(0)],
            "007|    -007|     007||     |",
        ),
        printf_row(
            "%x|%X|%#x|%#X|%o|%#o|%O|%b|%#b",
            vec![
                int(255),
                int(255),
                int(255),
                int(255),
                int(8),
                int(8),
                int(8),
                int(5),
                int(5),
            ],
            "ff|FF|0xff|0XFF|10|010|0o10|101|0b101",
        ),
        printf_row(
            "%x|%d",
            vec![int(-255), int64(-9223372036854775808)],
            "-ff|-9223372036854775808",
        ),
        printf_row(
            "%c|%c|%c|%c",
            vec![int(65), int(0x4E16), int(-1), int(0x110000)],
            "A|世|\u{FFFD}|\u{FFFD}",
        ),
        printf_row(
            "%q|%q|%+q|%q|%q",
            vec![int(65), int(0x263A), int(0x263A), int(10), int(39)],
            "'A'|'☺'|'\\u263a'|'\\n'|'\\''",
        ),
        printf_row(
            "%U|%#U|%#U|%.6U|%U",
            vec![int(0x1F600), int(65), int(10), int(65), int(-1)],
            "U+1F600|U+0041 'A'|U+000A|U+000041|U+FFFFFFFFFFFFFFFF",
        ),
        printf_row(
            "%v|%#v|%+v|%T|%T",
            vec![int(3), int(3), int(3), int(3), int64(3)],
            "3|3|3|int|int64",
        ),
        printf_row(
            "%s|%f|%t|%e",
            vec![int(1), int(1), int64(1), int(1)],
            "%!s(int=1)|%!f(int=1)|%!t(int64=1)|%!e(int=1)",
        ),
        printf_row(
            "%5s|%-5z|",
            vec![int(1), int(2)],
            "%!s(int=    1)|%!z(int=2    )|",
        ),
        // Strings.
        printf_row(
            "%s|%v|%10s|%-10s|%.2s|%5.1s|",
            vec![
                string("héllo"),
                string("a"),
                string("héllo"),
                string("héllo"),
                string("héllo"),
                string("héllo"),
            ],
            "héllo|a|     héllo|héllo     |hé|    h|",
        ),
        printf_row(
            "%q|%+q|%#q|%#q|%#+q",
            vec![
                string("a\"b\\c\n"),
                string("héllo☺"),
                string("back`tick"),
                string("plain"),
                string("é"),
            ],
            "\"a\\\"b\\\\c\\n\"|\"h\\u00e9llo\\u263a\"|\"back`tick\"|`plain`|`é`",
        ),
        printf_row(
            "%q|%q|%q",
            vec![
                string("\u{7f}\u{1}\u{7}\t"),
                string("\u{ad}\u{a0}\u{2028}\u{feff}"),
                string("\u{10ffff}\u{1F600}"),
            ],
            "\"\\x7f\\x01\\a\\t\"|\"\\u00ad\\u00a0\\u2028\\ufeff\"|\"\\U0010ffff😀\"",
        ),
        printf_row(
            "%x|%X|% x|%#x|% #x|%.2x|%8x|%-8x|",
            vec![
                string("hi"),
                string("hi"),
                string("hi!"),
                string("hi"),
                string("hi"),
                string("hello"),
                string("hi"),
                string("hi"),
            ],
            "6869|6869|68 69 21|0x6869|0x68 0x69|6865|    6869|6869    |",
        ),
        printf_row("%x|%5x|", vec![string(""), string("")], "|     |"),
        printf_row(
            "%d|%t|%c",
            vec![string("a"), string("b"), string("c")],
            "%!d(string=a)|%!t(string=b)|%!c(string=c)",
        ),
        printf_row(
            "%#v|%+v|%T",
            vec![string("a\"b"), string("x"), string("x")],
            "\"a\\\"b\"|x|string",
        ),
        printf_row(
            "%05s|%-05s|",
            vec![string("ab"), string("ab")],
            "000ab|ab   |",
        ),
        // Booleans.
        printf_row(
            "%t|%v|%6t|%-6t|%d",
            vec![
                boolean(true),
                boolean(false),
                boolean(true),
                boolean(false),
                boolean(true),
            ],
            "true|false|  true|false |%!d(bool=true)",
        ),
        // Nil.
        printf_row(
            "%v|%s|%d|%T|%#v|%5v|",
            vec![nil(), nil(), nil(), nil(), nil(), nil()],
            "<nil>|%!s(<nil>)|%!d(<nil>)|<nil>|<nil>|<nil>|",
        ),
        // Lists and maps: the verb applies to each element.
        printf_row(
            "%d|%s|%x|%q",
            vec![
                list(vec![int(1), int(2)]),
                list(vec![string("a"), string("b")]),
                list(vec![int(255), string("hi")]),
                list(vec![string("a"), int(66)]),
            ],
            "[1 2]|[a b]|[ff 6869]|[\"a\" 'B']",
        ),
        printf_row(
            "%s|%d|%v",
            vec![
                list(vec![int(1), nil()]),
                list(vec![string("a"), float(1.5)]),
                list(vec![]),
            ],
            "[%!s(int=1) <nil>]|[%!d(string=a) %!d(float64=1.5)]|[]",
        ),
        printf_row(
            "%5d|%-3v|",
            vec![list(vec![int(1), int(2)]), list(vec![string("a")])],
            "[    1     2]|[a  ]|",
        ),
        printf_row(
            "%s|%d",
            vec![
                dict(vec![("a", int(1)), ("b", string("x"))]),
                dict(vec![("a", int(1))]),
            ],
            "map[a:%!s(int=1) b:x]|map[%!d(string=a):1]",
        ),
        printf_row(
            "%#v",
            vec![dict(vec![
                ("a", int(1)),
                ("b", list(vec![string("x"), nil(), float(1.5)])),
            ])],
            "map[string]interface {}{\"a\":1, \"b\":[]interface {}{\"x\", interface {}(nil), 1.5}}",
        ),
        printf_row(
            "%#v|%#v|%#v|%#v",
            vec![
                list(vec![int(1), string("a")]),
                list(vec![]),
                dict(vec![]),
                int64(5),
            ],
            "[]interface {}{1, \"a\"}|[]interface {}{}|map[string]interface {}{}|5",
        ),
        printf_row(
            "%+v|%T|%T",
            vec![dict(vec![("k", boolean(true))]), list(vec![]), dict(vec![])],
            "map[k:true]|[]interface {}|map[string]interface {}",
        ),
        printf_row(
            "%v",
            vec![dict(vec![
                ("b", int(1)),
                ("B", int(2)),
                ("a", int(3)),
                ("_", int(4)),
                ("10", int(5)),
                ("9", int(6)),
            ])],
            "map[10:5 9:6 B:2 _:4 a:3 b:1]",
        ),
        // Width and precision from operands.
        printf_row(
            "%*d|%-*d|%.*f|%*.*f|",
            vec![
                int(5),
                int(1),
                int(4),
                int(2),
                int(2),
                float(3.14158),
                int(8),
                int(3),
                float(2.5),
            ],
            "    1|2   |3.14|   2.500|",
        ),
        printf_row("%*d|", vec![int(-4), int(7)], "7   |"),
        printf_row(
            "%*d|%.*d|",
            vec![string("x"), int(7), float(1.0), int(7)],
            "%!(BADWIDTH)7|%!(BADPREC)7|",
        ),
        printf_row("%*d|", vec![int64(3), int(7)], "  7|"),
        printf_row("%.*d|", vec![int(-1), int(7)], "%!(BADPREC)7|"),
        // Explicit argument indexes.
        printf_row("%[2]d %[1]d", vec![int(1), int(2)], "2 1"),
        printf_row("%[2]d %d %[1]s", vec![string("a"), int(2), int(3)], "2 3 a"),
        printf_row(
            "%[3]*.[2]*[1]f",
            vec![float(12.0), int(2), int(6)],
            " 12.00",
        ),
        printf_row(
            "%[5]d|%[0]d|%[x]d|%[1]",
            vec![int(1)],
            "%!d(BADINDEX)|%!d(BADINDEX)|%!d(BADINDEX)|%!(NOVERB)",
        ),
        printf_row("%[1]d %[1]d", vec![int(9)], "9 9"),
        printf_row("%d %[1]d %d", vec![int(1), int(2)], "1 1 2"),
        // Missing, extra, bad verbs.
        printf_row("%d %d", vec![int(1)], "1 %!d(MISSING)"),
        printf_row("%s", vec![], "%!s(MISSING)"),
        printf_row("x", vec![int(1), string("a")], "x%!(EXTRA int=1, string=a)"),
        printf_row(
            "%d",
            vec![int(1), nil(), list(vec![int(2)]), float(1.5)],
            "1%!(EXTRA <nil>, []interface {}=[2], float64=1.5)",
        ),
        printf_row("%[1]d", vec![int(1), int(2)], "1"),
        printf_row(
            "%z|%!|%é",
            vec![int(1), int(2), int(3)],
            "%!z(int=1)|%!!(int=2)|%!é(int=3)",
        ),
        printf_row("%", vec![], "%!(NOVERB)"),
        printf_row("%-", vec![int(1)], "%!(NOVERB)%!(EXTRA int=1)"),
        printf_row("%% %5% %d", vec![int(1)], "% % 1"),
        printf_row(
            "%.d|%.f|%.s|",
            vec![int(0), float(2.5), string("abc")],
            "|2||",
        ),
        printf_row("%v %v", vec![boolean(true), string("ü")], "true ü"),
        printf_row(
            "%10.4v|%-10v|",
            vec![string("abcdefgh"), boolean(true)],
            "      abcd|true      |",
        ),
        printf_row("%p", vec![int(1)], "%!p(int=1)"),
    ]
}

#[test]
fn printf_table_matches_helm() {
    assert_helm_agrees(&printf_table());
}

#[test]
fn printf_table_matches_ours() {
    assert_we_agree(&printf_table());
}

fn arb_value() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Nil),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        any::<i64>().prop_map(Value::Int64),
        any::<f64>().prop_map(Value::Float),
        ".{0,8}".prop_map(Value::string),
        proptest::collection::vec(any::<u8>(), 0..6).prop_map(|b| Value::Bytes(b.into())),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::list),
            proptest::collection::btree_map(".{0,4}", inner, 0..6).prop_map(Value::map),
        ]
    })
}

proptest::proptest! {
    #[test]
    fn format_v_never_panics(v in arb_value()) {
        let _ = format_v(&v);
        let _ = sprint(&[v.clone(), v.clone()]);
    }

    #[test]
    fn sprintf_never_panics(format in "([%][-+# 0]{0,3}(\\[[0-9]\\])?[*0-9]{0,2}([.][*0-9]{0,2})?[a-zA-Z%!]?|[a-z ]){0,6}", args in proptest::collection::vec(arb_value(), 0..4)) {
        let _ = sprintf(&format, &args);
    }
}

#[test]
fn a_map_that_holds_itself_prints_without_overflowing() {
    let m = Value::map(Map::new());
    if let Value::Map(inner) = &m {
        inner.borrow_mut().insert("self".into(), m.clone());
    }
    let out = format_v(&m);
    assert!(out.starts_with("map[self:map[self:"), "{}", &out[..40]);
    if let Value::Map(inner) = &m {
        inner.borrow_mut().clear();
    }
}
