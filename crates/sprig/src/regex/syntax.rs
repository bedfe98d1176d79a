//! Go's regexp syntax rewritten for the `regex` crate, and Go's compile errors.
//!
//! The rewrite makes Go's meaning explicit where the crates differ: `\d \w \s \b` are ASCII
//! in Go, a `[` inside a class is a literal (the crate nests classes), `&&` and `~~` inside a
//! class are literals (the crate's set operations), a `{` that starts no valid repetition is
//! a literal, `\Q…\E` quotes, and `\1`…`\7` alone are errors while longer digit runs are
//! octal. Errors Go reports while parsing (unbalanced parentheses and brackets, a trailing
//! backslash, a repetition without argument or repeated twice, a count above 1000) are
//! found here so that they carry Go's words and the fragment Go quotes.

/// The error text `regexp.Compile` returns.
fn go_error(code: &str, expr: &str) -> String {
    format!("error parsing regexp: {code}: `{expr}`")
}

const MAX_REPEAT: u32 = 1000;

/// A valid `{n}`, `{n,}`, `{n,m}` at the start of `s`: its length and counts.
fn parse_repeat(s: &str) -> Option<(usize, u32, Option<u32>)> {
    let body = s.strip_prefix('{')?;
    let close = body.find('}')?;
    let inner = &body[..close];
    let (min, max) = match inner.split_once(',') {
        Some((a, b)) => (a, Some(b)),
        None => (inner, None),
    };
    let num = |t: &str| -> Option<u32> {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(
            t.parse::<u64>()
                .ok()
                .map_or(u32::MAX, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        )
    };
    let min = num(min)?;
    let max = match max {
        None => Some(min),
        Some("") => None,
        Some(m) => Some(num(m)?),
    };
    Some((close + 2, min, max))
}

/// Rewrites a Go pattern for the `regex` crate, or gives Go's parse error.
pub(crate) fn translate(p: &str) -> Result<String, String> {
    let mut out = String::with_capacity(p.len() + 8);
    let mut groups = 0usize;
    let mut i = 0;
    // Where the last repetition operator started, if the previous token was one; and
    // whether there is an expression a repetition could apply to.
    let mut last_repeat: Option<usize> = None;
    let mut have_operand = false;
    while i < p.len() {
        let rest = &p[i..];
        let c = rest.chars().next().unwrap_or('\0');
        let mut this_repeat = None;
        match c {
            '\\' => {
                let (text, used) = escape(p, i, false)?;
                out.push_str(&text);
                i += used;
                have_operand = true;
            }
            '[' => {
                let (text, used) = class(p, i)?;
                out.push_str(&text);
                i += used;
                have_operand = true;
            }
            '(' => {
                // `(?flags)` sets flags; `(?:`, `(?flags:`, `(?P<name>`, `(?<name>` open
                // a group like `(`.
                let head = if rest.starts_with("(?") {
                    match rest.find([')', ':', '>']) {
                        Some(e) => &rest[..=e],
                        None => return Err(go_error("missing closing )", p)),
                    }
                } else {
                    "("
                };
                if !head.ends_with(')') {
                    groups += 1;
                }
                out.push_str(head);
                i += head.len();
                have_operand = false;
            }
            ')' => {
                if groups == 0 {
                    return Err(go_error("unexpected )", p));
                }
                groups -= 1;
                out.push(')');
                i += 1;
                have_operand = true;
            }
            '|' => {
                out.push('|');
                i += 1;
                have_operand = false;
            }
            '*' | '+' | '?' | '{' => {
                let len = if c == '{' {
                    match parse_repeat(rest) {
                        Some((len, min, max)) => {
                            if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT || m < min) {
                                return Err(go_error("invalid repeat count", &rest[..len]));
                            }
                            len
                        }
                        None => {
                            out.push_str("\\{");
                            i += 1;
                            have_operand = true;
                            last_repeat = None;
                            continue;
                        }
                    }
                } else {
                    1
                };
                let len = if rest[len..].starts_with('?') {
                    len + 1
                } else {
                    len
                };
                if let Some(start) = last_repeat {
                    return Err(go_error(
                        "invalid nested repetition operator",
                        &p[start..i + len],
                    ));
                }
                if !have_operand {
                    return Err(go_error(
                        "missing argument to repetition operator",
                        &rest[..len],
                    ));
                }
                out.push_str(&rest[..len]);
                i += len;
                this_repeat = Some(i - len);
            }
            _ => {
                out.push(c);
                i += c.len_utf8();
                have_operand = !matches!(c, '^' | '$');
                if matches!(c, '^' | '$') {
                    // Go allows a repetition of an anchor (`^*`); so does the crate.
                    have_operand = true;
                }
            }
        }
        last_repeat = this_repeat;
    }
    if groups > 0 {
        return Err(go_error("missing closing )", p));
    }
    Ok(out)
}

