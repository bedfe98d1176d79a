//! The escapers behind text/template's `html`, `js` and `urlquery` builtins: Go's
//! `template.HTMLEscapeString`, `template.JSEscapeString` and `url.QueryEscape`, and the way
//! those builtins turn their operands into one string first.

use crate::Value;
use crate::fmt::{sprint, strconv::is_print};
use std::fmt::Write as _;

/// text/template's `evalArgs`: a single string operand as it is; otherwise the operands
/// printed as `fmt.Sprint` prints them, with a missing value (nil) printed as `<no value>`
/// and, being a string then, spaced as a string.
pub fn eval_args(args: &[Value]) -> String {
    if let [Value::String(s)] = args {
        return s.to_string();
    }
    let args: Vec<Value> = args
        .iter()
        .map(|a| match a {
            Value::Nil => Value::string("<no value>"),
            a => a.clone(),
        })
        .collect();
    sprint(&args)
}

/// The `html` builtin: its operands through [`eval_args`], then [`html_escape_string`].
pub fn html_escaper(args: &[Value]) -> String {
    html_escape_string(&eval_args(args))
}

/// The `js` builtin: its operands through [`eval_args`], then [`js_escape_string`].
pub fn js_escaper(args: &[Value]) -> String {
    js_escape_string(&eval_args(args))
}

/// The `urlquery` builtin: its operands through [`eval_args`], then [`url_query_escape`].
pub fn url_query_escaper(args: &[Value]) -> String {
    url_query_escape(&eval_args(args))
}

/// Go's `template.HTMLEscapeString`: `<`, `>`, `&`, `'`, `"` become entities (`&#39;`,
/// `&#34;`), NUL becomes U+FFFD.
pub fn html_escape_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\0' => out.push('\u{FFFD}'),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Go's `template.JSEscapeString`: backslash, quotes, `<`, `>`, `&` and `=` escaped
/// (`\'`, `\u003C`…), ASCII control characters as `\u00XX`, other characters kept when
/// printable and written `\uXXXX` (upper-case hex, at least four digits) when not.
pub fn js_escape_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if c < ' ' => {
                let _ = write!(out, "\\u00{:02X}", c as u32);
            }
            c if c.is_ascii() || is_print(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
        }
    }
    out
}

/// Go's `url.QueryEscape`: letters, digits and `-_.~` kept, space as `+`, every other byte
/// as `%XX` (upper-case hex).
pub fn url_query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (template snippet, our operands, Helm's output): `html`, `js` and `urlquery`.
    fn table() -> Vec<(&'static str, &'static str, Vec<Value>, &'static str)> {
        let s = |x: &str| Value::string(x);
        vec![
            (
                "html",
                r#""<a href='x'>&\"q\"""#,
                vec![s("<a href='x'>&\"q\"")],
                "&lt;a href=&#39;x&#39;&gt;&amp;&#34;q&#34;",
            ),
            (
                "html",
                r#""nul\x00 é""#,
                vec![s("nul\0 é")],
                "nul\u{FFFD} é",
            ),
            ("html", "1 2", vec![Value::Int(1), Value::Int(2)], "1 2"),
            ("html", "nil", vec![Value::Nil], "&lt;no value&gt;"),
            (
                "html",
                "nil 1 nil",
                vec![Value::Nil, Value::Int(1), Value::Nil],
                "&lt;no value&gt;1&lt;no value&gt;",
            ),
            ("html", r#""a" "b""#, vec![s("a"), s("b")], "ab"),
            (
                "html",
                "(list 1 \"<\")",
                vec![Value::list(vec![Value::Int(1), s("<")])],
                "[1 &lt;]",
            ),
            (
                "js",
                r#""<a href='x'>""#,
                vec![s("<a href='x'>")],
                "\\u003Ca href\\u003D\\'x\\'\\u003E",
            ),
            (
                "js",
                r#""a\\b\"c&d""#,
                vec![s("a\\b\"c&d")],
                "a\\\\b\\\"c\\u0026d",
            ),
            // (DEL stays raw, as Go leaves it; Helm's own output cannot carry it through YAML.)
            (
                "js",
                r#""tab\there\nnl\r\x01""#,
                vec![s("tab\there\nnl\r\u{1}")],
                "tab\\u0009here\\u000Anl\\u000D\\u0001",
            ),
            (
                "js",
                r#""é世😀 \u00a0\u00ad\u2028\u200b\U000e0001""#,
                vec![s("é世😀 \u{a0}\u{ad}\u{2028}\u{200b}\u{e0001}")],
                "é世😀 \\u00A0\\u00AD\\u2028\\u200B\\uE0001",
            ),
            (
                "js",
                "1 nil",
                vec![Value::Int(1), Value::Nil],
                "1\\u003Cno value\\u003E",
            ),
            ("js", "1.5", vec![Value::Float(1.5)], "1.5"),
            (
                "urlquery",
                r#""a b&c=d/e?f+g~h_i.j-k""#,
                vec![s("a b&c=d/e?f+g~h_i.j-k")],
                "a+b%26c%3Dd%2Fe%3Ff%2Bg~h_i.j-k",
            ),
            (
                "urlquery",
                r#""é:@$,;!*'()#%""#,
                vec![s("é:@$,;!*'()#%")],
                "%C3%A9%3A%40%24%2C%3B%21%2A%27%28%29%23%25",
            ),
            (
                "urlquery",
                "1 2 nil",
                vec![Value::Int(1), Value::Int(2), Value::Nil],
                "1+2%3Cno+value%3E",
            ),
            ("urlquery", "", vec![], ""),
        ]
    }

    fn ours(builtin: &str, args: &[Value]) -> String {
        match builtin {
            "html" => html_escaper(args),
            "js" => js_escaper(args),
            _ => url_query_escaper(args),
        }
    }

    #[test]
    fn escapers_match_helm() {
        let rows = table();
        let snippets: Vec<String> = rows
            .iter()
            .map(|(f, args, _, _)| format!("{{{{ {f} {args} }}}}"))
            .collect();
        let refs: Vec<&str> = snippets.iter().map(String::as_str).collect();
        let got = helm_oracle::eval(&refs, "");
        for ((row, snippet), got) in rows.iter().zip(&snippets).zip(got) {
            assert_eq!(got.as_deref(), Ok(row.3), "helm: {snippet}");
        }
    }

    #[test]
    fn escapers_match_ours() {
        for (f, expr, args, expected) in table() {
            assert_eq!(ours(f, &args), expected, "{f} {expr}");
        }
    }
}
