//! How goyaml.v2 reads an untagged plain scalar (YAML 1.1 as it implements it): `yes`/`on`
//! are booleans, `0777` is octal, `1_000` is an integer, `.inf` a float, dates stay strings.
//! The decoder uses it for values, the emitter to decide whether a string needs quotes.

/// What a plain scalar means.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    /// An integer too large for 64 bits (kept as its text).
    BigInt(String),
    Float(f64),
    /// A timestamp: goyaml.v2 hands it to `interface{}` as its original string, but the
    /// emitter quotes a string that looks like one.
    Timestamp,
    Str,
}

pub(crate) fn resolve(s: &str) -> Resolved {
    let Some(&first) = s.as_bytes().first() else {
        return Resolved::Null;
    };
    let hint = match first {
        b'+' | b'-' => 'S',
        b'0'..=b'9' => 'D',
        b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~' => 'M',
        b'.' => '.',
        _ => return Resolved::Str,
    };
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Resolved::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Resolved::Bool(false);
        }
        "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match hint {
        '.' => match go_parse_float(s) {
            Some(f) => Resolved::Float(f),
            None => Resolved::Str,
        },
        'S' | 'D' => {
            if is_timestamp(s) {
                return Resolved::Timestamp;
            }
            let plain: String = s.chars().filter(|c| *c != '_').collect();
            if let Some(i) = parse_int(&plain) {
                return Resolved::Int(i);
            }
            let uint = parse_uint(&plain);
            if let Ok(u) = uint {
                return Resolved::Uint(u);
            }
            if let Some(f) = is_yaml_float(&plain)
                .then(|| go_parse_float(&plain))
                .flatten()
            {
                return Resolved::Float(f);
            }
            if uint == Err(IntError::Range) {
                return Resolved::BigInt(plain);
            }
            Resolved::Str
        }
        _ => Resolved::Str,
    }
}

/// Go's `strconv.ParseFloat(s, 64)` for the decimal forms goyaml lets through (its callers
/// have checked the shape): `None` on a syntax error or overflow.
pub(crate) fn go_parse_float(s: &str) -> Option<f64> {
    let body = s.trim_start_matches(['+', '-']);
    if body.len() + 1 < s.len() || body.is_empty() {
        return None;
    }
    // Rust accepts words Go would accept too ("inf", "nan"), but goyaml never sends them here
    // except after a '.', where both refuse them.
    if !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let f: f64 = s.parse().ok()?;
    f.is_finite().then_some(f)
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

#[derive(Debug, PartialEq)]
enum IntError {
    Syntax,
    Range,
}

/// Go's `strconv.ParseUint(s, 0, 64)` (underscores already removed).
fn parse_uint(s: &str) -> Result<u64, IntError> {
    let (radix, digits) = if let Some(r) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (16, r)
    } else if let Some(r) = s.strip_prefix("0o").or_else(|| s.strip_prefix("0O")) {
        (8, r)
    } else if let Some(r) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        (2, r)
    } else if s.len() > 1 && s.starts_with('0') {
        (8, &s[1..])
    } else {
        (10, s)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(IntError::Syntax);
    }
    u64::from_str_radix(digits, radix).map_err(|_| IntError::Range)
}

/// Go's `strconv.ParseInt(s, 0, 64)`.
fn parse_int(s: &str) -> Option<i64> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let u = parse_uint(rest).ok()?;
    if neg {
        if u <= i64::MAX as u64 + 1 {
            Some((u as i128).wrapping_neg() as i64)
        } else {
            None
        }
    } else {
        i64::try_from(u).ok()
    }
}

/// Whether goyaml.v2 sees a timestamp: `YYYY-M-D`, optionally followed by `T`/`t` and a time
/// with a zone (`Z` or `±hh:mm`), or a space and a time without one — all checked as Go's
/// `time.Parse` checks them (real calendar days).
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let mut p = Cursor { b, i: 5 };
    let year: u32 = s[..4].parse().unwrap_or(0);
    let Some(month) = p.num() else { return false };
    if !p.eat(b'-') {
        return false;
    }
    let Some(day) = p.num() else { return false };
    if !(1..=12).contains(&month) || day < 1 || day > days_in(month, year) {
        return false;
    }
    if p.i == b.len() {
        return true;
    }
    let zone = match b[p.i] {
        b'T' | b't' => true,
        b' ' => false,
        _ => return false,
    };
    p.i += 1;
    let (Some(h), true, Some(m), true, Some(sec)) =
        (p.num(), p.eat(b':'), p.num(), p.eat(b':'), p.num())
    else {
        return false;
    };
    if h > 23 || m > 59 || sec > 59 {
        return false;
    }
    if b.get(p.i).is_some_and(|c| *c == b'.' || *c == b',')
        && b.get(p.i + 1).is_some_and(u8::is_ascii_digit)
    {
        p.i += 1;
        while b.get(p.i).is_some_and(u8::is_ascii_digit) {
            p.i += 1;
        }
    }
    if !zone {
        return p.i == b.len();
    }
    let rest = &b[p.i..];
    if rest == b"Z" {
        return true;
    }
    rest.len() == 6
        && (rest[0] == b'+' || rest[0] == b'-')
        && rest[1].is_ascii_digit()
        && rest[2].is_ascii_digit()
        && rest[3] == b':'
        && rest[4].is_ascii_digit()
        && rest[5].is_ascii_digit()
        && (rest[1] - b'0') * 10 + (rest[2] - b'0') <= 24
        && (rest[4] - b'0') * 10 + (rest[5] - b'0') <= 60
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    /// One or two digits, as Go's `getnum(s, false)`.
    fn num(&mut self) -> Option<u32> {
        let d0 = *self.b.get(self.i).filter(|c| c.is_ascii_digit())?;
        self.i += 1;
        let mut n = u32::from(d0 - b'0');
        if let Some(d1) = self.b.get(self.i).filter(|c| c.is_ascii_digit()) {
            n = n * 10 + u32::from(d1 - b'0');
            self.i += 1;
        }
        Some(n)
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
}

fn days_in(month: u32, year: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// goyaml.v2 quotes strings that YAML 1.1 would read as base-60 floats (`1:20`), though it
/// no longer decodes them.
pub(crate) fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    match b.first() {
        Some(b'+' | b'-' | b'0'..=b'9') => {}
        _ => return false,
    }
    if !s.contains(':') {
        return false;
    }
    // ^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$
    let mut i = usize::from(matches!(b[0], b'+' | b'-'));
    if !b.get(i).is_some_and(u8::is_ascii_digit) {
        return false;
    }
    i += 1;
    while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'_') {
        i += 1;
    }
    let mut groups = 0;
    while b.get(i) == Some(&b':') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) && i - start < 2 {
            i += 1;
        }
        match i - start {
            1 => {}
            2 if b[start] <= b'5' => {}
            _ => return false,
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'_') {
            i += 1;
        }
    }
    i == b.len()
}
