//! Errors: [`Error`] for start-up and storage failures, [`ApiError`] for Kubernetes `Status` replies.

use crate::schema::Cause;
use serde_json::{Value, json};
use std::path::PathBuf;

/// What went wrong starting or running the server (not a client's mistake).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file in the data directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The database failed.
    #[error("database: {0}")]
    Db(String),
    /// A stored object is not valid JSON (the database is corrupt).
    #[error("stored object {key} is corrupt: {source}")]
    Corrupt {
        /// The object's storage key.
        key: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A CRD given at start-up is unusable.
    #[error("CRD {name}: {message}")]
    Crd {
        /// The CRD's name (or its file).
        name: String,
        /// Why it was rejected.
        message: String,
    },
    /// Certificates could not be generated.
    #[error("certificate generation: {0}")]
    Cert(#[from] rcgen::Error),
    /// TLS configuration failed.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// A PEM file is unreadable.
    #[error("{path}: invalid PEM: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The builder was misconfigured.
    #[error("configuration: {0}")]
    Config(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }

    pub(crate) fn db(e: impl std::fmt::Display) -> Self {
        Self::Db(e.to_string())
    }
}

/// A Kubernetes `Status` failure returned to a client.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, `Invalid`, …).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details` of the Status, if any.
    pub details: Option<Value>,
    /// `metadata.continue` of the Status: where an expired list may continue, inconsistently.
    pub continue_token: Option<String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

fn details(group: &str, kind: &str, name: &str) -> Value {
    json!({"name": name, "group": group, "kind": kind})
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            continue_token: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 404 NotFound for an object.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let gr = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let mut e = Self::new(404, "NotFound", format!("{gr} {name:?} not found"));
        e.details = Some(details(group, resource, name));
        e
    }

    /// 404 NotFound for a path the server does not serve.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let gr = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let mut e = Self::new(
            409,
            "AlreadyExists",
            format!("{gr} {name:?} already exists"),
        );
        e.details = Some(details(group, resource, name));
        e
    }

    /// 409 Conflict (stale `resourceVersion`, failed precondition).
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let gr = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let mut e = Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {gr} {name:?}: {why}"),
        );
        e.details = Some(details(group, resource, name));
        e
    }

    /// 409 Conflict of a server-side apply: fields owned by other managers (`causes` of type
    /// `FieldManagerConflict`).
    pub(crate) fn apply_conflict(message: String, causes: Vec<Value>) -> Self {
        let mut e = Self::new(409, "Conflict", message);
        e.details = Some(json!({ "causes": causes }));
        e
    }

    /// 410 Gone / Expired (a watch or continue token older than the retained history).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
            ),
        )
    }

    /// 422 Invalid with field causes, e.g. `Widget.example.io "a" is invalid: spec.mode: Required value`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: &[Cause]) -> Self {
        let gk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let rendered: Vec<String> = causes.iter().map(Cause::render).collect();
        let msg = match rendered.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut e = Self::new(422, "Invalid", format!("{gk} {name:?} is invalid: {msg}"));
        let mut d = details(group, kind, name);
        d["causes"] = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        e.details = Some(d);
        e
    }

    /// 422 for a request that is well-formed but cannot be applied (a failed JSON patch test).
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// A failure with any status code and reason (a webhook's denial keeps the webhook's).
    pub(crate) fn with_reason(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(code, reason, message)
    }

    /// kube-apiserver's `NewInternalError`: `Internal error occurred: <cause>`, the cause also
    /// in `details.causes`.
    pub(crate) fn internal_error(cause: impl Into<String>) -> Self {
        let cause = cause.into();
        let mut e = Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {cause}"),
        );
        e.details = Some(json!({"causes": [{"message": cause}]}));
        e
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object sent to the client.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        if let Some(c) = &self.continue_token {
            s["metadata"]["continue"] = Value::String(c.clone());
        }
        s
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        Self::internal(e.to_string())
    }
}
