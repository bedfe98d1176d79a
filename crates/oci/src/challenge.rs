//! `WWW-Authenticate` challenges (RFC 9110 §11.6.1) and the Docker token flow's pure parts: the
//! token request URL and the token response.
//!
//! The parser accepts several challenges per header value and several header values, quoted
//! strings with `\` escapes and commas inside, case-insensitive schemes and parameter names, and
//! a `token68` after the scheme. Like distribution's client it tolerates a missing comma between
//! parameters; it refuses unterminated quotes, parameters without a value and stray characters.

use std::fmt;

use crate::encoding::query_escape;

/// Why a `WWW-Authenticate` value could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChallengeError {
    /// No challenge at all.
    #[error("WWW-Authenticate holds no challenge")]
    Empty,
    /// `name=` without a value.
    #[error("WWW-Authenticate: parameter {name:?} has no value")]
    MissingValue {
        /// The parameter name.
        name: String,
    },
    /// A quoted string without its closing quote.
    #[error("WWW-Authenticate: unterminated quoted string starting at byte {at}")]
    UnterminatedQuote {
        /// Byte offset of the opening quote.
        at: usize,
    },
    /// Something that is neither a parameter, a separator nor a scheme.
    #[error("WWW-Authenticate: unexpected character {found:?} at byte {at}")]
    Unexpected {
        /// Byte offset.
        at: usize,
        /// The character.
        found: char,
    },
    /// The realm is not an `http://` or `https://` URL without fragment.
    #[error("token realm {realm:?} is not an http(s) URL")]
    InvalidRealm {
        /// The realm (truncated).
        realm: String,
    },
}

/// An authentication scheme.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AuthScheme {
    /// `Basic`.
    Basic,
    /// `Bearer` (Docker token auth).
    Bearer,
    /// Any other scheme, as sent.
    Other(String),
}

impl AuthScheme {
    fn from_token(t: &str) -> Self {
        if t.eq_ignore_ascii_case("basic") {
            Self::Basic
        } else if t.eq_ignore_ascii_case("bearer") {
            Self::Bearer
        } else {
            Self::Other(t.to_owned())
        }
    }
}

impl fmt::Display for AuthScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Basic => f.write_str("Basic"),
            Self::Bearer => f.write_str("Bearer"),
            Self::Other(s) => f.write_str(s),
        }
    }
}

/// One challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The scheme.
    pub scheme: AuthScheme,
    /// Parameters in order; names lowercased, values unescaped.
    pub params: Vec<(String, String)>,
    /// A `token68` given instead of parameters.
    pub token68: Option<String>,
}

impl Challenge {
    /// The first value of parameter `name` (case-insensitive).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `realm`.
    pub fn realm(&self) -> Option<&str> {
        self.param("realm")
    }

    /// `service`.
    pub fn service(&self) -> Option<&str> {
        self.param("service")
    }

    /// The first `scope` value as sent (may hold several space-separated scopes).
    pub fn scope(&self) -> Option<&str> {
        self.param("scope")
    }

    /// Every scope: all `scope` parameters, split on spaces.
    pub fn scopes(&self) -> Vec<&str> {
        self.params
            .iter()
            .filter(|(k, _)| k == "scope")
            .flat_map(|(_, v)| v.split(' '))
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// `error` (e.g. `insufficient_scope`, `invalid_token`).
    pub fn error(&self) -> Option<&str> {
        self.param("error")
    }

    /// Whether the scheme is `Bearer`.
    pub fn is_bearer(&self) -> bool {
        self.scheme == AuthScheme::Bearer
    }

    /// Whether the scheme is `Basic`.
    pub fn is_basic(&self) -> bool {
        self.scheme == AuthScheme::Basic
    }
}

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

fn is_token68_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-._~+/".contains(&c)
}

struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn skip_ws_and_commas(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b',')) {
            self.i += 1;
        }
    }

    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.i;
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    fn unexpected(&self) -> ChallengeError {
        let found = self.s[self.i..].chars().next().unwrap_or('\0');
        ChallengeError::Unexpected { at: self.i, found }
    }

    /// Whether a `token BWS "="` starts here (an auth-param rather than a new scheme).
    fn at_param(&self) -> bool {
        let mut probe = Cursor {
            s: self.s,
            i: self.i,
        };
        if probe.take_while(is_tchar).is_empty() {
            return false;
        }
        probe.skip_ws();
        probe.peek() == Some(b'=')
    }

    fn quoted(&mut self) -> Result<String, ChallengeError> {
        let start = self.i;
        self.i += 1; // opening quote
        let mut out = String::new();
        loop {
            let Some(c) = self.s[self.i..].chars().next() else {
                return Err(ChallengeError::UnterminatedQuote { at: start });
            };
            self.i += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\\' => {
                    let Some(e) = self.s[self.i..].chars().next() else {
                        return Err(ChallengeError::UnterminatedQuote { at: start });
                    };
                    self.i += e.len_utf8();
                    out.push(e);
                }
                c => out.push(c),
            }
        }
    }

    /// `token BWS "=" BWS ( token / quoted-string )`; the caller checked [`at_param`].
    fn param(&mut self) -> Result<(String, String), ChallengeError> {
        let name = self.take_while(is_tchar).to_ascii_lowercase();
        self.skip_ws();
        self.i += 1; // '='
        self.skip_ws();
        let value = match self.peek() {
            Some(b'"') => self.quoted()?,
            Some(c) if is_tchar(c) => self.take_while(is_tchar).to_owned(),
            _ => return Err(ChallengeError::MissingValue { name }),
        };
        Ok((name, value))
    }

    /// A `token68` (`abc==`) at the cursor, if the rest of the element is one.
    fn token68(&mut self) -> Option<String> {
        let start = self.i;
        let mut probe = Cursor {
            s: self.s,
            i: self.i,
        };
        if probe.take_while(is_token68_char).is_empty() {
            return None;
        }
        probe.take_while(|c| c == b'=');
        let end = probe.i;
        probe.skip_ws();
        if matches!(probe.peek(), None | Some(b',')) {
            self.i = end;
            Some(self.s[start..end].to_owned())
        } else {
            None
        }
    }

    /// A challenge; the caller checked that a token (the scheme) starts here.
    fn challenge(&mut self) -> Result<Challenge, ChallengeError> {
        let scheme = self.take_while(is_tchar);
        let mut challenge = Challenge {
            scheme: AuthScheme::from_token(scheme),
            params: Vec::new(),
            token68: None,
        };
        self.skip_ws();
        if !self.at_param() {
            challenge.token68 = self.token68();
        }
        loop {
            self.skip_ws_and_commas();
            if self.peek().is_none() || !self.at_param() {
                return Ok(challenge);
            }
            challenge.params.push(self.param()?);
            self.skip_ws();
            if !matches!(self.peek(), None | Some(b',')) && !self.at_param() {
                return Err(self.unexpected());
            }
        }
    }
}

/// Parses one `WWW-Authenticate` header value into its challenges.
pub fn parse_challenges(value: &str) -> Result<Vec<Challenge>, ChallengeError> {
    let mut cursor = Cursor { s: value, i: 0 };
    let mut out = Vec::new();
    loop {
        cursor.skip_ws_and_commas();
        match cursor.peek() {
            None => break,
            Some(c) if is_tchar(c) => out.push(cursor.challenge()?),
            Some(_) => return Err(cursor.unexpected()),
        }
    }
    if out.is_empty() {
        Err(ChallengeError::Empty)
    } else {
        Ok(out)
    }
}

/// Parses every `WWW-Authenticate` header value of a response.
pub fn parse_all<'a, I: IntoIterator<Item = &'a str>>(
    values: I,
) -> Result<Vec<Challenge>, ChallengeError> {
    let mut out = Vec::new();
    for v in values {
        if !v.trim().is_empty() {
            out.extend(parse_challenges(v)?);
        }
    }
    if out.is_empty() {
        Err(ChallengeError::Empty)
    } else {
        Ok(out)
    }
}

