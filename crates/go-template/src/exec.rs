//! The executor: walks a tree with a dot, writing output, with Go's evaluation rules —
//! fields of maps and objects, function calls with arguments checked against Go signatures,
//! pipelines, variables, `if`/`with`/`range`/`template`, and Go's error messages with the
//! position and the text of the node being evaluated.
//!
//! Go's `reflect.Value` distinctions that show in behaviour are kept in [`Rv`]: "no value"
//! (an invalid value: a missing key with `missingkey=default`, a pipeline that yielded nil),
//! a nil `interface{}` (a map element that is nil or missing with `missingkey=zero`), and
//! whether a value sits inside an `interface{}` (map and list elements do: Go then names the
//! type `interface {}` in errors).

use std::fmt::Write as _;

use crate::builtins::{self, Builtin};
use crate::error::Error;
use crate::parse::{Arg, Branch, Command, List, Node, Number, Pipe, TemplateCall, Tree, Variable, go_quote};
use crate::template::{MissingKey, Templates};
use crate::value::{CallError, Env, Func, Ty, Value};

/// A value as the executor holds it.
#[derive(Clone, Debug)]
pub(crate) enum Rv {
    /// Go's invalid `reflect.Value`: no value at all.
    Invalid,
    /// A value; `Value::Nil` is a nil `interface{}`. The flag: the value sits in an
    /// `interface{}` (it came out of a map or a list).
    Val(Value, bool),
}

impl Rv {
    fn concrete(v: Value) -> Rv {
        Rv::Val(v, false)
    }

    fn boxed(v: Value) -> Rv {
        Rv::Val(v, true)
    }

    /// What a pipeline does after each command: an `interface{}` is replaced by what it
    /// holds, a nil one by no value.
    fn dig(self) -> Rv {
        match self {
            Rv::Val(Value::Nil, _) => Rv::Invalid,
            Rv::Val(v, _) => Rv::Val(v, false),
            Rv::Invalid => Rv::Invalid,
        }
    }

    /// Go's `indirectInterface`: the value inside, `None` for no value or a nil interface.
    pub(crate) fn inner(&self) -> Option<&Value> {
        match self {
            Rv::Val(Value::Nil, _) | Rv::Invalid => None,
            Rv::Val(v, _) => Some(v),
        }
    }

    pub(crate) fn truth(&self) -> bool {
        self.inner().is_some_and(Value::truth)
    }

    /// The value a Go `interface{}` parameter receives.
    fn into_any(self) -> Value {
        match self {
            Rv::Invalid => Value::Nil,
            Rv::Val(v, _) => v,
        }
    }
}

/// Whether control leaves a list normally or through `{{break}}` / `{{continue}}`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    Normal,
    Break,
    Continue,
}

type R<T> = Result<T, Error>;

/// State shared by every frame of one execution.
struct Ctx {
    set: Templates,
    out: String,
    depth: usize,
    written: usize,
    stack_base: usize,
}

