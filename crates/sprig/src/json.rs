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
use go_template::{CallError, Func, FuncMap, Map, Signature, Ty, Value};

/// How deep the decoder lets arrays and objects nest, as Go's scanner does.
const MAX_NESTING: usize = 10_000;

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
                self.out.push('[');
                for (i, x) in l.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.newline(depth + 1);
                    self.value(x, depth + 1)?;
                }
                if !l.is_empty() {
                    self.newline(depth);
                }
                self.out.push(']');
            }
            Value::Map(m) => {
                let ptr = Rc::as_ptr(m) as *const ();
                if self.stack.contains(&ptr) || depth > MAX_ENCODE_DEPTH {
                    return Err(cycle_error("map[string]interface {}"));
                }
                self.stack.push(ptr);
                let map = m.borrow();
                self.out.push('{');
                for (i, (k, x)) in map.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.newline(depth + 1);
                    self.string(k);
                    self.out.push(':');
                    if self.indent.is_some() {
                        self.out.push(' ');
                    }
                    self.value(x, depth + 1)?;
                }
                if !map.is_empty() {
                    self.newline(depth);
                }
                self.out.push('}');
                self.stack.pop();
            }
            Value::Object(o) => match o.to_json() {
                Some(j) => self.json(&j, depth)?,
                None => self.out.push_str("null"),
            },
        }
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
            serde_json::Value::Array(a) => {
                self.out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.newline(depth + 1);
                    self.json(x, depth + 1)?;
                }
                if !a.is_empty() {
                    self.newline(depth);
                }
                self.out.push(']');
                Ok(())
            }
            serde_json::Value::Object(o) => {
                self.out.push('{');
                for (i, (k, x)) in o.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.newline(depth + 1);
                    self.string(k);
                    self.out.push(':');
                    if self.indent.is_some() {
                        self.out.push(' ');
                    }
                    self.json(x, depth + 1)?;
                }
                if !o.is_empty() {
                    self.newline(depth);
                }
                self.out.push('}');
                Ok(())
            }
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

/// What `json.Unmarshal` into an `interface{}` gives: the value (objects as maps, numbers as
/// `float64`), and the first error Go reports. A syntax error leaves no value; a number too
/// large for a float64 leaves the rest of the value, with `nil` in its place, as Go does.
#[derive(Debug)]
pub struct Decoded {
    /// The decoded value (`Nil` after a syntax error).
    pub value: Value,
    /// Go's error message, if any.
    pub error: Option<String>,
}

/// Decodes `text` as Go's `json.Unmarshal` into an `interface{}` does.
pub fn unmarshal(text: &str) -> Decoded {
    if let Err(e) = check_valid(text.as_bytes()) {
        return Decoded {
            value: Value::Nil,
            error: Some(e),
        };
    }
    let mut d = Builder {
        s: text.as_bytes(),
        i: 0,
        error: None,
    };
    let value = d.value();
    Decoded {
        value,
        error: d.error,
    }
}

/// `json.Unmarshal` into a `map[string]interface{}` (Helm's `fromJson`): the map, and Go's
/// error (a syntax error or a top-level value that is not an object).
pub fn unmarshal_map(text: &str) -> (Map, Option<String>) {
    let d = unmarshal(text);
    match d.value {
        Value::Map(m) => (m.borrow().clone(), d.error),
        Value::Nil => (Map::new(), d.error),
        other => (
            Map::new(),
            Some(
                d.error
                    .unwrap_or_else(|| type_error(&other, "map[string]interface {}")),
            ),
        ),
    }
}

/// `json.Unmarshal` into a `[]interface{}` (Helm's `fromJsonArray`).
pub fn unmarshal_list(text: &str) -> (Vec<Value>, Option<String>) {
    let d = unmarshal(text);
    match d.value {
        Value::List(l) => ((*l).clone(), d.error),
        Value::Nil => (Vec::new(), d.error),
        other => (
            Vec::new(),
            Some(
                d.error
                    .unwrap_or_else(|| type_error(&other, "[]interface {}")),
            ),
        ),
    }
}

fn type_error(v: &Value, ty: &str) -> String {
    let what = match v {
        Value::Bool(_) => "bool",
        Value::Float(_) | Value::Int(_) | Value::Int64(_) => "number",
        Value::String(_) => "string",
        Value::List(_) => "array",
        _ => "object",
    };
    format!("json: cannot unmarshal {what} into Go value of type {ty}")
}

