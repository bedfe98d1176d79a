//! The parse tree: one [`Tree`] per template, its nodes, and Go's `String()` of each node
//! (what execution errors show between `<` and `>`).

use std::fmt::{self, Write as _};
use std::rc::Rc;

/// The source a tree was parsed from: the name of the top-level template of that parse
/// (Go's `ParseName`, used in positions) and its text (for line and column of a node).
#[derive(Debug)]
pub(crate) struct Source {
    pub(crate) parse_name: String,
    pub(crate) text: String,
}

impl Source {
    /// Go's `ErrorContext` location: `NAME:LINE:COL`, COL counted in bytes from 0.
    pub(crate) fn location(&self, pos: usize) -> String {
        let pos = pos.min(self.text.len());
        let before = &self.text.as_bytes()[..pos];
        let col = match before.iter().rposition(|&b| b == b'\n') {
            None => pos,
            Some(i) => pos - (i + 1),
        };
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        format!("{}:{}:{}", self.parse_name, line, col)
    }
}

/// One parsed template.
#[derive(Debug)]
pub(crate) struct Tree {
    pub(crate) name: String,
    pub(crate) src: Rc<Source>,
    pub(crate) root: List,
}

#[derive(Debug)]
pub(crate) struct List {
    pub(crate) nodes: Vec<Node>,
}

#[derive(Debug)]
pub(crate) enum Node {
    Text { pos: usize, text: String },
    Action(Action),
    If(Branch),
    Range(Branch),
    With(Branch),
    Template(TemplateCall),
    Break { pos: usize },
    Continue { pos: usize },
}

#[derive(Debug)]
pub(crate) struct Action {
    pub(crate) pos: usize,
    pub(crate) pipe: Pipe,
}

#[derive(Debug)]
pub(crate) struct Branch {
    pub(crate) pos: usize,
    pub(crate) pipe: Pipe,
    pub(crate) list: List,
    pub(crate) else_list: Option<List>,
}

#[derive(Debug)]
pub(crate) struct TemplateCall {
    pub(crate) pos: usize,
    pub(crate) name: String,
    pub(crate) pipe: Option<Pipe>,
}

#[derive(Debug)]
pub(crate) struct Pipe {
    pub(crate) pos: usize,
    pub(crate) is_assign: bool,
    pub(crate) decl: Vec<Variable>,
    pub(crate) cmds: Vec<Command>,
}

#[derive(Debug)]
pub(crate) struct Variable {
    pub(crate) pos: usize,
    /// `$x.a.b` is `["$x", "a", "b"]`.
    pub(crate) ident: Vec<String>,
}

#[derive(Debug)]
pub(crate) struct Command {
    pub(crate) pos: usize,
    pub(crate) args: Vec<Arg>,
}

/// An operand of a command.
#[derive(Debug)]
pub(crate) enum Arg {
    /// `.a.b`: `["a", "b"]`.
    Field {
        pos: usize,
        ident: Vec<String>,
    },
    /// `(pipe).a.b` and the like: a term followed by fields.
    Chain {
        pos: usize,
        node: Box<Arg>,
        field: Vec<String>,
    },
    Identifier {
        pos: usize,
        name: String,
    },
    Variable(Variable),
    Dot {
        pos: usize,
    },
    Nil {
        pos: usize,
    },
    Bool {
        pos: usize,
        val: bool,
    },
    Number(Number),
    /// A string constant: the text as written (for printing) and its value.
    String {
        pos: usize,
        quoted: String,
        text: String,
    },
    Pipe(Box<Pipe>),
}

/// A numeric constant, with every interpretation of it Go's parser records.
#[derive(Debug, Clone)]
pub(crate) struct Number {
    pub(crate) pos: usize,
    pub(crate) text: String,
    pub(crate) is_int: bool,
    pub(crate) is_uint: bool,
    pub(crate) is_float: bool,
    pub(crate) is_complex: bool,
    pub(crate) int: i64,
    pub(crate) uint: u64,
    pub(crate) float: f64,
}

impl Arg {
    pub(crate) fn pos(&self) -> usize {
        match self {
            Arg::Field { pos, .. }
            | Arg::Chain { pos, .. }
            | Arg::Identifier { pos, .. }
            | Arg::Dot { pos }
            | Arg::Nil { pos }
            | Arg::Bool { pos, .. }
            | Arg::String { pos, .. } => *pos,
            Arg::Variable(v) => v.pos,
            Arg::Number(n) => n.pos,
            Arg::Pipe(p) => p.pos,
        }
    }
}

// ---- Go's String() of nodes, as error contexts print them ----

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Field { ident, .. } => {
                for i in ident {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
            Arg::Chain { node, field, .. } => {
                if let Arg::Pipe(p) = &**node {
                    write!(f, "({p})")?;
                } else {
                    write!(f, "{node}")?;
                }
                for i in field {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
            Arg::Identifier { name, .. } => f.write_str(name),
            Arg::Variable(v) => write!(f, "{v}"),
            Arg::Dot { .. } => f.write_str("."),
            Arg::Nil { .. } => f.write_str("nil"),
            Arg::Bool { val, .. } => write!(f, "{val}"),
            Arg::Number(n) => f.write_str(&n.text),
            Arg::String { quoted, .. } => f.write_str(quoted),
            Arg::Pipe(p) => write!(f, "{p}"),
        }
    }
}

impl fmt::Display for Variable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.ident.join("."))
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, arg) in self.args.iter().enumerate() {
            if i > 0 {
                f.write_char(' ')?;
            }
            if let Arg::Pipe(p) = arg {
                write!(f, "({p})")?;
            } else {
                write!(f, "{arg}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Pipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.decl.is_empty() {
            for (i, v) in self.decl.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{v}")?;
            }
            f.write_str(if self.is_assign { " = " } else { " := " })?;
        }
        for (i, c) in self.cmds.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

impl fmt::Display for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for n in &self.nodes {
            write!(f, "{n}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let branch = |f: &mut fmt::Formatter<'_>, name: &str, b: &Branch| {
            write!(f, "{{{{{name} {}}}}}{}", b.pipe, b.list)?;
            if let Some(e) = &b.else_list {
                write!(f, "{{{{else}}}}{e}")?;
            }
            f.write_str("{{end}}")
        };
        match self {
            Node::Text { text, .. } => f.write_str(text),
            Node::Action(a) => write!(f, "{{{{{}}}}}", a.pipe),
            Node::If(b) => branch(f, "if", b),
            Node::Range(b) => branch(f, "range", b),
            Node::With(b) => branch(f, "with", b),
            Node::Template(t) => {
                write!(f, "{{{{template {}", go_quote(&t.name))?;
                if let Some(p) = &t.pipe {
                    write!(f, " {p}")?;
                }
                f.write_str("}}")
            }
            Node::Break { .. } => f.write_str("{{break}}"),
            Node::Continue { .. } => f.write_str("{{continue}}"),
        }
    }
}

/// Go's `strconv.Quote`.
pub(crate) fn go_quote(s: &str) -> String {
    crate::fmt::strconv::quote(s.as_bytes(), false)
}