/// The node being evaluated, for error messages.
#[derive(Clone, Copy)]
enum At<'t> {
    None,
    Node(&'t Node),
    Pipe(&'t Pipe),
    Cmd(&'t Command),
    Arg(&'t Arg),
    Var(&'t Variable),
    Template(&'t TemplateCall),
    Branch(&'t Branch, &'static str),
}

/// One template being executed (Go's `state`, without the writer).
struct Frame<'t> {
    tree: &'t Tree,
    vars: Vec<(String, Rv)>,
    at: At<'t>,
}

fn stack_addr() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

pub(crate) fn execute(set: &Templates, name: &str, data: &Value) -> R<String> {
    let mut ctx = Ctx {
        set: set.clone(),
        out: String::new(),
        depth: 0,
        written: 0,
        stack_base: stack_addr(),
    };
    ctx.run_named(name, data)?;
    Ok(ctx.out)
}

impl Ctx {
    fn run_named(&mut self, name: &str, data: &Value) -> R<()> {
        let Some(tree) = self.set.trees.get(name).cloned() else {
            return Err(Error::exec(format!(
                "template: no template {} associated with template {}",
                go_quote(name),
                go_quote(&self.set.root_name)
            )));
        };
        let dot = Rv::concrete(data.clone());
        let mut frame = Frame {
            tree: &tree,
            vars: vec![("$".into(), dot.clone())],
            at: At::None,
        };
        self.walk_list(&mut frame, &dot, &tree.root).map(|_| ())
    }

    // ---- errors ----

    fn err(&self, f: &Frame<'_>, msg: impl std::fmt::Display) -> Error {
        let name = go_quote(&f.tree.name);
        let (pos, context) = match f.at {
            At::None => {
                return Error::exec(format!("template: {}: {msg}", f.tree.name));
            }
            At::Node(n) => (node_pos(n), n.to_string()),
            At::Pipe(p) => (p.pos, p.to_string()),
            At::Cmd(c) => (c.pos, c.to_string()),
            At::Arg(a) => (a.pos(), a.to_string()),
            At::Var(v) => (v.pos, v.to_string()),
            At::Template(t) => (t.pos, Node::template_string(t)),
            At::Branch(b, kind) => (b.pos, Node::branch_string(kind, b)),
        };
        Error::exec(format!(
            "template: {}: executing {name} at <{context}>: {msg}",
            f.tree.src.location(pos)
        ))
    }

    fn check_stack(&self, f: &Frame<'_>) -> R<()> {
        let used = self.stack_base.saturating_sub(stack_addr());
        if used > self.set.limits.max_stack {
            return Err(self.err(
                f,
                format!(
                    "exceeded the stack limit of {} bytes (templates nested too deeply)",
                    self.set.limits.max_stack
                ),
            ));
        }
        Ok(())
    }

    fn write(&mut self, f: &Frame<'_>, s: &str) -> R<()> {
        self.written += s.len();
        if self.written > self.set.limits.max_output {
            return Err(self.err(
                f,
                format!("template output exceeds the limit of {} bytes", self.set.limits.max_output),
            ));
        }
        self.out.push_str(s);
        Ok(())
    }

    // ---- walking ----

    fn walk_list<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, list: &'t List) -> R<Flow> {
        for node in &list.nodes {
            let flow = self.walk(f, dot, node)?;
            if flow != Flow::Normal {
                return Ok(flow);
            }
        }
        Ok(Flow::Normal)
    }

    fn walk<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, node: &'t Node) -> R<Flow> {
        f.at = At::Node(node);
        match node {
            Node::Text { text, .. } => self.write(f, text)?,
            Node::Action(a) => {
                let v = self.eval_pipeline(f, dot, &a.pipe)?;
                if a.pipe.decl.is_empty() {
                    f.at = At::Node(node);
                    match v {
                        Rv::Invalid | Rv::Val(Value::Nil, _) => self.write(f, "<no value>")?,
                        Rv::Val(Value::String(s), _) => self.write(f, &s)?,
                        Rv::Val(v, _) => {
                            let s = crate::fmt::format_v(&v);
                            self.write(f, &s)?;
                        }
                    }
                }
            }
            Node::If(b) => return self.walk_if_or_with(f, dot, b, false),
            Node::With(b) => return self.walk_if_or_with(f, dot, b, true),
            Node::Range(b) => return self.walk_range(f, dot, b),
            Node::Template(t) => self.walk_template(f, dot, t)?,
            Node::Break { .. } => return Ok(Flow::Break),
            Node::Continue { .. } => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn walk_if_or_with<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        b: &'t Branch,
        with: bool,
    ) -> R<Flow> {
        self.check_stack(f)?;
        let mark = f.vars.len();
        let r = (|| {
            let val = self.eval_pipeline(f, dot, &b.pipe)?;
            if val.truth() {
                if with {
                    self.walk_list(f, &val, &b.list)
                } else {
                    self.walk_list(f, dot, &b.list)
                }
            } else if let Some(e) = &b.else_list {
                self.walk_list(f, dot, e)
            } else {
                Ok(Flow::Normal)
            }
        })();
        f.vars.truncate(mark);
        r
    }

    fn walk_range<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, r: &'t Branch) -> R<Flow> {
        self.check_stack(f)?;
        f.at = At::Branch(r, "range");
        let outer = f.vars.len();
        let result = self.walk_range_inner(f, dot, r);
        f.vars.truncate(outer);
        result.map(|()| Flow::Normal)
    }

    fn walk_range_inner<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, r: &'t Branch) -> R<()> {
        let val = self.eval_pipeline(f, dot, &r.pipe)?;
        let mark = f.vars.len();
        let items: Vec<(Rv, Rv)> = match val.inner() {
            None => Vec::new(),
            Some(Value::List(l)) => l
                .iter()
                .enumerate()
                .map(|(i, v)| (Rv::concrete(Value::Int(i as i64)), Rv::boxed(v.clone())))
                .collect(),
            Some(Value::Bytes(b)) => b
                .iter()
                .enumerate()
                .map(|(i, v)| (Rv::concrete(Value::Int(i as i64)), Rv::concrete(Value::Int(i64::from(*v)))))
                .collect(),
            Some(Value::Map(m)) => m
                .borrow()
                .iter()
                .map(|(k, v)| (Rv::concrete(Value::string(k.as_str())), Rv::boxed(v.clone())))
                .collect(),
            Some(n @ (Value::Int(_) | Value::Int64(_))) => {
                if r.pipe.decl.len() > 1 {
                    return Err(self.err(
                        f,
                        format!(
                            "can't use {} to iterate over more than one variable",
                            crate::fmt::format_v(n)
                        ),
                    ));
                }
                let (count, make): (i64, fn(i64) -> Value) = match n {
                    Value::Int(c) => (*c, Value::Int),
                    Value::Int64(c) => (*c, Value::Int64),
                    _ => (0, Value::Int),
                };
                (0..count.max(0))
                    .map(|i| (Rv::Invalid, Rv::concrete(make(i))))
                    .collect()
            }
            Some(other) => {
                return Err(self.err(
                    f,
                    format!("range can't iterate over {}", crate::fmt::format_v(other)),
                ));
            }
        };
        if items.is_empty() {
            if let Some(e) = &r.else_list {
                self.walk_list(f, dot, e)?;
            }
            return Ok(());
        }
        for (index, elem) in items {
            let decl = &r.pipe.decl;
            if !decl.is_empty() {
                if r.pipe.is_assign {
                    let v = if decl.len() > 1 { index.clone() } else { elem.clone() };
                    self.set_var(f, &decl[0].ident[0], v)?;
                } else {
                    let n = f.vars.len();
                    f.vars[n - 1].1 = elem.clone();
                }
            }
            if decl.len() > 1 {
                if r.pipe.is_assign {
                    self.set_var(f, &decl[1].ident[0], elem.clone())?;
                } else {
                    let n = f.vars.len();
                    f.vars[n - 2].1 = index.clone();
                }
            }
            let flow = self.walk_list(f, &elem, &r.list);
            f.vars.truncate(mark);
            if flow? == Flow::Break {
                break;
            }
        }
        Ok(())
    }

    fn walk_template<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, t: &'t TemplateCall) -> R<()> {
        f.at = At::Template(t);
        let Some(tree) = self.set.trees.get(&t.name).cloned() else {
            return Err(self.err(f, format!("template {} not defined", go_quote(&t.name))));
        };
        if self.depth >= self.set.limits.max_depth {
            return Err(self.err(
                f,
                format!("exceeded maximum template depth ({})", self.set.limits.max_depth),
            ));
        }
        self.check_stack(f)?;
        let dot = match &t.pipe {
            Some(p) => self.eval_pipeline(f, dot, p)?,
            None => Rv::Invalid,
        };
        let mut inner = Frame {
            tree: &tree,
            vars: vec![("$".into(), dot.clone())],
            at: At::None,
        };
        self.depth += 1;
        let r = self.walk_list(&mut inner, &dot, &tree.root);
        self.depth -= 1;
        r.map(|_| ())
    }

    // ---- variables ----

    fn set_var(&self, f: &mut Frame<'_>, name: &str, v: Rv) -> R<()> {
        if let Some(slot) = f.vars.iter_mut().rev().find(|(n, _)| n == name) {
            slot.1 = v;
            return Ok(());
        }
        Err(self.err(f, format!("undefined variable: {name}")))
    }

    fn var_value(&self, f: &Frame<'_>, name: &str) -> R<Rv> {
        match f.vars.iter().rev().find(|(n, _)| n == name) {
            Some((_, v)) => Ok(v.clone()),
            None => Err(self.err(f, format!("undefined variable: {name}"))),
        }
    }

    // ---- evaluation ----

    fn eval_pipeline<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, pipe: &'t Pipe) -> R<Rv> {
        self.check_stack(f)?;
        f.at = At::Pipe(pipe);
        let mut value: Option<Rv> = None;
        for cmd in &pipe.cmds {
            value = Some(self.eval_command(f, dot, cmd, value)?.dig());
        }
        let value = value.unwrap_or(Rv::Invalid);
        for v in &pipe.decl {
            if pipe.is_assign {
                self.set_var(f, &v.ident[0], value.clone())?;
            } else {
                f.vars.push((v.ident[0].clone(), value.clone()));
            }
        }
        Ok(value)
    }

    fn not_a_function(&self, f: &Frame<'_>, args: &[Arg], fin: &Option<Rv>) -> R<()> {
        if args.len() > 1 || fin.is_some() {
            let first = args.first().map(ToString::to_string).unwrap_or_default();
            return Err(self.err(f, format!("can't give argument to non-function {first}")));
        }
        Ok(())
    }

    fn eval_command<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        cmd: &'t Command,
        fin: Option<Rv>,
    ) -> R<Rv> {
        let Some(first) = cmd.args.first() else {
            return Ok(Rv::Invalid);
        };
        match first {
            Arg::Field { ident, .. } => {
                f.at = At::Arg(first);
                return self.eval_field_chain(f, dot, dot.clone(), first, ident, &cmd.args, fin);
            }
            Arg::Chain { .. } => return self.eval_chain(f, dot, first, &cmd.args, fin),
            Arg::Identifier { name, .. } => {
                return self.eval_function(f, dot, first, name, At::Cmd(cmd), &cmd.args, fin);
            }
            Arg::Pipe(p) => {
                self.not_a_function(f, &cmd.args, &fin)?;
                return self.eval_pipeline(f, dot, p);
            }
            Arg::Variable(v) => return self.eval_variable(f, dot, v, &cmd.args, fin),
            _ => {}
        }
        f.at = At::Arg(first);
        self.not_a_function(f, &cmd.args, &fin)?;
        match first {
            Arg::Bool { val, .. } => Ok(Rv::concrete(Value::Bool(*val))),
            Arg::Dot { .. } => Ok(dot.clone()),
            Arg::Nil { .. } => Err(self.err(f, "nil is not a command")),
            Arg::Number(n) => self.ideal_constant(f, first, n).map(Rv::concrete),
            Arg::String { text, .. } => Ok(Rv::concrete(Value::string(text.as_str()))),
            _ => Err(self.err(f, format!("can't evaluate command {}", go_quote(&first.to_string())))),
        }
    }

    /// A numeric constant where no type is wanted: its spelling decides (Go's ideal constant).
    fn ideal_constant<'t>(&self, f: &mut Frame<'t>, node: &'t Arg, n: &Number) -> R<Value> {
        f.at = At::Arg(node);
        let t = &n.text;
        let hex_int = t.len() > 2
            && t.starts_with('0')
            && matches!(t.as_bytes()[1], b'x' | b'X')
            && !t.contains(['p', 'P']);
        if n.is_complex {
            return Err(self.err(f, format!("complex constant {t} is not supported")));
        }
        if n.is_float && !hex_int && !t.starts_with('\'') && t.contains(['.', 'e', 'E', 'p', 'P']) {
            return Ok(Value::Float(n.float));
        }
        if n.is_int {
            return Ok(Value::Int(n.int));
        }
        if n.is_uint {
            return Err(self.err(f, format!("{t} overflows int")));
        }
        Ok(Value::Nil)
    }

    fn eval_chain<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        chain: &'t Arg,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let Arg::Chain { node, field, .. } = chain else {
            return Ok(Rv::Invalid);
        };
        f.at = At::Arg(chain);
        if let Arg::Nil { .. } = **node {
            return Err(self.err(f, format!("indirection through explicit nil in {chain}")));
        }
        let receiver = self.eval_arg_rv(f, dot, node)?;
        self.eval_field_chain(f, dot, receiver, chain, field, args, fin)
    }

    fn eval_variable<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        v: &'t Variable,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        f.at = At::Var(v);
        let value = self.var_value(f, &v.ident[0])?;
        if v.ident.len() == 1 {
            self.not_a_function(f, args, &fin)?;
            return Ok(value);
        }
        self.eval_field_chain_var(f, dot, value, v, &v.ident[1..], args, fin)
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_field_chain_var<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        mut receiver: Rv,
        v: &'t Variable,
        ident: &'t [String],
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let n = ident.len();
        for name in &ident[..n - 1] {
            f.at = At::Var(v);
            receiver = self.eval_field(f, dot, name, &[], None, receiver)?;
        }
        f.at = At::Var(v);
        self.eval_field(f, dot, &ident[n - 1], args, fin, receiver)
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_field_chain<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        mut receiver: Rv,
        node: &'t Arg,
        ident: &'t [String],
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let n = ident.len();
        for name in &ident[..n - 1] {
            f.at = At::Arg(node);
            receiver = self.eval_field(f, dot, name, &[], None, receiver)?;
        }
        f.at = At::Arg(node);
        self.eval_field(f, dot, &ident[n - 1], args, fin, receiver)
    }

    /// `.Name` (or `.Name args…`) on `receiver`; `args[0]` is the field's own node.
    fn eval_field<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        name: &str,
        args: &'t [Arg],
        fin: Option<Rv>,
        receiver: Rv,
    ) -> R<Rv> {
        let at = f.at;
        let (value, boxed) = match receiver {
            Rv::Invalid => {
                if self.set.missing_key == MissingKey::Error {
                    return Err(self.err(f, format!("nil data; no entry for key {}", go_quote(name))));
                }
                return Ok(Rv::Invalid);
            }
            Rv::Val(Value::Nil, _) => {
                return Err(self.err(f, format!("nil pointer evaluating interface {{}}.{name}")));
            }
            Rv::Val(v, boxed) => (v, boxed),
        };
        let has_args = args.len() > 1 || fin.is_some();
        let typ = if boxed {
            "interface {}".to_owned()
        } else {
            value.type_name()
        };
        match &value {
            Value::Object(o) => {
                if o.is_method(name) {
                    return self.call_method(f, dot, o.as_ref(), name, at, args, fin);
                }
                match o.field(name) {
                    Some(v) => {
                        if has_args {
                            return Err(self.err(f, has_args_message(o.kind_name(), name)));
                        }
                        Ok(Rv::concrete(v))
                    }
                    None if o.kind_name() == "map" => {
                        if has_args {
                            return Err(self.err(f, has_args_message("map", name)));
                        }
                        self.missing(f, name)
                    }
                    None => Err(self.err(f, format!("can't evaluate field {name} in type {typ}"))),
                }
            }
            Value::Map(m) => {
                if has_args {
                    return Err(self.err(f, has_args_message("map", name)));
                }
                let found = m.borrow().get(name).cloned();
                match found {
                    Some(v) => Ok(Rv::boxed(v)),
                    None => self.missing(f, name),
                }
            }
            _ => Err(self.err(f, format!("can't evaluate field {name} in type {typ}"))),
        }
    }

    fn missing(&self, f: &Frame<'_>, name: &str) -> R<Rv> {
        match self.set.missing_key {
            MissingKey::Default => Ok(Rv::Invalid),
            MissingKey::Zero => Ok(Rv::boxed(Value::Nil)),
            MissingKey::Error => {
                Err(self.err(f, format!("map has no entry for key {}", go_quote(name))))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn call_method<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        o: &dyn crate::Object,
        name: &str,
        at: At<'t>,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let mut argv = Vec::new();
        for a in args.iter().skip(1) {
            argv.push(self.eval_arg(f, dot, Some(Ty::Any), a)?);
        }
        if let Some(v) = fin {
            argv.push(v.into_any());
        }
        match o.method(name, &argv) {
            Ok(v) => Ok(Rv::concrete(v)),
            Err(e) => {
                f.at = at;
                Err(self.call_error(f, name, e))
            }
        }
    }

    fn call_error(&self, f: &Frame<'_>, name: &str, e: CallError) -> Error {
        match e {
            CallError::Call(m) => self.err(f, format!("error calling {name}: {m}")),
            CallError::Exec(m) => self.err(f, m),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_function<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        ident: &'t Arg,
        name: &str,
        call_node: At<'t>,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        f.at = At::Arg(ident);
        if let Some(func) = self.set.funcs.get(name).cloned() {
            return self.call_func(f, dot, &func, name, call_node, args, fin);
        }
        match Builtin::from_name(name) {
            Some(b) => self.call_builtin(f, dot, b, name, call_node, args, fin),
            None => Err(self.err(f, format!("{} is not a defined function", go_quote(name)))),
        }
    }

    /// Go's argument count check; `args` includes the function's own node.
    fn check_arity(
        &self,
        f: &Frame<'_>,
        name: &str,
        fixed: usize,
        variadic: bool,
        args: &[Arg],
        fin: &Option<Rv>,
    ) -> R<()> {
        let given = args.len().saturating_sub(1);
        let num_in = given + usize::from(fin.is_some());
        if variadic {
            if num_in < fixed {
                return Err(self.err(
                    f,
                    format!("wrong number of args for {name}: want at least {fixed} got {given}"),
                ));
            }
        } else if num_in != fixed {
            return Err(self.err(f, format!("wrong number of args for {name}: want {fixed} got {num_in}")));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn call_func<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        func: &Func,
        name: &str,
        call_node: At<'t>,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let sig = func.signature;
        let fixed = sig.params.len();
        self.check_arity(f, name, fixed, sig.variadic.is_some(), args, &fin)?;
        let rest = args.get(1..).unwrap_or(&[]);
        let mut argv = Vec::with_capacity(rest.len() + 1);
        for (i, a) in rest.iter().enumerate() {
            let ty = if i < fixed {
                sig.params[i]
            } else {
                sig.variadic.unwrap_or(Ty::Any)
            };
            argv.push(self.eval_arg(f, dot, Some(ty), a)?);
        }
        if let Some(v) = fin {
            let num_in = rest.len() + 1;
            let ty = match sig.variadic {
                Some(vt) if num_in > fixed => vt,
                _ => sig.params.get(num_in - 1).copied().unwrap_or(Ty::Any),
            };
            argv.push(self.validate(f, v, ty)?);
        }
        self.check_stack(f)?;
        let body = func.body.clone();
        let result = {
            let mut env = EnvImpl { ctx: self };
            body(&mut env, &argv)
        };
        match result {
            Ok(v) => Ok(Rv::concrete(v)),
            Err(e) => {
                f.at = call_node;
                Err(self.call_error(f, name, e))
            }
        }
    }

    /// Go's `validateType`: a value for a parameter of type `ty`.
    fn validate(&self, f: &Frame<'_>, v: Rv, ty: Ty) -> R<Value> {
        let can_be_nil = matches!(ty, Ty::Any | Ty::List | Ty::Map | Ty::Bytes | Ty::Object(_));
        match v {
            Rv::Invalid => {
                if can_be_nil {
                    Ok(Value::Nil)
                } else {
                    Err(self.err(f, format!("invalid value; expected {}", ty.go_name())))
                }
            }
            Rv::Val(Value::Nil, _) => {
                if ty == Ty::Any {
                    Ok(Value::Nil)
                } else {
                    Err(self.err(
                        f,
                        format!("wrong type for value; expected {}; got interface {{}}", ty.go_name()),
                    ))
                }
            }
            Rv::Val(v, _) => {
                if assignable(&v, ty) {
                    Ok(v)
                } else {
                    Err(self.err(
                        f,
                        format!(
                            "wrong type for value; expected {}; got {}",
                            ty.go_name(),
                            v.type_name()
                        ),
                    ))
                }
            }
        }
    }

    /// Go's `evalArg` for a parameter of type `ty` (`None`: no type, as for a chain's head).
    fn eval_arg<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, ty: Option<Ty>, a: &'t Arg) -> R<Value> {
        f.at = At::Arg(a);
        let ty_or_any = ty.unwrap_or(Ty::Any);
        match a {
            Arg::Dot { .. } => return self.validate(f, dot.clone(), ty_or_any),
            Arg::Nil { .. } => {
                if matches!(ty_or_any, Ty::Any | Ty::List | Ty::Map | Ty::Bytes | Ty::Object(_)) {
                    return Ok(Value::Nil);
                }
                return Err(self.err(f, format!("cannot assign nil to {}", ty_or_any.go_name())));
            }
            Arg::Field { ident, .. } => {
                let v = self.eval_field_chain(f, dot, dot.clone(), a, ident, std::slice::from_ref(a), None)?;
                return self.validate(f, v, ty_or_any);
            }
            Arg::Variable(v) => {
                let r = self.eval_variable(f, dot, v, &[], None)?;
                return self.validate(f, r, ty_or_any);
            }
            Arg::Pipe(p) => {
                let r = self.eval_pipeline(f, dot, p)?;
                return self.validate(f, r, ty_or_any);
            }
            Arg::Identifier { name, .. } => {
                let r = self.eval_function(f, dot, a, name, At::Arg(a), &[], None)?;
                return self.validate(f, r, ty_or_any);
            }
            Arg::Chain { .. } => {
                let r = self.eval_chain(f, dot, a, &[], None)?;
                return self.validate(f, r, ty_or_any);
            }
            _ => {}
        }
        match ty_or_any {
            Ty::Bool => match a {
                Arg::Bool { val, .. } => Ok(Value::Bool(*val)),
                _ => Err(self.err(f, format!("expected bool; found {a}"))),
            },
            Ty::Float64 => match a {
                Arg::Number(n) if n.is_float && !n.is_complex => Ok(Value::Float(n.float)),
                _ => Err(self.err(f, format!("expected float; found {a}"))),
            },
            Ty::Int | Ty::Int64 => match a {
                Arg::Number(n) if n.is_int && !n.is_complex => Ok(if ty_or_any == Ty::Int {
                    Value::Int(n.int)
                } else {
                    Value::Int64(n.int)
                }),
                _ => Err(self.err(f, format!("expected integer; found {a}"))),
            },
            Ty::String => match a {
                Arg::String { text, .. } => Ok(Value::string(text.as_str())),
                _ => Err(self.err(f, format!("expected string; found {a}"))),
            },
            Ty::Any => self.eval_empty_interface(f, dot, a).map(Rv::into_any),
            other => Err(self.err(f, format!("can't handle {a} for arg of type {}", other.go_name()))),
        }
    }

    /// Go's `evalEmptyInterface` for constants.
    fn eval_empty_interface<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, a: &'t Arg) -> R<Rv> {
        f.at = At::Arg(a);
        match a {
            Arg::Bool { val, .. } => Ok(Rv::concrete(Value::Bool(*val))),
            Arg::Dot { .. } => Ok(dot.clone()),
            Arg::Number(n) => self.ideal_constant(f, a, n).map(Rv::concrete),
            Arg::String { text, .. } => Ok(Rv::concrete(Value::string(text.as_str()))),
            Arg::Nil { .. } => Err(self.err(f, "evalEmptyInterface: nil (can't happen)")),
            _ => Err(self.err(f, format!("can't handle assignment of {a} to empty interface argument"))),
        }
    }

    /// An argument for a `reflect.Value` parameter (the builtins): whatever it evaluates to,
    /// no value and nil interfaces included.
    fn eval_arg_rv<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, a: &'t Arg) -> R<Rv> {
        f.at = At::Arg(a);
        match a {
            Arg::Dot { .. } => Ok(dot.clone()),
            Arg::Nil { .. } => Ok(Rv::Invalid),
            Arg::Field { ident, .. } => {
                self.eval_field_chain(f, dot, dot.clone(), a, ident, std::slice::from_ref(a), None)
            }
            Arg::Variable(v) => self.eval_variable(f, dot, v, &[], None),
            Arg::Pipe(p) => self.eval_pipeline(f, dot, p),
            Arg::Identifier { name, .. } => self.eval_function(f, dot, a, name, At::Arg(a), &[], None),
            Arg::Chain { .. } => self.eval_chain(f, dot, a, &[], None),
            _ => self.eval_empty_interface(f, dot, a),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn call_builtin<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        b: Builtin,
        name: &str,
        call_node: At<'t>,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let (fixed, variadic) = b.arity();
        self.check_arity(f, name, fixed, variadic, args, &fin)?;
        let rest = args.get(1..).unwrap_or(&[]);
        if matches!(b, Builtin::And | Builtin::Or) {
            let want = b == Builtin::Or;
            let mut v = Rv::Invalid;
            for a in rest {
                v = self.eval_arg_rv(f, dot, a)?;
                if v.truth() == want {
                    return Ok(v);
                }
            }
            if let Some(x) = fin {
                v = x;
            }
            return Ok(v);
        }
        let mut argv: Vec<Rv> = Vec::with_capacity(rest.len() + 1);
        for (i, a) in rest.iter().enumerate() {
            let v = match b.param(i) {
                builtins::Param::Rv => self.eval_arg_rv(f, dot, a)?,
                builtins::Param::Any => Rv::concrete(self.eval_arg(f, dot, Some(Ty::Any), a)?),
                builtins::Param::Str => Rv::concrete(self.eval_arg(f, dot, Some(Ty::String), a)?),
            };
            argv.push(v);
        }
        if let Some(v) = fin {
            let v = match b.param(rest.len()) {
                builtins::Param::Rv => v,
                builtins::Param::Any => Rv::concrete(self.validate(f, v, Ty::Any)?),
                builtins::Param::Str => Rv::concrete(self.validate(f, v, Ty::String)?),
            };
            argv.push(v);
        }
        let callee = if b == Builtin::Call {
            rest.first().map(ToString::to_string)
        } else {
            None
        };
        match builtins::call(b, &argv, callee.as_deref()) {
            Ok(v) => Ok(v),
            Err(e) => {
                f.at = call_node;
                Err(self.err(f, format!("error calling {name}: {e}")))
            }
        }
    }
}

fn has_args_message(kind: &str, name: &str) -> String {
    if kind == "map" {
        format!("{name} is not a method but has arguments")
    } else {
        format!("{name} has arguments but cannot be invoked as function")
    }
}

/// Whether a value of this kind may be passed where Go declares `ty`.
fn assignable(v: &Value, ty: Ty) -> bool {
    match ty {
        Ty::Any => true,
        Ty::String => matches!(v, Value::String(_)),
        Ty::Int => matches!(v, Value::Int(_)),
        Ty::Int64 => matches!(v, Value::Int64(_)),
        Ty::Float64 => matches!(v, Value::Float(_)),
        Ty::Bool => matches!(v, Value::Bool(_)),
        Ty::Bytes => matches!(v, Value::Bytes(_)),
        Ty::List => matches!(v, Value::List(_)),
        Ty::Map => matches!(v, Value::Map(_)),
        Ty::Object(name) => matches!(v, Value::Object(o) if o.type_name() == name),
    }
}

fn node_pos(n: &Node) -> usize {
    match n {
        Node::Text { pos, .. } | Node::Break { pos } | Node::Continue { pos } => *pos,
        Node::Action(a) => a.pos,
        Node::If(b) | Node::Range(b) | Node::With(b) => b.pos,
        Node::Template(t) => t.pos,
    }
}

impl Node {
    fn template_string(t: &TemplateCall) -> String {
        let mut s = format!("{{{{template {}", go_quote(&t.name));
        if let Some(p) = &t.pipe {
            let _ = write!(s, " {p}");
        }
        s.push_str("}}");
        s
    }

    fn branch_string(kind: &str, b: &Branch) -> String {
        let mut s = format!("{{{{{kind} {}}}}}{}", b.pipe, b.list);
        if let Some(e) = &b.else_list {
            let _ = write!(s, "{{{{else}}}}{e}");
        }
        s.push_str("{{end}}");
        s
    }
}

/// What a function body sees of the engine: `include` and `tpl` run templates of the set
/// being executed, counted against the depth limit, into output of their own.
struct EnvImpl<'c> {
    ctx: &'c mut Ctx,
}

