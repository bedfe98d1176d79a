//! A stand-in for the template executor, only as much of Go's text/template as the table's
//! snippets use (actions, pipelines, parenthesised pipelines, `$x :=`, literals, `.Values`
//! fields, `len`, `index`, `toJson`), converting arguments to the functions' signatures the
//! way Go's executor does. Replaced by the real engine once it exists.

use std::collections::BTreeMap;

use go_template::{CallError, Env, FuncMap, Ty, Value};

struct NoEnv;

impl Env for NoEnv {
    fn execute_template(&mut self, _: &str, _: &Value) -> Result<String, CallError> {
        Err(CallError::Exec("no templates here".into()))
    }
    fn execute_text(&mut self, _: &str, _: &str, _: &Value) -> Result<String, CallError> {
        Err(CallError::Exec("no templates here".into()))
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Str(String),
    Int(i64),
    Float(f64),
    Ident(String),
    Field(String),
    /// A field right after a closing parenthesis: `(split "," $s)._0`.
    Chain(String),
    Var(String),
    Open,
    Close,
    Pipe,
    Declare,
}

fn unquote(body: &str) -> String {
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('x') => {
                let h: String = chars.by_ref().take(2).collect();
                out.push(char::from(u8::from_str_radix(&h, 16).unwrap_or(0)));
            }
            Some('u') => {
                let h: String = chars.by_ref().take(4).collect();
                out.push(char::from_u32(u32::from_str_radix(&h, 16).unwrap_or(0)).unwrap_or('?'));
            }
            Some(o) => out.push(o),
            None => {}
        }
    }
    out
}

fn lex(src: &str) -> Vec<Tok> {
    let b: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        match c {
            ' ' => i += 1,
            '(' => (out.push(Tok::Open), i += 1).1,
            ')' => (out.push(Tok::Close), i += 1).1,
            '|' => (out.push(Tok::Pipe), i += 1).1,
            ':' => (out.push(Tok::Declare), i += 2).1,
            '"' => {
                let mut j = i + 1;
                while b[j] != '"' {
                    j += if b[j] == '\\' { 2 } else { 1 };
                }
                out.push(Tok::Str(unquote(&b[i + 1..j].iter().collect::<String>())));
                i = j + 1;
            }
            _ => {
                let mut j = i;
                while j < b.len() && !" ()|".contains(b[j]) {
                    j += 1;
                }
                let w: String = b[i..j].iter().collect();
                let chained = i > 0 && b[i - 1] == ')';
                i = j;
                out.push(if chained {
                    Tok::Chain(w)
                } else if w.starts_with('.') {
                    Tok::Field(w)
                } else if w.starts_with('$') {
                    Tok::Var(w)
                } else if let Ok(n) = w.parse::<i64>() {
                    Tok::Int(n)
                } else if let Ok(f) = w.parse::<f64>() {
                    Tok::Float(f)
                } else {
                    Tok::Ident(w)
                });
            }
        }
    }
    out
}

/// An operand and whether it is an untyped constant (which converts to a float parameter).
struct Arg {
    value: Value,
    constant: bool,
}

struct Eval<'a> {
    funcs: &'a FuncMap,
    dot: &'a Value,
    vars: BTreeMap<String, Value>,
}

fn field(mut v: Value, path: &str) -> Value {
    for name in path.split('.').filter(|s| !s.is_empty()) {
        v = match &v {
            Value::Map(m) => m.borrow().get(name).cloned().unwrap_or(Value::Nil),
            _ => Value::Nil,
        };
    }
    v
}

