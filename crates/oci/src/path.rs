//! The request-path parser: from a `/v2/…` path and its raw query to a typed [`Request`].
//!
//! The repository name is split off at the **last** `/manifests/`, `/blobs/`, `/blobs/uploads/`,
//! `/tags/list` or `/referrers/` segment, so a repository may itself contain `manifests` or
//! `blobs` as a component. The path is percent-decoded once (as Go's `URL.Path` is, which is
//! what distribution routes on) and the decoded parts must then pass the grammars: repository
//! names, tags, digests, upload ids. `.` and `..` segments, empty segments, control characters
//! (NUL included), bad escapes and overlong input are typed errors; nothing here panics.
//!
//! Query parameters: `ns` (the registry containerd really wants, URL-encoded, validated as a
//! host), `n`/`last` for tag and catalog listings, `digest`/`mount`/`from` for uploads,
//! `artifactType` for referrers. Unknown parameters are ignored; of repeated ones the first
//! counts (as Go's `Query().Get`).

use std::fmt;

use crate::digest::{Digest, DigestError};
use crate::encoding::{percent_decode, query_escape};
use crate::error::ErrorCode;
use crate::reference::{ReferenceError, RegistryHost, Repository, RepositoryError, Tag};

/// Longest raw path accepted.
pub const PATH_MAX_LEN: usize = 2048;
/// Longest raw query accepted.
pub const QUERY_MAX_LEN: usize = 2048;
/// Longest decoded `last` or `artifactType` value accepted (tags are at most 128 bytes,
/// repository names 255, media types 255); keeps a re-encoded canonical query within
/// [`QUERY_MAX_LEN`].
pub const QUERY_VALUE_MAX_LEN: usize = 256;
/// Longest upload session id accepted.
pub const UPLOAD_ID_MAX_LEN: usize = 256;

