//! `spf13/cast`'s conversions as sprig uses them (`int`, `int64`, `float64` and every integer
//! or float math function), and the `strconv` parsers underneath: errors become 0, as sprig
//! discards them.

use go_template::Value;

/// `cast.ToInt64` (and `cast.ToInt`, the same on 64-bit Go): integers as they are, floats
/// truncated, bools 1/0, strings parsed as Go integer literals (`0x10`, `010`, `1_000`; a
/// zero fraction like `10.0` is dropped first), anything else 0.
pub(crate) fn to_int64(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i,
        Value::Float(f) => float_to_int(*f),
        Value::Bool(b) => i64::from(*b),
        Value::String(s) => parse_int(trim_zero_decimal(s), 0).unwrap_or(0),
        _ => 0,
    }
}

/// `cast.ToFloat64`: numbers converted, bools 1/0, strings parsed as Go float literals,
/// anything else 0.
pub(crate) fn to_float64(v: &Value) -> f64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) => parse_float(s).unwrap_or(0.0),
        _ => 0.0,
    }
}

/// Go's `int64(f)` on amd64: truncation, and the "integer indefinite" value (the smallest
/// int64) for NaN and anything out of range.
pub(crate) fn float_to_int(f: f64) -> i64 {
    if f.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) {
        i64::MIN
    } else {
        f as i64
    }
}

/// cast's `trimZeroDecimal`: `"10.00"` → `"10"`, anything else unchanged.
fn trim_zero_decimal(s: &str) -> &str {
    let mut found_zero = false;
    for (i, b) in s.bytes().enumerate().rev() {
        match b {
            b'.' if found_zero => return &s[..i],
            b'.' => return s,
            b'0' => found_zero = true,
            _ => return s,
        }
    }
    s
}

/// Why `strconv.ParseInt` failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum IntError {
    Syntax,
    /// Out of range; Go returns the clamped value with this error.
    Range(i64),
}

/// `strconv.ParseInt(s, base, 64)` for base 0 (Go literal syntax: prefixes, underscores) or
/// base 10.
pub(crate) fn parse_int(s: &str, base: u32) -> Result<i64, IntError> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let magnitude = parse_uint(digits, base, s)?;
    if neg {
        if magnitude > 1u64 << 63 {
            return Err(IntError::Range(i64::MIN));
        }
        Ok((magnitude as i64).wrapping_neg())
    } else if magnitude >= 1u64 << 63 {
        Err(IntError::Range(i64::MAX))
    } else {
        Ok(magnitude as i64)
    }
}

/// `strconv.ParseUint` on the digits after the sign; `whole` is the text with its sign, for
/// the underscore check.
fn parse_uint(s: &str, base: u32, whole: &str) -> Result<u64, IntError> {
    if s.is_empty() {
        return Err(IntError::Syntax);
    }
    let base0 = base == 0;
    let b = s.as_bytes();
    let (base, rest) = if base0 {
        if b[0] == b'0' {
            match b.get(1).map(u8::to_ascii_lowercase) {
                Some(b'b') if b.len() >= 3 => (2, &s[2..]),
                Some(b'o') if b.len() >= 3 => (8, &s[2..]),
                Some(b'x') if b.len() >= 3 => (16, &s[2..]),
                _ => (8, &s[1..]),
            }
        } else {
            (10, s)
        }
    } else {
        (base, s)
    };
    let mut n: u64 = 0;
    let mut underscores = false;
    for c in rest.bytes() {
        if c == b'_' && base0 {
            underscores = true;
            continue;
        }
        let d = match (c as char).to_digit(36) {
            Some(d) if d < base => u64::from(d),
            _ => return Err(IntError::Syntax),
        };
        n = match n
            .checked_mul(u64::from(base))
            .and_then(|n| n.checked_add(d))
        {
            Some(n) => n,
            None => return Err(range_of(whole)),
        };
    }
    if underscores && !underscore_ok(whole) {
        return Err(IntError::Syntax);
    }
    Ok(n)
}

fn range_of(whole: &str) -> IntError {
    IntError::Range(if whole.starts_with('-') {
        i64::MIN
    } else {
        i64::MAX
    })
}

/// `strconv.Atoi` as sprig's `atoi` uses it (the error dropped): base 10, a syntax error is
/// 0 and an out-of-range number is clamped.
pub(crate) fn atoi(s: &str) -> i64 {
    match parse_int(s, 10) {
        Ok(n) | Err(IntError::Range(n)) => n,
        Err(IntError::Syntax) => 0,
    }
}

