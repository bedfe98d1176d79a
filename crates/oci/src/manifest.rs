//! Image manifests and indexes (OCI and Docker schema 2), parsed for their descriptors while the
//! original bytes stay untouched: a manifest's bytes are its identity, so they are never
//! re-serialised, and [`Manifest::digest`] is the sha256 of exactly those bytes.
//!
//! The media type comes from the document's `mediaType` field; when that is absent from the
//! `Content-Type` it was served with; when that is generic too, from the shape (`manifests` ⇒
//! OCI index, `config` ⇒ OCI manifest). A document carrying both `manifests` and `config` or
//! `layers` is refused, so one set of bytes can never be read as two different things.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::digest::{Digest, DigestMismatch};
use crate::error::ErrorCode;
use crate::media_type::ManifestMediaType;

/// Largest manifest accepted, as in distribution (4 MiB).
pub const MANIFEST_MAX_LEN: usize = 4 * 1024 * 1024;

/// Why bytes are not a usable manifest.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Longer than [`MANIFEST_MAX_LEN`].
    #[error("manifest is {len} bytes, the limit is {max} bytes")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not JSON, or a field has the wrong type or value (including a malformed digest).
    #[error("manifest is not a valid JSON document of the expected shape: {0}")]
    Json(#[source] serde_json::Error),
    /// No `schemaVersion`.
    #[error("manifest has no schemaVersion")]
    MissingSchemaVersion,
    /// `schemaVersion` other than 2 (1 is the long-removed Docker schema 1).
    #[error("manifest schemaVersion {version} is not supported (only 2)")]
    UnsupportedSchemaVersion {
        /// The version found.
        version: u64,
    },
    /// A `mediaType` that is not one of the four manifest types.
    #[error("manifest media type {media_type:?} is not supported")]
    UnsupportedMediaType {
        /// The media type found.
        media_type: String,
    },
    /// The `mediaType` field and the `Content-Type` name different manifest types.
    #[error("manifest declares media type {declared} but was sent as {content_type}")]
    MediaTypeMismatch {
        /// From the document.
        declared: ManifestMediaType,
        /// From the `Content-Type`.
        content_type: ManifestMediaType,
    },
    /// Neither `config` nor `manifests` and no media type to go by.
    #[error("document has no mediaType and neither 'config' nor 'manifests': not a manifest")]
    UnknownShape,
    /// Both `manifests` and `config`/`layers`.
    #[error("document has both 'manifests' and 'config'/'layers': ambiguous")]
    AmbiguousShape,
    /// A field required for this media type is missing.
    #[error("{media_type} is missing the required field '{field}'")]
    MissingField {
        /// The manifest type.
        media_type: ManifestMediaType,
        /// The missing field.
        field: &'static str,
    },
    /// The bytes do not hash to the digest they were fetched under (boxed: two digests are
    /// large next to the other variants).
    #[error(transparent)]
    Digest(Box<DigestMismatch>),
}

impl ManifestError {
    /// The OCI error code to answer a client with.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Self::Digest(_) => ErrorCode::DigestInvalid,
            _ => ErrorCode::ManifestInvalid,
        }
    }
}

fn is_empty_slice<T>(v: &[T]) -> bool {
    v.is_empty()
}

/// A platform of an index entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    /// CPU architecture (`amd64`, `arm64`, ...).
    pub architecture: String,
    /// Operating system (`linux`, ...).
    pub os: String,
    /// OS version.
    #[serde(
        rename = "os.version",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub os_version: Option<String>,
    /// OS features.
    #[serde(
        rename = "os.features",
        default,
        skip_serializing_if = "is_empty_slice"
    )]
    pub os_features: Vec<String>,
    /// CPU variant (`v8`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// CPU features (Docker lists).
    #[serde(default, skip_serializing_if = "is_empty_slice")]
    pub features: Vec<String>,
}

