//! The parser: items into trees, one per template (the text itself, each `{{define}}` and each
//! `{{block}}`), with Go's grammar, variable scoping checks and error messages
//! (`template: NAME:LINE: …`, the line being that of the last item read, as in Go).
//!
//! Nesting is bounded ([`MAX_NESTING`]): Go bounds only parenthesized pipelines (at 10 000, on
//! growable stacks); here every recursion of the parser, of the executor walking the tree and
//! of dropping it is bounded, so no input can overflow the stack.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::rc::Rc;

use crate::lex::{Item, ItemType, lex};

/// How deep parenthesized pipelines and control structures (`if`, `with`, `range`, `block`)
/// may nest inside one another in one template. Go allows 10 000 parentheses and unbounded
/// control nesting; real charts nest a handful of levels.
pub const MAX_NESTING: usize = 100;

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
    Field { pos: usize, ident: Vec<String> },
    /// `(pipe).a.b` and the like: a term followed by fields.
    Chain { pos: usize, node: Box<Arg>, field: Vec<String> },
    Identifier { pos: usize, name: String },
    Variable(Variable),
    Dot { pos: usize },
    Nil { pos: usize },
    Bool { pos: usize, val: bool },
    Number(Number),
    /// A string constant: the text as written (for printing) and its value.
    String { pos: usize, quoted: String, text: String },
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
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if crate::fmt::strconv::is_print(c) => out.push(c),
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

// ---- the parser ----

/// Parse failure: the message without Go's `template: NAME:LINE: ` prefix, and the line.
pub(crate) struct ParseError(pub(crate) String);

type PResult<T> = Result<T, ParseError>;

/// What the parser needs to know of the functions: whether a name is defined.
pub(crate) trait FuncNames {
    fn has(&self, name: &str) -> bool;
}

/// Parses `text` as template `name`; returns every tree it defines (the text itself under
/// `name`, plus each `define` and `block`), in definition order, Go's duplicate rule applied.
pub(crate) fn parse(
    name: &str,
    text: &str,
    funcs: &dyn FuncNames,
) -> Result<Vec<Tree>, String> {
    let src = Rc::new(Source {
        parse_name: name.to_owned(),
        text: text.to_owned(),
    });
    let items = lex(text, !funcs.has("break"), !funcs.has("continue"));
    let mut p = Parser {
        items,
        next_item: 0,
        token: [empty_item(), empty_item(), empty_item()],
        peek_count: 0,
        vars: vec!["$".into()],
        funcs,
        src,
        action_line: 0,
        range_depth: 0,
        nesting: 0,
        trees: Vec::new(),
        index: HashMap::new(),
    };
    match p.parse_top(name) {
        Ok(()) => Ok(p.trees),
        Err(ParseError(msg)) => Err(msg),
    }
}

fn empty_item() -> Item {
    Item {
        typ: ItemType::Eof,
        pos: 0,
        val: String::new(),
        line: 0,
    }
}

struct Parser<'f> {
    items: Vec<Item>,
    next_item: usize,
    token: [Item; 3],
    peek_count: usize,
    vars: Vec<String>,
    funcs: &'f dyn FuncNames,
    src: Rc<Source>,
    action_line: usize,
    range_depth: usize,
    nesting: usize,
    trees: Vec<Tree>,
    index: HashMap<String, usize>,
}

/// The per-tree parser state Go keeps in each `Tree` (a `define` or `block` body is parsed
/// by a tree of its own sharing the lexer): saved and restored around such a body.
struct TreeState {
    token: [Item; 3],
    peek_count: usize,
    vars: Vec<String>,
    range_depth: usize,
    nesting: usize,
}

