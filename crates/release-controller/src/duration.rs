//! Go duration strings (`5m`, `1h30m`, `2s`, `1.5h`), as version.json and the deckhouse
//! settings write them.

use jiff::SignedDuration;

/// Parses a Go `time.ParseDuration` string with the units `h`, `m`, `s`, `ms`, `us`/`µs`, `ns`;
/// `0` alone is zero. Negative durations are refused (nothing here may wait backwards).
pub fn parse_go_duration(text: &str) -> Result<SignedDuration, String> {
    let invalid = || format!("invalid duration {text:?}");
    if text == "0" {
        return Ok(SignedDuration::ZERO);
    }
    if text.is_empty() || text.starts_with('-') {
        return Err(invalid());
    }
    let body = text.strip_prefix('+').unwrap_or(text);
    let mut rest = body;
    let mut total_ns: i128 = 0;
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, tail) = rest.split_at(number_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let unit_ns: i128 = match unit {
            "h" => 3_600_000_000_000,
            "m" => 60_000_000_000,
            "s" => 1_000_000_000,
            "ms" => 1_000_000,
            "us" | "µs" | "μs" => 1_000,
            "ns" => 1,
            _ => return Err(invalid()),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        let mut value = whole.checked_mul(unit_ns).ok_or_else(invalid)?;
        let mut scale = unit_ns;
        for digit in fraction.bytes() {
            scale /= 10;
            value += i128::from(digit - b'0') * scale;
        }
        total_ns = total_ns.checked_add(value).ok_or_else(invalid)?;
        rest = next;
    }
    let secs = i64::try_from(total_ns / 1_000_000_000).map_err(|_| invalid())?;
    let nanos = i32::try_from(total_ns % 1_000_000_000).map_err(|_| invalid())?;
    Ok(SignedDuration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases = [
            ("0", 0),
            ("2s", 2),
            ("5m", 300),
            ("1h30m", 5400),
            ("8h", 28_800),
            ("1.5h", 5400),
            ("1m30s", 90),
        ];
        for (text, secs) in cases {
            assert_eq!(
                parse_go_duration(text).unwrap(),
                SignedDuration::from_secs(secs),
                "{text}"
            );
        }
        assert_eq!(
            parse_go_duration("250ms").unwrap(),
            SignedDuration::from_millis(250)
        );
        for bad in ["", "5", "-5m", "5x", "m", "1..5s", "h1"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }
}
