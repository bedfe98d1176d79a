//! Regular expressions with Go's `regexp` semantics on the `regex` crate: Go's syntax
//! (Perl classes `\d`, `\w`, `\s`, `\b` are ASCII-only, `[` inside a class is literal,
//! `\Q…\E`), Go's iteration over empty matches, Go's `$name` expansion in replacements and
//! Go's compile errors (`error parsing regexp: missing closing ): …`).

mod syntax;

use go_template::{CallError, FuncMap, Signature, Ty, Value};
use regex::Regex;

use crate::support::{add, check_len, fail, int_arg, str_arg, string_list};
use crate::unicode::{is_digit, is_letter};

const S: Ty = Ty::String;

/// Compiles a Go pattern; the error is Go's `regexp.Compile` error text.
fn compile(pattern: &str) -> Result<Regex, String> {
    let translated = syntax::translate(pattern)?;
    regex::RegexBuilder::new(&translated)
        .octal(true)
        .build()
        .map_err(|e| syntax::rust_error(pattern, &translated, &e))
}

/// `regexp.MustCompile`'s panic.
fn must_compile(pattern: &str) -> Result<Regex, CallError> {
    compile(pattern).map_err(|e| fail(format!("regexp: Compile({}): {e}", quote_pattern(pattern))))
}

/// The error form of `regexp.Compile`.
fn try_compile(pattern: &str) -> Result<Regex, CallError> {
    compile(pattern).map_err(fail)
}

/// Go's `quote` in regexp's panic message: a raw string when it can be one.
fn quote_pattern(p: &str) -> String {
    if p.chars()
        .all(|c| c == '\t' || (c != '`' && c != '\u{FEFF}' && !c.is_control()))
    {
        format!("`{p}`")
    } else {
        crate::strings::go_quote(p)
    }
}

type Compiler = fn(&str) -> Result<Regex, CallError>;

pub(crate) fn register(m: &mut FuncMap) {
    add(m, "regexMatch", Signature::fixed(&[S, S]), |a| {
        let s = str_arg(a, 1)?;
        Ok(Value::Bool(
            compile(str_arg(a, 0)?).is_ok_and(|re| re.is_match(s)),
        ))
    });
    add(m, "mustRegexMatch", Signature::fixed(&[S, S]), |a| {
        let re = try_compile(str_arg(a, 0)?)?;
        Ok(Value::Bool(re.is_match(str_arg(a, 1)?)))
    });
    for (name, comp) in [
        ("regexFindAll", must_compile as Compiler),
        ("mustRegexFindAll", try_compile),
    ] {
        add(m, name, Signature::fixed(&[S, S, Ty::Int]), move |a| {
            let re = comp(str_arg(a, 0)?)?;
            let s = str_arg(a, 1)?;
            let found = find_all(&re, s, int_arg(a, 2)?);
            Ok(string_list(
                found.into_iter().map(|(b, e)| s[b..e].to_owned()),
            ))
        });
    }
    for (name, comp) in [
        ("regexFind", must_compile as Compiler),
        ("mustRegexFind", try_compile),
    ] {
        add(m, name, Signature::fixed(&[S, S]), move |a| {
            let re = comp(str_arg(a, 0)?)?;
            let s = str_arg(a, 1)?;
            Ok(Value::from(re.find(s).map_or("", |m| m.as_str())))
        });
    }
    for (name, comp) in [
        ("regexReplaceAll", must_compile as Compiler),
        ("mustRegexReplaceAll", try_compile),
    ] {
        add(m, name, Signature::fixed(&[S, S, S]), move |a| {
            let re = comp(str_arg(a, 0)?)?;
            replace_all(&re, str_arg(a, 1)?, str_arg(a, 2)?, false)
        });
    }
    for (name, comp) in [
        ("regexReplaceAllLiteral", must_compile as Compiler),
        ("mustRegexReplaceAllLiteral", try_compile),
    ] {
        add(m, name, Signature::fixed(&[S, S, S]), move |a| {
            let re = comp(str_arg(a, 0)?)?;
            replace_all(&re, str_arg(a, 1)?, str_arg(a, 2)?, true)
        });
    }
    for (name, comp) in [
        ("regexSplit", must_compile as Compiler),
        ("mustRegexSplit", try_compile),
    ] {
        add(m, name, Signature::fixed(&[S, S, Ty::Int]), move |a| {
            let pattern = str_arg(a, 0)?;
            let re = comp(pattern)?;
            Ok(string_list(split(
                &re,
                pattern,
                str_arg(a, 1)?,
                int_arg(a, 2)?,
            )))
        });
    }
    add(m, "regexQuoteMeta", Signature::fixed(&[S]), |a| {
        let mut out = String::new();
        for c in str_arg(a, 0)?.chars() {
            if r"\.+*?()|[]{}^$".contains(c) {
                out.push('\\');
            }
            out.push(c);
        }
        Ok(Value::from(out))
    });
}

/// The width of the rune at `pos`, 1 at the end (Go steps past the end that way).
fn width_at(s: &str, pos: usize) -> usize {
    s[pos..].chars().next().map_or(1, char::len_utf8)
}