/// `repository:<name>:<actions>`, e.g. `repository:system/deckhouse:pull`.
pub fn repository_scope(repository: &str, actions: &[&str]) -> String {
    format!("repository:{repository}:{}", actions.join(","))
}

/// The query of a token request: one `scope=` per scope, then `service=`, escaped like Go's
/// `url.QueryEscape` (as containerd and docker send them).
pub fn token_query<S: AsRef<str>>(service: Option<&str>, scopes: &[S]) -> String {
    let mut parts: Vec<String> = scopes
        .iter()
        .map(|s| format!("scope={}", query_escape(s.as_ref())))
        .collect();
    if let Some(service) = service {
        parts.push(format!("service={}", query_escape(service)));
    }
    parts.join("&")
}

/// The full token request URL: `realm` plus [`token_query`], joined with `?` or `&`.
pub fn token_url<S: AsRef<str>>(
    realm: &str,
    service: Option<&str>,
    scopes: &[S],
) -> Result<String, ChallengeError> {
    let lower = realm.get(..8).unwrap_or(realm).to_ascii_lowercase();
    let http = lower.starts_with("http://") || lower.starts_with("https://");
    let clean = !realm.contains(['#', ' ', '\r', '\n', '\t']);
    if !http || !clean {
        return Err(ChallengeError::InvalidRealm {
            realm: realm.chars().take(200).collect(),
        });
    }
    let query = token_query(service, scopes);
    if query.is_empty() {
        return Ok(realm.to_owned());
    }
    let sep = if realm.contains('?') { '&' } else { '?' };
    Ok(format!("{realm}{sep}{query}"))
}

/// Why a token response could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not JSON of the expected shape.
    #[error("token response is not valid JSON: {0}")]
    Malformed(#[source] serde_json::Error),
    /// Neither `token` nor `access_token` holds a value.
    #[error("token response holds neither 'token' nor 'access_token'")]
    NoToken,
}

/// The answer of a token endpoint.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
pub struct TokenResponse {
    /// The token (Docker).
    #[serde(default)]
    pub token: Option<String>,
    /// The token (OAuth2 name).
    #[serde(default)]
    pub access_token: Option<String>,
    /// Lifetime in seconds.
    #[serde(default)]
    pub expires_in: Option<u64>,
    /// Issue time (RFC 3339), if given.
    #[serde(default)]
    pub issued_at: Option<String>,
}

impl fmt::Debug for TokenResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Tokens are credentials: never print them.
        f.debug_struct("TokenResponse")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field(
                "access_token",
                &self.access_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_in", &self.expires_in)
            .field("issued_at", &self.issued_at)
            .finish()
    }
}

/// The lifetime assumed when `expires_in` is absent or too short to be meaningful.
pub const DEFAULT_TOKEN_LIFETIME_SECS: u64 = 60;
/// Lifetimes at or below this are treated as [`DEFAULT_TOKEN_LIFETIME_SECS`].
pub const MIN_TOKEN_LIFETIME_SECS: u64 = 30;

impl TokenResponse {
    /// Parses a token response and checks it carries a token.
    pub fn parse(bytes: &[u8]) -> Result<Self, TokenError> {
        let r: Self = serde_json::from_slice(bytes).map_err(TokenError::Malformed)?;
        if r.bearer_token().is_none() {
            return Err(TokenError::NoToken);
        }
        Ok(r)
    }

    /// `token`, else `access_token` (empty strings do not count).
    pub fn bearer_token(&self) -> Option<&str> {
        [&self.token, &self.access_token]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .find(|t| !t.is_empty())
    }

    /// Lifetime in seconds: `expires_in`, with absent or ≤ 30 s counted as 60 s.
    pub fn lifetime_secs(&self) -> u64 {
        match self.expires_in {
            Some(s) if s > MIN_TOKEN_LIFETIME_SECS => s,
            _ => DEFAULT_TOKEN_LIFETIME_SECS,
        }
    }
}

#[cfg(test)]
mod tests;
