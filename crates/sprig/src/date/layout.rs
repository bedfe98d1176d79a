//! Go's reference-time layouts ("Mon Jan 2 15:04:05 MST 2006"): `Time.Format` and
//! `time.ParseInLocation`, error messages included.

use super::civil::{GoTime, Loc, days_in, is_leap};

const LONG_DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const LONG_MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

pub(crate) fn month_name(m: u32) -> &'static str {
    LONG_MONTHS
        .get(m.wrapping_sub(1) as usize)
        .copied()
        .unwrap_or("%!Month()")
}

pub(crate) fn weekday_name(d: u32) -> &'static str {
    LONG_DAYS.get(d as usize).copied().unwrap_or("%!Weekday()")
}

/// One layout element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Std {
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    Pm,
    PmLower,
    Tz,
    Iso8601Tz,
    Iso8601SecondsTz,
    Iso8601ShortTz,
    Iso8601ColonTz,
    Iso8601ColonSecondsTz,
    NumTz,
    NumSecondsTz,
    NumShortTz,
    NumColonTz,
    NumColonSecondsTz,
    /// `.000` (fixed digits) with its separator and digit count.
    Frac0(u8, usize),
    /// `.999` (trailing zeros trimmed).
    Frac9(u8, usize),
}

fn starts_lower(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_lowercase)
}

/// Go's `nextStdChunk`: the literal prefix, the element, and the rest.
fn next_chunk(layout: &str) -> (&str, Option<Std>, &str) {
    let l = layout.as_bytes();
    let at = |i: usize, s: &str| l.len() >= i + s.len() && &l[i..i + s.len()] == s.as_bytes();
    let mut i = 0;
    while i < l.len() {
        let found = |n: usize, std: Std| Some((i, std, i + n));
        let hit = match l[i] {
            b'J' if at(i, "Jan") => {
                if at(i, "January") {
                    found(7, Std::LongMonth)
                } else if !starts_lower(&l[i + 3..]) {
                    found(3, Std::Month)
                } else {
                    None
                }
            }
            b'M' if l.len() >= i + 3 => {
                if at(i, "Mon") {
                    if at(i, "Monday") {
                        found(6, Std::LongWeekDay)
                    } else if !starts_lower(&l[i + 3..]) {
                        found(3, Std::WeekDay)
                    } else {
                        None
                    }
                } else if at(i, "MST") {
                    found(3, Std::Tz)
                } else {
                    None
                }
            }
            b'0' if l.len() >= i + 2 && (b'1'..=b'6').contains(&l[i + 1]) => {
                let std = [
                    Std::ZeroMonth,
                    Std::ZeroDay,
                    Std::ZeroHour12,
                    Std::ZeroMinute,
                    Std::ZeroSecond,
                    Std::Year,
                ][(l[i + 1] - b'1') as usize];
                found(2, std)
            }
            b'0' if at(i, "002") => found(3, Std::ZeroYearDay),
            b'1' => {
                if at(i, "15") {
                    found(2, Std::Hour)
                } else {
                    found(1, Std::NumMonth)
                }
            }
            b'2' => {
                if at(i, "2006") {
                    found(4, Std::LongYear)
                } else {
                    found(1, Std::Day)
                }
            }
            b'_' if at(i, "_2") => {
                if at(i + 1, "2006") {
                    // "_2006" is a literal "_" and a long year.
                    Some((i + 1, Std::LongYear, i + 5))
                } else {
                    found(2, Std::UnderDay)
                }
            }
            b'_' if at(i, "__2") => found(3, Std::UnderYearDay),
            b'3' => found(1, Std::Hour12),
            b'4' => found(1, Std::Minute),
            b'5' => found(1, Std::Second),
            b'P' if at(i, "PM") => found(2, Std::Pm),
            b'p' if at(i, "pm") => found(2, Std::PmLower),
            b'-' => [
                ("-070000", Std::NumSecondsTz),
                ("-07:00:00", Std::NumColonSecondsTz),
                ("-0700", Std::NumTz),
                ("-07:00", Std::NumColonTz),
                ("-07", Std::NumShortTz),
            ]
            .into_iter()
            .find(|(s, _)| at(i, s))
            .and_then(|(s, std)| found(s.len(), std)),
            b'Z' => [
                ("Z070000", Std::Iso8601SecondsTz),
                ("Z07:00:00", Std::Iso8601ColonSecondsTz),
                ("Z0700", Std::Iso8601Tz),
                ("Z07:00", Std::Iso8601ColonTz),
                ("Z07", Std::Iso8601ShortTz),
            ]
            .into_iter()
            .find(|(s, _)| at(i, s))
            .and_then(|(s, std)| found(s.len(), std)),
            c @ (b'.' | b',') if i + 1 < l.len() && (l[i + 1] == b'0' || l[i + 1] == b'9') => {
                let ch = l[i + 1];
                let mut j = i + 1;
                while j < l.len() && l[j] == ch {
                    j += 1;
                }
                if j < l.len() && l[j].is_ascii_digit() {
                    None
                } else {
                    let n = j - (i + 1);
                    let std = if ch == b'0' {
                        Std::Frac0(c, n)
                    } else {
                        Std::Frac9(c, n)
                    };
                    Some((i, std, j))
                }
            }
            _ => None,
        };
        if let Some((start, std, end)) = hit {
            return (&layout[..start], Some(std), &layout[end..]);
        }
        i += 1;
    }
    (layout, None, "")
}

