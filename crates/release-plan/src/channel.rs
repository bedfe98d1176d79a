//! What to create when a release channel names a version (Deckhouse's `ensureReleases`), the
//! step-by-step chain through the registry's tags, and what to do with existing releases when
//! the channel moves back or suspends a release.
//!
//! - No releases → create the channel version. LTS channel → create it directly.
//! - The Deployed release and the channel version are a direct step
//!   ([`ReleaseVersion::is_updating_sequence`]) → create it.
//! - The releases in the cluster from the Deployed one up form a chain of direct steps and the
//!   channel version is a direct step from the newest of them → create it.
//! - Otherwise list the registry's `vX.Y.Z` tags and create the newest patch of every minor
//!   between the last release and the channel version ([`step_by_step`]).

use jiff::Timestamp;

use crate::Error;
use crate::version::{Phase, ReleaseVersion};

/// What the channel logic needs to know about one existing release.
#[derive(Clone, Debug)]
pub struct ClusterRelease {
    /// `metadata.name`.
    pub name: String,
    /// `spec.version`.
    pub version: ReleaseVersion,
    /// `status.phase`.
    pub phase: Phase,
    /// The `notification-time-shift: "true"` annotation.
    pub notification_time_shift: bool,
    /// `spec.applyAfter`.
    pub apply_after: Option<Timestamp>,
}

impl ClusterRelease {
    /// A release without annotations.
    pub fn new(name: impl Into<String>, version: ReleaseVersion, phase: Phase) -> Self {
        Self {
            name: name.into(),
            version,
            phase,
            notification_time_shift: false,
            apply_after: None,
        }
    }
}

/// Why a release is created; recorded in the `change-cause` annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateCause {
    /// There was no release at all.
    NoReleasesInCluster,
    /// The channel is LTS.
    LtsChannel,
    /// A direct step from the Deployed release.
    FromDeployed,
    /// A direct step from the newest release in the cluster.
    FromLastReleaseInCluster,
    /// One release of the step-by-step chain.
    StepByStep,
}

impl CreateCause {
    /// The `change-cause` annotation value, e.g. `check release (step-by-step)`.
    pub fn change_cause(self) -> String {
        let cause = match self {
            Self::NoReleasesInCluster => "no releases in cluster",
            Self::LtsChannel => "lts channel",
            Self::FromDeployed => "from deployed",
            Self::FromLastReleaseInCluster => "from last release in cluster",
            Self::StepByStep => "step-by-step",
        };
        format!("check release ({cause})")
    }
}

/// What to create for the channel version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NewReleases {
    /// Create the channel version itself.
    Channel {
        /// Why.
        cause: CreateCause,
    },
    /// List the registry's tags and create [`step_by_step`]`(from, channel, tags)`, each with
    /// cause [`CreateCause::StepByStep`].
    StepByStep {
        /// The version the chain starts from.
        from: ReleaseVersion,
        /// A future `applyAfter` of the release the chain starts from, when it carries the
        /// `notification-time-shift` annotation and shares the channel version's minor: the new
        /// releases inherit it (see [`crate::canary::new_release_apply_after`]).
        inherit_apply_after: Option<Timestamp>,
    },
}

/// Whether the running version must first be restored as a Deployed release (there is none).
pub fn needs_restore(releases: &[ClusterRelease]) -> bool {
    !releases.iter().any(|r| r.phase == Phase::Deployed)
}

/// The releases Deckhouse compares with the channel, ascending: those from the newest Deployed
/// one up, or all when none is Deployed.
fn releases_in_cluster(releases: &[ClusterRelease]) -> Vec<&ClusterRelease> {
    let mut sorted: Vec<&ClusterRelease> = releases.iter().collect();
    sorted.sort_by(|a, b| a.version.cmp(&b.version));
    match sorted.iter().rposition(|r| r.phase == Phase::Deployed) {
        Some(i) => sorted.split_off(i),
        None => sorted,
    }
}

/// What to create for the channel's `version`, given the existing releases (after the running
/// version has been restored when [`needs_restore`] said so).
pub fn plan_new_releases(
    releases: &[ClusterRelease],
    channel: &ReleaseVersion,
    lts: bool,
) -> Result<NewReleases, Error> {
    if channel.is_prerelease() {
        return Err(Error::PreRelease {
            version: channel.original().to_owned(),
        });
    }
    let in_cluster = releases_in_cluster(releases);
    let Some(first) = in_cluster.first() else {
        return Ok(NewReleases::Channel {
            cause: CreateCause::NoReleasesInCluster,
        });
    };
    if lts {
        return Ok(NewReleases::Channel {
            cause: CreateCause::LtsChannel,
        });
    }
    // The Deployed release, or the lowest release when none is Deployed.
    let base = *first;
    if base.version.is_updating_sequence(channel) {
        return Ok(NewReleases::Channel {
            cause: CreateCause::FromDeployed,
        });
    }
    let mut actual = base;
    let chained = in_cluster.len() > 1
        && in_cluster
            .windows(2)
            .all(|pair| pair[0].version.is_updating_sequence(&pair[1].version));
    if chained && let Some(last) = in_cluster.last() {
        actual = last;
        if actual.version.is_updating_sequence(channel) {
            return Ok(NewReleases::Channel {
                cause: CreateCause::FromLastReleaseInCluster,
            });
        }
    }
    let inherit_apply_after = actual.apply_after.filter(|_| {
        actual.notification_time_shift
            && actual.version.major() == channel.major()
            && actual.version.minor() == channel.minor()
    });
    Ok(NewReleases::StepByStep {
        from: actual.version.clone(),
        inherit_apply_after,
    })
}