impl Parser<'_> {
    fn lex_next(&mut self) -> Item {
        match self.items.get(self.next_item) {
            Some(item) => {
                let item = item.clone();
                if item.typ != ItemType::Eof && item.typ != ItemType::Error {
                    self.next_item += 1;
                }
                item
            }
            None => empty_item(),
        }
    }

    fn next(&mut self) -> Item {
        if self.peek_count > 0 {
            self.peek_count -= 1;
        } else {
            self.token[0] = self.lex_next();
        }
        self.token[self.peek_count].clone()
    }

    fn backup(&mut self) {
        self.peek_count += 1;
    }

    fn backup2(&mut self, t1: Item) {
        self.token[1] = t1;
        self.peek_count = 2;
    }

    fn backup3(&mut self, t2: Item, t1: Item) {
        self.token[1] = t1;
        self.token[2] = t2;
        self.peek_count = 3;
    }

    fn peek(&mut self) -> Item {
        if self.peek_count > 0 {
            return self.token[self.peek_count - 1].clone();
        }
        self.peek_count = 1;
        self.token[0] = self.lex_next();
        self.token[0].clone()
    }

    fn next_non_space(&mut self) -> Item {
        loop {
            let t = self.next();
            if t.typ != ItemType::Space {
                return t;
            }
        }
    }

    fn peek_non_space(&mut self) -> Item {
        let t = self.next_non_space();
        self.backup();
        t
    }

    fn errorf<T>(&self, msg: impl fmt::Display) -> PResult<T> {
        Err(ParseError(format!(
            "template: {}:{}: {}",
            self.src.parse_name, self.token[0].line, msg
        )))
    }

    fn expect(&mut self, expected: ItemType, context: &str) -> PResult<Item> {
        let t = self.next_non_space();
        if t.typ != expected {
            return self.unexpected(&t, context);
        }
        Ok(t)
    }

    fn unexpected<T>(&self, token: &Item, context: &str) -> PResult<T> {
        if token.typ == ItemType::Error {
            let mut extra = String::new();
            if self.action_line != 0 && self.action_line != token.line {
                extra = format!(
                    " in action started at {}:{}",
                    self.src.parse_name, self.action_line
                );
                if token.val.ends_with(" action") {
                    extra = extra[" in action".len()..].to_owned();
                }
            }
            return self.errorf(format!("{}{}", token.describe(), extra));
        }
        self.errorf(format!("unexpected {} in {}", token.describe(), context))
    }

    fn enter_tree(&mut self) -> TreeState {
        TreeState {
            token: std::mem::replace(&mut self.token, [empty_item(), empty_item(), empty_item()]),
            peek_count: std::mem::take(&mut self.peek_count),
            vars: std::mem::replace(&mut self.vars, vec!["$".into()]),
            range_depth: std::mem::take(&mut self.range_depth),
            nesting: self.nesting,
        }
    }

    fn leave_tree(&mut self, saved: TreeState) {
        self.token = saved.token;
        self.peek_count = saved.peek_count;
        self.vars = saved.vars;
        self.range_depth = saved.range_depth;
        self.nesting = saved.nesting;
    }

    /// Go's `Tree.add`: a second non-empty definition of a name in one parse is an error;
    /// an empty one never replaces a non-empty one.
    fn add(&mut self, tree: Tree) -> PResult<()> {
        match self.index.get(&tree.name) {
            None => {
                self.index.insert(tree.name.clone(), self.trees.len());
                self.trees.push(tree);
            }
            Some(&i) => {
                if is_empty_list(&self.trees[i].root) {
                    self.trees[i] = tree;
                } else if !is_empty_list(&tree.root) {
                    return self.errorf(format!(
                        "template: multiple definition of template {}",
                        go_quote(&tree.name)
                    ));
                }
            }
        }
        Ok(())
    }

    fn parse_top(&mut self, name: &str) -> PResult<()> {
        let mut root = List { nodes: Vec::new() };
        while self.peek().typ != ItemType::Eof {
            if self.peek().typ == ItemType::LeftDelim {
                let delim = self.next();
                if self.next_non_space().typ == ItemType::Define {
                    let saved = self.enter_tree();
                    let r = self.parse_definition();
                    self.leave_tree(saved);
                    // Go's outer tree continues with its own (stale) token buffer, now empty.
                    self.peek_count = 0;
                    r?;
                    continue;
                }
                self.backup2(delim);
            }
            match self.text_or_action()? {
                Parsed::Node(n) => root.nodes.push(n),
                Parsed::End(_) => return self.errorf("unexpected {{end}}"),
                Parsed::Else(_) => return self.errorf("unexpected {{else}}"),
            }
        }
        self.add(Tree {
            name: name.to_owned(),
            src: self.src.clone(),
            root,
        })
    }

    fn parse_definition(&mut self) -> PResult<()> {
        const CONTEXT: &str = "define clause";
        let t = self.next_non_space();
        if t.typ != ItemType::String && t.typ != ItemType::RawString {
            return self.unexpected(&t, CONTEXT);
        }
        let name = match unquote(&t.val) {
            Ok(n) => n,
            Err(e) => return self.errorf(e),
        };
        self.expect(ItemType::RightDelim, CONTEXT)?;
        let (root, end) = self.item_list()?;
        if let Ended::Else = end {
            return self.errorf(format!("unexpected {{{{else}}}} in {CONTEXT}"));
        }
        self.add(Tree {
            name,
            src: self.src.clone(),
            root,
        })
    }

    fn item_list(&mut self) -> PResult<(List, Ended)> {
        let mut list = List { nodes: Vec::new() };
        while self.peek_non_space().typ != ItemType::Eof {
            match self.text_or_action()? {
                Parsed::Node(n) => list.nodes.push(n),
                Parsed::End(_) => return Ok((list, Ended::End)),
                Parsed::Else(_) => return Ok((list, Ended::Else)),
            }
        }
        self.errorf("unexpected EOF")
    }

    fn text_or_action(&mut self) -> PResult<Parsed> {
        let token = self.next_non_space();
        match token.typ {
            ItemType::Text => Ok(Parsed::Node(Node::Text {
                pos: token.pos,
                text: token.val,
            })),
            ItemType::LeftDelim => {
                self.action_line = token.line;
                let r = self.action();
                self.action_line = 0;
                r
            }
            _ => self.unexpected(&token, "input"),
        }
    }

    fn action(&mut self) -> PResult<Parsed> {
        let token = self.next_non_space();
        match token.typ {
            ItemType::Block => return self.block_control().map(Parsed::Node),
            ItemType::Break | ItemType::Continue => {
                let what = if token.typ == ItemType::Break {
                    "break"
                } else {
                    "continue"
                };
                let t = self.next_non_space();
                if t.typ != ItemType::RightDelim {
                    return self.unexpected(&t, &format!("{{{{{what}}}}}"));
                }
                if self.range_depth == 0 {
                    return self.errorf(format!("{{{{{what}}}}} outside {{{{range}}}}"));
                }
                return Ok(Parsed::Node(if token.typ == ItemType::Break {
                    Node::Break { pos: token.pos }
                } else {
                    Node::Continue { pos: token.pos }
                }));
            }
            ItemType::Else => {
                let peek = self.peek_non_space();
                if peek.typ == ItemType::If || peek.typ == ItemType::With {
                    return Ok(Parsed::Else(peek.pos));
                }
                let t = self.expect(ItemType::RightDelim, "else")?;
                return Ok(Parsed::Else(t.pos));
            }
            ItemType::End => {
                let t = self.expect(ItemType::RightDelim, "end")?;
                return Ok(Parsed::End(t.pos));
            }
            ItemType::If => return self.control("if").map(|b| Parsed::Node(Node::If(b))),
            ItemType::Range => {
                return self.control("range").map(|b| Parsed::Node(Node::Range(b)));
            }
            ItemType::With => return self.control("with").map(|b| Parsed::Node(Node::With(b))),
            ItemType::Template => return self.template_control().map(Parsed::Node),
            _ => {}
        }
        self.backup();
        let pipe = self.pipeline("command", ItemType::RightDelim)?;
        Ok(Parsed::Node(Node::Action(Action {
            pos: pipe.pos,
            pipe,
        })))
    }

    fn nest(&mut self) -> PResult<()> {
        if self.nesting >= MAX_NESTING {
            return self.errorf("max expression depth exceeded");
        }
        self.nesting += 1;
        Ok(())
    }

    fn control(&mut self, context: &str) -> PResult<Branch> {
        self.nest()?;
        let mark = self.vars.len();
        let r = self.control_inner(context);
        self.vars.truncate(mark);
        self.nesting -= 1;
        r
    }

    fn control_inner(&mut self, context: &str) -> PResult<Branch> {
        let pipe = self.pipeline(context, ItemType::RightDelim)?;
        if context == "range" {
            self.range_depth += 1;
        }
        let r = self.item_list();
        if context == "range" {
            self.range_depth -= 1;
        }
        let (list, next) = r?;
        let mut else_list = None;
        if let Ended::Else = next {
            if context == "if" && self.peek().typ == ItemType::If {
                self.next();
                let b = self.control("if")?;
                else_list = Some(List {
                    nodes: vec![Node::If(b)],
                });
            } else if context == "with" && self.peek().typ == ItemType::With {
                self.next();
                let b = self.control("with")?;
                else_list = Some(List {
                    nodes: vec![Node::With(b)],
                });
            } else {
                let (l, next) = self.item_list()?;
                if let Ended::Else = next {
                    return self.errorf("expected end; found {{else}}");
                }
                else_list = Some(l);
            }
        }
        Ok(Branch {
            pos: pipe.pos,
            pipe,
            list,
            else_list,
        })
    }

    fn block_control(&mut self) -> PResult<Node> {
        const CONTEXT: &str = "block clause";
        let token = self.next_non_space();
        let name = self.template_name(&token, CONTEXT)?;
        let pipe = self.pipeline(CONTEXT, ItemType::RightDelim)?;
        self.nest()?;
        let saved = self.enter_tree();
        let result = match self.item_list() {
            Err(e) => Err(e),
            Ok((_, Ended::Else)) => Ok(false),
            Ok((root, Ended::End)) => self
                .add(Tree {
                    name: name.clone(),
                    src: self.src.clone(),
                    root,
                })
                .map(|()| true),
        };
        self.leave_tree(saved);
        self.nesting -= 1;
        if !result? {
            // Go reports this with the outer tree's last item (the block's own `}}`).
            return self.errorf(format!("unexpected {{{{else}}}} in {CONTEXT}"));
        }
        Ok(Node::Template(TemplateCall {
            pos: token.pos,
            name,
            pipe: Some(pipe),
        }))
    }

    fn template_control(&mut self) -> PResult<Node> {
        const CONTEXT: &str = "template clause";
        let token = self.next_non_space();
        let name = self.template_name(&token, CONTEXT)?;
        let mut pipe = None;
        if self.next_non_space().typ != ItemType::RightDelim {
            self.backup();
            pipe = Some(self.pipeline(CONTEXT, ItemType::RightDelim)?);
        }
        Ok(Node::Template(TemplateCall {
            pos: token.pos,
            name,
            pipe,
        }))
    }

    fn template_name(&mut self, token: &Item, context: &str) -> PResult<String> {
        match token.typ {
            ItemType::String | ItemType::RawString => match unquote(&token.val) {
                Ok(s) => Ok(s),
                Err(e) => self.errorf(e),
            },
            _ => self.unexpected(token, context),
        }
    }

    fn pipeline(&mut self, context: &str, end: ItemType) -> PResult<Pipe> {
        let token = self.peek_non_space();
        let mut pipe = Pipe {
            pos: token.pos,
            is_assign: false,
            decl: Vec::new(),
            cmds: Vec::new(),
        };
        'decls: loop {
            let v = self.peek_non_space();
            if v.typ != ItemType::Variable {
                break 'decls;
            }
            self.next();
            let after = self.peek();
            let next = self.peek_non_space();
            if next.typ == ItemType::Assign || next.typ == ItemType::Declare {
                pipe.is_assign = next.typ == ItemType::Assign;
                self.next_non_space();
                pipe.decl.push(new_variable(v.pos, &v.val));
                self.vars.push(v.val.clone());
            } else if next.typ == ItemType::Char && next.val == "," {
                self.next_non_space();
                pipe.decl.push(new_variable(v.pos, &v.val));
                self.vars.push(v.val.clone());
                if context == "range" && pipe.decl.len() < 2 {
                    match self.peek_non_space().typ {
                        ItemType::Variable | ItemType::RightDelim | ItemType::RightParen => {
                            continue 'decls;
                        }
                        _ => return self.errorf("range can only initialize variables"),
                    }
                }
                return self.errorf(format!("too many declarations in {context}"));
            } else if after.typ == ItemType::Space {
                self.backup3(v, after);
            } else {
                self.backup2(v);
            }
            break 'decls;
        }
        loop {
            let token = self.next_non_space();
            match token.typ {
                t if t == end => {
                    self.check_pipeline(&pipe, context)?;
                    return Ok(pipe);
                }
                ItemType::Bool
                | ItemType::CharConstant
                | ItemType::Complex
                | ItemType::Dot
                | ItemType::Field
                | ItemType::Identifier
                | ItemType::Number
                | ItemType::Nil
                | ItemType::RawString
                | ItemType::String
                | ItemType::Variable
                | ItemType::LeftParen => {
                    self.backup();
                    let cmd = self.command()?;
                    pipe.cmds.push(cmd);
                }
                _ => return self.unexpected(&token, context),
            }
        }
    }

    fn check_pipeline(&self, pipe: &Pipe, context: &str) -> PResult<()> {
        if pipe.cmds.is_empty() {
            return self.errorf(format!("missing value for {context}"));
        }
        for (i, c) in pipe.cmds.iter().enumerate().skip(1) {
            if matches!(
                c.args.first(),
                Some(Arg::Bool { .. } | Arg::Dot { .. } | Arg::Nil { .. } | Arg::Number(_) | Arg::String { .. })
            ) {
                return self.errorf(format!("non executable command in pipeline stage {}", i + 1));
            }
        }
        Ok(())
    }

    fn command(&mut self) -> PResult<Command> {
        let pos = self.peek_non_space().pos;
        let mut cmd = Command {
            pos,
            args: Vec::new(),
        };
        loop {
            self.peek_non_space();
            if let Some(operand) = self.operand()? {
                cmd.args.push(operand);
            }
            let token = self.next();
            match token.typ {
                ItemType::Space => continue,
                ItemType::RightDelim | ItemType::RightParen => self.backup(),
                ItemType::Pipe => {}
                _ => return self.unexpected(&token, "operand"),
            }
            break;
        }
        if cmd.args.is_empty() {
            return self.errorf("empty command");
        }
        Ok(cmd)
    }

    fn operand(&mut self) -> PResult<Option<Arg>> {
        let Some(node) = self.term()? else {
            return Ok(None);
        };
        if self.peek().typ != ItemType::Field {
            return Ok(Some(node));
        }
        let pos = self.peek().pos;
        let mut fields = Vec::new();
        while self.peek().typ == ItemType::Field {
            let f = self.next();
            fields.push(f.val[1..].to_owned());
        }
        Ok(Some(match node {
            Arg::Field { mut ident, .. } => {
                ident.extend(fields);
                Arg::Field { pos, ident }
            }
            Arg::Variable(mut v) => {
                v.ident.extend(fields);
                Arg::Variable(Variable { pos, ident: v.ident })
            }
            Arg::Bool { .. } | Arg::String { .. } | Arg::Number(_) | Arg::Nil { .. } | Arg::Dot { .. } => {
                return self.errorf(format!(
                    "unexpected . after term {}",
                    go_quote(&node.to_string())
                ));
            }
            node => Arg::Chain {
                pos,
                node: Box::new(node),
                field: fields,
            },
        }))
    }

    fn term(&mut self) -> PResult<Option<Arg>> {
        let token = self.next_non_space();
        Ok(Some(match token.typ {
            ItemType::Identifier => {
                if !self.funcs.has(&token.val) {
                    return self.errorf(format!("function {} not defined", go_quote(&token.val)));
                }
                Arg::Identifier {
                    pos: token.pos,
                    name: token.val,
                }
            }
            ItemType::Dot => Arg::Dot { pos: token.pos },
            ItemType::Nil => Arg::Nil { pos: token.pos },
            ItemType::Variable => {
                let v = new_variable(token.pos, &token.val);
                if !self.vars.iter().any(|x| *x == v.ident[0]) {
                    return self.errorf(format!("undefined variable {}", go_quote(&v.ident[0])));
                }
                Arg::Variable(v)
            }
            ItemType::Field => Arg::Field {
                pos: token.pos,
                ident: token.val[1..].split('.').map(str::to_owned).collect(),
            },
            ItemType::Bool => Arg::Bool {
                pos: token.pos,
                val: token.val == "true",
            },
            ItemType::CharConstant | ItemType::Complex | ItemType::Number => {
                match new_number(token.pos, &token.val, token.typ) {
                    Ok(n) => Arg::Number(n),
                    Err(e) => return self.errorf(e),
                }
            }
            ItemType::LeftParen => {
                self.nest()?;
                let r = self.pipeline("parenthesized pipeline", ItemType::RightParen);
                self.nesting -= 1;
                Arg::Pipe(Box::new(r?))
            }
            ItemType::String | ItemType::RawString => match unquote(&token.val) {
                Ok(s) => Arg::String {
                    pos: token.pos,
                    quoted: token.val,
                    text: s,
                },
                Err(e) => return self.errorf(e),
            },
            _ => {
                self.backup();
                return Ok(None);
            }
        }))
    }
}