fn pad(out: &mut String, v: i64, width: usize) {
    if v < 0 {
        out.push('-');
    }
    let digits = v.unsigned_abs().to_string();
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(&digits);
}

/// `t.Format(layout)`.
pub(crate) fn format(t: &GoTime, layout: &str) -> String {
    let c = t.civil();
    let mut out = String::with_capacity(layout.len() + 10);
    let mut rest = layout;
    loop {
        let (prefix, std, suffix) = next_chunk(rest);
        out.push_str(prefix);
        let Some(std) = std else { break };
        rest = suffix;
        let hour12 = match c.hour % 12 {
            0 => 12,
            h => h,
        };
        match std {
            Std::Year => pad(&mut out, c.year.rem_euclid(100), 2),
            Std::LongYear => pad(&mut out, c.year, 4),
            Std::Month => out.push_str(&month_name(c.month)[..3]),
            Std::LongMonth => out.push_str(month_name(c.month)),
            Std::NumMonth => pad(&mut out, c.month.into(), 0),
            Std::ZeroMonth => pad(&mut out, c.month.into(), 2),
            Std::WeekDay => out.push_str(&weekday_name(c.wday)[..3]),
            Std::LongWeekDay => out.push_str(weekday_name(c.wday)),
            Std::Day => pad(&mut out, c.day.into(), 0),
            Std::UnderDay => {
                if c.day < 10 {
                    out.push(' ');
                }
                pad(&mut out, c.day.into(), 0);
            }
            Std::ZeroDay => pad(&mut out, c.day.into(), 2),
            Std::UnderYearDay => {
                if c.yday < 100 {
                    out.push(' ');
                    if c.yday < 10 {
                        out.push(' ');
                    }
                }
                pad(&mut out, c.yday.into(), 0);
            }
            Std::ZeroYearDay => pad(&mut out, c.yday.into(), 3),
            Std::Hour => pad(&mut out, c.hour.into(), 2),
            Std::Hour12 => pad(&mut out, hour12.into(), 0),
            Std::ZeroHour12 => pad(&mut out, hour12.into(), 2),
            Std::Minute => pad(&mut out, c.min.into(), 0),
            Std::ZeroMinute => pad(&mut out, c.min.into(), 2),
            Std::Second => pad(&mut out, c.sec.into(), 0),
            Std::ZeroSecond => pad(&mut out, c.sec.into(), 2),
            Std::Pm => out.push_str(if c.hour >= 12 { "PM" } else { "AM" }),
            Std::PmLower => out.push_str(if c.hour >= 12 { "pm" } else { "am" }),
            Std::Iso8601Tz
            | Std::Iso8601SecondsTz
            | Std::Iso8601ShortTz
            | Std::Iso8601ColonTz
            | Std::Iso8601ColonSecondsTz
            | Std::NumTz
            | Std::NumSecondsTz
            | Std::NumShortTz
            | Std::NumColonTz
            | Std::NumColonSecondsTz => format_offset(&mut out, std, c.offset),
            Std::Tz => {
                if c.zone.is_empty() {
                    let zone = c.offset / 60;
                    out.push(if zone < 0 { '-' } else { '+' });
                    pad(&mut out, (zone.abs() / 60).into(), 2);
                    pad(&mut out, (zone.abs() % 60).into(), 2);
                } else {
                    out.push_str(&c.zone);
                }
            }
            Std::Frac0(sep, n) | Std::Frac9(sep, n) => {
                let trim = matches!(std, Std::Frac9(..));
                if trim && (n == 0 || c.nsec == 0) {
                    continue;
                }
                let mut digits = format!("{:09}", c.nsec);
                digits.truncate(n.min(9));
                if trim {
                    while digits.ends_with('0') {
                        digits.pop();
                    }
                    if digits.is_empty() {
                        continue;
                    }
                }
                out.push(sep as char);
                out.push_str(&digits);
            }
        }
    }
    out
}

