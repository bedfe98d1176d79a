//! Image references (`[registry/]repository[:tag][@digest]`) with Docker's normalisation, and the
//! validated parts they are made of: [`RegistryHost`], [`Repository`], [`Tag`].
//!
//! Normalisation follows Docker (`distribution/reference`): a first path component that contains
//! no `.` or `:`, is not `localhost` and is all lowercase is *not* a registry, so the reference is
//! on `docker.io`; `index.docker.io` becomes `docker.io`; a single-component Docker Hub name gets
//! `library/`; a reference with neither tag nor digest gets the tag `latest`.

use std::fmt;
use std::str::FromStr;

use crate::digest::{Digest, DigestError};

/// The registry Docker Hub references are normalised to.
pub const DOCKER_HUB: &str = "docker.io";
/// The legacy Docker Hub name, normalised to [`DOCKER_HUB`].
pub const DOCKER_HUB_LEGACY: &str = "index.docker.io";
/// The host that actually serves the Docker Hub registry API.
pub const DOCKER_HUB_API_HOST: &str = "registry-1.docker.io";
/// The prefix of official Docker Hub images.
pub const OFFICIAL_REPOSITORY_PREFIX: &str = "library/";
/// The tag a reference without tag or digest gets.
pub const DEFAULT_TAG: &str = "latest";
/// Longest repository name, and longest `registry/repository` in a reference.
pub const NAME_MAX_LEN: usize = 255;
/// Longest tag.
pub const TAG_MAX_LEN: usize = 128;

/// Why a repository name is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepositoryError {
    /// The name is empty.
    #[error("repository name is empty")]
    Empty,
    /// The name is longer than [`NAME_MAX_LEN`].
    #[error("repository name is {len} characters long, the limit is {max}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `a//b`, a leading or a trailing `/`.
    #[error("repository name has an empty path component")]
    EmptyComponent,
    /// A `.` or `..` component.
    #[error("repository name has a '.' or '..' path component")]
    Traversal,
    /// Upper-case letters (the grammar is lowercase only).
    #[error("repository name {name:?} must be lowercase")]
    NotLowercase {
        /// The name (truncated).
        name: String,
    },
    /// A component that is not `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
    #[error("repository name component {component:?} must match [a-z0-9]+((.|_|__|-+)[a-z0-9]+)*")]
    InvalidComponent {
        /// The offending component (truncated).
        component: String,
    },
}

