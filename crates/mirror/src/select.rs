//! What to mirror, decided from what the source registry holds: platform versions from release
//! channels and tags, module filters with version constraints, and the image sets listed in
//! `images_digests.json` / `images_tags.json`. Pure: strings in, sets out.

use std::collections::{BTreeMap, BTreeSet};

use semver::{Comparator, Op, Version, VersionReq};

use crate::error::Error;

/// The release channels Deckhouse publishes, in the order `d8 mirror` reads them.
pub const CHANNELS: [&str; 5] = ["alpha", "beta", "early-access", "stable", "rock-solid"];
/// The long-term-support channel (present in some editions only).
pub const LTS: &str = "lts";

/// Parses a release tag: `v1.2.3` (a `v` is optional); pre-releases and build metadata are not
/// releases.
pub fn parse_release(tag: &str) -> Option<Version> {
    let version = Version::parse(tag.strip_prefix('v').unwrap_or(tag)).ok()?;
    (version.pre.is_empty() && version.build.is_empty()).then_some(version)
}

/// The tag of a release: `v1.2.3`.
pub fn release_tag(version: &Version) -> String {
    format!("v{version}")
}

/// A version constraint in the dialect of `--include-platform` and `--include-module`
/// (Masterminds semver: `>=1.64 <=1.68`, `~1.65.0`, `^1.65.0`, `a || b`, or an exact `=tag`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Constraint {
    /// `=tag` (optionally `=tag+channel`): exactly that tag, published to every channel or to the
    /// named one.
    Exact {
        /// The tag as given (`v1.3.0`, `bobV1`).
        tag: String,
        /// The channel named after `+`, if any.
        channel: Option<String>,
    },
    /// A semver range: alternatives of comparator sets.
    Range {
        /// One [`VersionReq`] per `||` alternative.
        alternatives: Vec<VersionReq>,
        /// Versions named by inclusive bounds (`>=`, `<=`): kept even when a newer patch of the
        /// same minor exists.
        anchors: Vec<Version>,
        /// The text as given, for messages.
        text: String,
    },
}

impl Constraint {
    /// Parses a constraint. A bare version (`1.3.0`) means `^1.3.0`.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let text = text.trim();
        let invalid = |reason: &str| Error::InvalidConstraint {
            constraint: text.to_owned(),
            reason: reason.to_owned(),
        };
        if text.is_empty() {
            return Err(invalid("empty"));
        }
        if let Some(exact) = text.strip_prefix('=').filter(|rest| !rest.starts_with('=')) {
            let exact = exact.trim();
            let (tag, channel) = match exact.split_once('+') {
                Some((tag, channel)) if is_channel(channel) => (tag, Some(channel.to_owned())),
                _ => (exact, None),
            };
            if oci::Tag::parse(tag).is_err() {
                return Err(invalid("the exact form `=tag` needs a valid image tag"));
            }
            return Ok(Self::Exact {
                tag: tag.to_owned(),
                channel,
            });
        }
        let mut alternatives = Vec::new();
        let mut anchors = Vec::new();
        for alternative in text.split("||") {
            let mut comparators = Vec::new();
            // `>= 1.2` is one comparator: glue a lone operator to the version after it.
            let mut words: Vec<String> = Vec::new();
            let mut pending = String::new();
            for word in alternative
                .split([' ', ','])
                .map(str::trim)
                .filter(|w| !w.is_empty())
            {
                if word.chars().all(|c| "<>=~^!".contains(c)) {
                    pending.push_str(word);
                } else {
                    words.push(format!("{pending}{word}"));
                    pending.clear();
                }
            }
            if !pending.is_empty() {
                return Err(invalid("an operator has no version after it"));
            }
            for word in &words {
                let comparator = parse_comparator(word).map_err(|reason| invalid(&reason))?;
                if matches!(comparator.op, Op::GreaterEq | Op::LessEq) {
                    anchors.push(Version::new(
                        comparator.major,
                        comparator.minor.unwrap_or(0),
                        comparator.patch.unwrap_or(0),
                    ));
                }
                comparators.push(comparator);
            }
            if comparators.is_empty() {
                return Err(invalid("an alternative between `||` is empty"));
            }
            alternatives.push(VersionReq { comparators });
        }
        Ok(Self::Range {
            alternatives,
            anchors,
            text: text.to_owned(),
        })
    }

    /// Whether `version` satisfies the constraint (an exact constraint matches its own tag).
    pub fn matches(&self, version: &Version) -> bool {
        match self {
            Self::Exact { tag, .. } => parse_release(tag).is_some_and(|v| &v == version),
            Self::Range { alternatives, .. } => alternatives.iter().any(|req| req.matches(version)),
        }
    }

    /// From the release tags `tags`, the versions to mirror: the newest patch of every minor in
    /// range, plus the versions named by inclusive bounds that exist.
    pub fn select(&self, tags: &[String]) -> BTreeSet<Version> {
        match self {
            Self::Exact { tag, .. } => parse_release(tag).into_iter().collect(),
            Self::Range { anchors, .. } => {
                let available: BTreeSet<Version> =
                    tags.iter().filter_map(|t| parse_release(t)).collect();
                let in_range: Vec<Version> = available
                    .iter()
                    .filter(|v| self.matches(v))
                    .cloned()
                    .collect();
                let mut selected = latest_patches(&in_range);
                selected.extend(
                    anchors
                        .iter()
                        .filter(|a| available.contains(a) && self.matches(a))
                        .cloned(),
                );
                selected
            }
        }
    }
}