/// Go's `quoteChar`: how the scanner names an offending byte.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".into(),
        b'"' => "'\"'".into(),
        _ => {
            let q = go_quote_rune(char::from(c));
            format!("'{q}'")
        }
    }
}

/// The inside of Go's `strconv.Quote` for one rune.
fn go_quote_rune(c: char) -> String {
    match c {
        '\u{7}' => "\\a".into(),
        '\u{8}' => "\\b".into(),
        '\u{c}' => "\\f".into(),
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        '\u{b}' => "\\v".into(),
        '\\' => "\\\\".into(),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => format!("\\x{:02x}", c as u32),
        c if (0x80..0xa0).contains(&(c as u32)) || c as u32 == 0xad => {
            format!("\\u{:04x}", c as u32)
        }
        c => c.to_string(),
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

const UNEXPECTED_END: &str = "unexpected end of JSON input";

/// Go's `checkValid`: the whole input must be one JSON value; the first offending byte names
/// the error.
fn check_valid(s: &[u8]) -> Result<(), String> {
    let mut v = Validator { s, i: 0, depth: 0 };
    v.skip_space();
    v.value()?;
    v.skip_space();
    if let Some(&c) = s.get(v.i) {
        return Err(format!(
            "invalid character {} after top-level value",
            quote_char(c)
        ));
    }
    Ok(())
}

struct Validator<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl Validator<'_> {
    fn skip_space(&mut self) {
        while self.s.get(self.i).is_some_and(|c| is_space(*c)) {
            self.i += 1;
        }
    }

    fn next(&mut self) -> Result<u8, String> {
        let c = *self.s.get(self.i).ok_or(UNEXPECTED_END)?;
        self.i += 1;
        Ok(c)
    }

    /// The next byte, or a space at the end of the input: Go's scanner feeds one space at the
    /// end, so an unfinished literal or number reports `invalid character ' '`.
    fn next_or_space(&mut self) -> u8 {
        let c = self.s.get(self.i).copied().unwrap_or(b' ');
        self.i += 1;
        c
    }

    fn bad(c: u8, context: &str) -> String {
        format!("invalid character {} {context}", quote_char(c))
    }

    fn value(&mut self) -> Result<(), String> {
        let c = self.next()?;
        match c {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(c),
            b't' => self.literal(b"rue", "true"),
            b'f' => self.literal(b"alse", "false"),
            b'n' => self.literal(b"ull", "null"),
            c => Err(Self::bad(c, "looking for beginning of value")),
        }
    }

    fn push(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err("exceeded max depth".into());
        }
        Ok(())
    }

    fn object(&mut self) -> Result<(), String> {
        self.push()?;
        self.skip_space();
        let mut first = true;
        loop {
            let c = self.next()?;
            if first && c == b'}' {
                break;
            }
            if c != b'"' {
                return Err(Self::bad(c, "looking for beginning of object key string"));
            }
            self.string()?;
            self.skip_space();
            let c = self.next()?;
            if c != b':' {
                return Err(Self::bad(c, "after object key"));
            }
            self.skip_space();
            self.value()?;
            self.skip_space();
            match self.next()? {
                b',' => {}
                b'}' => break,
                c => return Err(Self::bad(c, "after object key:value pair")),
            }
            self.skip_space();
            first = false;
        }
        self.depth -= 1;
        Ok(())
    }

    fn array(&mut self) -> Result<(), String> {
        self.push()?;
        self.skip_space();
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.value()?;
            self.skip_space();
            match self.next()? {
                b',' => {}
                b']' => break,
                c => return Err(Self::bad(c, "after array element")),
            }
            self.skip_space();
        }
        self.depth -= 1;
        Ok(())
    }

    fn string(&mut self) -> Result<(), String> {
        loop {
            match self.next()? {
                b'"' => return Ok(()),
                b'\\' => match self.next_or_space() {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {}
                    b'u' => {
                        for _ in 0..4 {
                            let c = self.next_or_space();
                            if !c.is_ascii_hexdigit() {
                                return Err(Self::bad(c, "in \\u hexadecimal character escape"));
                            }
                        }
                    }
                    c => return Err(Self::bad(c, "in string escape code")),
                },
                c if c < 0x20 => return Err(Self::bad(c, "in string literal")),
                _ => {}
            }
        }
    }

    fn digits(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
    }

    fn number(&mut self, first: u8) -> Result<(), String> {
        let mut c = first;
        if c == b'-' {
            c = self.next_or_space();
            if !c.is_ascii_digit() {
                return Err(Self::bad(c, "in numeric literal"));
            }
        }
        if c != b'0' {
            self.digits();
        }
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            let c = self.next_or_space();
            if !c.is_ascii_digit() {
                return Err(Self::bad(c, "after decimal point in numeric literal"));
            }
            self.digits();
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            let mut c = self.next_or_space();
            if c == b'+' || c == b'-' {
                c = self.next_or_space();
            }
            if !c.is_ascii_digit() {
                return Err(Self::bad(c, "in exponent of numeric literal"));
            }
            self.digits();
        }
        Ok(())
    }

    fn literal(&mut self, rest: &[u8], name: &str) -> Result<(), String> {
        for &want in rest {
            let c = self.next_or_space();
            if c != want {
                return Err(Self::bad(
                    c,
                    &format!("in literal {name} (expecting {})", quote_char(want)),
                ));
            }
        }
        Ok(())
    }
}