/// A content descriptor: what a manifest says about a blob or another manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type of the referenced content.
    pub media_type: String,
    /// Digest of the referenced content.
    pub digest: Digest,
    /// Size in bytes.
    pub size: u64,
    /// Alternative download locations.
    #[serde(default, skip_serializing_if = "is_empty_slice")]
    pub urls: Vec<String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Platform (index entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// Artifact type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// Embedded base64 content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

impl Descriptor {
    /// A minimal descriptor.
    pub fn new(media_type: impl Into<String>, digest: Digest, size: u64) -> Self {
        Self {
            media_type: media_type.into(),
            digest,
            size,
            urls: Vec::new(),
            annotations: BTreeMap::new(),
            platform: None,
            artifact_type: None,
            data: None,
        }
    }
}

/// An image manifest (OCI manifest or Docker schema 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageManifest {
    /// The config blob.
    pub config: Descriptor,
    /// The layers, base first.
    pub layers: Vec<Descriptor>,
    /// The manifest this one refers to (referrers API).
    pub subject: Option<Descriptor>,
    /// Artifact type.
    pub artifact_type: Option<String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
}

/// An index (OCI index or Docker manifest list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageIndex {
    /// The entries.
    pub manifests: Vec<Descriptor>,
    /// The manifest this one refers to.
    pub subject: Option<Descriptor>,
    /// Artifact type.
    pub artifact_type: Option<String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
}

/// What a manifest holds.
#[allow(
    clippy::large_enum_variant,
    reason = "one per manifest, never in bulk arrays"
)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// An image manifest.
    Image(ImageManifest),
    /// An index.
    Index(ImageIndex),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    schema_version: Option<u64>,
    media_type: Option<String>,
    config: Option<Descriptor>,
    layers: Option<Vec<Descriptor>>,
    manifests: Option<Vec<Descriptor>>,
    subject: Option<Descriptor>,
    artifact_type: Option<String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

/// A parsed manifest with its original bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Manifest {
    bytes: Vec<u8>,
    media_type: ManifestMediaType,
    digest: Digest,
    content: Content,
}

impl fmt::Debug for Manifest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Manifest")
            .field("media_type", &self.media_type)
            .field("digest", &self.digest)
            .field("len", &self.bytes.len())
            .field("content", &self.content)
            .finish()
    }
}

fn decide_media_type(
    raw: &Raw,
    content_type: Option<&str>,
) -> Result<ManifestMediaType, ManifestError> {
    let declared = match &raw.media_type {
        Some(mt) => Some(ManifestMediaType::from_media_type(mt).ok_or_else(|| {
            ManifestError::UnsupportedMediaType {
                media_type: mt.chars().take(200).collect(),
            }
        })?),
        None => None,
    };
    let hinted = content_type.and_then(ManifestMediaType::from_media_type);
    if let (Some(declared), Some(content_type)) = (declared, hinted)
        && declared != content_type
    {
        return Err(ManifestError::MediaTypeMismatch {
            declared,
            content_type,
        });
    }
    let has_image_fields = raw.config.is_some() || raw.layers.is_some();
    if raw.manifests.is_some() && has_image_fields {
        return Err(ManifestError::AmbiguousShape);
    }
    match declared.or(hinted) {
        Some(t) => Ok(t),
        None if raw.manifests.is_some() => Ok(ManifestMediaType::OciIndex),
        None if raw.config.is_some() => Ok(ManifestMediaType::OciManifest),
        None => Err(ManifestError::UnknownShape),
    }
}

fn build_content(raw: Raw, media_type: ManifestMediaType) -> Result<Content, ManifestError> {
    let missing = |field| ManifestError::MissingField { media_type, field };
    if media_type.is_index() {
        if raw.config.is_some() || raw.layers.is_some() {
            return Err(ManifestError::AmbiguousShape);
        }
        return Ok(Content::Index(ImageIndex {
            manifests: raw.manifests.ok_or_else(|| missing("manifests"))?,
            subject: raw.subject,
            artifact_type: raw.artifact_type,
            annotations: raw.annotations,
        }));
    }
    if raw.manifests.is_some() {
        return Err(ManifestError::AmbiguousShape);
    }
    Ok(Content::Image(ImageManifest {
        config: raw.config.ok_or_else(|| missing("config"))?,
        layers: raw.layers.ok_or_else(|| missing("layers"))?,
        subject: raw.subject,
        artifact_type: raw.artifact_type,
        annotations: raw.annotations,
    }))
}

