//! The crate's one error type.

/// What went wrong in a utility controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API request failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done, e.g. `list ObjectKeepers`.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The request cannot be carried out as asked (a clear message for the operator).
    #[error("{0}")]
    Refused(String),
}

impl Error {
    pub(crate) fn kube(what: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            what: what.into(),
            source,
        }
    }
}
