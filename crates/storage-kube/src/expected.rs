//! The expected image set computed from the cluster, as the syncer does it:
//!
//! - versions = the deployed DeckhouseRelease and the previous one (the newest `Superseded`
//!   release older than the deployed one);
//! - for each version, the release image `<repository>:<version>` itself, plus the images named
//!   by `deckhouse/modules/images_tags.json` (preferred) or `images_digests.json` inside it;
//!   when the release image lists none, the installer `<repository>/install:<version>` and its
//!   `deckhouse/candi/images_{tags,digests}.json` (the installer is read, not counted);
//! - plus the image of every deployed ModuleRelease, `<repository>/modules/<module>:v<version>`
//!   (the layout of the platform's own module source) when the source has it, and the images
//!   its package declares in its own (flat) `images_digests.json`, in the module's repository;
//! - plus the module catalogue: one image per tag of `<repository>/modules` (the tags are the
//!   module names a ModuleSource lists). A pull-through fill never keeps a tag listing, so
//!   without these an air-gapped source would list nothing; a listing the registry refuses is
//!   logged and left out rather than failing the whole set;
//! - deduplicated; no deployed version or an empty set is an error, never "everything".
//!
//! Images are read through a [`Source`]: the leader's own read listener, which serves from the
//! store and fills from the upstream while one is held; a follower's own store, then the
//! leader's read listener (see [`source`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};

use api::deckhouse_release::{DeckhouseRelease, DeckhouseReleasePhase};
use kube::api::{Api, ListParams};
use oci::Digest;
use registry_plan::expected::{self, Entry, ExpectedSet, Inputs, Version};

pub mod source;
pub use source::Source;

/// Largest images file read from a layer.
const MAX_FILE_BYTES: u64 = 16 << 20;

const ACCEPT: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// Why the set could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum ExpectedError {
    /// Listing DeckhouseReleases failed.
    #[error("listing DeckhouseReleases: {0}")]
    Kube(#[source] kube::Error),
    /// A release image could not be read.
    #[error("reading {image}: {reason}")]
    Image {
        /// `repository:tag`.
        image: String,
        /// What failed.
        reason: String,
    },
    /// The set itself (no versions, empty, unreadable images file).
    #[error(transparent)]
    Set(#[from] expected::ExpectedError),
}

/// The set and what it was computed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Computed {
    /// The deployed version.
    pub deployed: String,
    /// The previous version, if any.
    pub previous: Option<String>,
    /// The set.
    pub set: ExpectedSet,
    /// The set's digests to copy ahead of time (tags resolved on the source; a tag it lacks is
    /// left out and counts as missing), all in the platform repository.
    pub roots: Vec<Digest>,
    /// Module images to copy: `(repository, digest)`.
    pub modules: Vec<(oci::Repository, Digest)>,
    /// Tags the replica keeps once it holds what they point at: the release versions, the
    /// tags of `images_tags.json`, the module catalogue. A copy by digest leaves no tag, and an
    /// air-gapped cluster pulls and lists by these names.
    pub tags: Vec<(oci::Repository, oci::Tag, Digest)>,
}

/// The deployed version and the previous one: the newest `Superseded` release older than the
/// deployed one (by semantic version; unparsable versions are never "previous").
pub fn kept_versions(releases: &[DeckhouseRelease]) -> (Option<String>, Option<String>) {
    let parse = |v: &str| semver::Version::parse(v.strip_prefix('v').unwrap_or(v)).ok();
    let phase = |r: &DeckhouseRelease| r.status.as_ref().and_then(|s| s.phase);
    let deployed = releases
        .iter()
        .filter(|r| phase(r) == Some(DeckhouseReleasePhase::Deployed))
        .map(|r| r.spec.spec.version.clone())
        .max_by_key(|v| parse(v));
    let Some(deployed) = deployed else {
        return (None, None);
    };
    let d = parse(&deployed);
    let previous = releases
        .iter()
        .filter(|r| phase(r) == Some(DeckhouseReleasePhase::Superseded))
        .filter_map(|r| {
            let v = parse(&r.spec.spec.version)?;
            (d.as_ref().is_none_or(|d| &v < d)).then(|| (v, r.spec.spec.version.clone()))
        })
        .max()
        .map(|(_, v)| v);
    (Some(deployed), previous)
}

