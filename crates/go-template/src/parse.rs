//! The parser: items into trees, one per template (the text itself, each `{{define}}` and each
//! `{{block}}`), with Go's grammar, variable scoping checks and error messages
//! (`template: NAME:LINE: …`, the line being that of the last item read, as in Go).
//!
//! Nesting is bounded ([`MAX_NESTING`]): Go bounds only parenthesized pipelines (at 10 000, on
//! growable stacks); here every recursion of the parser, of the executor walking the tree and
//! of dropping it is bounded, so no input can overflow the stack.

mod constant;
mod node;

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use crate::lex::{Item, ItemType, lex};

pub(crate) use constant::{new_number, unquote};
pub(crate) use node::*;

/// How deep parenthesized pipelines and control structures (`if`, `with`, `range`, `block`)
/// may nest inside one another in one template. Go allows 10 000 parentheses and unbounded
/// control nesting; real charts nest a handful of levels.
pub const MAX_NESTING: usize = 100;

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
pub(crate) fn parse(name: &str, text: &str, funcs: &dyn FuncNames) -> Result<Vec<Tree>, String> {
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
                Some(
                    Arg::Bool { .. }
                        | Arg::Dot { .. }
                        | Arg::Nil { .. }
                        | Arg::Number(_)
                        | Arg::String { .. }
                )
            ) {
                return self.errorf(format!(
                    "non executable command in pipeline stage {}",
                    i + 1
                ));
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
                Arg::Variable(Variable {
                    pos,
                    ident: v.ident,
                })
            }
            Arg::Bool { .. }
            | Arg::String { .. }
            | Arg::Number(_)
            | Arg::Nil { .. }
            | Arg::Dot { .. } => {
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
    matches!(
        c,
        '\t' | '\n' | '\x0b' | '\x0c' | '\r' | ' ' | '\u{85}' | '\u{a0}'
    ) || c.is_whitespace()
}

#[cfg(test)]
mod tests;
