//! The bundle on disk, in the format of Deckhouse's `d8 mirror`:
//!
//! ```text
//! <bundle>/platform.tar                      OCI image layouts whose paths are registry paths:
//!                                            index.json, oci-layout, blobs/sha256/… (the root
//!                                            repository), install/, install-standalone/,
//!                                            release-channel/
//! <bundle>/module-<name>.tar                 modules/<name>/ and modules/<name>/release/
//! <bundle>/<package>.tar.0000.chunk, …       the same tar split into chunks (--images-bundle-chunk-size)
//! <bundle>/d8-mirror-bundle.json             ours: packages, their files with sizes and sha256,
//!                                            and every image with its digest
//! ```
//!
//! Index entries carry `org.opencontainers.image.ref.name` (the source reference) and
//! `io.deckhouse.image.short_tag` (the tag, or `@sha256:…` for images pulled by digest): the
//! short tag is what a push tags the image with.
//!
//! Reading a package: [`index`] walks its tar headers only (push, before its first request);
//! [`hash_files`] checks its files against the bundle manifest (push, in the background of the
//! uploads); [`scan`] is the one sequential pass that indexes every entry and verifies every blob
//! against its name and every file's sha256 (`--dry-run`, and to name the blob of a package that
//! failed its hash). Writing one: [`planned`].

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::progress::Phase;

/// Our manifest of the bundle's contents.
pub const MANIFEST_FILE: &str = "d8-mirror-bundle.json";
/// The format tag in [`BundleManifest::format`].
pub const FORMAT: &str = "d8-mirror-bundle/v1";
/// Index annotation: the image's full source reference.
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Index annotation (Deckhouse's): the tag a push gives the image, or `@sha256:…`.
pub const ANNOTATION_SHORT_TAG: &str = "io.deckhouse.image.short_tag";

/// `d8-mirror-bundle.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleManifest {
    /// [`FORMAT`].
    pub format: String,
    /// The source registry (`host/path`).
    pub source: String,
    /// The packages.
    pub packages: Vec<PackageManifest>,
}

/// One package of the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifest {
    /// `platform`, `module-<name>`.
    pub name: String,
    /// Its files in order (one tar, or its chunks).
    pub files: Vec<FileEntry>,
    /// Every image, by repository (relative to the registry root) and tag.
    pub images: Vec<ImageEntry>,
    /// Distinct blobs (layers and configs) in the package.
    pub blobs: u64,
    /// Their total size.
    pub blob_bytes: u64,
}

/// A file of a package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileEntry {
    /// The file name in the bundle directory.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// `sha256:<hex>` of its bytes.
    pub digest: String,
}

/// An image in a package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageEntry {
    /// Repository relative to the registry root (`""`, `install`, `modules/foo/release`).
    pub repository: String,
    /// The short tag (`v1.2.3`, `stable`, `@sha256:…`).
    pub tag: String,
    /// The manifest digest.
    pub digest: String,
    /// The manifest media type.
    pub media_type: String,
}

impl BundleManifest {
    /// Reads `d8-mirror-bundle.json` from `dir`, if there is one.
    pub fn read(dir: &Path) -> Result<Option<Self>, Error> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, e)),
        };
        let manifest: Self = serde_json::from_slice(&bytes).map_err(|e| Error::InvalidBundle {
            file: MANIFEST_FILE.into(),
            reason: e.to_string(),
        })?;
        if manifest.format != FORMAT {
            return Err(Error::InvalidBundle {
                file: MANIFEST_FILE.into(),
                reason: format!("unknown format {:?} (expected {FORMAT})", manifest.format),
            });
        }
        Ok(Some(manifest))
    }
}

/// A package's files, read as one stream.
#[derive(Debug, Clone)]
pub struct Package {
    /// `platform`, `module-foo`.
    pub name: String,
    /// The files in order, with their sizes.
    pub parts: Vec<(PathBuf, u64)>,
}

impl Package {
    /// Total size.
    pub fn size(&self) -> u64 {
        self.parts.iter().map(|(_, s)| s).sum()
    }

    /// `platform.tar` or `platform.tar (4 chunks)`, for messages.
    pub fn display(&self) -> String {
        if self.parts.len() == 1 {
            file_name(&self.parts[0].0)
        } else {
            format!("{}.tar ({} chunks)", self.name, self.parts.len())
        }
    }