fn is_channel(name: &str) -> bool {
    CHANNELS.contains(&name) || name == LTS
}

fn parse_comparator(word: &str) -> Result<Comparator, String> {
    // Masterminds accepts a `v` prefix and a bare version (which it reads as `^`).
    let (op, rest) = match word.find(|c: char| c.is_ascii_digit() || c == 'v') {
        Some(at) => word.split_at(at),
        None => return Err(format!("{word:?} names no version")),
    };
    let rest = rest.strip_prefix('v').unwrap_or(rest);
    let op = if op.is_empty() { "^" } else { op };
    Comparator::parse(&format!("{op}{rest}")).map_err(|e| format!("{word:?}: {e}"))
}

/// The newest patch of each (major, minor).
pub fn latest_patches(versions: &[Version]) -> BTreeSet<Version> {
    let mut newest: BTreeMap<(u64, u64), &Version> = BTreeMap::new();
    for version in versions {
        let entry = newest
            .entry((version.major, version.minor))
            .or_insert(version);
        if version > *entry {
            *entry = version;
        }
    }
    newest.into_values().cloned().collect()
}

/// How platform versions are chosen (`--deckhouse-tag`, `--include-platform`, `--since-version`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PlatformSelection {
    /// Every channel's version, and the newest patch of every minor between rock-solid (or
    /// `since`, when newer) and alpha.
    #[default]
    Channels,
    /// As [`Channels`](Self::Channels), starting at `since` when it is above rock-solid.
    Since(Version),
    /// Exactly this tag (a release, a channel name or a custom build tag).
    Tag(String),
    /// Versions satisfying a constraint (an exact one behaves as [`Tag`](Self::Tag)).
    Constraint(Constraint),
}

/// Which platform tags and channels go into the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlatformPlan {
    /// Release versions (pulled as `v<version>`).
    pub versions: BTreeSet<Version>,
    /// Non-release tags asked for by name (custom builds).
    pub custom_tags: BTreeSet<String>,
    /// Channels whose images go into the bundle (their current version is among `versions`).
    pub channels: BTreeSet<String>,
    /// When a single tag was asked for: every default channel of the bundle points at it.
    pub retag_channels_to: Option<String>,
}

impl PlatformPlan {
    /// Every platform tag to pull: releases first, then custom tags.
    pub fn tags(&self) -> Vec<String> {
        self.versions
            .iter()
            .map(release_tag)
            .chain(self.custom_tags.iter().cloned())
            .collect()
    }
}

