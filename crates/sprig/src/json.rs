//! Go's `encoding/json` for template values: the encoder behind sprig's `toJson` family (and
//! Helm's `toJson`, `toYaml`), and the decoder behind Helm's `fromJson` / `fromJsonArray`.
//!
//! Output is byte for byte what Go 1.23 produces: map keys in byte order, `<`, `>` and `&`
//! escaped as `\u003c`… unless HTML escaping is off, U+2028 and U+2029 always escaped, floats in
//! `strconv`'s shortest form with the `'e'` switch below 1e-6 and from 1e21, `[]byte` as
//! base64, and NaN or ±Inf refused with Go's message. The decoder turns every number into a
//! `float64` and reports syntax errors in Go's words.

use std::rc::Rc;

use base64::Engine as _;
use go_template::{CallError, Func, FuncMap, Signature, Ty, Value};

/// How deep the encoder follows lists and maps before giving up with Go's cycle error (Go
/// itself goes deeper, but a value nested this deep only comes from a cycle through `set`,
/// and the recursion must fit a thread's stack).
pub const MAX_ENCODE_DEPTH: usize = 1000;

/// Registers sprig's JSON functions: `toJson`, `toPrettyJson`, `toRawJson` and their `must`
/// forms (sprig has no `fromJson`; Helm adds its own).
pub(crate) fn register(m: &mut FuncMap) {
    let any = Signature::fixed(&[Ty::Any]);
    m.insert(
        "toJson".into(),
        Func::new(any, |a| {
            Ok(Value::string(marshal(&a[0], true).unwrap_or_default()))
        }),
    );
    m.insert(
        "toPrettyJson".into(),
        Func::new(any, |a| {
            Ok(Value::string(
                marshal_indent(&a[0], "  ").unwrap_or_default(),
            ))
        }),
    );
    m.insert(
        "toRawJson".into(),
        Func::new(any, |a| {
            Ok(Value::string(marshal(&a[0], false).unwrap_or_default()))
        }),
    );
    m.insert(
        "mustToJson".into(),
        Func::new(any, |a| {
            marshal(&a[0], true)
                .map(Value::string)
                .map_err(CallError::Call)
        }),
    );
    m.insert(
        "mustToPrettyJson".into(),
        Func::new(any, |a| {
            marshal_indent(&a[0], "  ")
                .map(Value::string)
                .map_err(CallError::Call)
        }),
    );
    m.insert(
        "mustToRawJson".into(),
        Func::new(any, |a| {
            marshal(&a[0], false)
                .map(Value::string)
                .map_err(CallError::Call)
        }),
    );
}

/// `json.Marshal(v)` (with `escape_html`), or an encoder with `SetEscapeHTML(false)` and its
/// trailing newline trimmed (without). The error is Go's message.
pub fn marshal(v: &Value, escape_html: bool) -> Result<String, String> {
    let mut e = Encoder {
        out: String::new(),
        escape_html,
        indent: None,
        stack: Vec::new(),
    };
    e.value(v, 0)?;
    Ok(e.out)
}

/// `json.MarshalIndent(v, "", indent)`.
pub fn marshal_indent(v: &Value, indent: &str) -> Result<String, String> {
    let mut e = Encoder {
        out: String::new(),
        escape_html: true,
        indent: Some(indent.to_owned()),
        stack: Vec::new(),
    };
    e.value(v, 0)?;
    Ok(e.out)
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`: shortest digits, exponent form when the
/// exponent is below -4 or at least 6.
pub fn format_float_g(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let (neg, digits, exp) = shortest(f);
    // With the shortest digits Go decides by precision 6: %e when the exponent is below -4
    // or at least 6.
    let x = exp - 1;
    if !(-4..6).contains(&x) {
        format_e(neg, &digits, exp)
    } else {
        format_f(neg, &digits, exp)
    }
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)`.
pub fn format_float_f(f: f64) -> String {
    let (neg, digits, exp) = shortest(f);
    format_f(neg, &digits, exp)
}

/// Go's `strconv.FormatFloat(f, 'e', -1, 64)`.
pub fn format_float_e(f: f64) -> String {
    let (neg, digits, exp) = shortest(f);
    format_e(neg, &digits, exp)
}

/// Shortest decimal digits of a finite `f` and the decimal point position: `f = 0.DIGITS ×
/// 10^exp`.
fn shortest(f: f64) -> (bool, String, i32) {
    let neg = f.is_sign_negative();
    if f == 0.0 {
        return (neg, "0".into(), 1);
    }
    let s = format!("{:e}", f.abs());
    let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    (neg, digits, e + 1)
}

fn format_f(neg: bool, digits: &str, exp: i32) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    let nd = digits.len() as i32;
    if exp <= 0 {
        s.push_str("0.");
        for _ in 0..-exp {
            s.push('0');
        }
        s.push_str(digits);
    } else if exp >= nd {
        s.push_str(digits);
        for _ in 0..exp - nd {
            s.push('0');
        }
    } else {
        s.push_str(&digits[..exp as usize]);
        s.push('.');
        s.push_str(&digits[exp as usize..]);
    }
    s
}

fn format_e(neg: bool, digits: &str, exp: i32) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    s.push_str(&digits[..1]);
    if digits.len() > 1 {
        s.push('.');
        s.push_str(&digits[1..]);
    }
    let x = if digits == "0" { 0 } else { exp - 1 };
    s.push('e');
    s.push(if x < 0 { '-' } else { '+' });
    let a = x.unsigned_abs();
    if a < 10 {
        s.push('0');
    }
    s.push_str(&a.to_string());
    s
}

