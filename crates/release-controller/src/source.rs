//! The release channel in the registry: `<repository>/release-channel:<channel>` and the
//! per-version `<repository>/release-channel:vX.Y.Z` images, each holding `version.json`.
//!
//! In a cluster the repository is read through the node agent (`https://127.0.0.1:5001`,
//! repository `system/deckhouse`); tests point the [`Remote`] at a registry directly.

use registry_client::Remote;

use crate::Error;
use crate::version_json::{VersionJson, extract_version_json};

/// Largest layer downloaded while looking for `version.json`.
pub const MAX_LAYER_BYTES: u64 = 64 << 20;

const ACCEPT: [&str; 4] = [
    oci::media_type::OCI_MANIFEST,
    oci::media_type::DOCKER_MANIFEST,
    oci::media_type::OCI_INDEX,
    oci::media_type::DOCKER_MANIFEST_LIST,
];

/// One release-channel image: its manifest digest and its `version.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelImage {
    /// The manifest digest (the channel's identity for caching).
    pub digest: oci::Digest,
    /// Its metadata.
    pub metadata: VersionJson,
}

/// Where platform releases are published.
#[derive(Clone, Debug)]
pub struct ReleaseSource {
    remote: Remote,
    repository: String,
}

impl ReleaseSource {
    /// Releases under `repository` of `remote` (e.g. `system/deckhouse` through the agent):
    /// channel images in `<repository>/release-channel`.
    pub fn new(remote: Remote, repository: impl Into<String>) -> Self {
        Self {
            remote,
            repository: repository.into().trim_matches('/').to_owned(),
        }
    }

    /// `<repository>/release-channel`.
    pub fn channel_repository(&self) -> String {
        if self.repository.is_empty() {
            "release-channel".to_owned()
        } else {
            format!("{}/release-channel", self.repository)
        }
    }

    /// The digest of `release-channel:<tag>` (a HEAD, so an unchanged channel costs no body).
    pub async fn digest(&self, tag: &str) -> Result<Option<oci::Digest>, Error> {
        let repository = self.channel_repository();
        let head = self
            .remote
            .head_manifest(&repository, tag, &ACCEPT)
            .await
            .map_err(|e| Error::registry(format!("HEAD {repository}:{tag}"), e))?;
        Ok(head.digest)
    }

    /// Reads `release-channel:<tag>` and its `version.json`.
    pub async fn image(&self, tag: &str) -> Result<ChannelImage, Error> {
        let repository = self.channel_repository();
        let reference = format!("{repository}:{tag}");
        let fetched = self
            .remote
            .get_manifest(&repository, tag, &ACCEPT)
            .await
            .map_err(|e| Error::registry(format!("GET {reference} manifest"), e))?;
        let bad = |reason: String| Error::ChannelImage {
            reference: reference.clone(),
            reason,
        };
        let mut manifest =
            oci::Manifest::parse(fetched.bytes.to_vec(), fetched.media_type.as_deref())
                .map_err(|e| bad(format!("manifest: {e}")))?;
        if let Some(index) = manifest.as_index() {
            // A multi-platform channel image: every platform carries the same metadata.
            let first = index
                .manifests
                .first()
                .ok_or_else(|| bad("the index lists no manifest".into()))?
                .digest;
            let inner = self
                .remote
                .get_manifest(&repository, &first.to_string(), &ACCEPT)
                .await
                .map_err(|e| Error::registry(format!("GET {reference} platform manifest"), e))?;
            manifest = oci::Manifest::parse(inner.bytes.to_vec(), inner.media_type.as_deref())
                .map_err(|e| bad(format!("platform manifest: {e}")))?;
        }
        let image = manifest
            .as_image()
            .ok_or_else(|| bad("not an image manifest".into()))?;
        // Later layers win, as when the image is unpacked.
        for layer in image.layers.iter().rev() {
            if layer.size > MAX_LAYER_BYTES {
                return Err(bad(format!(
                    "layer {} is {} bytes, more than {MAX_LAYER_BYTES}",
                    layer.digest, layer.size
                )));
            }
            let response = self
                .remote
                .get_blob(&repository, &layer.digest, None, Some(layer.size))
                .await
                .map_err(|e| Error::registry(format!("GET {reference} layer"), e))?;
            let bytes = response
                .into_body()
                .collect(MAX_LAYER_BYTES)
                .await
                .map_err(|e| Error::registry(format!("reading {reference} layer"), e))?;
            if let Some(json) = extract_version_json(&bytes)? {
                return Ok(ChannelImage {
                    digest: fetched.digest,
                    metadata: VersionJson::parse(&json)?,
                });
            }
        }
        Err(bad("no version.json in any layer".into()))
    }

    /// Every tag of `<repository>/release-channel` (the versions the step-by-step chain walks).
    pub async fn tags(&self) -> Result<Vec<String>, Error> {
        let repository = self.channel_repository();
        self.remote
            .all_tags(&repository)
            .await
            .map_err(|e| Error::registry(format!("list tags of {repository}"), e))
    }
}
