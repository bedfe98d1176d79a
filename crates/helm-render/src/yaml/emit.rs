//! Template values to YAML text, as `sigs.k8s.io/yaml.Marshal` writes them: the value is
//! encoded as JSON, the JSON read back by goyaml.v2 (so whole floats become integers and
//! strings go through a double-quoted scalar), and goyaml.v2's emitter writes the result —
//! keys in its natural order, 2-space indentation, sequences under a key not indented, scalars
//! quoted only when a plain one would read back differently, lines folded past column 80.

use std::cmp::Ordering;

use go_template::Value;
use sprig::json::{format_float_g, json_float};

use super::analyze::{Analysis, analyze, is_break_char, is_printable, is_space};
use super::resolve::{Resolved, is_base60_float, resolve};

/// The value as goyaml.v2 holds it after reading the JSON text.
#[derive(Debug)]
enum J {
    Null,
    Bool(bool),
    /// An integer, as its decimal text (int, uint64 or big.Int alike).
    Int(String),
    Float(f64),
    Str(String),
    Seq(Vec<J>),
    Map(Vec<(String, J)>),
}

/// Why a value cannot be written: Go's error text (Helm's `toYaml` then writes nothing).
pub(crate) type EmitError = String;

/// `yaml.Marshal(v)` of `sigs.k8s.io/yaml`, trailing newline included.
pub(crate) fn marshal(v: &Value) -> Result<String, EmitError> {
    let j = from_value(v, 0)?;
    let mut e = Emitter::default();
    e.document(&j);
    Ok(e.out)
}

/// gopkg.in/yaml.v3's encoder with `SetIndent(2)` on the value itself (Helm's
/// `toYamlPretty`): no JSON round trip (floats keep Go's `%g` form, NaN is `.nan`), no line
/// folding, and sequences under a key indented.
pub(crate) fn marshal_v3(v: &Value) -> Result<String, EmitError> {
    let j = direct(v, 0)?;
    let mut e = Emitter {
        width: usize::MAX,
        indentless_sequences: false,
        tabs_in_blocks: true,
        ..Emitter::default()
    };
    e.document(&j);
    Ok(e.out)
}

/// The value as yaml.v3 sees it: Go's own types, no JSON in between.
fn direct(v: &Value, depth: usize) -> Result<J, EmitError> {
    if depth > sprig::json::MAX_ENCODE_DEPTH {
        return Err(too_deep());
    }
    match v {
        Value::List(l) => {
            let mut items = Vec::with_capacity(l.len());
            for x in l.iter() {
                items.push(direct(x, depth + 1)?);
            }
            Ok(J::Seq(items))
        }
        Value::Map(m) => {
            let m = m.try_borrow().map_err(|_| too_deep())?;
            let mut entries = Vec::with_capacity(m.len());
            for (k, x) in m.iter() {
                entries.push((k.clone(), direct(x, depth + 1)?));
            }
            Ok(J::Map(sort_keys(entries)))
        }
        _ => direct_leaf(v, depth),
    }
}

#[inline(never)]
fn direct_leaf(v: &Value, depth: usize) -> Result<J, EmitError> {
    Ok(match v {
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) | Value::Int64(i) => J::Int(i.to_string()),
        Value::Float(f) => J::Float(*f),
        Value::String(s) => J::Str(s.to_string()),
        Value::Bytes(b) => J::Seq(b.iter().map(|x| J::Int(x.to_string())).collect()),
        Value::Object(o) => match o.to_json() {
            Some(j) => direct(&Value::from_json(&j), depth + 1)?,
            None => J::Null,
        },
        Value::Nil | Value::List(_) | Value::Map(_) => J::Null,
    })
}

fn too_deep() -> EmitError {
    "json: unsupported value: encountered a cycle via map[string]interface {}".into()
}

