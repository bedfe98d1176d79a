//! Values as Go's `encoding/json` writes them, and addon-operator's values checksum on top.
//!
//! addon-operator holds values as `map[string]interface{}` decoded from JSON, so every number is
//! a `float64`; `json.Marshal` sorts map keys, writes floats in the shortest form (`%f`-like
//! below 1e21, exponent form below 1e-6 or from 1e21 up), and escapes `<`, `>`, `&`, U+2028 and
//! U+2029 for HTML safety. `Values.Checksum()` is the MD5 (hex) of that text.

use md5::{Digest, Md5};
use serde_json::Value;

/// `json.Marshal(values)` of the Go values addon-operator would hold for `value`.
pub fn to_go_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// addon-operator's `Values.Checksum()`: MD5 hex of the Go JSON encoding.
pub fn checksum(value: &Value) -> String {
    hex::encode(Md5::digest(to_go_json(value).as_bytes()))
}

/// MD5 hex of strings sorted and concatenated (addon-operator's `CalculateStringsChecksum`, the
/// `moduleChecksum` release label over the rendered manifests).
pub fn strings_checksum(strings: &[&str]) -> String {
    let mut sorted: Vec<&str> = strings.to_vec();
    sorted.sort_unstable();
    let mut hasher = Md5::new();
    for s in sorted {
        hasher.update(s.as_bytes());
    }
    hex::encode(hasher.finalize())
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_float(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, &map[key]);
            }
            out.push('}');
        }
    }
}

/// A float64 as `encoding/json` writes it.
pub(crate) fn go_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Exponent form: Go writes `1e+21`, `1.5e-7` (at least one exponent digit after the
        // clean-up of `e-07`).
        let text = format!("{f:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        if exponent < 0 {
            format!("{mantissa}e-{}", -exponent)
        } else {
            format!("{mantissa}e+{exponent:02}")
        }
    } else if f == 0.0 {
        if f.is_sign_negative() { "-0" } else { "0" }.to_owned()
    } else {
        format!("{f}")
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn go_encoding_table() {
        for (value, go) in [
            (json!(null), "null"),
            (json!(3), "3"),
            (json!(-3), "-3"),
            (json!(1.5), "1.5"),
            (json!(0.1), "0.1"),
            (json!(100000000000000000000.0), "100000000000000000000"),
            (json!(1e21), "1e+21"),
            (json!(1.5e-7), "1.5e-7"),
            (json!(1.5e-10), "1.5e-10"),
            (json!(0.000001), "0.000001"),
            // Beyond 2^53 Go's float64 loses the last digit.
            (json!(9007199254740993u64), "9007199254740992"),
            (json!("a<b>&c"), r#""a\u003cb\u003e\u0026c""#),
            (json!("line\nnext\ttab\u{1}"), r#""line\nnext\ttab\u0001""#),
            (json!("\u{2028}"), r#""\u2028""#),
            (json!("ünïcode"), "\"ünïcode\""),
            (
                json!({"b": [1, true], "a": {"z": 1, "B": 2}}),
                r#"{"a":{"B":2,"z":1},"b":[1,true]}"#,
            ),
        ] {
            assert_eq!(to_go_json(&value), go, "{value}");
        }
    }

    #[test]
    fn checksum_is_md5_of_the_go_json() {
        // md5("{}") and md5 of sorted keys whatever the insertion order.
        assert_eq!(checksum(&json!({})), "99914b932bd37a50b983c5e7c90ae93b");
        let a: Value = serde_json::from_str(r#"{"x":1,"y":{"b":2,"a":1}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"y":{"a":1,"b":2},"x":1.0}"#).unwrap();
        assert_eq!(checksum(&a), checksum(&b));
        assert_ne!(checksum(&a), checksum(&json!({"x": 2})));
        assert_eq!(
            strings_checksum(&["b", "a"]),
            hex::encode(Md5::digest(b"ab"))
        );
    }
}
