//! Go's `doPrintf`: walking the format string, flags, width and precision (from the format or
//! from `*` operands), explicit argument indexes `%[n]d`, and the reports for what does not
//! fit (`%!d(MISSING)`, `%!d(BADINDEX)`, `%!(BADWIDTH)`, `%!(NOVERB)`, `%!(EXTRA …)`).

use super::printer::{Flags, Printer};
use crate::Value;

/// Go refuses widths and precisions beyond a million.
const TOO_LARGE: i64 = 1_000_000;

/// Parses decimal digits at `s[start..]`: the number, whether there was one, and the index
/// after it.
fn parse_num(s: &[u8], start: usize) -> (i64, bool, usize) {
    let mut num: i64 = 0;
    let mut is_num = false;
    let mut i = start;
    while i < s.len() && s[i].is_ascii_digit() {
        if !(-TOO_LARGE..=TOO_LARGE).contains(&num) {
            return (0, false, s.len());
        }
        num = num * 10 + i64::from(s[i] - b'0');
        is_num = true;
        i += 1;
    }
    (num, is_num, i)
}

/// An `int` operand for `*`: Go takes any integer kind that fits.
fn int_from_arg(args: &[Value], arg_num: usize) -> (i64, bool, usize) {
    let Some(arg) = args.get(arg_num) else {
        return (0, false, arg_num);
    };
    match arg {
        Value::Int(n) | Value::Int64(n) if (-TOO_LARGE..=TOO_LARGE).contains(n) => {
            (*n, true, arg_num + 1)
        }
        _ => (0, false, arg_num + 1),
    }
}

struct State {
    arg_num: usize,
    reordered: bool,
    good_arg_num: bool,
}

impl State {
    /// `[n]` at `s[i..]`: the (zero-based) argument it names.
    fn arg_number(&mut self, s: &[u8], i: usize, num_args: usize) -> (usize, bool) {
        if s.get(i) != Some(&b'[') {
            return (i, false);
        }
        self.reordered = true;
        let (index, wid, ok) = parse_arg_number(&s[i..]);
        if ok && index >= 0 && (index as usize) < num_args {
            self.arg_num = index as usize;
            return (i + wid, true);
        }
        self.good_arg_num = false;
        (i + wid, ok)
    }
}

/// `[n]`: the index (one-based in the format, returned zero-based), how many bytes it took,
/// and whether it parsed.
fn parse_arg_number(s: &[u8]) -> (i64, usize, bool) {
    if s.len() < 3 {
        return (0, 1, false);
    }
    for i in 1..s.len() {
        if s[i] == b']' {
            let (n, ok, new_i) = parse_num(&s[..i], 1);
            if !ok || new_i != i {
                return (0, i + 1, false);
            }
            return (n - 1, i + 1, true);
        }
    }
    (0, 1, false)
}

impl Printer {
    pub(super) fn do_printf(&mut self, format: &str, args: &[Value]) {
        let s = format.as_bytes();
        let end = s.len();
        let mut st = State {
            arg_num: 0,
            reordered: false,
            good_arg_num: true,
        };
        let mut after_index;
        let mut i = 0;
        'format: while i < end {
            st.good_arg_num = true;
            let last = i;
            while i < end && s[i] != b'%' {
                i += 1;
            }
            if i > last {
                self.buf.extend_from_slice(&s[last..i]);
            }
            if i >= end {
                break;
            }
            i += 1;
            self.f = Flags::default();
            while i < end {
                match s[i] {
                    b'#' => self.f.sharp = true,
                    b'0' => self.f.zero = true,
                    b'+' => self.f.plus = true,
                    b'-' => self.f.minus = true,
                    b' ' => self.f.space = true,
                    c => {
                        // The common case: a plain verb right after the flags.
                        if c.is_ascii_lowercase() && st.arg_num < args.len() {
                            if c == b'v' {
                                self.set_v_flags();
                            }
                            self.print_arg(&args[st.arg_num], c as char);
                            st.arg_num += 1;
                            i += 1;
                            continue 'format;
                        }
                        break;
                    }
                }
                i += 1;
            }

            (i, after_index) = st.arg_number(s, i, args.len());

            if i < end && s[i] == b'*' {
                i += 1;
                let (wid, ok, next) = int_from_arg(args, st.arg_num);
                st.arg_num = next;
                self.f.wid_present = ok;
                if !ok {
                    self.write_str("%!(BADWIDTH)");
                }
                if wid < 0 {
                    self.f.minus = true;
                    self.f.zero = false;
                }
                self.f.wid = wid.unsigned_abs() as usize;
                after_index = false;
            } else {
                let (wid, ok, next) = parse_num(s, i);
                self.f.wid = wid as usize;
                self.f.wid_present = ok;
                i = next;
                if after_index && ok {
                    st.good_arg_num = false;
                }
            }

            if i + 1 < end && s[i] == b'.' {
                i += 1;
                if after_index {
                    st.good_arg_num = false;
                }
                (i, after_index) = st.arg_number(s, i, args.len());
                if i < end && s[i] == b'*' {
                    i += 1;
                    let (prec, ok, next) = int_from_arg(args, st.arg_num);
                    st.arg_num = next;
                    self.f.prec_present = ok && prec >= 0;
                    self.f.prec = if prec < 0 { 0 } else { prec as usize };
                    if !self.f.prec_present {
                        self.write_str("%!(BADPREC)");
                    }
                    after_index = false;
                } else {
                    let (prec, ok, next) = parse_num(s, i);
                    i = next;
                    self.f.prec = if ok { prec as usize } else { 0 };
                    self.f.prec_present = true;
                }
            }

            if !after_index {
                (i, after_index) = st.arg_number(s, i, args.len());
            }
            let _ = after_index;

            if i >= end {
                self.write_str("%!(NOVERB)");
                break;
            }

            let verb = format[i..].chars().next().unwrap_or('\u{FFFD}');
            i += verb.len_utf8();

            if verb == '%' {
                self.write_str("%");
            } else if !st.good_arg_num {
                self.write_str("%!");
                self.write_verb(verb);
                self.write_str("(BADINDEX)");
            } else if st.arg_num >= args.len() {
                self.write_str("%!");
                self.write_verb(verb);
                self.write_str("(MISSING)");
            } else {
                if verb == 'v' {
                    self.set_v_flags();
                }
                self.print_arg(&args[st.arg_num], verb);
                st.arg_num += 1;
            }
        }

        if !st.reordered && st.arg_num < args.len() {
            self.f = Flags::default();
            self.write_str("%!(EXTRA ");
            for (n, arg) in args[st.arg_num..].iter().enumerate() {
                if n > 0 {
                    self.write_str(", ");
                }
                if let Value::Nil = arg {
                    self.write_str("<nil>");
                } else {
                    self.write_str(&arg.type_name());
                    self.write_str("=");
                    self.print_arg(arg, 'v');
                }
            }
            self.write_str(")");
        }
    }

    /// `%+v` and `%#v` are formats of their own: the flags move aside.
    fn set_v_flags(&mut self) {
        self.f.sharp_v = self.f.sharp;
        self.f.sharp = false;
        self.f.plus_v = self.f.plus;
        self.f.plus = false;
    }

    fn write_verb(&mut self, verb: char) {
        let mut b = [0; 4];
        self.write_str(verb.encode_utf8(&mut b));
    }
}