fn image_error(repository: &str, tag: &str, reason: impl std::fmt::Display) -> ExpectedError {
    ExpectedError::Image {
        image: format!("{repository}:{tag}"),
        reason: reason.to_string(),
    }
}

/// Reads the files named `names` (paths inside the image, any leading `./` or `/` ignored) from
/// the layers of `repository:tag`; later layers win. Returns the image's digest too.
pub async fn read_files(
    source: &Source,
    repository: &str,
    tag: &str,
    names: &[&str],
) -> Result<(Digest, BTreeMap<String, Vec<u8>>), ExpectedError> {
    let err = |reason: String| image_error(repository, tag, reason);
    let top = source
        .manifest(repository, tag, ACCEPT)
        .await
        .map_err(err)?;
    let mut manifest = oci::Manifest::parse(top.bytes, top.media_type.as_deref())
        .map_err(|e| err(e.to_string()))?;
    if manifest.as_index().is_some() {
        // Release images are single-platform; an index's first image carries the same files.
        let first = manifest
            .references()
            .first()
            .map(|d| d.digest)
            .ok_or_else(|| err("an empty index".into()))?;
        let child = source
            .manifest(repository, &first.to_string(), ACCEPT)
            .await
            .map_err(err)?;
        manifest = oci::Manifest::parse(child.bytes, child.media_type.as_deref())
            .map_err(|e| err(e.to_string()))?;
    }
    let layers: Vec<Digest> = manifest
        .references()
        .iter()
        .skip(1)
        .map(|d| d.digest)
        .collect();
    let mut found = BTreeMap::new();
    for layer in layers {
        let file = source
            .blob(repository, &layer)
            .await
            .map_err(|e| err(format!("layer {layer}: {e}")))?;
        let wanted: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let files = tokio::task::spawn_blocking(move || files_in_layer(file, &wanted))
            .await
            .map_err(|e| err(format!("layer reader: {e}")))?
            .map_err(|e| err(format!("layer {layer}: {e}")))?;
        found.extend(files);
    }
    Ok((top.digest, found))
}

