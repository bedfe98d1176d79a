//! Who may pull and who may push: accounts checked with HTTP Basic.
//!
//! The node account pulls only; the sync account pulls and pushes; write credentials push. Auth
//! is always on in a cluster; [`Accounts::open`] (no accounts at all) exists for local use and
//! benchmarks. Passwords are kept as SHA-256 hashes and compared without early exit; neither a
//! password nor its hash reaches a log line or an error message.

use base64::Engine;

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
}

/// Why a request is not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// No or unreadable credentials, or wrong ones: 401 with a challenge.
    Unauthenticated,
    /// Valid credentials without the right: 403.
    Forbidden,
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
        }
    }

    /// No account yet (everything refused until accounts are added).
    pub fn new() -> Self {
        Self::default()
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

    /// Checks an `Authorization` header for `needed` access.
    pub fn check(&self, authorization: Option<&str>, needed: Access) -> Result<(), Denied> {
        if self.open {
            return Ok(());
        }
        let (user, password) = authorization
            .and_then(parse_basic)
            .ok_or(Denied::Unauthenticated)?;
        let hash = sha256(&password);
        let account = self
            .accounts
            .iter()
            .find(|a| {
                a.username == user
                    && a.password_sha256
                        .iter()
                        .zip(hash.iter())
                        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
                        == 0
            })
            .ok_or(Denied::Unauthenticated)?;
        if account.access >= needed {
            Ok(())
        } else {
            Err(Denied::Forbidden)
        }
    }

    /// Whether no credentials are required.
    pub fn is_open(&self) -> bool {
        self.open
    }
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
