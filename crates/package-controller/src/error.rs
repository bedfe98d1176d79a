//! The crate's one error type.

/// What went wrong while scanning a package repository or loading a version's metadata.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API request failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done, e.g. `list ApplicationPackageVersions`.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Reading the registry or an image failed (including hostile images refused).
    #[error(transparent)]
    Registry(#[from] module_controller::Error),
    /// A temporary directory could not be made.
    #[error("temporary directory: {0}")]
    Temp(#[source] std::io::Error),
    /// An Application cannot be installed as its chart stands.
    #[error("{0}")]
    Install(String),
    /// The version image's metadata cannot be used.
    #[error(transparent)]
    Metadata(#[from] crate::metadata::MetadataError),
}

impl Error {
    pub(crate) fn kube(what: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            what: what.into(),
            source,
        }
    }
}
