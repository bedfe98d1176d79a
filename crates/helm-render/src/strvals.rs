//! Helm's `--set` syntax (`pkg/strvals`): `a.b=c,d[0]=e`, `{x,y}` lists, `\` escapes, and
//! its type inference (`true`/`false`/`null` in any case, decimal integers without a
//! leading zero as int64, everything else a string), plus `--set-string`, `--set-json` and
//! `--set-file`.

use std::cell::RefCell;
use std::rc::Rc;

use go_template::{Map, Value};

/// The deepest `a.b.c…` name Helm accepts.
pub const MAX_NESTED_NAME_LEVEL: usize = 30;

/// Why a `--set` line did not parse: Helm's text (before its `failed parsing --set data: `).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StrvalsError(pub String);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Typed,
    String,
    Json,
    File,
}

type FileReader<'a> = &'a dyn Fn(&str) -> Result<String, String>;

struct Parser<'a> {
    s: Vec<char>,
    pos: usize,
    mode: Mode,
    file_reader: Option<FileReader<'a>>,
}

enum Stop {
    Eof,
    At(char),
}

/// Parses `line` as `--set` does, merging into `dest`.
pub fn parse_into(line: &str, dest: &mut Map) -> Result<(), StrvalsError> {
    run(line, dest, Mode::Typed, None)
}

/// Parses `line` as `--set-string` does (every value a string), merging into `dest`.
pub fn parse_into_string(line: &str, dest: &mut Map) -> Result<(), StrvalsError> {
    run(line, dest, Mode::String, None)
}

/// Parses `line` as `--set-json` does (each value JSON), merging into `dest`.
pub fn parse_json(line: &str, dest: &mut Map) -> Result<(), StrvalsError> {
    run(line, dest, Mode::Json, None)
}

/// Parses `line` as `--set-file` does: each value is a path, `read` gives its contents.
pub fn parse_into_file(
    line: &str,
    dest: &mut Map,
    read: &dyn Fn(&str) -> Result<String, String>,
) -> Result<(), StrvalsError> {
    run(line, dest, Mode::File, Some(read))
}

fn run(
    line: &str,
    dest: &mut Map,
    mode: Mode,
    file_reader: Option<FileReader<'_>>,
) -> Result<(), StrvalsError> {
    let mut p = Parser {
        s: line.chars().collect(),
        pos: 0,
        mode,
        file_reader,
    };
    // The top-level map is shared like Go's, so nested writes land in `dest`.
    let top = Rc::new(RefCell::new(std::mem::take(dest)));
    let result = loop {
        match p.key(&top, 0) {
            Ok(()) => continue,
            Err(None) => break Ok(()),
            Err(Some(e)) => break Err(StrvalsError(e)),
        }
    };
    *dest = std::mem::take(&mut *top.borrow_mut());
    result
}

/// `Err(None)` is Go's `io.EOF`.
type PResult<T> = Result<T, Option<String>>;

fn set(data: &Rc<RefCell<Map>>, key: &str, val: Value) {
    if !key.is_empty() {
        data.borrow_mut().insert(key.to_owned(), val);
    }
}

fn go_type(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        other => other.type_name(),
    }
}

