//! OCI image layouts inside packages: `index.json` entries, what they are pushed as, and which
//! registry repository each layout directory stands for.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bundle::{ANNOTATION_REF_NAME, ANNOTATION_SHORT_TAG};

/// `oci-layout`'s content.
pub const OCI_LAYOUT: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;

/// An `index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexJson {
    /// 2.
    pub schema_version: u32,
    /// The OCI index media type (Deckhouse writes the layout media type here; either is read).
    #[serde(default)]
    pub media_type: Option<String>,
    /// The images.
    #[serde(default)]
    pub manifests: Vec<oci::Descriptor>,
}

impl IndexJson {
    /// An index of `manifests`.
    pub fn new(manifests: Vec<oci::Descriptor>) -> Self {
        Self {
            schema_version: 2,
            media_type: Some(oci::media_type::OCI_INDEX.to_owned()),
            manifests,
        }
    }
}

/// What an index entry is pushed as.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// Tagged.
    Tag(String),
    /// By digest only.
    Digest,
}

/// The push target of an index entry: its short tag (`@sha256:…` meaning by digest), else the
/// tag of its `ref.name`, else by digest.
pub fn target_of(descriptor: &oci::Descriptor) -> Target {
    let annotations = &descriptor.annotations;
    if let Some(short) = annotations.get(ANNOTATION_SHORT_TAG) {
        if short.starts_with('@') || oci::Digest::parse(short).is_ok() {
            return Target::Digest;
        }
        if oci::Tag::parse(short).is_ok() {
            return Target::Tag(short.clone());
        }
    }
    if let Some(name) = annotations
        .get(ANNOTATION_REF_NAME)
        .filter(|n| !n.contains('@'))
    {
        let tag = name.rsplit_once(':').map_or(name.as_str(), |(_, t)| t);
        // A bare `ref.name` (OCI's own form) is the tag itself.
        if oci::Tag::parse(tag).is_ok() && !tag.contains('/') {
            return Target::Tag(tag.to_owned());
        }
    }
    Target::Digest
}

/// An index entry for an image pulled as `short_tag` from `ref_name`.
pub fn entry(
    media_type: &str,
    digest: oci::Digest,
    size: u64,
    ref_name: &str,
    short_tag: &str,
) -> oci::Descriptor {
    let mut descriptor = oci::Descriptor::new(media_type, digest, size);
    descriptor.annotations = BTreeMap::from([
        (ANNOTATION_REF_NAME.to_owned(), ref_name.to_owned()),
        (ANNOTATION_SHORT_TAG.to_owned(), short_tag.to_owned()),
    ]);
    descriptor
}

/// The registry repository (relative to the push root) of the layout at `dir` in `package`.
/// Paths are registry paths (Deckhouse's current bundles); module packages of older bundles
/// hold `module-<name>.tar` with the module at the root or under `module/`.
pub fn repository_of(package: &str, dir: &str) -> String {
    let dir = dir.trim_matches('/');
    if dir == "modules" || dir.starts_with("modules/") {
        return dir.to_owned();
    }
    if let Some(module) = package.strip_prefix("module-") {
        let rest = dir
            .strip_prefix("module")
            .filter(|r| r.is_empty() || r.starts_with('/'))
            .unwrap_or(dir)
            .trim_matches('/');
        return if rest.is_empty() {
            format!("modules/{module}")
        } else {
            format!("modules/{module}/{rest}")
        };
    }
    dir.to_owned()
}

/// The path of a blob in the layout at `dir`.
pub fn blob_path(dir: &str, digest: &oci::Digest) -> String {
    let relative = format!("blobs/{}/{}", digest.algorithm().as_str(), digest.encoded());
    join(dir, &relative)
}

/// `dir/name`, or `name` at the root.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_map_to_registry_paths_old_and_new() {
        assert_eq!(repository_of("platform", ""), "");
        assert_eq!(
            repository_of("platform", "release-channel"),
            "release-channel"
        );
        assert_eq!(repository_of("module-foo", "modules/foo"), "modules/foo");
        assert_eq!(
            repository_of("module-foo", "modules/foo/release"),
            "modules/foo/release"
        );
        // older module packages
        assert_eq!(repository_of("module-foo", ""), "modules/foo");
        assert_eq!(repository_of("module-foo", "module"), "modules/foo");
        assert_eq!(
            repository_of("module-foo", "release"),
            "modules/foo/release"
        );
        assert_eq!(
            repository_of("module-foo", "extra/scanner"),
            "modules/foo/extra/scanner"
        );
    }

    #[test]
    fn entries_push_as_their_short_tag() {
        let d = oci::Digest::sha256(b"m");
        let tagged = entry("x", d, 1, "reg/deckhouse/ee:v1.2.3", "v1.2.3");
        assert_eq!(target_of(&tagged), Target::Tag("v1.2.3".into()));
        let by_digest = entry(
            "x",
            d,
            1,
            &format!("reg/deckhouse/ee@{d}"),
            &format!("@{d}"),
        );
        assert_eq!(target_of(&by_digest), Target::Digest);
        // Older Deckhouse pullers wrote the bare hex, and their push made it a tag of that name.
        let old_style = entry("x", d, 1, &format!("reg/deckhouse/ee@{d}"), &d.encoded());
        assert_eq!(target_of(&old_style), Target::Tag(d.encoded().to_string()));
        let mut oci_style = oci::Descriptor::new("x", d, 1);
        oci_style
            .annotations
            .insert(ANNOTATION_REF_NAME.into(), "stable".into());
        assert_eq!(target_of(&oci_style), Target::Tag("stable".into()));
        assert_eq!(target_of(&oci::Descriptor::new("x", d, 1)), Target::Digest);
        assert_eq!(blob_path("", &d), format!("blobs/sha256/{}", d.encoded()));
        assert_eq!(
            blob_path("install", &d),
            format!("install/blobs/sha256/{}", d.encoded())
        );
    }
}