/// The escape at `p[i]` (a backslash): its rewrite and its length.
fn escape(p: &str, i: usize, in_class: bool) -> Result<(String, usize), String> {
    let rest = &p[i + 1..];
    let Some(c) = rest.chars().next() else {
        return Err(go_error("trailing backslash at end of expression", ""));
    };
    let used = 1 + c.len_utf8();
    let text = match (c, in_class) {
        ('d', false) => "[0-9]".to_owned(),
        ('D', false) => "[^0-9]".to_owned(),
        ('w', false) => "[0-9A-Za-z_]".to_owned(),
        ('W', false) => "[^0-9A-Za-z_]".to_owned(),
        ('s', false) => r"[\t\n\f\r ]".to_owned(),
        ('S', false) => r"[^\t\n\f\r ]".to_owned(),
        ('d', true) => "0-9".to_owned(),
        ('D', true) => "[^0-9]".to_owned(),
        ('w', true) => "0-9A-Za-z_".to_owned(),
        ('W', true) => "[^0-9A-Za-z_]".to_owned(),
        ('s', true) => r"\t\n\f\r ".to_owned(),
        ('S', true) => r"[^\t\n\f\r ]".to_owned(),
        ('b', false) => r"(?-u:\b)".to_owned(),
        ('B', false) => r"(?-u:\B)".to_owned(),
        ('Q', false) => {
            let body = &rest[1..];
            let (lit, len) = match body.find(r"\E") {
                Some(e) => (&body[..e], 1 + 1 + e + 2),
                None => (body, 1 + 1 + body.len()),
            };
            return Ok((format!("(?:{})", regex::escape(lit)), len));
        }
        ('1'..='7', _) if !rest[1..].starts_with(|d: char| ('0'..='7').contains(&d)) => {
            return Err(go_error("invalid escape sequence", &p[i..i + used]));
        }
        ('8' | '9', _) => return Err(go_error("invalid escape sequence", &p[i..i + used])),
        ('0'..='7', _) => {
            let digits: String = rest
                .chars()
                .take(3)
                .take_while(|d| ('0'..='7').contains(d))
                .collect();
            let value = u32::from_str_radix(&digits, 8).unwrap_or(0);
            return Ok((format!("\\x{{{value:X}}}"), 1 + digits.len()));
        }
        _ => format!("\\{c}"),
    };
    Ok((text, used))
}

/// The class starting at `p[i]` (`[`): its rewrite and its length.
fn class(p: &str, i: usize) -> Result<(String, usize), String> {
    let mut out = String::from("[");
    let mut j = i + 1;
    if p[j..].starts_with('^') {
        out.push('^');
        j += 1;
    }
    let mut first = true;
    loop {
        let Some(c) = p[j..].chars().next() else {
            return Err(go_error("missing closing ]", &p[i..]));
        };
        match c {
            ']' if !first => {
                out.push(']');
                return Ok((out, j + 1 - i));
            }
            ']' => {
                out.push_str("\\]");
                j += 1;
            }
            '[' if p[j..].starts_with("[:") => match p[j + 2..].find(":]") {
                Some(e) => {
                    out.push_str(&p[j..j + 2 + e + 2]);
                    j += 2 + e + 2;
                }
                None => {
                    out.push_str("\\[");
                    j += 1;
                }
            },
            '[' | '&' | '~' => {
                out.push('\\');
                out.push(c);
                j += 1;
            }
            '\\' => {
                let (text, used) = escape(p, j, true)?;
                out.push_str(&text);
                j += used;
            }
            _ => {
                out.push(c);
                j += c.len_utf8();
            }
        }
        first = false;
    }
}

/// A compile error the `regex` crate found in a pattern the rewrite accepted, in Go's words
/// where they are known, quoting the fragment the crate points at.
pub(crate) fn rust_error(pattern: &str, translated: &str, err: &regex::Error) -> String {
    use regex_syntax::ast::ErrorKind as K;
    let Err(ast) = regex_syntax::ast::parse::Parser::new().parse(translated) else {
        return match err {
            regex::Error::CompiledTooBig(_) => go_error("expression too large", pattern),
            _ => go_error("invalid or unsupported Perl syntax", pattern),
        };
    };
    let span = ast.span();
    let fragment = translated
        .get(span.start.offset..span.end.offset)
        .unwrap_or(pattern);
    let code = match ast.kind() {
        K::ClassRangeInvalid | K::ClassRangeLiteral | K::UnicodeClassInvalid => {
            "invalid character class range"
        }
        K::EscapeUnrecognized
        | K::EscapeHexEmpty
        | K::EscapeHexInvalid
        | K::EscapeHexInvalidDigit
        | K::EscapeUnexpectedEof
        | K::ClassEscapeInvalid => "invalid escape sequence",
        K::GroupNameDuplicate { .. }
        | K::GroupNameEmpty
        | K::GroupNameInvalid
        | K::GroupNameUnexpectedEof => "invalid named capture",
        K::RepetitionCountInvalid | K::RepetitionCountDecimalEmpty | K::DecimalInvalid => {
            "invalid repeat count"
        }
        K::NestLimitExceeded(_) => "expression nests too deeply",
        _ => "invalid or unsupported Perl syntax",
    };
    go_error(code, fragment)
}