/// Decides the platform versions. `channels` maps channel names to their current versions (as
/// read from `release-channel:<channel>`), `tags` are the tags of the release-channel repository.
pub fn plan_platform(
    selection: &PlatformSelection,
    channels: &BTreeMap<String, Version>,
    tags: &[String],
) -> Result<PlatformPlan, Error> {
    let mut plan = PlatformPlan::default();
    let single = |tag: &str, plan: &mut PlatformPlan| {
        if let Some(version) = channels.get(tag) {
            plan.versions.insert(version.clone());
            plan.channels.insert(tag.to_owned());
        } else if let Some(version) = parse_release(tag) {
            for (name, v) in channels {
                if *v == version {
                    plan.channels.insert(name.clone());
                }
            }
            plan.versions.insert(version);
            plan.retag_channels_to = Some(tag.to_owned());
        } else {
            plan.custom_tags.insert(tag.to_owned());
            plan.retag_channels_to = Some(tag.to_owned());
        }
    };
    match selection {
        PlatformSelection::Tag(tag) => single(tag, &mut plan),
        PlatformSelection::Constraint(Constraint::Exact { tag, .. }) => single(tag, &mut plan),
        PlatformSelection::Constraint(constraint) => {
            plan.versions = constraint.select(tags);
            for (name, version) in channels {
                if constraint.matches(version) {
                    plan.versions.insert(version.clone());
                    plan.channels.insert(name.clone());
                }
            }
        }
        PlatformSelection::Channels | PlatformSelection::Since(_) => {
            if channels.is_empty() {
                return Err(Error::NoChannels);
            }
            let rock_solid = channels.get("rock-solid").or_else(|| channels.get(LTS));
            let since = match selection {
                PlatformSelection::Since(since) => Some(since),
                _ => None,
            };
            let min = match (rock_solid, since) {
                (Some(rs), Some(s)) => Some(if s > rs { s } else { rs }),
                (rs, s) => rs.or(s),
            };
            let max = channels
                .get("alpha")
                .or_else(|| channels.values().max())
                .cloned();
            for (name, version) in channels {
                if min.is_none_or(|m| version >= m) {
                    plan.versions.insert(version.clone());
                    plan.channels.insert(name.clone());
                }
            }
            if let Some(max) = max {
                let between: Vec<Version> = tags
                    .iter()
                    .filter_map(|t| parse_release(t))
                    .filter(|v| min.is_none_or(|m| v >= m) && *v <= max)
                    .collect();
                plan.versions.extend(latest_patches(&between));
            }
        }
    }
    if plan.versions.is_empty() && plan.custom_tags.is_empty() {
        return Err(Error::NothingSelected {
            what: "platform release".into(),
        });
    }
    Ok(plan)
}

/// One `--include-module` / `--exclude-module` value: `name[@constraint]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleSpec {
    /// The module name.
    pub name: String,
    /// The version constraint, if any.
    pub constraint: Option<Constraint>,
}

impl ModuleSpec {
    /// Parses `name[@constraint]`.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let (name, constraint) = match text.split_once('@') {
            Some((name, c)) => (name.trim(), Some(Constraint::parse(c)?)),
            None => (text.trim(), None),
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(Error::InvalidModuleFilter {
                filter: text.to_owned(),
            });
        }
        Ok(Self {
            name: name.to_owned(),
            constraint,
        })
    }
}

/// The module filter: a whitelist (any `--include-module`) or else a blacklist.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModuleFilter {
    /// `--include-module` values; when non-empty, only these modules are mirrored.
    pub include: Vec<ModuleSpec>,
    /// `--exclude-module` values; ignored when `include` is non-empty (as in `d8 mirror`).
    pub exclude: Vec<ModuleSpec>,
}

impl ModuleFilter {
    /// Whether module `name` is mirrored at all.
    pub fn wants(&self, name: &str) -> bool {
        if !self.include.is_empty() {
            return self.include.iter().any(|s| s.name == name);
        }
        !self
            .exclude
            .iter()
            .any(|s| s.name == name && s.constraint.is_none())
    }

