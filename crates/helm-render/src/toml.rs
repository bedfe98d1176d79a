//! TOML as `github.com/BurntSushi/toml`'s encoder writes it, for Helm's `toToml`: plain keys
//! of a table first (sorted), then its sub-tables and arrays of tables (sorted), nested table
//! headers indented by two spaces per level, floats always with a decimal point, maps inside
//! arrays as inline tables. Helm writes the encoder's error text in place of the output.

use go_template::Value;

/// The TOML text for `v`, or the encoder's error message.
pub fn encode(v: &Value) -> Result<String, String> {
    let mut e = Encoder {
        out: String::new(),
        written: false,
    };
    e.encode(&[], v, 0)?;
    Ok(e.out)
}

struct Encoder {
    out: String,
    written: bool,
}

const NIL_ELEMENT: &str = "toml: cannot encode array with nil element";

#[derive(PartialEq)]
enum Kind {
    Table,
    ArrayOfTables,
    Other,
}

fn is_table(v: &Value) -> bool {
    match v {
        Value::Map(_) => true,
        Value::Object(o) => matches!(o.to_json(), Some(serde_json::Value::Object(_))),
        _ => false,
    }
}

fn kind(v: &Value) -> Result<Kind, String> {
    Ok(match v {
        Value::Map(_) => Kind::Table,
        Value::List(items) => {
            if items.iter().any(|i| matches!(i, Value::Nil)) {
                return Err(NIL_ELEMENT.into());
            }
            if !items.is_empty() && items.iter().all(is_table) {
                Kind::ArrayOfTables
            } else {
                Kind::Other
            }
        }
        v if is_table(v) => Kind::Table,
        _ => Kind::Other,
    })
}

fn bare(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn quoted_key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(bare) {
        k.to_owned()
    } else {
        format!("\"{}\"", escape(k))
    }
}

fn key_path(key: &[String]) -> String {
    key.iter()
        .map(|k| quoted_key(k))
        .collect::<Vec<_>>()
        .join(".")
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

fn float(f: f64) -> String {
    if f.is_nan() {
        return if f.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if f.is_infinite() {
        return if f < 0.0 { "-inf" } else { "inf" }.into();
    }
    let s = sprig::json::format_float_f(f);
    if s.contains('.') { s } else { format!("{s}.0") }
}

/// A map's entries, or an object's JSON fields, as values.
/// A table's entries in the order the encoder writes them: plain values first, then tables
/// and arrays of tables, each part by key.
type Entries = Vec<(String, Value)>;

fn split_entries(v: &Value) -> Result<(Entries, Entries), String> {
    let (mut direct, mut sub): (Entries, Entries) = (Vec::new(), Vec::new());
    for (k, x) in entries(v) {
        if kind(&x)? == Kind::Other {
            direct.push((k, x));
        } else {
            sub.push((k, x));
        }
    }
    direct.sort_by(|a, b| a.0.cmp(&b.0));
    sub.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((direct, sub))
}

fn entries(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Map(m) => m
            .borrow()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        Value::Object(o) => match o.to_json() {
            Some(serde_json::Value::Object(fields)) => fields
                .iter()
                .map(|(k, v)| (k.clone(), Value::from_json(v)))
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

impl Encoder {
    fn w(&mut self, s: &str) {
        self.out.push_str(s);
        self.written = true;
    }

    fn newline(&mut self) {
        if self.written {
            self.w("\n");
        }
    }

    fn indent(key: &[String]) -> String {
        "  ".repeat(key.len().saturating_sub(1))
    }

    fn encode(&mut self, key: &[String], v: &Value, depth: usize) -> Result<(), String> {
        if depth > sprig::json::MAX_ENCODE_DEPTH {
            return Err("toml: nesting too deep".into());
        }
        match v {
            Value::Nil => {
                if key.is_empty() {
                    return Err("toml: top-level values must be Go maps or structs".into());
                }
                Ok(())
            }
            Value::List(_) if kind(v)? == Kind::ArrayOfTables => {
                let Value::List(items) = v else { return Ok(()) };
                for item in items.iter() {
                    self.newline();
                    let line = format!("{}[[{}]]", Self::indent(key), key_path(key));
                    self.w(&line);
                    self.newline();
                    self.table_body(key, item, depth)?;
                }
                Ok(())
            }
            v if is_table(v) => {
                if key.len() == 1 {
                    self.newline();
                }
                if !key.is_empty() {
                    let line = format!("{}[{}]", Self::indent(key), key_path(key));
                    self.w(&line);
                    self.newline();
                }
                self.table_body(key, v, depth)
            }
            _ => self.key_value(key, v, false, depth),
        }
    }

    fn key_value(
        &mut self,
        key: &[String],
        v: &Value,
        inline: bool,
        depth: usize,
    ) -> Result<(), String> {
        if key.is_empty() {
            return self.element(v, depth);
        }
        let last = key.last().map(|k| quoted_key(k)).unwrap_or_default();
        let line = format!("{}{} = ", Self::indent(key), last);
        self.w(&line);
        self.element(v, depth)?;
        if !inline {
            self.newline();
        }
        Ok(())
    }

    fn table_body(&mut self, key: &[String], v: &Value, depth: usize) -> Result<(), String> {
        let (direct, sub) = split_entries(v)?;
        for (k, x) in direct.into_iter().chain(sub) {
            if matches!(x, Value::Nil) {
                continue;
            }
            let mut path = key.to_vec();
            path.push(k);
            self.encode(&path, &x, depth + 1)?;
        }
        Ok(())
    }

    fn inline_table(&mut self, v: &Value, depth: usize) -> Result<(), String> {
        let (direct, sub) = split_entries(v)?;
        self.w("{");
        let has_sub = !sub.is_empty();
        for (group, trailing) in [(direct, has_sub), (sub, false)] {
            let n = group.len();
            for (i, (k, x)) in group.into_iter().enumerate() {
                if matches!(x, Value::Nil) {
                    continue;
                }
                self.key_value(&[k], &x, true, depth + 1)?;
                if trailing || i != n - 1 {
                    self.w(", ");
                }
            }
        }
        self.w("}");
        Ok(())
    }

    fn element(&mut self, v: &Value, depth: usize) -> Result<(), String> {
        if depth > sprig::json::MAX_ENCODE_DEPTH {
            return Err("toml: nesting too deep".into());
        }
        match v {
            Value::Bool(b) => self.w(if *b { "true" } else { "false" }),
            Value::Int(i) | Value::Int64(i) => self.w(&i.to_string()),
            Value::Float(f) => self.w(&float(*f)),
            Value::String(s) => {
                let q = format!("\"{}\"", escape(s));
                self.w(&q);
            }
            Value::Bytes(b) => {
                let items: Vec<String> = b.iter().map(u8::to_string).collect();
                let s = format!("[{}]", items.join(", "));
                self.w(&s);
            }
            Value::List(items) => {
                kind(v)?;
                self.w("[");
                for (i, x) in items.iter().enumerate() {
                    self.element(x, depth + 1)?;
                    if i != items.len() - 1 {
                        self.w(", ");
                    }
                }
                self.w("]");
            }
            Value::Map(_) => self.inline_table(v, depth)?,
            Value::Object(o) => match o.to_json() {
                Some(serde_json::Value::Object(_)) => self.inline_table(v, depth)?,
                Some(j) => self.element(&Value::from_json(&j), depth + 1)?,
                None => self.w("{}"),
            },
            Value::Nil => return Err("toml: cannot encode a nil value".into()),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