/// Why a reference (or one of its parts) is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// The input is empty.
    #[error("image reference is empty")]
    Empty,
    /// A bare 64-character hex string, which Docker reserves for image IDs.
    #[error("image reference {0:?} is a 64-character hex string, which is reserved for image IDs")]
    HexIdentifier(String),
    /// The registry part is not a host name, IPv4 or bracketed IPv6 address with optional port.
    #[error("registry host {host:?} is invalid: {reason}")]
    InvalidRegistry {
        /// The registry part (truncated).
        host: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The repository part is invalid.
    #[error(transparent)]
    Repository(#[from] RepositoryError),
    /// `registry/repository` is longer than [`NAME_MAX_LEN`].
    #[error("image name is {len} characters long, the limit is {max}")]
    NameTooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The tag does not match `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
    #[error("tag {tag:?} must match [A-Za-z0-9_][A-Za-z0-9._-]{{0,127}}")]
    InvalidTag {
        /// The tag (truncated).
        tag: String,
    },
    /// The digest part is invalid.
    #[error("invalid digest in image reference: {0}")]
    Digest(#[from] DigestError),
}

fn truncated(s: &str) -> String {
    s.chars().take(80).collect()
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Checks one repository path component against `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn is_path_component(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() || !is_alnum(b[0]) || !is_alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: ".", "_", "__" or one or more "-"; always followed by alnum.
        let start = i;
        match b[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if b.get(i) == Some(&b'_') {
                    i += 1;
                }
            }
            b'-' => {
                while b.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return false,
        }
        if i == start || !b.get(i).copied().is_some_and(is_alnum) {
            return false;
        }
    }
    true
}

/// A validated repository name such as `library/nginx` or `system/deckhouse/install`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Repository(String);

impl Repository {
    /// Validates a repository name: `/`-separated components of the distribution-spec grammar,
    /// no empty, `.` or `..` components, at most [`NAME_MAX_LEN`] bytes.
    pub fn parse(s: &str) -> Result<Self, RepositoryError> {
        if s.is_empty() {
            return Err(RepositoryError::Empty);
        }
        if s.len() > NAME_MAX_LEN {
            return Err(RepositoryError::TooLong {
                len: s.len(),
                max: NAME_MAX_LEN,
            });
        }
        for component in s.split('/') {
            match component {
                "" => return Err(RepositoryError::EmptyComponent),
                "." | ".." => return Err(RepositoryError::Traversal),
                c if c.bytes().any(|b| b.is_ascii_uppercase()) => {
                    return Err(RepositoryError::NotLowercase { name: truncated(s) });
                }
                c if !is_path_component(c) => {
                    return Err(RepositoryError::InvalidComponent {
                        component: truncated(c),
                    });
                }
                _ => {}
            }
        }
        Ok(Self(s.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The `/`-separated components.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }
}

impl fmt::Display for Repository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Repository {
    type Err = RepositoryError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl AsRef<str> for Repository {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A validated tag: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(String);

impl Tag {
    /// Validates a tag.
    pub fn parse(s: &str) -> Result<Self, ReferenceError> {
        let b = s.as_bytes();
        let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let ok = !b.is_empty()
            && b.len() <= TAG_MAX_LEN
            && word(b[0])
            && b[1..].iter().all(|&c| word(c) || c == b'.' || c == b'-');
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(ReferenceError::InvalidTag { tag: truncated(s) })
        }
    }

    /// The tag.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Tag {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A validated registry host: a DNS name, IPv4 address or bracketed IPv6 address, with an
/// optional port (`registry.example.com:8443`, `localhost`, `[::1]:5000`).
///
/// Case is preserved (Docker does not lowercase hosts); compare with
/// [`eq_ignore_case`](Self::eq_ignore_case) where host identity matters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RegistryHost(String);

fn invalid_host(s: &str, reason: &'static str) -> ReferenceError {
    ReferenceError::InvalidRegistry {
        host: truncated(s),
        reason,
    }
}

fn is_domain_component(c: &str) -> bool {
    let b = c.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&x| x.is_ascii_alphanumeric() || x == b'-')
}

fn check_port(s: &str, port: &str) -> Result<(), ReferenceError> {
    let valid = !port.is_empty()
        && port.len() <= 5
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u32>().is_ok_and(|p| p <= 65535);
    if valid {
        Ok(())
    } else {
        Err(invalid_host(s, "the port must be a number up to 65535"))
    }
}

impl RegistryHost {
    /// Validates a registry host with optional port.
    pub fn parse(s: &str) -> Result<Self, ReferenceError> {
        if s.is_empty() {
            return Err(invalid_host(s, "it is empty"));
        }
        if s.len() > NAME_MAX_LEN {
            return Err(invalid_host(s, "it is longer than 255 characters"));
        }
        if let Some(rest) = s.strip_prefix('[') {
            let Some((addr, after)) = rest.split_once(']') else {
                return Err(invalid_host(s, "an IPv6 address needs a closing ']'"));
            };
            if addr.is_empty() || !addr.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
                return Err(invalid_host(
                    s,
                    "an IPv6 address may only hold hex digits and ':'",
                ));
            }
            match after {
                "" => {}
                p if p.starts_with(':') => check_port(s, &p[1..])?,
                _ => return Err(invalid_host(s, "only ':port' may follow an IPv6 address")),
            }
            return Ok(Self(s.to_owned()));
        }
        let (name, port) = match s.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (s, None),
        };
        if let Some(port) = port {
            check_port(s, port)?;
        }
        if !name.split('.').all(is_domain_component) {
            return Err(invalid_host(
                s,
                "each dot-separated part must be letters, digits and inner '-'",
            ));
        }
        Ok(Self(s.to_owned()))
    }

    /// The host as given, with port.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The host without the port (IPv6 addresses keep their brackets).
    pub fn host(&self) -> &str {
        self.split().0
    }

    /// The port, if one was given.
    pub fn port(&self) -> Option<u16> {
        self.split().1.and_then(|p| p.parse().ok())
    }

    fn split(&self) -> (&str, Option<&str>) {
        let s = self.0.as_str();
        let colon = if s.starts_with('[') {
            s.find(']').and_then(|i| s[i..].find(':').map(|j| i + j))
        } else {
            s.find(':')
        };
        match colon {
            Some(i) => (&s[..i], Some(&s[i + 1..])),
            None => (s, None),
        }
    }

    /// Whether this is Docker Hub (`docker.io`).
    pub fn is_docker_hub(&self) -> bool {
        self.0 == DOCKER_HUB
    }

    /// The host that serves the registry API: `registry-1.docker.io` for Docker Hub, otherwise
    /// the host itself.
    pub fn api_host(&self) -> &str {
        if self.is_docker_hub() {
            DOCKER_HUB_API_HOST
        } else {
            &self.0
        }
    }

    /// ASCII case-insensitive comparison (DNS names are case-insensitive).
    pub fn eq_ignore_case(&self, other: &str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl fmt::Display for RegistryHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for RegistryHost {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A fully qualified image reference.
///
/// Always has a registry and a repository, and a tag, a digest or both. [`Display`](fmt::Display)
/// gives the canonical form (`docker.io/library/nginx:latest`), [`familiar`](Self::familiar) the
/// short form Docker prints (`nginx:latest`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reference {
    registry: RegistryHost,
    repository: Repository,
    tag: Option<Tag>,
    digest: Option<Digest>,
}

/// Whether Docker reads the part of `name` before the first `/` as a registry: it contains a
/// `.` or `:`, is `localhost`, or has upper-case letters.
fn names_registry(name: &str) -> bool {
    name.split_once('/').is_some_and(|(first, _)| {
        first.contains(['.', ':'])
            || first == "localhost"
            || first.bytes().any(|b| b.is_ascii_uppercase())
    })
}

/// Splits `name` into (registry, remainder) the way Docker does.
fn split_docker_domain(name: &str) -> (&str, std::borrow::Cow<'_, str>) {
    let (domain, remainder) = match name.split_once('/') {
        Some((first, rest)) if names_registry(name) => (first, rest),
        _ => (DOCKER_HUB, name),
    };
    let domain = if domain == DOCKER_HUB_LEGACY {
        DOCKER_HUB
    } else {
        domain
    };
    if domain == DOCKER_HUB && !remainder.contains('/') {
        (
            domain,
            format!("{OFFICIAL_REPOSITORY_PREFIX}{remainder}").into(),
        )
    } else {
        (domain, remainder.into())
    }
}

impl Reference {
    /// Parses and normalises a reference as `docker pull` would.
    pub fn parse(s: &str) -> Result<Self, ReferenceError> {
        if s.is_empty() {
            return Err(ReferenceError::Empty);
        }
        if s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(ReferenceError::HexIdentifier(s.to_owned()));
        }
        let (name_tag, digest) = match s.rsplit_once('@') {
            Some((name_tag, d)) => (name_tag, Some(Digest::parse(d)?)),
            None => (s, None),
        };
        let last_slash = name_tag.rfind('/');
        let (name, tag) = match name_tag.rfind(':') {
            Some(i) if last_slash.is_none_or(|j| i > j) => {
                (&name_tag[..i], Some(Tag::parse(&name_tag[i + 1..])?))
            }
            _ => (name_tag, None),
        };
        let (domain, remainder) = split_docker_domain(name);
        let registry = RegistryHost::parse(domain)?;
        let repository = Repository::parse(&remainder)?;
        let len = registry.as_str().len() + 1 + repository.as_str().len();
        if len > NAME_MAX_LEN {
            return Err(ReferenceError::NameTooLong {
                len,
                max: NAME_MAX_LEN,
            });
        }
        let tag = match (tag, digest) {
            (None, None) => Some(Tag(DEFAULT_TAG.to_owned())),
            (tag, _) => tag,
        };
        Ok(Self {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// Assembles a reference from validated parts. Without tag and digest it gets `latest`.
    pub fn new(
        registry: RegistryHost,
        repository: Repository,
        tag: Option<Tag>,
        digest: Option<Digest>,
    ) -> Self {
        let tag = if tag.is_none() && digest.is_none() {
            Some(Tag(DEFAULT_TAG.to_owned()))
        } else {
            tag
        };
        Self {
            registry,
            repository,
            tag,
            digest,
        }
    }

    /// The registry host (`docker.io` for Docker Hub).
    pub fn registry(&self) -> &RegistryHost {
        &self.registry
    }

    /// The repository within the registry.
    pub fn repository(&self) -> &Repository {
        &self.repository
    }

    /// The tag, if any.
    pub fn tag(&self) -> Option<&Tag> {
        self.tag.as_ref()
    }

    /// The digest, if any.
    pub fn digest(&self) -> Option<Digest> {
        self.digest
    }

    /// What to put after `/manifests/` when fetching: the digest if pinned, else the tag.
    pub fn manifest_reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.to_string(),
            (None, None) => DEFAULT_TAG.to_owned(),
        }
    }

    /// `registry/repository` without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The short form Docker prints: `docker.io/` and a sole `library/` are dropped.
    ///
    /// Unlike Docker, `docker.io/` is kept when dropping it would make the first path
    /// component read as a registry (`docker.io/a.b/c` stays as is), so the short form always
    /// parses back to the same reference.
    pub fn familiar(&self) -> String {
        let mut out = if self.registry.is_docker_hub() {
            let repo = self.repository.as_str();
            match repo.strip_prefix(OFFICIAL_REPOSITORY_PREFIX) {
                Some(rest) if !rest.contains('/') => rest.to_owned(),
                _ if !names_registry(repo) => repo.to_owned(),
                _ => self.name(),
            }
        } else {
            self.name()
        };
        self.push_suffix(&mut out);
        out
    }

    fn push_suffix(&self, out: &mut String) {
        if let Some(tag) = &self.tag {
            out.push(':');
            out.push_str(tag.as_str());
        }
        if let Some(digest) = &self.digest {
            out.push('@');
            out.push_str(&digest.to_string());
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = self.name();
        self.push_suffix(&mut s);
        f.write_str(&s)
    }
}

impl FromStr for Reference {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests;
