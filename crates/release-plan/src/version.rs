//! Release versions, phases and kinds: the vocabulary every planner shares.

use std::cmp::Ordering;
use std::fmt;

use crate::Error;

/// A release version as Deckhouse reads it: an optional leading `v`, then `MAJOR[.MINOR[.PATCH]]`
/// with an optional pre-release and build metadata (missing parts are zero, as with Go's
/// Masterminds semver). The text it was written as is kept, because some of Deckhouse's messages
/// quote it verbatim (`minor version is greater than deployed v1.65.0 by one`).
///
/// Ordering and equality follow semver precedence: build metadata is ignored.
#[derive(Clone, Debug)]
pub struct ReleaseVersion {
    version: semver::Version,
    original: String,
}

impl ReleaseVersion {
    /// Parses `v1.67.3`, `1.67.3`, `1.67` (= `1.67.0`), `v2` (= `2.0.0`), `1.2.3-rc.1+b5`.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let invalid = |reason: &str| Error::InvalidVersion {
            value: text.to_owned(),
            reason: reason.to_owned(),
        };
        let body = text.strip_prefix('v').unwrap_or(text);
        // Split off pre-release and build before counting the numeric parts.
        let core_end = body.find(['-', '+']).unwrap_or(body.len());
        let (core, rest) = body.split_at(core_end);
        if core.is_empty() {
            return Err(invalid("no version number"));
        }
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() > 3 {
            return Err(invalid("more than three numeric parts"));
        }
        for part in &parts {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid("numeric parts must be digits"));
            }
        }
        let mut full = parts.join(".");
        for _ in parts.len()..3 {
            full.push_str(".0");
        }
        full.push_str(rest);
        let version = semver::Version::parse(&full).map_err(|e| invalid(&e.to_string()))?;
        Ok(Self {
            version,
            original: text.to_owned(),
        })
    }

    /// A version from its numeric parts, written as `vMAJOR.MINOR.PATCH`.
    pub fn new(major: u64, minor: u64, patch: u64) -> Self {
        Self {
            version: semver::Version::new(major, minor, patch),
            original: format!("v{major}.{minor}.{patch}"),
        }
    }

    /// The major part.
    pub fn major(&self) -> u64 {
        self.version.major
    }

    /// The minor part.
    pub fn minor(&self) -> u64 {
        self.version.minor
    }

    /// The patch part.
    pub fn patch(&self) -> u64 {
        self.version.patch
    }

    /// Whether this is a pre-release (`1.2.3-rc.1`); channels never deliver those.
    pub fn is_prerelease(&self) -> bool {
        !self.version.pre.is_empty()
    }

    /// The text the version was parsed from (Go's `Original()`), e.g. `v1.67.3`.
    pub fn original(&self) -> &str {
        &self.original
    }

    /// The parsed version.
    pub fn semver(&self) -> &semver::Version {
        &self.version
    }

    /// Whether `other` is a later patch of the same minor (Deckhouse's `isPatchRelease(self, other)`).
    pub fn is_patch_before(&self, other: &ReleaseVersion) -> bool {
        other.major() == self.major()
            && other.minor() == self.minor()
            && other.patch() > self.patch()
    }

    /// Whether updating from `self` to `next` is a direct step: `self.major+1 ≥ next.major` and
    /// `self.minor+1 ≥ next.minor` (Deckhouse's `isUpdatingSequence`; the two parts are checked
    /// independently, exactly as Deckhouse does).
    pub fn is_updating_sequence(&self, next: &ReleaseVersion) -> bool {
        self.major().saturating_add(1) >= next.major()
            && self.minor().saturating_add(1) >= next.minor()
    }

    /// `MAJOR.MINOR`, the key of `disruptions` and the version of notification messages.
    pub fn major_minor(&self) -> String {
        format!("{}.{}", self.major(), self.minor())
    }
}

/// `MAJOR.MINOR.PATCH[-PRE][+BUILD]` without the leading `v` (Go's `String()`).
impl fmt::Display for ReleaseVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.version.fmt(f)
    }
}

impl PartialEq for ReleaseVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ReleaseVersion {}

impl PartialOrd for ReleaseVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ReleaseVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.version.cmp_precedence(&other.version)
    }
}

/// The `status.phase` of a DeckhouseRelease or ModuleRelease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// No phase yet (`""`): a release just created.
    New,
    /// Waiting to be applied.
    Pending,
    /// Applied.
    Deployed,
    /// Replaced by a later Deployed release.
    Superseded,
    /// Suspended by the channel (`suspend` in version.json).
    Suspended,
    /// Passed over.
    Skipped,
    /// Being deleted (ModuleRelease).
    Terminating,
    /// Deprecated phase of old DeckhouseReleases.
    Outdated,
    /// Any other text.
    Other,
}

impl Phase {
    /// The phase written in `status.phase`.
    pub fn parse(text: &str) -> Self {
        match text {
            "" => Self::New,
            "Pending" => Self::Pending,
            "Deployed" => Self::Deployed,
            "Superseded" => Self::Superseded,
            "Suspended" => Self::Suspended,
            "Skipped" => Self::Skipped,
            "Terminating" => Self::Terminating,
            "Outdated" => Self::Outdated,
            _ => Self::Other,
        }
    }

