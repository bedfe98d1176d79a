//! OCI error codes, their HTTP statuses, and the error body
//! `{"errors":[{"code","message","detail"}]}`.
//!
//! Codes and statuses are those of CNCF distribution, which includes the fourteen codes of the
//! distribution-spec plus `MANIFEST_UNVERIFIED`, `TAG_INVALID`, `RANGE_INVALID`,
//! `PAGINATION_NUMBER_INVALID`, `UNKNOWN` and `UNAVAILABLE`. Where distribution's status is
//! surprising (`BLOB_UPLOAD_INVALID` → 404, `MANIFEST_BLOB_UNKNOWN` → 400) it is kept, so clients
//! see the same answers from us as from the registry they already know.

use std::fmt;

/// Content type of an error body.
pub const ERROR_CONTENT_TYPE: &str = "application/json; charset=utf-8";
/// Largest error body [`ErrorBody::parse`] reads.
pub const ERROR_BODY_MAX_LEN: usize = 64 * 1024;

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $status:literal, $msg:literal; )*) => {
        /// An OCI / distribution error code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant, )*
        }

        impl ErrorCode {
            /// Every code.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];

            /// The wire form, e.g. `BLOB_UNKNOWN`.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $code,)* }
            }

            /// The HTTP status distribution answers with.
            pub fn status(self) -> u16 {
                match self { $(Self::$variant => $status,)* }
            }

            /// Distribution's default message.
            pub fn default_message(self) -> &'static str {
                match self { $(Self::$variant => $msg,)* }
            }

            /// Recognises a wire code (exact, upper-case).
            pub fn parse(code: &str) -> Option<Self> {
                match code { $($code => Some(Self::$variant),)* _ => None }
            }
        }
    };
}

codes! {
    /// The blob is not in the repository.
    BlobUnknown = "BLOB_UNKNOWN", 404, "blob unknown to registry";
    /// The upload failed and cannot proceed.
    BlobUploadInvalid = "BLOB_UPLOAD_INVALID", 404, "blob upload invalid";
    /// The upload session is unknown (cancelled or never started).
    BlobUploadUnknown = "BLOB_UPLOAD_UNKNOWN", 404, "blob upload unknown to registry";
    /// The digest is malformed or does not match the content.
    DigestInvalid = "DIGEST_INVALID", 400, "provided digest did not match uploaded content";
    /// A manifest references a blob the registry does not have.
    ManifestBlobUnknown = "MANIFEST_BLOB_UNKNOWN", 400, "blob unknown to registry";
    /// The manifest is malformed.
    ManifestInvalid = "MANIFEST_INVALID", 400, "manifest invalid";
    /// The manifest (by tag or digest) is not in the repository.
    ManifestUnknown = "MANIFEST_UNKNOWN", 404, "manifest unknown";
    /// The manifest failed signature verification (distribution).
    ManifestUnverified = "MANIFEST_UNVERIFIED", 400, "manifest failed signature verification";
    /// The repository name is invalid.
    NameInvalid = "NAME_INVALID", 400, "invalid repository name";
    /// The repository is not known.
    NameUnknown = "NAME_UNKNOWN", 404, "repository name not known to registry";
    /// The content length does not match.
    SizeInvalid = "SIZE_INVALID", 400, "provided length did not match content length";
    /// The tag is invalid (distribution).
    TagInvalid = "TAG_INVALID", 400, "manifest tag did not match URI";
    /// Authentication is required.
    Unauthorized = "UNAUTHORIZED", 401, "authentication required";
    /// Access is denied.
    Denied = "DENIED", 403, "requested access to the resource is denied";
    /// The operation is not supported.
    Unsupported = "UNSUPPORTED", 405, "The operation is unsupported.";
    /// Rate limited.
    TooManyRequests = "TOOMANYREQUESTS", 429, "too many requests";
    /// An upload chunk's range is out of order (distribution).
    RangeInvalid = "RANGE_INVALID", 416, "invalid content range";
    /// `n` is not a non-negative integer (distribution).
    PaginationNumberInvalid = "PAGINATION_NUMBER_INVALID", 400, "invalid number of results requested";
    /// An error without a classification (distribution).
    Unknown = "UNKNOWN", 500, "unknown error";
    /// The service is unavailable (distribution).
    Unavailable = "UNAVAILABLE", 503, "service unavailable";
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of an error body.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ErrorInfo {
    /// The code as sent; may be one this crate does not know (see [`known_code`](Self::known_code)).
    pub code: String,
    /// Human-readable message (may be empty).
    #[serde(default)]
    pub message: String,
    /// Free-form detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
}

impl ErrorInfo {
    /// An entry with the code's default message.
    pub fn new(code: ErrorCode) -> Self {
        Self::with_message(code, code.default_message())
    }

    /// An entry with a specific message.
    pub fn with_message(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code: code.as_str().to_owned(),
            message: message.into(),
            detail: None,
        }
    }

    /// Adds detail.
    pub fn detail(mut self, detail: serde_json::Value) -> Self {
        self.detail = Some(detail);
        self
    }

    /// The code, if this crate knows it.
    pub fn known_code(&self) -> Option<ErrorCode> {
        ErrorCode::parse(&self.code)
    }
}

/// Why an error body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ErrorBodyError {
    /// Longer than [`ERROR_BODY_MAX_LEN`].
    #[error("error body is {len} bytes, the limit is {max}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not JSON of the expected shape.
    #[error("error body is not an OCI error document: {0}")]
    Malformed(#[source] serde_json::Error),
    /// `errors` is empty.
    #[error("error body lists no errors")]
    NoErrors,
}

/// The error document: `{"errors":[...]}`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ErrorBody {
    /// The errors, most relevant first.
    pub errors: Vec<ErrorInfo>,
}

impl ErrorBody {
    /// A body with one error carrying the code's default message.
    pub fn new(code: ErrorCode) -> Self {
        Self {
            errors: vec![ErrorInfo::new(code)],
        }
    }

    /// A body with one error carrying `message`.
    pub fn with_message(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            errors: vec![ErrorInfo::with_message(code, message)],
        }
    }

    /// The HTTP status for this body: that of the first known code, else 500.
    pub fn status(&self) -> u16 {
        self.errors
            .first()
            .and_then(ErrorInfo::known_code)
            .map_or(500, ErrorCode::status)
    }

    /// Serialises to JSON bytes.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising strings and `serde_json::Value`s cannot fail.
        serde_json::to_vec(self).unwrap_or_else(|_| b"{\"errors\":[]}".to_vec())
    }

    /// Parses an error body (e.g. from an upstream), refusing oversized or empty ones.
    pub fn parse(bytes: &[u8]) -> Result<Self, ErrorBodyError> {
        if bytes.len() > ERROR_BODY_MAX_LEN {
            return Err(ErrorBodyError::TooLarge {
                len: bytes.len(),
                max: ERROR_BODY_MAX_LEN,
            });
        }
        let body: Self = serde_json::from_slice(bytes).map_err(ErrorBodyError::Malformed)?;
        if body.errors.is_empty() {
            return Err(ErrorBodyError::NoErrors);
        }
        Ok(body)
    }

    /// The first error's code, if known.
    pub fn first_code(&self) -> Option<ErrorCode> {
        self.errors.first().and_then(ErrorInfo::known_code)
    }
}

#[cfg(test)]
mod tests;
