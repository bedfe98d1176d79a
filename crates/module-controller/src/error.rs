//! The crate's one error type.

use std::path::PathBuf;

/// What went wrong while reading a module registry, unpacking a module image or installing it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API request failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done, e.g. `list ModuleSources`.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A registry request failed.
    #[error("{what}: {source}")]
    Registry {
        /// What was being read, e.g. `echo/release:stable manifest`.
        what: String,
        /// The cause.
        #[source]
        source: registry_client::Error,
    },
    /// The ModuleSource's registry settings cannot be used.
    #[error("invalid registry settings: {reason}")]
    RegistrySettings {
        /// Why.
        reason: String,
    },
    /// An image is not what a module registry publishes.
    #[error("image {reference}: {reason}")]
    Image {
        /// The image reference.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A layer entry would leave the module directory (`..`, an absolute path, a symlink
    /// pointing outside, a path written through a symlink).
    #[error("layer entry {path:?} escapes the module directory: {reason}")]
    Escape {
        /// The entry's path in the layer.
        path: String,
        /// How.
        reason: String,
    },
    /// A layer holds a device file, a FIFO or another entry type a module never needs.
    #[error("layer entry {path:?} is a {kind}, which a module image may not contain")]
    Forbidden {
        /// The entry's path.
        path: String,
        /// Its type.
        kind: String,
    },
    /// A size or count limit was hit.
    #[error("{what} is {actual}, more than the limit of {limit}")]
    TooLarge {
        /// What, e.g. `file "templates/x"` or `the module`.
        what: String,
        /// The size or count found.
        actual: u64,
        /// The limit.
        limit: u64,
    },
    /// A layer is not a (gzip) tar archive.
    #[error("layer is not a tar archive: {reason}")]
    NotTar {
        /// Why.
        reason: String,
    },
    /// A file system operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// The operation.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The release's settings schema refuses the module's current settings.
    #[error("validation failed: {reason}")]
    SettingsRejected {
        /// The validator's message.
        reason: String,
    },
    /// A module's values are refused by its schemas, or a hook's patch cannot be applied
    /// (addon-operator's message).
    #[error("{message}")]
    Values {
        /// The module (`global` for the global values).
        module: String,
        /// addon-operator's text.
        message: String,
    },
    /// A module hook failed (the run is retried).
    #[error("{message}")]
    Hook {
        /// The module (`""` for a global hook).
        module: String,
        /// The hook.
        hook: String,
        /// What the Module status shows.
        message: String,
    },
    /// A module's chart did not render (Helm's message), or its output is not a set of objects.
    #[error("module {module}: {message}")]
    Render {
        /// The module.
        module: String,
        /// Helm's error text.
        message: String,
    },
    /// A module's files are invalid (settings schema, conversions, module.yaml, version.json).
    #[error(transparent)]
    Module(#[from] module_plan::Error),
    /// A release version cannot be used.
    #[error(transparent)]
    Release(#[from] release_plan::Error),
}

impl Error {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            what,
            path: path.into(),
            source,
        }
    }

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
