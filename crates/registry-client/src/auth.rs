//! The Docker token flow and its cache.
//!
//! On a miss for (registry, credentials, scope): probe `GET /v2/`. Not 401 ⇒ send nothing.
//! `Basic` ⇒ Basic auth with our credentials. `Bearer realm,service` ⇒ `GET realm?service&scope`
//! (Basic auth when we have credentials; anonymous otherwise), read `token` or `access_token`
//! and `expires_in`. A lifetime of at most 30 s (or none) counts as 60 s; a token is reused
//! until `expiry − 30 s`.
//!
//! One fetch at a time per key: concurrent misses queue on the key's lock and find the token the
//! first one fetched. When that fetch failed, the callers that were already waiting get the same
//! failure instead of each trying again (no thundering herd on a dead token server).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, StatusCode, header};
use tokio::time::Instant;

use crate::endpoint::{Credentials, Secret};
use crate::error::{AuthFailure, Error, strip};

/// Tokens are refreshed this long before they expire.
const REFRESH_MARGIN: Duration = Duration::from_secs(30);

/// The access a request needs: one or more `repository:<name>:<actions>` scopes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope(Vec<String>);

impl Scope {
    /// `repository:<repository>:pull`.
    pub fn pull(repository: &str) -> Self {
        Self(vec![format!("repository:{repository}:pull")])
    }

    /// `repository:<repository>:pull,push`.
    pub fn push(repository: &str) -> Self {
        Self(vec![format!("repository:{repository}:pull,push")])
    }

    /// `repository:<repository>:delete` (distribution requires the `delete` action for DELETE).
    pub fn delete(repository: &str) -> Self {
        Self(vec![format!("repository:{repository}:delete")])
    }

    /// Adds another scope (e.g. pull on the source of a cross-repository mount).
    pub fn and(mut self, other: Scope) -> Self {
        for s in other.0 {
            if !self.0.contains(&s) {
                self.0.push(s);
            }
        }
        self
    }

    /// No repository access: authentication only (what `GET /v2/` needs).
    pub fn empty() -> Self {
        Self(Vec::new())
    }

    /// A scope string as given (for raw requests).
    pub fn raw(scope: &str) -> Self {
        Self(vec![scope.to_owned()])
    }

    /// The individual scope strings.
    pub fn items(&self) -> &[String] {
        &self.0
    }
}

/// How many token exchanges the client made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenStats {
    /// `/v2/` probes sent.
    pub probes: u64,
    /// Tokens obtained from a realm.
    pub issued: u64,
    /// Token exchanges (probe or realm) that failed.
    pub failed: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    origin: String,
    credentials: Option<Credentials>,
    scope: Scope,
}

#[derive(Debug, Clone)]
enum Cached {
    /// `/v2/` did not ask for authentication (or asked for Basic and we have no credentials).
    Anonymous,
    /// Basic auth with our credentials.
    Basic(Secret),
    /// A bearer token, good until `refresh_at`.
    Bearer { header: Secret, refresh_at: Instant },
}

#[derive(Debug, Default)]
struct Slot {
    cached: Option<Cached>,
    failure: Option<(Instant, AuthFailure)>,
}

/// What the caller should send.
#[derive(Debug, Clone)]
pub(crate) struct Authorization {
    /// The `Authorization` value, when any.
    pub(crate) header: Option<Secret>,
}

/// Shared by every request of one client.
#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    slots: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Slot>>>>,
    probes: AtomicU64,
    issued: AtomicU64,
    failed: AtomicU64,
}

/// What the flow needs from the caller's transport.
pub(crate) struct Target<'a> {
    pub(crate) http: &'a reqwest::Client,
    pub(crate) base: &'a reqwest::Url,
    pub(crate) host: &'a str,
    pub(crate) credentials: Option<&'a Credentials>,
    pub(crate) timeout: Duration,
    pub(crate) user_agent: &'a str,
}

impl TokenCache {
    pub(crate) fn stats(&self) -> TokenStats {
        TokenStats {
            probes: self.probes.load(Ordering::Relaxed),
            issued: self.issued.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }

    fn slot(&self, key: &Key) -> Arc<tokio::sync::Mutex<Slot>> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.entry(key.clone()).or_default().clone()
    }

    fn key(target: &Target<'_>, scope: &Scope) -> Key {
        Key {
            origin: target.base.as_str().to_owned(),
            credentials: target.credentials.cloned(),
            scope: scope.clone(),
        }
    }

