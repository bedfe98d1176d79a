//! The crate's one error type.

/// What is wrong with a module's files or with the settings being checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A YAML or JSON document cannot be read.
    #[error("{what}: {reason}")]
    Parse {
        /// Which document, e.g. `openapi/config-values.yaml`.
        what: String,
        /// The parser's message.
        reason: String,
    },
    /// The settings schema is not a usable schema.
    #[error("invalid settings schema: {reason}")]
    Schema {
        /// Why.
        reason: String,
    },
    /// A conversion file or program is invalid.
    #[error("invalid conversion {file}: {reason}")]
    ConversionFile {
        /// The file, e.g. `openapi/conversions/v2.yaml`.
        file: String,
        /// Why.
        reason: String,
    },
    /// Running the conversions failed (Deckhouse's wording after the prefix).
    #[error("spec.settings conversion from version {from} to {to}: {reason}")]
    Conversion {
        /// The version converted from.
        from: i64,
        /// The version converted to.
        to: i64,
        /// Why.
        reason: String,
    },
    /// A module definition (`module.yaml` or the directory name) is invalid.
    #[error("module {name:?}: {reason}")]
    Definition {
        /// The module or directory name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A version constraint cannot be parsed.
    #[error("invalid version constraint {constraint:?}: {reason}")]
    Constraint {
        /// The constraint as written.
        constraint: String,
        /// Why.
        reason: String,
    },
}
