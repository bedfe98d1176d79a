//! The crate's one error type.

/// What a pure decision could not make sense of. Messages name the field, never a credential.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The `registry` ModuleConfig settings break a rule of their schema.
    #[error("{}", .0.join("; "))]
    SettingsRejected(Vec<String>),
    /// The settings do not have the schema's shape.
    #[error("registry settings: {0}")]
    SettingsShape(#[source] serde_json::Error),
    /// An `auth` field is not base64 of `username:password`.
    #[error("{field}: auth is not base64 of username:password")]
    BadEncodedAuth {
        /// Where the value was found.
        field: String,
    },
    /// A stored drain record cannot be read.
    #[error("drain record: {0}")]
    DrainRecord(#[source] serde_json::Error),
    /// The legacy state of the previous implementation cannot be read.
    #[error("the state of the legacy implementation cannot be read: {0}")]
    LegacyState(String),
    /// The legacy `deckhouse` ModuleConfig `registry` section cannot be read.
    #[error("deckhouse ModuleConfig settings.registry: {0}")]
    LegacySettings(String),
}
