//! The crate's one error type, with where each failure came from and whether another target
//! could do better.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

/// Who caused a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The caller asked for something invalid (bad name, bad header value).
    Client,
    /// The remote registry, its token server, or the network to them.
    Upstream,
    /// Our own configuration or code.
    Internal,
}

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeoutPhase {
    /// Establishing the TCP connection (and TLS handshake).
    Connect,
    /// Waiting for the status line and headers after the request was sent.
    ResponseHeaders,
    /// The overall deadline of one request, body included.
    Total,
}

impl std::fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Connect => "connecting",
            Self::ResponseHeaders => "waiting for response headers",
            Self::Total => "the whole request",
        })
    }
}

/// Why the token exchange with a registry's auth realm failed.
///
/// `Clone` (sources behind `Arc`) so that one failed fetch can be reported to every caller that
/// waited for it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthFailure {
    /// The `/v2/` probe or the token request could not be sent or read.
    #[error("could not reach {what}: {source}")]
    Transport {
        /// `the /v2/ probe` or `the token realm`.
        what: &'static str,
        /// The cause (its URL removed).
        #[source]
        source: Arc<reqwest::Error>,
    },
    /// The probe or the token request took too long.
    #[error("{what} timed out after {after:?}")]
    Timeout {
        /// `the /v2/ probe` or `the token realm`.
        what: &'static str,
        /// How long we waited.
        after: Duration,
    },
    /// A 401 without a challenge we can answer.
    #[error("401 from /v2/ without a usable WWW-Authenticate challenge")]
    NoUsableChallenge,
    /// The realm URL of a Bearer challenge is not an absolute http(s) URL.
    #[error("the Bearer realm is not an absolute http(s) URL")]
    BadRealm,
    /// The token realm answered with an error status.
    #[error("the token realm answered {status}")]
    TokenStatus {
        /// The status.
        status: StatusCode,
    },
    /// The token realm answered 200 without a `token` or `access_token`.
    #[error("the token realm's answer has no token: {reason}")]
    NoToken {
        /// What was wrong with the body.
        reason: String,
    },
}

