//! Sprig's string functions: Go's `strings` package, Masterminds/goutils (`abbrev`, `wrap`,
//! `initials`, `nospace`, `swapcase`, `untitle`) and huandu/xstrings (`camelcase`,
//! `snakecase`, `kebabcase`), with their byte-level quirks: goutils walks some strings byte by
//! byte, so `initials "élan"` is `Ã`, as in Helm.

mod case;

use go_template::{FuncMap, Signature, Ty, Value};

use crate::support::{
    MAX_STRING_BYTES, add, check_len, fail, format_v, int_arg, str_arg, string_list, strval,
};
use crate::unicode::{
    is_digit, is_letter, is_lower, is_space, is_space_byte, is_title, is_upper, to_lower, to_title,
    to_upper,
};

const S: Ty = Ty::String;
const I: Ty = Ty::Int;

pub(crate) fn register(m: &mut FuncMap) {
    add(m, "hello", Signature::fixed(&[]), |_| {
        Ok(Value::from("Hello!"))
    });
    add(m, "abbrev", Signature::fixed(&[I, S]), |a| {
        let (width, s) = (int_arg(a, 0)?, str_arg(a, 1)?);
        if width < 4 {
            return Ok(Value::from(s));
        }
        Ok(text(abbreviate_full(s.as_bytes(), 0, width)))
    });
    add(m, "abbrevboth", Signature::fixed(&[I, I, S]), |a| {
        let (left, right, s) = (int_arg(a, 0)?, int_arg(a, 1)?, str_arg(a, 2)?);
        if right < 4 || left > 0 && right < 7 {
            return Ok(Value::from(s));
        }
        Ok(text(abbreviate_full(s.as_bytes(), left, right)))
    });
    add(m, "trunc", Signature::fixed(&[I, S]), |a| {
        let (c, s) = (int_arg(a, 0)?, str_arg(a, 1)?);
        let len = s.len() as i64;
        let b = s.as_bytes();
        Ok(if c < 0 && len + c > 0 {
            text(b[(len + c) as usize..].to_vec())
        } else if c >= 0 && len > c {
            text(b[..c as usize].to_vec())
        } else {
            Value::from(s)
        })
    });
    add(m, "trim", Signature::fixed(&[S]), |a| {
        Ok(Value::from(str_arg(a, 0)?.trim_matches(is_space)))
    });
    for name in ["trimAll", "trimall"] {
        add(m, name, Signature::fixed(&[S, S]), |a| {
            let (cutset, s) = (str_arg(a, 0)?, str_arg(a, 1)?);
            Ok(Value::from(s.trim_matches(|c| cutset.contains(c))))
        });
    }
    add(m, "trimSuffix", Signature::fixed(&[S, S]), |a| {
        let (suffix, s) = (str_arg(a, 0)?, str_arg(a, 1)?);
        Ok(Value::from(s.strip_suffix(suffix).unwrap_or(s)))
    });
    add(m, "trimPrefix", Signature::fixed(&[S, S]), |a| {
        let (prefix, s) = (str_arg(a, 0)?, str_arg(a, 1)?);
        Ok(Value::from(s.strip_prefix(prefix).unwrap_or(s)))
    });
    add(m, "upper", Signature::fixed(&[S]), |a| {
        Ok(Value::from(
            str_arg(a, 0)?.chars().map(to_upper).collect::<String>(),
        ))
    });
    add(m, "lower", Signature::fixed(&[S]), |a| {
        Ok(Value::from(
            str_arg(a, 0)?.chars().map(to_lower).collect::<String>(),
        ))
    });
    add(m, "title", Signature::fixed(&[S]), |a| {
        Ok(Value::from(title(str_arg(a, 0)?)))
    });
    add(m, "untitle", Signature::fixed(&[S]), |a| {
        Ok(Value::from(untitle(str_arg(a, 0)?)))
    });
    add(m, "substr", Signature::fixed(&[I, I, S]), |a| {
        substr(int_arg(a, 0)?, int_arg(a, 1)?, str_arg(a, 2)?)
    });
    add(m, "repeat", Signature::fixed(&[I, S]), |a| {
        let (count, s) = (int_arg(a, 0)?, str_arg(a, 1)?);
        Ok(Value::from(repeat(s, count)?))
    });
    add(m, "nospace", Signature::fixed(&[S]), |a| {
        Ok(Value::from(delete_white_space(str_arg(a, 0)?)))
    });
    add(m, "initials", Signature::fixed(&[S]), |a| {
        Ok(Value::from(initials(str_arg(a, 0)?)))
    });
    add(m, "swapcase", Signature::fixed(&[S]), |a| {
        Ok(Value::from(swap_case(str_arg(a, 0)?)))
    });
    add(m, "snakecase", Signature::fixed(&[S]), |a| {
        Ok(Value::from(case::to_lower_words(str_arg(a, 0)?, '_')))
    });
    add(m, "kebabcase", Signature::fixed(&[S]), |a| {
        Ok(Value::from(case::to_lower_words(str_arg(a, 0)?, '-')))
    });
    add(m, "camelcase", Signature::fixed(&[S]), |a| {
        Ok(Value::from(case::to_camel(str_arg(a, 0)?)))
    });
    add(m, "wrap", Signature::fixed(&[I, S]), |a| {
        let (width, s) = (int_arg(a, 0)?, str_arg(a, 1)?);
        Ok(text(wrap(s.as_bytes(), width, b"\n", false)?))
    });
    add(m, "wrapWith", Signature::fixed(&[I, S, S]), |a| {
        let (width, sep, s) = (int_arg(a, 0)?, str_arg(a, 1)?, str_arg(a, 2)?);
        let sep = if sep.is_empty() { "\n" } else { sep };
        Ok(text(wrap(s.as_bytes(), width, sep.as_bytes(), true)?))
    });
    add(m, "contains", Signature::fixed(&[S, S]), |a| {
        Ok(Value::Bool(str_arg(a, 1)?.contains(str_arg(a, 0)?)))
    });
    add(m, "hasPrefix", Signature::fixed(&[S, S]), |a| {
        Ok(Value::Bool(str_arg(a, 1)?.starts_with(str_arg(a, 0)?)))
    });
    add(m, "hasSuffix", Signature::fixed(&[S, S]), |a| {
        Ok(Value::Bool(str_arg(a, 1)?.ends_with(str_arg(a, 0)?)))
    });
    add(m, "quote", Signature::variadic(&[], Ty::Any), |a| {
        let quoted: Vec<String> = a
            .iter()
            .filter(|v| !matches!(v, Value::Nil))
            .map(|v| go_quote(&strval(v)))
            .collect();
        Ok(Value::from(quoted.join(" ")))
    });
    add(m, "squote", Signature::variadic(&[], Ty::Any), |a| {
        let quoted: Vec<String> = a
            .iter()
            .filter(|v| !matches!(v, Value::Nil))
            .map(|v| format!("'{}'", format_v(v)))
            .collect();
        Ok(Value::from(quoted.join(" ")))
    });
    add(m, "cat", Signature::variadic(&[], Ty::Any), |a| {
        let parts: Vec<String> = a
            .iter()
            .filter(|v| !matches!(v, Value::Nil))
            .map(format_v)
            .collect();
        Ok(Value::from(parts.join(" ")))
    });
    add(m, "indent", Signature::fixed(&[I, S]), |a| {
        Ok(Value::from(indent(int_arg(a, 0)?, str_arg(a, 1)?, "")?))
    });
    add(m, "nindent", Signature::fixed(&[I, S]), |a| {
        Ok(Value::from(indent(int_arg(a, 0)?, str_arg(a, 1)?, "\n")?))
    });
    add(m, "replace", Signature::fixed(&[S, S, S]), |a| {
        let (old, new, src) = (str_arg(a, 0)?, str_arg(a, 1)?, str_arg(a, 2)?);
        if old.is_empty() {
            let n = src.chars().count() + 1;
            check_len(src.len().saturating_add(n.saturating_mul(new.len())))?;
        } else if new.len() > old.len() {
            let n = src.matches(old).count();
            check_len(
                src.len()
                    .saturating_add(n.saturating_mul(new.len() - old.len())),
            )?;
        }
        Ok(Value::from(src.replace(old, new)))
    });
    add(m, "plural", Signature::fixed(&[S, S, I]), |a| {
        let (one, many, count) = (str_arg(a, 0)?, str_arg(a, 1)?, int_arg(a, 2)?);
        Ok(Value::from(if count == 1 { one } else { many }))
    });
    add(m, "toString", Signature::fixed(&[Ty::Any]), |a| {
        Ok(Value::from(strval(crate::support::arg(a, 0))))
    });
    add(m, "toStrings", Signature::fixed(&[Ty::Any]), |a| {
        Ok(string_list(strslice(crate::support::arg(a, 0))))
    });
    add(m, "split", Signature::fixed(&[S, S]), |a| {
        let (sep, s) = (str_arg(a, 0)?, str_arg(a, 1)?);
        Ok(numbered(go_split(s, sep, -1)))
    });
    add(m, "splitn", Signature::fixed(&[S, I, S]), |a| {
        let (sep, n, s) = (str_arg(a, 0)?, int_arg(a, 1)?, str_arg(a, 2)?);
        Ok(numbered(go_split(s, sep, n)))
    });
    add(m, "splitList", Signature::fixed(&[S, S]), |a| {
        let (sep, s) = (str_arg(a, 0)?, str_arg(a, 1)?);
        Ok(string_list(
            go_split(s, sep, -1).into_iter().map(str::to_owned),
        ))
    });
    add(m, "join", Signature::fixed(&[S, Ty::Any]), |a| {
        let (sep, v) = (str_arg(a, 0)?, crate::support::arg(a, 1));
        let parts = strslice(v);
        let total =
            parts.iter().map(String::len).sum::<usize>() + sep.len().saturating_mul(parts.len());
        check_len(total)?;
        Ok(Value::from(parts.join(sep)))
    });
    add(m, "sortAlpha", Signature::fixed(&[Ty::Any]), |a| {
        let v = crate::support::arg(a, 0);
        let mut items = match v {
            Value::List(_) | Value::Bytes(_) => strslice(v),
            Value::Object(o) if o.kind_name() == "slice" => strslice(v),
            other => vec![strval(other)],
        };
        items.sort();
        Ok(string_list(items))
    });
}

