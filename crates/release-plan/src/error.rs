//! The crate's one error type.

/// What went wrong while reading planner input or planning.
///
/// The `Display` texts of the step-by-step variants are Deckhouse's own words, because the
/// controller surfaces them in logs and in `d8_updating_is_failed`.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// An update window bound is not `H:MM`/`HH:MM` (hours 0–23, minutes 00–59).
    #[error("invalid update window time {value:?}: expected HH:MM (00:00 to 23:59)")]
    InvalidWindowTime {
        /// The rejected text.
        value: String,
    },
    /// An update window does not satisfy `from < to` (windows never cross midnight).
    #[error(
        "Invalid update windows. Start time (windows.from) should be less than the end time of the update window (windows.to): from {from:?}, to {to:?}"
    )]
    WindowNotOrdered {
        /// The window start as given.
        from: String,
        /// The window end as given.
        to: String,
    },
    /// An update window day is not one of Mon..Sun (case-insensitive).
    #[error(
        "invalid update window day {value:?}: expected one of Mon, Tue, Wed, Thu, Fri, Sat, Sun"
    )]
    UnknownDay {
        /// The rejected text.
        value: String,
    },
    /// A release version is not a semantic version.
    #[error("invalid release version {value:?}: {reason}")]
    InvalidVersion {
        /// The rejected text.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A channel named a pre-release version; Deckhouse refuses those.
    #[error("pre-release versions are not supported: {version}")]
    PreRelease {
        /// The version as written in the channel.
        version: String,
    },
    /// No registry tag looks like `vX.Y.Z`.
    #[error("no matched tags in registry")]
    NoMatchedTags,
    /// No registry tag lies between the deployed version and the channel version.
    #[error("no acceptable for step by step update tags in registry")]
    NoAcceptableTags,
    /// The first step of the chain is itself not a direct step from the deployed version.
    #[error("versions is not in sequence: '{actual}' and '{next}'")]
    NotInSequence {
        /// The version the chain starts from.
        actual: String,
        /// The first version found in the registry.
        next: String,
    },
    /// The task calculator was asked about a release that is not Pending.
    #[error("release phase is not pending")]
    ReleasePhaseIsNotPending,
    /// The task calculator was asked about a release whose version is already deployed.
    #[error("release is already deployed")]
    ReleaseIsAlreadyDeployed,
    /// The task calculator was asked about a release missing from the list it was given.
    #[error("release {name:?} is not in the list of releases")]
    ReleaseNotListed {
        /// The release name.
        name: String,
    },
    /// A version constraint (`requirements.deckhouse` of a module, for example) cannot be read;
    /// the text is Go Masterminds semver's.
    #[error("improper constraint: {constraint}")]
    InvalidConstraint {
        /// The constraint as written.
        constraint: String,
    },
    /// A computed instant falls outside the representable time range.
    #[error("time out of range while computing {what}")]
    TimeOutOfRange {
        /// What was being computed.
        what: &'static str,
    },
}
