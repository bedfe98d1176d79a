//! `semver` (a Masterminds `*semver.Version` object) and `semverCompare` (Masterminds semver
//! v3.3 constraints: operators, `x`/`*` wildcards, hyphen ranges, `||`, and its prerelease
//! rule: a prerelease version matches only an AND-group that names a prerelease itself).
//!
//! `release-plan`'s `Constraint` is close but not this (it ignores the group-level
//! prerelease rule and accepts `""`), so the constraint grammar is read here with the same
//! regular expressions Masterminds uses.

use std::cmp::Ordering;
use std::sync::LazyLock;

use go_template::{CallError, Func, FuncMap, Object, Signature, Ty, Value};
use regex::Regex;

use crate::fargs::{call_err, str_arg};

const VERSION: &str = "*semver.Version";

pub(crate) fn register(m: &mut FuncMap) {
    m.insert(
        "semver".into(),
        Func::new(Signature::fixed(&[Ty::String]), |a: &[Value]| {
            let v = Version::parse(str_arg(a, 0)).map_err(call_err)?;
            Ok(Value::object(v))
        }),
    );
    m.insert(
        "semverCompare".into(),
        Func::new(
            Signature::fixed(&[Ty::String, Ty::String]),
            |a: &[Value]| {
                let c = Constraints::parse(str_arg(a, 0)).map_err(call_err)?;
                let v = Version::parse(str_arg(a, 1)).map_err(call_err)?;
                Ok(Value::Bool(c.check(&v)))
            },
        ),
    );
}

/// A Masterminds `Version` (`semver.NewVersion`: loose, `v1.2` and `1` parse too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
    /// Prerelease identifiers (after `-`), empty when none.
    pub pre: String,
    /// Build metadata (after `+`), empty when none.
    pub metadata: String,
    original: String,
}

fn ident_ok(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

impl Version {
    /// `semver.NewVersion`; the error is Masterminds' text.
    pub fn parse(text: &str) -> Result<Version, String> {
        const INVALID: &str = "Invalid Semantic Version";
        let body = text.strip_prefix('v').unwrap_or(text);
        let core_end = body.find(['-', '+']).unwrap_or(body.len());
        let (core, rest) = body.split_at(core_end);
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() > 3
            || parts
                .iter()
                .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(INVALID.into());
        }
        let (pre, metadata) = match rest.strip_prefix('-') {
            Some(r) => match r.split_once('+') {
                Some((p, m)) => (p, Some(m)),
                None => (r, None),
            },
            None => ("", rest.strip_prefix('+')),
        };
        if rest.starts_with('-') && !pre.split('.').all(ident_ok) {
            return Err(INVALID.into());
        }
        if let Some(m) = metadata
            && !m.split('.').all(ident_ok)
        {
            return Err(INVALID.into());
        }
        let num = |p: &str| {
            p.parse::<u64>().map_err(|_| {
                format!(
                    "Error parsing version segment: strconv.ParseUint: parsing {}: value out of range",
                    go_quote(p)
                )
            })
        };
        let mut n = [0u64; 3];
        for (i, p) in parts.iter().enumerate() {
            n[i] = num(p)?;
        }
        for part in pre.split('.').filter(|_| !pre.is_empty()) {
            if part.bytes().all(|b| b.is_ascii_digit()) && part.len() > 1 && part.starts_with('0') {
                return Err("Version segment starts with 0".into());
            }
        }
        Ok(Version {
            major: n[0],
            minor: n[1],
            patch: n[2],
            pre: pre.to_owned(),
            metadata: metadata.unwrap_or("").to_owned(),
            original: text.to_owned(),
        })
    }

    fn string(&self) -> String {
        let mut s = format!("{}.{}.{}", self.major, self.minor, self.patch);
        if !self.pre.is_empty() {
            s.push('-');
            s.push_str(&self.pre);
        }
        if !self.metadata.is_empty() {
            s.push('+');
            s.push_str(&self.metadata);
        }
        s
    }

    /// `Compare`: numbers, then prerelease (a release is greater); metadata ignored.
    fn compare(&self, o: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(o.major, o.minor, o.patch))
            .then_with(|| match (self.pre.is_empty(), o.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_pre(&self.pre, &o.pre),
            })
    }
}

impl std::fmt::Display for Version {
    /// `Version.String()`: `major.minor.patch[-pre][+metadata]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.string())
    }
}

/// Whether `version` is within `range` (Masterminds constraints, as Helm's
/// `IsCompatibleRange` checks `kubeVersion` and dependency versions): false when either does
/// not parse.
pub fn compatible(range: &str, version: &str) -> bool {
    match (Constraints::parse(range), Version::parse(version)) {
        (Ok(c), Ok(v)) => c.check(&v),
        _ => false,
    }
}

fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

