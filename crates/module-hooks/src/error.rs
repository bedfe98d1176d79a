//! The crate's error type.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::ConfigError;
use crate::output::OutputError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cmd start: {path}: {source}")]
    Spawn {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `--config` (or `hook config`) exited with an error.
    #[error("exec file '{path}': {message}")]
    ConfigRun { path: PathBuf, message: String },
    /// addon-operator's words for a module hook whose config is refused.
    #[error("`{module}` module hook `{hook}` --config invalid: {source}")]
    ModuleConfig {
        module: String,
        hook: String,
        #[source]
        source: ConfigError,
    },
    #[error("global hook `{hook}` --config invalid: {source}")]
    GlobalConfig {
        hook: String,
        #[source]
        source: ConfigError,
    },
    /// The hook exited non-zero; `message` is its stderr (the tail of it), or the exit status
    /// when it wrote nothing there.
    #[error("{message}")]
    Failed {
        hook: String,
        exit_code: Option<i32>,
        message: String,
    },
    #[error("hook '{hook}' was killed after the timeout of {timeout:?}")]
    Timeout { hook: String, timeout: Duration },
    #[error("{context}: {source}")]
    Output {
        hook: String,
        context: &'static str,
        #[source]
        source: OutputError,
    },
    #[error("chroot for module '{module}': {what}: {source}")]
    Chroot {
        module: String,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("enabled script '{path}': MODULE_ENABLED_RESULT has '{value}', expected true or false")]
    EnabledResult { path: PathBuf, value: String },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}
