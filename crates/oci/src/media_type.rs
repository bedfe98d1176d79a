//! Media types of OCI and Docker manifests, indexes, configs and layers, and `Accept`
//! negotiation for manifests.
//!
//! Negotiation mirrors CNCF distribution (the registry the project tests against): it collects
//! every `Accept` header line, splits each on `,`, strips parameters (so `q` values are ignored,
//! `q=0` included) and looks only for the four manifest types by name. An OCI manifest or index
//! is served only when its type is named explicitly — `*/*` is **not** enough. Docker manifests
//! are always served. A Docker manifest list fetched by tag from a client that does not name
//! the list type gets [`Negotiation::PlatformFallback`]. [`AcceptList::allows`] offers plain
//! RFC 9110 semantics (wildcards, `q=0`) for everything else.

use std::fmt;

/// OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// OCI image config.
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// OCI uncompressed layer.
pub const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
/// OCI gzip layer.
pub const OCI_LAYER_TAR_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// OCI zstd layer.
pub const OCI_LAYER_TAR_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
/// OCI non-distributable uncompressed layer (deprecated by the image-spec, still seen).
pub const OCI_LAYER_NONDISTRIBUTABLE_TAR: &str =
    "application/vnd.oci.image.layer.nondistributable.v1.tar";
/// OCI non-distributable gzip layer (deprecated).
pub const OCI_LAYER_NONDISTRIBUTABLE_TAR_GZIP: &str =
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip";
/// OCI non-distributable zstd layer (deprecated).
pub const OCI_LAYER_NONDISTRIBUTABLE_TAR_ZSTD: &str =
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd";
/// The OCI empty descriptor (`{}`), used as config of artifacts.
pub const OCI_EMPTY: &str = "application/vnd.oci.empty.v1+json";
/// Docker image manifest, schema 2.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker manifest list.
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// Docker image config.
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
/// Docker gzip layer.
pub const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
/// Docker foreign (non-distributable) layer.
pub const DOCKER_FOREIGN_LAYER_GZIP: &str =
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";
/// Docker plugin config.
pub const DOCKER_PLUGIN_CONFIG: &str = "application/vnd.docker.plugin.v1+json";
/// Docker schema 1 manifest (unsupported; recognised for clear errors).
pub const DOCKER_SCHEMA1_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v1+json";
/// Signed Docker schema 1 manifest (unsupported; recognised for clear errors).
pub const DOCKER_SCHEMA1_SIGNED_MANIFEST: &str =
    "application/vnd.docker.distribution.manifest.v1+prettyjws";

/// The `Accept` value a client sends to be able to receive every supported manifest type.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
application/vnd.oci.image.manifest.v1+json, \
application/vnd.docker.distribution.manifest.list.v2+json, \
application/vnd.docker.distribution.manifest.v2+json";

/// The media types a `/manifests/` endpoint serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ManifestMediaType {
    /// [`OCI_MANIFEST`].
    OciManifest,
    /// [`OCI_INDEX`].
    OciIndex,
    /// [`DOCKER_MANIFEST`].
    DockerManifest,
    /// [`DOCKER_MANIFEST_LIST`].
    DockerManifestList,
}

impl ManifestMediaType {
    /// All four, in the order of [`MANIFEST_ACCEPT`].
    pub const ALL: [Self; 4] = [
        Self::OciIndex,
        Self::OciManifest,
        Self::DockerManifestList,
        Self::DockerManifest,
    ];

    /// The media type string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OciManifest => OCI_MANIFEST,
            Self::OciIndex => OCI_INDEX,
            Self::DockerManifest => DOCKER_MANIFEST,
            Self::DockerManifestList => DOCKER_MANIFEST_LIST,
        }
    }

    /// Recognises a media type (parameters and case are ignored).
    pub fn from_media_type(media_type: &str) -> Option<Self> {
        let e = essence(media_type);
        Self::ALL.into_iter().find(|t| t.as_str() == e)
    }

    /// Whether this is an index (OCI index or Docker manifest list).
    pub fn is_index(self) -> bool {
        matches!(self, Self::OciIndex | Self::DockerManifestList)
    }

    /// Whether this is an image manifest (OCI or Docker schema 2).
    pub fn is_manifest(self) -> bool {
        !self.is_index()
    }

    /// Whether this is an OCI type (as opposed to a Docker one).
    pub fn is_oci(self) -> bool {
        matches!(self, Self::OciManifest | Self::OciIndex)
    }
}

impl fmt::Display for ManifestMediaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The media type without parameters, trimmed and lowercased:
/// `Application/JSON; charset=utf-8` → `application/json`.
pub fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Whether `media_type` is an image manifest (OCI manifest or Docker schema 2).
pub fn is_manifest(media_type: &str) -> bool {
    ManifestMediaType::from_media_type(media_type).is_some_and(ManifestMediaType::is_manifest)
}

/// Whether `media_type` is an index (OCI index or Docker manifest list).
pub fn is_index(media_type: &str) -> bool {
    ManifestMediaType::from_media_type(media_type).is_some_and(ManifestMediaType::is_index)
}

/// Whether `media_type` is anything a `/manifests/` endpoint serves.
pub fn is_manifest_or_index(media_type: &str) -> bool {
    ManifestMediaType::from_media_type(media_type).is_some()
}