/// Builds the value from input already known to be valid JSON.
struct Builder<'a> {
    s: &'a [u8],
    i: usize,
    error: Option<String>,
}

impl Builder<'_> {
    fn skip_space(&mut self) {
        while self.s.get(self.i).is_some_and(|c| is_space(*c)) {
            self.i += 1;
        }
    }

    fn peek(&self) -> u8 {
        self.s.get(self.i).copied().unwrap_or(0)
    }

    fn value(&mut self) -> Value {
        self.skip_space();
        let c = self.peek();
        self.i += 1;
        match c {
            b'{' => {
                let mut m = Map::new();
                loop {
                    self.skip_space();
                    if self.peek() == b'}' {
                        self.i += 1;
                        break;
                    }
                    if self.peek() == b',' {
                        self.i += 1;
                        continue;
                    }
                    self.i += 1;
                    let k = self.string();
                    self.skip_space();
                    self.i += 1; // ':'
                    let v = self.value();
                    m.insert(k, v);
                }
                Value::map(m)
            }
            b'[' => {
                let mut l = Vec::new();
                loop {
                    self.skip_space();
                    match self.peek() {
                        b']' | 0 => {
                            self.i += 1;
                            break;
                        }
                        b',' => self.i += 1,
                        _ => l.push(self.value()),
                    }
                }
                Value::list(l)
            }
            b'"' => Value::string(self.string()),
            b't' => {
                self.i += 3;
                Value::Bool(true)
            }
            b'f' => {
                self.i += 4;
                Value::Bool(false)
            }
            b'n' => {
                self.i += 3;
                Value::Nil
            }
            _ => {
                let start = self.i - 1;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|c| matches!(c, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
                {
                    self.i += 1;
                }
                let text = String::from_utf8_lossy(&self.s[start..self.i]);
                match text.parse::<f64>() {
                    Ok(f) if f.is_finite() => Value::Float(f),
                    _ => {
                        if self.error.is_none() {
                            self.error = Some(format!(
                                "json: cannot unmarshal number {text} into Go value of type float64"
                            ));
                        }
                        Value::Nil
                    }
                }
            }
        }
    }

    /// A string whose opening quote has been read.
    fn string(&mut self) -> String {
        let mut out: Vec<u8> = Vec::new();
        loop {
            let c = self.peek();
            self.i += 1;
            match c {
                b'"' | 0 => break,
                b'\\' => {
                    let e = self.peek();
                    self.i += 1;
                    match e {
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut r = self.hex4();
                            if (0xd800..0xdc00).contains(&r)
                                && self.s.get(self.i) == Some(&b'\\')
                                && self.s.get(self.i + 1) == Some(&b'u')
                            {
                                let save = self.i;
                                self.i += 2;
                                let r2 = self.hex4();
                                if (0xdc00..0xe000).contains(&r2) {
                                    r = 0x10000 + ((r - 0xd800) << 10) + (r2 - 0xdc00);
                                } else {
                                    self.i = save;
                                }
                            }
                            let ch = char::from_u32(r).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn hex4(&mut self) -> u32 {
        let h = self.s.get(self.i..self.i + 4).unwrap_or_default();
        self.i += 4;
        std::str::from_utf8(h)
            .ok()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .unwrap_or(0xfffd)
    }
}

#[cfg(test)]
mod tests;