fn format_offset(out: &mut String, std: Std, offset: i32) {
    use Std::*;
    let iso = matches!(
        std,
        Iso8601Tz | Iso8601SecondsTz | Iso8601ShortTz | Iso8601ColonTz | Iso8601ColonSecondsTz
    );
    if offset == 0 && iso {
        out.push('Z');
        return;
    }
    let mut zone = offset / 60;
    let mut abs = offset;
    if zone < 0 {
        out.push('-');
        zone = -zone;
        abs = -abs;
    } else {
        out.push('+');
    }
    pad(out, (zone / 60).into(), 2);
    if matches!(
        std,
        Iso8601ColonTz | NumColonTz | Iso8601ColonSecondsTz | NumColonSecondsTz
    ) {
        out.push(':');
    }
    if !matches!(std, NumShortTz | Iso8601ShortTz) {
        pad(out, (zone % 60).into(), 2);
    }
    if matches!(
        std,
        Iso8601SecondsTz | NumSecondsTz | NumColonSecondsTz | Iso8601ColonSecondsTz
    ) {
        if matches!(std, NumColonSecondsTz | Iso8601ColonSecondsTz) {
            out.push(':');
        }
        pad(out, (abs % 60).into(), 2);
    }
}

/// Go's `time.quote`: double quotes, `"` and `\` escaped, bytes outside printable ASCII as
/// `\xNN`.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if (c as u32) >= 0x80 || c < ' ' {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

fn parse_error(layout: &str, value: &str, lelem: &str, velem: &str, msg: &str) -> String {
    if msg.is_empty() {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            quote(value),
            quote(layout),
            quote(velem),
            quote(lelem)
        )
    } else {
        format!("parsing time {}{msg}", quote(value))
    }
}

fn cut_space(s: &str) -> &str {
    s.trim_start_matches(' ')
}

/// Go's `skip`: matches the literal prefix (a space matches any run of spaces); on failure
/// gives what is left of the value.
fn skip<'a>(mut value: &'a str, mut prefix: &str) -> Result<&'a str, &'a str> {
    while let Some(p) = prefix.chars().next() {
        if p == ' ' {
            if !value.is_empty() && !value.starts_with(' ') {
                return Err(value);
            }
            prefix = cut_space(prefix);
            value = cut_space(value);
            continue;
        }
        if !value.starts_with(p) {
            return Err(value);
        }
        prefix = &prefix[p.len_utf8()..];
        value = &value[p.len_utf8()..];
    }
    Ok(value)
}

fn digit(s: &str, i: usize) -> Option<u32> {
    s.as_bytes()
        .get(i)
        .filter(|b| b.is_ascii_digit())
        .map(|b| u32::from(b - b'0'))
}

