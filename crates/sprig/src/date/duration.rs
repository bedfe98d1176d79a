//! Go's `time.Duration`: `String()` ("1h2m3.5s", "1.5µs", "0s") and `time.ParseDuration`.

use super::layout::quote;

const NS: u64 = 1;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// `d.String()`.
pub(crate) fn format(d: i64) -> String {
    let neg = d < 0;
    let mut u = d.unsigned_abs();
    let mut out = String::new();
    if u < S {
        if u == 0 {
            return "0s".into();
        }
        let (prec, unit) = if u < US {
            (0, "ns")
        } else if u < MS {
            (3, "µs")
        } else {
            (6, "ms")
        };
        let (frac, whole) = frac(u, prec);
        out.push_str(&whole.to_string());
        out.push_str(&frac);
        out.push_str(unit);
    } else {
        let (frac, secs) = frac(u, 9);
        u = secs;
        let s = format!("{}{frac}s", u % 60);
        u /= 60;
        if u > 0 {
            let m = u % 60;
            u /= 60;
            if u > 0 {
                out.push_str(&format!("{u}h"));
            }
            out.push_str(&format!("{m}m"));
        }
        out.push_str(&s);
    }
    if neg {
        out.insert(0, '-');
    }
    out
}

/// `fmtFrac`: the fraction of `v / 10^prec` as ".123" without trailing zeros (or ""), and
/// the integer part.
fn frac(mut v: u64, prec: u32) -> (String, u64) {
    let mut digits = Vec::new();
    let mut printed = false;
    for _ in 0..prec {
        let digit = v % 10;
        printed = printed || digit != 0;
        if printed {
            digits.push(b'0' + digit as u8);
        }
        v /= 10;
    }
    if printed {
        digits.push(b'.');
    }
    digits.reverse();
    (String::from_utf8(digits).unwrap_or_default(), v)
}

fn unit(u: &str) -> Option<u64> {
    Some(match u {
        "ns" => NS,
        "us" | "µs" | "μs" => US,
        "ms" => MS,
        "s" => S,
        "m" => 60 * S,
        "h" => 3600 * S,
        _ => return None,
    })
}

/// `time.ParseDuration(s)`, with Go's error texts.
pub(crate) fn parse(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(c) = s.chars().next()
        && (c == '-' || c == '+')
    {
        neg = c == '-';
        s = &s[1..];
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut d: u64 = 0;
    while !s.is_empty() {
        let b = s.as_bytes()[0];
        if !(b == b'.' || b.is_ascii_digit()) {
            return Err(invalid());
        }
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut v: u64 = 0;
        for c in s[..digits].bytes() {
            if v > (1 << 63) / 10 {
                return Err(invalid());
            }
            v = v * 10 + u64::from(c - b'0');
            if v > 1 << 63 {
                return Err(invalid());
            }
        }
        let pre = digits > 0;
        s = &s[digits..];
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if s.starts_with('.') {
            s = &s[1..];
            let n = s.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for c in s[..n].bytes() {
                if overflow {
                    continue;
                }
                if f > (i64::MAX as u64) / 10 {
                    overflow = true;
                    continue;
                }
                let y = f * 10 + u64::from(c - b'0');
                if y > 1 << 63 {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10.0;
            }
            post = n > 0;
            s = &s[n..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        let ulen = s
            .bytes()
            .take_while(|c| *c != b'.' && !c.is_ascii_digit())
            .count();
        if ulen == 0 {
            return Err(format!("time: missing unit in duration {}", quote(orig)));
        }
        let u = &s[..ulen];
        s = &s[ulen..];
        let Some(unit) = unit(u) else {
            return Err(format!(
                "time: unknown unit {} in duration {}",
                quote(u),
                quote(orig)
            ));
        };
        if v > (1 << 63) / unit {
            return Err(invalid());
        }
        v *= unit;
        if f > 0 {
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > 1 << 63 {
                return Err(invalid());
            }
        }
        d += v;
        if d > 1 << 63 {
            return Err(invalid());
        }
    }
    if neg {
        return Ok((d as i64).wrapping_neg());
    }
    if d > i64::MAX as u64 {
        return Err(invalid());
    }
    Ok(d as i64)
}

/// `d.Round(m)` for a positive `m` (Go rounds halves away from zero).
pub(crate) fn round(d: i64, m: i64) -> i64 {
    let mut r = d % m;
    if d < 0 {
        r = -r;
        if r + r < m {
            return d + r;
        }
        return d.checked_sub(m - r).unwrap_or(i64::MIN);
    }
    if r + r < m {
        return d - r;
    }
    d.checked_add(m - r).unwrap_or(i64::MAX)
}
