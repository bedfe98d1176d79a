//! Go's `json.Unmarshal` for template values: `checkValid`'s syntax errors word for word
//! (Go's scanner feeds a space at the end of the input, so an unfinished literal reports
//! `invalid character ' '`), then the value, every number a `float64`.

use go_template::{Map, Value};

/// How deep the decoder lets arrays and objects nest, as Go's scanner does.
const MAX_NESTING: usize = 10_000;

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
