//! Whether an Application may move from its installed version to the one it asks for, under
//! the versions' `versionCompatibilityRules`.
//!
//! - An **upgrade** is judged by the *target's* `upgrade` rule: `from` is the lowest installed
//!   version it accepts; `allowSkipMajor`, `allowSkipMinor` and `allowSkipPatches` bound how
//!   many published versions the move jumps over — major lines and minor lines strictly between
//!   the two, and patches of the target's minor line below the target.
//! - A **downgrade** (rollback) is judged by the *installed* version's `downgrade` rule: `to` is
//!   the lowest version it may roll back to, `maxRollback` how many published versions it may go
//!   back (the versions from the target up to, not including, the installed one), and the skip
//!   limits as for an upgrade.
//!
//! A limit that is not set does not restrict; a version without rules accepts every move. The
//! refusal names the rule, its owner and its value, so that the user knows which version to go
//! through instead.

use api::packages::{CompatibilityRule, VersionCompatibilityRules};
use semver::Version;

/// What moving from the installed version to the requested one is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// Nothing is installed yet.
    Install,
    /// The requested version is installed.
    Same,
    /// To a higher version.
    Upgrade,
    /// To a lower version.
    Downgrade,
}

/// A move the rules forbid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The rule, e.g. `versionCompatibilityRules.upgrade.allowSkipMinor`.
    pub rule: &'static str,
    /// What the user reads.
    pub message: String,
}

/// A version tag (`v1.2.3` or `1.2.3`) as semver; `None` when it is not one.
pub fn parse_version(tag: &str) -> Option<Version> {
    Version::parse(tag.strip_prefix('v').unwrap_or(tag)).ok()
}

