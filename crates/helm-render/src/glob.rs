//! The two pattern languages Helm uses on chart paths: Go's `path/filepath.Match` (the
//! `.helmignore` rules, `--show-only`) and `github.com/gobwas/glob` with `/` as separator
//! (`.Files.Glob`).

/// Go's `filepath.ErrBadPattern`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("syntax error in pattern")]
pub struct BadPattern;

/// Go's `filepath.Match(pattern, name)` on `/`-separated paths.
pub fn path_match(pattern: &str, name: &str) -> Result<bool, BadPattern> {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Validate the whole pattern first, as Go reports a bad pattern even when an early part
    // already fails to match.
    validate(&p)?;
    Ok(match_from(&p, &n))
}

fn validate(p: &[char]) -> Result<(), BadPattern> {
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '\\' => {
                if i + 1 >= p.len() {
                    return Err(BadPattern);
                }
                i += 2;
            }
            '[' => {
                i = class_end(p, i + 1)?;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// Index just past a character class starting after `[` at `i`; checks its syntax.
fn class_end(p: &[char], mut i: usize) -> Result<usize, BadPattern> {
    if i < p.len() && p[i] == '^' {
        i += 1;
    }
    let mut first = true;
    loop {
        if i >= p.len() {
            return Err(BadPattern);
        }
        if p[i] == ']' && !first {
            return Ok(i + 1);
        }
        first = false;
        let lo = class_char(p, &mut i)?;
        if i < p.len() && p[i] == '-' {
            i += 1;
            let hi = class_char(p, &mut i)?;
            if hi < lo {
                return Err(BadPattern);
            }
        }
    }
}

fn class_char(p: &[char], i: &mut usize) -> Result<char, BadPattern> {
    if *i >= p.len() {
        return Err(BadPattern);
    }
    let c = p[*i];
    if c == '-' || c == ']' {
        return Err(BadPattern);
    }
    if c == '\\' {
        *i += 1;
        if *i >= p.len() {
            return Err(BadPattern);
        }
    }
    let c = p[*i];
    *i += 1;
    Ok(c)
}

fn class_matches(p: &[char], start: usize, c: char) -> (bool, usize) {
    let mut i = start;
    let negated = i < p.len() && p[i] == '^';
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            i += 1;
            break;
        }
        first = false;
        let Ok(lo) = class_char(p, &mut i) else {
            break;
        };
        let mut hi = lo;
        if i < p.len() && p[i] == '-' {
            i += 1;
            if let Ok(h) = class_char(p, &mut i) {
                hi = h;
            }
        }
        if lo <= c && c <= hi {
            matched = true;
        }
    }
    (matched != negated, i)
}

fn match_from(p: &[char], n: &[char]) -> bool {
    if p.is_empty() {
        return n.is_empty();
    }
    match p[0] {
        '*' => {
            let mut k = 0;
            loop {
                if match_from(&p[1..], &n[k..]) {
                    return true;
                }
                if k >= n.len() || n[k] == '/' {
                    return false;
                }
                k += 1;
            }
        }
        '?' => !n.is_empty() && n[0] != '/' && match_from(&p[1..], &n[1..]),
        '[' => {
            if n.is_empty() || n[0] == '/' {
                return false;
            }
            let (ok, end) = class_matches(p, 1, n[0]);
            ok && match_from(&p[end..], &n[1..])
        }
        '\\' => p.len() > 1 && !n.is_empty() && n[0] == p[1] && match_from(&p[2..], &n[1..]),
        c => !n.is_empty() && n[0] == c && match_from(&p[1..], &n[1..]),
    }
}

/// A compiled `gobwas/glob` pattern (separator `/`).
#[derive(Debug, Clone)]
pub struct Glob(Vec<Tok>);

#[derive(Debug, Clone)]
enum Tok {
    Lit(char),
    Any,
    Super,
    Single,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Alt(Vec<Vec<Tok>>),
}

impl Glob {
    /// Compiles a pattern; `None` where gobwas refuses it.
    pub fn new(pattern: &str) -> Option<Glob> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut i = 0;
        let toks = parse_seq(&chars, &mut i, false)?;
        if i != chars.len() {
            return None;
        }
        Some(Glob(toks))
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        let n: Vec<char> = name.chars().collect();
        glob_match(&self.0, &n, &mut |rest| rest.is_empty())
    }
}

