//! A PackageRepository's registry: the tags of `R` are the package names, the tags of
//! `R/<package>/version` its versions, `R/<package>/version:<v>` the version image (metadata),
//! `R/<package>/release-channel:<channel>` the release channels (the version image the channel
//! points at, published under the channel's name; its `version.json` names the version) and
//! `R/<package>:<v>` the package bundle. (`R/<package>/release` is where Deckhouse looks for
//! legacy v1alpha1 modules, not for package channels.)
//!
//! Every image is read with the module manager's verified, bounded downloads and its safe
//! unpacker: a version image is unpacked under tight limits into a temporary directory and only
//! its metadata files are read, so a scan never downloads a whole package.

use std::path::Path;

use api::packages::PackageRegistry;
use module_controller::registry::{Download, ModuleRegistry};
use module_controller::unpack::Limits;

use crate::Error;
use crate::compat::parse_version;
use crate::metadata::{
    CHANGELOG_YAML, PACKAGE_YAML, STATIC_VALUES, VALUES_SCHEMA, settings_schema,
};

/// The path under a package where Deckhouse publishes its release channels
/// (`R/<package>/release-channel:<channel>`).
pub const CHANNEL_SEGMENT: &str = "release-channel";

/// Limits for a version image: metadata only.
pub const VERSION_IMAGE_LIMITS: Limits = Limits {
    max_file_bytes: 1 << 20,
    max_total_bytes: 8 << 20,
    max_entries: 1_000,
    max_layer_bytes: 8 << 20,
};

/// The metadata files of a version image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionFiles {
    /// `package.yaml`.
    pub package_yaml: Option<String>,
    /// `changelog.yaml`.
    pub changelog: Option<String>,
    /// `openapi/settings.yaml` (or the legacy `openapi/config-values.yaml`).
    pub settings_schema: Option<String>,
}

/// The registry of one PackageRepository.
#[derive(Clone, Debug)]
pub struct PackageImages {
    inner: ModuleRegistry,
}

impl PackageImages {
    /// The registry of a PackageRepository's `spec.registry` (credentials are read from its
    /// `dockerCfg` and never shown).
    pub fn new(
        client: &registry_client::Client,
        registry: &PackageRegistry,
    ) -> Result<Self, Error> {
        let scheme = match registry.scheme.as_deref() {
            Some(s) if s.eq_ignore_ascii_case("http") => api::module_source::Scheme::Http,
            _ => api::module_source::Scheme::Https,
        };
        let source = api::module_source::SourceRegistry {
            scheme,
            repo: registry.repo.clone(),
            docker_cfg: registry.docker_cfg.clone(),
            ca: registry.ca.clone(),
        };
        Ok(Self {
            inner: ModuleRegistry::from_source(client, &source)?,
        })
    }

    /// The package names (the tags of `R`), sorted.
    pub async fn packages(&self) -> Result<Vec<String>, Error> {
        Ok(self.inner.modules().await?)
    }

    /// Whether the registry pages the tag list of `R` (Deckhouse's probe for
    /// `partialScanAvailable`): a listing limited to one tag differs from the full one.
    pub async fn pages_tags(&self) -> Result<bool, Error> {
        Ok(self.inner.pages_tags().await?)
    }

    /// The semver tags of `R/<package>/version`, lowest first.
    pub async fn versions(&self, package: &str) -> Result<Vec<String>, Error> {
        let tags = self.inner.versions(&format!("{package}/version")).await?;
        Ok(semver_tags(tags))
    }

    /// The version a release channel points at: `version.json` of
    /// `R/<package>/release-channel:<tag>` (`tag` from [`crate::application::channel_tag`]),
    /// read as module channels are.
    pub async fn channel_version(&self, package: &str, tag: &str) -> Result<String, Error> {
        let release = self
            .inner
            .metadata_image(&format!("{package}/{CHANNEL_SEGMENT}"), tag)
            .await?;
        Ok(release.version.original().to_owned())
    }

    /// Reads the metadata files of `R/<package>/version:<version>`.
    pub async fn version_files(&self, package: &str, version: &str) -> Result<VersionFiles, Error> {
        let dir = tempfile::tempdir().map_err(Error::Temp)?;
        self.inner
            .download(
                &format!("{package}/version"),
                version,
                dir.path(),
                VERSION_IMAGE_LIMITS,
            )
            .await?;
        let read = |rel: &str| read_regular(&dir.path().join(rel));
        Ok(VersionFiles {
            package_yaml: read(PACKAGE_YAML),
            changelog: read(CHANGELOG_YAML).or_else(|| read("changelog.yml")),
            settings_schema: settings_schema(read),
        })
    }

    /// Downloads the package bundle `R/<package>:<version>` into `dest` (verified digests, safe
    /// unpacking, bounded by `limits`).
    pub async fn download(
        &self,
        package: &str,
        version: &str,
        dest: &Path,
        limits: Limits,
    ) -> Result<Download, Error> {
        Ok(self.inner.download(package, version, dest, limits).await?)
    }
}

/// What an unpacked package bundle says about its values, read as Deckhouse's package loader
/// reads a package directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BundleFiles {
    /// The settings schema (see [`crate::metadata::settings_schema`]), used when the version
    /// image carries none.
    pub settings_schema: Option<String>,
    /// `openapi/values.yaml`: the schema of every value, internal ones too (its defaults).
    pub values_schema: Option<String>,
    /// `values.yaml`: the static values (under the package's camelCase key, or the whole file).
    pub static_values: Option<String>,
    /// `images_digests.json`: the package's images and their digests (`$.Application.Package.Images`).
    pub image_digests: Option<String>,
}

/// Reads the values files of the unpacked bundle in `dir` (regular files only).
pub fn bundle_files(dir: &Path) -> BundleFiles {
    let read = |rel: &str| read_regular(&dir.join(rel));
    BundleFiles {
        settings_schema: settings_schema(read),
        values_schema: read(VALUES_SCHEMA),
        static_values: read(STATIC_VALUES),
        image_digests: read(crate::runtime::IMAGES_DIGESTS),
    }
}

/// A regular file's text (never through a symlink); `None` otherwise.
fn read_regular(path: &Path) -> Option<String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => std::fs::read_to_string(path).ok(),
        _ => None,
    }
}

/// The tags that are versions, sorted by version, lowest first.
pub fn semver_tags(tags: Vec<String>) -> Vec<String> {
    let mut versions: Vec<(semver::Version, String)> = tags
        .into_iter()
        .filter_map(|t| parse_version(&t).map(|v| (v, t)))
        .collect();
    versions.sort();
    versions.dedup_by(|a, b| a.1 == b.1);
    versions.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_versions_sorted() {
        let tags = [
            "v1.10.0",
            "latest",
            "v1.2.0",
            "1.3.0",
            "v1.2.0-rc.1",
            "main",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            semver_tags(tags),
            ["v1.2.0-rc.1", "v1.2.0", "1.3.0", "v1.10.0"]
        );
    }
}