    /// Module versions to mirror for `name`: the versions the channels point at, plus those the
    /// include constraint selects from the module's `tags`, minus excluded versions. An exact
    /// constraint selects its tag alone.
    pub fn versions(
        &self,
        name: &str,
        channel_versions: &BTreeMap<String, Version>,
        tags: &[String],
    ) -> ModuleVersions {
        let constraint = self
            .include
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.constraint.as_ref());
        let mut out = ModuleVersions::default();
        match constraint {
            Some(Constraint::Exact { tag, channel }) => {
                out.tags.insert(tag.clone());
                out.retag_channels = match channel {
                    Some(c) => vec![c.clone()],
                    None => CHANNELS
                        .iter()
                        .map(|c| (*c).to_owned())
                        .chain([LTS.to_owned()])
                        .collect(),
                };
                out.retag_to = Some(tag.clone());
            }
            Some(range) => {
                out.tags.extend(range.select(tags).iter().map(release_tag));
                out.tags.extend(channel_versions.values().map(release_tag));
                out.channels = channel_versions.keys().cloned().collect();
            }
            None => {
                out.tags.extend(channel_versions.values().map(release_tag));
                out.channels = channel_versions.keys().cloned().collect();
            }
        }
        if self.include.is_empty() {
            for spec in self.exclude.iter().filter(|s| s.name == name) {
                if let Some(c) = &spec.constraint {
                    out.tags
                        .retain(|t| !parse_release(t).is_some_and(|v| c.matches(&v)));
                    out.channels
                        .retain(|ch| !channel_versions.get(ch).is_some_and(|v| c.matches(v)));
                }
            }
        }
        out
    }
}

/// What to pull of one module.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModuleVersions {
    /// Module image tags (`v1.2.3` or a custom tag).
    pub tags: BTreeSet<String>,
    /// Channels whose `release:<channel>` images go into the bundle as they are.
    pub channels: BTreeSet<String>,
    /// Channels to point at `retag_to`'s release image instead (exact constraints).
    pub retag_channels: Vec<String>,
    /// The tag the channels in `retag_channels` point at.
    pub retag_to: Option<String>,
}

/// Every digest named in an `images_digests.json` (any nesting of objects: Deckhouse writes
/// `{module: {image: digest}}`).
pub fn digests_in(json: &[u8]) -> Result<BTreeSet<oci::Digest>, serde_json::Error> {
    let value: serde_json::Value = serde_json::from_slice(json)?;
    let mut out = BTreeSet::new();
    walk_strings(&value, &mut |s| {
        if let Ok(d) = oci::Digest::parse(s) {
            out.insert(d);
        }
    });
    Ok(out)
}

/// Every tag named in an `images_tags.json` (`{module: {image: tag}}`).
pub fn tags_in(json: &[u8]) -> Result<BTreeSet<String>, serde_json::Error> {
    let value: serde_json::Value = serde_json::from_slice(json)?;
    let mut out = BTreeSet::new();
    walk_strings(&value, &mut |s| {
        if oci::Tag::parse(s).is_ok() {
            out.insert(s.to_owned());
        }
    });
    Ok(out)
}

fn walk_strings(value: &serde_json::Value, f: &mut impl FnMut(&str)) {
    match value {
        serde_json::Value::String(s) => f(s),
        serde_json::Value::Object(map) => map.values().for_each(|v| walk_strings(v, f)),
        serde_json::Value::Array(items) => items.iter().for_each(|v| walk_strings(v, f)),
        _ => {}
    }
}

/// The `version` of a release-channel image's `version.json`, and whether it is suspended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelInfo {
    /// The version the channel points at.
    pub version: Version,
    /// `suspend: true`: the channel is held back.
    pub suspended: bool,
}

/// Parses a `version.json`.
pub fn parse_version_json(json: &[u8]) -> Result<ChannelInfo, String> {
    #[derive(serde::Deserialize)]
    struct Raw {
        version: String,
        #[serde(default)]
        suspend: bool,
    }
    let raw: Raw = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    let version = parse_release(&raw.version)
        .ok_or_else(|| format!("version {:?} is not a release version", raw.version))?;
    Ok(ChannelInfo {
        version,
        suspended: raw.suspend,
    })
}

#[cfg(test)]
mod tests;