    /// Reads `len` bytes at `offset` of the concatenated stream.
    pub fn read_at(&self, mut offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut filled = 0;
        for (path, size) in &self.parts {
            if filled == buf.len() {
                break;
            }
            if offset >= *size {
                offset -= size;
                continue;
            }
            let take = ((size - offset) as usize).min(buf.len() - filled);
            let mut file = File::open(path)?;
            file.seek(SeekFrom::Start(offset))?;
            file.read_exact(&mut buf[filled..filled + take])?;
            filled += take;
            offset = 0;
        }
        if filled < buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{} ends before the data it indexes", self.display()),
            ));
        }
        Ok(())
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The packages of the bundle in `dir`: `<name>.tar` files and chunk sets (`<name>.tar.0000.chunk`
/// as Deckhouse writes them, or `<name>.tar.chunk000`), sorted by name.
pub fn packages(dir: &Path) -> Result<Vec<Package>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut found: BTreeMap<String, Vec<(u64, PathBuf, u64)>> = BTreeMap::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata().map_err(|e| Error::io(entry.path(), e))?;
        if !meta.is_file() {
            continue;
        }
        if let Some(package) = name.strip_suffix(".tar") {
            found
                .entry(package.to_owned())
                .or_default()
                .push((0, entry.path(), meta.len()));
        } else if let Some((package, index)) = chunk_of(&name) {
            found
                .entry(package)
                .or_default()
                .push((index + 1, entry.path(), meta.len()));
        }
    }
    let mut out = Vec::new();
    for (name, mut parts) in found {
        parts.sort();
        // A whole tar wins over stray chunks of the same package.
        if parts.first().is_some_and(|p| p.0 == 0) {
            parts.truncate(1);
        }
        out.push(Package {
            name,
            parts: parts.into_iter().map(|(_, p, s)| (p, s)).collect(),
        });
    }
    Ok(out)
}

fn chunk_of(name: &str) -> Option<(String, u64)> {
    let at = name.find(".tar.")?;
    let (package, rest) = (&name[..at], &name[at + 5..]);
    let digits = rest
        .strip_suffix(".chunk")
        .or_else(|| rest.strip_prefix("chunk"))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((package.to_owned(), digits.parse().ok()?))
}

/// The name of chunk `index` of `package` (Deckhouse's form).
pub fn chunk_name(package: &str, index: usize) -> String {
    format!("{package}.tar.{index:04}.chunk")
}

/// Where one tar entry's data is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Offset of the data in the package stream.
    pub offset: u64,
    /// Size of the data.
    pub size: u64,
}

/// A scanned package: every entry, small files in memory.
#[derive(Debug, Clone)]
pub struct ScannedPackage {
    /// The package.
    pub package: Package,
    /// Entries by normalised path (no leading `./` or `/`).
    pub entries: BTreeMap<String, Entry>,
    /// Contents of `index.json` and `oci-layout` files by path.
    pub small: BTreeMap<String, Vec<u8>>,
}

/// The digest a blob path names: `…/blobs/<algorithm>/<hex>`.
pub fn blob_digest_of(path: &str) -> Option<oci::Digest> {
    let mut parts = path.rsplit('/');
    let hex = parts.next()?;
    let algorithm = parts.next()?;
    (parts.next()? == "blobs")
        .then(|| oci::Digest::parse(&format!("{algorithm}:{hex}")).ok())
        .flatten()
}

/// Checks a package's files against the bundle manifest by name and size (no byte read).
pub fn check_files(package: &Package, expected: &PackageManifest) -> Result<(), Error> {
    let names: Vec<String> = package.parts.iter().map(|(p, _)| file_name(p)).collect();
    let wanted: Vec<String> = expected.files.iter().map(|f| f.name.clone()).collect();
    if names != wanted {
        return Err(Error::CorruptPackage {
            file: package.display(),
            reason: format!(
                "consists of {names:?} but the bundle manifest lists {wanted:?} (a chunk is missing or extra)"
            ),
        });
    }
    for ((path, size), file) in package.parts.iter().zip(&expected.files) {
        if *size != file.size {
            return Err(Error::CorruptPackage {
                file: file_name(path),
                reason: format!("has {size} bytes, the bundle manifest says {}", file.size),
            });
        }
    }
    Ok(())
}