/// Why a request path or query is not a distribution API request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The raw path exceeds [`PATH_MAX_LEN`].
    #[error("request path is {len} bytes long, the limit is {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The path is not under `/v2/`.
    #[error("request path is not under /v2/")]
    NotV2,
    /// A `%` not followed by two hex digits.
    #[error("request path has a malformed percent-escape at byte {at}")]
    BadEscape {
        /// Byte offset in the raw path.
        at: usize,
    },
    /// The decoded path is not UTF-8.
    #[error("request path does not decode to UTF-8")]
    NotUtf8,
    /// A control character (NUL included) in the decoded path.
    #[error("request path contains a control character")]
    ControlCharacter,
    /// A `.` or `..` segment.
    #[error("request path contains a '.' or '..' segment")]
    Traversal,
    /// `//` or a trailing `/`.
    #[error("request path contains an empty segment")]
    EmptySegment,
    /// No `/manifests/`, `/blobs/`, `/tags/list` or `/referrers/` endpoint at the end.
    #[error("request path names no distribution endpoint (manifests, blobs, tags, referrers)")]
    UnknownEndpoint,
    /// The repository name is invalid.
    #[error("invalid repository name: {0}")]
    Name(#[source] RepositoryError),
    /// The manifest reference is neither a valid tag nor a valid digest.
    #[error("invalid manifest reference: {0}")]
    Reference(#[source] ReferenceError),
    /// A digest in the path or in the `digest`/`mount` parameters is invalid.
    #[error("invalid digest: {0}")]
    Digest(#[source] DigestError),
    /// The upload session id is not `[A-Za-z0-9._=-]{1,256}`.
    #[error("invalid upload session id")]
    InvalidUploadId,
    /// The raw query exceeds [`QUERY_MAX_LEN`].
    #[error("query string is {len} bytes long, the limit is {max}")]
    QueryTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A `last` or `artifactType` value longer than [`QUERY_VALUE_MAX_LEN`].
    #[error("the {parameter} parameter is longer than {max} bytes")]
    QueryValueTooLong {
        /// The parameter.
        parameter: &'static str,
        /// The limit.
        max: usize,
    },
    /// A query parameter is not validly percent-encoded UTF-8.
    #[error("query parameter is not validly percent-encoded UTF-8")]
    QueryEncoding,
    /// `ns` is not a registry host.
    #[error("the ns parameter is not a registry host: {0}")]
    Namespace(#[source] ReferenceError),
    /// `n` is not a non-negative integer.
    #[error("the n parameter {value:?} is not a non-negative integer")]
    PaginationNumber {
        /// The value (truncated).
        value: String,
    },
    /// `from` is not a repository name.
    #[error("the from parameter is not a repository name: {0}")]
    MountFrom(#[source] RepositoryError),
}

impl PathError {
    /// The OCI error code to answer with.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Self::Digest(_) => ErrorCode::DigestInvalid,
            Self::Reference(_) => ErrorCode::TagInvalid,
            Self::PaginationNumber { .. } => ErrorCode::PaginationNumberInvalid,
            Self::InvalidUploadId => ErrorCode::BlobUploadUnknown,
            Self::NotV2
            | Self::UnknownEndpoint
            | Self::QueryTooLong { .. }
            | Self::QueryValueTooLong { .. }
            | Self::QueryEncoding
            | Self::Namespace(_) => ErrorCode::Unsupported,
            Self::TooLong { .. }
            | Self::BadEscape { .. }
            | Self::NotUtf8
            | Self::ControlCharacter
            | Self::Traversal
            | Self::EmptySegment
            | Self::Name(_)
            | Self::MountFrom(_) => ErrorCode::NameInvalid,
        }
    }

    /// The HTTP status to answer with: 404 outside `/v2/` and for unknown upload ids, 400
    /// otherwise (the agent answers 400 to any path it cannot route).
    pub fn status(&self) -> u16 {
        match self {
            Self::NotV2 | Self::InvalidUploadId => 404,
            _ => 400,
        }
    }
}

/// What follows `/manifests/`: a tag or a digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ManifestReference {
    /// By tag.
    Tag(Tag),
    /// By digest.
    Digest(Digest),
}

impl ManifestReference {
    /// Parses a reference: with a `:` it must be a digest, otherwise a tag.
    pub fn parse(s: &str) -> Result<Self, PathError> {
        if s.contains(':') {
            Digest::parse(s)
                .map(Self::Digest)
                .map_err(PathError::Digest)
        } else {
            Tag::parse(s).map(Self::Tag).map_err(PathError::Reference)
        }
    }

    /// The digest, when fetched by digest.
    pub fn digest(&self) -> Option<Digest> {
        match self {
            Self::Digest(d) => Some(*d),
            Self::Tag(_) => None,
        }
    }
}

impl fmt::Display for ManifestReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tag(t) => t.fmt(f),
            Self::Digest(d) => d.fmt(f),
        }
    }
}

/// A distribution API endpoint with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/v2/`.
    Ping,
    /// `/v2/_catalog`.
    Catalog {
        /// `n`.
        n: Option<u32>,
        /// `last`.
        last: Option<String>,
    },
    /// `/v2/<name>/manifests/<reference>`.
    Manifest {
        /// The repository.
        repository: Repository,
        /// Tag or digest.
        reference: ManifestReference,
    },
    /// `/v2/<name>/blobs/<digest>`.
    Blob {
        /// The repository.
        repository: Repository,
        /// The blob.
        digest: Digest,
    },
    /// `/v2/<name>/blobs/uploads/` (start an upload, monolithic push or mount).
    UploadStart {
        /// The repository.
        repository: Repository,
        /// `digest` (monolithic POST).
        digest: Option<Digest>,
        /// `mount` (cross-repository mount).
        mount: Option<Digest>,
        /// `from` (mount source).
        from: Option<Repository>,
    },
    /// `/v2/<name>/blobs/uploads/<id>` (PATCH, PUT, GET status, DELETE).
    Upload {
        /// The repository.
        repository: Repository,
        /// The session id.
        id: String,
        /// `digest` (closing PUT).
        digest: Option<Digest>,
    },
    /// `/v2/<name>/tags/list`.
    Tags {
        /// The repository.
        repository: Repository,
        /// `n`.
        n: Option<u32>,
        /// `last`.
        last: Option<String>,
    },
    /// `/v2/<name>/referrers/<digest>`.
    Referrers {
        /// The repository.
        repository: Repository,
        /// The subject.
        digest: Digest,
        /// `artifactType` filter.
        artifact_type: Option<String>,
        /// `n`: at most this many descriptors (the spec leaves referrers pagination to the
        /// registry; ours pages like the tag list, and its `Link` carries `n` and `last`).
        n: Option<u32>,
        /// `last`: the digest after which the page starts.
        last: Option<String>,
    },
}

