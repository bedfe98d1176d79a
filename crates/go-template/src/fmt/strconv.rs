//! The parts of Go's `strconv` that `fmt` prints through: `FormatFloat` (every verb, shortest
//! and fixed precision), `Quote` / `QuoteToASCII` / `QuoteRune`, `CanBackquote`, `IsPrint`.
//!
//! Digits come from Rust's float formatting, which like Go's is exact: shortest digits that
//! read back to the same float, or the exact decimal value rounded half to even at the
//! requested precision. The layout around them (exponent form, `%g`'s switch between `%e`
//! and `%f`, hexadecimal and binary forms) is Go's.

use std::fmt::Write as _;

const MANT_BITS: u32 = 52;

/// A float64's exact decimal value has at most 767 significant digits and 1074 digits after
/// the point: past this precision every further digit is a zero, appended without asking
/// Rust's formatter (which refuses precisions past `u16::MAX`; Go allows a million).
const EXACT_DIGITS: usize = 1100;
const EXP_BITS: u32 = 11;
const BIAS: i32 = -1023;

/// Decimal digits of a finite, non-negative float: `0.d1d2d3… × 10^dp`; no digits for zero.
struct Digits {
    d: Vec<u8>,
    dp: i32,
}

impl Digits {
    /// Parses Rust's `{:e}` output (`d.ddde±x`), trailing zeros dropped.
    fn from_exp(s: &str) -> Digits {
        let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let mut d: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
        while d.last() == Some(&b'0') {
            d.pop();
        }
        if d.is_empty() {
            return Digits { d, dp: 0 };
        }
        Digits { d, dp: exp + 1 }
    }

    fn nd(&self) -> i32 {
        self.d.len() as i32
    }
}

/// The fewest digits that read back as `abs` (positive, finite) and, among those, the
/// closest to it: Rust finds how many digits that takes; when two candidates of that length
/// are equally close (`135983174992880.625` between `…62` and `…63`), Go takes the even one,
/// which is what exact rounding to that many digits gives.
fn shortest_digits(abs: f64) -> Digits {
    let shortest = format!("{abs:e}");
    let n = shortest
        .split_once('e')
        .map_or(shortest.as_str(), |(m, _)| m)
        .bytes()
        .filter(u8::is_ascii_digit)
        .count();
    let rounded = format!("{abs:.*e}", n.saturating_sub(1));
    if rounded.parse::<f64>() == Ok(abs) {
        Digits::from_exp(&rounded)
    } else {
        Digits::from_exp(&shortest)
    }
}

/// `strconv.FormatFloat(v, fmt, prec, 64)`.
pub(super) fn format_float(v: f64, fmt: u8, prec: i32) -> String {
    let bits = v.to_bits();
    let neg = bits >> 63 != 0;
    let mut exp = ((bits >> MANT_BITS) & ((1 << EXP_BITS) - 1)) as i32;
    let mut mant = bits & ((1u64 << MANT_BITS) - 1);
    if exp == (1 << EXP_BITS) - 1 {
        return if mant != 0 {
            "NaN".into()
        } else if neg {
            "-Inf".into()
        } else {
            "+Inf".into()
        };
    }
    if exp == 0 {
        exp += 1;
    } else {
        mant |= 1 << MANT_BITS;
    }
    exp += BIAS;
    match fmt {
        b'b' => {
            let sign = if neg { "-" } else { "" };
            let esign = if exp - MANT_BITS as i32 >= 0 { "+" } else { "" };
            return format!("{sign}{mant}p{esign}{}", exp - MANT_BITS as i32);
        }
        b'x' | b'X' => return format_hex(prec, fmt, neg, mant, exp),
        _ => {}
    }
    let abs = v.abs();
    if prec < 0 {
        let digits = if mant == 0 {
            Digits {
                d: Vec::new(),
                dp: 0,
            }
        } else {
            shortest_digits(abs)
        };
        let (nd, dp) = (digits.nd(), digits.dp);
        let prec = match fmt {
            b'e' | b'E' => (nd - 1).max(0),
            b'f' => (nd - dp).max(0),
            b'g' | b'G' => nd,
            _ => prec,
        };
        return format_digits(neg, &digits, prec, fmt, true);
    }
    match fmt {
        b'f' => {
            let mut s = String::new();
            if neg {
                s.push('-');
            }
            let prec = prec as usize;
            let _ = write!(s, "{abs:.*}", prec.min(EXACT_DIGITS));
            s.extend(std::iter::repeat_n('0', prec.saturating_sub(EXACT_DIGITS)));
            s
        }
        b'e' | b'E' => {
            let digits = if mant == 0 {
                Digits {
                    d: Vec::new(),
                    dp: 0,
                }
            } else {
                Digits::from_exp(&format!("{abs:.*e}", (prec as usize).min(EXACT_DIGITS)))
            };
            format_digits(neg, &digits, prec, fmt, false)
        }
        b'g' | b'G' => {
            let prec = prec.max(1);
            let digits = if mant == 0 {
                Digits {
                    d: Vec::new(),
                    dp: 0,
                }
            } else {
                Digits::from_exp(&format!(
                    "{abs:.*e}",
                    ((prec - 1) as usize).min(EXACT_DIGITS)
                ))
            };
            format_digits(neg, &digits, prec, fmt, false)
        }
        _ => format!("%{}", fmt as char),
    }
}