/// Indexes a package's tar entries without reading their data (headers only, seeking past
/// the rest), and reads its `index.json` and `oci-layout` files. Nothing is verified: see
/// [`hash_files`] and [`scan`].
pub fn index(package: &Package) -> Result<ScannedPackage, Error> {
    let invalid = |reason: String| Error::InvalidBundle {
        file: package.display(),
        reason,
    };
    let mut archive = tar::Archive::new(SeekReader::new(package));
    let mut entries = BTreeMap::new();
    let mut small = BTreeMap::new();
    let iter = archive
        .entries_with_seek()
        .map_err(|e| invalid(format!("not a tar archive: {e}")))?;
    for entry in iter {
        let mut entry = entry.map_err(|e| invalid(format!("broken tar entry: {e}")))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = normalised_path(&entry).map_err(invalid)?;
        let (offset, size) = (entry.raw_file_position(), entry.size());
        if blob_digest_of(&path).is_none() {
            read_small(&mut entry, &path, size, &mut small).map_err(invalid)?;
        }
        entries.insert(path, Entry { offset, size });
    }
    if let Some(end) = entries.values().map(|e| e.offset + e.size).max()
        && end > package.size()
    {
        return Err(invalid("ends before the data it indexes".into()));
    }
    Ok(ScannedPackage {
        package: package.clone(),
        entries,
        small,
    })
}

fn normalised_path<R: Read>(entry: &tar::Entry<'_, R>) -> Result<String, String> {
    Ok(entry
        .path()
        .map_err(|e| format!("tar entry with an unusable path: {e}"))?
        .to_string_lossy()
        .trim_start_matches("./")
        .trim_start_matches('/')
        .to_owned())
}

/// Keeps `index.json` and `oci-layout` files in memory.
fn read_small<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    path: &str,
    size: u64,
    small: &mut BTreeMap<String, Vec<u8>>,
) -> Result<(), String> {
    if !(path.ends_with("index.json") || path.ends_with("oci-layout")) {
        return Ok(());
    }
    if size > 64 << 20 {
        return Err(format!("{path} is implausibly large ({size} bytes)"));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    entry
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{path}: {e}"))?;
    small.insert(path.to_owned(), bytes);
    Ok(())
}

/// Hashes each file of a package front to back and compares it with the bundle manifest;
/// stops early (with `Ok`) once `cancelled` is set. `phase` counts bytes read.
pub fn hash_files(
    package: &Package,
    expected: &PackageManifest,
    phase: &Phase,
    cancelled: &std::sync::atomic::AtomicBool,
) -> Result<(), Error> {
    check_files(package, expected)?;
    let mut buf = vec![0u8; 1 << 20];
    for ((path, _), file) in package.parts.iter().zip(&expected.files) {
        let mut reader = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut hasher = oci::Hasher::new(oci::Algorithm::Sha256);
        loop {
            if cancelled.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(());
            }
            let n = reader.read(&mut buf).map_err(|e| Error::io(path, e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            phase.bytes(n as u64);
        }
        let actual = hasher.finish();
        if file.digest != actual.to_string() {
            return Err(Error::CorruptPackage {
                file: file_name(path),
                reason: format!(
                    "hashes to {actual}, the bundle manifest says {}",
                    file.digest
                ),
            });
        }
    }
    Ok(())
}

/// Reads and seeks across a package's files as one stream.
struct SeekReader<'a> {
    package: &'a Package,
    pos: u64,
    open: Option<(usize, File)>,
}

impl<'a> SeekReader<'a> {
    fn new(package: &'a Package) -> Self {
        Self {
            package,
            pos: 0,
            open: None,
        }
    }
}

impl Read for SeekReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut start = 0;
        for (index, (path, size)) in self.package.parts.iter().enumerate() {
            if self.pos >= start + size {
                start += size;
                continue;
            }
            if self.open.as_ref().is_none_or(|(i, _)| *i != index) {
                self.open = Some((index, File::open(path)?));
            }
            let Some((_, file)) = self.open.as_mut() else {
                return Ok(0);
            };
            let within = self.pos - start;
            let take = ((size - within) as usize).min(buf.len());
            file.seek(SeekFrom::Start(within))?;
            let n = file.read(&mut buf[..take])?;
            self.pos += n as u64;
            return Ok(n);
        }
        Ok(0)
    }
}

impl Seek for SeekReader<'_> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let total = self.package.size();
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            SeekFrom::End(d) => total.checked_add_signed(d),
        };
        self.pos = target
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))?;
        Ok(self.pos)
    }
}