impl std::fmt::Debug for EnvImpl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Env")
    }
}

impl EnvImpl<'_> {
    fn nested(&mut self, name: &str, data: &Value) -> Result<String, CallError> {
        let ctx = &mut *self.ctx;
        if ctx.depth >= ctx.set.limits.max_depth {
            return Err(CallError::Call(format!(
                "exceeded maximum template depth ({})",
                ctx.set.limits.max_depth
            )));
        }
        let saved = std::mem::take(&mut ctx.out);
        ctx.depth += 1;
        let r = ctx.run_named(name, data);
        ctx.depth -= 1;
        let out = std::mem::replace(&mut ctx.out, saved);
        r.map(|()| out).map_err(|e| CallError::Call(e.message))
    }
}

impl Env for EnvImpl<'_> {
    fn execute_template(&mut self, name: &str, data: &Value) -> Result<String, CallError> {
        self.nested(name, data)
    }

    fn execute_text(&mut self, name: &str, text: &str, data: &Value) -> Result<String, CallError> {
        let mut copy = self.ctx.set.clone();
        copy.parse(name, text).map_err(|e| CallError::Call(e.message))?;
        let saved = std::mem::replace(&mut self.ctx.set, copy);
        let r = self.nested(name, data);
        self.ctx.set = saved;
        r
    }
}
