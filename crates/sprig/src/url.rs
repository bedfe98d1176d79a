//! `urlParse` and `urlJoin`: Go's `net/url` parsing into sprig's dict, and `URL.String()`.

use go_template::{Func, FuncMap, Map, Signature, Ty, Value};

use crate::fargs::{call_err, str_arg};

pub(crate) fn register(m: &mut FuncMap) {
    m.insert(
        "urlParse".into(),
        Func::new(Signature::fixed(&[Ty::String]), |a: &[Value]| {
            let u = Url::parse(str_arg(a, 0))
                .map_err(|e| call_err(format!("unable to parse url: {e}")))?;
            let mut d = Map::new();
            let hostname = u.hostname();
            for (k, v) in [
                ("scheme", u.scheme),
                ("host", u.host),
                ("hostname", hostname),
                ("path", u.path),
                ("query", u.raw_query),
                ("opaque", u.opaque),
                ("fragment", u.fragment),
                ("userinfo", u.user.map(|u| u.string()).unwrap_or_default()),
            ] {
                d.insert(k.into(), Value::string(v));
            }
            Ok(Value::map(d))
        }),
    );
    m.insert(
        "urlJoin".into(),
        Func::new(Signature::fixed(&[Ty::Map]), |a: &[Value]| {
            let get = |k: &str| match &a[0] {
                Value::Map(m) => match m.borrow().get(k) {
                    Some(Value::String(s)) => s.to_string(),
                    _ => String::new(),
                },
                _ => String::new(),
            };
            let userinfo = get("userinfo");
            let user = if userinfo.is_empty() {
                None
            } else {
                let t = Url::parse(&format!("proto://{userinfo}@host"))
                    .map_err(|e| call_err(format!("unable to parse userinfo in dict: {e}")))?;
                t.user
            };
            let u = Url {
                scheme: get("scheme"),
                opaque: get("opaque"),
                user,
                host: get("host"),
                path: get("path"),
                raw_query: get("query"),
                fragment: get("fragment"),
                force_query: false,
            };
            Ok(Value::string(u.string()))
        }),
    );
}

#[derive(Clone, Debug, Default)]
struct User {
    name: String,
    password: Option<String>,
}

impl User {
    fn string(&self) -> String {
        let mut s = escape(&self.name, Mode::UserPassword);
        if let Some(p) = &self.password {
            s.push(':');
            s.push_str(&escape(p, Mode::UserPassword));
        }
        s
    }
}

#[derive(Clone, Debug, Default)]
struct Url {
    scheme: String,
    opaque: String,
    user: Option<User>,
    host: String,
    path: String,
    raw_query: String,
    fragment: String,
    force_query: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    UserPassword,
    Fragment,
}

fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if mode == Mode::Host && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => {
            return match mode {
                Mode::Path => c == b'?',
                Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
                Mode::Fragment => false,
                Mode::Host => true,
            };
        }
        _ => {}
    }
    !(mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*'))
}

fn escape(s: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if should_escape(b, mode) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    out
}

/// Go's `%q` of a string (enough for URLs: escapes quotes, backslashes and controls).
fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