impl Parser<'_> {
    fn read(&mut self) -> Option<char> {
        let c = self.s.get(self.pos).copied();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    fn unread(&mut self) {
        self.pos -= 1;
    }

    fn until(&mut self, stop: &[char]) -> (String, Stop) {
        let mut v = String::new();
        loop {
            match self.read() {
                None => return (v, Stop::Eof),
                Some(c) if stop.contains(&c) => return (v, Stop::At(c)),
                Some('\\') => match self.read() {
                    None => return (v, Stop::Eof),
                    Some(n) => v.push(n),
                },
                Some(c) => v.push(c),
            }
        }
    }

    fn typed(&self, v: String) -> PResult<Value> {
        match self.mode {
            Mode::String => Ok(Value::string(v)),
            Mode::File => {
                let read = self.file_reader.ok_or(None)?;
                read(&v).map(Value::string).map_err(Some)
            }
            _ => Ok(typed_val(&v)),
        }
    }

    fn key(&mut self, data: &Rc<RefCell<Map>>, level: usize) -> PResult<()> {
        let (k, last) = self.until(&['=', '[', ',', '.']);
        match last {
            Stop::Eof => {
                if k.is_empty() {
                    return Err(None);
                }
                Err(Some(format!("key {k:?} has no value")))
            }
            Stop::At('[') => {
                let i = self
                    .key_index()
                    .map_err(|e| Some(format!("error parsing index: {}", e.unwrap_or_default())))?;
                let existing = data.borrow().get(&k).cloned();
                let list = match existing {
                    None => Vec::new(),
                    Some(Value::List(l)) => l.as_ref().clone(),
                    Some(other) => {
                        return Err(Some(format!(
                            "unable to parse key: interface conversion: interface {{}} is {}, not []interface {{}}",
                            go_type(&other)
                        )));
                    }
                };
                let (list, res) = self.list_item(list, i, level);
                set(data, &k, Value::list(list));
                res
            }
            Stop::At('=') => {
                if self.mode == Mode::Json {
                    if self.empty_val() {
                        set(data, &k, Value::Nil);
                        return Ok(());
                    }
                    let v = self.json_value()?;
                    set(data, &k, v);
                    self.empty_val();
                    return Ok(());
                }
                match self.val_list() {
                    Ok(vl) => {
                        set(data, &k, Value::list(vl));
                        Ok(())
                    }
                    Err(ListErr::Eof) => {
                        set(data, &k, Value::string(""));
                        Err(None)
                    }
                    Err(ListErr::NotList) => {
                        let (rs, _) = self.until(&[',']);
                        let v = self.typed(rs)?;
                        set(data, &k, v);
                        Ok(())
                    }
                    Err(ListErr::Other(e)) => Err(Some(e)),
                }
            }
            Stop::At(',') => {
                set(data, &k, Value::string(""));
                Err(Some(format!("key {k:?} has no value (cannot end with ,)")))
            }
            Stop::At(_) => {
                // '.'
                let level = level + 1;
                if level > MAX_NESTED_NAME_LEVEL {
                    return Err(Some(format!(
                        "value name nested level is greater than maximum supported nested level of {MAX_NESTED_NAME_LEVEL}"
                    )));
                }
                let existing = data.borrow().get(&k).cloned();
                let inner = match existing {
                    None => Rc::new(RefCell::new(Map::new())),
                    Some(Value::Map(m)) => m,
                    Some(other) => {
                        return Err(Some(format!(
                            "unable to parse key: interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                            go_type(&other)
                        )));
                    }
                };
                let e = self.key(&inner, level);
                let empty = inner.borrow().is_empty();
                if e.is_ok() && empty {
                    return Err(Some(format!("key map {k:?} has no value")));
                }
                if !empty {
                    set(data, &k, Value::Map(inner));
                }
                e
            }
        }
    }

    fn key_index(&mut self) -> PResult<i64> {
        let (v, last) = self.until(&[']']);
        if matches!(last, Stop::Eof) {
            return Err(Some("EOF".into()));
        }
        go_atoi(&v).map_err(Some)
    }

    fn list_item(&mut self, list: Vec<Value>, i: i64, level: usize) -> (Vec<Value>, PResult<()>) {
        if i < 0 {
            return (list, Err(Some(format!("negative {i} index not allowed"))));
        }
        let (k, last) = self.until(&['[', '.', '=']);
        if !k.is_empty() {
            return (
                list,
                Err(Some(format!(
                    "unexpected data at end of array index: {k:?}"
                ))),
            );
        }
        match last {
            Stop::Eof => (list, Err(None)),
            Stop::At('=') => {
                if self.mode == Mode::Json {
                    if self.empty_val() {
                        return set_index(list, i, Value::Nil);
                    }
                    let v = match self.json_value() {
                        Ok(v) => v,
                        Err(e) => return (list, Err(e)),
                    };
                    let (list, r) = set_index(list, i, v);
                    if r.is_err() {
                        return (list, r);
                    }
                    self.empty_val();
                    return (list, Ok(()));
                }
                match self.val_list() {
                    Ok(vl) => set_index(list, i, Value::list(vl)),
                    Err(ListErr::Eof) => set_index(list, i, Value::string("")),
                    Err(ListErr::NotList) => {
                        let (rs, _) = self.until(&[',']);
                        match self.typed(rs) {
                            Ok(v) => set_index(list, i, v),
                            Err(e) => (list, Err(e)),
                        }
                    }
                    Err(ListErr::Other(e)) => (list, Err(Some(e))),
                }
            }
            Stop::At('[') => {
                let next = match self.key_index() {
                    Ok(n) => n,
                    Err(e) => {
                        return (
                            list,
                            Err(Some(format!(
                                "error parsing index: {}",
                                e.unwrap_or_default()
                            ))),
                        );
                    }
                };
                let cur = match list.get(i as usize) {
                    Some(Value::List(l)) => l.as_ref().clone(),
                    Some(Value::Nil) | None => Vec::new(),
                    Some(other) => {
                        return (
                            list.clone(),
                            Err(Some(format!(
                                "unable to parse key: interface conversion: interface {{}} is {}, not []interface {{}}",
                                go_type(other)
                            ))),
                        );
                    }
                };
                let (inner, r) = self.list_item(cur, next, level);
                if r.is_err() {
                    return (list, r);
                }
                set_index(list, i, Value::list(inner))
            }
            Stop::At(_) => {
                // '.'
                let inner = match list.get(i as usize) {
                    Some(Value::Map(m)) => m.clone(),
                    _ => Rc::new(RefCell::new(Map::new())),
                };
                let r = self.key(&inner, level);
                if r.is_err() {
                    return (list, r);
                }
                set_index(list, i, Value::Map(inner))
            }
        }
    }

    /// Skips blanks and one comma; true when the value is empty.
    fn empty_val(&mut self) -> bool {
        loop {
            match self.read() {
                None | Some(',') => return true,
                Some(c) if c.is_whitespace() => {}
                Some(_) => {
                    self.unread();
                    return false;
                }
            }
        }
    }

    fn json_value(&mut self) -> PResult<Value> {
        let rest: String = self.s[self.pos..].iter().collect();
        let mut stream = serde_json::Deserializer::from_str(&rest).into_iter::<serde_json::Value>();
        match stream.next() {
            Some(Ok(v)) => {
                let consumed = rest[..stream.byte_offset()].chars().count();
                self.pos += consumed;
                Ok(Value::from_json(&v))
            }
            Some(Err(e)) => Err(Some(e.to_string())),
            None => Err(None),
        }
    }

    fn val_list(&mut self) -> Result<Vec<Value>, ListErr> {
        match self.read() {
            None => return Err(ListErr::Eof),
            Some('{') => {}
            Some(_) => {
                self.unread();
                return Err(ListErr::NotList);
            }
        }
        let mut list = Vec::new();
        loop {
            let (rs, last) = self.until(&[',', '}']);
            match last {
                Stop::Eof => return Err(ListErr::Other("list must terminate with '}'".into())),
                Stop::At('}') => {
                    if let Some(c) = self.read()
                        && c != ','
                    {
                        self.unread();
                    }
                    list.push(
                        self.typed(rs)
                            .map_err(|e| ListErr::Other(e.unwrap_or_default()))?,
                    );
                    return Ok(list);
                }
                Stop::At(_) => {
                    list.push(
                        self.typed(rs)
                            .map_err(|e| ListErr::Other(e.unwrap_or_default()))?,
                    );
                }
            }
        }
    }
}

