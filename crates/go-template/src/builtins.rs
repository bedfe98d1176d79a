//! Go's builtin template functions: `and`, `or`, `not`, `len`, `index`, `slice`, `eq`, `ne`,
//! `lt`, `le`, `gt`, `ge`, `print`, `printf`, `println`, `html`, `js`, `urlquery`, `call`.
//!
//! Most take Go `reflect.Value`s, so they see what a typed function cannot: no value at all,
//! nil interfaces, the element type of a map. Their errors are the text after
//! `error calling NAME: `.

use crate::exec::Rv;
use crate::value::Value;
use crate::{escape, fmt};

/// A builtin function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    And,
    Or,
    Not,
    Len,
    Index,
    Slice,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Print,
    Printf,
    Println,
    Html,
    Js,
    Urlquery,
    Call,
}

/// How a builtin's parameter receives its argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Param {
    /// `reflect.Value`: as evaluated.
    Rv,
    /// `interface{}`.
    Any,
    /// `string`.
    Str,
}

/// Whether `name` is one of Go's builtins (so the parser accepts it).
pub(crate) fn is_builtin(name: &str) -> bool {
    Builtin::from_name(name).is_some()
}

impl Builtin {
    pub(crate) fn from_name(name: &str) -> Option<Builtin> {
        Some(match name {
            "and" => Builtin::And,
            "or" => Builtin::Or,
            "not" => Builtin::Not,
            "len" => Builtin::Len,
            "index" => Builtin::Index,
            "slice" => Builtin::Slice,
            "eq" => Builtin::Eq,
            "ne" => Builtin::Ne,
            "lt" => Builtin::Lt,
            "le" => Builtin::Le,
            "gt" => Builtin::Gt,
            "ge" => Builtin::Ge,
            "print" => Builtin::Print,
            "printf" => Builtin::Printf,
            "println" => Builtin::Println,
            "html" => Builtin::Html,
            "js" => Builtin::Js,
            "urlquery" => Builtin::Urlquery,
            "call" => Builtin::Call,
            _ => return None,
        })
    }

    /// Fixed parameters and whether a variadic one follows (Go's signatures).
    pub(crate) fn arity(self) -> (usize, bool) {
        match self {
            Builtin::And | Builtin::Or | Builtin::Index | Builtin::Slice | Builtin::Eq => (1, true),
            Builtin::Call => (1, true),
            Builtin::Not | Builtin::Len => (1, false),
            Builtin::Ne | Builtin::Lt | Builtin::Le | Builtin::Gt | Builtin::Ge => (2, false),
            Builtin::Print | Builtin::Println | Builtin::Html | Builtin::Js | Builtin::Urlquery => {
                (0, true)
            }
            Builtin::Printf => (1, true),
        }
    }

    /// The kind of parameter `i`.
    pub(crate) fn param(self, i: usize) -> Param {
        match self {
            Builtin::Print | Builtin::Println | Builtin::Html | Builtin::Js | Builtin::Urlquery => {
                Param::Any
            }
            Builtin::Printf if i == 0 => Param::Str,
            Builtin::Printf => Param::Any,
            _ => Param::Rv,
        }
    }
}

/// Calls builtin `b` (not `and`/`or`, which the executor evaluates lazily). `callee`: how
/// `call`'s first argument was written.
pub(crate) fn call(b: Builtin, args: &[Rv], callee: Option<&str>) -> Result<Rv, String> {
    let any = |args: &[Rv]| -> Vec<Value> {
        args.iter()
            .map(|a| a.inner().cloned().unwrap_or(Value::Nil))
            .collect()
    };
    let concrete = |v: Value| Rv::Val(v, false);
    Ok(match b {
        Builtin::And | Builtin::Or => args.last().cloned().unwrap_or(Rv::Invalid),
        Builtin::Not => concrete(Value::Bool(!args[0].truth())),
        Builtin::Len => concrete(Value::Int(length(&args[0])?)),
        Builtin::Index => index(&args[0], &args[1..])?,
        Builtin::Slice => slice(&args[0], &args[1..])?,
        Builtin::Eq => concrete(Value::Bool(eq(&args[0], &args[1..])?)),
        Builtin::Ne => concrete(Value::Bool(!eq(&args[0], &args[1..2])?)),
        Builtin::Lt => concrete(Value::Bool(lt(&args[0], &args[1])?)),
        Builtin::Le => concrete(Value::Bool(le(&args[0], &args[1])?)),
        Builtin::Gt => concrete(Value::Bool(!le(&args[0], &args[1])?)),
        Builtin::Ge => concrete(Value::Bool(!lt(&args[0], &args[1])?)),
        Builtin::Print => concrete(Value::string(fmt::sprint(&any(args)))),
        Builtin::Println => concrete(Value::string(fmt::sprintln(&any(args)))),
        Builtin::Printf => {
            let format = args[0]
                .inner()
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            concrete(Value::string(fmt::sprintf(&format, &any(&args[1..]))))
        }
        Builtin::Html => concrete(Value::string(escape::html_escaper(&any(args)))),
        Builtin::Js => concrete(Value::string(escape::js_escaper(&any(args)))),
        Builtin::Urlquery => concrete(Value::string(escape::url_query_escaper(&any(args)))),
        Builtin::Call => {
            return Err(match args[0].inner() {
                None => "call of nil".into(),
                Some(v) => format!(
                    "non-function {} of type {}",
                    callee.unwrap_or_default(),
                    v.type_name()
                ),
            });
        }
    })
}