/// Reads a package once, front to back: indexes its tar entries, checks every blob against the
/// digest it is named by and, when `expected` lists the package's files, each file's size and
/// sha256. `phase` counts bytes read.
pub fn scan(
    package: &Package,
    expected: Option<&PackageManifest>,
    phase: &Phase,
) -> Result<ScannedPackage, Error> {
    if let Some(expected) = expected {
        check_files(package, expected)?;
    }
    let reader = PartsReader::open(package, phase.clone())?;
    let mut archive = tar::Archive::new(reader);
    let mut entries = BTreeMap::new();
    let mut small = BTreeMap::new();
    let invalid = |reason: String| Error::InvalidBundle {
        file: package.display(),
        reason,
    };
    {
        let iter = archive
            .entries()
            .map_err(|e| invalid(format!("not a tar archive: {e}")))?;
        let mut buf = vec![0u8; 1 << 20];
        for entry in iter {
            let mut entry = entry.map_err(|e| invalid(format!("broken tar entry: {e}")))?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let path = entry
                .path()
                .map_err(|e| invalid(format!("tar entry with an unusable path: {e}")))?
                .to_string_lossy()
                .trim_start_matches("./")
                .trim_start_matches('/')
                .to_owned();
            let offset = entry.raw_file_position();
            let size = entry.size();
            if let Some(digest) = blob_digest_of(&path) {
                let mut verifier = digest.verifier();
                loop {
                    let n = entry
                        .read(&mut buf)
                        .map_err(|e| invalid(format!("{path}: {e}")))?;
                    if n == 0 {
                        break;
                    }
                    verifier.update(&buf[..n]);
                }
                verifier.finish().map_err(|m| Error::CorruptBlob {
                    package: package.display(),
                    path: path.clone(),
                    expected: m.expected.to_string(),
                    actual: m.actual.to_string(),
                })?;
            } else if path.ends_with("index.json") || path.ends_with("oci-layout") {
                if size > 64 << 20 {
                    return Err(invalid(format!(
                        "{path} is implausibly large ({size} bytes)"
                    )));
                }
                let mut bytes = Vec::with_capacity(size as usize);
                entry
                    .read_to_end(&mut bytes)
                    .map_err(|e| invalid(format!("{path}: {e}")))?;
                small.insert(path.clone(), bytes);
            }
            entries.insert(path, Entry { offset, size });
        }
    }
    // Read the rest (tar trailer and padding) so every file is hashed whole.
    let mut reader = archive.into_inner();
    io::copy(&mut reader, &mut io::sink()).map_err(|e| invalid(e.to_string()))?;
    let digests = reader.finish();
    if let Some(expected) = expected {
        for ((path, _), (file, actual)) in
            package.parts.iter().zip(expected.files.iter().zip(digests))
        {
            if file.digest != actual.to_string() {
                return Err(Error::CorruptPackage {
                    file: file_name(path),
                    reason: format!(
                        "hashes to {actual}, the bundle manifest says {}",
                        file.digest
                    ),
                });
            }
        }
    }
    Ok(ScannedPackage {
        package: package.clone(),
        entries,
        small,
    })
}

/// Reads the parts of a package in order, hashing each.
struct PartsReader {
    parts: Vec<PathBuf>,
    next: usize,
    current: Option<File>,
    hasher: Option<oci::Hasher>,
    digests: Vec<oci::Digest>,
    phase: Phase,
}

impl PartsReader {
    fn open(package: &Package, phase: Phase) -> Result<Self, Error> {
        let mut reader = Self {
            parts: package.parts.iter().map(|(p, _)| p.clone()).collect(),
            next: 0,
            current: None,
            hasher: None,
            digests: Vec::new(),
            phase,
        };
        reader.advance()?;
        Ok(reader)
    }

    fn advance(&mut self) -> Result<(), Error> {
        if let Some(hasher) = self.hasher.take() {
            self.digests.push(hasher.finish());
        }
        self.current = None;
        if let Some(path) = self.parts.get(self.next) {
            self.current = Some(File::open(path).map_err(|e| Error::io(path, e))?);
            self.hasher = Some(oci::Hasher::new(oci::Algorithm::Sha256));
            self.next += 1;
        }
        Ok(())
    }

    fn finish(mut self) -> Vec<oci::Digest> {
        if let Some(hasher) = self.hasher.take() {
            self.digests.push(hasher.finish());
        }
        self.digests
    }
}

impl Read for PartsReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(file) = self.current.as_mut() else {
                return Ok(0);
            };
            let n = file.read(buf)?;
            if n > 0 {
                if let Some(h) = self.hasher.as_mut() {
                    h.update(&buf[..n]);
                }
                self.phase.bytes(n as u64);
                return Ok(n);
            }
            self.advance().map_err(io::Error::other)?;
        }
    }
}

fn header(size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_size(size);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_entry_type(tar::EntryType::Regular);
    header
}

pub(crate) mod planned;

#[cfg(test)]
mod tests;