/// Whether `media_type` is a known layer type (OCI or Docker, distributable or not).
pub fn is_layer(media_type: &str) -> bool {
    let e = essence(media_type);
    [
        OCI_LAYER_TAR,
        OCI_LAYER_TAR_GZIP,
        OCI_LAYER_TAR_ZSTD,
        OCI_LAYER_NONDISTRIBUTABLE_TAR,
        OCI_LAYER_NONDISTRIBUTABLE_TAR_GZIP,
        OCI_LAYER_NONDISTRIBUTABLE_TAR_ZSTD,
        DOCKER_LAYER_GZIP,
        DOCKER_FOREIGN_LAYER_GZIP,
    ]
    .contains(&e.as_str())
}

/// One media range from an `Accept` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptEntry {
    /// The media range without parameters, lowercased (`*/*`, `application/*`, a full type).
    pub media_range: String,
    /// The quality in thousandths (`q=0.5` → 500); 1000 when absent or unparsable.
    pub quality: u16,
}

/// Every media range a request's `Accept` header lines named, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcceptList {
    entries: Vec<AcceptEntry>,
}

/// What to do with a stored manifest given the client's `Accept` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negotiation {
    /// Serve the stored bytes as they are.
    Serve,
    /// Answer `MANIFEST_UNKNOWN` (404) with this message, as distribution does.
    NotAcceptable {
        /// Distribution's message.
        message: &'static str,
    },
    /// A Docker manifest list fetched by tag by a client that does not name the list type:
    /// distribution answers with the list's `linux/amd64` entry instead (`MANIFEST_UNKNOWN` when
    /// there is none). By digest the list itself is served.
    PlatformFallback,
}

/// Message distribution sends when an OCI manifest is not accepted.
pub const OCI_MANIFEST_NOT_ACCEPTED: &str =
    "OCI manifest found, but accept header does not support OCI manifests";
/// Message distribution sends when an OCI index is not accepted.
pub const OCI_INDEX_NOT_ACCEPTED: &str =
    "OCI index found, but accept header does not support OCI indexes";

fn parse_quality(params: &str) -> u16 {
    for p in params.split(';') {
        let Some((k, v)) = p.split_once('=') else {
            continue;
        };
        if !k.trim().eq_ignore_ascii_case("q") {
            continue;
        }
        let v = v.trim();
        // RFC 9110: "0" ["." 0*3DIGIT] / "1" ["." 0*3("0")]
        let (int, frac) = v.split_once('.').unwrap_or((v, ""));
        if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return 1000;
        }
        let frac_val = format!("{frac:0<3}").parse::<u16>().unwrap_or(0);
        return if int == "0" { frac_val } else { 1000 };
    }
    1000
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl AcceptList {
    /// Collects every media range from all `Accept` header values (repeated lines and comma
    /// lists). Malformed items are skipped, as distribution does; this never fails.
    pub fn parse<'a, I: IntoIterator<Item = &'a str>>(values: I) -> Self {
        let mut entries = Vec::new();
        for value in values {
            for item in value.split(',') {
                let (range, params) = item.split_once(';').unwrap_or((item, ""));
                let range = range.trim().to_ascii_lowercase();
                let valid = match range.split_once('/') {
                    Some((t, s)) => is_token(t) && is_token(s),
                    None => false,
                };
                if valid {
                    entries.push(AcceptEntry {
                        media_range: range,
                        quality: parse_quality(params),
                    });
                }
            }
        }
        Self { entries }
    }

    /// The ranges, in header order.
    pub fn entries(&self) -> &[AcceptEntry] {
        &self.entries
    }

    /// Whether the client sent no usable `Accept` value.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `media_type` is named explicitly (no wildcards; `q` ignored, as distribution).
    pub fn names(&self, media_type: &str) -> bool {
        let e = essence(media_type);
        self.entries.iter().any(|x| x.media_range == e)
    }

    /// RFC 9110 semantics: the most specific matching range decides and `q=0` refuses; no
    /// `Accept` at all accepts everything.
    pub fn allows(&self, media_type: &str) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        let e = essence(media_type);
        let main = e.split('/').next().unwrap_or_default();
        let specificity = |range: &str| -> Option<u8> {
            if range == e {
                Some(2)
            } else if range.strip_suffix("/*") == Some(main) {
                Some(1)
            } else if range == "*/*" {
                Some(0)
            } else {
                None
            }
        };
        self.entries
            .iter()
            .filter_map(|x| specificity(&x.media_range).map(|s| (s, x.quality)))
            .max_by_key(|&(s, q)| (s, std::cmp::Reverse(q)))
            .is_some_and(|(_, q)| q > 0)
    }

    /// Decides how to answer a manifest request for a stored manifest of type `stored`,
    /// fetched by tag (`by_tag`) or by digest, exactly as distribution does.
    pub fn negotiate_manifest(&self, stored: ManifestMediaType, by_tag: bool) -> Negotiation {
        match stored {
            ManifestMediaType::OciManifest if !self.names(OCI_MANIFEST) => {
                Negotiation::NotAcceptable {
                    message: OCI_MANIFEST_NOT_ACCEPTED,
                }
            }
            ManifestMediaType::OciIndex if !self.names(OCI_INDEX) => Negotiation::NotAcceptable {
                message: OCI_INDEX_NOT_ACCEPTED,
            },
            ManifestMediaType::DockerManifestList
                if by_tag && !self.names(DOCKER_MANIFEST_LIST) =>
            {
                Negotiation::PlatformFallback
            }
            _ => Negotiation::Serve,
        }
    }
}

#[cfg(test)]
mod tests;