/// Everything that can go wrong talking to an upstream registry.
///
/// Messages never contain credentials, tokens or query strings (which may carry signatures).
/// [`retry_elsewhere`](Self::retry_elsewhere) says whether the next target of a list could
/// succeed where this one failed; [`origin`](Self::origin) says who is to blame.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint configuration is unusable (bad CA PEM, bad client identity, bad URL).
    #[error("endpoint {endpoint} is misconfigured: {reason}")]
    InvalidEndpoint {
        /// `scheme://host/prefix`.
        endpoint: String,
        /// What is wrong.
        reason: String,
    },
    /// The caller's request is invalid (repository name, reference, header value).
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },
    /// The TCP connection or TLS handshake failed.
    #[error("cannot connect to {url}: {source}")]
    Connect {
        /// Where to (without query).
        url: String,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// The request failed after connecting, before response headers arrived.
    #[error("request to {url} failed: {source}")]
    Transport {
        /// Where to (without query).
        url: String,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// A timeout ran out.
    #[error("timed out {phase} after {after:?} ({url})")]
    Timeout {
        /// Which wait.
        phase: TimeoutPhase,
        /// Its length.
        after: Duration,
        /// Where to (without query).
        url: String,
    },
    /// The response body delivered no byte for the stall window.
    #[error("response body stalled: no data for {after:?} after {received} bytes")]
    Stalled {
        /// The stall window.
        after: Duration,
        /// Bytes received before the stall.
        received: u64,
    },
    /// The response body arrived slower than the minimum throughput.
    #[error(
        "response body too slow: {received_in_window} bytes in {window:?}, below the minimum of {minimum} ({received} bytes in all)"
    )]
    TooSlow {
        /// Bytes received in the window that fell short.
        received_in_window: u64,
        /// The minimum per window.
        minimum: u64,
        /// The window.
        window: Duration,
        /// Bytes received in all.
        received: u64,
    },
    /// The connection broke while the body was streaming (reset, protocol error).
    #[error("response body interrupted after {received} bytes: {source}")]
    BodyInterrupted {
        /// Bytes received before the break.
        received: u64,
        /// The cause (the transport's error, without URLs).
        #[source]
        source: BoxError,
    },
    /// The body ended cleanly but shorter than its `Content-Length` or expected size.
    #[error("response body truncated: {received} of {expected} bytes")]
    Truncated {
        /// Bytes received.
        received: u64,
        /// Bytes announced.
        expected: u64,
    },
    /// The body is longer than the expected size (descriptor size or `Content-Length`).
    #[error("response body too long: more than the expected {expected} bytes")]
    TooLong {
        /// Bytes expected.
        expected: u64,
    },
    /// The content does not hash to the digest it was requested by (boxed: two inline
    /// sha512-sized digests would make every `Result` large).
    #[error(transparent)]
    DigestMismatch(Box<oci::DigestMismatch>),
    /// The registry answered a status that means failure.
    #[error("{url} answered {status}{}", code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Status {
        /// The status.
        status: StatusCode,
        /// The first OCI error code of the body, when it had one.
        code: Option<String>,
        /// Where (without query).
        url: String,
    },
    /// 401 or 403.
    #[error(
        "{url} answered {status}{}",
        if *credentials_sent { " to our credentials" } else { " (no credentials of ours were sent)" }
    )]
    Unauthorized {
        /// 401 or 403.
        status: StatusCode,
        /// Whether the request carried credentials or a token of ours.
        credentials_sent: bool,
        /// Where (without query).
        url: String,
    },
    /// The token exchange failed.
    #[error("authentication with {host} failed: {reason}")]
    Auth {
        /// The registry host.
        host: String,
        /// Why.
        #[source]
        reason: AuthFailure,
    },
    /// More redirects than allowed.
    #[error("more than {limit} redirects starting at {url}")]
    TooManyRedirects {
        /// The limit.
        limit: usize,
        /// The first URL (without query).
        url: String,
    },
    /// A redirect without a usable `Location`.
    #[error("redirect from {url} has no usable Location")]
    BadRedirect {
        /// Where the redirect came from (without query).
        url: String,
    },
    /// The registry answered something that does not follow the protocol.
    #[error("invalid response from {url}: {reason}")]
    InvalidResponse {
        /// Where (without query).
        url: String,
        /// What is wrong.
        reason: String,
    },
}

impl From<oci::DigestMismatch> for Error {
    fn from(mismatch: oci::DigestMismatch) -> Self {
        Self::DigestMismatch(Box::new(mismatch))
    }
}

impl Error {
    /// Whether another target (the next mirror, the upstream after the cache) could succeed
    /// where this one failed. The agent's failover rules in one place:
    ///
    /// | variant | retry elsewhere | why |
    /// |---|---|---|
    /// | `InvalidEndpoint` | yes | this target is unusable as configured; the next may be fine |
    /// | `InvalidRequest` | no | the same request is invalid everywhere |
    /// | `Connect`, `Transport`, `Timeout`, `Stalled`, `TooSlow`, `BodyInterrupted`, `Truncated`, `TooLong` | yes | availability of this target |
    /// | `DigestMismatch` | no | an integrity failure: reported loudly, never masked by failover; mirrors relay the same origin's bytes |
    /// | `Status` 5xx, 429 | yes | this target is failing or throttling |
    /// | `Status` 404 and other 4xx | no | the answer is about the content, not the target (the cache decides about fills) |
    /// | `Unauthorized` with our credentials | yes | our credentials for this target are wrong; another target has its own |
    /// | `Unauthorized` without our credentials | no | the caller's own credentials (pass-through) are at fault |
    /// | `Auth` | yes | this target's token realm failed |
    /// | `TooManyRedirects`, `BadRedirect`, `InvalidResponse` | yes | this target misbehaves |
    pub fn retry_elsewhere(&self) -> bool {
        match self {
            Self::InvalidEndpoint { .. } => true,
            Self::InvalidRequest { .. } => false,
            Self::Connect { .. }
            | Self::Transport { .. }
            | Self::Timeout { .. }
            | Self::Stalled { .. }
            | Self::TooSlow { .. }
            | Self::BodyInterrupted { .. }
            | Self::Truncated { .. }
            | Self::TooLong { .. } => true,
            Self::DigestMismatch(_) => false,
            Self::Status { status, .. } => {
                status.is_server_error() || *status == StatusCode::TOO_MANY_REQUESTS
            }
            Self::Unauthorized {
                credentials_sent, ..
            } => *credentials_sent,
            Self::Auth { .. } => true,
            Self::TooManyRedirects { .. }
            | Self::BadRedirect { .. }
            | Self::InvalidResponse { .. } => true,
        }
    }