/// The named files of one layer (gzip or plain tar).
fn files_in_layer(
    mut file: std::fs::File,
    names: &[String],
) -> Result<Vec<(String, Vec<u8>)>, String> {
    std::io::Seek::rewind(&mut file).map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(file);
    let gzip = reader
        .fill_buf()
        .map_err(|e| e.to_string())?
        .starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn Read> = if gzip {
        Box::new(flate2::read::GzDecoder::new(reader))
    } else {
        Box::new(reader)
    };
    let mut archive = tar::Archive::new(reader);
    let mut out = Vec::new();
    for entry in archive.entries().map_err(|e| e.to_string())? {
        let mut entry = entry.map_err(|e| e.to_string())?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let path = path.trim_start_matches("./").trim_start_matches('/');
        let Some(name) = names.iter().find(|n| n.as_str() == path) else {
            continue;
        };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        if entry.size() > MAX_FILE_BYTES {
            return Err(format!(
                "{path} is {} bytes, more than {MAX_FILE_BYTES}",
                entry.size()
            ));
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(MAX_FILE_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| e.to_string())?;
        out.push((name.clone(), bytes));
    }
    Ok(out)
}

const RELEASE_FILES: [&str; 2] = [
    "deckhouse/modules/images_tags.json",
    "deckhouse/modules/images_digests.json",
];
const INSTALLER_FILES: [&str; 2] = [
    "deckhouse/candi/images_tags.json",
    "deckhouse/candi/images_digests.json",
];

/// What one version contributes: its release image and images file(s).
pub async fn version(source: &Source, version: &str) -> Result<Version, ExpectedError> {
    let (release, mut files) =
        read_files(source, &source.repository, version, &RELEASE_FILES).await?;
    let (mut tags, mut digests) = (
        files.remove(RELEASE_FILES[0]),
        files.remove(RELEASE_FILES[1]),
    );
    if tags.is_none() && digests.is_none() {
        let installer = format!("{}/install", source.repository);
        match read_files(source, &installer, version, &INSTALLER_FILES).await {
            Ok((_, mut files)) => {
                tags = files.remove(INSTALLER_FILES[0]);
                digests = files.remove(INSTALLER_FILES[1]);
            }
            Err(e) => {
                tracing::warn!(%version, error = %e, "no images file in the release image, and the installer cannot be read")
            }
        }
    }
    Ok(Version {
        version: version.to_owned(),
        release: Some(release.to_string()),
        digests_json: digests,
        tags_json: tags,
    })
}

/// Computes the set from the cluster's DeckhouseReleases and the release images on `source`.
pub async fn compute(client: &kube::Client, source: &Source) -> Result<Computed, ExpectedError> {
    let releases: Api<DeckhouseRelease> = Api::all(client.clone());
    let list = releases
        .list(&ListParams::default())
        .await
        .map_err(ExpectedError::Kube)?;
    let (deployed, previous) = kept_versions(&list.items);
    let Some(deployed) = deployed else {
        return Err(expected::ExpectedError::NoVersions.into());
    };
    let mut inputs = Inputs::default();
    for v in std::iter::once(&deployed).chain(previous.as_ref()) {
        inputs.versions.push(version(source, v).await?);
    }
    let mut modules = module_images(client, source).await?;
    inputs
        .modules
        .extend(modules.iter().map(|(_, d)| d.to_string()));
    let catalogue = catalogue(source).await;
    inputs
        .catalogues
        .extend(catalogue.iter().map(|(_, _, d)| d.to_string()));
    modules.extend(catalogue.iter().map(|(r, _, d)| (r.clone(), *d)));
    let platform = oci::Repository::parse(&source.repository).map_err(|e| {
        image_error(
            &source.repository,
            &deployed,
            format!("the platform repository: {e}"),
        )
    })?;
    let mut tags = catalogue;
    let tagged = |tag: &str, digest: Digest| {
        oci::Tag::parse(tag)
            .ok()
            .map(|tag| (platform.clone(), tag, digest))
    };
    for v in &inputs.versions {
        if let Some(digest) = v.release.as_deref().and_then(|d| Digest::parse(d).ok()) {
            tags.extend(tagged(&v.version, digest));
        }
    }
    let set = expected::expected_set(&inputs)?;
    let mut roots = Vec::new();
    for entry in &set.entries {
        match entry {
            Entry::Digest(d) => roots.extend(
                Digest::parse(d)
                    .ok()
                    .filter(|d| !modules.iter().any(|(_, m)| m == d)),
            ),
            Entry::Tag(t) => match source.resolve(&source.repository, t, ACCEPT).await {
                Ok(digest) => {
                    roots.extend(digest);
                    tags.extend(digest.and_then(|d| tagged(t, d)));
                }
                Err(e) => {
                    tracing::debug!(tag = %t, error = %e, "expected tag not resolvable (missing:{t})")
                }
            },
        }
    }
    Ok(Computed {
        deployed,
        previous,
        set,
        roots,
        modules,
        tags,
    })
}

/// The images of the deployed ModuleReleases the source holds.
async fn module_images(
    client: &kube::Client,
    source: &Source,
) -> Result<Vec<(oci::Repository, Digest)>, ExpectedError> {
    use api::module_release::{ModuleRelease, ModuleReleasePhase};
    let releases: Api<ModuleRelease> = Api::all(client.clone());
    let list = releases
        .list(&ListParams::default())
        .await
        .map_err(ExpectedError::Kube)?;
    let mut out = Vec::new();
    for release in list.items {
        if release.status.as_ref().and_then(|s| s.phase) != Some(ModuleReleasePhase::Deployed) {
            continue;
        }
        let module = &release.spec.module_name;
        let tag = format!("v{}", release.spec.version.trim_start_matches('v'));
        let Ok(repository) =
            oci::Repository::parse(&format!("{}/modules/{module}", source.repository))
        else {
            continue;
        };
        match source.resolve(repository.as_str(), &tag, ACCEPT).await {
            Ok(digest) => out.extend(digest.map(|d| (repository.clone(), d))),
            // A module from another source is not the cache's to hold.
            Err(e) => {
                tracing::debug!(%module, %tag, error = %e, "module image not in the platform registry");
                continue;
            }
        }
        let (_, mut files) =
            read_files(source, repository.as_str(), &tag, &[MODULE_DIGESTS_FILE]).await?;
        if let Some(bytes) = files.remove(MODULE_DIGESTS_FILE) {
            let declared = module_digests(&bytes)
                .map_err(|reason| image_error(repository.as_str(), &tag, reason))?;
            out.extend(declared.into_iter().map(|d| (repository.clone(), d)));
        }
    }
    Ok(out)
}

/// Where a module package declares its images: image name to digest, at the package's root.
const MODULE_DIGESTS_FILE: &str = "images_digests.json";

/// The digests of a module package's `images_digests.json` (a flat map; empty values skipped).
fn module_digests(bytes: &[u8]) -> Result<Vec<Digest>, String> {
    let by_image: BTreeMap<String, String> = serde_json::from_slice(bytes)
        .map_err(|e| format!("decoding {MODULE_DIGESTS_FILE}: {e}"))?;
    by_image
        .into_iter()
        .filter(|(_, digest)| !digest.is_empty())
        .map(|(image, digest)| {
            Digest::parse(&digest).map_err(|e| {
                format!("{MODULE_DIGESTS_FILE} names {digest:?} for {image}, not a digest: {e}")
            })
        })
        .collect()
}

/// The module catalogue of the platform's source: every tag of `<repository>/modules`, resolved.
/// A refused listing or an unresolvable tag is logged and left out (a degraded catalogue beats
/// a fill that can never complete).
async fn catalogue(source: &Source) -> Vec<(oci::Repository, oci::Tag, Digest)> {
    let Ok(repository) = oci::Repository::parse(&format!("{}/modules", source.repository)) else {
        return Vec::new();
    };
    let tags = match source.tags(repository.as_str()).await {
        Ok(tags) => tags,
        Err(e) => {
            tracing::warn!(%repository, error = %e, "the module catalogue cannot be listed; it is left out of the expected set");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for tag in tags {
        let Ok(parsed) = oci::Tag::parse(&tag) else {
            continue;
        };
        match source.resolve(repository.as_str(), &tag, ACCEPT).await {
            Ok(digest) => out.extend(digest.map(|d| (repository.clone(), parsed, d))),
            Err(e) => {
                tracing::warn!(%repository, %tag, error = %e, "a catalogue entry cannot be resolved")
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(version: &str, phase: Option<DeckhouseReleasePhase>) -> DeckhouseRelease {
        let mut r = DeckhouseRelease::test(version);
        r.status = Some(api::deckhouse_release::DeckhouseReleaseStatus {
            phase,
            ..Default::default()
        });
        r
    }

    #[test]
    fn a_module_package_declares_its_images_in_a_flat_map() {
        let a = format!("sha256:{}", "a".repeat(64));
        let json = format!(r#"{{"echo": "{a}", "empty": ""}}"#);
        assert_eq!(
            module_digests(json.as_bytes()).unwrap(),
            [Digest::parse(&a).unwrap()]
        );
        let bad = module_digests(br#"{"echo": "latest"}"#).unwrap_err();
        assert!(bad.contains("names \"latest\" for echo"), "{bad}");
        let nested = module_digests(br#"{"echo": {"x": "y"}}"#).unwrap_err();
        assert!(
            nested.starts_with("decoding images_digests.json"),
            "{nested}"
        );
    }

    #[test]
    fn deployed_and_the_newest_older_superseded_are_kept() {
        use DeckhouseReleasePhase::*;
        let releases = [
            release("v1.57.0", Some(Superseded)),
            release("v1.59.2", Some(Superseded)),
            release("v1.58.9", Some(Superseded)),
            release("v1.60.1", Some(Deployed)),
            release("v1.61.0", Some(Pending)),
            release("v1.62.0", Some(Superseded)),
            release("v1.59.5", Some(Skipped)),
        ];
        assert_eq!(
            kept_versions(&releases),
            (Some("v1.60.1".into()), Some("v1.59.2".into()))
        );
        assert_eq!(kept_versions(&releases[..3]), (None, None));
        assert_eq!(
            kept_versions(&[release("v1.60.1", Some(Deployed))]),
            (Some("v1.60.1".into()), None)
        );
    }
}
