//! YAML text to template values, as `sigs.k8s.io/yaml.Unmarshal` does it: goyaml.v2 reads
//! the first document (YAML 1.1 resolution, anchors, aliases and `<<` merges), non-string
//! keys become strings, and the result goes through `encoding/json`, so every number ends up
//! a `float64` and NaN or infinities are refused.

use std::collections::HashMap;
use std::rc::Rc;

use base64::Engine as _;
use go_template::{Map, Value};
use granit_parser::{ErrorKind, Event, Options, Parser, ScalarStyle, ScanError};

use super::YamlError;
use super::resolve::{Resolved, go_parse_float, resolve};

/// How deep block and flow collections may nest (goyaml.v2 has no limit of its own; this
/// bounds the recursion of every walk over the result).
const MAX_NESTING: usize = 250;

/// A node of the first document, aliases pointing at their anchored node.
#[derive(Debug)]
enum Node {
    Scalar {
        value: String,
        plain: bool,
        tag: Option<String>,
    },
    Seq(Vec<Rc<Node>>),
    Map(Vec<(Rc<Node>, Rc<Node>)>),
    Alias(Rc<Node>),
}

/// What goyaml.v2 decodes into an `interface{}`.
#[derive(Clone, Debug)]
pub(crate) enum Yaml {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    BigInt(String),
    Float(f64),
    Str(String),
    Seq(Vec<Yaml>),
    /// Keys in document order (later duplicates replace earlier ones, as a Go map would).
    Map(Vec<(Yaml, Yaml)>),
}

/// Parses the first document of `text` into goyaml.v2's model. `Ok(None)`: no document.
pub(crate) fn parse_first(text: &str) -> Result<Option<Yaml>, YamlError> {
    check_characters(text)?;
    let Some(node) = compose(text)? else {
        return Ok(None);
    };
    let mut d = Decoder::default();
    d.decode(&node).map(Some)
}

/// goyaml.v2's reader refuses control characters (and a few others) anywhere in the input.
fn check_characters(text: &str) -> Result<(), YamlError> {
    let ok = |c: char| {
        matches!(c as u32,
            0x09 | 0x0A | 0x0D | 0x20..=0x7E | 0x85 | 0xA0..=0xD7FF | 0xE000..=0xFFFD | 0x10000..)
    };
    if text.chars().all(ok) {
        Ok(())
    } else {
        Err(YamlError::yaml("control characters are not allowed"))
    }
}

fn compose(text: &str) -> Result<Option<Rc<Node>>, YamlError> {
    let mut options = Options::default();
    options.emit_unresolved_aliases = true;
    options.emit_anchor_events = true;
    options.emit_comments = false;
    options.block_nesting_limit = MAX_NESTING;
    options.flow_nesting_limit = MAX_NESTING;
    let mut c = Composer {
        events: Parser::new_from_str_with_options(text, options),
        text,
        anchors: HashMap::new(),
        names: HashMap::new(),
        open: Vec::new(),
    };
    loop {
        match c.next()? {
            Event::StreamEnd => return Ok(None),
            Event::DocumentStart(..) => break,
            _ => {}
        }
    }
    let first = c.next()?;
    if matches!(first, Event::DocumentEnd) {
        return Ok(None);
    }
    let node = c.node(first, 0)?;
    // goyaml.v2 reads only the first document, but it reads the token that ends it: an error
    // right after the root node (a plain scalar running into `key: value`) is still reported.
    c.next()?;
    Ok(Some(node))
}

struct Composer<'a> {
    events: Parser<'a, granit_parser::StrInput<'a>>,
    text: &'a str,
    anchors: HashMap<usize, Rc<Node>>,
    names: HashMap<usize, String>,
    /// Anchors of collections still being read (an alias to one is a cycle).
    open: Vec<usize>,
}

