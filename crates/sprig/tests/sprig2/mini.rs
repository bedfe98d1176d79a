//! A tiny evaluator for the table snippets, until the real engine is merged: literals,
//! function calls with sprig's funcs, pipes, parentheses, `.Field`/`.Method args` on a
//! parenthesised value, `nil`, and test-local `list`/`dict`. Errors read as Go's
//! `error calling NAME: …` tail.

use go_template::{CallError, Env, FuncMap, Map, Value};

struct NoEnv;

impl Env for NoEnv {
    fn execute_template(&mut self, _: &str, _: &Value) -> Result<String, CallError> {
        Err(CallError::Exec("no engine".into()))
    }
    fn execute_text(&mut self, _: &str, _: &str, _: &Value) -> Result<String, CallError> {
        Err(CallError::Exec("no engine".into()))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Int(i64),
    Ident(String),
    Field(String),
    Open,
    Close,
    Pipe,
}

fn lex(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < c.len() {
        match c[i] {
            ' ' => i += 1,
            '(' => {
                out.push(Tok::Open);
                i += 1
            }
            ')' => {
                out.push(Tok::Close);
                i += 1
            }
            '|' => {
                out.push(Tok::Pipe);
                i += 1
            }
            '"' => {
                let mut s = String::new();
                i += 1;
                while c[i] != '"' {
                    if c[i] == '\\' {
                        i += 1;
                        s.push(match c[i] {
                            'n' => '\n',
                            't' => '\t',
                            o => o,
                        });
                    } else {
                        s.push(c[i]);
                    }
                    i += 1;
                }
                i += 1;
                out.push(Tok::Str(s));
            }
            '.' => {
                let start = i + 1;
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                out.push(Tok::Field(c[start..i].iter().collect()));
            }
            ch if ch.is_ascii_digit() || ch == '-' => {
                let start = i;
                i += 1;
                while i < c.len() && c[i].is_ascii_digit() {
                    i += 1;
                }
                let s: String = c[start..i].iter().collect();
                out.push(Tok::Int(s.parse().expect("int literal")));
            }
            _ => {
                let start = i;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                out.push(Tok::Ident(c[start..i].iter().collect()));
            }
        }
    }
    out
}

enum Operand {
    Lit(Value),
    Ident(String),
    Chain(Box<Operand>, Vec<String>),
    Sub(Vec<Vec<Operand>>),
}

fn parse_pipeline(t: &[Tok], i: &mut usize) -> Vec<Vec<Operand>> {
    let mut cmds = vec![Vec::new()];
    while *i < t.len() {
        match &t[*i] {
            Tok::Close => break,
            Tok::Pipe => {
                cmds.push(Vec::new());
                *i += 1;
            }
            _ => {
                let op = parse_operand(t, i);
                cmds.last_mut().expect("a command").push(op);
            }
        }
    }
    cmds
}

fn parse_operand(t: &[Tok], i: &mut usize) -> Operand {
    let base = match &t[*i] {
        Tok::Str(s) => Operand::Lit(Value::string(s.as_str())),
        Tok::Int(n) => Operand::Lit(Value::Int(*n)),
        Tok::Ident(s) if s == "nil" => Operand::Lit(Value::Nil),
        Tok::Ident(s) if s == "true" => Operand::Lit(Value::Bool(true)),
        Tok::Ident(s) => Operand::Ident(s.clone()),
        Tok::Open => {
            *i += 1;
            let p = parse_pipeline(t, i);
            Operand::Sub(p)
        }
        other => panic!("unexpected {other:?}"),
    };
    *i += 1;
    let mut fields = Vec::new();
    while let Some(Tok::Field(f)) = t.get(*i) {
        fields.push(f.clone());
        *i += 1;
    }
    if fields.is_empty() {
        base
    } else {
        Operand::Chain(Box::new(base), fields)
    }
}

fn call(funcs: &FuncMap, name: &str, args: Vec<Value>) -> Result<Value, String> {
    match name {
        "list" => return Ok(Value::list(args)),
        "dict" => {
            let mut m = Map::new();
            for pair in args.chunks(2) {
                let k = pair[0].as_str().unwrap_or_default().to_owned();
                m.insert(k, pair.get(1).cloned().unwrap_or(Value::Nil));
            }
            return Ok(Value::map(m));
        }
        _ => {}
    }
    let f = funcs
        .get(name)
        .ok_or_else(|| format!("function {name:?} not defined"))?;
    let sig = f.signature;
    if sig.variadic.is_none() && args.len() != sig.params.len() {
        return Err(format!(
            "wrong number of args for {name}: want {} got {}",
            sig.params.len(),
            args.len()
        ));
    }
    (f.body)(&mut NoEnv, &args).map_err(|e| match e {
        CallError::Call(m) | CallError::Parse(m) => format!("error calling {name}: {m}"),
        CallError::Exec(m) => m,
    })
}

fn eval_operand(funcs: &FuncMap, op: &Operand) -> Result<Value, String> {
    match op {
        Operand::Lit(v) => Ok(v.clone()),
        Operand::Ident(name) => call(funcs, name, Vec::new()),
        Operand::Sub(p) => eval_pipeline(funcs, p),
        Operand::Chain(base, fields) => {
            let mut v = eval_operand(funcs, base)?;
            for f in fields {
                v = field(&v, f, &[])?;
            }
            Ok(v)
        }
    }
}

fn field(v: &Value, name: &str, args: &[Value]) -> Result<Value, String> {
    match v {
        Value::Map(m) => Ok(m.borrow().get(name).cloned().unwrap_or(Value::Nil)),
        Value::Object(o) if args.is_empty() => o
            .field(name)
            .ok_or_else(|| format!("can't evaluate field {name}")),
        Value::Object(o) => o.method(name, args).map_err(|e| match e {
            CallError::Call(m) | CallError::Parse(m) => format!("error calling {name}: {m}"),
            CallError::Exec(m) => m,
        }),
        _ => Err(format!("can't evaluate field {name}")),
    }
}

fn eval_pipeline(funcs: &FuncMap, cmds: &[Vec<Operand>]) -> Result<Value, String> {
    let mut piped: Option<Value> = None;
    for cmd in cmds {
        let mut args = Vec::new();
        for op in &cmd[1..] {
            args.push(eval_operand(funcs, op)?);
        }
        if let Some(p) = piped.take() {
            args.push(p);
        }
        let v = match &cmd[0] {
            Operand::Ident(name) => call(funcs, name, args)?,
            Operand::Chain(base, fields) if !args.is_empty() => {
                let mut v = eval_operand(funcs, base)?;
                for f in &fields[..fields.len() - 1] {
                    v = field(&v, f, &[])?;
                }
                field(&v, &fields[fields.len() - 1], &args)?
            }
            op => eval_operand(funcs, op)?,
        };
        piped = Some(v);
    }
    Ok(piped.unwrap_or(Value::Nil))
}

/// Prints a value as the executor would for the kinds these tables produce.
pub(crate) fn show(v: &Value) -> String {
    match v {
        Value::Nil => "<no value>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) | Value::Int64(n) => n.to_string(),
        Value::String(s) => s.to_string(),
        Value::Object(o) => o.format(),
        Value::List(l) => format!("[{}]", l.iter().map(show).collect::<Vec<_>>().join(" ")),
        other => format!("{other:?}"),
    }
}

/// Evaluates a snippet made of text and `{{ … }}` actions.
pub(crate) fn eval(funcs: &FuncMap, snippet: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = snippet;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("closed action") + start;
        let toks = lex(&rest[start + 2..end]);
        let mut i = 0;
        let p = parse_pipeline(&toks, &mut i);
        out.push_str(&show(&eval_pipeline(funcs, &p)?));
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}