fn compare_pre(a: &str, b: &str) -> Ordering {
    let (pa, pb): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    for i in 0..pa.len().max(pb.len()) {
        let (s, o) = (
            pa.get(i).copied().unwrap_or(""),
            pb.get(i).copied().unwrap_or(""),
        );
        let d = compare_pre_part(s, o);
        if d != Ordering::Equal {
            return d;
        }
    }
    Ordering::Equal
}

fn compare_pre_part(s: &str, o: &str) -> Ordering {
    if s == o {
        return Ordering::Equal;
    }
    if s.is_empty() {
        return Ordering::Less;
    }
    if o.is_empty() {
        return Ordering::Greater;
    }
    match (s.parse::<u64>(), o.parse::<u64>()) {
        (Err(_), Err(_)) => s.cmp(o),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Ok(a), Ok(b)) => {
            if a > b {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
    }
}

impl Object for Version {
    fn type_name(&self) -> String {
        VERSION.into()
    }

    fn field(&self, name: &str) -> Option<Value> {
        Some(match name {
            "Major" => Value::Int64(self.major as i64),
            "Minor" => Value::Int64(self.minor as i64),
            "Patch" => Value::Int64(self.patch as i64),
            "Prerelease" => Value::string(self.pre.as_str()),
            "Metadata" => Value::string(self.metadata.as_str()),
            "Original" => Value::string(self.original.as_str()),
            "String" => Value::string(self.string()),
            _ => return None,
        })
    }

    fn is_method(&self, name: &str) -> bool {
        matches!(
            name,
            "Major"
                | "Minor"
                | "Patch"
                | "Prerelease"
                | "Metadata"
                | "Original"
                | "String"
                | "Compare"
                | "LessThan"
                | "GreaterThan"
                | "Equal"
        )
    }

    fn method(&self, name: &str, args: &[Value]) -> Result<Value, CallError> {
        let want = usize::from(matches!(
            name,
            "Compare" | "LessThan" | "GreaterThan" | "Equal"
        ));
        if args.len() != want {
            return Err(CallError::Exec(format!(
                "wrong number of args for {name}: want {want} got {}",
                args.len()
            )));
        }
        if want == 0 {
            return self.field(name).ok_or_else(|| {
                CallError::Exec(format!("can't evaluate field {name} in type {VERSION}"))
            });
        }
        let other = match &args[0] {
            Value::Object(o) => o.as_any().and_then(|a| a.downcast_ref::<Version>()),
            _ => None,
        };
        let Some(other) = other else {
            return Err(CallError::Exec(format!(
                "wrong type for value; expected {VERSION}; got {}",
                args[0].type_name()
            )));
        };
        let ord = self.compare(other);
        Ok(match name {
            "Compare" => Value::Int(match ord {
                Ordering::Less => -1,
                Ordering::Equal => 0,
                Ordering::Greater => 1,
            }),
            "LessThan" => Value::Bool(ord == Ordering::Less),
            "GreaterThan" => Value::Bool(ord == Ordering::Greater),
            _ => Value::Bool(ord == Ordering::Equal),
        })
    }

    fn format(&self) -> String {
        self.string()
    }

    fn to_json(&self) -> Option<serde_json::Value> {
        Some(serde_json::Value::String(self.string()))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn equals(&self, other: &dyn Object) -> Option<bool> {
        let o = other.as_any()?.downcast_ref::<Version>()?;
        Some(self == o)
    }
}

const CV: &str = r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";
const OPS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";
const WS: &str = r"[\t\n\f\r ]";

fn re(pattern: String) -> Regex {
    Regex::new(&pattern.replace(r"\s", WS)).expect("Masterminds' constraint grammar compiles")
}

static CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| re(format!(r"^\s*({OPS})\s*({CV})\s*$")));
static RANGE: LazyLock<Regex> = LazyLock::new(|| re(format!(r"\s*({CV})\s+-\s+({CV})\s*")));
static FIND: LazyLock<Regex> = LazyLock::new(|| re(format!(r"({OPS})\s*({CV})")));
static VALID: LazyLock<Regex> = LazyLock::new(|| {
    re(format!(
        r"^(\s*({OPS})\s*({CV})\s*)((?:\s+|,\s*)({OPS})\s*({CV})\s*)*$"
    ))
});

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    TildeOrEqual,
    NotEqual,
    Gt,
    Lt,
    Ge,
    Le,
    Tilde,
    Caret,
}

