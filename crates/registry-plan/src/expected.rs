//! The expected image set of the cache — the one definition fill, completeness and GC share —
//! and completeness counted on a replica's own disk.
//!
//! The set is: for each platform version the cluster keeps (deployed and previous), the release
//! image itself plus every image named by its `images_digests.json` (or `images_tags.json` when
//! present; for an old release the installer's copy is the fallback), plus the images of the
//! modules the cluster keeps and each source's module catalogue; deduplicated. An empty version
//! list or an empty set is an error, never "everything".
//!
//! The set's fingerprint (`verifiedSet`) says which set a replica's `full` refers to: the
//! leader withdraws `full` when the set changes and counts again.

use std::collections::{BTreeMap, BTreeSet};

/// Why the set cannot be computed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExpectedError {
    /// No platform version is known (no deployed release).
    #[error("no platform version is known: the expected image set cannot be computed")]
    NoVersions,
    /// The set came out empty.
    #[error("the expected image set is empty; refusing to treat that as everything")]
    Empty,
    /// An images file could not be read.
    #[error("{file} of {version} is not a JSON map of maps of strings: {reason}")]
    ImagesFile {
        /// `images_digests.json` or `images_tags.json`.
        file: &'static str,
        /// The platform version.
        version: String,
        /// What is wrong.
        reason: String,
    },
}

/// What one platform version contributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// The version, e.g. `v1.60.3`.
    pub version: String,
    /// The release image's own digest (`<path>:<ver>` resolved), if known.
    pub release: Option<String>,
    /// Contents of `images_digests.json` (release image or installer fallback), if read.
    pub digests_json: Option<Vec<u8>>,
    /// Contents of `images_tags.json`, preferred when present.
    pub tags_json: Option<Vec<u8>>,
}

/// Everything the set is computed from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inputs {
    /// Deployed and previous platform versions.
    pub versions: Vec<Version>,
    /// Image digests of the modules the cluster keeps.
    pub modules: Vec<String>,
    /// Digests of each source's module catalogue.
    pub catalogues: Vec<String>,
}

/// One expected entry: a digest, or a tag still to resolve (`missing:<ref>` until it is).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Entry {
    /// `sha256:…`.
    Digest(String),
    /// A tag of the platform repository, resolved by HEAD later.
    Tag(String),
}

/// The deduplicated expected set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpectedSet {
    /// The entries, sorted.
    pub entries: BTreeSet<Entry>,
}

type ImagesFile = BTreeMap<String, BTreeMap<String, String>>;

fn images_file(
    bytes: &[u8],
    file: &'static str,
    version: &str,
) -> Result<Vec<String>, ExpectedError> {
    let parsed: ImagesFile =
        serde_json::from_slice(bytes).map_err(|e| ExpectedError::ImagesFile {
            file,
            version: version.to_owned(),
            reason: e.to_string(),
        })?;
    Ok(parsed
        .into_values()
        .flat_map(BTreeMap::into_values)
        .collect())
}

/// Computes the set (see the module docs).
pub fn expected_set(inputs: &Inputs) -> Result<ExpectedSet, ExpectedError> {
    if inputs.versions.is_empty() {
        return Err(ExpectedError::NoVersions);
    }
    let mut entries = BTreeSet::new();
    for v in &inputs.versions {
        entries.extend(v.release.iter().cloned().map(Entry::Digest));
        if let Some(tags) = &v.tags_json {
            let tags = images_file(tags, "images_tags.json", &v.version)?;
            entries.extend(tags.into_iter().map(Entry::Tag));
        } else if let Some(digests) = &v.digests_json {
            let digests = images_file(digests, "images_digests.json", &v.version)?;
            entries.extend(digests.into_iter().map(Entry::Digest));
        }
    }
    entries.extend(inputs.modules.iter().cloned().map(Entry::Digest));
    entries.extend(inputs.catalogues.iter().cloned().map(Entry::Digest));
    if entries.is_empty() {
        return Err(ExpectedError::Empty);
    }
    Ok(ExpectedSet { entries })
}

impl ExpectedSet {
    /// Number of entries (`declaredDigests`).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A short fingerprint of the set (`verifiedSet`): the first 16 hex digits of the sha256
    /// of the sorted entries, one per line.
    pub fn fingerprint(&self) -> String {
        let mut text = String::new();
        for entry in &self.entries {
            match entry {
                Entry::Digest(d) => text.push_str(d),
                Entry::Tag(t) => {
                    text.push_str("tag:");
                    text.push_str(t);
                }
            }
            text.push('\n');
        }
        let digest = oci::Digest::sha256(text.as_bytes()).encoded();
        digest[..16].to_owned()
    }
}

/// Completeness of one replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completeness {
    /// Entries in the set.
    pub declared: usize,
    /// Entries held on the replica's own disk (tags count once resolved and held).
    pub held: usize,
    /// `declared > 0 && held >= declared && deployed tag resolvable`.
    pub full: bool,
}