impl<'a> Composer<'a> {
    fn next(&mut self) -> Result<Event<'a>, YamlError> {
        loop {
            match self.events.next() {
                None => return Ok(Event::StreamEnd),
                Some(Err(e)) => return Err(scan_error(&e, self.text)),
                Some(Ok((Event::Anchor(id, name), _))) => {
                    self.names.insert(id, name.into_owned());
                }
                Some(Ok((ev, span))) => {
                    if let Event::Scalar(value, ScalarStyle::Plain, ..) = &ev {
                        // goyaml's plain scalars stop at ": "; a reader that lets one run on
                        // over lines must not hide the error goyaml reports there.
                        if value.contains(": ") || value.ends_with(':') {
                            let start = span.start.byte_offset().unwrap_or(0);
                            let at = span
                                .slice(self.text)
                                .and_then(|src| src.find(": ").or_else(|| src.rfind(':')))
                                .unwrap_or(0);
                            let line = self
                                .text
                                .get(..start + at)
                                .map_or(0, |t| t.matches('\n').count())
                                + 1;
                            let msg = "mapping values are not allowed in this context";
                            return Err(if line > 1 {
                                YamlError::yaml(format!("line {line}: {msg}"))
                            } else {
                                YamlError::yaml(msg)
                            });
                        }
                    }
                    if let Event::Scalar(_, ScalarStyle::DoubleQuoted, ..) = ev {
                        let start = span.start.byte_offset().unwrap_or(0);
                        if let Some(at) = span.slice(self.text).and_then(surrogate_escape) {
                            return Err(escape_error(self.text, start + at));
                        }
                    }
                    return Ok(ev);
                }
            }
        }
    }

    fn node(&mut self, ev: Event<'a>, depth: usize) -> Result<Rc<Node>, YamlError> {
        if depth > MAX_NESTING {
            return Err(YamlError::yaml("exceeded max depth of 250"));
        }
        let (node, anchor) = match ev {
            Event::Scalar(value, style, anchor, tag) => (
                Node::Scalar {
                    value: value.into_owned(),
                    plain: style == ScalarStyle::Plain,
                    tag: tag.map(|t| format!("{}{}", t.handle(), t.suffix())),
                },
                anchor,
            ),
            Event::Alias(id) => {
                let name = || self.names.get(&id).cloned().unwrap_or_default();
                if self.open.contains(&id) {
                    return Err(YamlError::yaml(format!(
                        "anchor '{}' value contains itself",
                        name()
                    )));
                }
                let target = self.anchors.get(&id).cloned().ok_or_else(|| {
                    YamlError::yaml(format!("unknown anchor '{}' referenced", name()))
                })?;
                return Ok(Rc::new(Node::Alias(target)));
            }
            Event::UnresolvedAlias(name) => {
                return Err(YamlError::yaml(format!(
                    "unknown anchor '{name}' referenced"
                )));
            }
            Event::SequenceStart(_, anchor, _) => {
                self.open.push(anchor);
                let mut items = Vec::new();
                loop {
                    let ev = self.next()?;
                    if matches!(ev, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(ev, depth + 1)?);
                }
                self.open.pop();
                (Node::Seq(items), anchor)
            }
            Event::MappingStart(_, anchor, _) => {
                self.open.push(anchor);
                let mut entries = Vec::new();
                loop {
                    let ev = self.next()?;
                    if matches!(ev, Event::MappingEnd) {
                        break;
                    }
                    let k = self.node(ev, depth + 1)?;
                    let ev = self.next()?;
                    let v = self.node(ev, depth + 1)?;
                    entries.push((k, v));
                }
                self.open.pop();
                (Node::Map(entries), anchor)
            }
            _ => return Err(YamlError::yaml("did not find expected node content")),
        };
        let node = Rc::new(node);
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(node)
    }
}