/// The `%e` / `%f` / `%g` layout of decimal digits, as Go lays them out.
fn format_digits(neg: bool, digits: &Digits, mut prec: i32, mut fmt: u8, shortest: bool) -> String {
    let (s, nd, dp) = (&digits.d, digits.nd(), digits.dp);
    if fmt == b'g' || fmt == b'G' {
        let mut eprec = prec;
        if eprec > nd && nd >= dp {
            eprec = nd;
        }
        if shortest {
            eprec = 6;
        }
        let exp = dp - 1;
        if exp < -4 || exp >= eprec {
            if prec > nd {
                prec = nd;
            }
            prec -= 1;
            fmt = fmt + b'e' - b'g';
        } else {
            if prec > dp {
                prec = nd;
            }
            prec = (prec - dp).max(0);
            fmt = b'f';
        }
    }
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let digit = |i: i32| -> char {
        if i >= 0 && i < nd {
            s[i as usize] as char
        } else {
            '0'
        }
    };
    match fmt {
        b'e' | b'E' => {
            out.push(digit(0));
            if prec > 0 {
                out.push('.');
                for i in 1..=prec {
                    out.push(digit(i));
                }
            }
            out.push(fmt as char);
            let mut exp = if nd == 0 { 0 } else { dp - 1 };
            if exp < 0 {
                out.push('-');
                exp = -exp;
            } else {
                out.push('+');
            }
            if exp < 10 {
                out.push('0');
            }
            let _ = write!(out, "{exp}");
        }
        _ => {
            if dp > 0 {
                for i in 0..dp {
                    out.push(digit(i));
                }
            } else {
                out.push('0');
            }
            if prec > 0 {
                out.push('.');
                for i in 0..prec {
                    out.push(digit(dp + i));
                }
            }
        }
    }
    out
}