enum ListErr {
    Eof,
    NotList,
    Other(String),
}

fn set_index(mut list: Vec<Value>, i: i64, val: Value) -> (Vec<Value>, PResult<()>) {
    if i < 0 {
        return (list, Err(Some(format!("negative {i} index not allowed"))));
    }
    // Go would try to allocate; refuse absurd indexes the way a failed allocation reports.
    if i > 1_000_000 {
        return (
            list,
            Err(Some(format!(
                "error processing index {i}: runtime error: makeslice: len out of range"
            ))),
        );
    }
    let i = i as usize;
    if list.len() <= i {
        list.resize(i + 1, Value::Nil);
    }
    list[i] = val;
    (list, Ok(()))
}

/// Go's `strconv.Atoi`, with its error text.
fn go_atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {s:?}: invalid syntax"));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {s:?}: value out of range"))
}

/// Helm's `typedVal` for `--set`.
pub fn typed_val(val: &str) -> Value {
    if val.eq_ignore_ascii_case("true") {
        return Value::Bool(true);
    }
    if val.eq_ignore_ascii_case("false") {
        return Value::Bool(false);
    }
    if val.eq_ignore_ascii_case("null") {
        return Value::Nil;
    }
    if val == "0" {
        return Value::Int64(0);
    }
    if !val.is_empty() && !val.starts_with('0') {
        let digits = val.strip_prefix(['+', '-']).unwrap_or(val);
        if !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && let Ok(i) = val.parse::<i64>()
        {
            return Value::Int64(i);
        }
    }
    Value::string(val)
}