enum Parsed {
    Node(Node),
    End(#[allow(dead_code)] usize),
    Else(#[allow(dead_code)] usize),
}

enum Ended {
    End,
    Else,
}

fn new_variable(pos: usize, text: &str) -> Variable {
    Variable {
        pos,
        ident: text.split('.').map(str::to_owned).collect(),
    }
}

/// Go's `parse.IsEmptyTree` for a list: nothing but space and comments.
pub(crate) fn is_empty_list(list: &List) -> bool {
    list.nodes.iter().all(|n| match n {
        Node::Text { text, .. } => text.trim_matches(is_go_space).is_empty(),
        _ => false,
    })
}

/// `unicode.IsSpace` as `bytes.TrimSpace` uses it.
fn is_go_space(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\x0b' | '\x0c' | '\r' | ' ' | '\u{85}' | '\u{a0}') || c.is_whitespace()
}

// ---- constants ----

/// Go's `strconv.Unquote` for the three quote kinds the lexer produces.
pub(crate) fn unquote(s: &str) -> Result<String, String> {
    const SYNTAX: &str = "invalid syntax";
    let bytes = s.as_bytes();
    if bytes.len() < 2 {
        return Err(SYNTAX.into());
    }
    let quote = bytes[0];
    if bytes[bytes.len() - 1] != quote {
        return Err(SYNTAX.into());
    }
    let body = &s[1..s.len() - 1];
    match quote {
        b'`' => {
            if body.contains('`') {
                return Err(SYNTAX.into());
            }
            Ok(body.replace('\r', ""))
        }
        b'"' | b'\'' => {
            if quote == b'\'' && !body.contains('\\') {
                // Exactly one character.
                let mut it = body.chars();
                return match (it.next(), it.next()) {
                    (Some(c), None) if c != '\'' => Ok(c.to_string()),
                    _ => Err(SYNTAX.into()),
                };
            }
            let mut out = String::new();
            let mut rest = body;
            while !rest.is_empty() {
                let (c, tail) = unquote_char(rest, quote as char).map_err(|_| SYNTAX.to_string())?;
                out.push_str(&c);
                rest = tail;
                if quote == b'\'' && !rest.is_empty() {
                    return Err(SYNTAX.into());
                }
            }
            Ok(out)
        }
        _ => Err(SYNTAX.into()),
    }
}

/// Go's `strconv.UnquoteChar`: one (possibly escaped) character and the rest. Byte escapes
/// (`\xNN`, octal) that do not form UTF-8 become U+FFFD (Go strings may hold raw bytes).
pub(crate) fn unquote_char(s: &str, quote: char) -> Result<(String, &str), ()> {
    let mut chars = s.chars();
    let c = chars.next().ok_or(())?;
    if c == quote && (quote == '\'' || quote == '"') {
        return Err(());
    }
    if c != '\\' {
        return Ok((c.to_string(), chars.as_str()));
    }
    let e = chars.next().ok_or(())?;
    let rest = chars.as_str();
    let simple = match e {
        'a' => Some('\x07'),
        'b' => Some('\x08'),
        'f' => Some('\x0c'),
        'n' => Some('\n'),
        'r' => Some('\r'),
        't' => Some('\t'),
        'v' => Some('\x0b'),
        '\\' => Some('\\'),
        '\'' | '"' => {
            if e != quote {
                return Err(());
            }
            Some(e)
        }
        _ => None,
    };
    if let Some(c) = simple {
        return Ok((c.to_string(), rest));
    }
    let hex = |n: usize| -> Result<(u32, &str), ()> {
        if rest.len() < n || !rest.is_char_boundary(n) {
            return Err(());
        }
        let v = u32::from_str_radix(&rest[..n], 16).map_err(|_| ())?;
        if !rest[..n].bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(());
        }
        Ok((v, &rest[n..]))
    };
    match e {
        'x' => {
            let (v, tail) = hex(2)?;
            Ok((byte_char(v), tail))
        }
        'u' | 'U' => {
            let (v, tail) = hex(if e == 'u' { 4 } else { 8 })?;
            let c = char::from_u32(v).ok_or(())?;
            Ok((c.to_string(), tail))
        }
        '0'..='7' => {
            if rest.len() < 2 || !rest.is_char_boundary(2) {
                return Err(());
            }
            let digits = format!("{e}{}", &rest[..2]);
            if !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                return Err(());
            }
            let v = u32::from_str_radix(&digits, 8).map_err(|_| ())?;
            if v > 255 {
                return Err(());
            }
            Ok((byte_char(v), &rest[2..]))
        }
        _ => Err(()),
    }
}

