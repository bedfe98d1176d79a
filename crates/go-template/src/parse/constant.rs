//! Constants as Go's parser reads them: quoted strings (`strconv.Unquote`), character
//! constants and numbers (`parse.newNumber`, with `strconv`'s base prefixes, underscores and
//! hexadecimal floats).

use super::{Number, go_quote};
use crate::lex::ItemType;

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
                let (c, tail) =
                    unquote_char(rest, quote as char).map_err(|_| SYNTAX.to_string())?;
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
    if text
        .strip_suffix('i')
        .is_some_and(|stripped| parse_go_float(stripped).is_some())
    {
        n.is_complex = true;
        return Ok(n);
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
        // Go's `float64(int64(f)) == f` and `float64(uint64(f)) == f`.
        let two63 = 2f64.powi(63);
        if !n.is_int && f.fract() == 0.0 && (-two63..two63).contains(&f) {
            n.is_int = true;
            n.int = f as i64;
        }
        if !n.is_uint && f.fract() == 0.0 && (0.0..2.0 * two63).contains(&f) {
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
        if let Some(o) = esc
            .strip_prefix('\\')
            .filter(|o| o.len() == 3 && o.bytes().all(|b| (b'0'..=b'7').contains(&b)))
        {
            return u32::from_str_radix(o, 8).unwrap_or(0xfffd);
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
            || !body
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
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