/// The JSON round trip of a string: JSON writes it in double quotes (escaping everything
/// goyaml's reader would refuse except a few characters), and goyaml reads it back.
fn json_string(s: &str) -> Result<String, EmitError> {
    let bad = |c: char| {
        let u = c as u32;
        u == 0x7f || (0x80..=0x9f).contains(&u) && u != 0x85 || u == 0xfffe || u == 0xffff
    };
    if s.chars().any(bad) {
        return Err(
            "error converting JSON to YAML: yaml: control characters are not allowed".into(),
        );
    }
    if !s.contains('\u{85}') {
        return Ok(s.to_owned());
    }
    // A raw NEL is a line break inside a double-quoted scalar: it folds with the spaces
    // around it into one space (or into n-1 newlines for n breaks).
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == ' ' || chars[i] == '\u{85}' {
            let start = i;
            while i < chars.len() && (chars[i] == ' ' || chars[i] == '\u{85}') {
                i += 1;
            }
            let run = &chars[start..i];
            let breaks = run.iter().filter(|c| **c == '\u{85}').count();
            if breaks == 0 {
                out.extend(run);
            } else if breaks == 1 {
                out.push(' ');
            } else {
                out.extend(std::iter::repeat_n('\n', breaks - 1));
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// A map key after the JSON round trip: a raw NEL in it is a line break to goyaml, and a key
/// cannot span lines, so the whole conversion fails (Helm then writes nothing).
fn json_key(k: &str) -> Result<String, EmitError> {
    if k.contains('\u{85}') {
        return Err("error converting JSON to YAML: yaml: could not find expected ':'".into());
    }
    json_string(k)
}

fn from_value(v: &Value, depth: usize) -> Result<J, EmitError> {
    if depth > sprig::json::MAX_ENCODE_DEPTH {
        return Err(too_deep());
    }
    match v {
        Value::List(l) => {
            let mut items = Vec::with_capacity(l.len());
            for x in l.iter() {
                items.push(from_value(x, depth + 1)?);
            }
            Ok(J::Seq(items))
        }
        Value::Map(m) => {
            let m = m.try_borrow().map_err(|_| too_deep())?;
            let mut entries = Vec::with_capacity(m.len());
            for (k, x) in m.iter() {
                entries.push((json_key(k)?, from_value(x, depth + 1)?));
            }
            Ok(J::Map(sort_keys(entries)))
        }
        _ => json_leaf(v, depth),
    }
}

/// A value that is not a list or a map, after the JSON round trip.
#[inline(never)]
fn json_leaf(v: &Value, depth: usize) -> Result<J, EmitError> {
    Ok(match v {
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) | Value::Int64(i) => J::Int(i.to_string()),
        Value::Float(f) => {
            number(&json_float(*f).map_err(|e| format!("error marshaling into JSON: {e}"))?)
        }
        Value::String(s) => J::Str(json_string(s)?),
        Value::Bytes(b) => {
            use base64::Engine as _;
            J::Str(base64::engine::general_purpose::STANDARD.encode(b))
        }
        Value::Object(o) => match o.to_json() {
            Some(j) => from_json(&j, depth)?,
            None => J::Null,
        },
        Value::Nil | Value::List(_) | Value::Map(_) => J::Null,
    })
}

fn from_json(v: &serde_json::Value, depth: usize) -> Result<J, EmitError> {
    if depth > sprig::json::MAX_ENCODE_DEPTH {
        return Err(too_deep());
    }
    Ok(match v {
        serde_json::Value::Null => J::Null,
        serde_json::Value::Bool(b) => J::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => J::Int(i.to_string()),
            (_, Some(u)) => J::Int(u.to_string()),
            _ => number(
                &json_float(n.as_f64().unwrap_or(f64::NAN))
                    .map_err(|e| format!("error marshaling into JSON: {e}"))?,
            ),
        },
        serde_json::Value::String(s) => J::Str(json_string(s)?),
        serde_json::Value::Array(a) => J::Seq(
            a.iter()
                .map(|x| from_json(x, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        serde_json::Value::Object(o) => {
            let mut entries = Vec::with_capacity(o.len());
            for (k, x) in o {
                entries.push((json_key(k)?, from_json(x, depth + 1)?));
            }
            J::Map(sort_keys(entries))
        }
    })
}

/// A JSON number as goyaml.v2 reads it: an integer when it fits 64 bits (or is written as
/// one), a float otherwise.
fn number(text: &str) -> J {
    match resolve(text) {
        Resolved::Int(i) => J::Int(i.to_string()),
        Resolved::Uint(u) => J::Int(u.to_string()),
        Resolved::BigInt(s) => J::Int(s),
        Resolved::Float(f) => J::Float(f),
        _ => J::Str(text.to_owned()),
    }
}

/// goyaml.v2's key order: runs of digits compare as numbers, letters before other
/// characters. A merge sort, so that an ordering that is not quite total cannot panic.
fn sort_keys(mut entries: Vec<(String, J)>) -> Vec<(String, J)> {
    if entries.len() <= 1 {
        return entries;
    }
    let right = entries.split_off(entries.len() / 2);
    let (left, right) = (sort_keys(entries), sort_keys(right));
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut l, mut r) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        let take_right = match (l.peek(), r.peek()) {
            (Some(a), Some(b)) => key_less(&b.0, &a.0),
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (None, None) => break,
        };
        let next = if take_right { r.next() } else { l.next() };
        out.extend(next);
    }
    out
}

fn key_less(a: &str, b: &str) -> bool {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    for i in 0..ar.len().min(br.len()) {
        if ar[i] == br[i] {
            continue;
        }
        let al = ar[i].is_alphabetic();
        let bl = br[i].is_alphabetic();
        if al && bl {
            return ar[i] < br[i];
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an
                .wrapping_mul(10)
                .wrapping_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn
                .wrapping_mul(10)
                .wrapping_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ar[i] < br[i];
    }
    ar.len().cmp(&br.len()) == Ordering::Less
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

#[derive(Clone, Copy, Default)]
struct Ctx {
    root: bool,
    mapping: bool,
    simple_key: bool,
}

/// The state of goyaml.v2's emitter that decides where breaks, spaces and indentation go.
struct Emitter {
    out: String,
    column: usize,
    indent: i64,
    indents: Vec<i64>,
    whitespace: bool,
    indention: bool,
    open_ended: bool,
    /// Where long lines fold (goyaml.v2: 80; yaml.v3 as Helm uses it: never).
    width: usize,
    /// goyaml.v2 does not indent a sequence that is a mapping's value; yaml.v3 does.
    indentless_sequences: bool,
    /// yaml.v3 writes a string with tabs as a literal block where it can.
    tabs_in_blocks: bool,
}

impl Default for Emitter {
    fn default() -> Self {
        Emitter {
            out: String::new(),
            column: 0,
            indent: -1,
            indents: Vec::new(),
            whitespace: true,
            indention: true,
            open_ended: false,
            width: BEST_WIDTH,
            indentless_sequences: true,
            tabs_in_blocks: false,
        }
    }
}

const BEST_WIDTH: usize = 80;
const BEST_INDENT: i64 = 2;
const MAX_SIMPLE_KEY: usize = 128;

impl Emitter {
    fn document(&mut self, j: &J) {
        self.node(
            j,
            Ctx {
                root: true,
                ..Ctx::default()
            },
        );
        // The implicit document end: a line break unless one was just written.
        self.write_indent_at(-1);
        let _ = self.open_ended;
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            self.indent += BEST_INDENT;
        }
    }

    fn pop_indent(&mut self) {
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    fn write_indent(&mut self) {
        self.write_indent_at(self.indent);
    }

    fn write_indent_at(&mut self, indent: i64) {
        let indent = indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    fn indicator(
        &mut self,
        s: &str,
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        for c in s.chars() {
            self.put(c);
        }
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
        self.open_ended = false;
    }

    fn node(&mut self, j: &J, ctx: Ctx) {
        match j {
            J::Seq(items) if !items.is_empty() => self.block_sequence(items, ctx),
            J::Map(entries) if !entries.is_empty() => self.block_mapping(entries),
            _ => self.leaf(j, ctx),
        }
    }

    /// A scalar, or an empty collection (written in flow style).
    #[inline(never)]
    fn leaf(&mut self, j: &J, ctx: Ctx) {
        match j {
            J::Null => self.scalar("null", Style::Plain, ctx),
            J::Bool(b) => self.scalar(if *b { "true" } else { "false" }, Style::Plain, ctx),
            J::Int(s) => self.scalar(s, Style::Plain, ctx),
            J::Float(f) => {
                let s = match format_float_g(*f).as_str() {
                    "+Inf" => ".inf".to_owned(),
                    "-Inf" => "-.inf".to_owned(),
                    "NaN" => ".nan".to_owned(),
                    s => s.to_owned(),
                };
                self.scalar(&s, Style::Plain, ctx);
            }
            J::Str(s) => {
                let plain_ok = resolve(s) == Resolved::Str && !is_base60_float(s);
                let style = if s.contains('\n') {
                    Style::Literal
                } else if plain_ok {
                    Style::Plain
                } else {
                    Style::Double
                };
                self.scalar(s, style, ctx);
            }
            J::Seq(_) => {
                self.indicator("[", true, true, false);
                self.indicator("]", false, false, false);
            }
            J::Map(_) => {
                self.indicator("{", true, true, false);
                self.indicator("}", false, false, false);
            }
        }
    }

    #[inline(never)]
    fn block_sequence(&mut self, items: &[J], ctx: Ctx) {
        self.increase_indent(
            false,
            self.indentless_sequences && ctx.mapping && !self.indention,
        );
        for item in items {
            self.write_indent();
            self.indicator("-", true, false, true);
            self.node(item, Ctx::default());
        }
        self.pop_indent();
    }

    #[inline(never)]
    fn block_mapping(&mut self, entries: &[(String, J)]) {
        self.increase_indent(false, false);
        for (k, v) in entries {
            self.write_indent();
            let a = analyze(k, self.tabs_in_blocks);
            let simple = k.len() <= MAX_SIMPLE_KEY && !a.multiline;
            let key = J::Str(k.clone());
            if simple {
                self.node(
                    &key,
                    Ctx {
                        mapping: true,
                        simple_key: true,
                        ..Ctx::default()
                    },
                );
                self.indicator(":", false, false, false);
            } else {
                self.indicator("?", true, false, true);
                self.node(
                    &key,
                    Ctx {
                        mapping: true,
                        ..Ctx::default()
                    },
                );
                self.write_indent();
                self.indicator(":", true, false, true);
            }
            self.node(
                v,
                Ctx {
                    mapping: true,
                    ..Ctx::default()
                },
            );
        }
        self.pop_indent();
    }

    fn select_style(&self, value: &str, a: &Analysis, requested: Style, ctx: Ctx) -> Style {
        let mut style = requested;
        if ctx.simple_key && a.multiline {
            style = Style::Double;
        }
        if style == Style::Plain && (!a.block_plain_allowed || (value.is_empty() && ctx.simple_key))
        {
            style = Style::Single;
        }
        if style == Style::Single && !a.single_quoted_allowed {
            style = Style::Double;
        }
        if style == Style::Literal && (!a.block_allowed || ctx.simple_key) {
            style = Style::Double;
        }
        style
    }

    fn scalar(&mut self, value: &str, requested: Style, ctx: Ctx) {
        let a = analyze(value, self.tabs_in_blocks);
        let style = self.select_style(value, &a, requested, ctx);
        self.increase_indent(true, false);
        let breaks = !ctx.simple_key;
        match style {
            Style::Plain => self.write_plain(value, breaks, ctx.root),
            Style::Single => self.write_single(value, breaks),
            Style::Double => self.write_double(value, breaks),
            Style::Literal => self.write_literal(value),
        }
        self.pop_indent();
    }

    fn write_plain(&mut self, value: &str, allow_breaks: bool, root: bool) {
        if !value.is_empty() && !self.whitespace {
            self.put(' ');
        }
        let chars: Vec<char> = value.chars().collect();
        let mut spaces = false;
        let mut breaks = false;
        for (i, &c) in chars.iter().enumerate() {
            if is_space(c) {
                if allow_breaks
                    && !spaces
                    && self.column > self.width
                    && !chars.get(i + 1).is_some_and(|n| is_space(*n))
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break_char(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
        if root {
            self.open_ended = true;
        }
    }

    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }

    fn write_single(&mut self, value: &str, allow_breaks: bool) {
        self.indicator("'", true, false, false);
        let chars: Vec<char> = value.chars().collect();
        let mut spaces = false;
        let mut breaks = false;
        for (i, &c) in chars.iter().enumerate() {
            if is_space(c) {
                if allow_breaks
                    && !spaces
                    && self.column > self.width
                    && i != 0
                    && i != chars.len() - 1
                    && !chars.get(i + 1).is_some_and(|n| is_space(*n))
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break_char(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.indicator("'", false, false, false);
    }

    fn write_double(&mut self, value: &str, allow_breaks: bool) {
        self.indicator("\"", true, false, false);
        let chars: Vec<char> = value.chars().collect();
        let starts_with_bom = value.starts_with('\u{feff}');
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            // goyaml's BOM test looks at the start of the value whatever the position, so a
            // value that starts with a BOM has every character escaped.
            if !is_printable(c) || starts_with_bom || is_break_char(c) || c == '"' || c == '\\' {
                self.put('\\');
                let code = c as u32;
                match c {
                    '\0' => self.put('0'),
                    '\u{7}' => self.put('a'),
                    '\u{8}' => self.put('b'),
                    '\t' => self.put('t'),
                    '\n' => self.put('n'),
                    '\u{b}' => self.put('v'),
                    '\u{c}' => self.put('f'),
                    '\r' => self.put('r'),
                    '\u{1b}' => self.put('e'),
                    '"' => self.put('"'),
                    '\\' => self.put('\\'),
                    '\u{85}' => self.put('N'),
                    '\u{a0}' => self.put('_'),
                    '\u{2028}' => self.put('L'),
                    '\u{2029}' => self.put('P'),
                    _ => {
                        let (prefix, width) = if code <= 0xff {
                            ('x', 2)
                        } else if code <= 0xffff {
                            ('u', 4)
                        } else {
                            ('U', 8)
                        };
                        self.put(prefix);
                        for ch in format!("{code:0width$X}").chars() {
                            self.put(ch);
                        }
                    }
                }
                spaces = false;
            } else if is_space(c) {
                if allow_breaks
                    && !spaces
                    && self.column > self.width
                    && i != 0
                    && i != chars.len() - 1
                {
                    self.write_indent();
                    if chars.get(i + 1).is_some_and(|n| is_space(*n)) {
                        self.put('\\');
                    }
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                spaces = false;
            }
        }
        self.indicator("\"", false, false, false);
    }

    fn write_literal(&mut self, value: &str) {
        self.indicator("|", true, false, false);
        self.block_hints(value);
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        for c in value.chars() {
            if is_break_char(c) {
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                    breaks = false;
                }
                self.put(c);
                self.indention = false;
            }
        }
    }

    fn block_hints(&mut self, value: &str) {
        let mut chars = value.chars();
        if value
            .chars()
            .next()
            .is_some_and(|c| is_space(c) || is_break_char(c))
        {
            let hint = BEST_INDENT.to_string();
            self.indicator(&hint, false, false, false);
        }
        self.open_ended = false;
        let last = chars.next_back();
        let chomp = match last {
            None => Some("-"),
            Some(c) if !is_break_char(c) => Some("-"),
            Some(_) => match chars.next_back() {
                None => {
                    self.open_ended = true;
                    Some("+")
                }
                Some(p) if is_break_char(p) => {
                    self.open_ended = true;
                    Some("+")
                }
                Some(_) => None,
            },
        };
        if let Some(ch) = chomp {
            self.indicator(ch, false, false, false);
        }
    }
}