fn byte_char(v: u32) -> String {
    if v < 0x80 {
        char::from_u32(v).map(String::from).unwrap_or_default()
    } else {
        '\u{fffd}'.to_string()
    }
}

/// Go's `parse.newNumber`: every reading of a numeric constant.
pub(crate) fn new_number(pos: usize, text: &str, typ: ItemType) -> Result<Number, String> {
    let mut n = Number {
        pos,
        text: text.to_owned(),
        is_int: false,
        is_uint: false,
        is_float: false,
        is_complex: false,
        int: 0,
        uint: 0,
        float: 0.0,
    };
    match typ {
        ItemType::CharConstant => {
            let inner = &text[1..];
            let (c, tail) = unquote_char(inner, '\'').map_err(|()| "invalid syntax".to_string())?;
            if tail != "'" {
                return Err(format!("malformed character constant: {text}"));
            }
            let r = rune_of(&c, inner);
            n.int = i64::from(r);
            n.is_int = true;
            n.uint = u64::from(r);
            n.is_uint = true;
            n.float = f64::from(r);
            n.is_float = true;
            return Ok(n);
        }
        ItemType::Complex => {
            // Complex constants parse but have no value here: the executor refuses them.
            n.is_complex = true;
            return Ok(n);
        }
        _ => {}
    }
    if let Some(stripped) = text.strip_suffix('i') {
        if parse_go_float(stripped).is_some() {
            n.is_complex = true;
            return Ok(n);
        }
    }
    let u = parse_go_uint(text);
    if let Some(u) = u {
        n.is_uint = true;
        n.uint = u;
    }
    if let Some(i) = parse_go_int(text) {
        n.is_int = true;
        n.int = i;
        if i == 0 {
            n.is_uint = true;
            n.uint = u.unwrap_or(0);
        }
    }
    if n.is_int {
        n.is_float = true;
        n.float = n.int as f64;
    } else if n.is_uint {
        n.is_float = true;
        n.float = n.uint as f64;
    } else if let Some(f) = parse_go_float(text) {
        if !text.contains(['.', 'e', 'E', 'p', 'P']) {
            return Err(format!("integer overflow: {}", go_quote(text)));
        }
        n.is_float = true;
        n.float = f;
        if !n.is_int && f.fract() == 0.0 && f >= -9.223_372_036_854_775_808e18 && f < 9.223_372_036_854_775_808e18 {
            n.is_int = true;
            n.int = f as i64;
        }
        if !n.is_uint && f.fract() == 0.0 && f >= 0.0 && f < 1.844_674_407_370_955_2e19 {
            n.is_uint = true;
            n.uint = f as u64;
        }
    }
    if !n.is_int && !n.is_uint && !n.is_float {
        return Err(format!("illegal number syntax: {}", go_quote(text)));
    }
    Ok(n)
}