/// The kind of a [`Route`], a bounded value for metric labels and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteKind {
    /// [`Route::Ping`].
    Ping,
    /// [`Route::Catalog`].
    Catalog,
    /// [`Route::Manifest`].
    Manifest,
    /// [`Route::Blob`].
    Blob,
    /// [`Route::UploadStart`] and [`Route::Upload`].
    Upload,
    /// [`Route::Tags`].
    Tags,
    /// [`Route::Referrers`].
    Referrers,
}

impl RouteKind {
    /// A short lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ping => "ping",
            Self::Catalog => "catalog",
            Self::Manifest => "manifest",
            Self::Blob => "blob",
            Self::Upload => "upload",
            Self::Tags => "tags",
            Self::Referrers => "referrers",
        }
    }
}

impl Route {
    /// The kind.
    pub fn kind(&self) -> RouteKind {
        match self {
            Self::Ping => RouteKind::Ping,
            Self::Catalog { .. } => RouteKind::Catalog,
            Self::Manifest { .. } => RouteKind::Manifest,
            Self::Blob { .. } => RouteKind::Blob,
            Self::UploadStart { .. } | Self::Upload { .. } => RouteKind::Upload,
            Self::Tags { .. } => RouteKind::Tags,
            Self::Referrers { .. } => RouteKind::Referrers,
        }
    }

    /// The repository, for routes that have one.
    pub fn repository(&self) -> Option<&Repository> {
        match self {
            Self::Ping | Self::Catalog { .. } => None,
            Self::Manifest { repository, .. }
            | Self::Blob { repository, .. }
            | Self::UploadStart { repository, .. }
            | Self::Upload { repository, .. }
            | Self::Tags { repository, .. }
            | Self::Referrers { repository, .. } => Some(repository),
        }
    }

    /// What follows the repository: `/manifests/v1`, `/blobs/sha256:…`, `/blobs/uploads/`,
    /// `/blobs/uploads/<id>`, `/tags/list`, `/referrers/sha256:…`; empty for ping and catalog.
    pub fn suffix(&self) -> String {
        match self {
            Self::Ping | Self::Catalog { .. } => String::new(),
            Self::Manifest { reference, .. } => format!("/manifests/{reference}"),
            Self::Blob { digest, .. } => format!("/blobs/{digest}"),
            Self::UploadStart { .. } => "/blobs/uploads/".to_owned(),
            Self::Upload { id, .. } => format!("/blobs/uploads/{id}"),
            Self::Tags { .. } => "/tags/list".to_owned(),
            Self::Referrers { digest, .. } => format!("/referrers/{digest}"),
        }
    }

    /// The canonical path.
    pub fn path(&self) -> String {
        match self {
            Self::Ping => "/v2/".to_owned(),
            Self::Catalog { .. } => "/v2/_catalog".to_owned(),
            _ => self
                .repository()
                .map_or_else(String::new, |r| self.path_for(r)),
        }
    }

    /// The path of the same endpoint in another repository (for routing to a backend whose
    /// repositories live under a prefix).
    pub fn path_for(&self, repository: &Repository) -> String {
        format!("/v2/{repository}{}", self.suffix())
    }