/// A `vMAJOR.MINOR.PATCH` registry tag (what Deckhouse's `^v(\d+).(\d+).(\d+)$` lets through
/// and semver parses); anything else (`alpha`, `v1.2.3-rc.1`, `1.2.3`) is not a release tag.
fn release_tag(tag: &str) -> Option<ReleaseVersion> {
    let body = tag.strip_prefix('v')?;
    let parts: Vec<&str> = body.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    ReleaseVersion::parse(tag).ok()
}

/// The releases to create to go from `actual` to the channel version `target`: the newest patch
/// of every minor from `actual`'s minor to `target`'s in the registry's `tags` (a newer patch
/// than `target` in its minor is replaced by `target`; `actual`'s own minor is dropped when
/// newer minors follow), cut where a step would not be direct.
///
/// Deployed 1.66.3, tags 1.66.5, 1.67.5, 1.67.11, 1.68.1, 1.68.3, 1.68.5, channel 1.68.5 ⇒
/// 1.67.11 and 1.68.5.
pub fn step_by_step<S: AsRef<str>>(
    actual: &ReleaseVersion,
    target: &ReleaseVersion,
    tags: &[S],
) -> Result<Vec<ReleaseVersion>, Error> {
    let mut versions: Vec<ReleaseVersion> = tags
        .iter()
        .filter_map(|t| release_tag(t.as_ref()))
        .collect();
    if versions.is_empty() {
        return Err(Error::NoMatchedTags);
    }
    versions.sort();

    let in_range = |v: &ReleaseVersion| {
        (v.major() > actual.major() || (v.major() == actual.major() && v.minor() >= actual.minor()))
            && (v.major() < target.major()
                || (v.major() == target.major() && v.minor() <= target.minor()))
    };
    let mut chain: Vec<ReleaseVersion> = Vec::new();
    let mut last: Option<ReleaseVersion> = None;
    for version in versions.into_iter().filter(in_range) {
        if let Some(prev) = &last
            && (prev.minor() < version.minor() || prev.major() < version.major())
        {
            chain.push(prev.clone());
        }
        last = Some(version);
    }
    if let Some(last) = last {
        let beyond_target = last.major() > target.major()
            || (last.major() == target.major() && last.minor() > target.minor())
            || (last.major() == target.major()
                && last.minor() == target.minor()
                && last.patch() > target.patch());
        chain.push(if beyond_target { target.clone() } else { last });
    }
    if chain.len() > 1 && chain[0].minor() == actual.minor() {
        chain.remove(0);
    }
    if chain.is_empty() {
        return Err(Error::NoAcceptableTags);
    }

    let mut current = actual;
    let mut end = chain.len();
    for (i, version) in chain.iter().enumerate() {
        if !current.is_updating_sequence(version) {
            if i == 0 {
                return Err(Error::NotInSequence {
                    actual: actual.original().to_owned(),
                    next: version.original().to_owned(),
                });
            }
            end = i;
            break;
        }
        current = version;
    }
    chain.truncate(end);
    Ok(chain)
}

/// A change to an existing release after the channel was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelAction {
    /// Delete this Pending release: it is newer than the channel (the channel was rolled back).
    Delete {
        /// The release name.
        name: String,
    },
    /// Set the `suspended: "true"` annotation on this Pending release (the channel suspends it).
    Suspend {
        /// The release name.
        name: String,
    },
    /// Remove the `suspended` annotation and the Suspended phase (the channel lifted it).
    Resume {
        /// The release name.
        name: String,
    },
}

/// What to change on existing releases now that the channel names `channel` with `suspend`.
pub fn channel_actions(
    releases: &[ClusterRelease],
    channel: &ReleaseVersion,
    suspend: bool,
) -> Vec<ChannelAction> {
    let mut actions = Vec::new();
    for release in releases_in_cluster(releases).into_iter().rev() {
        if !matches!(release.phase, Phase::Pending | Phase::Suspended) {
            continue;
        }
        match release.version.cmp(channel) {
            std::cmp::Ordering::Less => {}
            std::cmp::Ordering::Greater => {
                if release.phase == Phase::Pending {
                    actions.push(ChannelAction::Delete {
                        name: release.name.clone(),
                    });
                }
            }
            std::cmp::Ordering::Equal => {
                if release.phase == Phase::Pending && suspend {
                    actions.push(ChannelAction::Suspend {
                        name: release.name.clone(),
                    });
                }
                if release.phase == Phase::Suspended && !suspend {
                    actions.push(ChannelAction::Resume {
                        name: release.name.clone(),
                    });
                }
                break;
            }
        }
    }
    actions
}

#[cfg(test)]
mod tests;
