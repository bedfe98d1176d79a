//! The crate's one error type.

/// What can go wrong in this crate: decoding an object handed to validation, parsing a value of
/// one of Deckhouse's enumerations, and rendering CRD manifests.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A string is not one of the values of a Deckhouse enumeration.
    #[error("{value:?} is not a valid {what}; expected one of: {expected}")]
    UnknownValue {
        /// The enumeration, e.g. `ModuleReleasePhase`.
        what: &'static str,
        /// The rejected input.
        value: String,
        /// The accepted values, comma-separated.
        expected: String,
    },
    /// An object could not be decoded into its Rust type.
    #[error("cannot decode {kind}: {source}")]
    Decode {
        /// The kind being decoded.
        kind: String,
        /// The serde error, with the path of the offending field.
        #[source]
        source: serde_json::Error,
    },
    /// A CRD could not be rendered as YAML.
    #[error("cannot render CRD {name} as YAML: {source}")]
    Yaml {
        /// The CRD name, `<plural>.<group>`.
        name: String,
        /// The serializer error.
        #[source]
        source: serde_saphyr::SerializeError,
    },
    /// A CRD manifest could not be parsed.
    #[error("cannot parse CRD manifest {name}: {source}")]
    ParseManifest {
        /// The file or CRD name.
        name: String,
        /// The parser error.
        #[source]
        source: Box<serde_saphyr::Error>,
    },
}
