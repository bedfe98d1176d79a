//! The crate's one error enum, and its mapping to an OCI error answer.

use std::path::PathBuf;

use oci::ErrorCode;
use registry_plan::budget::Refusal;

/// Everything that can go wrong in a replica.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A filesystem operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What we were doing (`create`, `write`, `rename`, …).
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Content did not hash to the digest it was written under; nothing was stored.
    #[error("{0}; nothing was stored")]
    DigestMismatch(Box<oci::DigestMismatch>),
    /// Content had another length than announced.
    #[error("size mismatch: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        /// Announced.
        expected: u64,
        /// Received.
        actual: u64,
    },
    /// A write was refused by the budget or the filesystem reserve; reads still work.
    #[error("{}: {detail}; reads still work", .refusal.as_str())]
    Refused {
        /// Which limit.
        refusal: Refusal,
        /// Numbers for the operator.
        detail: String,
    },
    /// A manifest could not be read.
    #[error(transparent)]
    Manifest(#[from] oci::ManifestError),
    /// A manifest references content the store does not hold.
    #[error("manifest references {digest}, which is not in the store; push it first")]
    ManifestBlobUnknown {
        /// The missing content.
        digest: oci::Digest,
    },
    /// The upstream failed.
    #[error("upstream: {0}")]
    Upstream(#[from] registry_client::Error),
    /// The fill that this request joined failed (the cause is logged once, by the fill).
    #[error("fill of {digest} failed: {reason}")]
    FillFailed {
        /// The blob.
        digest: oci::Digest,
        /// The fill's error, as text (shared by every waiter).
        reason: String,
        /// The status the fill's error maps to.
        status: u16,
    },
    /// Configuration is unusable (certificates, keys, addresses).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Garbage collection refused to run.
    #[error("garbage collection: {0}")]
    Collection(#[from] registry_plan::gc::GcError),
}

impl From<oci::DigestMismatch> for Error {
    fn from(mismatch: oci::DigestMismatch) -> Self {
        Self::DigestMismatch(Box::new(mismatch))
    }
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The OCI error code a client is answered with.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Self::Io { .. } | Self::Config(_) | Self::Collection(_) => ErrorCode::Unknown,
            Self::DigestMismatch(_) => ErrorCode::DigestInvalid,
            Self::SizeMismatch { .. } => ErrorCode::SizeInvalid,
            Self::Refused { .. } => ErrorCode::Denied,
            Self::Manifest(e) => e.error_code(),
            Self::ManifestBlobUnknown { .. } => ErrorCode::ManifestBlobUnknown,
            Self::Upstream(e) if e.is_not_found() => ErrorCode::BlobUnknown,
            Self::Upstream(_) | Self::FillFailed { .. } => ErrorCode::Unavailable,
        }
    }

    /// The HTTP status a client is answered with.
    pub fn status(&self) -> u16 {
        match self {
            // 413, not 403: the registry is out of room, the pusher lacks no permission. Not
            // 507 either: Docker's and containers/image's clients show the error body (with
            // `BudgetExhausted` / `ReserveExhausted` and the numbers) only for 4xx answers;
            // for a 507 skopeo prints just "unexpected HTTP status".
            Self::Refused { .. } => 413,
            // A digest mismatch from upstream is the upstream's fault: 502, never retried here.
            Self::Upstream(e) if e.is_not_found() => 404,
            // Only server-side statuses are relayed: an upstream 401 or 400 is our problem with
            // the upstream, not the client's with us.
            Self::Upstream(e) => match e.gateway_status().as_u16() {
                s @ 500.. => s,
                _ => 502,
            },
            Self::FillFailed { status, .. } => *status,
            e => e.error_code().status(),
        }
    }
}
