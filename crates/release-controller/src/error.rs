//! The crate's one error type.

/// What went wrong while reading the release channel, the settings or the cluster, or while
/// acting on a release.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API request failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done, e.g. `list DeckhouseReleases`.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A registry request failed.
    #[error("{what}: {source}")]
    Registry {
        /// What was being read, e.g. `release-channel:stable manifest`.
        what: String,
        /// The cause.
        #[source]
        source: registry_client::Error,
    },
    /// The release channel image is not what Deckhouse publishes.
    #[error("release channel image {reference}: {reason}")]
    ChannelImage {
        /// The image reference.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `version.json` cannot be read.
    #[error("version.json: {reason}")]
    VersionJson {
        /// What is wrong with it.
        reason: String,
    },
    /// The `deckhouse` ModuleConfig settings are invalid.
    #[error("the deckhouse ModuleConfig settings are invalid: {0}")]
    Settings(String),
    /// A planner refused its input.
    #[error(transparent)]
    Plan(#[from] release_plan::Error),
    /// The running version cannot be determined (no Deployment, no image tag).
    #[error("cannot determine the running Deckhouse version: {reason}")]
    RunningVersion {
        /// Why.
        reason: String,
    },
    /// The alert source could not be read.
    #[error("reading firing alerts: {reason}")]
    Alerts {
        /// Why.
        reason: String,
    },
}

impl Error {
    pub(crate) fn kube(what: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn registry(what: impl Into<String>, source: registry_client::Error) -> Self {
        Self::Registry {
            what: what.into(),
            source,
        }
    }
}