/// Go's `%x` of a float: `0x1.8p+01`.
fn format_hex(prec: i32, fmt: u8, neg: bool, mut mant: u64, mut exp: i32) -> String {
    if mant == 0 {
        exp = 0;
    }
    mant <<= 60 - MANT_BITS;
    while mant != 0 && mant & (1 << 60) == 0 {
        mant <<= 1;
        exp -= 1;
    }
    if (0..15).contains(&prec) {
        let shift = prec as u32 * 4;
        let extra = (mant << shift) & ((1u64 << 60) - 1);
        mant >>= 60 - shift;
        if extra | (mant & 1) > 1 << 59 {
            mant += 1;
        }
        mant <<= 60 - shift;
        if mant & (1 << 61) != 0 {
            mant >>= 1;
            exp += 1;
        }
    }
    let hex: &[u8; 16] = if fmt == b'X' {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    out.push('0');
    out.push(fmt as char);
    out.push((b'0' + ((mant >> 60) & 1) as u8) as char);
    mant <<= 4;
    if prec < 0 && mant != 0 {
        out.push('.');
        while mant != 0 {
            out.push(hex[((mant >> 60) & 15) as usize] as char);
            mant <<= 4;
        }
    } else if prec > 0 {
        out.push('.');
        for _ in 0..prec {
            out.push(hex[((mant >> 60) & 15) as usize] as char);
            mant <<= 4;
        }
    }
    out.push(if fmt == b'X' { 'P' } else { 'p' });
    if exp < 0 {
        out.push('-');
        exp = -exp;
    } else {
        out.push('+');
    }
    let _ = write!(out, "{exp:02}");
    out
}

/// `strconv.IsPrint` (the same set as `unicode.IsPrint`): letters, marks, numbers,
/// punctuation, symbols and the ASCII space, by Unicode 15.0.0 as Go 1.23 knows it.
pub(crate) fn is_print(c: char) -> bool {
    let r = c as u32;
    super::isprint::PRINT_RANGES
        .binary_search_by(|(lo, hi)| {
            if *hi < r {
                std::cmp::Ordering::Less
            } else if *lo > r {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// One UTF-8 sequence of `s`: the character and its length, or `None` and 1 for a byte that
/// does not start a valid sequence (Go's `RuneError` of width 1).
fn decode(s: &[u8]) -> (Option<char>, usize) {
    let n = match s.first() {
        Some(b) if *b < 0x80 => 1,
        Some(b) if *b >= 0xF0 => 4,
        Some(b) if *b >= 0xE0 => 3,
        Some(b) if *b >= 0xC0 => 2,
        _ => return (None, 1),
    };
    match s.get(..n).and_then(|b| std::str::from_utf8(b).ok()) {
        Some(t) => (t.chars().next(), n),
        None => (None, 1),
    }
}

fn push_escaped(out: &mut String, c: char, quote: char, ascii_only: bool) {
    if c == quote || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if ascii_only {
        if c.is_ascii() && is_print(c) {
            out.push(c);
            return;
        }
    } else if is_print(c) {
        out.push(c);
        return;
    }
    let r = c as u32;
    match c {
        '\x07' => out.push_str("\\a"),
        '\x08' => out.push_str("\\b"),
        '\x0c' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\x0b' => out.push_str("\\v"),
        _ if r < 0x20 || r == 0x7F => {
            let _ = write!(out, "\\x{r:02x}");
        }
        _ if r < 0x10000 => {
            let _ = write!(out, "\\u{r:04x}");
        }
        _ => {
            let _ = write!(out, "\\U{r:08x}");
        }
    }
}

/// `strconv.Quote` (or `QuoteToASCII` when `ascii_only`) of a Go string's bytes.
pub(crate) fn quote(s: &[u8], ascii_only: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut i = 0;
    while i < s.len() {
        let (c, w) = decode(&s[i..]);
        match c {
            Some(c) => push_escaped(&mut out, c, '"', ascii_only),
            None => {
                let _ = write!(out, "\\x{:02x}", s[i]);
            }
        }
        i += w;
    }
    out.push('"');
    out
}

/// `strconv.QuoteRune` (or `QuoteRuneToASCII`): a code point that is not a valid character
/// is quoted as U+FFFD.
pub(super) fn quote_rune(r: u64, ascii_only: bool) -> String {
    let c = u32::try_from(r)
        .ok()
        .and_then(char::from_u32)
        .unwrap_or('\u{FFFD}');
    let mut out = String::from("'");
    push_escaped(&mut out, c, '\'', ascii_only);
    out.push('\'');
    out
}

/// `strconv.CanBackquote`: no control characters but tab, no backquote, no DEL, no BOM, valid
/// UTF-8.
pub(super) fn can_backquote(s: &[u8]) -> bool {
    let mut i = 0;
    while i < s.len() {
        let (c, w) = decode(&s[i..]);
        i += w;
        match c {
            None => return false,
            Some('\u{FEFF}') => return false,
            Some(c) if w == 1 && ((c < ' ' && c != '\t') || c == '`' || c == '\x7F') => {
                return false;
            }
            Some(_) => {}
        }
    }
    true
}