/// `getnum`: one or two digits (exactly two when `fixed`).
fn getnum(s: &str, fixed: bool) -> Option<(u32, &str)> {
    let a = digit(s, 0)?;
    match digit(s, 1) {
        None if fixed => None,
        None => Some((a, &s[1..])),
        Some(b) => Some((a * 10 + b, &s[2..])),
    }
}

/// `getnum3`: one to three digits (exactly three when `fixed`).
fn getnum3(s: &str, fixed: bool) -> Option<(u32, &str)> {
    let mut n = 0;
    let mut i = 0;
    while i < 3 {
        match digit(s, i) {
            Some(d) => n = n * 10 + d,
            None => break,
        }
        i += 1;
    }
    if i == 0 || (fixed && i != 3) {
        return None;
    }
    Some((n, &s[i..]))
}

/// Case-insensitive prefix match against names.
fn lookup<'a>(names: &[&str], value: &'a str) -> Option<(usize, &'a str)> {
    names.iter().enumerate().find_map(|(i, n)| {
        let v = value.as_bytes();
        (v.len() >= n.len() && v[..n.len()].eq_ignore_ascii_case(n.as_bytes()))
            .then(|| (i, &value[n.len()..]))
    })
}

fn leading_int(s: &str) -> Option<(u64, &str)> {
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    let mut x: u64 = 0;
    for b in s[..end].bytes() {
        if x > (1 << 63) / 10 {
            return None;
        }
        x = x * 10 + u64::from(b - b'0');
        if x > 1 << 63 {
            return None;
        }
    }
    Some((x, &s[end..]))
}

/// Go's `atoi`: optional sign, then digits, nothing else.
fn atoi(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (x, rest) = leading_int(body)?;
    if !rest.is_empty() || x > i64::MAX as u64 + u64::from(neg) {
        return None;
    }
    Some(if neg {
        (x as i64).wrapping_neg()
    } else {
        x as i64
    })
}

fn parse_signed_offset(value: &str) -> usize {
    let Some(sign) = value.as_bytes().first() else {
        return 0;
    };
    if *sign != b'-' && *sign != b'+' {
        return 0;
    }
    match leading_int(&value[1..]) {
        Some((x, rem)) if rem.len() != value.len() - 1 && x <= 12 => value.len() - rem.len(),
        _ => 0,
    }
}

fn parse_time_zone(value: &str) -> Option<usize> {
    let v = value.as_bytes();
    if v.len() < 3 {
        return None;
    }
    if v.len() >= 4 && (&v[..4] == b"ChST" || &v[..4] == b"MeST") {
        return Some(4);
    }
    if &v[..3] == b"GMT" {
        return Some(3 + parse_signed_offset(&value[3..]));
    }
    if v[0] == b'+' || v[0] == b'-' {
        let n = parse_signed_offset(value);
        return (n > 0).then_some(n);
    }
    let upper = v
        .iter()
        .take(6)
        .take_while(|c| c.is_ascii_uppercase())
        .count();
    match upper {
        5 if v[4] == b'T' => Some(5),
        4 if v[3] == b'T' || &v[..4] == b"WITA" => Some(4),
        3 => Some(3),
        _ => None,
    }
}

fn comma_or_period(b: Option<&u8>) -> bool {
    matches!(b, Some(b'.' | b','))
}

/// `parseNanoseconds`: `value[0]` is the separator, `nbytes` counts it.
fn parse_nanoseconds(value: &str, nbytes: usize) -> Result<u32, &'static str> {
    if !comma_or_period(value.as_bytes().first()) {
        return Err("");
    }
    let nbytes = nbytes.min(10);
    let ns = atoi(value.get(1..nbytes).ok_or("")?).ok_or("")?;
    if ns < 0 {
        return Err("fractional second");
    }
    let mut ns = ns as u64;
    for _ in 0..10 - nbytes {
        ns *= 10;
    }
    Ok(ns as u32)
}

