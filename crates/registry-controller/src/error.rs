//! The crate's one error type.

/// What stopped a reconcile. The next pass retries; nothing here is fatal.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A read or write through the API failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being read or written (`kind/name`).
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A status could not be encoded as JSON.
    #[error("encoding a status: {0}")]
    Encode(#[source] serde_json::Error),
    /// A certificate could not be made.
    #[error("issuing the certificate of {what}: {source}")]
    Certificate {
        /// Where it is kept (`Secret ns/name`).
        what: String,
        /// The cause.
        #[source]
        source: pki::CertError,
    },
    /// A rendered object does not read as its Kubernetes type.
    #[error("rendering {what}: {source}")]
    Render {
        /// The object (`kind/name`).
        what: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

/// Attaches `what` to a kube error.
pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube { what, source }
}
