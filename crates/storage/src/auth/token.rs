//! Short-lived bearer tokens of our own: the token service the read listener offers next to
//! Basic, in the Docker token-auth shape clients already speak (containerd, skopeo, Docker).
//!
//! A token is `base64url(claims JSON) "." base64url(HMAC-SHA256(key, claims))`. The claims name
//! the account, an expiry (Unix seconds) and the granted `repository:<name>:<actions>` scopes —
//! never more than the account may do. The key is the listener's own (random per process
//! unless a shared one is configured, so that several replicas behind one name accept each
//! other's tokens). It is no JWT on purpose: nobody but this listener has to read it, and an
//! HMAC needs no certificate to rotate.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::Access;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// How long a token is valid by default.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// The signing key and lifetime of issued tokens.
#[derive(Clone)]
pub struct TokenKey {
    key: ring::hmac::Key,
    lifetime: Duration,
    issued: Arc<AtomicU64>,
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKey")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// One requested or granted scope: `repository:<name>:<actions>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// The repository.
    pub name: String,
    /// `pull`, `push` (and whatever else was asked; only these two are ever granted).
    pub actions: Vec<String>,
}

impl Scope {
    /// Parses `repository:<name>:<a>,<b>`; other resource types (`registry:catalog:*`) and
    /// malformed scopes give `None` and are ignored, as the token protocol asks.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("repository:")?;
        let (name, actions) = rest.rsplit_once(':')?;
        if name.is_empty() {
            return None;
        }
        Some(Self {
            name: name.to_owned(),
            actions: actions
                .split(',')
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
        })
    }

    /// The scope a request on `repository` needing `access` asks for.
    pub fn needed(repository: &str, access: Access) -> Self {
        let actions = match access {
            Access::Pull => vec!["pull".to_owned()],
            Access::Push => vec!["pull".to_owned(), "push".to_owned()],
        };
        Self {
            name: repository.to_owned(),
            actions,
        }
    }

    /// As it appears in a challenge: `repository:<name>:<actions>`.
    pub fn to_challenge(&self) -> String {
        format!("repository:{}:{}", self.name, self.actions.join(","))
    }
}

/// What a verified token says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The account.
    pub sub: String,
    /// Expiry, Unix seconds.
    pub exp: u64,
    /// Granted scopes.
    pub access: Vec<Scope>,
}

impl Claims {
    /// Whether the token admits `access` on `repository` (`None`: the `/v2/` ping, which any
    /// valid token admits).
    pub fn admits(&self, repository: Option<&str>, access: Access) -> bool {
        let Some(repository) = repository else {
            return true;
        };
        let needed = Scope::needed(repository, access);
        self.access
            .iter()
            .any(|s| s.name == repository && needed.actions.iter().all(|a| s.actions.contains(a)))
    }
}

/// Why a token is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenError {
    /// Not a token of ours (bad shape or signature).
    Invalid,
    /// Ours, but expired.
    Expired,
}

impl TokenKey {
    /// A key from shared secret bytes (at least 32 are recommended).
    pub fn new(secret: &[u8], lifetime: Duration) -> Self {
        Self {
            key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret),
            lifetime,
            issued: Arc::default(),
        }
    }

    /// A random key of this process: tokens are accepted only by the listener that issued them.
    pub fn random(lifetime: Duration) -> Result<Self, ring::error::Unspecified> {
        let rng = ring::rand::SystemRandom::new();
        let key = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)?;
        Ok(Self {
            key,
            lifetime,
            issued: Arc::default(),
        })
    }

    /// How long issued tokens live.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// Tokens issued so far with this key (and its clones).
    pub fn issued(&self) -> u64 {
        self.issued.load(Ordering::Relaxed)
    }

    /// Signs a token for `account` granting, of `requested`, only what `access` allows, valid
    /// from `now` (Unix seconds).
    pub fn issue(&self, account: &str, access: Access, requested: &[Scope], now: u64) -> String {
        let granted = requested
            .iter()
            .filter_map(|scope| {
                let actions: Vec<String> = scope
                    .actions
                    .iter()
                    .filter(|a| match a.as_str() {
                        "pull" => true,
                        "push" => access == Access::Push,
                        _ => false,
                    })
                    .cloned()
                    .collect();
                (!actions.is_empty()).then(|| Scope {
                    name: scope.name.clone(),
                    actions,
                })
            })
            .collect();
        let claims = Claims {
            sub: account.to_owned(),
            exp: now.saturating_add(self.lifetime.as_secs()),
            access: granted,
        };
        // Serializing a struct of strings and numbers cannot fail.
        let payload = B64.encode(serde_json::to_vec(&claims).unwrap_or_default());
        let tag = ring::hmac::sign(&self.key, payload.as_bytes());
        self.issued.fetch_add(1, Ordering::Relaxed);
        format!("{payload}.{}", B64.encode(tag.as_ref()))
    }

    /// Checks a token's signature and expiry at `now` (Unix seconds).
    pub fn verify(&self, token: &str, now: u64) -> Result<Claims, TokenError> {
        let (payload, tag) = token.trim().split_once('.').ok_or(TokenError::Invalid)?;
        let tag = B64.decode(tag).map_err(|_| TokenError::Invalid)?;
        ring::hmac::verify(&self.key, payload.as_bytes(), &tag).map_err(|_| TokenError::Invalid)?;
        let json = B64.decode(payload).map_err(|_| TokenError::Invalid)?;
        let claims: Claims = serde_json::from_slice(&json).map_err(|_| TokenError::Invalid)?;
        if claims.exp <= now {
            return Err(TokenError::Expired);
        }
        Ok(claims)
    }
}

