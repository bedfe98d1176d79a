//! kube-rbac-proxy's protection, built in: a request to a protected endpoint (metrics, debug)
//! is served only when its bearer token passes a TokenReview and the token's user passes a
//! SubjectAccessReview — for the configured resource attributes (Deckhouse protects
//! `deployments/prometheus-metrics` of the component's Deployment), else for the request path
//! as a non-resource URL. Verdicts are cached as kube-rbac-proxy's delegating authenticator and
//! authorizer cache them: tokens 2 minutes, allowed 5 minutes, denied 30 seconds.
//!
//! The reviews go through a [`Reviewer`]; [`Kube`] asks the API server. This crate serves
//! nothing itself: the caller passes the method, path and `Authorization` header and answers
//! with the [`Verdict`]. It must not depend on an HTTP server, TLS or the filesystem.

mod attributes;
mod cache;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes as SarResourceAttributes, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;

pub use attributes::{ParseError, Question, ResourceAttributes, verb};
use cache::{TtlCache, digest};

/// How long an authenticated (or refused) token is trusted.
pub const TOKEN_TTL: Duration = Duration::from_secs(120);
/// How long an allowed verdict is kept.
pub const ALLOWED_TTL: Duration = Duration::from_secs(300);
/// How long a denied verdict is kept.
pub const DENIED_TTL: Duration = Duration::from_secs(30);

/// Who a token belongs to, as a TokenReview answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name.
    pub username: String,
    /// The user's UID.
    pub uid: Option<String>,
    /// The user's groups.
    pub groups: Vec<String>,
    /// Extra attributes (passed on to the SubjectAccessReview).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A review could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server did not answer the review.
    #[error("{review} failed")]
    Review {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// What the client reported.
        #[source]
        source: kube::Error,
    },
}

/// Who answers the reviews.
pub trait Reviewer: Send + Sync {
    /// The holder of `token`, `None` when it is not a valid token.
    fn authenticate(
        &self,
        token: &str,
    ) -> impl Future<Output = Result<Option<UserInfo>, Error>> + Send;
    /// Whether `user` may do what `question` asks.
    fn authorize(
        &self,
        user: &UserInfo,
        question: &Question<'_>,
    ) -> impl Future<Output = Result<bool, Error>> + Send;
}

/// The API server answers (the component's ServiceAccount needs `create` on `tokenreviews`
/// and `subjectaccessreviews`: ClusterRole `system:auth-delegator`).
#[derive(Clone)]
#[allow(missing_debug_implementations)] // kube::Client is not Debug
pub struct Kube(pub kube::Client);

impl Reviewer for Kube {
    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, Error> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.into()),
                audiences: None,
            },
            ..Default::default()
        };
        let answered = Api::<TokenReview>::all(self.0.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| Error::Review {
                review: "TokenReview",
                source,
            })?;
        let status = answered.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        let user = status.user.unwrap_or_default();
        Ok(Some(UserInfo {
            username: user.username.unwrap_or_default(),
            uid: user.uid,
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }))
    }

    async fn authorize(&self, user: &UserInfo, question: &Question<'_>) -> Result<bool, Error> {
        let filled = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let mut spec = SubjectAccessReviewSpec {
            user: Some(user.username.clone()),
            uid: user.uid.clone(),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            ..Default::default()
        };
        match question {
            Question::Resource { verb, attributes } => {
                spec.resource_attributes = Some(SarResourceAttributes {
                    verb: filled(verb),
                    namespace: filled(&attributes.namespace),
                    group: filled(&attributes.api_group),
                    version: filled(&attributes.api_version),
                    resource: filled(&attributes.resource),
                    subresource: filled(&attributes.subresource),
                    name: filled(&attributes.name),
                    ..Default::default()
                });
            }
            Question::NonResource { verb, path } => {
                spec.non_resource_attributes = Some(NonResourceAttributes {
                    verb: filled(verb),
                    path: filled(path),
                });
            }
        }
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.0.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| Error::Review {
                review: "SubjectAccessReview",
                source,
            })?;
        Ok(answered.status.is_some_and(|s| s.allowed))
    }
}

