//! Whatever the text, parsing and executing end in output or an error: no panic, no stack
//! overflow (a fuzz target for the parser can build on the same entry points).

use go_template::{FuncMap, Limits, Map, MissingKey, Templates, Value};
use proptest::prelude::*;

/// Pieces templates are made of, so random texts reach deep into the grammar.
const PIECES: &[&str] = &[
    "{{", "}}", "{{-", "-}}", " ", "\n", "(", ")", "|", "$", "$x", ":=", "=", ",", ".", ".a",
    ".Values", "\"s\"", "`r`", "'c'", "1", "-1", "1.5", "0x1F", "1e3", "1i", "true", "nil", "if",
    "else", "end", "range", "with", "define", "template", "block", "break", "continue", "\"x\"",
    "and", "or", "not", "len", "index", "slice", "eq", "lt", "print", "printf", "html", "js",
    "urlquery", "call", "/*", "*/", "x", "é", "#", "\u{1}", "\\",
];

fn run(text: &str) {
    let mut t = Templates::new(FuncMap::new());
    t.set_missing_key(MissingKey::Zero);
    t.set_limits(Limits {
        max_output: 1 << 16,
        ..Limits::default()
    });
    if t.parse("t", text).is_ok() {
        let mut inner = Map::new();
        inner.insert(
            "a".into(),
            Value::list(vec![Value::Int(1), Value::string("s")]),
        );
        let mut top = Map::new();
        top.insert("Values".into(), Value::map(inner));
        let _ = t.execute("t", &Value::map(top));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_pieces_never_panic(pieces in proptest::collection::vec(0..PIECES.len(), 0..40)) {
        let text: String = pieces.iter().map(|&i| PIECES[i]).collect();
        run(&text);
    }

    #[test]
    fn random_text_never_panics(text in "\\PC{0,60}") {
        run(&text);
        run(&format!("{{{{ {text} }}}}"));
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    for text in [
        format!("{{{{ {}1{} }}}}", "(".repeat(50_000), ")".repeat(50_000)),
        format!(
            "{}{}",
            "{{ if 1 }}".repeat(50_000),
            "{{ end }}".repeat(50_000)
        ),
        format!(
            "{}{}",
            "{{ block \"b\" . }}".repeat(50_000),
            "{{ end }}".repeat(50_000)
        ),
        format!(
            "{}{}",
            "{{ range .Values.a }}".repeat(99),
            "{{ end }}".repeat(99)
        ),
    ] {
        run(&text);
    }
}