/// Counts the set against the replica's own disk: `held(digest)` says whether a digest is
/// stored here; `resolve(tag)` gives a tag's digest, if the store can resolve it.
pub fn completeness(
    set: &ExpectedSet,
    held: impl Fn(&str) -> bool,
    resolve: impl Fn(&str) -> Option<String>,
    deployed_resolvable: bool,
) -> Completeness {
    let count = set
        .entries
        .iter()
        .filter(|e| match e {
            Entry::Digest(d) => held(d),
            Entry::Tag(t) => resolve(t).is_some_and(|d| held(&d)),
        })
        .count();
    let declared = set.len();
    Completeness {
        declared,
        held: count,
        full: declared > 0 && count >= declared && deployed_resolvable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(n: u8) -> String {
        format!("sha256:{}", format!("{n:02x}").repeat(32))
    }

    fn version(v: &str, release: Option<u8>, digests: &[(&str, &str, u8)]) -> Version {
        let mut map: ImagesFile = BTreeMap::new();
        for (module, image, n) in digests {
            map.entry((*module).into())
                .or_default()
                .insert((*image).into(), d(*n));
        }
        Version {
            version: v.into(),
            release: release.map(d),
            digests_json: Some(serde_json::to_vec(&map).expect("json")),
            tags_json: None,
        }
    }

    #[test]
    fn union_of_versions_modules_and_catalogues_deduplicated() {
        let inputs = Inputs {
            versions: vec![
                version(
                    "v1.60.3",
                    Some(1),
                    &[("common", "init", 10), ("cni", "agent", 11)],
                ),
                version(
                    "v1.59.9",
                    Some(2),
                    &[("common", "init", 10), ("cni", "agent", 12)],
                ),
            ],
            modules: vec![d(20), d(11)],
            catalogues: vec![d(30)],
        };
        let set = expected_set(&inputs).expect("set");
        let digests: Vec<u8> = vec![1, 2, 10, 11, 12, 20, 30];
        assert_eq!(
            set.entries,
            digests.into_iter().map(|n| Entry::Digest(d(n))).collect()
        );
        assert_eq!(set.len(), 7);
    }

    #[test]
    fn tags_file_is_preferred() {
        let mut v = version("v1.60.3", None, &[("common", "init", 10)]);
        v.tags_json = Some(br#"{"common":{"init":"v1.60.3-init"}}"#.to_vec());
        let set = expected_set(&Inputs {
            versions: vec![v],
            ..Inputs::default()
        })
        .expect("set");
        assert_eq!(
            set.entries,
            BTreeSet::from([Entry::Tag("v1.60.3-init".into())])
        );
    }

    #[test]
    fn empty_is_an_error_never_everything() {
        assert_eq!(
            expected_set(&Inputs::default()),
            Err(ExpectedError::NoVersions)
        );
        let empty = Version {
            version: "v1".into(),
            release: None,
            digests_json: Some(b"{}".to_vec()),
            tags_json: None,
        };
        assert_eq!(
            expected_set(&Inputs {
                versions: vec![empty],
                ..Inputs::default()
            }),
            Err(ExpectedError::Empty)
        );
        let bad = Version {
            version: "v1".into(),
            release: None,
            digests_json: Some(b"[1,2]".to_vec()),
            tags_json: None,
        };
        let e = expected_set(&Inputs {
            versions: vec![bad],
            ..Inputs::default()
        })
        .expect_err("bad file");
        assert!(e.to_string().contains("images_digests.json of v1"), "{e}");
    }

    #[test]
    fn completeness_counts_only_what_is_held() {
        let set = ExpectedSet {
            entries: BTreeSet::from([
                Entry::Digest(d(1)),
                Entry::Digest(d(2)),
                Entry::Tag("t".into()),
            ]),
        };
        let held = |x: &str| x == d(1) || x == d(3);
        let c = completeness(&set, held, |_| Some(d(3)), true);
        assert_eq!((c.declared, c.held, c.full), (3, 2, false));
        let all = |_: &str| true;
        assert!(completeness(&set, all, |_| Some(d(3)), true).full);
        assert!(
            !completeness(&set, all, |_| Some(d(3)), false).full,
            "deployed tag must resolve"
        );
        assert!(
            !completeness(&set, all, |_| None, true).full,
            "an unresolved tag is missing"
        );
    }

    #[test]
    fn fingerprint_changes_with_the_set_only() {
        let a = ExpectedSet {
            entries: BTreeSet::from([Entry::Digest(d(1)), Entry::Digest(d(2))]),
        };
        let mut b = a.clone();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint().len(), 16);
        b.entries.insert(Entry::Digest(d(3)));
        assert_ne!(a.fingerprint(), b.fingerprint());
        let tag = ExpectedSet {
            entries: BTreeSet::from([Entry::Tag(d(1))]),
        };
        let digest = ExpectedSet {
            entries: BTreeSet::from([Entry::Digest(d(1))]),
        };
        assert_ne!(tag.fingerprint(), digest.fingerprint());
    }

    proptest! {
        /// The set is the deduplicated union, whatever the order of the inputs.
        #[test]
        fn order_does_not_matter(mods in proptest::collection::vec(0u8..20, 0..10), release in 0u8..20) {
            let mut inputs = Inputs {
                versions: vec![version("v1", Some(release), &[])],
                modules: mods.iter().map(|n| d(*n)).collect(),
                catalogues: vec![],
            };
            let a = expected_set(&inputs).expect("set");
            inputs.modules.reverse();
            let b = expected_set(&inputs).expect("set");
            prop_assert_eq!(&a, &b);
            let mut distinct: BTreeSet<u8> = mods.into_iter().collect();
            distinct.insert(release);
            prop_assert_eq!(a.len(), distinct.len());
        }
    }
}