impl Eval<'_> {
    fn operand(&mut self, toks: &[Tok], i: &mut usize) -> Result<Arg, String> {
        let t = toks[*i].clone();
        *i += 1;
        Ok(match t {
            Tok::Str(s) => Arg {
                value: Value::from(s),
                constant: false,
            },
            Tok::Int(n) => Arg {
                value: Value::Int(n),
                constant: true,
            },
            Tok::Float(f) => Arg {
                value: Value::Float(f),
                constant: true,
            },
            Tok::Field(f) => Arg {
                value: field(self.dot.clone(), &f),
                constant: false,
            },
            Tok::Var(v) => {
                let (name, path) = v.split_once('.').map_or((v.as_str(), ""), |(n, p)| (n, p));
                Arg {
                    value: field(self.vars.get(name).cloned().unwrap_or(Value::Nil), path),
                    constant: false,
                }
            }
            Tok::Ident(w) if w == "nil" => Arg {
                value: Value::Nil,
                constant: true,
            },
            Tok::Ident(w) if w == "true" || w == "false" => Arg {
                value: Value::Bool(w == "true"),
                constant: false,
            },
            Tok::Ident(w) => Arg {
                value: self.call(&w, Vec::new(), None)?,
                constant: false,
            },
            Tok::Open => {
                let mut depth = 1;
                let start = *i;
                while depth > 0 {
                    match toks[*i] {
                        Tok::Open => depth += 1,
                        Tok::Close => depth -= 1,
                        _ => {}
                    }
                    *i += 1;
                }
                let mut v = self.pipeline(&toks[start..*i - 1])?;
                if let Some(Tok::Chain(f)) = toks.get(*i) {
                    v = field(v, f);
                    *i += 1;
                }
                Arg {
                    value: v,
                    constant: false,
                }
            }
            other => return Err(format!("unexpected {other:?}")),
        })
    }

    fn call(&mut self, name: &str, args: Vec<Arg>, piped: Option<Value>) -> Result<Value, String> {
        let mut args = args;
        if let Some(p) = piped {
            args.push(Arg {
                value: p,
                constant: false,
            });
        }
        match name {
            "len" => {
                return Ok(Value::Int(match &args[0].value {
                    Value::List(l) => l.len() as i64,
                    Value::String(s) => s.len() as i64,
                    Value::Map(m) => m.borrow().len() as i64,
                    _ => 0,
                }));
            }
            "index" => {
                let Value::List(l) = &args[0].value else {
                    return Err("index".into());
                };
                let Value::Int(n) = args[1].value else {
                    return Err("index".into());
                };
                return Ok(l[n as usize].clone());
            }
            "toJson" => {
                let j = args[0].value.to_json().unwrap_or_default();
                return Ok(Value::from(serde_json::to_string(&j).unwrap_or_default()));
            }
            _ => {}
        }
        let f = self
            .funcs
            .get(name)
            .ok_or_else(|| format!("function {name:?} not defined"))?;
        let sig = f.signature;
        let mut conv = Vec::new();
        for (k, a) in args.into_iter().enumerate() {
            let ty = sig
                .params
                .get(k)
                .copied()
                .or(sig.variadic)
                .ok_or("too many args")?;
            conv.push(match (ty, a.value) {
                (Ty::Float64, Value::Int(n)) if a.constant => Value::Float(n as f64),
                (Ty::Int, v @ Value::Int(_)) | (Ty::String, v @ Value::String(_)) => v,
                (Ty::Float64, v @ Value::Float(_)) | (Ty::Bool, v @ Value::Bool(_)) => v,
                (Ty::Map, v @ (Value::Map(_) | Value::Nil)) => v,
                (Ty::Any, v) => v,
                (ty, v) => {
                    return Err(format!(
                        "wrong type for value; expected {}; got {}",
                        ty.go_name(),
                        v.type_name()
                    ));
                }
            });
        }
        (f.body)(&mut NoEnv, &conv).map_err(|e| match e {
            CallError::Call(m) => format!("error calling {name}: {m}"),
            CallError::Exec(m) => m,
        })
    }

    fn command(&mut self, toks: &[Tok], piped: Option<Value>) -> Result<Value, String> {
        let mut i = 0;
        if let Tok::Ident(name) = &toks[0]
            && !matches!(name.as_str(), "nil" | "true" | "false")
        {
            i = 1;
            let mut args = Vec::new();
            while i < toks.len() {
                args.push(self.operand(toks, &mut i)?);
            }
            return self.call(name, args, piped);
        }
        Ok(self.operand(toks, &mut i)?.value)
    }

    fn pipeline(&mut self, toks: &[Tok]) -> Result<Value, String> {
        let mut cmds: Vec<&[Tok]> = Vec::new();
        let (mut depth, mut start) = (0, 0);
        for (k, t) in toks.iter().enumerate() {
            match t {
                Tok::Open => depth += 1,
                Tok::Close => depth -= 1,
                Tok::Pipe if depth == 0 => {
                    cmds.push(&toks[start..k]);
                    start = k + 1;
                }
                _ => {}
            }
        }
        cmds.push(&toks[start..]);
        let mut v = None;
        for c in cmds {
            v = Some(self.command(c, v)?);
        }
        Ok(v.unwrap_or(Value::Nil))
    }
}

/// Runs `src` with `dot` as the data; the error is the executor's message tail.
pub(crate) fn eval(funcs: &FuncMap, src: &str, dot: &Value) -> Result<String, String> {
    let mut ev = Eval {
        funcs,
        dot,
        vars: BTreeMap::new(),
    };
    let mut out = String::new();
    let mut rest = src;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let close = rest[open..].find("}}").ok_or("unclosed action")? + open;
        let toks = lex(rest[open + 2..close].trim());
        rest = &rest[close + 2..];
        if let [Tok::Var(name), Tok::Declare, body @ ..] = toks.as_slice() {
            let v = ev.pipeline(body)?;
            ev.vars.insert(name.clone(), v);
            continue;
        }
        let v = ev.pipeline(&toks)?;
        out.push_str(&match v {
            Value::Nil => "<no value>".to_owned(),
            v => go_template::fmt::format_v(&v),
        });
    }
    out.push_str(rest);
    Ok(out)
}
