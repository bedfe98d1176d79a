//! Go's `time.ParseDuration`, for `settings.executionMinInterval`.

use std::time::Duration;

/// Parses `300ms`, `1.5h`, `2h45m`; errors read as Go's.
pub(crate) fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration \"{s}\"");
    let mut rest = s;
    let mut negative = false;
    if let Some(r) = rest.strip_prefix('-') {
        negative = true;
        rest = r;
    } else if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(invalid());
        }
        let number: f64 = rest[..num_len].parse().map_err(|_| invalid())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("time: missing unit in duration \"{s}\"")),
            other => {
                return Err(format!(
                    "time: unknown unit \"{other}\" in duration \"{s}\""
                ));
            }
        };
        total += number * scale;
    }
    if negative {
        return Ok(Duration::ZERO);
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let rows: &[(&str, Result<Duration, &str>)] = &[
            ("3s", Ok(Duration::from_secs(3))),
            ("1m30s", Ok(Duration::from_secs(90))),
            ("500ms", Ok(Duration::from_millis(500))),
            ("1.5h", Ok(Duration::from_secs(5400))),
            ("0", Ok(Duration::ZERO)),
            ("", Err("time: invalid duration \"\"")),
            ("3", Err("time: missing unit in duration \"3\"")),
            ("3x", Err("time: unknown unit \"x\" in duration \"3x\"")),
        ];
        for (input, want) in rows {
            assert_eq!(
                parse_go_duration(input),
                want.map_err(str::to_owned),
                "{input}"
            );
        }
    }
}
