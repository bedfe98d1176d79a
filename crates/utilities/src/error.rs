//! The crate's one error type.

use std::path::PathBuf;

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
    /// A file or directory could not be read or changed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A command on the node failed.
    #[error("{command}: {reason}")]
    Command {
        /// The command line.
        command: String,
        /// Why it failed (exit status and stderr).
        reason: String,
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

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