    /// The `Authorization` to send for `scope` at `target`, from the cache or a fresh exchange.
    pub(crate) async fn authorize(
        &self,
        target: &Target<'_>,
        scope: &Scope,
    ) -> Result<Authorization, Error> {
        let key = Self::key(target, scope);
        let slot = self.slot(&key);
        let queued_at = Instant::now();
        let mut slot = slot.lock().await;
        if let Some(cached) = &slot.cached {
            match cached {
                Cached::Anonymous => return Ok(Authorization { header: None }),
                Cached::Basic(h) => {
                    return Ok(Authorization {
                        header: Some(h.clone()),
                    });
                }
                Cached::Bearer { header, refresh_at } if Instant::now() < *refresh_at => {
                    return Ok(Authorization {
                        header: Some(header.clone()),
                    });
                }
                Cached::Bearer { .. } => {}
            }
        }
        if let Some((failed_at, failure)) = &slot.failure
            && *failed_at >= queued_at
        {
            return Err(Error::Auth {
                host: target.host.to_owned(),
                reason: failure.clone(),
            });
        }
        match self.exchange(target, scope).await {
            Ok(cached) => {
                slot.failure = None;
                let header = match &cached {
                    Cached::Anonymous => None,
                    Cached::Basic(h) | Cached::Bearer { header: h, .. } => Some(h.clone()),
                };
                slot.cached = Some(cached);
                Ok(Authorization { header })
            }
            Err(failure) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(host = target.host, error = %failure, "token exchange failed");
                slot.cached = None;
                slot.failure = Some((Instant::now(), failure.clone()));
                Err(Error::Auth {
                    host: target.host.to_owned(),
                    reason: failure,
                })
            }
        }
    }

    /// Forgets what is cached for `scope` when it is still `used` (a 401 said it is no longer
    /// good); a newer entry fetched meanwhile by another request is kept.
    pub(crate) async fn invalidate(
        &self,
        target: &Target<'_>,
        scope: &Scope,
        used: &Authorization,
    ) {
        let slot = self.slot(&Self::key(target, scope));
        let mut slot = slot.lock().await;
        let current = match &slot.cached {
            None => return,
            Some(Cached::Anonymous) => None,
            Some(Cached::Basic(h) | Cached::Bearer { header: h, .. }) => Some(h),
        };
        if current == used.header.as_ref() {
            slot.cached = None;
        }
    }

    async fn exchange(&self, target: &Target<'_>, scope: &Scope) -> Result<Cached, AuthFailure> {
        self.probes.fetch_add(1, Ordering::Relaxed);
        let probe_url = target.base.join("v2/").map_err(|_| AuthFailure::BadRealm)?;
        let probe = target
            .http
            .get(probe_url)
            .header(header::USER_AGENT, target.user_agent)
            .send();
        let response = match tokio::time::timeout(target.timeout, probe).await {
            Err(_) => {
                return Err(AuthFailure::Timeout {
                    what: "the /v2/ probe",
                    after: target.timeout,
                });
            }
            Ok(Err(e)) => {
                return Err(AuthFailure::Transport {
                    what: "the /v2/ probe",
                    source: Arc::new(strip(e)),
                });
            }
            Ok(Ok(r)) => r,
        };
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(Cached::Anonymous);
        }
        let challenges = challenges(response.headers());
        drop(response);
        let bearer = challenges
            .iter()
            .find(|c| c.is_bearer() && c.realm().is_some());
        if let Some(bearer) = bearer {
            let realm = bearer.realm().unwrap_or_default();
            let service = bearer.service();
            return self
                .fetch_token(target, realm, service, scope)
                .await
                .map(|(header, refresh_at)| Cached::Bearer { header, refresh_at });
        }
        if challenges.iter().any(oci::Challenge::is_basic) {
            return Ok(match target.credentials {
                Some(c) => Cached::Basic(c.basic_header()),
                // The request will be refused; the caller sees a 401 without our credentials.
                None => Cached::Anonymous,
            });
        }
        Err(AuthFailure::NoUsableChallenge)
    }

    async fn fetch_token(
        &self,
        target: &Target<'_>,
        realm: &str,
        service: Option<&str>,
        scope: &Scope,
    ) -> Result<(Secret, Instant), AuthFailure> {
        let url = oci::challenge::token_url(realm, service, scope.items())
            .ok()
            .and_then(|u| reqwest::Url::parse(&u).ok())
            .ok_or(AuthFailure::BadRealm)?;
        let mut request = target
            .http
            .get(url)
            .header(header::USER_AGENT, target.user_agent);
        if let Some(c) = target.credentials {
            let mut value =
                http::HeaderValue::from_str(c.basic_header().expose()).map_err(|_| {
                    AuthFailure::NoToken {
                        reason: "credentials are not valid header text".into(),
                    }
                })?;
            value.set_sensitive(true);
            request = request.header(header::AUTHORIZATION, value);
        }
        let requested_at = Instant::now();
        let exchange = async {
            let response = request.send().await?;
            let status = response.status();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, body))
        };
        let (status, body) = match tokio::time::timeout(target.timeout, exchange).await {
            Err(_) => {
                return Err(AuthFailure::Timeout {
                    what: "the token realm",
                    after: target.timeout,
                });
            }
            Ok(Err(e)) => {
                return Err(AuthFailure::Transport {
                    what: "the token realm",
                    source: Arc::new(strip(e)),
                });
            }
            Ok(Ok(answer)) => answer,
        };
        if !status.is_success() {
            return Err(AuthFailure::TokenStatus { status });
        }
        let answer = oci::challenge::TokenResponse::parse(&body).map_err(|e| match e {
            // The body may echo secrets: say only what kind of problem it was.
            oci::challenge::TokenError::Malformed(e) => AuthFailure::NoToken {
                reason: format!("not a token document ({})", classify(&e)),
            },
            oci::challenge::TokenError::NoToken => AuthFailure::NoToken {
                reason: "neither `token` nor `access_token` is set".into(),
            },
        })?;
        let header = format!("Bearer {}", answer.bearer_token().unwrap_or_default());
        if http::HeaderValue::from_str(&header).is_err() {
            return Err(AuthFailure::NoToken {
                reason: "the token is not valid header text".into(),
            });
        }
        self.issued.fetch_add(1, Ordering::Relaxed);
        Ok((
            Secret::new(header),
            requested_at + reuse_for(answer.lifetime_secs()),
        ))
    }
}