impl Manifest {
    /// Parses a manifest or index. `content_type` is the `Content-Type` it came with, if any;
    /// generic types (`application/json`, `application/octet-stream`) are ignored.
    pub fn parse(bytes: Vec<u8>, content_type: Option<&str>) -> Result<Self, ManifestError> {
        if bytes.len() > MANIFEST_MAX_LEN {
            return Err(ManifestError::TooLarge {
                len: bytes.len(),
                max: MANIFEST_MAX_LEN,
            });
        }
        let raw: Raw = serde_json::from_slice(&bytes).map_err(ManifestError::Json)?;
        match raw.schema_version {
            None => return Err(ManifestError::MissingSchemaVersion),
            Some(2) => {}
            Some(version) => return Err(ManifestError::UnsupportedSchemaVersion { version }),
        }
        let media_type = decide_media_type(&raw, content_type)?;
        let content = build_content(raw, media_type)?;
        let digest = Digest::sha256(&bytes);
        Ok(Self {
            bytes,
            media_type,
            digest,
            content,
        })
    }

    /// Parses and checks that the bytes hash to `expected` (with `expected`'s algorithm), as
    /// a pull by digest must.
    pub fn parse_verified(
        bytes: Vec<u8>,
        content_type: Option<&str>,
        expected: Digest,
    ) -> Result<Self, ManifestError> {
        if bytes.len() > MANIFEST_MAX_LEN {
            return Err(ManifestError::TooLarge {
                len: bytes.len(),
                max: MANIFEST_MAX_LEN,
            });
        }
        let mut verifier = expected.verifier();
        verifier.update(&bytes);
        verifier
            .finish()
            .map_err(|m| ManifestError::Digest(Box::new(m)))?;
        Self::parse(bytes, content_type)
    }

    /// The original bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The original bytes, by value.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Length of the original bytes.
    pub fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The manifest's media type.
    pub fn media_type(&self) -> ManifestMediaType {
        self.media_type
    }

    /// sha256 of the original bytes.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// What the manifest holds.
    pub fn content(&self) -> &Content {
        &self.content
    }

    /// The image manifest, if this is one.
    pub fn as_image(&self) -> Option<&ImageManifest> {
        match &self.content {
            Content::Image(m) => Some(m),
            Content::Index(_) => None,
        }
    }

    /// The index, if this is one.
    pub fn as_index(&self) -> Option<&ImageIndex> {
        match &self.content {
            Content::Index(i) => Some(i),
            Content::Image(_) => None,
        }
    }

    /// The `subject` descriptor, if any.
    pub fn subject(&self) -> Option<&Descriptor> {
        match &self.content {
            Content::Image(m) => m.subject.as_ref(),
            Content::Index(i) => i.subject.as_ref(),
        }
    }

    /// The `artifactType` field, if any.
    pub fn artifact_type(&self) -> Option<&str> {
        match &self.content {
            Content::Image(m) => m.artifact_type.as_deref(),
            Content::Index(i) => i.artifact_type.as_deref(),
        }
    }

    /// The manifest-level annotations.
    pub fn annotations(&self) -> &BTreeMap<String, String> {
        match &self.content {
            Content::Image(m) => &m.annotations,
            Content::Index(i) => &i.annotations,
        }
    }

    /// Everything this manifest references (config then layers, or the index entries),
    /// excluding `subject`.
    pub fn references(&self) -> Vec<&Descriptor> {
        match &self.content {
            Content::Image(m) => std::iter::once(&m.config).chain(&m.layers).collect(),
            Content::Index(i) => i.manifests.iter().collect(),
        }
    }

    /// The descriptor of this manifest as an index entry carries it: media type, digest, size.
    pub fn descriptor(&self) -> Descriptor {
        Descriptor::new(self.media_type.as_str(), self.digest, self.size())
    }

    /// The descriptor of this manifest as a referrers list carries it: [`descriptor`]
    /// plus `artifactType` (for an image manifest without one, its config media type, as the
    /// distribution-spec requires) and the manifest's annotations.
    ///
    /// [`descriptor`]: Self::descriptor
    pub fn referrer_descriptor(&self) -> Descriptor {
        let mut d = self.descriptor();
        d.artifact_type = self
            .artifact_type()
            .map(str::to_owned)
            .or_else(|| self.as_image().map(|m| m.config.media_type.clone()));
        d.annotations = self.annotations().clone();
        d
    }
}

#[cfg(test)]
mod tests;
