//! `WWW-Authenticate` challenges (RFC 9110 §11.6.1): enough of the grammar for registries —
//! `Basic realm="…"` and `Bearer realm="…",service="…",scope="…"`, several challenges per header
//! line or several lines, quoted strings with escapes.
//!
//! Kept private and small on purpose: the shared model crate (`oci`) is getting the fuzzed
//! parser; this one switches to it when it lands.

/// One challenge: its scheme (lowercased) and parameters (names lowercased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Challenge {
    pub(crate) scheme: String,
    pub(crate) params: Vec<(String, String)>,
}

impl Challenge {
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t') {
            self.i += 1;
        }
    }
    fn skip_ws_commas(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b',') {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn token(&mut self) -> Option<&'a str> {
        let start = self.i;
        while self.i < self.s.len() && is_tchar(self.s[self.i]) {
            self.i += 1;
        }
        (self.i > start).then(|| std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default())
    }
    /// An unquoted value: lenient, up to the next comma or space (realms with `:` and `/` that
    /// should have been quoted still work).
    fn bare(&mut self) -> Option<&'a str> {
        let start = self.i;
        while self.i < self.s.len() && !matches!(self.s[self.i], b',' | b' ' | b'\t' | b'"') {
            self.i += 1;
        }
        (self.i > start).then(|| std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default())
    }

    fn quoted(&mut self) -> Option<String> {
        // at '"'
        self.i += 1;
        let mut out = Vec::new();
        while self.i < self.s.len() {
            match self.s[self.i] {
                b'"' => {
                    self.i += 1;
                    return String::from_utf8(out).ok();
                }
                b'\\' if self.i + 1 < self.s.len() => {
                    out.push(self.s[self.i + 1]);
                    self.i += 2;
                }
                c => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
        None
    }
}

/// Parses every challenge of every header value. Unparsable parts end the value's parsing;
/// what was parsed before is kept.
pub(crate) fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<Challenge> {
    let mut out = Vec::new();
    for value in values {
        let mut c = Cursor {
            s: value.as_bytes(),
            i: 0,
        };
        'challenges: loop {
            c.skip_ws_commas();
            let Some(scheme) = c.token() else { break };
            let mut challenge = Challenge {
                scheme: scheme.to_ascii_lowercase(),
                params: Vec::new(),
            };
            loop {
                c.skip_ws_commas();
                let save = c.i;
                let Some(name) = c.token() else {
                    out.push(challenge);
                    break 'challenges;
                };
                c.skip_ws();
                if c.peek() != Some(b'=') {
                    // A new challenge's scheme (or token68, which registries do not use).
                    c.i = save;
                    out.push(challenge);
                    continue 'challenges;
                }
                c.i += 1;
                c.skip_ws();
                let value = match c.peek() {
                    Some(b'"') => match c.quoted() {
                        Some(v) => v,
                        None => {
                            out.push(challenge);
                            break 'challenges;
                        }
                    },
                    _ => match c.bare() {
                        Some(v) => v.to_owned(),
                        None => {
                            out.push(challenge);
                            break 'challenges;
                        }
                    },
                };
                challenge.params.push((name.to_ascii_lowercase(), value));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_bearer_challenge() {
        let got = parse([
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
        ]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].scheme, "bearer");
        assert_eq!(got[0].param("realm"), Some("https://auth.example/token"));
        assert_eq!(got[0].param("service"), Some("registry.example"));
        assert_eq!(got[0].param("scope"), Some("repository:a/b:pull,push"));
    }

    #[test]
    fn several_challenges_spaces_escapes_and_tokens() {
        let got = parse([
            r#"Basic realm="a \"quoted\" realm" , Bearer realm=http://t/token, service = svc"#,
            "Negotiate",
        ]);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].scheme, "basic");
        assert_eq!(got[0].param("realm"), Some(r#"a "quoted" realm"#));
        assert_eq!(got[1].scheme, "bearer");
        assert_eq!(got[1].param("realm"), Some("http://t/token"));
        assert_eq!(got[1].param("service"), Some("svc"));
        assert_eq!(got[2].scheme, "negotiate");
    }

    #[test]
    fn garbage_never_panics() {
        for s in [
            "",
            ",,,",
            "=",
            "Bearer realm=\"unterminated",
            "Bearer =x",
            "\u{1F600}",
        ] {
            let _ = parse([s]);
        }
        assert_eq!(parse(["Bearer realm=\"unterminated"])[0].params.len(), 0);
    }
}