/// Judges the move from `current` to `target`. `available` are the package's published
/// versions (any order, may hold non-semver tags, which are ignored); `current_rules` and
/// `target_rules` the two versions' rules.
pub fn check(
    current: Option<&str>,
    target: &str,
    current_rules: Option<&VersionCompatibilityRules>,
    target_rules: Option<&VersionCompatibilityRules>,
    available: &[String],
) -> Result<Move, Refusal> {
    let Some(current) = current else {
        return Ok(Move::Install);
    };
    let (Some(c), Some(t)) = (parse_version(current), parse_version(target)) else {
        return if current == target {
            Ok(Move::Same)
        } else {
            Err(Refusal {
                rule: "version",
                message: format!("cannot compare versions {current:?} and {target:?}"),
            })
        };
    };
    let published: Vec<Version> = available.iter().filter_map(|v| parse_version(v)).collect();
    match t.cmp(&c) {
        std::cmp::Ordering::Equal => Ok(Move::Same),
        std::cmp::Ordering::Greater => {
            if let Some(rule) = target_rules.and_then(|r| r.upgrade.as_ref()) {
                judge(
                    Direction::Upgrade,
                    current,
                    target,
                    &c,
                    &t,
                    rule,
                    &published,
                )?;
            }
            Ok(Move::Upgrade)
        }
        std::cmp::Ordering::Less => {
            if let Some(rule) = current_rules.and_then(|r| r.downgrade.as_ref()) {
                judge(
                    Direction::Downgrade,
                    current,
                    target,
                    &c,
                    &t,
                    rule,
                    &published,
                )?;
            }
            Ok(Move::Downgrade)
        }
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Upgrade,
    Downgrade,
}

/// How many published versions a move jumps over, per level.
#[derive(Debug, Default, PartialEq, Eq)]
struct Skipped {
    majors: usize,
    minors: usize,
    patches: usize,
}

fn skipped(low: &Version, high: &Version, target: &Version, published: &[Version]) -> Skipped {
    let between: Vec<&Version> = published
        .iter()
        .filter(|v| *v > low && *v < high && v.pre.is_empty())
        .collect();
    let mut majors: Vec<u64> = between
        .iter()
        .map(|v| v.major)
        .filter(|m| *m != low.major && *m != high.major)
        .collect();
    majors.sort_unstable();
    majors.dedup();
    let mut minors: Vec<(u64, u64)> = between
        .iter()
        .map(|v| (v.major, v.minor))
        .filter(|l| *l != (low.major, low.minor) && *l != (high.major, high.minor))
        .collect();
    minors.sort_unstable();
    minors.dedup();
    let patches = between
        .iter()
        .filter(|v| (v.major, v.minor) == (target.major, target.minor))
        .count();
    Skipped {
        majors: majors.len(),
        minors: minors.len(),
        patches,
    }
}

fn judge(
    direction: Direction,
    current: &str,
    target: &str,
    c: &Version,
    t: &Version,
    rule: &CompatibilityRule,
    published: &[Version],
) -> Result<(), Refusal> {
    let (word, owner) = match direction {
        Direction::Upgrade => ("upgrade", target),
        Direction::Downgrade => ("downgrade", current),
    };
    let refuse = |rule: &'static str, why: String| Refusal {
        rule,
        message: format!("{word} from {current} to {target} is not allowed: {why}"),
    };
    match direction {
        Direction::Upgrade => {
            if let Some(from) = rule.from.as_deref()
                && let Some(f) = parse_version(from)
                && *c < f
            {
                return Err(refuse(
                    "versionCompatibilityRules.upgrade.from",
                    format!(
                        "{owner} accepts upgrades only from {from} (versionCompatibilityRules.upgrade.from)"
                    ),
                ));
            }
        }
        Direction::Downgrade => {
            if let Some(to) = rule.to.as_deref()
                && let Some(bound) = parse_version(to)
                && *t < bound
            {
                return Err(refuse(
                    "versionCompatibilityRules.downgrade.to",
                    format!(
                        "{owner} rolls back no further than {to} (versionCompatibilityRules.downgrade.to)"
                    ),
                ));
            }
            if let Some(max) = rule.max_rollback {
                let steps = published
                    .iter()
                    .filter(|v| *v >= t && *v < c && v.pre.is_empty())
                    .count()
                    .max(1);
                if steps as i64 > max {
                    return Err(refuse(
                        "versionCompatibilityRules.downgrade.maxRollback",
                        format!(
                            "it rolls back {steps} version(s), {owner} allows {max} (versionCompatibilityRules.downgrade.maxRollback)"
                        ),
                    ));
                }
            }
        }
    }
    let (low, high) = match direction {
        Direction::Upgrade => (c, t),
        Direction::Downgrade => (t, c),
    };
    let s = skipped(low, high, t, published);
    let names = match direction {
        Direction::Upgrade => [
            "versionCompatibilityRules.upgrade.allowSkipMajor",
            "versionCompatibilityRules.upgrade.allowSkipMinor",
            "versionCompatibilityRules.upgrade.allowSkipPatches",
        ],
        Direction::Downgrade => [
            "versionCompatibilityRules.downgrade.allowSkipMajor",
            "versionCompatibilityRules.downgrade.allowSkipMinor",
            "versionCompatibilityRules.downgrade.allowSkipPatches",
        ],
    };
    let limits = [
        (s.majors, rule.allow_skip_major, "major", names[0]),
        (s.minors, rule.allow_skip_minor, "minor", names[1]),
        (s.patches, rule.allow_skip_patches, "patch", names[2]),
    ];
    for (count, limit, level, rule_name) in limits {
        if let Some(limit) = limit
            && count as i64 > limit
        {
            return Err(refuse(
                rule_name,
                format!(
                    "it skips {count} {level} version(s), {owner} allows {limit} ({rule_name})"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(
        upgrade: Option<CompatibilityRule>,
        downgrade: Option<CompatibilityRule>,
    ) -> VersionCompatibilityRules {
        VersionCompatibilityRules { upgrade, downgrade }
    }

    fn up(
        from: Option<&str>,
        major: Option<i64>,
        minor: Option<i64>,
        patches: Option<i64>,
    ) -> CompatibilityRule {
        CompatibilityRule {
            from: from.map(String::from),
            allow_skip_major: major,
            allow_skip_minor: minor,
            allow_skip_patches: patches,
            ..Default::default()
        }
    }

    fn down(to: Option<&str>, max_rollback: Option<i64>) -> CompatibilityRule {
        CompatibilityRule {
            to: to.map(String::from),
            max_rollback,
            ..Default::default()
        }
    }

    const PUBLISHED: [&str; 9] = [
        "v1.0.0", "v1.0.1", "v1.0.2", "v1.1.0", "v1.2.0", "v1.3.0", "v2.0.0", "v3.0.0", "latest",
    ];

    #[test]
    fn moves() {
        let published: Vec<String> = PUBLISHED.iter().map(|s| s.to_string()).collect();
        let no_skip_minor = rules(Some(up(None, None, Some(0), None)), None);
        let skip_one_minor = rules(Some(up(None, None, Some(1), None)), None);
        let from_v11 = rules(Some(up(Some("v1.1.0"), None, None, None)), None);
        let no_patch_skip = rules(Some(up(None, None, None, Some(0))), None);
        let no_major_skip = rules(Some(up(None, Some(0), None, None)), None);
        let rollback_one = rules(None, Some(down(None, Some(1))));
        let rollback_to_v12 = rules(None, Some(down(Some("v1.2.0"), None)));
        type Row<'a> = (
            Option<&'a str>,
            &'a str,
            Option<&'a VersionCompatibilityRules>,
            Option<&'a VersionCompatibilityRules>,
            Result<Move, &'static str>,
        );
        let table: Vec<Row> = vec![
            (None, "v1.0.0", None, None, Ok(Move::Install)),
            (Some("v1.0.0"), "v1.0.0", None, None, Ok(Move::Same)),
            (Some("v1.0.0"), "v3.0.0", None, None, Ok(Move::Upgrade)),
            (Some("v3.0.0"), "v1.0.0", None, None, Ok(Move::Downgrade)),
            // allowSkipMinor: v1.1 → v1.3 skips v1.2.
            (
                Some("v1.1.0"),
                "v1.2.0",
                None,
                Some(&no_skip_minor),
                Ok(Move::Upgrade),
            ),
            (
                Some("v1.1.0"),
                "v1.3.0",
                None,
                Some(&no_skip_minor),
                Err("versionCompatibilityRules.upgrade.allowSkipMinor"),
            ),
            (
                Some("v1.1.0"),
                "v1.3.0",
                None,
                Some(&skip_one_minor),
                Ok(Move::Upgrade),
            ),
            (
                Some("v1.0.2"),
                "v1.3.0",
                None,
                Some(&skip_one_minor),
                Err("versionCompatibilityRules.upgrade.allowSkipMinor"),
            ),
            // from: the installed version must be at least v1.1.0.
            (
                Some("v1.0.2"),
                "v1.2.0",
                None,
                Some(&from_v11),
                Err("versionCompatibilityRules.upgrade.from"),
            ),
            (
                Some("v1.1.0"),
                "v1.2.0",
                None,
                Some(&from_v11),
                Ok(Move::Upgrade),
            ),
            // allowSkipPatches: patches of the target's line below it.
            (
                Some("v1.0.0"),
                "v1.0.1",
                None,
                Some(&no_patch_skip),
                Ok(Move::Upgrade),
            ),
            (
                Some("v1.0.0"),
                "v1.0.2",
                None,
                Some(&no_patch_skip),
                Err("versionCompatibilityRules.upgrade.allowSkipPatches"),
            ),
            // allowSkipMajor: v1 → v3 skips v2.
            (
                Some("v1.3.0"),
                "v2.0.0",
                None,
                Some(&no_major_skip),
                Ok(Move::Upgrade),
            ),
            (
                Some("v1.3.0"),
                "v3.0.0",
                None,
                Some(&no_major_skip),
                Err("versionCompatibilityRules.upgrade.allowSkipMajor"),
            ),
            // Upgrade rules never judge a downgrade, and the other way round.
            (
                Some("v1.3.0"),
                "v1.1.0",
                Some(&no_skip_minor),
                None,
                Ok(Move::Downgrade),
            ),
            (
                Some("v1.0.0"),
                "v1.3.0",
                Some(&rollback_one),
                None,
                Ok(Move::Upgrade),
            ),
            // maxRollback counts published versions from the target up to the installed one.
            (
                Some("v1.3.0"),
                "v1.2.0",
                Some(&rollback_one),
                None,
                Ok(Move::Downgrade),
            ),
            (
                Some("v1.3.0"),
                "v1.1.0",
                Some(&rollback_one),
                None,
                Err("versionCompatibilityRules.downgrade.maxRollback"),
            ),
            (
                Some("v1.3.0"),
                "v1.2.0",
                Some(&rollback_to_v12),
                None,
                Ok(Move::Downgrade),
            ),
            (
                Some("v1.3.0"),
                "v1.1.0",
                Some(&rollback_to_v12),
                None,
                Err("versionCompatibilityRules.downgrade.to"),
            ),
            (Some("latest"), "v1.0.0", None, None, Err("version")),
        ];
        for (current, target, current_rules, target_rules, want) in table {
            let got =
                check(current, target, current_rules, target_rules, &published).map_err(|r| r.rule);
            assert_eq!(got, want, "{current:?} -> {target}");
        }
    }

    #[test]
    fn refusal_names_the_rule_and_its_owner() {
        let published: Vec<String> = PUBLISHED.iter().map(|s| s.to_string()).collect();
        let r = rules(Some(up(None, None, Some(0), None)), None);
        let refusal = check(Some("v1.1.0"), "v1.3.0", None, Some(&r), &published).unwrap_err();
        assert_eq!(
            refusal.message,
            "upgrade from v1.1.0 to v1.3.0 is not allowed: it skips 1 minor version(s), v1.3.0 allows 0 (versionCompatibilityRules.upgrade.allowSkipMinor)"
        );
        let r = rules(None, Some(down(None, Some(1))));
        let refusal = check(Some("v1.3.0"), "v1.0.2", Some(&r), None, &published).unwrap_err();
        assert_eq!(
            refusal.message,
            "downgrade from v1.3.0 to v1.0.2 is not allowed: it rolls back 3 version(s), v1.3.0 allows 1 (versionCompatibilityRules.downgrade.maxRollback)"
        );
    }
}