fn unescape(s: &str, mode: Mode) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
                match (hex(i + 1), hex(i + 2)) {
                    (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
                    _ => {
                        let end = (i + 3).min(b.len());
                        let bad = String::from_utf8_lossy(&b[i..end]).into_owned();
                        return Err(format!("invalid URL escape {}", go_quote(&bad)));
                    }
                }
                i += 3;
            }
            c => {
                if mode == Mode::Host && c < 0x80 && should_escape(c, mode) {
                    return Err(format!(
                        "invalid character {} in host name",
                        go_quote(&(c as char).to_string())
                    ));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

fn parse_host(host: &str) -> Result<String, String> {
    if let Some(rest) = host.strip_prefix('[') {
        let Some(i) = rest.find(']') else {
            return Err("missing ']' in host".into());
        };
        let colon_port = &rest[i + 1..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", go_quote(colon_port)));
        }
    } else if let Some(i) = host.rfind(':') {
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", go_quote(colon_port)));
        }
    }
    unescape(host, Mode::Host)
}

impl Url {
    /// `url.Parse`, its error as `url.Error` prints it.
    fn parse(raw: &str) -> Result<Url, String> {
        let wrap = |e: String| format!("parse {}: {e}", go_quote(raw));
        let (rest, frag) = match raw.split_once('#') {
            Some((r, f)) => (r, Some(f)),
            None => (raw, None),
        };
        let mut u = Url::parse_no_fragment(rest).map_err(wrap)?;
        if let Some(f) = frag {
            u.fragment = unescape(f, Mode::Fragment).map_err(wrap)?;
        }
        Ok(u)
    }

    fn parse_no_fragment(raw: &str) -> Result<Url, String> {
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err("net/url: invalid control character in URL".into());
        }
        let mut u = Url::default();
        if raw == "*" {
            u.path = "*".into();
            return Ok(u);
        }
        let mut rest = raw;
        for (i, c) in raw.bytes().enumerate() {
            if c.is_ascii_alphabetic() {
                continue;
            }
            if c.is_ascii_digit() || c == b'+' || c == b'-' || c == b'.' {
                if i == 0 {
                    break;
                }
                continue;
            }
            if c == b':' {
                if i == 0 {
                    return Err("missing protocol scheme".into());
                }
                u.scheme = raw[..i].to_ascii_lowercase();
                rest = &raw[i + 1..];
            }
            break;
        }
        if rest.ends_with('?') && rest.matches('?').count() == 1 {
            u.force_query = true;
            rest = &rest[..rest.len() - 1];
        } else if let Some((r, q)) = rest.split_once('?') {
            u.raw_query = q.to_owned();
            rest = r;
        }
        if !rest.starts_with('/') {
            if !u.scheme.is_empty() {
                u.opaque = rest.to_owned();
                return Ok(u);
            }
            let segment = rest.split('/').next().unwrap_or("");
            if segment.contains(':') {
                return Err("first path segment in URL cannot contain colon".into());
            }
        }
        if (!u.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
            let after = &rest[2..];
            let (authority, path) = match after.find('/') {
                Some(i) => after.split_at(i),
                None => (after, ""),
            };
            match authority.rfind('@') {
                None => u.host = parse_host(authority)?,
                Some(i) => {
                    u.host = parse_host(&authority[i + 1..])?;
                    let info = &authority[..i];
                    let valid = info
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c));
                    if !valid {
                        return Err("net/url: invalid userinfo".into());
                    }
                    u.user = Some(match info.split_once(':') {
                        None => User {
                            name: unescape(info, Mode::UserPassword)?,
                            password: None,
                        },
                        Some((n, p)) => User {
                            name: unescape(n, Mode::UserPassword)?,
                            password: Some(unescape(p, Mode::UserPassword)?),
                        },
                    });
                }
            }
            rest = path;
        }
        u.path = unescape(rest, Mode::Path)?;
        Ok(u)
    }

    fn hostname(&self) -> String {
        let host = &self.host;
        if let Some(rest) = host.strip_prefix('[') {
            return rest.split(']').next().unwrap_or("").to_owned();
        }
        match host.rfind(':') {
            Some(i) => host[..i].to_owned(),
            None => host.clone(),
        }
    }

    /// `URL.String()`.
    fn string(&self) -> String {
        let mut buf = String::new();
        if !self.scheme.is_empty() {
            buf.push_str(&self.scheme);
            buf.push(':');
        }
        if !self.opaque.is_empty() {
            buf.push_str(&self.opaque);
        } else {
            if !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some() {
                if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                    buf.push_str("//");
                }
                if let Some(u) = &self.user {
                    buf.push_str(&u.string());
                    buf.push('@');
                }
                buf.push_str(&escape(&self.host, Mode::Host));
            }
            let path = if self.path == "*" {
                "*".to_owned()
            } else {
                escape(&self.path, Mode::Path)
            };
            if !path.is_empty() && !path.starts_with('/') && !self.host.is_empty() {
                buf.push('/');
            }
            if buf.is_empty() && path.split('/').next().unwrap_or("").contains(':') {
                buf.push_str("./");
            }
            buf.push_str(&path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            buf.push('?');
            buf.push_str(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            buf.push('#');
            buf.push_str(&escape(&self.fragment, Mode::Fragment));
        }
        buf
    }
}
