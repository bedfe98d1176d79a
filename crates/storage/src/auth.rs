//! Who may pull and who may push: accounts checked with HTTP Basic, or with bearer tokens of
//! our own token service ([`token`]) when [`Accounts::with_tokens`] turns it on.
//!
//! The node account pulls only; the sync account pulls and pushes; write credentials push. Auth
//! is always on in a cluster; [`Accounts::open`] (no accounts at all) exists for local use and
//! benchmarks. Passwords are kept as SHA-256 hashes and compared without early exit; neither a
//! password, its hash nor a token reaches a log line or an error message.
//!
//! With tokens on, a client that sends Basic is still admitted directly (the agent injects
//! Basic); a client that waits for the challenge is sent to the token endpoint, trades its
//! Basic credentials for a token scoped to the repository and the actions it needs, and
//! presents that token.

pub mod token;

use base64::Engine;

pub use token::{Scope, TokenKey};

/// What an account may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Read (pull).
    Pull,
    /// Read and write (push, delete).
    Push,
}

#[derive(Clone)]
struct Account {
    username: String,
    password_sha256: [u8; 32],
    access: Access,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("username", &self.username)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

/// The accounts a listener accepts.
#[derive(Clone, Debug, Default)]
pub struct Accounts {
    accounts: Vec<Account>,
    open: bool,
    tokens: Option<TokenKey>,
}

/// Why a request is not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// No or unreadable credentials, or wrong ones: 401 with a challenge.
    Unauthenticated,
    /// Valid credentials without the right: 403.
    Forbidden,
    /// A bearer token that is not ours or has expired: 401, `error="invalid_token"`.
    InvalidToken,
    /// A valid token whose scopes do not cover the request, for an account that may do it:
    /// 401, `error="insufficient_scope"`, so the client asks for a wider token.
    InsufficientScope,
}

fn sha256(s: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, s.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl Accounts {
    /// No authentication at all (local use, benchmarks): every request may pull and push.
    pub fn open() -> Self {
        Self {
            accounts: Vec::new(),
            open: true,
            tokens: None,
        }
    }

    /// No account yet (everything refused until accounts are added).
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns the token service on: challenges become `Bearer`, tokens signed with `key` are
    /// accepted, and the token endpoint issues them. Basic keeps working.
    pub fn with_tokens(mut self, key: TokenKey) -> Self {
        self.tokens = Some(key);
        self
    }

    /// The token key, when the token service is on (and the accounts are not open).
    pub fn tokens(&self) -> Option<&TokenKey> {
        self.tokens.as_ref().filter(|_| !self.open)
    }

    /// Adds an account.
    pub fn with(mut self, username: &str, password: &str, access: Access) -> Self {
        self.accounts.push(Account {
            username: username.to_owned(),
            password_sha256: sha256(password),
            access,
        });
        self
    }

    /// Checks an `Authorization` header for `needed` access (Basic only; see
    /// [`Accounts::check_request`] for tokens).
    pub fn check(&self, authorization: Option<&str>, needed: Access) -> Result<(), Denied> {
        self.check_request(authorization, needed, None, 0)
    }

    /// Checks an `Authorization` header — Basic, or (tokens on) Bearer — for `needed` access
    /// to `repository` (`None`: the `/v2/` ping) at `now` (Unix seconds).
    pub fn check_request(
        &self,
        authorization: Option<&str>,
        needed: Access,
        repository: Option<&str>,
        now: u64,
    ) -> Result<(), Denied> {
        if self.open {
            return Ok(());
        }
        if let (Some(key), Some(token)) = (&self.tokens, authorization.and_then(parse_bearer)) {
            let claims = key.verify(token, now).map_err(|_| Denied::InvalidToken)?;
            if claims.admits(repository, needed) {
                return Ok(());
            }
            let may = self
                .accounts
                .iter()
                .any(|a| a.username == claims.sub && a.access >= needed);
            return Err(if may {
                Denied::InsufficientScope
            } else {
                Denied::Forbidden
            });
        }
        let access = self.authenticate(authorization)?;
        if access >= needed {
            Ok(())
        } else {
            Err(Denied::Forbidden)
        }
    }

    /// Checks Basic credentials; returns the account's name and rights.
    pub fn authenticate_basic(
        &self,
        authorization: Option<&str>,
    ) -> Result<(String, Access), Denied> {
        let (user, _) = authorization
            .and_then(parse_basic)
            .ok_or(Denied::Unauthenticated)?;
        let access = self.authenticate(authorization)?;
        Ok((user, access))
    }

    /// Checks a username and password (the token endpoint's OAuth2 password grant).
    pub fn authenticate_password(&self, user: &str, password: &str) -> Result<Access, Denied> {
        let hash = sha256(password);
        self.accounts
            .iter()
            .find(|a| {
                a.username == user
                    && a.password_sha256
                        .iter()
                        .zip(hash.iter())
                        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
                        == 0
            })
            .map(|a| a.access)
            .ok_or(Denied::Unauthenticated)
    }

    fn authenticate(&self, authorization: Option<&str>) -> Result<Access, Denied> {
        let (user, password) = authorization
            .and_then(parse_basic)
            .ok_or(Denied::Unauthenticated)?;
        self.authenticate_password(&user, &password)
    }

    /// Whether no credentials are required.
    pub fn is_open(&self) -> bool {
        self.open
    }
}

fn parse_bearer(header: &str) -> Option<&str> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

fn parse_basic(header: &str) -> Option<(String, String)> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
    }

    #[test]
    fn rights_table() {
        let accounts = Accounts::new().with("node", "n-secret", Access::Pull).with(
            "sync",
            "s-secret",
            Access::Push,
        );
        let cases = [
            (None, Access::Pull, Err(Denied::Unauthenticated)),
            (
                Some("Bearer abc".to_owned()),
                Access::Pull,
                Err(Denied::Unauthenticated),
            ),
            (
                Some("Basic !!!".to_owned()),
                Access::Pull,
                Err(Denied::Unauthenticated),
            ),
            (Some(basic("node", "n-secret")), Access::Pull, Ok(())),
            (
                Some(basic("node", "n-secret")),
                Access::Push,
                Err(Denied::Forbidden),
            ),
            (
                Some(basic("node", "s-secret")),
                Access::Pull,
                Err(Denied::Unauthenticated),
            ),
            (Some(basic("sync", "s-secret")), Access::Push, Ok(())),
            (Some(basic("sync", "s-secret")), Access::Pull, Ok(())),
            (
                Some(basic("sync", "")),
                Access::Pull,
                Err(Denied::Unauthenticated),
            ),
            (
                Some(basic("nobody", "n-secret")),
                Access::Pull,
                Err(Denied::Unauthenticated),
            ),
        ];
        for (header, needed, expected) in cases {
            assert_eq!(
                accounts.check(header.as_deref(), needed),
                expected,
                "{header:?} {needed:?}"
            );
        }
        assert_eq!(Accounts::open().check(None, Access::Push), Ok(()));
        assert_eq!(
            Accounts::new().check(Some(&basic("a", "b")), Access::Pull),
            Err(Denied::Unauthenticated)
        );
    }

    #[test]
    fn debug_hides_passwords() {
        let accounts = Accounts::new().with("node", "n-secret", Access::Pull);
        let shown = format!("{accounts:?}");
        assert!(
            shown.contains("node") && !shown.contains("n-secret"),
            "{shown}"
        );
    }
}