/// The plain map or list behind an object of a map or slice type (`.Files`,
/// `.Capabilities.APIVersions`), which `range`, `len` and `index` see through.
pub(crate) fn as_plain(v: &Value) -> Option<Value> {
    match v {
        Value::Object(o) => o.as_value(),
        _ => None,
    }
}

fn length(item: &Rv) -> Result<i64, String> {
    let len = match item {
        Rv::Invalid => return Err("reflect: call of reflect.Value.Type on zero Value".into()),
        Rv::Val(Value::Nil, _) => return Err("len of nil pointer".into()),
        Rv::Val(v, _) => match as_plain(v).as_ref().unwrap_or(v) {
            Value::String(s) => s.len(),
            Value::Bytes(b) => b.len(),
            Value::List(l) => l.len(),
            Value::Map(m) => m.borrow().len(),
            other => return Err(format!("len of type {}", other.type_name())),
        },
    };
    Ok(len as i64)
}

/// Go's `indexArg`: an index into something of length (or capacity) `cap`.
fn index_arg(index: &Rv, cap: usize, look_inside: bool) -> Result<usize, String> {
    let x = match index {
        Rv::Invalid => return Err("cannot index slice/array with nil".into()),
        Rv::Val(Value::Nil, _) if look_inside => {
            return Err("cannot index slice/array with nil".into());
        }
        Rv::Val(_, true) | Rv::Val(Value::Nil, _) if !look_inside => {
            return Err("cannot index slice/array with type interface {}".into());
        }
        Rv::Val(Value::Int(i) | Value::Int64(i), _) => *i,
        Rv::Val(v, _) => {
            return Err(format!(
                "cannot index slice/array with type {}",
                v.type_name()
            ));
        }
    };
    if x < 0 || x as u64 > cap as u64 {
        return Err(format!("index out of range: {x}"));
    }
    Ok(x as usize)
}

fn index(item: &Rv, indexes: &[Rv]) -> Result<Rv, String> {
    let Some(first) = item.inner() else {
        return Err("index of untyped nil".into());
    };
    let mut item = Rv::Val(as_plain(first).unwrap_or_else(|| first.clone()), false);
    // A missing key of a typed map gives its element type's zero value.
    let mut zero = match first {
        Value::Object(o) => o.elem_zero(),
        _ => Value::Nil,
    };
    for index in indexes {
        let v = match &item {
            Rv::Val(Value::Nil, _) | Rv::Invalid => return Err("index of nil pointer".into()),
            Rv::Val(v, _) => v.clone(),
        };
        if !matches!(v, Value::Map(_)) {
            zero = Value::Nil;
        }
        item = match &v {
            Value::List(l) => {
                let x = index_arg(index, l.len(), true)?;
                // Go 1.23 lets an index equal to the length through to reflect, which panics.
                match l.get(x) {
                    Some(e) => Rv::Val(e.clone(), true),
                    None => return Err("reflect: slice index out of range".into()),
                }
            }
            Value::String(s) => {
                let x = index_arg(index, s.len(), true)?;
                match s.as_bytes().get(x) {
                    Some(b) => Rv::Val(Value::Int(i64::from(*b)), false),
                    None => return Err("reflect: string index out of range".into()),
                }
            }
            Value::Bytes(bytes) => {
                let x = index_arg(index, bytes.len(), true)?;
                match bytes.get(x) {
                    Some(b) => Rv::Val(Value::Int(i64::from(*b)), false),
                    None => return Err("reflect: slice index out of range".into()),
                }
            }
            Value::Map(m) => {
                let key = match index.inner() {
                    None => return Err("value is nil; should be of type string".into()),
                    Some(Value::String(k)) => k.clone(),
                    Some(other) => {
                        return Err(format!(
                            "value has type {}; should be string",
                            other.type_name()
                        ));
                    }
                };
                let found = m.borrow().get(&*key).cloned();
                Rv::Val(found.unwrap_or(std::mem::take(&mut zero)), true)
            }
            other => return Err(format!("can't index item of type {}", other.type_name())),
        };
    }
    Ok(item)
}