/// How `encoding/json` writes a float64.
pub fn json_float(f: f64) -> Result<String, String> {
    if !f.is_finite() {
        return Err(format!("json: unsupported value: {}", format_float_g(f)));
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let mut s = format_float_e(f);
        // e-07 becomes e-7, as Go cleans it up.
        if let Some(i) = s.find("e-0") {
            s.remove(i + 2);
        }
        Ok(s)
    } else {
        Ok(format_float_f(f))
    }
}

struct Encoder {
    out: String,
    escape_html: bool,
    indent: Option<String>,
    /// Maps being encoded, to refuse a cycle as Go does.
    stack: Vec<*const ()>,
}

impl Encoder {
    fn newline(&mut self, depth: usize) {
        if let Some(ind) = &self.indent {
            self.out.push('\n');
            for _ in 0..depth {
                self.out.push_str(ind);
            }
        }
    }

    fn value(&mut self, v: &Value, depth: usize) -> Result<(), String> {
        match v {
            Value::Nil => self.out.push_str("null"),
            Value::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Value::Int(i) | Value::Int64(i) => self.out.push_str(&i.to_string()),
            Value::Float(f) => self.out.push_str(&json_float(*f)?),
            Value::String(s) => self.string(s),
            Value::Bytes(b) => {
                self.out.push('"');
                self.out
                    .push_str(&base64::engine::general_purpose::STANDARD.encode(b));
                self.out.push('"');
            }
            Value::List(l) => {
                if depth > MAX_ENCODE_DEPTH {
                    return Err(cycle_error("[]interface {}"));
                }
                self.array(l.iter(), depth, Self::value)?;
            }
            Value::Map(m) => {
                let ptr = Rc::as_ptr(m) as *const ();
                if self.stack.contains(&ptr) || depth > MAX_ENCODE_DEPTH {
                    return Err(cycle_error("map[string]interface {}"));
                }
                self.stack.push(ptr);
                let map = m.borrow();
                self.object(map.iter(), depth, Self::value)?;
                self.stack.pop();
            }
            Value::Object(o) => match o.to_json() {
                Some(j) => self.json(&j, depth)?,
                None => self.out.push_str("null"),
            },
        }
        Ok(())
    }

    /// `[a,b]` (or one element a line when indenting), each element written by `each`.
    fn array<'a, T: 'a>(
        &mut self,
        items: impl ExactSizeIterator<Item = &'a T>,
        depth: usize,
        each: fn(&mut Self, &T, usize) -> Result<(), String>,
    ) -> Result<(), String> {
        let empty = items.len() == 0;
        self.out.push('[');
        for (i, x) in items.enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.newline(depth + 1);
            each(self, x, depth + 1)?;
        }
        if !empty {
            self.newline(depth);
        }
        self.out.push(']');
        Ok(())
    }

    /// `{"k":v}` (or one member a line when indenting), each value written by `each`.
    fn object<'a, T: 'a>(
        &mut self,
        entries: impl ExactSizeIterator<Item = (&'a String, &'a T)>,
        depth: usize,
        each: fn(&mut Self, &T, usize) -> Result<(), String>,
    ) -> Result<(), String> {
        let empty = entries.len() == 0;
        self.out.push('{');
        for (i, (k, x)) in entries.enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.newline(depth + 1);
            self.string(k);
            self.out.push(':');
            if self.indent.is_some() {
                self.out.push(' ');
            }
            each(self, x, depth + 1)?;
        }
        if !empty {
            self.newline(depth);
        }
        self.out.push('}');
        Ok(())
    }

    fn json(&mut self, v: &serde_json::Value, depth: usize) -> Result<(), String> {
        match v {
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    self.out.push_str(&i.to_string());
                } else if let Some(u) = n.as_u64() {
                    self.out.push_str(&u.to_string());
                } else {
                    self.out
                        .push_str(&json_float(n.as_f64().unwrap_or(f64::NAN))?);
                }
                Ok(())
            }
            serde_json::Value::Array(a) => self.array(a.iter(), depth, Self::json),
            serde_json::Value::Object(o) => self.object(o.iter(), depth, Self::json),
            other => self.value(&Value::from_json(other), depth),
        }
    }

    fn string(&mut self, s: &str) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.out.push('"');
        for c in s.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                '\u{8}' => self.out.push_str("\\b"),
                '\u{c}' => self.out.push_str("\\f"),
                '<' | '>' | '&' if self.escape_html => {
                    self.out.push_str("\\u00");
                    self.out.push(HEX[(c as usize) >> 4] as char);
                    self.out.push(HEX[(c as usize) & 0xf] as char);
                }
                '\u{2028}' => self.out.push_str("\\u2028"),
                '\u{2029}' => self.out.push_str("\\u2029"),
                c if (c as u32) < 0x20 => {
                    self.out.push_str("\\u00");
                    self.out.push(HEX[(c as usize) >> 4] as char);
                    self.out.push(HEX[(c as usize) & 0xf] as char);
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }
}

fn cycle_error(ty: &str) -> String {
    format!("json: unsupported value: encountered a cycle via {ty}")
}

mod decode;

pub use decode::{Decoded, unmarshal, unmarshal_list, unmarshal_map};

#[cfg(test)]
mod tests;
