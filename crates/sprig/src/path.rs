//! `base`, `dir`, `clean`, `ext`, `isAbs` (Go's `path`) and their `os…` twins (Go's
//! `path/filepath` on Linux, where both behave the same).

use go_template::{FuncMap, Signature, Ty, Value};

use crate::fargs::{str_arg, str_to_str};

pub(crate) fn register(m: &mut FuncMap) {
    for prefix in ["", "os"] {
        let name = |n: &str| {
            if prefix.is_empty() {
                n.to_owned()
            } else {
                let mut c = n.chars();
                let first = c.next().map(|f| f.to_ascii_uppercase()).unwrap_or_default();
                format!("{prefix}{first}{}", c.as_str())
            }
        };
        m.insert(name("base"), str_to_str(base));
        m.insert(name("dir"), str_to_str(dir));
        m.insert(name("clean"), str_to_str(clean));
        m.insert(name("ext"), str_to_str(|p| ext(p).to_owned()));
        m.insert(
            name("isAbs"),
            go_template::Func::new(Signature::fixed(&[Ty::String]), |args: &[Value]| {
                Ok(Value::Bool(str_arg(args, 0).starts_with('/')))
            }),
        );
    }
}

/// `path.Clean`: the shortest equivalent path, lexically.
pub(crate) fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// `path.Base`: the last element, trailing slashes removed; "." for "", "/" for all slashes.
fn base(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".into();
    }
    match trimmed.rfind('/') {
        Some(i) => trimmed[i + 1..].to_owned(),
        None => trimmed.to_owned(),
    }
}

/// `path.Dir`: everything up to the last slash, cleaned.
fn dir(path: &str) -> String {
    let upto = path.rfind('/').map_or(0, |i| i + 1);
    clean(&path[..upto])
}

/// `path.Ext`: from the last dot of the last element.
fn ext(path: &str) -> &str {
    for (i, c) in path.char_indices().rev() {
        match c {
            '/' => return "",
            '.' => return &path[i..],
            _ => {}
        }
    }
    ""
}