/// How long a token with this lifetime (already floored by
/// [`TokenResponse::lifetime_secs`](oci::challenge::TokenResponse::lifetime_secs)) is reused.
fn reuse_for(lifetime_secs: u64) -> Duration {
    Duration::from_secs(lifetime_secs).saturating_sub(REFRESH_MARGIN)
}

fn classify(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Io => "I/O error",
        serde_json::error::Category::Syntax => "invalid JSON",
        serde_json::error::Category::Data => "unexpected JSON shape",
        serde_json::error::Category::Eof => "truncated JSON",
    }
}

/// Every challenge of every `WWW-Authenticate` line; unparsable lines are skipped.
pub(crate) fn challenges(headers: &HeaderMap) -> Vec<oci::Challenge> {
    headers
        .get_all(header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| oci::challenge::parse_challenges(v).ok())
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reuse(expires_in: Option<u64>) -> Duration {
        let answer = oci::challenge::TokenResponse {
            token: Some("t".into()),
            access_token: None,
            expires_in,
            issued_at: None,
        };
        reuse_for(answer.lifetime_secs())
    }

    #[test]
    fn lifetimes_follow_the_spec() {
        // ≤ 30 s (or absent) counts as 60 s; reuse until expiry − 30 s.
        assert_eq!(reuse(None), Duration::from_secs(30));
        assert_eq!(reuse(Some(0)), Duration::from_secs(30));
        assert_eq!(reuse(Some(30)), Duration::from_secs(30));
        assert_eq!(reuse(Some(31)), Duration::from_secs(1));
        assert_eq!(reuse(Some(300)), Duration::from_secs(270));
    }

    #[test]
    fn challenges_from_several_lines() {
        let mut headers = HeaderMap::new();
        headers.append(header::WWW_AUTHENTICATE, "garbage \"".parse().unwrap());
        headers.append(
            header::WWW_AUTHENTICATE,
            r#"Bearer realm="http://t/token",service="svc""#.parse().unwrap(),
        );
        let got = challenges(&headers);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].realm(), Some("http://t/token"));
    }

    #[test]
    fn scopes_combine_without_duplicates() {
        let s = Scope::push("a/b")
            .and(Scope::pull("c"))
            .and(Scope::pull("c"));
        assert_eq!(s.items(), ["repository:a/b:pull,push", "repository:c:pull"]);
    }
}