#[derive(Debug)]
struct Constraint {
    op: Op,
    con: Version,
    dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

fn is_x(s: &str) -> bool {
    matches!(s, "x" | "X" | "*")
}

impl Constraint {
    fn parse(text: &str) -> Result<Constraint, String> {
        let m = CONSTRAINT
            .captures(text)
            .ok_or_else(|| format!("improper constraint: {text}"))?;
        let g = |i: usize| m.get(i).map_or("", |x| x.as_str());
        let op = match g(1) {
            "" | "=" => Op::TildeOrEqual,
            "!=" => Op::NotEqual,
            ">" => Op::Gt,
            "<" => Op::Lt,
            ">=" | "=>" => Op::Ge,
            "<=" | "=<" => Op::Le,
            "~" | "~>" => Op::Tilde,
            _ => Op::Caret,
        };
        let (mut ver, mut dirty, mut minor_dirty, mut patch_dirty) =
            (g(2).to_owned(), false, false, false);
        let (major, minor, patch, pre) = (g(3), g(4), g(5), g(6));
        if is_x(major) || major.is_empty() {
            ver = format!("0.0.0{pre}");
            dirty = true;
        } else if is_x(minor.trim_start_matches('.')) || minor.is_empty() {
            minor_dirty = true;
            dirty = true;
            ver = format!("{major}.0.0{pre}");
        } else if is_x(patch.trim_start_matches('.')) || patch.is_empty() {
            dirty = true;
            patch_dirty = true;
            ver = format!("{major}{minor}.0{pre}");
        }
        let con = Version::parse(&ver).map_err(|_| "constraint Parser Error".to_owned())?;
        Ok(Constraint {
            op,
            con,
            dirty,
            minor_dirty,
            patch_dirty,
        })
    }

    fn check(&self, v: &Version, include_pre: bool) -> bool {
        if !v.pre.is_empty() && !include_pre {
            return false;
        }
        let c = &self.con;
        let cmp = v.compare(c);
        match self.op {
            Op::TildeOrEqual if self.dirty => self.tilde(v),
            Op::TildeOrEqual => cmp == Ordering::Equal,
            Op::NotEqual => {
                if self.dirty {
                    if c.major != v.major {
                        return true;
                    }
                    if c.minor != v.minor && !self.minor_dirty {
                        return true;
                    } else if self.minor_dirty {
                        return false;
                    } else if c.patch != v.patch && !self.patch_dirty {
                        return true;
                    } else if self.patch_dirty {
                        if !v.pre.is_empty() || !c.pre.is_empty() {
                            return compare_pre(&v.pre, &c.pre) != Ordering::Equal;
                        }
                        return false;
                    }
                }
                cmp != Ordering::Equal
            }
            Op::Gt => {
                if !self.dirty {
                    return cmp == Ordering::Greater;
                }
                if v.major != c.major {
                    return v.major > c.major;
                }
                if self.minor_dirty {
                    return false;
                }
                if self.patch_dirty {
                    return v.minor > c.minor;
                }
                cmp == Ordering::Greater
            }
            Op::Lt => cmp == Ordering::Less,
            Op::Ge => cmp != Ordering::Less,
            Op::Le => {
                if !self.dirty {
                    return cmp != Ordering::Greater;
                }
                !(v.major > c.major
                    || (v.major == c.major && v.minor > c.minor && !self.minor_dirty))
            }
            Op::Tilde => self.tilde(v),
            Op::Caret => {
                if cmp == Ordering::Less {
                    return false;
                }
                if c.major > 0 || self.minor_dirty {
                    return v.major == c.major;
                }
                if v.major > 0 {
                    return false;
                }
                if c.minor > 0 || self.patch_dirty {
                    return v.minor == c.minor;
                }
                if v.minor > 0 {
                    return false;
                }
                c.patch == v.patch
            }
        }
    }

    fn tilde(&self, v: &Version) -> bool {
        let c = &self.con;
        if v.compare(c) == Ordering::Less {
            return false;
        }
        if c.major == 0 && c.minor == 0 && c.patch == 0 && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        v.major == c.major && (v.minor == c.minor || self.minor_dirty)
    }
}

/// Masterminds' `Constraints`: OR-groups of AND-ed constraints.
#[derive(Debug)]
struct Constraints {
    groups: Vec<(Vec<Constraint>, bool)>,
}

impl Constraints {
    /// `semver.NewConstraint`.
    fn parse(text: &str) -> Result<Constraints, String> {
        let mut rewritten = text.to_owned();
        for m in RANGE.captures_iter(text) {
            let whole = m.get(0).map_or("", |x| x.as_str());
            let lo = m.get(1).map_or("", |x| x.as_str());
            let hi = m.get(11).map_or("", |x| x.as_str());
            rewritten = rewritten.replacen(whole, &format!(">= {lo}, <= {hi}"), 1);
        }
        let mut groups = Vec::new();
        for part in rewritten.split("||") {
            if !VALID.is_match(part) {
                return Err(format!("improper constraint: {part}"));
            }
            let mut found: Vec<&str> = FIND.find_iter(part).map(|m| m.as_str()).collect();
            if found.is_empty() {
                found.push(part);
            }
            let mut cs = Vec::new();
            let mut has_pre = false;
            for s in found {
                let c = Constraint::parse(s)?;
                has_pre |= !c.con.pre.is_empty();
                cs.push(c);
            }
            groups.push((cs, has_pre));
        }
        Ok(Constraints { groups })
    }

    /// `Check`.
    fn check(&self, v: &Version) -> bool {
        self.groups
            .iter()
            .any(|(cs, pre)| cs.iter().all(|c| c.check(v, *pre)))
    }
}