/// Decodes `%XX` escapes and `+` (form encoding) in a query or form value; `None` on a bad
/// escape or non-UTF-8 result.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The `key=value` pairs of a query string or form body, decoded; undecodable pairs are
/// dropped.
pub fn form_pairs(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Some((percent_decode(k)?, percent_decode(v)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> TokenKey {
        TokenKey::new(
            b"0123456789abcdef0123456789abcdef",
            Duration::from_secs(300),
        )
    }

    #[test]
    fn scopes_parse_and_print() {
        let s = Scope::parse("repository:system/deckhouse/agent:pull,push").unwrap();
        assert_eq!(s.name, "system/deckhouse/agent");
        assert_eq!(s.actions, ["pull", "push"]);
        assert_eq!(
            s.to_challenge(),
            "repository:system/deckhouse/agent:pull,push"
        );
        assert_eq!(Scope::parse("registry:catalog:*"), None);
        assert_eq!(Scope::parse("repository::pull"), None);
        assert_eq!(Scope::parse("repository:nocolon"), None);
    }

    #[test]
    fn a_pull_account_gets_pull_only() {
        let k = key();
        let asked = [Scope::parse("repository:a/b:pull,push").unwrap()];
        let claims = k
            .verify(&k.issue("node", Access::Pull, &asked, 1000), 1000)
            .unwrap();
        assert_eq!(claims.sub, "node");
        assert_eq!(claims.exp, 1300);
        assert!(claims.admits(Some("a/b"), Access::Pull));
        assert!(!claims.admits(Some("a/b"), Access::Push));
        assert!(!claims.admits(Some("a/c"), Access::Pull));
        assert!(claims.admits(None, Access::Pull));

        let claims = k
            .verify(&k.issue("sync", Access::Push, &asked, 1000), 1000)
            .unwrap();
        assert!(claims.admits(Some("a/b"), Access::Push));

        let none = k
            .verify(&k.issue("node", Access::Pull, &[], 1000), 1000)
            .unwrap();
        assert!(!none.admits(Some("a/b"), Access::Pull));
        assert!(none.admits(None, Access::Pull));
    }

    #[test]
    fn expired_forged_and_foreign_tokens_are_refused() {
        let k = key();
        let asked = [Scope::needed("a/b", Access::Pull)];
        let token = k.issue("node", Access::Pull, &asked, 1000);
        assert_eq!(k.verify(&token, 1300), Err(TokenError::Expired));
        assert!(k.verify(&token, 1299).is_ok());
        let other = TokenKey::new(
            b"another key entirely, 32 bytes!!",
            Duration::from_secs(300),
        );
        assert_eq!(other.verify(&token, 1000), Err(TokenError::Invalid));
        // Widening the claims breaks the signature.
        let (_, tag) = token.split_once('.').unwrap();
        let forged_claims = Claims {
            sub: "node".into(),
            exp: 1300,
            access: vec![Scope::needed("a/b", Access::Push)],
        };
        let forged = format!(
            "{}.{tag}",
            B64.encode(serde_json::to_vec(&forged_claims).unwrap())
        );
        assert_eq!(k.verify(&forged, 1000), Err(TokenError::Invalid));
        for junk in ["", ".", "abc", "a.b", "!!!.???"] {
            assert_eq!(k.verify(junk, 1000), Err(TokenError::Invalid), "{junk}");
        }
    }

    #[test]
    fn random_keys_differ() {
        let a = TokenKey::random(DEFAULT_LIFETIME).unwrap();
        let b = TokenKey::random(DEFAULT_LIFETIME).unwrap();
        let token = a.issue("node", Access::Pull, &[], 0);
        assert!(a.verify(&token, 0).is_ok());
        assert_eq!(b.verify(&token, 0), Err(TokenError::Invalid));
    }

    #[test]
    fn forms_decode() {
        assert_eq!(
            form_pairs("scope=repository%3Aa%2Fb%3Apull&service=Deckhouse+registry&x&bad=%zz"),
            vec![
                ("scope".to_owned(), "repository:a/b:pull".to_owned()),
                ("service".to_owned(), "Deckhouse registry".to_owned()),
                ("x".to_owned(), String::new()),
            ]
        );
        assert_eq!(percent_decode("%"), None);
        assert_eq!(percent_decode("%4"), None);
    }
}