/// `time.ParseInLocation(layout, value, loc)`.
pub(crate) fn parse(layout_all: &str, value_all: &str, local: &Loc) -> Result<GoTime, String> {
    let mut layout = layout_all;
    let mut value = value_all;
    let (mut am, mut pm) = (false, false);
    let mut year: i64 = 0;
    let (mut month, mut day, mut yday): (i64, i64, i64) = (-1, -1, -1);
    let (mut hour, mut min, mut sec, mut nsec) = (0u32, 0u32, 0u32, 0u32);
    let mut z: Option<Loc> = None;
    let mut zone_offset: Option<i32> = None;
    let mut zone_name = String::new();
    let err =
        |lelem: &str, velem: &str, msg: &str| parse_error(layout_all, value_all, lelem, velem, msg);
    loop {
        let (prefix, std, suffix) = next_chunk(layout);
        let stdstr = &layout[prefix.len()..layout.len() - suffix.len()];
        value = skip(value, prefix).map_err(|v| err(prefix, v, ""))?;
        let Some(std) = std else {
            if !value.is_empty() {
                return Err(err("", value, &format!(": extra text: {}", quote(value))));
            }
            break;
        };
        layout = suffix;
        let hold = value;
        let mut range = "";
        let ok: Option<()> = (|| {
            match std {
                Std::Year => {
                    let p = value.get(..2)?;
                    value = &value[2..];
                    let y = atoi(p)?;
                    year = if y >= 69 { y + 1900 } else { y + 2000 };
                }
                Std::LongYear => {
                    if value.len() < 4 || digit(value, 0).is_none() {
                        return None;
                    }
                    let p = value.get(..4)?;
                    value = &value[4..];
                    year = atoi(p)?;
                }
                Std::Month | Std::LongMonth => {
                    let names: Vec<&str> = if std == Std::Month {
                        LONG_MONTHS.iter().map(|m| &m[..3]).collect()
                    } else {
                        LONG_MONTHS.to_vec()
                    };
                    let (i, rest) = lookup(&names, value)?;
                    month = i as i64 + 1;
                    value = rest;
                }
                Std::NumMonth | Std::ZeroMonth => {
                    let (m, rest) = getnum(value, std == Std::ZeroMonth)?;
                    value = rest;
                    month = m.into();
                    if !(1..=12).contains(&m) {
                        range = "month";
                    }
                }
                Std::WeekDay | Std::LongWeekDay => {
                    let names: Vec<&str> = if std == Std::WeekDay {
                        LONG_DAYS.iter().map(|m| &m[..3]).collect()
                    } else {
                        LONG_DAYS.to_vec()
                    };
                    value = lookup(&names, value)?.1;
                }
                Std::Day | Std::UnderDay | Std::ZeroDay => {
                    if std == Std::UnderDay && value.starts_with(' ') {
                        value = &value[1..];
                    }
                    let (d, rest) = getnum(value, std == Std::ZeroDay)?;
                    value = rest;
                    day = d.into();
                }
                Std::UnderYearDay | Std::ZeroYearDay => {
                    for _ in 0..2 {
                        if std == Std::UnderYearDay && value.starts_with(' ') {
                            value = &value[1..];
                        }
                    }
                    let (d, rest) = getnum3(value, std == Std::ZeroYearDay)?;
                    value = rest;
                    yday = d.into();
                }
                Std::Hour => {
                    let (h, rest) = getnum(value, false)?;
                    value = rest;
                    hour = h;
                    if h >= 24 {
                        range = "hour";
                    }
                }
                Std::Hour12 | Std::ZeroHour12 => {
                    let (h, rest) = getnum(value, std == Std::ZeroHour12)?;
                    value = rest;
                    hour = h;
                    if h > 12 {
                        range = "hour";
                    }
                }
                Std::Minute | Std::ZeroMinute => {
                    let (m, rest) = getnum(value, std == Std::ZeroMinute)?;
                    value = rest;
                    min = m;
                    if m >= 60 {
                        range = "minute";
                    }
                }
                Std::Second | Std::ZeroSecond => {
                    let (s, rest) = getnum(value, std == Std::ZeroSecond)?;
                    value = rest;
                    sec = s;
                    if s >= 60 {
                        range = "second";
                        return Some(());
                    }
                    if value.len() >= 2
                        && comma_or_period(value.as_bytes().first())
                        && digit(value, 1).is_some()
                    {
                        let (_, next, _) = next_chunk(layout);
                        if matches!(next, Some(Std::Frac0(..) | Std::Frac9(..))) {
                            return Some(());
                        }
                        let n = 2 + value[2..].bytes().take_while(u8::is_ascii_digit).count();
                        match parse_nanoseconds(value, n) {
                            Ok(ns) => nsec = ns,
                            Err("") => return None,
                            Err(r) => range = r,
                        }
                        value = &value[n..];
                    }
                }
                Std::Pm | Std::PmLower => {
                    let p = value.get(..2)?;
                    value = &value[2..];
                    let (pm_s, am_s) = if std == Std::Pm {
                        ("PM", "AM")
                    } else {
                        ("pm", "am")
                    };
                    if p == pm_s {
                        pm = true;
                    } else if p == am_s {
                        am = true;
                    } else {
                        return None;
                    }
                }
                Std::Iso8601Tz
                | Std::Iso8601ShortTz
                | Std::Iso8601ColonTz
                | Std::Iso8601SecondsTz
                | Std::Iso8601ColonSecondsTz
                    if value.starts_with('Z') =>
                {
                    value = &value[1..];
                    z = Some(Loc::Utc);
                }
                Std::Iso8601Tz
                | Std::Iso8601ShortTz
                | Std::Iso8601ColonTz
                | Std::Iso8601SecondsTz
                | Std::Iso8601ColonSecondsTz
                | Std::NumTz
                | Std::NumShortTz
                | Std::NumColonTz
                | Std::NumSecondsTz
                | Std::NumColonSecondsTz => {
                    let v = value.as_bytes();
                    let (sign, h, m, s, rest): (u8, &str, &str, &str, &str) = match std {
                        Std::Iso8601ColonTz | Std::NumColonTz => {
                            if v.len() < 6 || v[3] != b':' {
                                return None;
                            }
                            (v[0], value.get(1..3)?, value.get(4..6)?, "00", &value[6..])
                        }
                        Std::NumShortTz | Std::Iso8601ShortTz => {
                            if v.len() < 3 {
                                return None;
                            }
                            (v[0], value.get(1..3)?, "00", "00", &value[3..])
                        }
                        Std::Iso8601ColonSecondsTz | Std::NumColonSecondsTz => {
                            if v.len() < 9 || v[3] != b':' || v[6] != b':' {
                                return None;
                            }
                            let parts = (value.get(1..3)?, value.get(4..6)?, value.get(7..9)?);
                            (v[0], parts.0, parts.1, parts.2, &value[9..])
                        }
                        Std::Iso8601SecondsTz | Std::NumSecondsTz => {
                            if v.len() < 7 {
                                return None;
                            }
                            let parts = (value.get(1..3)?, value.get(3..5)?, value.get(5..7)?);
                            (v[0], parts.0, parts.1, parts.2, &value[7..])
                        }
                        _ => {
                            if v.len() < 5 {
                                return None;
                            }
                            (v[0], value.get(1..3)?, value.get(3..5)?, "00", &value[5..])
                        }
                    };
                    value = rest;
                    let hr = getnum(h, true)?.0;
                    let mm = getnum(m, true)?.0;
                    let ss = getnum(s, true)?.0;
                    if hr > 24 {
                        range = "time zone offset hour";
                    }
                    if mm > 60 {
                        range = "time zone offset minute";
                    }
                    if ss > 60 {
                        range = "time zone offset second";
                    }
                    let off = ((hr * 60 + mm) * 60 + ss) as i32;
                    zone_offset = Some(match sign {
                        b'+' => off,
                        b'-' => -off,
                        _ => return None,
                    });
                }
                Std::Tz => {
                    if value.starts_with("UTC") {
                        z = Some(Loc::Utc);
                        value = &value[3..];
                        return Some(());
                    }
                    let n = parse_time_zone(value)?;
                    zone_name = value[..n].to_owned();
                    value = &value[n..];
                }
                Std::Frac0(_, n) => {
                    let ndigit = 1 + n;
                    if value.len() < ndigit {
                        return None;
                    }
                    match parse_nanoseconds(value, ndigit) {
                        Ok(ns) => nsec = ns,
                        Err("") => return None,
                        Err(r) => range = r,
                    }
                    value = value.get(ndigit..)?;
                }
                Std::Frac9(..) => {
                    let v = value.as_bytes();
                    if v.len() < 2 || !comma_or_period(v.first()) || !v[1].is_ascii_digit() {
                        return Some(());
                    }
                    let i = v[1..].iter().take_while(|b| b.is_ascii_digit()).count();
                    match parse_nanoseconds(value, 1 + i) {
                        Ok(ns) => nsec = ns,
                        Err("") => return None,
                        Err(r) => range = r,
                    }
                    value = &value[1 + i..];
                }
            }
            Some(())
        })();
        if !range.is_empty() {
            return Err(err(stdstr, value, &format!(": {range} out of range")));
        }
        if ok.is_none() {
            return Err(err(stdstr, hold, ""));
        }
    }
    if pm && hour < 12 {
        hour += 12;
    } else if am && hour == 12 {
        hour = 0;
    }
    if yday >= 0 {
        let (mut m, mut d) = (0i64, 0i64);
        if is_leap(year) {
            if yday == 31 + 29 {
                m = 2;
                d = 29;
            } else if yday > 31 + 29 {
                yday -= 1;
            }
        }
        if !(1..=365).contains(&yday) {
            return Err(err("", value, ": day-of-year out of range"));
        }
        if m == 0 {
            const BEFORE: [i64; 13] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365];
            m = (yday - 1) / 31 + 1;
            if BEFORE[m as usize] < yday {
                m += 1;
            }
            d = yday - BEFORE[m as usize - 1];
        }
        if month >= 0 && month != m {
            return Err(err("", value, ": day-of-year does not match month"));
        }
        month = m;
        if day >= 0 && day != d {
            return Err(err("", value, ": day-of-year does not match day"));
        }
        day = d;
    } else {
        if month < 0 {
            month = 1;
        }
        if day < 0 {
            day = 1;
        }
    }
    if day < 1 || day > i64::from(days_in(month as u32, year)) {
        return Err(err("", value, ": day out of range"));
    }
    let (month, day) = (month as u32, day as u32);
    let civil = |loc: Loc| GoTime::from_civil(year, month, day, hour, min, sec, nsec, loc);
    if let Some(z) = z {
        return Ok(civil(z));
    }
    if let Some(off) = zone_offset {
        let mut t = civil(Loc::Utc);
        t.unix -= i64::from(off);
        let (name, local_off) = local.lookup(t.unix);
        t.loc = if local_off == off && (zone_name.is_empty() || name == zone_name) {
            local.clone()
        } else {
            Loc::Fixed(zone_name, off)
        };
        return Ok(t);
    }
    if !zone_name.is_empty() {
        let mut t = civil(Loc::Utc);
        // The local zone's own abbreviation, in force then: take its offset.
        for guess in [t.unix, t.unix - 86_400 / 2, t.unix + 86_400 / 2] {
            let (name, off) = local.lookup(guess);
            if name == zone_name && local.lookup(t.unix - i64::from(off)).0 == zone_name {
                t.unix -= i64::from(off);
                t.loc = local.clone();
                return Ok(t);
            }
        }
        let mut off = 0;
        if zone_name.len() > 3 && zone_name.starts_with("GMT") {
            off = atoi(&zone_name[3..]).unwrap_or(0) as i32 * 3600;
        }
        t.loc = Loc::Fixed(zone_name, off);
        return Ok(t);
    }
    Ok(civil(local.clone()))
}
