//! The lexer: template text into items, with Go's rules for delimiters, trim markers
//! (`{{- ` / ` -}}`, the space is required), comments, quoted strings, numbers and keywords.
//!
//! The whole input is lexed up front; lexing stops at the first error, which becomes the
//! last item (the parser meets it exactly where Go's lazy lexer would have produced it).
//! Positions are byte offsets into the text; lines count from 1.

/// What an item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ItemType {
    Error,
    Bool,
    Char,
    CharConstant,
    Comment,
    Complex,
    Assign,
    Declare,
    Eof,
    Field,
    Identifier,
    LeftDelim,
    LeftParen,
    Number,
    Pipe,
    RawString,
    RightDelim,
    RightParen,
    Space,
    String,
    Text,
    Variable,
    // Keywords (Go orders them after itemKeyword; `is_keyword` tells them apart).
    Block,
    Break,
    Continue,
    Dot,
    Define,
    Else,
    End,
    If,
    Nil,
    Range,
    Template,
    With,
}

impl ItemType {
    fn is_keyword(self) -> bool {
        matches!(
            self,
            ItemType::Block
                | ItemType::Break
                | ItemType::Continue
                | ItemType::Dot
                | ItemType::Define
                | ItemType::Else
                | ItemType::End
                | ItemType::If
                | ItemType::Nil
                | ItemType::Range
                | ItemType::Template
                | ItemType::With
        )
    }
}

/// One lexed item.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub(crate) typ: ItemType,
    pub(crate) pos: usize,
    pub(crate) val: String,
    pub(crate) line: usize,
}

impl Item {
    /// How Go's parser names the item in "unexpected X in Y" messages.
    pub(crate) fn describe(&self) -> String {
        match self.typ {
            ItemType::Eof => "EOF".into(),
            ItemType::Error => self.val.clone(),
            t if t.is_keyword() => format!("<{}>", self.val),
            _ if self.val.chars().count() > 10 => {
                let head: String = self.val.chars().take(10).collect();
                format!("{}...", crate::parse::go_quote(&head))
            }
            _ => crate::parse::go_quote(&self.val),
        }
    }
}

const LEFT_DELIM: &str = "{{";
const RIGHT_DELIM: &str = "}}";
const LEFT_COMMENT: &str = "/*";
const RIGHT_COMMENT: &str = "*/";
const TRIM_MARKER_LEN: usize = 2;

fn keyword(word: &str) -> Option<ItemType> {
    Some(match word {
        "." => ItemType::Dot,
        "block" => ItemType::Block,
        "break" => ItemType::Break,
        "continue" => ItemType::Continue,
        "define" => ItemType::Define,
        "else" => ItemType::Else,
        "end" => ItemType::End,
        "if" => ItemType::If,
        "range" => ItemType::Range,
        "nil" => ItemType::Nil,
        "template" => ItemType::Template,
        "with" => ItemType::With,
        _ => return None,
    })
}

fn is_space(c: Option<char>) -> bool {
    matches!(c, Some(' ' | '\t' | '\r' | '\n'))
}