    /// Who caused the failure.
    pub fn origin(&self) -> Origin {
        match self {
            Self::InvalidEndpoint { .. } => Origin::Internal,
            Self::InvalidRequest { .. } => Origin::Client,
            Self::Unauthorized {
                credentials_sent: false,
                ..
            } => Origin::Client,
            _ => Origin::Upstream,
        }
    }

    /// The status a proxy relaying this failure should answer with: 502 for a broken upstream,
    /// 504 for a timeout or stall, 400 for an invalid request, 500 for our own configuration,
    /// and the upstream's own status for a `Status`/`Unauthorized` answer.
    pub fn gateway_status(&self) -> StatusCode {
        match self {
            Self::InvalidRequest { .. } => StatusCode::BAD_REQUEST,
            Self::InvalidEndpoint { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Timeout { .. } | Self::Stalled { .. } | Self::TooSlow { .. } => {
                StatusCode::GATEWAY_TIMEOUT
            }
            Self::Status { status, .. } | Self::Unauthorized { status, .. } => *status,
            _ => StatusCode::BAD_GATEWAY,
        }
    }

    /// Whether the target answered that the object does not exist (404).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Status { status, .. } if *status == StatusCode::NOT_FOUND)
    }
}

/// `scheme://host[:port]/path` without query or fragment: safe to log (signed redirect URLs carry
/// their signature in the query).
pub(crate) fn display_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

/// Any transport's error, as a body stream yields it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A reqwest error with its URL removed (the URL may carry a signed query).
pub(crate) fn strip(error: reqwest::Error) -> reqwest::Error {
    error.without_url()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> Error {
        Error::Status {
            status: StatusCode::from_u16(code).unwrap(),
            code: None,
            url: "http://r/v2/".into(),
        }
    }

    #[test]
    fn statuses_decide_failover() {
        assert!(status(500).retry_elsewhere());
        assert!(status(503).retry_elsewhere());
        assert!(status(429).retry_elsewhere());
        assert!(!status(404).retry_elsewhere());
        assert!(!status(400).retry_elsewhere());
        assert!(!status(416).retry_elsewhere());
        assert!(status(404).is_not_found());
        assert!(!status(500).is_not_found());
    }

    #[test]
    fn unauthorized_depends_on_whose_credentials() {
        let ours = Error::Unauthorized {
            status: StatusCode::UNAUTHORIZED,
            credentials_sent: true,
            url: "u".into(),
        };
        let theirs = Error::Unauthorized {
            status: StatusCode::FORBIDDEN,
            credentials_sent: false,
            url: "u".into(),
        };
        assert!(ours.retry_elsewhere());
        assert_eq!(ours.origin(), Origin::Upstream);
        assert!(!theirs.retry_elsewhere());
        assert_eq!(theirs.origin(), Origin::Client);
        assert_eq!(theirs.gateway_status(), StatusCode::FORBIDDEN);
    }

    #[test]
    fn integrity_failures_are_not_masked() {
        let d = oci::Digest::sha256(b"a");
        let e = Error::from(oci::DigestMismatch {
            expected: d,
            actual: oci::Digest::sha256(b"b"),
        });
        assert!(!e.retry_elsewhere());
        assert_eq!(e.gateway_status(), StatusCode::BAD_GATEWAY);
        let stall = Error::Stalled {
            after: Duration::from_secs(1),
            received: 5,
        };
        assert!(stall.retry_elsewhere());
        assert_eq!(stall.gateway_status(), StatusCode::GATEWAY_TIMEOUT);
    }

    #[test]
    fn urls_lose_query_and_userinfo() {
        let url =
            reqwest::Url::parse("https://u:p@s3.example/b/k?X-Amz-Signature=secret#f").unwrap();
        assert_eq!(display_url(&url), "https://s3.example/b/k");
    }
}
