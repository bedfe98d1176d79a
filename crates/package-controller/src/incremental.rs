//! Which versions a scan takes up (pure). With `spec.update.fullScan: true` an operation takes
//! every version tag of a package; otherwise (the default, and every automatic scan after the
//! first) only the tags newer than the newest version already loaded — an
//! ApplicationPackageVersion with its `status.packageMetadata` — as Deckhouse's package
//! repository controller does. A version published below the newest loaded one (a patch for an
//! older minor line) is therefore found only by a full scan.

use crate::compat::parse_version;

/// The newest version already loaded, of `(version, metadata loaded)` pairs; drafts and tags
/// that are not versions do not count.
pub fn last_loaded<'a>(versions: impl IntoIterator<Item = (&'a str, bool)>) -> Option<String> {
    versions
        .into_iter()
        .filter(|(_, loaded)| *loaded)
        .filter_map(|(tag, _)| parse_version(tag).map(|v| (v, tag)))
        .max()
        .map(|(_, tag)| tag.to_owned())
}

/// The versions (`tags`, lowest first) a scan takes up: all of them for a full scan or when
/// nothing is loaded yet, else only those newer than `last`.
pub fn to_process(tags: Vec<String>, full_scan: bool, last: Option<&str>) -> Vec<String> {
    let Some(last) = last.filter(|_| !full_scan).and_then(parse_version) else {
        return tags;
    };
    tags.into_iter()
        .filter(|t| parse_version(t).is_some_and(|v| v > last))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(version, metadata loaded)` pairs and the last loaded version.
    type Case = (&'static [(&'static str, bool)], Option<&'static str>);

    #[test]
    fn last_loaded_is_the_newest_with_metadata() {
        let cases: &[Case] = &[
            (&[], None),
            (&[("v1.0.0", false)], None),
            (&[("v1.0.0", true), ("v1.2.0", false)], Some("v1.0.0")),
            (
                &[("v1.10.0", true), ("v1.9.0", true), ("latest", true)],
                Some("v1.10.0"),
            ),
        ];
        for (versions, want) in cases {
            assert_eq!(
                last_loaded(versions.iter().copied()).as_deref(),
                *want,
                "{versions:?}"
            );
        }
    }

    #[test]
    fn incremental_takes_only_newer_versions() {
        let tags = || {
            ["v1.0.0", "v1.0.1", "v1.1.0", "v2.0.0"]
                .map(String::from)
                .to_vec()
        };
        let cases: &[(bool, Option<&str>, &[&str])] = &[
            (
                true,
                Some("v1.1.0"),
                &["v1.0.0", "v1.0.1", "v1.1.0", "v2.0.0"],
            ),
            (false, None, &["v1.0.0", "v1.0.1", "v1.1.0", "v2.0.0"]),
            (false, Some("v1.0.0"), &["v1.0.1", "v1.1.0", "v2.0.0"]),
            (false, Some("v1.1.0"), &["v2.0.0"]),
            (false, Some("v2.0.0"), &[]),
            (
                false,
                Some("not-a-version"),
                &["v1.0.0", "v1.0.1", "v1.1.0", "v2.0.0"],
            ),
        ];
        for (full, last, want) in cases {
            assert_eq!(to_process(tags(), *full, *last), *want, "{full} {last:?}");
        }
    }
}