    /// The route's own query parameters, canonically encoded, without `ns`; `None` if none.
    pub fn query(&self) -> Option<String> {
        let mut q: Vec<(&str, String)> = Vec::new();
        match self {
            Self::Catalog { n, last } | Self::Tags { n, last, .. } => {
                q.extend(n.map(|n| ("n", n.to_string())));
                q.extend(last.clone().map(|l| ("last", l)));
            }
            Self::UploadStart {
                digest,
                mount,
                from,
                ..
            } => {
                q.extend(digest.map(|d| ("digest", d.to_string())));
                q.extend(mount.map(|d| ("mount", d.to_string())));
                q.extend(from.as_ref().map(|f| ("from", f.to_string())));
            }
            Self::Upload { digest, .. } => q.extend(digest.map(|d| ("digest", d.to_string()))),
            Self::Referrers {
                artifact_type,
                n,
                last,
                ..
            } => {
                q.extend(artifact_type.clone().map(|a| ("artifactType", a)));
                q.extend(n.map(|n| ("n", n.to_string())));
                q.extend(last.clone().map(|l| ("last", l)));
            }
            Self::Ping | Self::Manifest { .. } | Self::Blob { .. } => {}
        }
        if q.is_empty() {
            return None;
        }
        let parts: Vec<String> = q
            .into_iter()
            .map(|(k, v)| format!("{k}={}", query_escape(&v)))
            .collect();
        Some(parts.join("&"))
    }
}

/// A parsed request: the route and the registry containerd named with `ns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The endpoint.
    pub route: Route,
    /// The `ns` parameter, if present and non-empty.
    pub ns: Option<RegistryHost>,
}

/// Decoded query parameters (first occurrence wins).
#[derive(Debug, Default)]
struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    fn parse(raw: Option<&str>) -> Result<Self, PathError> {
        let raw = raw.unwrap_or_default();
        if raw.len() > QUERY_MAX_LEN {
            return Err(PathError::QueryTooLong {
                len: raw.len(),
                max: QUERY_MAX_LEN,
            });
        }
        let decode = |s: &str| -> Result<String, PathError> {
            let bytes = percent_decode(s, true).map_err(|_| PathError::QueryEncoding)?;
            String::from_utf8(bytes).map_err(|_| PathError::QueryEncoding)
        };
        let mut pairs = Vec::new();
        for part in raw.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            pairs.push((decode(k)?, decode(v)?));
        }
        Ok(Self { pairs })
    }

    /// The first non-empty value of `key`.
    fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    fn digest(&self, key: &str) -> Result<Option<Digest>, PathError> {
        self.get(key)
            .map(Digest::parse)
            .transpose()
            .map_err(PathError::Digest)
    }

    fn n(&self) -> Result<Option<u32>, PathError> {
        self.get("n")
            .map(|v| {
                let digits = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
                v.parse::<u32>().ok().filter(|_| digits).ok_or_else(|| {
                    PathError::PaginationNumber {
                        value: v.chars().take(40).collect(),
                    }
                })
            })
            .transpose()
    }

    fn bounded(&self, key: &'static str) -> Result<Option<String>, PathError> {
        match self.get(key) {
            Some(v) if v.len() > QUERY_VALUE_MAX_LEN => Err(PathError::QueryValueTooLong {
                parameter: key,
                max: QUERY_VALUE_MAX_LEN,
            }),
            v => Ok(v.map(str::to_owned)),
        }
    }

    fn ns(&self) -> Result<Option<RegistryHost>, PathError> {
        self.get("ns")
            .map(RegistryHost::parse)
            .transpose()
            .map_err(PathError::Namespace)
    }
}

/// Decodes the part after `/v2/` (which starts at byte 4 of the raw path).
fn decode_path(raw: &str) -> Result<String, PathError> {
    let bytes = percent_decode(raw, false).map_err(|e| PathError::BadEscape { at: e.at + 4 })?;
    let s = String::from_utf8(bytes).map_err(|_| PathError::NotUtf8)?;
    if s.chars().any(char::is_control) {
        return Err(PathError::ControlCharacter);
    }
    Ok(s)
}