/// The code point a character constant stands for (a byte escape above 0x7f is that byte).
fn rune_of(c: &str, inner: &str) -> u32 {
    if c == "\u{fffd}" {
        // `'\xff'` / `'\377'`: the byte value itself.
        let esc = &inner[..inner.len().saturating_sub(1)];
        if let Some(h) = esc.strip_prefix("\\x") {
            return u32::from_str_radix(h, 16).unwrap_or(0xfffd);
        }
        if let Some(o) = esc.strip_prefix('\\') {
            if o.len() == 3 && o.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                return u32::from_str_radix(o, 8).unwrap_or(0xfffd);
            }
        }
    }
    c.chars().next().map_or(0, u32::from)
}

/// Go's base-prefix and underscore rules (`strconv.ParseInt(s, 0, 64)`'s syntax): returns
/// the sign, the radix and the digits, underscores removed.
fn split_go_int(s: &str) -> Option<(bool, u32, String)> {
    let (neg, body) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    let (radix, digits, prefixed) = if lower.starts_with("0x") {
        (16, &body[2..], true)
    } else if lower.starts_with("0o") {
        (8, &body[2..], true)
    } else if lower.starts_with("0b") {
        (2, &body[2..], true)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..], true)
    } else {
        (10, body, false)
    };
    if body.contains('_') && !underscore_ok(body) {
        return None;
    }
    let _ = prefixed;
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() {
        return None;
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    Some((neg, radix, digits))
}