/// A Go string result built from bytes: invalid UTF-8 (a multi-byte rune cut by a byte
/// index) becomes U+FFFD, as Helm's output encoder shows it.
fn text(bytes: Vec<u8>) -> Value {
    match String::from_utf8(bytes) {
        Ok(s) => Value::from(s),
        Err(e) => Value::from(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

/// goutils' `AbbreviateFull` (errors give "", which sprig returns).
fn abbreviate_full(s: &[u8], offset: i64, max_width: i64) -> Vec<u8> {
    let len = s.len() as i64;
    if s.is_empty() || max_width < 4 {
        return Vec::new();
    }
    if len <= max_width {
        return s.to_vec();
    }
    let mut offset = offset.min(len);
    if len - offset < max_width - 3 {
        offset = len - (max_width - 3);
    }
    let mut out = Vec::new();
    if offset <= 4 {
        out.extend_from_slice(&s[..(max_width - 3) as usize]);
        out.extend_from_slice(b"...");
        return out;
    }
    if max_width < 7 {
        return Vec::new();
    }
    out.extend_from_slice(b"...");
    if offset + max_width - 3 < len {
        out.extend(abbreviate_full(&s[offset as usize..], 0, max_width - 3));
    } else {
        out.extend_from_slice(&s[(len - (max_width - 3)) as usize..]);
    }
    out
}

/// Go's `strings.Title`: the first letter of every word to titlecase, words separated by
/// anything but letters, digits and `_`.
fn title(s: &str) -> String {
    let mut prev = ' ';
    s.chars()
        .map(|c| {
            let sep = if prev.is_ascii() {
                !(prev.is_ascii_alphanumeric() || prev == '_')
            } else {
                !(is_letter(prev) || is_digit(prev)) && is_space(prev)
            };
            prev = c;
            if sep { to_title(c) } else { c }
        })
        .collect()
}

/// goutils' `Uncapitalize`: the first rune after whitespace to lowercase.
fn untitle(s: &str) -> String {
    let mut next = true;
    s.chars()
        .map(|c| {
            if is_space(c) {
                next = true;
                c
            } else if next {
                next = false;
                to_lower(c)
            } else {
                c
            }
        })
        .collect()
}

/// goutils' `SwapCase`: upper and title to lower, lower to title after whitespace and to
/// upper elsewhere.
fn swap_case(s: &str) -> String {
    let mut whitespace = true;
    s.chars()
        .map(|c| {
            if is_upper(c) || is_title(c) {
                whitespace = false;
                to_lower(c)
            } else if is_lower(c) {
                if whitespace {
                    whitespace = false;
                    to_title(c)
                } else {
                    to_upper(c)
                }
            } else {
                whitespace = is_space(c);
                c
            }
        })
        .collect()
}

/// goutils' `DeleteWhiteSpace`, byte by byte: when anything is deleted, every other byte is
/// written back as the rune of that value (so multi-byte text turns into Latin-1 mojibake).
fn delete_white_space(s: &str) -> String {
    if !s.bytes().any(is_space_byte) {
        return s.to_owned();
    }
    s.bytes()
        .filter(|&b| !is_space_byte(b))
        .map(char::from)
        .collect()
}

/// goutils' `Initials`, byte by byte as well.
fn initials(s: &str) -> String {
    let mut out = String::new();
    let mut gap = true;
    for b in s.bytes() {
        if is_space_byte(b) {
            gap = true;
        } else if gap {
            out.push(char::from(b));
            gap = false;
        }
    }
    out
}

/// Go's runtime panic for a string slice out of range.
fn bounds(msg: String) -> go_template::CallError {
    fail(format!("runtime error: slice bounds out of range {msg}"))
}

/// Sprig's `substring`: `s[:end]` for a negative start, `s[start:]` for a negative or too
/// large end, `s[start:end]` otherwise, with Go's panics when those are out of range.
fn substr(start: i64, end: i64, s: &str) -> Result<Value, go_template::CallError> {
    let len = s.len() as i64;
    let b = s.as_bytes();
    if start < 0 {
        if end < 0 {
            return Err(bounds(format!("[:{end}]")));
        }
        if end > len {
            return Err(bounds(format!("[:{end}] with length {len}")));
        }
        return Ok(text(b[..end as usize].to_vec()));
    }
    if end < 0 || end > len {
        if start > len {
            return Err(bounds(format!("[{start}:{len}]")));
        }
        return Ok(text(b[start as usize..].to_vec()));
    }
    if start > end {
        return Err(bounds(format!("[{start}:{end}]")));
    }
    Ok(text(b[start as usize..end as usize].to_vec()))
}

/// `strings.Repeat`, bounded.
fn repeat(s: &str, count: i64) -> Result<String, go_template::CallError> {
    if count < 0 {
        return Err(fail("strings: negative Repeat count"));
    }
    let total = (s.len() as u128) * (count as u128);
    if total > MAX_STRING_BYTES as u128 {
        check_len(usize::try_from(total).unwrap_or(usize::MAX))?;
    }
    Ok(s.repeat(count as usize))
}

/// Sprig's `indent`: the pad before the text and after every newline.
fn indent(spaces: i64, v: &str, prefix: &str) -> Result<String, go_template::CallError> {
    let pad = repeat(" ", spaces)?;
    let lines = v.bytes().filter(|&b| b == b'\n').count() + 1;
    check_len(v.len().saturating_add(lines.saturating_mul(pad.len())))?;
    Ok(format!(
        "{prefix}{pad}{}",
        v.replace('\n', &format!("\n{pad}"))
    ))
}

/// goutils' `WrapCustom` on bytes: break at the last space before the width, long words
/// kept whole (`wrap`) or cut (`wrapWith`).
fn wrap(
    s: &[u8],
    width: i64,
    sep: &[u8],
    wrap_long: bool,
) -> Result<Vec<u8>, go_template::CallError> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let width = usize::try_from(width.max(1)).unwrap_or(usize::MAX);
    let len = s.len();
    let mut offset = 0usize;
    let mut out = Vec::new();
    while len - offset > width {
        if out.len() > MAX_STRING_BYTES {
            check_len(out.len())?;
        }
        if s[offset] == b' ' {
            offset += 1;
            continue;
        }
        let end = width + offset + 1;
        match s[offset..end].iter().rposition(|&b| b == b' ') {
            Some(p) => {
                out.extend_from_slice(&s[offset..offset + p]);
                out.extend_from_slice(sep);
                offset += p + 1;
            }
            None if wrap_long => {
                out.extend_from_slice(&s[offset..offset + width]);
                out.extend_from_slice(sep);
                offset += width;
            }
            None => {
                let end = width + offset;
                match s[end..].iter().position(|&b| b == b' ') {
                    Some(p) => {
                        out.extend_from_slice(&s[offset..end + p]);
                        out.extend_from_slice(sep);
                        offset = end + p + 1;
                    }
                    None => {
                        out.extend_from_slice(&s[offset..]);
                        offset = len;
                    }
                }
            }
        }
    }
    out.extend_from_slice(&s[offset..]);
    check_len(out.len())?;
    Ok(out)
}

/// `fmt.Sprintf("%q", s)`: Go's double-quoted literal, printable runes kept as they are.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if is_go_printable(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
fn is_go_printable(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    if c == ' ' {
        return true;
    }
    !matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::Surrogate
            | G::PrivateUse
            | G::Unassigned
            | G::SpaceSeparator
            | G::LineSeparator
            | G::ParagraphSeparator
    )
}

/// Sprig's `strslice`: a list's elements as strings with nils left out; any other value a
/// one-element list (none for nil).
pub(crate) fn strslice(v: &Value) -> Vec<String> {
    match v {
        Value::List(l) => l
            .iter()
            .filter(|x| !matches!(x, Value::Nil))
            .map(strval)
            .collect(),
        Value::Bytes(b) => b.iter().map(|x| x.to_string()).collect(),
        Value::Nil => Vec::new(),
        // A typed slice (`[]string`, `[]int`) reached through reflection.
        Value::Object(o) if o.kind_name() == "slice" => match o.as_value() {
            Some(plain @ Value::List(_)) => strslice(&plain),
            _ => vec![strval(v)],
        },
        other => vec![strval(other)],
    }
}

/// `strings.SplitN` (n < 0: all pieces; n == 0: none; an empty separator splits into runes).
fn go_split<'a>(s: &'a str, sep: &str, n: i64) -> Vec<&'a str> {
    if n == 0 {
        return Vec::new();
    }
    if sep.is_empty() {
        let mut out: Vec<&str> = Vec::new();
        let mut rest = s;
        while let Some(c) = rest.chars().next() {
            if n > 0 && out.len() as i64 == n - 1 {
                break;
            }
            out.push(&rest[..c.len_utf8()]);
            rest = &rest[c.len_utf8()..];
        }
        if !rest.is_empty() {
            out.push(rest);
        }
        return out;
    }
    if n < 0 {
        s.split(sep).collect()
    } else {
        s.splitn(usize::try_from(n).unwrap_or(usize::MAX), sep)
            .collect()
    }
}

/// Sprig's `split` result: `{_0: …, _1: …}`.
fn numbered(parts: Vec<&str>) -> Value {
    go_template::typed::string_map(
        parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| (format!("_{i}"), p.to_owned())),
    )
}

#[cfg(test)]
mod tests;