/// Where a double-quoted scalar's source holds a `\\u` escape of a UTF-16 surrogate, which
/// goyaml refuses (the reader here would join a pair into one character).
fn surrogate_escape(source: &str) -> Option<usize> {
    let b = source.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'\\' {
            if b[i + 1] == b'u'
                && b.get(i + 2).is_some_and(|c| matches!(c, b'd' | b'D'))
                && b.get(i + 3)
                    .is_some_and(|c| matches!(c, b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'))
            {
                return Some(i);
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    None
}

fn escape_error(text: &str, at: usize) -> YamlError {
    let line = text.get(..at).map_or(0, |t| t.matches('\n').count()) + 1;
    let msg = "found invalid Unicode character escape code";
    if line > 1 {
        YamlError::yaml(format!("line {line}: {msg}"))
    } else {
        YamlError::yaml(msg)
    }
}

/// goyaml.v2's words for a syntax error, with its way of counting lines: scanner errors name
/// the 1-based line (none on the first), parser errors the 0-based line of the offending
/// token, and the end of the input counts as the line after the last one.
fn scan_error(e: &ScanError, text: &str) -> YamlError {
    let line = e.marker().line();
    let eof_line =
        text.matches('\n').count() + usize::from(!text.ends_with('\n') && !text.is_empty());
    let scanner = |msg: &str, line: usize| {
        if line > 1 {
            YamlError::yaml(format!("line {line}: {msg}"))
        } else {
            YamlError::yaml(msg)
        }
    };
    let parser = |msg: &str, line0: usize| {
        if line0 > 0 {
            YamlError::yaml(format!("line {line0}: {msg}"))
        } else {
            YamlError::yaml(msg)
        }
    };
    match e.kind() {
        ErrorKind::MappingValueNotAllowed => {
            scanner("mapping values are not allowed in this context", line)
        }
        ErrorKind::UnexpectedCharacter { .. } => {
            scanner("found character that cannot start any token", line)
        }
        ErrorKind::UnclosedQuotedScalar => scanner(
            "found unexpected end of stream",
            text.matches('\n').count() + 1,
        ),
        ErrorKind::InvalidColonPlacement => {
            parser("did not find expected ',' or ']'", line.saturating_sub(1))
        }
        ErrorKind::TabInPlainScalar => {
            scanner("found a tab character that violates indentation", line + 1)
        }
        ErrorKind::TabInBlockIndentation
        | ErrorKind::TabInIndentation
        | ErrorKind::TabNotAllowed => scanner("found character that cannot start any token", line),
        ErrorKind::TabAtBlockScalarStart => scanner(
            "found a tab character where an indentation space is expected",
            line + 1,
        ),
        ErrorKind::InvalidTrailingSingleQuotedScalar
        | ErrorKind::InvalidTrailingDoubleQuotedScalar => {
            parser("did not find expected key", line.saturating_sub(1))
        }
        ErrorKind::SimpleKeyExpected => scanner(
            "could not find expected ':'",
            text.matches('\n').count() + 1,
        ),
        ErrorKind::UnclosedFlowCollection { .. } if awaits_node(text) => {
            parser("did not find expected node content", eof_line)
        }
        ErrorKind::UnclosedFlowCollection { open } => parser(
            if *open == '{' {
                "did not find expected ',' or '}'"
            } else {
                "did not find expected ',' or ']'"
            },
            eof_line,
        ),
        ErrorKind::ExpectedBlockMappingKey => parser("did not find expected key", line - 1),
        ErrorKind::ExpectedBlockSequenceEntry => {
            parser("did not find expected '-' indicator", line - 1)
        }
        ErrorKind::ExpectedNodeContent => parser("did not find expected node content", line - 1),
        ErrorKind::UnexpectedEofFlowMapping => parser("did not find expected ',' or '}'", eof_line),
        ErrorKind::UnexpectedEofFlowSequence => {
            parser("did not find expected ',' or ']'", eof_line)
        }
        ErrorKind::UnknownAnchor => YamlError::yaml("unknown anchor referenced"),
        ErrorKind::UnknownQuotedScalarEscape => scanner("found unknown escape character", line),
        ErrorKind::InvalidQuotedScalarHexEscape | ErrorKind::InvalidLowSurrogateHexEscape => {
            scanner("did not find expected hexadecimal number", line)
        }
        ErrorKind::InvalidLowSurrogate
        | ErrorKind::MissingLowSurrogate
        | ErrorKind::UnpairedLowSurrogate
        | ErrorKind::InvalidUnicodeEscape => {
            let from = e.marker().byte_offset().unwrap_or(0);
            match text.get(from..).and_then(surrogate_escape) {
                Some(at) => escape_error(text, from + at),
                None => scanner("found invalid Unicode character escape code", line),
            }
        }
        _ => parser(&e.info(), line.saturating_sub(1)),
    }
}

/// Whether an unclosed flow collection ends where a node must come (after `[`, `{`, `,` or
/// `:`), which goyaml reports as missing node content rather than a missing bracket.
fn awaits_node(text: &str) -> bool {
    text.trim_end().ends_with(['[', '{', ',', ':'])
}

/// goyaml.v2's decoder over the composed nodes: resolution, merges, and its guard against
/// alias expansion (a "billion laughs" document is refused, as goyaml refuses it).
#[derive(Default)]
struct Decoder {
    decode_count: u64,
    alias_count: u64,
    alias_depth: u32,
}

fn allowed_alias_ratio(decode_count: u64) -> f64 {
    const LOW: u64 = 400_000;
    const HIGH: u64 = 4_000_000;
    if decode_count <= LOW {
        0.99
    } else if decode_count >= HIGH {
        0.10
    } else {
        0.99 - 0.89 * ((decode_count - LOW) as f64 / (HIGH - LOW) as f64)
    }
}

const STR: &str = "tag:yaml.org,2002:str";
const INT: &str = "tag:yaml.org,2002:int";
const FLOAT: &str = "tag:yaml.org,2002:float";
const BOOL: &str = "tag:yaml.org,2002:bool";
const NULL: &str = "tag:yaml.org,2002:null";
const BINARY: &str = "tag:yaml.org,2002:binary";
const TIMESTAMP: &str = "tag:yaml.org,2002:timestamp";
const MERGE: &str = "tag:yaml.org,2002:merge";

impl Decoder {
    fn count(&mut self) -> Result<(), YamlError> {
        self.decode_count += 1;
        if self.alias_depth > 0 {
            self.alias_count += 1;
        }
        if self.alias_count > 100
            && self.decode_count > 1000
            && self.alias_count as f64 / self.decode_count as f64
                > allowed_alias_ratio(self.decode_count)
        {
            return Err(YamlError::yaml("document contains excessive aliasing"));
        }
        Ok(())
    }

    fn decode(&mut self, node: &Node) -> Result<Yaml, YamlError> {
        self.count()?;
        match node {
            Node::Alias(target) => {
                self.alias_depth += 1;
                let v = self.decode(target);
                self.alias_depth -= 1;
                v
            }
            Node::Scalar {
                value, plain, tag, ..
            } => scalar(value, *plain, tag.as_deref()),
            Node::Seq(items) => items
                .iter()
                .map(|n| self.decode(n))
                .collect::<Result<_, _>>()
                .map(Yaml::Seq),
            Node::Map(entries) => {
                let mut out = Vec::new();
                self.mapping(entries, &mut out)?;
                Ok(Yaml::Map(out))
            }
        }
    }

    fn mapping(
        &mut self,
        entries: &[(Rc<Node>, Rc<Node>)],
        out: &mut Vec<(Yaml, Yaml)>,
    ) -> Result<(), YamlError> {
        for (k, v) in entries {
            if is_merge(k) {
                self.merge(v, out)?;
                continue;
            }
            let key = self.decode(k)?;
            if matches!(key, Yaml::Seq(_) | Yaml::Map(_)) {
                return Err(YamlError::yaml(format!(
                    "invalid map key: {}",
                    go_sharp_v(&key)
                )));
            }
            let value = self.decode(v)?;
            insert(out, key, value);
        }
        Ok(())
    }

    fn merge(&mut self, node: &Node, out: &mut Vec<(Yaml, Yaml)>) -> Result<(), YamlError> {
        const WANT_MAP: &str = "map merge requires map or sequence of maps as the value";
        let (node, aliased) = match node {
            Node::Alias(t) => (&**t, true),
            n => (n, false),
        };
        match node {
            Node::Map(entries) => {
                if aliased {
                    self.alias_depth += 1;
                }
                self.count()?;
                let r = self.mapping(entries, out);
                if aliased {
                    self.alias_depth -= 1;
                }
                r
            }
            Node::Seq(items) => {
                self.count()?;
                // Earlier maps take precedence: goyaml applies them last.
                for item in items.iter().rev() {
                    let (inner, aliased) = match &**item {
                        Node::Alias(t) => (&**t, true),
                        n => (n, false),
                    };
                    let Node::Map(entries) = inner else {
                        return Err(YamlError::yaml(WANT_MAP));
                    };
                    if aliased {
                        self.alias_depth += 1;
                    }
                    self.count()?;
                    let r = self.mapping(entries, out);
                    if aliased {
                        self.alias_depth -= 1;
                    }
                    r?;
                }
                Ok(())
            }
            _ => Err(YamlError::yaml(WANT_MAP)),
        }
    }
}

fn is_merge(n: &Node) -> bool {
    matches!(n, Node::Scalar { value, plain, tag, .. }
        if value == "<<" && ((*plain && tag.is_none()) || tag.as_deref() == Some(MERGE)))
}

/// Sets `key` in `out`, replacing an equal key where it stands (Go map semantics).
fn insert(out: &mut Vec<(Yaml, Yaml)>, key: Yaml, value: Yaml) {
    match out.iter_mut().find(|(k, _)| same_key(k, &key)) {
        Some(slot) => slot.1 = value,
        None => out.push((key, value)),
    }
}

fn same_key(a: &Yaml, b: &Yaml) -> bool {
    match (a, b) {
        (Yaml::Null, Yaml::Null) => true,
        (Yaml::Bool(x), Yaml::Bool(y)) => x == y,
        (Yaml::Int(x), Yaml::Int(y)) => x == y,
        (Yaml::Uint(x), Yaml::Uint(y)) => x == y,
        (Yaml::Float(x), Yaml::Float(y)) => x == y,
        (Yaml::Str(x), Yaml::Str(y)) | (Yaml::BigInt(x), Yaml::BigInt(y)) => x == y,
        _ => false,
    }
}

fn short_tag(tag: &str) -> String {
    match tag.strip_prefix("tag:yaml.org,2002:") {
        Some(s) => format!("!!{s}"),
        None => tag.to_owned(),
    }
}

fn resolved_tag(r: &Resolved) -> &'static str {
    match r {
        Resolved::Null => NULL,
        Resolved::Bool(_) => BOOL,
        Resolved::Int(_) | Resolved::Uint(_) | Resolved::BigInt(_) => INT,
        Resolved::Float(_) => FLOAT,
        Resolved::Timestamp => TIMESTAMP,
        Resolved::Str => STR,
    }
}

fn from_resolved(r: Resolved, text: &str) -> Yaml {
    match r {
        Resolved::Null => Yaml::Null,
        Resolved::Bool(b) => Yaml::Bool(b),
        Resolved::Int(i) => Yaml::Int(i),
        Resolved::Uint(u) => Yaml::Uint(u),
        Resolved::BigInt(s) => Yaml::BigInt(s),
        Resolved::Float(f) => Yaml::Float(f),
        Resolved::Timestamp | Resolved::Str => Yaml::Str(text.to_owned()),
    }
}

/// One scalar, as goyaml.v2 decodes it into an `interface{}`.
fn scalar(value: &str, plain: bool, tag: Option<&str>) -> Result<Yaml, YamlError> {
    let tag = match tag {
        // `!` alone (non-specific) makes a plain scalar a string.
        Some("!") => return Ok(Yaml::Str(value.to_owned())),
        Some(t) => t,
        None if plain => "",
        None => STR,
    };
    match tag {
        "" => Ok(from_resolved(resolve(value), value)),
        STR => Ok(Yaml::Str(value.to_owned())),
        BINARY => {
            let clean: String = value.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(clean)
                .map_err(|e| {
                    YamlError::yaml(format!("!!binary value contains invalid base64 data: {e}"))
                })?;
            Ok(Yaml::Str(String::from_utf8_lossy(&bytes).into_owned()))
        }
        NULL | BOOL | INT | FLOAT | TIMESTAMP => {
            let r = resolve(value);
            let rtag = resolved_tag(&r);
            if rtag == tag || (tag == TIMESTAMP && rtag == STR) {
                return Ok(from_resolved(r, value));
            }
            if tag == FLOAT {
                if let Resolved::Int(i) = r {
                    return Ok(Yaml::Float(i as f64));
                }
                if let Resolved::Uint(u) = r {
                    return Ok(Yaml::Float(u as f64));
                }
            }
            Err(YamlError::yaml(format!(
                "cannot decode {} `{value}` as a {}",
                short_tag(rtag),
                short_tag(tag)
            )))
        }
        // Any other tag: the text as it is.
        _ => Ok(Yaml::Str(value.to_owned())),
    }
}

/// Go's `%#v` of a decoded value, for the few messages that print one.
fn go_sharp_v(v: &Yaml) -> String {
    match v {
        Yaml::Null => "<nil>".into(),
        Yaml::Bool(b) => b.to_string(),
        Yaml::Int(i) => i.to_string(),
        Yaml::Uint(u) => format!("0x{u:x}"),
        Yaml::BigInt(s) => s.clone(),
        Yaml::Float(f) => sprig::json::format_float_g(*f),
        Yaml::Str(s) => serde_json::to_string(s).unwrap_or_default(),
        Yaml::Seq(items) => format!(
            "[]interface {{}}{{{}}}",
            items.iter().map(go_sharp_v).collect::<Vec<_>>().join(", ")
        ),
        Yaml::Map(entries) => format!(
            "map[interface {{}}]interface {{}}{{{}}}",
            entries
                .iter()
                .map(|(k, v)| format!("{}:{}", go_sharp_v(k), go_sharp_v(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The Go type name `%s` of `reflect.TypeOf` prints for a decoded value.
fn go_type(v: &Yaml) -> &'static str {
    match v {
        Yaml::Null => "%!s(<nil>)",
        Yaml::Bool(_) => "bool",
        Yaml::Int(_) => "int",
        Yaml::Uint(_) => "uint64",
        Yaml::BigInt(_) => "*big.Int",
        Yaml::Float(_) => "float64",
        Yaml::Str(_) => "string",
        Yaml::Seq(_) => "[]interface {}",
        Yaml::Map(_) => "map[interface {}]interface {}",
    }
}

/// `sigs.k8s.io/yaml`'s key conversion: strings as they are, numbers and booleans printed.
fn key_string(k: &Yaml, v: &Yaml) -> Result<String, YamlError> {
    Ok(match k {
        Yaml::Str(s) => s.clone(),
        Yaml::Int(i) => i.to_string(),
        Yaml::Float(f) => format_float32_g(*f),
        Yaml::Bool(b) => b.to_string(),
        other => {
            return Err(YamlError::convert(format!(
                "unsupported map key of type: {}, key: {}, value: {}",
                go_type(other),
                go_sharp_v(other),
                go_sharp_v(v)
            )));
        }
    })
}

/// `strconv.FormatFloat(f, 'g', -1, 32)` with YAML's names for infinities and NaN.
pub(crate) fn format_float32_g(f: f64) -> String {
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    let f32v = f as f32;
    if f32v.is_infinite() {
        return if f32v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    // The shortest digits that read back as the same float32, laid out as %g lays them out.
    let s = format!("{:e}", f32v.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let body = if !(-4..6).contains(&exp) {
        let mut m = digits[..1].to_owned();
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        format!(
            "{m}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        )
    } else {
        let nd = digits.len() as i32;
        let point = exp + 1;
        if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point >= nd {
            format!("{}{}", digits, "0".repeat((point - nd) as usize))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        }
    };
    if f32v.is_sign_negative() {
        format!("-{body}")
    } else {
        body
    }
}

/// Converts goyaml.v2's result the way `sigs.k8s.io/yaml` then `encoding/json` do: keys to
/// strings, numbers to `float64`, NaN and infinities refused.
pub(crate) fn to_value(y: &Yaml) -> Result<Value, YamlError> {
    // Key conversion errors come first (the whole tree is converted before JSON encoding).
    check_keys(y)?;
    json_value(y)
}

/// The JSON of a document that [`to_value`] accepted, integers kept as integers (a big
/// integer as its float, as JSON would carry it).
pub(crate) fn to_typed_json(y: &Yaml) -> serde_json::Value {
    use serde_json::Value as J;
    match y {
        Yaml::Null => J::Null,
        Yaml::Bool(b) => J::Bool(*b),
        Yaml::Int(i) => J::from(*i),
        Yaml::Uint(u) => J::from(*u),
        Yaml::BigInt(s) => go_parse_float(s)
            .and_then(serde_json::Number::from_f64)
            .map_or(J::Null, J::Number),
        Yaml::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Yaml::Str(s) => J::String(s.clone()),
        Yaml::Seq(items) => J::Array(items.iter().map(to_typed_json).collect()),
        Yaml::Map(entries) => J::Object(
            entries
                .iter()
                .filter_map(|(k, v)| Some((key_string(k, v).ok()?, to_typed_json(v))))
                .collect(),
        ),
    }
}

fn check_keys(y: &Yaml) -> Result<(), YamlError> {
    match y {
        Yaml::Seq(items) => items.iter().try_for_each(check_keys),
        Yaml::Map(entries) => entries.iter().try_for_each(|(k, v)| {
            key_string(k, v)?;
            check_keys(v)
        }),
        _ => Ok(()),
    }
}

fn json_value(y: &Yaml) -> Result<Value, YamlError> {
    Ok(match y {
        Yaml::Null => Value::Nil,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Int(i) => Value::Float(*i as f64),
        Yaml::Uint(u) => Value::Float(*u as f64),
        Yaml::BigInt(s) => match go_parse_float(s) {
            Some(f) => Value::Float(f),
            None => {
                return Err(YamlError::unmarshal(format!(
                    "json: cannot unmarshal number {s} into Go value of type float64"
                )));
            }
        },
        Yaml::Float(f) => {
            if !f.is_finite() {
                return Err(YamlError::convert(format!(
                    "json: unsupported value: {}",
                    sprig::json::format_float_g(*f)
                )));
            }
            Value::Float(*f)
        }
        Yaml::Str(s) => Value::string(s.as_str()),
        Yaml::Seq(items) => Value::list(items.iter().map(json_value).collect::<Result<_, _>>()?),
        Yaml::Map(entries) => {
            let mut m = Map::new();
            for (k, v) in entries {
                m.insert(key_string(k, v)?, json_value(v)?);
            }
            Value::map(m)
        }
    })
}