/// What to answer a request with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Allowed,
    /// 401: no token, or not a valid one.
    Unauthorized,
    /// 403: the SubjectAccessReview denied it; kube-rbac-proxy's text.
    Forbidden(String),
    /// 500: a review could not be asked; kube-rbac-proxy's text.
    Failed(String),
}

impl Verdict {
    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            Self::Allowed => 200,
            Self::Unauthorized => 401,
            Self::Forbidden(_) => 403,
            Self::Failed(_) => 500,
        }
    }

    /// The response body of a refusal.
    pub fn body(&self) -> String {
        match self {
            Self::Allowed => String::new(),
            Self::Unauthorized => "Unauthorized\n".into(),
            Self::Forbidden(m) | Self::Failed(m) => format!("{m}\n"),
        }
    }
}

/// The bearer token of an `Authorization` header value.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Decides requests to one protected endpoint.
#[allow(missing_debug_implementations)] // holds caches of verdicts, nothing to print
pub struct Guard<R> {
    reviewer: R,
    attributes: Option<ResourceAttributes>,
    excluded: Vec<String>,
    tokens: Mutex<TtlCache<Option<UserInfo>>>,
    verdicts: Mutex<TtlCache<bool>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<R: Reviewer> Guard<R> {
    /// Checks requests against `attributes` (kube-rbac-proxy's `resourceAttributes`), or
    /// against their path as a non-resource URL when `None`.
    pub fn new(reviewer: R, attributes: Option<ResourceAttributes>) -> Self {
        Self {
            reviewer,
            attributes,
            excluded: Vec::new(),
            tokens: Mutex::default(),
            verdicts: Mutex::default(),
        }
    }

    /// Serves `path` to anyone (kube-rbac-proxy's `excludePaths`: the probes' `/healthz`).
    #[must_use]
    pub fn exclude(mut self, path: impl Into<String>) -> Self {
        self.excluded.push(path.into());
        self
    }

    /// The verdict on a `method` request for `path` carrying `authorization` (the header).
    pub async fn check(&self, method: &str, path: &str, authorization: Option<&str>) -> Verdict {
        if self.excluded.iter().any(|p| p == path) {
            return Verdict::Allowed;
        }
        let Some(token) = authorization.and_then(bearer) else {
            return Verdict::Unauthorized;
        };
        let user = match self.authenticate(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Verdict::Unauthorized,
            Err(error) => {
                tracing::warn!(error = %error, "token review failed");
                return Verdict::Unauthorized;
            }
        };
        let question = Question::of(method, path, self.attributes.as_ref());
        match self.authorize(&user, &question).await {
            Ok(true) => Verdict::Allowed,
            Ok(false) => {
                Verdict::Forbidden(format!("Forbidden ({})", question.describe(&user.username)))
            }
            Err(error) => {
                tracing::warn!(error = %error, user = %user.username, "access review failed");
                Verdict::Failed(format!(
                    "Authorization error ({})",
                    question.describe(&user.username)
                ))
            }
        }
    }

    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, Error> {
        let key = digest(&[token]);
        if let Some(known) = lock(&self.tokens).get(&key, Instant::now()) {
            return Ok(known);
        }
        let user = self.reviewer.authenticate(token).await?;
        lock(&self.tokens).insert(key, user.clone(), TOKEN_TTL, Instant::now());
        Ok(user)
    }

    async fn authorize(&self, user: &UserInfo, question: &Question<'_>) -> Result<bool, Error> {
        let mut parts = vec![user.username.as_str(), "\u{1}"];
        parts.extend(user.groups.iter().map(String::as_str));
        let question_key = question.key();
        parts.push("\u{1}");
        parts.push(&question_key);
        let key = digest(&parts);
        if let Some(known) = lock(&self.verdicts).get(&key, Instant::now()) {
            return Ok(known);
        }
        let allowed = self.reviewer.authorize(user, question).await?;
        let ttl = if allowed { ALLOWED_TTL } else { DENIED_TTL };
        lock(&self.verdicts).insert(key, allowed, ttl, Instant::now());
        Ok(allowed)
    }
}

#[cfg(test)]
mod tests;
