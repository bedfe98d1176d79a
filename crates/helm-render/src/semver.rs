//! Semantic versions and ranges as `github.com/Masterminds/semver/v3` reads them (Helm's
//! `version`, `kubeVersion` and dependency `version` fields): loose versions (`v1.2`, `1`),
//! and constraints with `=`, `!=`, `>`, `<`, `>=`, `<=`, `~`, `^`, wildcards, hyphen ranges,
//! `,`/space for AND and `||` for OR.

use std::cmp::Ordering;

/// A parsed version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
    /// Pre-release identifiers (after `-`), empty when none.
    pub pre: String,
    /// Build metadata (after `+`), empty when none.
    pub build: String,
}

fn ident_ok(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

impl Version {
    /// `semver.NewVersion`: `v` prefix allowed, minor and patch optional.
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let (rest, build) = match s.split_once('+') {
            Some((r, b)) => {
                if !ident_ok(b) {
                    return None;
                }
                (r, b)
            }
            None => (s, ""),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((c, p)) => {
                if !ident_ok(p) {
                    return None;
                }
                // Numeric pre-release identifiers may not have leading zeros.
                if p.split('.').any(|i| {
                    i.len() > 1 && i.starts_with('0') && i.chars().all(|c| c.is_ascii_digit())
                }) {
                    return None;
                }
                (c, p)
            }
            None => (rest, ""),
        };
        let mut nums = [0u64; 3];
        let parts: Vec<&str> = core.split('.').collect();
        if parts.is_empty() || parts.len() > 3 {
            return None;
        }
        for (i, p) in parts.iter().enumerate() {
            if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            nums[i] = p.parse().ok()?;
        }
        Some(Version {
            major: nums[0],
            minor: nums[1],
            patch: nums[2],
            pre: pre.into(),
            build: build.into(),
        })
    }

    fn cmp_core(&self, o: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(o.major, o.minor, o.patch))
            .then_with(|| cmp_pre(&self.pre, &o.pre))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

fn cmp_pre(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    let mut ai = a.split('.');
    let mut bi = b.split('.');
    loop {
        match (ai.next(), bi.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let o = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(m), Ok(n)) => m.cmp(&n),
                    (Ok(_), Err(_)) => Ordering::Less,
                    (Err(_), Ok(_)) => Ordering::Greater,
                    _ => x.cmp(y),
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    Tilde,
    Caret,
}

#[derive(Clone, Debug)]
struct Term {
    op: Op,
    v: Version,
    /// Which of minor / patch were wildcards or absent (`1` → minor and patch dirty).
    minor_dirty: bool,
    patch_dirty: bool,
    major_dirty: bool,
    has_pre: bool,
}

/// A constraint: OR of ANDs of terms.
#[derive(Clone, Debug)]
pub struct Constraint(Vec<Vec<Term>>);

impl Constraint {
    /// `semver.NewConstraint`; `None` where Masterminds would refuse it.
    pub fn parse(s: &str) -> Option<Constraint> {
        let mut ors = Vec::new();
        for group in s.split("||") {
            let group = rewrite_hyphens(group.trim())?;
            let mut ands = Vec::new();
            let tokens = tokenize(&group);
            if tokens.is_empty() {
                return None;
            }
            for t in tokens {
                ands.extend(parse_term(&t)?);
            }
            ors.push(ands);
        }
        Some(Constraint(ors))
    }

    /// Whether `v` satisfies the constraint.
    pub fn check(&self, v: &Version) -> bool {
        self.0.iter().any(|ands| {
            // A pre-release version matches only terms that name a pre-release.
            if !v.pre.is_empty() && !ands.iter().any(|t| t.has_pre) {
                return false;
            }
            ands.iter().all(|t| t.check(v))
        })
    }
}

/// Whether `version` is within `range` (Helm's `IsCompatibleRange`): false when either does
/// not parse.
pub fn compatible(range: &str, version: &str) -> bool {
    match (Constraint::parse(range), Version::parse(version)) {
        (Some(c), Some(v)) => c.check(&v),
        _ => false,
    }
}

fn rewrite_hyphens(s: &str) -> Option<String> {
    // "1.2 - 1.4" → ">= 1.2, <= 1.4"
    let parts: Vec<&str> = s.split(" - ").collect();
    match parts.as_slice() {
        [_] => Some(s.to_owned()),
        [a, b] => Some(format!(">={} <={}", a.trim(), b.trim())),
        _ => None,
    }
}

fn tokenize(s: &str) -> Vec<String> {
    // Operators may be separated from their versions by spaces; terms by spaces or commas.
    let mut out: Vec<String> = Vec::new();
    let mut pending_op = String::new();
    for raw in s.split(|c: char| c == ',' || c.is_whitespace()) {
        if raw.is_empty() {
            continue;
        }
        if raw.chars().all(|c| "=!<>~^".contains(c)) {
            pending_op.push_str(raw);
            continue;
        }
        out.push(format!("{pending_op}{raw}"));
        pending_op.clear();
    }
    if !pending_op.is_empty() {
        out.push(pending_op);
    }
    out
}

fn parse_term(t: &str) -> Option<Vec<Term>> {
    let ops = [
        ("!=", Op::Ne),
        (">=", Op::Ge),
        ("=>", Op::Ge),
        ("<=", Op::Le),
        ("=<", Op::Le),
        ("~>", Op::Tilde),
        (">", Op::Gt),
        ("<", Op::Lt),
        ("=", Op::Eq),
        ("~", Op::Tilde),
        ("^", Op::Caret),
    ];
    let (op, rest) = ops
        .iter()
        .find_map(|(p, o)| t.strip_prefix(p).map(|r| (*o, r)))
        .unwrap_or((Op::Eq, t));
    let rest = rest.strip_prefix('v').unwrap_or(rest);
    let (core, tail) = match rest.find(['-', '+']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let wild = |p: &str| matches!(p, "x" | "X" | "*");
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    let major_dirty = wild(parts[0]);
    let minor_dirty = parts.len() < 2 || wild(parts[1]) || major_dirty;
    let patch_dirty = parts.len() < 3 || wild(parts[2]) || minor_dirty;
    let num = |i: usize| -> Option<String> {
        match parts.get(i) {
            Some(p) if !wild(p) => Some((*p).to_owned()),
            _ => Some("0".into()),
        }
    };
    let vs = format!("{}.{}.{}{}", num(0)?, num(1)?, num(2)?, tail);
    let v = Version::parse(&vs)?;
    let has_pre = !v.pre.is_empty();
    Some(vec![Term {
        op,
        v,
        minor_dirty,
        patch_dirty,
        major_dirty,
        has_pre,
    }])
}

impl Term {
    fn check(&self, v: &Version) -> bool {
        let c = &self.v;
        let o = v.cmp_core(c);
        match self.op {
            Op::Eq => {
                if self.major_dirty {
                    return true;
                }
                if self.minor_dirty {
                    return v.major == c.major;
                }
                if self.patch_dirty {
                    return v.major == c.major && v.minor == c.minor;
                }
                o == Ordering::Equal
            }
            Op::Ne => {
                if self.major_dirty {
                    return false;
                }
                if self.minor_dirty {
                    return v.major != c.major;
                }
                if self.patch_dirty {
                    return !(v.major == c.major && v.minor == c.minor);
                }
                o != Ordering::Equal
            }
            Op::Gt => {
                if self.major_dirty {
                    return false;
                }
                if self.minor_dirty {
                    return v.major > c.major;
                }
                if self.patch_dirty {
                    return v.major > c.major || (v.major == c.major && v.minor > c.minor);
                }
                o == Ordering::Greater
            }
            Op::Lt => o == Ordering::Less,
            Op::Ge => o != Ordering::Less,
            Op::Le => {
                if self.major_dirty {
                    return true;
                }
                if self.minor_dirty {
                    return v.major <= c.major;
                }
                if self.patch_dirty {
                    return v.major < c.major || (v.major == c.major && v.minor <= c.minor);
                }
                o != Ordering::Greater
            }
            Op::Tilde => {
                if o == Ordering::Less {
                    return false;
                }
                if self.major_dirty {
                    return true;
                }
                if self.minor_dirty {
                    return v.major == c.major;
                }
                v.major == c.major && v.minor == c.minor
            }
            Op::Caret => {
                if self.major_dirty {
                    return true;
                }
                if o == Ordering::Less {
                    return false;
                }
                if c.major > 0 || self.minor_dirty {
                    return v.major == c.major;
                }
                if c.minor > 0 || self.patch_dirty {
                    return v.major == 0 && v.minor == c.minor;
                }
                v.major == 0 && v.minor == 0 && v.patch == c.patch
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_as_masterminds_reads_them() {
        let rows = [
            (">=1.20.0", "1.32.0", true),
            (">=1.20.0-0", "v1.32.0", true),
            ("<1.20", "1.32.0", false),
            ("~1.2", "1.2.9", true),
            ("~1.2", "1.3.0", false),
            ("^1.2.3", "1.9.0", true),
            ("^1.2.3", "2.0.0", false),
            ("^0.2.3", "0.2.9", true),
            ("^0.2.3", "0.3.0", false),
            ("1.x", "1.5.0", true),
            ("1.x", "2.0.0", false),
            ("*", "3.0.0", true),
            (">= 1.2, < 2", "1.5.0", true),
            (">= 1.2 < 2", "2.0.0", false),
            ("1.0 - 2.0", "1.5.0", true),
            ("<1 || >=3", "3.1.0", true),
            ("<1 || >=3", "2.1.0", false),
            (">=1.0.0", "1.5.0-beta.1", false),
            ("0.x.x", "0.1.0", true),
        ];
        for (range, v, want) in rows {
            assert_eq!(compatible(range, v), want, "{range} vs {v}");
        }
        assert!(Version::parse("v1.2").is_some());
        assert!(Version::parse("1.2.3.4").is_none());
        assert!(Version::parse("abc").is_none());
    }
}