fn parse_seq(p: &[char], i: &mut usize, in_alt: bool) -> Option<Vec<Tok>> {
    let mut out = Vec::new();
    while *i < p.len() {
        let c = p[*i];
        match c {
            '*' => {
                if p.get(*i + 1) == Some(&'*') {
                    out.push(Tok::Super);
                    *i += 2;
                } else {
                    out.push(Tok::Any);
                    *i += 1;
                }
            }
            '?' => {
                out.push(Tok::Single);
                *i += 1;
            }
            '\\' => {
                let e = *p.get(*i + 1)?;
                out.push(Tok::Lit(e));
                *i += 2;
            }
            '[' => {
                *i += 1;
                let negated = p.get(*i) == Some(&'!');
                if negated {
                    *i += 1;
                }
                let mut ranges = Vec::new();
                loop {
                    let c = *p.get(*i)?;
                    if c == ']' {
                        *i += 1;
                        break;
                    }
                    if p.get(*i + 1) == Some(&'-') && p.get(*i + 2).is_some_and(|c| *c != ']') {
                        let hi = p[*i + 2];
                        ranges.push((c, hi));
                        *i += 3;
                    } else {
                        ranges.push((c, c));
                        *i += 1;
                    }
                }
                out.push(Tok::Class { negated, ranges });
            }
            '{' => {
                *i += 1;
                let mut alts = Vec::new();
                loop {
                    alts.push(parse_seq(p, i, true)?);
                    match p.get(*i) {
                        Some(',') => *i += 1,
                        Some('}') => {
                            *i += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
                out.push(Tok::Alt(alts));
            }
            ',' | '}' if in_alt => return Some(out),
            _ => {
                out.push(Tok::Lit(c));
                *i += 1;
            }
        }
    }
    if in_alt {
        return None;
    }
    Some(out)
}

fn glob_match(toks: &[Tok], n: &[char], k: &mut dyn FnMut(&[char]) -> bool) -> bool {
    let Some((first, rest)) = toks.split_first() else {
        return k(n);
    };
    match first {
        Tok::Lit(c) => !n.is_empty() && n[0] == *c && glob_match(rest, &n[1..], k),
        Tok::Single => !n.is_empty() && n[0] != '/' && glob_match(rest, &n[1..], k),
        Tok::Class { negated, ranges } => {
            !n.is_empty()
                && n[0] != '/'
                && (ranges.iter().any(|(lo, hi)| *lo <= n[0] && n[0] <= *hi) != *negated)
                && glob_match(rest, &n[1..], k)
        }
        Tok::Any | Tok::Super => {
            let crosses = matches!(first, Tok::Super);
            let mut j = 0;
            loop {
                if glob_match(rest, &n[j..], k) {
                    return true;
                }
                if j >= n.len() || (!crosses && n[j] == '/') {
                    return false;
                }
                j += 1;
            }
        }
        Tok::Alt(alts) => alts
            .iter()
            .any(|alt| glob_match(alt, n, &mut |after: &[char]| glob_match(rest, after, k))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filepath_match_like_go() {
        assert_eq!(path_match("*.yaml", "a.yaml"), Ok(true));
        assert_eq!(path_match("*.yaml", "x/a.yaml"), Ok(false));
        assert_eq!(path_match("templates/*", "templates/a.yaml"), Ok(true));
        assert_eq!(path_match("[a-c]?", "bz"), Ok(true));
        assert_eq!(path_match("[^a-c]?", "bz"), Ok(false));
        assert_eq!(path_match("[", "a"), Err(BadPattern));
        assert_eq!(path_match("a\\*", "a*"), Ok(true));
    }

    #[test]
    fn gobwas_glob() {
        let g = Glob::new("files/*.txt").expect("compiles");
        assert!(g.matches("files/a.txt"));
        assert!(!g.matches("files/x/a.txt"));
        let g = Glob::new("files/**").expect("compiles");
        assert!(g.matches("files/x/a.txt"));
        let g = Glob::new("{a,b}/*.{json,yaml}").expect("compiles");
        assert!(g.matches("b/c.yaml"));
        assert!(!g.matches("c/c.yaml"));
        let g = Glob::new("[!a]*").expect("compiles");
        assert!(g.matches("bcd"));
        assert!(!g.matches("abc"));
    }
}