/// Go's rule for underscores in number literals: only between digits (or after a base
/// prefix).
fn underscore_ok(s: &str) -> bool {
    let mut b = s.as_bytes();
    if let Some(b'+' | b'-') = b.first() {
        b = &b[1..];
    }
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1].eq_ignore_ascii_case(&b'x');
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || hex && c.is_ascii_hexdigit() {
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

/// `strconv.ParseFloat(s, 64)`: decimal and hexadecimal (`0x1p-2`) literals, underscores
/// between digits, `Inf`/`Infinity`/`NaN` in any case; `None` for a syntax error or a
/// number too large for a float64.
pub(crate) fn parse_float(s: &str) -> Option<f64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let sign = if neg { -1.0 } else { 1.0 };
    if lower == "inf" || lower == "infinity" {
        return Some(sign * f64::INFINITY);
    }
    if lower == "nan" {
        return (body.len() == s.len()).then_some(f64::NAN);
    }
    let cleaned;
    let body = if body.contains('_') {
        if !underscore_ok(s) {
            return None;
        }
        cleaned = body.replace('_', "");
        cleaned.as_str()
    } else {
        body
    };
    let value = if body.len() > 2 && body[..2].eq_ignore_ascii_case("0x") {
        parse_hex_float(&body[2..])?
    } else {
        if body.is_empty()
            || !body
                .bytes()
                .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
            || !body.bytes().any(|c| c.is_ascii_digit())
        {
            return None;
        }
        body.parse::<f64>().ok()?
    };
    if value.is_infinite() {
        return None;
    }
    Some(sign * value)
}

/// The part of a hexadecimal float literal after `0x`: hex digits with an optional point,
/// then the mandatory binary exponent `p±N`.
fn parse_hex_float(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    let (mantissa, exp) = lower.split_once('p')?;
    let exp: i32 = match exp.strip_prefix('+') {
        Some(e) if !e.starts_with(['+', '-']) => e.parse().ok()?,
        _ => exp.parse().ok()?,
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for c in int_part.chars().chain(frac_part.chars()) {
        value = value * 16.0 + f64::from(c.to_digit(16)?);
    }
    let shift = exp.saturating_sub(4 * i32::try_from(frac_part.len()).ok()?);
    Some(value * 2f64.powi(shift))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_as_go_literals() {
        assert_eq!(to_int64(&Value::string("0x10")), 16);
        assert_eq!(to_int64(&Value::string("010")), 8);
        assert_eq!(to_int64(&Value::string("0b101")), 5);
        assert_eq!(to_int64(&Value::string("1_000")), 1000);
        assert_eq!(to_int64(&Value::string("_1")), 0);
        assert_eq!(to_int64(&Value::string("10.0")), 10);
        assert_eq!(to_int64(&Value::string("10.5")), 0);
        assert_eq!(to_int64(&Value::string(" 1")), 0);
        assert_eq!(to_int64(&Value::string("-9223372036854775808")), i64::MIN);
        assert_eq!(to_int64(&Value::string("9223372036854775808")), 0);
        assert_eq!(to_int64(&Value::Float(-2.9)), -2);
        assert_eq!(to_int64(&Value::Float(f64::NAN)), i64::MIN);
        assert_eq!(to_int64(&Value::Float(1e300)), i64::MIN);
        assert_eq!(to_int64(&Value::Bool(true)), 1);
        assert_eq!(to_int64(&Value::Nil), 0);
    }

    #[test]
    fn atoi_clamps_and_zeroes() {
        assert_eq!(atoi("42"), 42);
        assert_eq!(atoi("+42"), 42);
        assert_eq!(atoi("0x10"), 0);
        assert_eq!(atoi("99999999999999999999"), i64::MAX);
        assert_eq!(atoi("-99999999999999999999"), i64::MIN);
        assert_eq!(atoi("1_0"), 0);
    }

    #[test]
    fn floats_parse_as_go_literals() {
        assert_eq!(parse_float("1_000.5"), Some(1000.5));
        assert_eq!(parse_float("0x10"), None);
        assert_eq!(parse_float("0x1p-2"), Some(0.25));
        assert_eq!(parse_float("-Inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float("1e400"), None);
        assert_eq!(parse_float(".5"), Some(0.5));
        assert_eq!(parse_float("5."), Some(5.0));
        assert_eq!(parse_float("abc"), None);
        assert!(parse_float("nan").is_some_and(f64::is_nan));
    }
}
