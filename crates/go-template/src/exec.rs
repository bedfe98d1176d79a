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

mod eval;

use std::fmt::Write as _;

use crate::builtins;
use crate::error::Error;
use crate::parse::{
    Arg, Branch, Command, List, Node, Pipe, TemplateCall, Tree, Variable, go_quote,
};
use crate::template::Templates;
use crate::value::{CallError, Env, Value};

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
    steps: u64,
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
        steps: 0,
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
        // Go's `reflect.ValueOf(data)`: nil data is no value at all.
        let dot = match data {
            Value::Nil => Rv::Invalid,
            v => Rv::concrete(v.clone()),
        };
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

    /// Counts one step of work against [`crate::Limits::max_steps`].
    fn step(&mut self, f: &Frame<'_>) -> R<()> {
        self.steps += 1;
        if self.steps > self.set.limits.max_steps {
            return Err(self.err(
                f,
                format!(
                    "exceeded the limit of {} evaluation steps (the template does too much work)",
                    self.set.limits.max_steps
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
                format!(
                    "template output exceeds the limit of {} bytes",
                    self.set.limits.max_output
                ),
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
        self.step(f)?;
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
        // Go 1.23 (Helm 3.17) ranges over lists and maps only: integers came in Go 1.24.
        // A map or slice type with methods (`.Files`) ranges as the map or slice it is.
        let plain = val.inner().and_then(builtins::as_plain);
        let items: Vec<(Rv, Rv)> = match plain.as_ref().or(val.inner()) {
            None => Vec::new(),
            Some(Value::List(l)) => l
                .iter()
                .enumerate()
                .map(|(i, v)| (Rv::concrete(Value::Int(i as i64)), Rv::boxed(v.clone())))
                .collect(),
            Some(Value::Bytes(b)) => b
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    (
                        Rv::concrete(Value::Int(i as i64)),
                        Rv::concrete(Value::Int(i64::from(*v))),
                    )
                })
                .collect(),
            Some(Value::Map(m)) => m
                .borrow()
                .iter()
                .map(|(k, v)| {
                    (
                        Rv::concrete(Value::string(k.as_str())),
                        Rv::boxed(v.clone()),
                    )
                })
                .collect(),
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
            f.at = At::Branch(r, "range");
            self.step(f)?;
            let decl = &r.pipe.decl;
            if !decl.is_empty() {
                if r.pipe.is_assign {
                    let v = if decl.len() > 1 {
                        index.clone()
                    } else {
                        elem.clone()
                    };
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
                format!(
                    "exceeded maximum template depth ({})",
                    self.set.limits.max_depth
                ),
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
        copy.parse(name, text)
            .map_err(|e| CallError::Parse(e.message))?;
        let saved = std::mem::replace(&mut self.ctx.set, copy);
        let r = self.nested(name, data);
        self.ctx.set = saved;
        r
    }
}
