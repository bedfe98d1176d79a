//! Go's `fmt` printer state (`pp` and `fmt` in Go): flags, width and precision of the verb
//! being printed, and how each kind of value answers each verb.

use super::strconv::{can_backquote, format_float, is_print, quote, quote_rune};
use crate::Value;

/// How deep lists and maps are printed before `...` stands for the rest: far deeper than any
/// chart's values, shallow enough for a map that holds itself (`set $d "self" $d`) to print
/// without exhausting the stack (Go's printer would recurse until the process dies).
const MAX_PRINT_DEPTH: usize = 1000;

const LOWER: &[u8; 17] = b"0123456789abcdefx";
const UPPER: &[u8; 17] = b"0123456789ABCDEFX";

/// Flags, width and precision of one verb.
#[derive(Clone, Copy, Default)]
pub(super) struct Flags {
    pub(super) wid_present: bool,
    pub(super) prec_present: bool,
    pub(super) minus: bool,
    pub(super) plus: bool,
    pub(super) sharp: bool,
    pub(super) space: bool,
    pub(super) zero: bool,
    /// `%+v`: `plus` moved here, since `%+v` is its own format.
    pub(super) plus_v: bool,
    /// `%#v`: Go syntax.
    pub(super) sharp_v: bool,
    pub(super) wid: usize,
    pub(super) prec: usize,
}

/// The output being built and the current verb's flags.
#[derive(Default)]
pub(super) struct Printer {
    /// Bytes, as Go's buffer: `%s` of a `[]byte` writes them raw.
    pub(super) buf: Vec<u8>,
    pub(super) f: Flags,
    /// The Go type `%#v` names the next list or map by (a typed slice or map).
    pub(super) sharp_type: Option<String>,
}

/// How an element inside a list or map shows when Go reaches it through an `interface{}`.
#[derive(Clone, Copy)]
enum Depth {
    Top,
    Inner(usize),
}

impl Depth {
    fn next(self) -> usize {
        match self {
            Depth::Top => 1,
            Depth::Inner(d) => d + 1,
        }
    }
}

impl Printer {
    pub(super) fn into_string(self) -> String {
        match String::from_utf8(self.buf) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }

    pub(super) fn write_str(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    fn write_char(&mut self, c: char) {
        let mut b = [0; 4];
        self.write_str(c.encode_utf8(&mut b));
    }

    fn write_padding(&mut self, n: usize) {
        let pad = if self.f.zero && !self.f.minus {
            b'0'
        } else {
            b' '
        };
        self.buf.extend(std::iter::repeat_n(pad, n));
    }

    /// Writes `b` padded to the width (counted in characters) on the left, or on the right
    /// with `-`.
    fn pad(&mut self, b: &[u8]) {
        if !self.f.wid_present || self.f.wid == 0 {
            self.buf.extend_from_slice(b);
            return;
        }
        let chars = rune_count(b);
        let width = self.f.wid.saturating_sub(chars);
        if self.f.minus {
            self.buf.extend_from_slice(b);
            self.write_padding(width);
        } else {
            self.write_padding(width);
            self.buf.extend_from_slice(b);
        }
    }

    fn pad_str(&mut self, s: &str) {
        self.pad(s.as_bytes());
    }

    /// `%!verb(type=value)`.
    fn bad_verb(&mut self, verb: char, type_name: &str, value: &dyn Fn(&mut Printer)) {
        self.write_str("%!");
        self.write_char(verb);
        self.write_str("(");
        self.write_str(type_name);
        self.write_str("=");
        value(self);
        self.write_str(")");
    }

    fn bad_verb_nil(&mut self, verb: char) {
        self.write_str("%!");
        self.write_char(verb);
        self.write_str("(<nil>)");
    }

    /// Go's `printArg`: one operand of `Sprint`/`Sprintf` with `verb`.
    pub(super) fn print_arg(&mut self, arg: &Value, verb: char) {
        if let Value::Nil = arg {
            match verb {
                'T' | 'v' => self.pad_str("<nil>"),
                _ => self.bad_verb_nil(verb),
            }
            return;
        }
        match verb {
            'T' => {
                self.fmt_s(arg.type_name().as_bytes());
                return;
            }
            'p' => {
                self.fmt_pointer(arg, verb);
                return;
            }
            _ => {}
        }
        self.print_value(arg, verb, Depth::Top);
    }

    fn print_value(&mut self, value: &Value, verb: char, depth: Depth) {
        match value {
            Value::Nil => match depth {
                // Only a nil inside a list or map gets here: an `interface{}` holding nothing.
                Depth::Inner(_) if self.f.sharp_v => self.write_str("interface {}(nil)"),
                Depth::Inner(_) => self.write_str("<nil>"),
                Depth::Top => match verb {
                    'v' => self.pad_str("<nil>"),
                    _ => self.bad_verb_nil(verb),
                },
            },
            Value::Bool(b) => self.fmt_bool(*b, verb),
            Value::Int(i) | Value::Int64(i) => {
                let ty = if let Value::Int(_) = value {
                    "int"
                } else {
                    "int64"
                };
                self.fmt_integer(*i as u64, true, verb, ty);
            }
            Value::Float(x) => self.fmt_float(*x, verb),
            Value::String(s) => self.fmt_string(s.as_bytes(), verb),
            Value::Bytes(b) => {
                let ty = match depth {
                    Depth::Top => "[]byte",
                    Depth::Inner(_) => "[]uint8",
                };
                self.fmt_bytes(b, verb, ty);
            }
            Value::List(items) => {
                if depth.next() > MAX_PRINT_DEPTH {
                    self.write_str("[...]");
                    return;
                }
                if self.f.sharp_v {
                    let ty = self.sharp_type.take();
                    self.write_str(ty.as_deref().unwrap_or("[]interface {}"));
                    self.write_str("{");
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            self.write_str(", ");
                        }
                        self.print_value(item, verb, Depth::Inner(depth.next()));
                    }
                    self.write_str("}");
                } else {
                    self.write_str("[");
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            self.write_str(" ");
                        }
                        self.print_value(item, verb, Depth::Inner(depth.next()));
                    }
                    self.write_str("]");
                }
            }
            Value::Map(m) => {
                if depth.next() > MAX_PRINT_DEPTH {
                    self.write_str("map[...]");
                    return;
                }
                let Ok(m) = m.try_borrow() else {
                    self.write_str("map[...]");
                    return;
                };
                if self.f.sharp_v {
                    let ty = self.sharp_type.take();
                    self.write_str(ty.as_deref().unwrap_or("map[string]interface {}"));
                    self.write_str("{");
                } else {
                    self.write_str("map[");
                }
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        self.write_str(if self.f.sharp_v { ", " } else { " " });
                    }
                    self.fmt_string(k.as_bytes(), verb);
                    self.write_str(":");
                    self.print_value(v, verb, Depth::Inner(depth.next()));
                }
                self.write_str(if self.f.sharp_v { "}" } else { "]" });
            }
            Value::Object(o)
                if matches!(o.kind_name(), "slice" | "map") && o.as_value().is_some() =>
            {
                // A map or slice type (`[]string`, `.Capabilities.APIVersions`): printed as
                // the map or slice it is, under its own type name for `%#v`.
                if let Some(plain) = o.as_value() {
                    self.sharp_type = Some(o.type_name());
                    self.print_value(&plain, verb, depth);
                    self.sharp_type = None;
                }
            }
            Value::Object(o) => {
                // Objects print as their `String()` (or struct form) would: any verb that
                // takes a string gets that text, others report it.
                let text = o.format();
                match verb {
                    'v' | 's' | 'x' | 'X' | 'q' => self.fmt_string(text.as_bytes(), verb),
                    _ => self.bad_verb(verb, &o.type_name(), &|p| p.write_str(&text)),
                }
            }
        }
    }

    fn fmt_pointer(&mut self, arg: &Value, verb: char) {
        // Go prints the address of a map, slice or byte slice; addresses are not something a
        // chart can rely on, and there is none to give here.
        match arg {
            Value::List(_) | Value::Map(_) | Value::Bytes(_) => self.pad_str("0xc000000000"),
            _ => {
                let ty = arg.type_name();
                let saved = self.f;
                self.bad_verb(verb, &ty, &|p| {
                    p.f = saved;
                    p.print_arg(arg, 'v')
                });
            }
        }
    }

    fn fmt_bool(&mut self, b: bool, verb: char) {
        match verb {
            't' | 'v' => self.pad_str(if b { "true" } else { "false" }),
            _ => self.bad_verb(verb, "bool", &|p| {
                p.pad_str(if b { "true" } else { "false" })
            }),
        }
    }

    /// Go's `pp.fmtInteger`: `u` holds the bits of a signed or unsigned integer.
    fn fmt_integer(&mut self, u: u64, signed: bool, verb: char, type_name: &str) {
        match verb {
            'v' if self.f.sharp_v && !signed => self.fmt_0x64(u, true),
            'v' | 'd' => self.fmt_integer_base(u, 10, signed, verb, LOWER),
            'b' => self.fmt_integer_base(u, 2, signed, verb, LOWER),
            'o' | 'O' => self.fmt_integer_base(u, 8, signed, verb, LOWER),
            'x' => self.fmt_integer_base(u, 16, signed, verb, LOWER),
            'X' => self.fmt_integer_base(u, 16, signed, verb, UPPER),
            'c' => {
                let c = u32::try_from(u)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap_or('\u{FFFD}');
                let mut b = [0; 4];
                self.pad(c.encode_utf8(&mut b).as_bytes());
            }
            'q' => {
                let q = quote_rune(u, self.f.plus);
                self.pad_str(&q);
            }
            'U' => self.fmt_unicode(u),
            _ => self.bad_verb(verb, type_name, &|p| {
                p.fmt_integer_base(u, 10, signed, 'v', LOWER)
            }),
        }
    }

    fn fmt_0x64(&mut self, u: u64, leading_0x: bool) {
        let sharp = self.f.sharp;
        self.f.sharp = leading_0x;
        self.fmt_integer_base(u, 16, false, 'v', LOWER);
        self.f.sharp = sharp;
    }

    /// Go's `fmt.fmtInteger`.
    fn fmt_integer_base(
        &mut self,
        mut u: u64,
        base: u64,
        signed: bool,
        verb: char,
        digits: &[u8; 17],
    ) {
        let negative = signed && (u as i64) < 0;
        if negative {
            u = u.wrapping_neg();
        }
        let mut prec = 0usize;
        if self.f.prec_present {
            prec = self.f.prec;
            if prec == 0 && u == 0 {
                let zero = self.f.zero;
                self.f.zero = false;
                self.write_padding(self.f.wid);
                self.f.zero = zero;
                return;
            }
        } else if self.f.zero && !self.f.minus && self.f.wid_present {
            prec = self.f.wid;
            if negative || self.f.plus || self.f.space {
                prec = prec.saturating_sub(1);
            }
        }
        // Built right to left.
        let mut out: Vec<u8> = Vec::with_capacity(24 + prec);
        while u >= base {
            out.push(digits[(u % base) as usize]);
            u /= base;
        }
        out.push(digits[u as usize]);
        while out.len() < prec {
            out.push(b'0');
        }
        if self.f.sharp {
            match base {
                2 => out.extend_from_slice(b"b0"),
                8 if out.last() != Some(&b'0') => out.push(b'0'),
                16 => {
                    out.push(digits[16]);
                    out.push(b'0');
                }
                _ => {}
            }
        }
        if verb == 'O' {
            out.extend_from_slice(b"o0");
        }
        if negative {
            out.push(b'-');
        } else if self.f.plus {
            out.push(b'+');
        } else if self.f.space {
            out.push(b' ');
        }
        out.reverse();
        let zero = self.f.zero;
        self.f.zero = false;
        self.pad(&out);
        self.f.zero = zero;
    }

    /// `%U`: `U+0041`, with `#` also `'A'`.
    fn fmt_unicode(&mut self, u: u64) {
        let prec = if self.f.prec_present && self.f.prec > 4 {
            self.f.prec
        } else {
            4
        };
        let hex = format!("{u:X}");
        let mut s = String::from("U+");
        s.extend(std::iter::repeat_n('0', prec.saturating_sub(hex.len())));
        s.push_str(&hex);
        let printable = u32::try_from(u)
            .ok()
            .and_then(char::from_u32)
            .filter(|c| is_print(*c));
        if let (true, Some(c)) = (self.f.sharp, printable) {
            s.push_str(" '");
            s.push(c);
            s.push('\'');
        }
        let zero = self.f.zero;
        self.f.zero = false;
        self.pad_str(&s);
        self.f.zero = zero;
    }

    fn fmt_float(&mut self, v: f64, verb: char) {
        match verb {
            'v' => self.fmt_float_as(v, b'g', -1),
            'b' | 'g' | 'G' | 'x' | 'X' => self.fmt_float_as(v, verb as u8, -1),
            'f' | 'e' | 'E' => self.fmt_float_as(v, verb as u8, 6),
            'F' => self.fmt_float_as(v, b'f', 6),
            _ => self.bad_verb(verb, "float64", &|p| p.fmt_float_as(v, b'g', -1)),
        }
    }

    /// Go's `fmt.fmtFloat`.
    fn fmt_float_as(&mut self, v: f64, verb: u8, prec: i32) {
        let prec = if self.f.prec_present {
            i32::try_from(self.f.prec).unwrap_or(i32::MAX)
        } else {
            prec
        };
        let formatted = format_float(v, verb, prec);
        // num[0] is the sign, always present.
        let mut num: Vec<u8> = match formatted.as_bytes().first() {
            Some(b'-') | Some(b'+') => formatted.into_bytes(),
            _ => {
                let mut n = vec![b'+'];
                n.extend_from_slice(formatted.as_bytes());
                n
            }
        };
        if self.f.space && num[0] == b'+' && !self.f.plus {
            num[0] = b' ';
        }
        if num.get(1) == Some(&b'I') || num.get(1) == Some(&b'N') {
            let zero = self.f.zero;
            self.f.zero = false;
            if num[1] == b'N' && !self.f.space && !self.f.plus {
                num.remove(0);
            }
            self.pad(&num);
            self.f.zero = zero;
            return;
        }
        if self.f.sharp && verb != b'b' {
            let mut digits: i64 = match verb {
                b'v' | b'g' | b'G' | b'x' => {
                    if prec == -1 {
                        6
                    } else {
                        i64::from(prec)
                    }
                }
                _ => 0,
            };
            let mut tail: Vec<u8> = Vec::new();
            let mut has_point = false;
            let mut saw_nonzero = false;
            let mut i = 1;
            while i < num.len() {
                match num[i] {
                    b'.' => has_point = true,
                    b'p' | b'P' => {
                        tail = num.split_off(i);
                        break;
                    }
                    b'e' | b'E' if verb != b'x' && verb != b'X' => {
                        tail = num.split_off(i);
                        break;
                    }
                    c => {
                        if c != b'0' {
                            saw_nonzero = true;
                        }
                        if saw_nonzero {
                            digits -= 1;
                        }
                    }
                }
                i += 1;
            }
            if !has_point {
                if num.len() == 2 && num[1] == b'0' {
                    digits -= 1;
                }
                num.push(b'.');
            }
            while digits > 0 {
                num.push(b'0');
                digits -= 1;
            }
            num.extend_from_slice(&tail);
        }
        if self.f.plus || num[0] != b'+' {
            if self.f.zero && !self.f.minus && self.f.wid_present && self.f.wid > num.len() {
                self.buf.push(num[0]);
                self.write_padding(self.f.wid - num.len());
                self.buf.extend_from_slice(&num[1..]);
                return;
            }
            self.pad(&num);
            return;
        }
        self.pad(&num[1..]);
    }

    fn fmt_string(&mut self, s: &[u8], verb: char) {
        match verb {
            'v' if self.f.sharp_v => self.fmt_q(s),
            'v' | 's' => self.fmt_s(s),
            'x' => self.fmt_sbx(s, LOWER),
            'X' => self.fmt_sbx(s, UPPER),
            'q' => self.fmt_q(s),
            _ => self.bad_verb(verb, "string", &|p| p.fmt_s(s)),
        }
    }

    fn fmt_bytes(&mut self, b: &[u8], verb: char, type_string: &str) {
        match verb {
            'v' | 'd' => {
                if self.f.sharp_v {
                    self.write_str(type_string);
                    self.write_str("{");
                    for (i, c) in b.iter().enumerate() {
                        if i > 0 {
                            self.write_str(", ");
                        }
                        self.fmt_0x64(u64::from(*c), true);
                    }
                    self.write_str("}");
                } else {
                    self.write_str("[");
                    for (i, c) in b.iter().enumerate() {
                        if i > 0 {
                            self.write_str(" ");
                        }
                        self.fmt_integer_base(u64::from(*c), 10, false, verb, LOWER);
                    }
                    self.write_str("]");
                }
            }
            's' => self.fmt_s(b),
            'x' => self.fmt_sbx(b, LOWER),
            'X' => self.fmt_sbx(b, UPPER),
            'q' => self.fmt_q(b),
            _ => {
                // Any other verb goes to each byte, as to the elements of any slice.
                if self.f.sharp_v {
                    self.write_str("[]uint8{");
                } else {
                    self.write_str("[");
                }
                for (i, c) in b.iter().enumerate() {
                    if i > 0 {
                        self.write_str(if self.f.sharp_v { ", " } else { " " });
                    }
                    self.fmt_integer(u64::from(*c), false, verb, "uint8");
                }
                self.write_str(if self.f.sharp_v { "}" } else { "]" });
            }
        }
    }

    /// Cuts `s` to the precision, counted in characters.
    fn truncate<'a>(&self, s: &'a [u8]) -> &'a [u8] {
        if !self.f.prec_present {
            return s;
        }
        let mut n = self.f.prec;
        let mut i = 0;
        while i < s.len() {
            if n == 0 {
                return &s[..i];
            }
            n -= 1;
            i += utf8_len(&s[i..]);
        }
        s
    }

    fn fmt_s(&mut self, s: &[u8]) {
        let s = self.truncate(s);
        self.pad(s);
    }

    fn fmt_q(&mut self, s: &[u8]) {
        let s = self.truncate(s);
        if self.f.sharp && can_backquote(s) {
            let mut q = Vec::with_capacity(s.len() + 2);
            q.push(b'`');
            q.extend_from_slice(s);
            q.push(b'`');
            self.pad(&q);
            return;
        }
        let q = quote(s, self.f.plus);
        self.pad_str(&q);
    }

    /// `%x` of a string or bytes: two hex digits a byte; ` ` separates them, `#` adds `0x`.
    fn fmt_sbx(&mut self, s: &[u8], digits: &[u8; 17]) {
        let mut length = s.len();
        if self.f.prec_present && self.f.prec < length {
            length = self.f.prec;
        }
        let mut width = 2 * length;
        if width > 0 {
            if self.f.space {
                if self.f.sharp {
                    width *= 2;
                }
                width += length - 1;
            } else if self.f.sharp {
                width += 2;
            }
        } else {
            if self.f.wid_present {
                self.write_padding(self.f.wid);
            }
            return;
        }
        if self.f.wid_present && self.f.wid > width && !self.f.minus {
            self.write_padding(self.f.wid - width);
        }
        if self.f.sharp {
            self.buf.push(b'0');
            self.buf.push(digits[16]);
        }
        for (i, c) in s[..length].iter().enumerate() {
            if self.f.space && i > 0 {
                self.buf.push(b' ');
                if self.f.sharp {
                    self.buf.push(b'0');
                    self.buf.push(digits[16]);
                }
            }
            self.buf.push(digits[(c >> 4) as usize]);
            self.buf.push(digits[(c & 0xF) as usize]);
        }
        if self.f.wid_present && self.f.wid > width && self.f.minus {
            self.write_padding(self.f.wid - width);
        }
    }
}

/// Go's `utf8.RuneCount`: a byte that starts no valid sequence counts as one.
fn rune_count(mut s: &[u8]) -> usize {
    let mut n = 0;
    while !s.is_empty() {
        s = &s[utf8_len(s)..];
        n += 1;
    }
    n
}

/// Length of the UTF-8 sequence at the start of `s` (1 for a byte that starts none).
fn utf8_len(s: &[u8]) -> usize {
    let n = match s.first() {
        Some(b) if *b >= 0xF0 => 4,
        Some(b) if *b >= 0xE0 => 3,
        Some(b) if *b >= 0xC0 => 2,
        _ => 1,
    };
    match s.get(..n).map(std::str::from_utf8) {
        Some(Ok(_)) => n,
        _ => 1,
    }
}