fn repository(segments: &[&str]) -> Result<Repository, PathError> {
    Repository::parse(&segments.join("/")).map_err(PathError::Name)
}

fn upload_id(s: &str) -> Result<String, PathError> {
    let ok = !s.is_empty()
        && s.len() <= UPLOAD_ID_MAX_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._=-".contains(&b));
    if ok {
        Ok(s.to_owned())
    } else {
        Err(PathError::InvalidUploadId)
    }
}

/// Splits the decoded part after `/v2/` at its last endpoint segment.
fn route(rest: &str, q: &Query) -> Result<Route, PathError> {
    if rest.is_empty() {
        return Ok(Route::Ping);
    }
    if rest == "_catalog" {
        return Ok(Route::Catalog {
            n: q.n()?,
            last: q.bounded("last")?,
        });
    }
    let mut segs: Vec<&str> = rest.split('/').collect();
    if segs.iter().any(|s| matches!(*s, "." | "..")) {
        return Err(PathError::Traversal);
    }
    // `/blobs/uploads/` keeps its trailing slash; `/blobs/uploads` is accepted as well, as
    // distribution's router redirects it.
    if segs.last() == Some(&"") {
        segs.pop();
        let n = segs.len();
        if n < 2 || segs[n - 2] != "blobs" || segs[n - 1] != "uploads" {
            return Err(PathError::EmptySegment);
        }
    }
    if segs.iter().any(|s| s.is_empty()) {
        return Err(PathError::EmptySegment);
    }
    let n = segs.len();
    let at = |i: usize, s: &str| n > i && segs[n - 1 - i] == s;
    if at(1, "blobs") && at(0, "uploads") {
        return Ok(Route::UploadStart {
            repository: repository(&segs[..n - 2])?,
            digest: q.digest("digest")?,
            mount: q.digest("mount")?,
            from: q
                .get("from")
                .map(Repository::parse)
                .transpose()
                .map_err(PathError::MountFrom)?,
        });
    }
    if at(2, "blobs") && at(1, "uploads") {
        return Ok(Route::Upload {
            repository: repository(&segs[..n - 3])?,
            id: upload_id(segs[n - 1])?,
            digest: q.digest("digest")?,
        });
    }
    if at(1, "tags") && at(0, "list") {
        return Ok(Route::Tags {
            repository: repository(&segs[..n - 2])?,
            n: q.n()?,
            last: q.bounded("last")?,
        });
    }
    let name = || repository(&segs[..n.saturating_sub(2)]);
    let last = segs[n - 1];
    if at(1, "manifests") {
        return Ok(Route::Manifest {
            repository: name()?,
            reference: ManifestReference::parse(last)?,
        });
    }
    if at(1, "blobs") {
        let digest = Digest::parse(last).map_err(PathError::Digest)?;
        return Ok(Route::Blob {
            repository: name()?,
            digest,
        });
    }
    if at(1, "referrers") {
        let digest = Digest::parse(last).map_err(PathError::Digest)?;
        return Ok(Route::Referrers {
            repository: name()?,
            digest,
            artifact_type: q.bounded("artifactType")?,
            n: q.n()?,
            last: q.bounded("last")?,
        });
    }
    Err(PathError::UnknownEndpoint)
}

/// Parses a request path (as sent, still percent-encoded) and its raw query (without `?`).
pub fn parse(path: &str, query: Option<&str>) -> Result<Request, PathError> {
    if path.len() > PATH_MAX_LEN {
        return Err(PathError::TooLong {
            len: path.len(),
            max: PATH_MAX_LEN,
        });
    }
    let rest = match path {
        "/v2" => "",
        p => p.strip_prefix("/v2/").ok_or(PathError::NotV2)?,
    };
    let rest = decode_path(rest)?;
    let q = Query::parse(query)?;
    let route = route(&rest, &q)?;
    Ok(Request { route, ns: q.ns()? })
}

#[cfg(test)]
mod tests;