fn is_space_byte(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's `unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_'` (exact for ASCII; Rust's
/// alphabetic/numeric classes stand in for Go's Unicode tables elsewhere).
pub(crate) fn is_alphanumeric(c: Option<char>) -> bool {
    match c {
        Some(c) => c == '_' || c.is_alphabetic() || c.is_numeric(),
        None => false,
    }
}

fn has_left_trim_marker(s: &[u8]) -> bool {
    s.len() >= 2 && s[0] == b'-' && is_space_byte(s[1])
}

fn has_right_trim_marker(s: &[u8]) -> bool {
    s.len() >= 2 && is_space_byte(s[0]) && s[1] == b'-'
}

#[derive(Clone, Copy)]
enum State {
    Text,
    LeftDelim,
    Comment,
    RightDelim,
    InsideAction,
    Space,
    Identifier,
    Field,
    Variable,
    Char,
    Number,
    Quote,
    RawQuote,
}

struct Lexer<'a> {
    input: &'a str,
    pos: usize,
    start: usize,
    at_eof: bool,
    paren_depth: i64,
    line: usize,
    start_line: usize,
    break_ok: bool,
    continue_ok: bool,
    items: Vec<Item>,
}

/// Lexes `input`. `break_ok`/`continue_ok`: whether `break`/`continue` are keywords (they are
/// plain identifiers when a function of that name exists, as in Go).
pub(crate) fn lex(input: &str, break_ok: bool, continue_ok: bool) -> Vec<Item> {
    let mut l = Lexer {
        input,
        pos: 0,
        start: 0,
        at_eof: false,
        paren_depth: 0,
        line: 1,
        start_line: 1,
        break_ok,
        continue_ok,
        items: Vec::new(),
    };
    let mut state = Some(State::Text);
    while let Some(s) = state {
        state = l.step(s);
    }
    l.items
}

impl Lexer<'_> {
    fn rest(&self) -> &[u8] {
        &self.input.as_bytes()[self.pos.min(self.input.len())..]
    }

    fn next(&mut self) -> Option<char> {
        match self.input[self.pos..].chars().next() {
            None => {
                self.at_eof = true;
                None
            }
            Some(c) => {
                self.pos += c.len_utf8();
                if c == '\n' {
                    self.line += 1;
                }
                Some(c)
            }
        }
    }

    fn peek(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }

    fn backup(&mut self) {
        if self.at_eof || self.pos == 0 {
            return;
        }
        if let Some(c) = self.input[..self.pos].chars().next_back() {
            self.pos -= c.len_utf8();
            if c == '\n' {
                self.line -= 1;
            }
        }
    }

    fn this_item(&mut self, typ: ItemType) -> Item {
        let item = Item {
            typ,
            pos: self.start,
            val: self.input[self.start..self.pos].to_owned(),
            line: self.start_line,
        };
        self.start = self.pos;
        self.start_line = self.line;
        item
    }

    fn emit(&mut self, typ: ItemType) {
        let item = self.this_item(typ);
        self.items.push(item);
    }

    fn ignore(&mut self) {
        self.line += count_newlines(&self.input[self.start..self.pos]);
        self.start = self.pos;
        self.start_line = self.line;
    }

    fn accept(&mut self, valid: &str) -> bool {
        if self.next().is_some_and(|c| valid.contains(c)) {
            return true;
        }
        self.backup();
        false
    }

    fn accept_run(&mut self, valid: &str) {
        while let Some(c) = self.next() {
            if !valid.contains(c) {
                break;
            }
        }
        self.backup();
    }

    fn error(&mut self, msg: String) -> Option<State> {
        self.items.push(Item {
            typ: ItemType::Error,
            pos: self.start,
            val: msg,
            line: self.start_line,
        });
        None
    }

    fn at_right_delim(&self) -> (bool, bool) {
        let rest = self.rest();
        if has_right_trim_marker(rest)
            && rest[TRIM_MARKER_LEN..].starts_with(RIGHT_DELIM.as_bytes())
        {
            return (true, true);
        }
        if rest.starts_with(RIGHT_DELIM.as_bytes()) {
            return (true, false);
        }
        (false, false)
    }

    fn at_terminator(&self) -> bool {
        let r = self.peek();
        if is_space(r) {
            return true;
        }
        match r {
            None | Some('.' | ',' | '|' | ':' | ')' | '(') => true,
            _ => self.rest().starts_with(RIGHT_DELIM.as_bytes()),
        }
    }

    fn step(&mut self, state: State) -> Option<State> {
        match state {
            State::Text => self.lex_text(),
            State::LeftDelim => self.lex_left_delim(),
            State::Comment => self.lex_comment(),
            State::RightDelim => self.lex_right_delim(),
            State::InsideAction => self.lex_inside_action(),
            State::Space => self.lex_space(),
            State::Identifier => self.lex_identifier(),
            State::Field => self.lex_field_or_variable(ItemType::Field),
            State::Variable => {
                if self.at_terminator() {
                    self.emit(ItemType::Variable);
                    Some(State::InsideAction)
                } else {
                    self.lex_field_or_variable(ItemType::Variable)
                }
            }
            State::Char => self.lex_quoted('\'', ItemType::CharConstant, "character constant"),
            State::Number => self.lex_number(),
            State::Quote => self.lex_quoted('"', ItemType::String, "quoted string"),
            State::RawQuote => self.lex_raw_quote(),
        }
    }

    fn lex_text(&mut self) -> Option<State> {
        if let Some(x) = self.input[self.pos..].find(LEFT_DELIM) {
            if x > 0 {
                self.pos += x;
                let mut trim = 0;
                let delim_end = self.pos + LEFT_DELIM.len();
                if has_left_trim_marker(&self.input.as_bytes()[delim_end..]) {
                    let text = &self.input[self.start..self.pos];
                    trim = text.len() - text.trim_end_matches([' ', '\t', '\r', '\n']).len();
                }
                self.pos -= trim;
                self.line += count_newlines(&self.input[self.start..self.pos]);
                let item = self.this_item(ItemType::Text);
                self.pos += trim;
                self.ignore();
                if !item.val.is_empty() {
                    self.items.push(item);
                }
            }
            return Some(State::LeftDelim);
        }
        self.pos = self.input.len();
        if self.pos > self.start {
            self.line += count_newlines(&self.input[self.start..self.pos]);
            self.emit(ItemType::Text);
        }
        self.emit(ItemType::Eof);
        None
    }

    fn lex_left_delim(&mut self) -> Option<State> {
        self.pos += LEFT_DELIM.len();
        let trim = has_left_trim_marker(self.rest());
        let after_marker = if trim { TRIM_MARKER_LEN } else { 0 };
        if self.rest()[after_marker.min(self.rest().len())..].starts_with(LEFT_COMMENT.as_bytes()) {
            self.pos += after_marker;
            self.ignore();
            return Some(State::Comment);
        }
        let item = self.this_item(ItemType::LeftDelim);
        self.pos += after_marker;
        self.ignore();
        self.paren_depth = 0;
        self.items.push(item);
        Some(State::InsideAction)
    }

    fn lex_comment(&mut self) -> Option<State> {
        self.pos += LEFT_COMMENT.len();
        let Some(x) = self.input[self.pos..].find(RIGHT_COMMENT) else {
            return self.error("unclosed comment".into());
        };
        self.pos += x + RIGHT_COMMENT.len();
        let (delim, trim) = self.at_right_delim();
        if !delim {
            return self.error("comment ends before closing delimiter".into());
        }
        // Comments are not emitted (Go's default mode), only their text is skipped.
        let _ = self.this_item(ItemType::Comment);
        if trim {
            self.pos += TRIM_MARKER_LEN;
        }
        self.pos += RIGHT_DELIM.len();
        if trim {
            self.pos += left_trim_length(&self.input[self.pos..]);
        }
        self.ignore();
        Some(State::Text)
    }

    fn lex_right_delim(&mut self) -> Option<State> {
        let (_, trim) = self.at_right_delim();
        if trim {
            self.pos += TRIM_MARKER_LEN;
            self.ignore();
        }
        self.pos += RIGHT_DELIM.len();
        let item = self.this_item(ItemType::RightDelim);
        if trim {
            self.pos += left_trim_length(&self.input[self.pos..]);
            self.ignore();
        }
        self.items.push(item);
        Some(State::Text)
    }

    fn lex_inside_action(&mut self) -> Option<State> {
        let (delim, _) = self.at_right_delim();
        if delim {
            if self.paren_depth == 0 {
                return Some(State::RightDelim);
            }
            return self.error("unclosed left paren".into());
        }
        let r = self.next();
        match r {
            None => return self.error("unclosed action".into()),
            Some(' ' | '\t' | '\r' | '\n') => {
                self.backup();
                return Some(State::Space);
            }
            Some('=') => self.emit(ItemType::Assign),
            Some(':') => {
                if self.next() != Some('=') {
                    return self.error("expected :=".into());
                }
                self.emit(ItemType::Declare);
            }
            Some('|') => self.emit(ItemType::Pipe),
            Some('"') => return Some(State::Quote),
            Some('`') => return Some(State::RawQuote),
            Some('$') => return Some(State::Variable),
            Some('\'') => return Some(State::Char),
            Some('.') => {
                match self.rest().first() {
                    Some(b) if b.is_ascii_digit() => {
                        self.backup();
                        return Some(State::Number);
                    }
                    Some(_) => return Some(State::Field),
                    // "." at the very end of the input: a number attempt, as in Go.
                    None => {
                        self.backup();
                        return Some(State::Number);
                    }
                }
            }
            Some(c @ ('+' | '-' | '0'..='9')) => {
                let _ = c;
                self.backup();
                return Some(State::Number);
            }
            Some(c) if is_alphanumeric(Some(c)) => {
                self.backup();
                return Some(State::Identifier);
            }
            Some('(') => {
                self.emit(ItemType::LeftParen);
                self.paren_depth += 1;
            }
            Some(')') => {
                self.paren_depth -= 1;
                if self.paren_depth < 0 {
                    return self.error("unexpected right paren".into());
                }
                self.emit(ItemType::RightParen);
            }
            Some(c) if c.is_ascii() && !c.is_ascii_control() => self.emit(ItemType::Char),
            Some(c) => {
                return self.error(format!(
                    "unrecognized character in action: {}",
                    go_unicode_repr(c)
                ));
            }
        }
        Some(State::InsideAction)
    }

    fn lex_space(&mut self) -> Option<State> {
        let mut n = 0;
        while is_space(self.peek()) {
            self.next();
            n += 1;
        }
        let from = self.pos - 1;
        if has_right_trim_marker(&self.input.as_bytes()[from..])
            && self.input.as_bytes()[from + TRIM_MARKER_LEN..].starts_with(RIGHT_DELIM.as_bytes())
        {
            self.backup();
            if n == 1 {
                return Some(State::InsideAction);
            }
        }
        self.emit(ItemType::Space);
        Some(State::InsideAction)
    }

    fn lex_identifier(&mut self) -> Option<State> {
        loop {
            let r = self.next();
            if is_alphanumeric(r) {
                continue;
            }
            self.backup();
            if !self.at_terminator() {
                return self.error(format!("bad character {}", go_unicode_repr_opt(r)));
            }
            let word = &self.input[self.start..self.pos];
            let typ = match keyword(word) {
                Some(ItemType::Break) if !self.break_ok => ItemType::Identifier,
                Some(ItemType::Continue) if !self.continue_ok => ItemType::Identifier,
                Some(k) => k,
                None if word.starts_with('.') => ItemType::Field,
                None if word == "true" || word == "false" => ItemType::Bool,
                None => ItemType::Identifier,
            };
            self.emit(typ);
            return Some(State::InsideAction);
        }
    }

    fn lex_field_or_variable(&mut self, typ: ItemType) -> Option<State> {
        if self.at_terminator() {
            self.emit(if typ == ItemType::Variable {
                ItemType::Variable
            } else {
                ItemType::Dot
            });
            return Some(State::InsideAction);
        }
        let mut r;
        loop {
            r = self.next();
            if !is_alphanumeric(r) {
                self.backup();
                break;
            }
        }
        if !self.at_terminator() {
            return self.error(format!("bad character {}", go_unicode_repr_opt(r)));
        }
        self.emit(typ);
        Some(State::InsideAction)
    }

    fn lex_quoted(&mut self, quote: char, typ: ItemType, what: &str) -> Option<State> {
        loop {
            match self.next() {
                Some('\\') => {
                    let r = self.next();
                    if r.is_some() && r != Some('\n') {
                        continue;
                    }
                    return self.error(format!("unterminated {what}"));
                }
                None | Some('\n') => return self.error(format!("unterminated {what}")),
                Some(c) if c == quote => break,
                Some(_) => {}
            }
        }
        self.emit(typ);
        Some(State::InsideAction)
    }

    fn lex_raw_quote(&mut self) -> Option<State> {
        loop {
            match self.next() {
                None => return self.error("unterminated raw quoted string".into()),
                Some('`') => break,
                Some(_) => {}
            }
        }
        self.emit(ItemType::RawString);
        Some(State::InsideAction)
    }

    fn lex_number(&mut self) -> Option<State> {
        if !self.scan_number() {
            let text = self.input[self.start..self.pos].to_owned();
            return self.error(format!(
                "bad number syntax: {}",
                crate::parse::go_quote(&text)
            ));
        }
        if matches!(self.peek(), Some('+' | '-')) {
            if !self.scan_number() || !self.input[..self.pos].ends_with('i') {
                let text = self.input[self.start..self.pos].to_owned();
                return self.error(format!(
                    "bad number syntax: {}",
                    crate::parse::go_quote(&text)
                ));
            }
            self.emit(ItemType::Complex);
            return Some(State::InsideAction);
        }
        self.emit(ItemType::Number);
        Some(State::InsideAction)
    }

    fn scan_number(&mut self) -> bool {
        self.accept("+-");
        let mut digits = "0123456789_";
        if self.accept("0") {
            if self.accept("xX") {
                digits = "0123456789abcdefABCDEF_";
            } else if self.accept("oO") {
                digits = "01234567_";
            } else if self.accept("bB") {
                digits = "01_";
            }
        }
        self.accept_run(digits);
        if self.accept(".") {
            self.accept_run(digits);
        }
        if digits.len() == 10 + 1 && self.accept("eE") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        if digits.len() == 16 + 6 + 1 && self.accept("pP") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        self.accept("i");
        if is_alphanumeric(self.peek()) {
            self.next();
            return false;
        }
        true
    }
}

fn left_trim_length(s: &str) -> usize {
    s.len() - s.trim_start_matches([' ', '\t', '\r', '\n']).len()
}

pub(crate) fn count_newlines(s: &str) -> usize {
    s.bytes().filter(|&b| b == b'\n').count()
}

/// Go's `%#U`: `U+0041 'A'`, without the quoted glyph for unprintable runes.
fn go_unicode_repr(c: char) -> String {
    if c.is_control() {
        format!("U+{:04X}", c as u32)
    } else {
        format!("U+{:04X} '{c}'", c as u32)
    }
}

fn go_unicode_repr_opt(c: Option<char>) -> String {
    match c {
        Some(c) => go_unicode_repr(c),
        // Go's eof rune is -1, printed by %#U as U+FFFFFFFFFFFFFFFF.
        None => "U+FFFFFFFFFFFFFFFF".into(),
    }
}

#[cfg(test)]
mod tests;