/// `FindAllStringIndex(s, n)`: successive matches, an empty match right after the previous
/// match skipped, at most `n` (all when n < 0).
fn find_all(re: &Regex, s: &str, n: i64) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let limit = if n < 0 { usize::MAX } else { n as usize };
    let mut pos = 0;
    let mut prev_end = None;
    while out.len() < limit && pos <= s.len() {
        let Some(m) = re.find_at(s, pos) else { break };
        let mut accept = true;
        if m.end() == pos {
            if Some(m.start()) == prev_end {
                accept = false;
            }
            pos += width_at(s, pos);
        } else {
            pos = m.end();
        }
        prev_end = Some(m.end());
        if accept {
            out.push((m.start(), m.end()));
        }
    }
    out
}

/// `Regexp.Split`.
fn split(re: &Regex, pattern: &str, s: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    if !pattern.is_empty() && s.is_empty() {
        return vec![String::new()];
    }
    let mut out = Vec::new();
    let (mut beg, mut end) = (0, 0);
    for (start, stop) in find_all(re, s, n) {
        if n > 0 && out.len() as i64 == n - 1 {
            break;
        }
        end = start;
        if stop != 0 {
            out.push(s[beg..end].to_owned());
        }
        beg = stop;
    }
    if end != s.len() {
        out.push(s[beg..].to_owned());
    }
    out
}

/// `ReplaceAllString` / `ReplaceAllLiteralString`.
fn replace_all(re: &Regex, src: &str, repl: &str, literal: bool) -> Result<Value, CallError> {
    let mut out = String::new();
    let mut last_end = 0;
    let mut search = 0;
    while search <= src.len() {
        let Some(caps) = re.captures_at(src, search) else {
            break;
        };
        let Some(m) = caps.get(0) else { break };
        out.push_str(&src[last_end..m.start()]);
        if m.end() > last_end || m.start() == 0 {
            if literal {
                out.push_str(repl);
            } else {
                expand(&mut out, repl, re, &caps);
            }
            if out.len() > crate::support::MAX_STRING_BYTES {
                check_len(out.len())?;
            }
        }
        last_end = m.end();
        let width = src[search..].chars().next().map_or(0, char::len_utf8);
        if search + width > m.end() {
            search += width;
        } else if search + 1 > m.end() {
            search += 1;
        } else {
            search = m.end();
        }
    }
    out.push_str(&src[last_end..]);
    Ok(Value::from(out))
}

/// `Regexp.Expand`: `$1`, `${1}`, `$name`, `${name}` (a name is the longest run of letters,
/// digits and `_`, so `$1x` names group `1x`), `$$` for `$`; a malformed `$` is kept.
fn expand(out: &mut String, template: &str, re: &Regex, caps: &regex::Captures<'_>) {
    let mut t = template;
    while let Some(i) = t.find('$') {
        out.push_str(&t[..i]);
        t = &t[i + 1..];
        if let Some(rest) = t.strip_prefix('$') {
            out.push('$');
            t = rest;
            continue;
        }
        let Some((name, rest)) = extract(t) else {
            out.push('$');
            continue;
        };
        t = rest;
        let group = match group_number(name) {
            Some(n) => caps.get(n),
            None => re
                .capture_names()
                .position(|g| g == Some(name))
                .and_then(|i| caps.get(i)),
        };
        if let Some(g) = group {
            out.push_str(g.as_str());
        }
    }
    out.push_str(t);
}

/// The group name after a `$` and what follows it.
fn extract(s: &str) -> Option<(&str, &str)> {
    let (brace, body) = match s.strip_prefix('{') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let len: usize = body
        .chars()
        .take_while(|&c| is_letter(c) || is_digit(c) || c == '_')
        .map(char::len_utf8)
        .sum();
    if len == 0 {
        return None;
    }
    let name = &body[..len];
    let rest = &body[len..];
    if brace {
        return rest.strip_prefix('}').map(|r| (name, r));
    }
    Some((name, rest))
}

/// A group number: ASCII digits without a leading zero, below 10^8.
fn group_number(name: &str) -> Option<usize> {
    if !name.bytes().all(|b| b.is_ascii_digit())
        || name.len() > 1 && name.starts_with('0')
        || name.len() > 8
    {
        return None;
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(p: &str) -> Regex {
        compile(p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn empty_matches_follow_go() {
        let r = re("a*");
        let found: Vec<&str> = find_all(&r, "baaac", -1)
            .into_iter()
            .map(|(b, e)| &"baaac"[b..e])
            .collect();
        assert_eq!(found, ["", "aaa", ""]);
        assert_eq!(
            replace_all(&r, "baaac", "-", false)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .as_deref(),
            Some("-b-c-")
        );
    }

    #[test]
    fn expansion_follows_go() {
        let r = re("(?P<first>a)(b)");
        let run = |t: &str| {
            replace_all(&r, "abab", t, false)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
        };
        assert_eq!(run("$2$1").as_deref(), Some("baba"));
        assert_eq!(run("$1x").as_deref(), Some(""));
        assert_eq!(run("${1}x").as_deref(), Some("axax"));
        assert_eq!(run("$first-$$-$").as_deref(), Some("a-$-$a-$-$"));
    }

    #[test]
    fn perl_classes_are_ascii() {
        assert!(!re(r"^\w$").is_match("é"));
        assert!(re(r"^\W$").is_match("é"));
        assert!(!re(r"^\d$").is_match("٣"));
        assert!(re(r"^[\d\s]+$").is_match("1 2"));
        assert!(re(r"^[a[]+$").is_match("a[a"));
        assert!(re(r"\bb").is_match("a b"));
        assert!(re(r"^a{$").is_match("a{"));
        assert!(re(r"^\Q.*\E$").is_match(".*"));
    }
}
