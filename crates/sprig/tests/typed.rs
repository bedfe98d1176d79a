//! Sprig's typed results — `[]string` (`splitList`, `keys`, `regexFindAll`, `regexSplit`,
//! `toStrings`, `sortAlpha`), `[]int` (`until`, `untilStep`), `map[string]string` (`split`,
//! `splitn`) — as Helm shows them: type names, `%#v`, a missing key's empty string,
//! `deepEqual` against `[]interface{}`, the list functions that turn them back into
//! `[]interface{}`, and the parameters that refuse them. Each row checked against helm 3.17.3
//! and against go-template with sprig's functions.

use go_template::Value;

#[path = "support/engine.rs"]
mod engine;

const OUTPUTS: &[(&str, &str)] = &[
    (
        r#"{{ typeOf (splitList "," "a,b") }} {{ typeOf (keys (dict "a" 1)) }} {{ typeOf (until 3) }} {{ typeOf (untilStep 0 4 2) }} {{ typeOf (split "." "a.b") }} {{ typeOf (splitn "." 2 "a.b") }} {{ typeOf (regexFindAll "a" "aa" -1) }} {{ typeOf (regexSplit "a" "bab" -1) }} {{ typeOf (toStrings (list 1)) }} {{ typeOf (sortAlpha (list "b" "a")) }}"#,
        r#"[]string []string []int []int map[string]string map[string]string []string []string []string []string"#,
    ),
    (
        r#"{{ kindOf (splitList "," "a") }} {{ kindOf (split "." "a") }} {{ kindOf (until 1) }}"#,
        r#"slice map slice"#,
    ),
    (
        r#"[{{ (split "." "a.b")._9 }}] [{{ (split "." "a.b")._1 }}] [{{ index (split "." "a.b") "_9" }}] [{{ typeOf (split "." "a.b")._9 }}]"#,
        r#"[] [b] [] [string]"#,
    ),
    (
        r#"{{ printf "%v %q %d" (splitList "," "a,b") (splitList "," "a,b") (until 3) }}"#,
        "[a b] [\"a\" \"b\"] [0 1 2]",
    ),
    (
        r#"{{ printf "%#v|%#v|%#v" (splitList "," "a,b") (until 2) (split "." "a.b") }}"#,
        "[]string{\"a\", \"b\"}|[]int{0, 1}|map[string]string{\"_0\":\"a\", \"_1\":\"b\"}",
    ),
    (
        r#"{{ printf "%T %v" (split "." "a.b") (split "." "a.b") }}"#,
        r#"map[string]string map[_0:a _1:b]"#,
    ),
    (
        r#"{{ len (splitList "," "a,b") }} {{ range splitList "," "a,b" }}{{.}}{{end}} {{ range $k, $v := split "." "a.b" }}{{$k}}={{$v}} {{end}}{{ range $i, $v := until 2 }}{{$i}}{{$v}}{{end}}"#,
        r#"2 ab _0=a _1=b 0011"#,
    ),
    (
        r#"{{ append (splitList "," "a,b") "c" | typeOf }} {{ first (until 3) }} {{ last (splitList "," "a,b") }} {{ rest (splitList "," "a,b") | typeOf }} {{ uniq (splitList "," "a,a") | typeOf }} {{ reverse (until 3) }}"#,
        r#"[]interface {} 0 b []interface {} []interface {} [2 1 0]"#,
    ),
    (
        r#"{{ toJson (splitList "," "a,b") }} {{ toJson (split "." "a.b") }} {{ toJson (until 2) }}"#,
        "[\"a\",\"b\"] {\"_0\":\"a\",\"_1\":\"b\"} [0,1]",
    ),
    (
        r#"{{ deepEqual (splitList "," "a") (list "a") }} {{ deepEqual (splitList "," "a") (splitList "," "a") }} {{ deepEqual (until 1) (list 0) }}"#,
        r#"false true false"#,
    ),
    (
        r#"{{ empty (splitList "," "") }} {{ empty (until 0) }} {{ join "-" (until 3) }} {{ sortAlpha (keys (dict "b" 1 "a" 2)) }} {{ has "a" (splitList "," "a,b") }} {{ has 1 (until 3) }}"#,
        r#"false true 0-1-2 [a b] true true"#,
    ),
    (
        r#"{{ slice (splitList "," "a,b,c") 1 | typeOf }} {{ $x := splitList "," "a,b" }}{{ index $x 1 }} {{ default "x" (splitList "," "") }} {{ (until 2) | toString }} {{ coalesce (until 0) "z" }}"#,
        r#"[]string b [] [0 1] z"#,
    ),
    (
        r#"{{ (split "." "a.b").nope | typeOf }} {{ without (splitList "," "a,b") "a" | typeOf }} {{ compact (splitList "," "a,,b") | typeOf }} {{ concat (splitList "," "a") (until 1) | typeOf }}"#,
        r#"string []interface {} []interface {} []interface {}"#,
    ),
    (
        r#"{{ tuple (splitList "," "a") | typeOf }} {{ list (splitList "," "a") | toJson }} {{ mustAppend (until 1) 5 | typeOf }} {{ prepend (splitList "," "a") "z" }} {{ initial (until 3) | typeOf }} {{ chunk 1 (splitList "," "a,b") | typeOf }}"#,
        "[]interface {} [[\"a\"]] []interface {} [z a] []interface {} [][]interface {}",
    ),
    (
        r#"{{ if splitList "," "" }}T{{ else }}F{{ end }} {{ if until 0 }}T{{ else }}F{{ end }} {{ with split "." "" }}{{ ._0 | quote }}{{ end }}"#,
        "T F \"\"",
    ),
];

/// Snippets Helm refuses, and the tail of its error (after `at <…>: `).
const ERRORS: &[(&str, &str)] = &[
    (
        r#"{{ dig "_0" "none" (split "." "a") }}"#,
        "error calling dig: interface conversion: interface {} is map[string]string, not map[string]interface {}",
    ),
    (
        r#"{{ keys (split "." "a") }}"#,
        "wrong type for value; expected map[string]interface {}; got map[string]string",
    ),
    (
        r#"{{ hasKey (split "." "a") "_0" }}"#,
        "wrong type for value; expected map[string]interface {}; got map[string]string",
    ),
    (
        r#"{{ (splitList "," "a").x }}"#,
        "can't evaluate field x in type []string",
    ),
];

#[test]
fn helm_agrees_with_the_typed_table() {
    let snippets: Vec<&str> = OUTPUTS.iter().map(|(s, _)| *s).collect();
    let got = helm_oracle::eval(&snippets, "");
    for ((snippet, want), got) in OUTPUTS.iter().zip(got) {
        assert_eq!(got.as_deref(), Ok(*want), "helm on {snippet}");
    }
    for (snippet, want) in ERRORS {
        let got = helm_oracle::eval_one(snippet, "");
        assert!(
            got.as_ref()
                .is_err_and(|e| e.ends_with(&format!(": {want}"))),
            "helm on {snippet}: {got:?}"
        );
    }
}

#[test]
fn typed_results_render_as_helm_renders_them() {
    for (snippet, want) in OUTPUTS {
        assert_eq!(render(snippet).as_deref(), Ok(*want), "{snippet}");
    }
    for (snippet, want) in ERRORS {
        let got = render(snippet);
        assert!(
            got.as_ref()
                .is_err_and(|e| e.ends_with(&format!(": {want}"))),
            "{snippet}: {got:?}"
        );
    }
}

fn render(snippet: &str) -> Result<String, String> {
    engine::render_with(snippet, &Value::map(Default::default()))
}