fn slice(item: &Rv, indexes: &[Rv]) -> Result<Rv, String> {
    let Some(original) = item.inner() else {
        return Err("slice of untyped nil".into());
    };
    let plain = as_plain(original);
    let v = plain.as_ref().unwrap_or(original);
    if indexes.len() > 3 {
        return Err(format!("too many slice indexes: {}", indexes.len()));
    }
    let len = match v {
        Value::String(s) => {
            if indexes.len() == 3 {
                return Err("cannot 3-index slice a string".into());
            }
            s.len()
        }
        Value::List(l) => l.len(),
        Value::Bytes(b) => b.len(),
        other => return Err(format!("can't slice item of type {}", other.type_name())),
    };
    let mut idx = [0, len, len];
    for (i, index) in indexes.iter().enumerate() {
        idx[i] = index_arg(index, len, false)?;
    }
    if idx[0] > idx[1] {
        return Err(format!("invalid slice index: {} > {}", idx[0], idx[1]));
    }
    if indexes.len() == 3 && idx[1] > idx[2] {
        return Err(format!("invalid slice index: {} > {}", idx[1], idx[2]));
    }
    let (i, j) = (idx[0], idx[1]);
    Ok(Rv::Val(
        match v {
            Value::String(s) => {
                Value::string(String::from_utf8_lossy(&s.as_bytes()[i..j]).into_owned())
            }
            Value::List(l) => crate::typed::same_type_list(original, l[i..j].to_vec()),
            Value::Bytes(b) => Value::Bytes(b[i..j].into()),
            _ => Value::Nil,
        },
        false,
    ))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Invalid,
    Bool,
    Int,
    Float,
    String,
}

fn basic_kind(v: Option<&Value>) -> Kind {
    match v {
        Some(Value::Bool(_)) => Kind::Bool,
        Some(Value::Int(_) | Value::Int64(_)) => Kind::Int,
        Some(Value::Float(_)) => Kind::Float,
        Some(Value::String(_)) => Kind::String,
        _ => Kind::Invalid,
    }
}

/// The `reflect.Kind` of a non-basic value, for Go's `canCompare`.
fn reflect_kind(v: Option<&Value>) -> &'static str {
    v.map_or("invalid", Value::kind_name)
}

fn eq(arg1: &Rv, rest: &[Rv]) -> Result<bool, String> {
    let a = arg1.inner();
    if rest.is_empty() {
        return Err("missing argument for comparison".into());
    }
    let k1 = basic_kind(a);
    for arg in rest {
        let b = arg.inner();
        let k2 = basic_kind(b);
        let truth = if k1 != k2 {
            if a.is_some() && b.is_some() {
                return Err("incompatible types for comparison".into());
            }
            false
        } else {
            match (a, b) {
                (Some(Value::Bool(x)), Some(Value::Bool(y))) => x == y,
                (Some(Value::Int(x) | Value::Int64(x)), Some(Value::Int(y) | Value::Int64(y))) => {
                    x == y
                }
                (Some(Value::Float(x)), Some(Value::Float(y))) => x == y,
                (Some(Value::String(x)), Some(Value::String(y))) => x == y,
                _ => {
                    let (ka, kb) = (reflect_kind(a), reflect_kind(b));
                    if ka != kb && a.is_some() && b.is_some() {
                        return Err(format!(
                            "non-comparable types {}: {}, {}: {}",
                            show(a),
                            type_of(a),
                            type_of(b),
                            b.map_or_else(String::new, fmt::format_v)
                        ));
                    }
                    match (a, b) {
                        (None, _) | (_, None) => a.is_none() == b.is_none(),
                        (Some(x), Some(y)) => match (x, y) {
                            (Value::Object(p), Value::Object(q)) => match p.equals(q.as_ref()) {
                                Some(t) => t,
                                None => {
                                    return Err(format!(
                                        "non-comparable type {}: {}",
                                        show(b),
                                        type_of(b)
                                    ));
                                }
                            },
                            _ => {
                                return Err(format!(
                                    "non-comparable type {}: {}",
                                    show(b),
                                    type_of(b)
                                ));
                            }
                        },
                    }
                }
            }
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A value as Go's `%s` shows it (non-strings inside get `%!s(…)`).
fn show(v: Option<&Value>) -> String {
    v.map_or_else(
        || "<invalid reflect.Value>".into(),
        |v| fmt::sprintf("%s", std::slice::from_ref(v)),
    )
}

fn type_of(v: Option<&Value>) -> String {
    v.map_or_else(|| "<nil>".into(), Value::type_name)
}

fn lt(arg1: &Rv, arg2: &Rv) -> Result<bool, String> {
    let (a, b) = (arg1.inner(), arg2.inner());
    let k1 = basic_kind(a);
    if k1 == Kind::Invalid {
        return Err("invalid type for comparison".into());
    }
    let k2 = basic_kind(b);
    if k2 == Kind::Invalid {
        return Err("invalid type for comparison".into());
    }
    if k1 != k2 {
        return Err("incompatible types for comparison".into());
    }
    Ok(match (a, b) {
        (Some(Value::Int(x) | Value::Int64(x)), Some(Value::Int(y) | Value::Int64(y))) => x < y,
        (Some(Value::Float(x)), Some(Value::Float(y))) => x < y,
        (Some(Value::String(x)), Some(Value::String(y))) => x < y,
        _ => return Err("invalid type for comparison".into()),
    })
}

fn le(arg1: &Rv, arg2: &Rv) -> Result<bool, String> {
    if lt(arg1, arg2)? {
        return Ok(true);
    }
    eq(arg1, std::slice::from_ref(arg2))
}