/// Go's `underscoreOK`: underscores only between digits or after a base prefix.
fn underscore_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' {
        let c = b[1].to_ascii_lowercase();
        if c == b'x' || c == b'o' || c == b'b' {
            hex = c == b'x';
            i = 2;
            saw = b'0';
        }
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

fn parse_go_uint(s: &str) -> Option<u64> {
    if s.starts_with(['+', '-']) {
        return None;
    }
    let (_, radix, digits) = split_go_int(s)?;
    u64::from_str_radix(&digits, radix).ok()
}

fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, radix, digits) = split_go_int(s)?;
    let mag = u64::from_str_radix(&digits, radix).ok()?;
    if neg {
        if mag <= 1u64 << 63 {
            Some((mag as i128).wrapping_neg() as i64)
        } else {
            None
        }
    } else {
        i64::try_from(mag).ok()
    }
}

/// Go's `strconv.ParseFloat(s, 64)` for the spellings the lexer lets through (decimal with
/// fraction/exponent, hexadecimal with a `p` exponent, underscores per Go's rules).
pub(crate) fn parse_go_float(s: &str) -> Option<f64> {
    let (neg, body) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if body.contains('_') && !underscore_ok(body) {
        return None;
    }
    let body: String = body.chars().filter(|&c| c != '_').collect();
    let lower = body.to_ascii_lowercase();
    let v = if let Some(hex) = lower.strip_prefix("0x") {
        parse_hex_float(hex)?
    } else {
        if body.is_empty()
            || !body.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
            || !body.bytes().any(|b| b.is_ascii_digit())
        {
            return None;
        }
        let mantissa_end = body.find(['e', 'E']).unwrap_or(body.len());
        if !body[..mantissa_end].bytes().any(|b| b.is_ascii_digit()) {
            return None;
        }
        body.parse::<f64>().ok()?
    };
    if v.is_infinite() {
        return None;
    }
    Some(if neg { -v } else { v })
}

fn parse_hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = match s.find('p') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int_part, frac_part) = match mant.find('.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int_part.chars() {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in frac_part.chars() {
        v += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    // Go requires the p exponent for hexadecimal floats with a fraction.
    let e: i32 = match exp {
        Some(e) => e.parse().ok()?,
        None if !frac_part.is_empty() || mant.contains('.') => return None,
        None => 0,
    };
    Some(v * 2f64.powi(e))
}

#[cfg(test)]
mod tests;