    /// The text Deckhouse writes for this phase (`Other` has none and reads as `""`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New | Self::Other => "",
            Self::Pending => "Pending",
            Self::Deployed => "Deployed",
            Self::Superseded => "Superseded",
            Self::Suspended => "Suspended",
            Self::Skipped => "Skipped",
            Self::Terminating => "Terminating",
            Self::Outdated => "Outdated",
        }
    }
}

/// Which kind of release a decision is about; a few rules and messages differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReleaseKind {
    /// A platform release (DeckhouseRelease).
    Deckhouse,
    /// A module release (ModuleRelease).
    Module,
}

impl ReleaseKind {
    /// The manual-approval annotation named in the waiting message.
    pub const fn approval_annotation(self) -> &'static str {
        match self {
            Self::Deckhouse => "release.deckhouse.io/approved",
            Self::Module => "modules.deckhouse.io/approved",
        }
    }

    /// Whether a release is manually approved.
    ///
    /// DeckhouseRelease: the top-level `approved: true`, or the annotation exactly `"true"`.
    /// ModuleRelease: the annotation parsed as a Go bool (`1`, `t`, `T`, `TRUE`, `true`, `True`);
    /// ModuleRelease has no top-level field, so `top_level` is ignored for it.
    pub fn manually_approved(self, top_level: bool, annotation: Option<&str>) -> bool {
        match self {
            Self::Deckhouse => top_level || annotation == Some("true"),
            Self::Module => matches!(annotation, Some("1" | "t" | "T" | "TRUE" | "true" | "True")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_forms() {
        let cases = [
            ("v1.67.3", "1.67.3", "v1.67.3"),
            ("1.67.3", "1.67.3", "1.67.3"),
            ("1.67", "1.67.0", "1.67"),
            ("v2", "2.0.0", "v2"),
            ("1.2.3-rc.1+b5", "1.2.3-rc.1+b5", "1.2.3-rc.1+b5"),
        ];
        for (input, display, original) in cases {
            let v = ReleaseVersion::parse(input).unwrap();
            assert_eq!(v.to_string(), display, "{input}");
            assert_eq!(v.original(), original, "{input}");
        }
        assert!(ReleaseVersion::parse("1.2.3-rc.1").unwrap().is_prerelease());
        assert!(!ReleaseVersion::parse("v1.2.3").unwrap().is_prerelease());
    }

    #[test]
    fn parse_rejects() {
        for bad in [
            "", "v", "x1.2.3", "1.2.3.4", "1..3", "1.a.3", "1.2.3-", "-1.2.3",
        ] {
            let err = ReleaseVersion::parse(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidVersion { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn ordering_ignores_build_and_prefix() {
        let a = ReleaseVersion::parse("v1.2.3+b1").unwrap();
        let b = ReleaseVersion::parse("1.2.3+b2").unwrap();
        assert_eq!(a, b);
        assert!(ReleaseVersion::parse("1.2.3-rc.1").unwrap() < b);
        assert!(ReleaseVersion::parse("1.10.0").unwrap() > ReleaseVersion::parse("1.9.9").unwrap());
    }

    #[test]
    fn updating_sequence() {
        let v = |s| ReleaseVersion::parse(s).unwrap();
        assert!(v("1.66.3").is_updating_sequence(&v("1.66.5")));
        assert!(v("1.66.3").is_updating_sequence(&v("1.67.11")));
        assert!(!v("1.66.3").is_updating_sequence(&v("1.68.5")));
        assert!(v("1.66.3").is_updating_sequence(&v("2.0.0")));
        assert!(!v("1.66.3").is_updating_sequence(&v("3.0.0")));
    }

    #[test]
    fn approval() {
        use ReleaseKind::*;
        assert!(Deckhouse.manually_approved(true, None));
        assert!(Deckhouse.manually_approved(false, Some("true")));
        assert!(!Deckhouse.manually_approved(false, Some("True")));
        assert!(!Deckhouse.manually_approved(false, None));
        assert!(Module.manually_approved(false, Some("True")));
        assert!(Module.manually_approved(false, Some("1")));
        assert!(!Module.manually_approved(true, None));
        assert!(!Module.manually_approved(false, Some("yes")));
        assert_eq!(
            Deckhouse.approval_annotation(),
            "release.deckhouse.io/approved"
        );
        assert_eq!(
            Module.approval_annotation(),
            "modules.deckhouse.io/approved"
        );
    }

    #[test]
    fn phases_round_trip() {
        for text in [
            "",
            "Pending",
            "Deployed",
            "Superseded",
            "Suspended",
            "Skipped",
            "Terminating",
            "Outdated",
        ] {
            assert_eq!(Phase::parse(text).as_str(), text);
        }
        assert_eq!(Phase::parse("Weird"), Phase::Other);
    }
}
