//! The content-addressed store on disk.
//!
//! ```text
//! <root>/blobs/<alg>/<xx>/<hex>                      committed content (blobs and manifests)
//! <root>/repositories/<repo>/_manifests/<alg>/<hex>  a manifest belongs to the repository (holds its media type)
//! <root>/repositories/<repo>/_tags/<tag>             the tag (holds the digest)
//! <root>/repositories/<repo>/_referrers/<alg>/<subject-hex>/<alg>-<hex>
//!                                                    a manifest naming that subject (holds its referrers descriptor)
//! <root>/tmp/                                        writes in progress
//! ```
//!
//! Every write goes to a file in `tmp/`, is hashed while written, is `fsync`ed, and only then is
//! renamed into place (and the directory `fsync`ed). A committed path therefore always holds
//! complete, verified content; a `kill -9` at any point leaves at most files in `tmp/`, which
//! [`Store::open`] removes. Order of commits: blob → repository link → tag, so a tag never points
//! at something missing. Repository names cannot contain a component starting with `_`, so the
//! `_manifests` and `_tags` directories never collide with a nested repository.
//!
//! **In use.** Garbage collection must never remove a blob a client is about to need. The store
//! remembers when each digest was last *used* — opened for reading, found present by an upload
//! (mount, the references of a pushed manifest), committed — and [`Store::delete_unused_blob`]
//! refuses to remove a digest used since the collection's cutoff. The check and the removal
//! happen under one lock that every use also takes, so a use either comes first (and the blob
//! stays) or finds the blob gone (and the client uploads it). A reader that opened the file
//! before its removal keeps reading it: unlinking does not disturb an open file.
//!
//! Blocking (std::fs): async callers run these in `spawn_blocking`.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use oci::{Algorithm, Digest, Hasher, Repository, Tag};
use registry_plan::budget::{self, Filesystem, Refusal};

use crate::error::Error;

/// Write limits: the `storage.size` budget and the filesystem reserve.
#[derive(Clone, Debug, Default)]
pub struct Limits {
    /// `storage.size` in bytes; `None` leaves the reserve as the only limit.
    pub budget: Option<u64>,
    /// The reserve in bytes; `None` computes it from the filesystem's capacity
    /// ([`budget::reserve`]).
    pub reserve: Option<u64>,
}

/// A snapshot of the store's use of its filesystem (`status.replicas[].store`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of committed content.
    pub used: u64,
    /// Bytes reserved by writes in progress.
    pub pending: u64,
    /// `storage.size`, if set.
    pub budget: Option<u64>,
    /// The reserve in force.
    pub reserve: u64,
    /// The filesystem.
    pub filesystem: Filesystem,
    /// Why writes are refused right now, if they are.
    pub refusal: Option<Refusal>,
}

/// What [`Store::verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Blobs that hash to their name.
    pub verified: u64,
    /// Blobs that did not, or whose name is not a digest; they were removed.
    pub removed: Vec<PathBuf>,
}

/// A manifest as stored: its exact bytes and media type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredManifest {
    /// The bytes, untouched.
    pub bytes: Vec<u8>,
    /// The media type it was stored with.
    pub media_type: String,
    /// Its digest.
    pub digest: Digest,
}

#[derive(Debug, Default)]
struct Accounting {
    used: u64,
    pending: u64,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    limits: Limits,
    accounting: Mutex<Accounting>,
    sequence: AtomicU64,
    /// When each digest was last used (see the module docs); guarded together with removals.
    used: Mutex<HashMap<Digest, Instant>>,
    /// When the store was opened and last collected (Unix seconds; 0 = never).
    started: u64,
    collected: AtomicU64,
    /// The exclusive lock on the data directory, held while the store is open for writing
    /// (`None` for [`Store::inspect`]).
    _lock: Option<File>,
}

/// The file a writing store holds an exclusive `flock` on.
const LOCK_FILE: &str = "lock";

/// Takes the data directory's lock: one writing process per store. A second one would remove
/// the first one's writes in progress as leftovers, and collect blobs it is serving.
fn lock(root: &Path) -> Result<File, Error> {
    let path = root.join(LOCK_FILE);
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io("open", &path, e))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(Error::Config(format!(
            "the store at {} is in use by another process (a running replica?): stop it first, \
             or use a read-only report such as a dry run",
            root.display()
        ))),
        Err(e) => Err(Error::io("lock", &path, e.into())),
    }
}

/// Uses older than this are forgotten once the table grows (they protect nothing: a
/// collection's cutoff is minutes, not an hour, before its start).
const USE_MEMORY: Duration = Duration::from_secs(3600);
const USE_TABLE_PRUNE_AT: usize = 16_384;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The store (cheap to clone).
#[derive(Clone, Debug)]
pub struct Store(Arc<Inner>);

fn alg_dir(algorithm: Algorithm) -> &'static str {
    algorithm.as_str()
}

fn fsync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync", dir, e))
}

fn create_dirs(dir: &Path) -> Result<(), Error> {
    fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))
}

fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        // No entropy source: unique enough with the pid and sequence next to it.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = nanos.to_be_bytes();
    }
    hex::encode(bytes)
}

/// A random identifier (upload sessions).
pub(crate) fn random_id() -> String {
    random_hex()
}

impl Store {
    /// Opens (creating if needed) the store at `root`: removes leftovers of interrupted writes
    /// and counts the committed bytes. Committed blobs are trusted here; [`verify`](Self::verify)
    /// re-hashes them.
    pub fn open(root: &Path, limits: Limits) -> Result<Self, Error> {
        Self::open_with(root, limits, true)
    }

    /// Opens an existing store without touching writes in progress (a replica may be running
    /// on it): for reports such as a garbage collection's dry run.
    pub fn inspect(root: &Path) -> Result<Self, Error> {
        if !root.join("blobs").is_dir() {
            return Err(Error::Config(format!(
                "{} is not a store (no blobs directory)",
                root.display()
            )));
        }
        Self::open_with(root, Limits::default(), false)
    }

    fn open_with(root: &Path, limits: Limits, clean: bool) -> Result<Self, Error> {
        for dir in ["blobs", "repositories", "tmp"] {
            create_dirs(&root.join(dir))?;
        }
        let lock = if clean { Some(lock(root)?) } else { None };
        let tmp = root.join("tmp");
        let mut leftovers = 0u32;
        let entries = if clean {
            fs::read_dir(&tmp)
                .map_err(|e| Error::io("read directory", &tmp, e))?
                .collect::<Vec<_>>()
        } else {
            Vec::new()
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("read directory", &tmp, e))?;
            let path = entry.path();
            let removed = if path.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            removed.map_err(|e| Error::io("remove leftover", &path, e))?;
            leftovers += 1;
        }
        let mut used = 0u64;
        walk_blobs(&root.join("blobs"), &mut |_, meta| used += meta.len())?;
        if leftovers > 0 {
            tracing::info!(leftovers, "removed interrupted writes");
        }
        Ok(Self(Arc::new(Inner {
            root: root.to_owned(),
            limits,
            accounting: Mutex::new(Accounting { used, pending: 0 }),
            sequence: AtomicU64::new(0),
            used: Mutex::default(),
            started: unix_now(),
            collected: AtomicU64::new(0),
            _lock: lock,
        })))
    }

    /// The data directory.
    pub fn root(&self) -> &Path {
        &self.0.root
    }

    /// Where a committed blob lives.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        let hex = digest.encoded();
        self.0
            .root
            .join("blobs")
            .join(alg_dir(digest.algorithm()))
            .join(&hex[..2])
            .join(hex)
    }

    /// The size of a committed blob, if present. A present blob counts as used: whoever asks
    /// is about to rely on it (an upload that skips it, a manifest that references it).
    pub fn blob_size(&self, digest: &Digest) -> Option<u64> {
        let mut used = self.uses();
        let len = self.blob_len(digest)?;
        remember(&mut used, *digest);
        Some(len)
    }

    /// The size of a committed blob, without counting a use (measuring, collecting).
    fn blob_len(&self, digest: &Digest) -> Option<u64> {
        fs::metadata(self.blob_path(digest)).ok().map(|m| m.len())
    }

    fn uses(&self) -> std::sync::MutexGuard<'_, HashMap<Digest, Instant>> {
        self.0.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a use of `digest` now (see the module docs).
    pub fn touch(&self, digest: &Digest) {
        remember(&mut self.uses(), *digest);
    }

    /// Whether `digest` was used at or after `cutoff`.
    pub fn used_since(&self, digest: &Digest, cutoff: Instant) -> bool {
        self.uses().get(digest).is_some_and(|at| *at >= cutoff)
    }

    /// Removes a committed blob unless it was used at or after `cutoff`: `Some(bytes freed)`
    /// when removed, `None` when in use or already gone.
    pub fn delete_unused_blob(
        &self,
        digest: &Digest,
        cutoff: Instant,
    ) -> Result<Option<u64>, Error> {
        let used = self.uses();
        if used.get(digest).is_some_and(|at| *at >= cutoff) {
            return Ok(None);
        }
        let path = self.blob_path(digest);
        let len = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("stat", &path, e)),
        };
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("remove", &path, e)),
        }
        drop(used);
        let mut a = self.accounting();
        a.used = a.used.saturating_sub(len);
        Ok(Some(len))
    }

    /// When the store was opened (Unix seconds).
    pub fn started_at(&self) -> u64 {
        self.0.started
    }

    /// When the last garbage collection finished (Unix seconds), if one did since the start.
    pub fn collected_at(&self) -> Option<u64> {
        match self.0.collected.load(Ordering::Relaxed) {
            0 => None,
            at => Some(at),
        }
    }

    /// Records a finished collection.
    pub(crate) fn set_collected_now(&self) {
        self.0.collected.store(unix_now(), Ordering::Relaxed);
    }

    /// Opens a committed blob for reading (a use, see the module docs).
    pub fn open_blob(&self, digest: &Digest) -> Result<Option<(File, u64)>, Error> {
        let opened = self.open_blob_quietly(digest)?;
        if opened.is_some() {
            self.touch(digest);
        }
        Ok(opened)
    }

    fn open_blob_quietly(&self, digest: &Digest) -> Result<Option<(File, u64)>, Error> {
        let path = self.blob_path(digest);
        match File::open(&path) {
            Ok(file) => {
                let len = file
                    .metadata()
                    .map_err(|e| Error::io("stat", &path, e))?
                    .len();
                Ok(Some((file, len)))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("open", &path, e)),
        }
    }

    /// Reads a whole committed blob (manifests, configs: small content).
    pub fn read_blob(&self, digest: &Digest, limit: u64) -> Result<Option<Vec<u8>>, Error> {
        let Some((file, len)) = self.open_blob_quietly(digest)? else {
            return Ok(None);
        };
        if len > limit {
            return Err(Error::SizeMismatch {
                expected: limit,
                actual: len,
            });
        }
        let mut bytes = Vec::with_capacity(len as usize);
        file.take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("read", self.blob_path(digest), e))?;
        Ok(Some(bytes))
    }

    /// Removes a committed blob (garbage collection); returns whether it existed.
    pub fn delete_blob(&self, digest: &Digest) -> Result<bool, Error> {
        let path = self.blob_path(digest);
        let len = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io("stat", &path, e)),
        };
        match fs::remove_file(&path) {
            Ok(()) => {
                let mut a = self.accounting();
                a.used = a.used.saturating_sub(len);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("remove", &path, e)),
        }
    }

    fn accounting(&self) -> std::sync::MutexGuard<'_, Accounting> {
        self.0.accounting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn filesystem(&self) -> Result<Filesystem, Error> {
        let s = rustix::fs::statvfs(&self.0.root)
            .map_err(|e| Error::io("statfs", &self.0.root, e.into()))?;
        Ok(Filesystem {
            capacity: s.f_blocks.saturating_mul(s.f_frsize),
            free: s.f_bavail.saturating_mul(s.f_frsize),
        })
    }

    fn reserve(&self, fs: Filesystem) -> u64 {
        self.0
            .limits
            .reserve
            .unwrap_or_else(|| budget::reserve(fs.capacity))
    }

    /// The store's use of its filesystem now.
    pub fn usage(&self) -> Result<Usage, Error> {
        let fs = self.filesystem()?;
        let reserve = self.reserve(fs);
        let (used, pending) = {
            let a = self.accounting();
            (a.used, a.pending)
        };
        let refusal = budget::admit(
            used + pending,
            self.0.limits.budget,
            reserve,
            Filesystem {
                free: fs.free.saturating_sub(pending),
                ..fs
            },
            1,
        )
        .err();
        Ok(Usage {
            used,
            pending,
            budget: self.0.limits.budget,
            reserve,
            filesystem: fs,
            refusal,
        })
    }

    /// Reserves `incoming` bytes for a write, or refuses it with the limit that stops it.
    fn reserve_bytes(&self, incoming: u64) -> Result<(), Error> {
        let fs = self.filesystem()?;
        let reserve = self.reserve(fs);
        let mut a = self.accounting();
        let effective = Filesystem {
            free: fs.free.saturating_sub(a.pending),
            ..fs
        };
        match budget::admit(
            a.used + a.pending,
            self.0.limits.budget,
            reserve,
            effective,
            incoming,
        ) {
            Ok(()) => {
                a.pending += incoming;
                Ok(())
            }
            Err(refusal) => {
                let detail = match refusal {
                    Refusal::BudgetExhausted => format!(
                        "writing {incoming} more bytes would exceed storage.size ({} bytes; {} used)",
                        self.0.limits.budget.unwrap_or_default(),
                        a.used + a.pending
                    ),
                    Refusal::ReserveExhausted => format!(
                        "writing {incoming} more bytes would leave less than the reserve of {reserve} bytes free on the filesystem ({} bytes free)",
                        effective.free
                    ),
                };
                Err(Error::Refused { refusal, detail })
            }
        }
    }

    fn release(&self, bytes: u64) {
        let mut a = self.accounting();
        a.pending = a.pending.saturating_sub(bytes);
    }

    fn temp_path(&self, kind: &str) -> PathBuf {
        let n = self.0.sequence.fetch_add(1, Ordering::Relaxed);
        self.0.root.join("tmp").join(format!(
            "{kind}-{}-{n}-{}",
            std::process::id(),
            random_hex()
        ))
    }

    /// Starts writing a blob hashed with `algorithm`. With `size`, the whole size is reserved
    /// against the limits up front (so a fill that cannot fit is refused before it starts).
    pub fn writer(&self, algorithm: Algorithm, size: Option<u64>) -> Result<BlobWriter, Error> {
        let reserved = size.unwrap_or(0);
        self.reserve_bytes(reserved)?;
        let path = self.temp_path("blob");
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path);
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                self.release(reserved);
                return Err(Error::io("create", &path, e));
            }
        };
        Ok(BlobWriter::new(
            self.clone(),
            file,
            path,
            Hasher::new(algorithm),
            reserved,
        ))
    }

    /// Writes small content (a manifest) in one go, verified against `expected` when given.
    pub fn put_bytes(&self, bytes: &[u8], expected: Option<Digest>) -> Result<Digest, Error> {
        let algorithm = expected.map_or(Algorithm::Sha256, |d| d.algorithm());
        let actual = Digest::compute(algorithm, bytes);
        if let Some(expected) = expected
            && expected != actual
        {
            return Err(oci::DigestMismatch { expected, actual }.into());
        }
        if self.blob_size(&actual).is_some() {
            return Ok(actual);
        }
        let mut writer = self.writer(algorithm, Some(bytes.len() as u64))?;
        writer.write(bytes)?;
        writer.commit(Some(actual))
    }

    fn repo_dir(&self, repository: &Repository) -> PathBuf {
        let mut dir = self.0.root.join("repositories");
        for c in repository.components() {
            dir.push(c);
        }
        dir
    }

    fn manifest_link(&self, repository: &Repository, digest: &Digest) -> PathBuf {
        self.repo_dir(repository)
            .join("_manifests")
            .join(alg_dir(digest.algorithm()))
            .join(digest.encoded())
    }

    fn referrers_dir(&self, repository: &Repository, subject: &Digest) -> PathBuf {
        self.repo_dir(repository)
            .join("_referrers")
            .join(alg_dir(subject.algorithm()))
            .join(subject.encoded())
    }

    fn tag_path(&self, repository: &Repository, tag: &Tag) -> PathBuf {
        self.repo_dir(repository).join("_tags").join(tag.as_str())
    }

    /// Writes a small file atomically: temp, fsync, rename, fsync the directory.
    fn write_atomic(&self, path: &Path, content: &[u8]) -> Result<(), Error> {
        let dir = path.parent().unwrap_or(&self.0.root);
        create_dirs(dir)?;
        let tmp = self.temp_path("meta");
        let result = (|| {
            let file = File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
            file.write_all_at(content, 0)
                .and_then(|()| file.sync_all())
                .map_err(|e| Error::io("write", &tmp, e))?;
            fs::rename(&tmp, path).map_err(|e| Error::io("rename", path, e))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result?;
        fsync_dir(dir)
    }

    /// Stores a manifest's exact bytes in `repository`, verified against `expected` when given,
    /// and points `tag` at it. Returns its digest.
    pub fn put_manifest(
        &self,
        repository: &Repository,
        bytes: &[u8],
        media_type: &str,
        expected: Option<Digest>,
        tag: Option<&Tag>,
    ) -> Result<Digest, Error> {
        let digest = self.put_bytes(bytes, expected)?;
        self.write_atomic(
            &self.manifest_link(repository, &digest),
            media_type.as_bytes(),
        )?;
        // Indexed for the referrers API before the tag, so a tagged referrer is always listed.
        if let Ok(manifest) = oci::Manifest::parse(bytes.to_vec(), Some(media_type))
            && let Some(subject) = manifest.subject()
        {
            let descriptor = serde_json::to_vec(&manifest.referrer_descriptor())
                .map_err(|e| Error::io("encode", "referrer descriptor", io::Error::other(e)))?;
            let entry = self
                .referrers_dir(repository, &subject.digest)
                .join(format!(
                    "{}-{}",
                    alg_dir(digest.algorithm()),
                    digest.encoded()
                ));
            self.write_atomic(&entry, &descriptor)?;
        }
        if let Some(tag) = tag {
            self.set_tag(repository, tag, &digest)?;
        }
        Ok(digest)
    }

    /// Points `tag` at `digest`.
    pub fn set_tag(
        &self,
        repository: &Repository,
        tag: &Tag,
        digest: &Digest,
    ) -> Result<(), Error> {
        self.write_atomic(
            &self.tag_path(repository, tag),
            digest.to_string().as_bytes(),
        )
    }

    /// What `tag` points at.
    pub fn tag(&self, repository: &Repository, tag: &Tag) -> Option<Digest> {
        let text = fs::read_to_string(self.tag_path(repository, tag)).ok()?;
        Digest::parse(text.trim()).ok()
    }

    /// A manifest of `repository`, if it belongs to it and its content is present.
    pub fn manifest(
        &self,
        repository: &Repository,
        digest: &Digest,
    ) -> Result<Option<StoredManifest>, Error> {
        let Ok(media_type) = fs::read_to_string(self.manifest_link(repository, digest)) else {
            return Ok(None);
        };
        let Some(bytes) = self.read_blob(digest, oci::manifest::MANIFEST_MAX_LEN as u64)? else {
            return Ok(None);
        };
        self.touch(digest);
        Ok(Some(StoredManifest {
            bytes,
            media_type,
            digest: *digest,
        }))
    }

    /// The referrers descriptors of the manifests of `repository` whose `subject` is `subject`,
    /// sorted by digest. A manifest deleted since it was indexed is left out (and its entry
    /// removed).
    pub fn referrers(
        &self,
        repository: &Repository,
        subject: &Digest,
    ) -> Result<Vec<oci::Descriptor>, Error> {
        let dir = self.referrers_dir(repository, subject);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("read directory", &dir, e)),
        };
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
            let path = entry.path();
            let Ok(bytes) = fs::read(&path) else { continue };
            let Ok(descriptor) = serde_json::from_slice::<oci::Descriptor>(&bytes) else {
                continue;
            };
            if self.has_manifest(repository, &descriptor.digest) {
                found.push(descriptor);
            } else {
                let _ = fs::remove_file(&path);
            }
        }
        found.sort_by_cached_key(|d| d.digest.to_string());
        Ok(found)
    }

    /// Whether `repository` holds manifest `digest`.
    pub fn has_manifest(&self, repository: &Repository, digest: &Digest) -> bool {
        self.manifest_link(repository, digest).exists() && self.blob_size(digest).is_some()
    }

    /// Removes a tag; returns whether it existed.
    pub fn delete_tag(&self, repository: &Repository, tag: &Tag) -> Result<bool, Error> {
        let path = self.tag_path(repository, tag);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("remove", &path, e)),
        }
    }

    /// Removes a manifest from `repository` and every tag pointing at it; returns whether it
    /// belonged to the repository. The content stays until garbage collection.
    pub fn delete_manifest(&self, repository: &Repository, digest: &Digest) -> Result<bool, Error> {
        let link = self.manifest_link(repository, digest);
        let existed = match fs::remove_file(&link) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(Error::io("remove", &link, e)),
        };
        for tag in self.tags(repository)?.unwrap_or_default() {
            if let Ok(tag) = Tag::parse(&tag)
                && self.tag(repository, &tag) == Some(*digest)
            {
                self.delete_tag(repository, &tag)?;
            }
        }
        Ok(existed)
    }

    /// The tags of `repository`, unsorted; `None` if the repository is unknown.
    pub fn tags(&self, repository: &Repository) -> Result<Option<Vec<String>>, Error> {
        let repo = self.repo_dir(repository);
        if !repo.is_dir() {
            return Ok(None);
        }
        let dir = repo.join("_tags");
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Some(Vec::new())),
            Err(e) => return Err(Error::io("read directory", &dir, e)),
        };
        let mut tags = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                tags.push(name.to_owned());
            }
        }
        Ok(Some(tags))
    }

    /// Counts the expected set on this replica's own disk (never through the upstream): a
    /// digest counts when its content is committed here, a tag when `repository` resolves it to
    /// committed content; `deployed` must resolve for the replica to be full.
    pub fn completeness(
        &self,
        repository: &Repository,
        set: &registry_plan::expected::ExpectedSet,
        deployed: Option<&Tag>,
    ) -> registry_plan::expected::Completeness {
        let held = |d: &str| {
            Digest::parse(d)
                .ok()
                .is_some_and(|d| self.blob_len(&d).is_some())
        };
        let resolve = |t: &str| {
            Tag::parse(t)
                .ok()
                .and_then(|t| self.tag(repository, &t))
                .map(|d| d.to_string())
        };
        let deployed_resolvable = deployed.is_none_or(|t| {
            self.tag(repository, t).is_some_and(|d| {
                self.manifest_link(repository, &d).exists() && self.blob_len(&d).is_some()
            })
        });
        registry_plan::expected::completeness(set, held, resolve, deployed_resolvable)
    }

    /// The digests of every committed blob.
    pub fn blobs(&self) -> Result<Vec<Digest>, Error> {
        let mut out = Vec::new();
        walk_blobs(&self.0.root.join("blobs"), &mut |path, _| {
            if let Some(d) = digest_of_path(path) {
                out.push(d);
            }
        })?;
        Ok(out)
    }

    /// Re-hashes every committed blob and removes those that do not hash to their name.
    pub fn verify(&self) -> Result<VerifyReport, Error> {
        let mut paths = Vec::new();
        walk_blobs(&self.0.root.join("blobs"), &mut |path, _| {
            paths.push(path.to_owned());
        })?;
        let mut report = VerifyReport::default();
        for path in paths {
            let ok = match digest_of_path(&path) {
                Some(expected) => {
                    hash_file(&path, expected.algorithm())
                        .map_err(|e| Error::io("read", &path, e))?
                        == expected
                }
                None => false,
            };
            if ok {
                report.verified += 1;
            } else {
                tracing::error!(path = %path.display(), "corrupt blob removed");
                let len = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
                let mut a = self.accounting();
                a.used = a.used.saturating_sub(len);
                report.removed.push(path);
            }
        }
        Ok(report)
    }
}

fn remember(used: &mut HashMap<Digest, Instant>, digest: Digest) {
    let now = Instant::now();
    if used.len() >= USE_TABLE_PRUNE_AT {
        used.retain(|_, at| now.duration_since(*at) < USE_MEMORY);
    }
    used.insert(digest, now);
}

fn hash_file(path: &Path, algorithm: Algorithm) -> io::Result<Digest> {
    let mut file = File::open(path)?;
    let mut hasher = Hasher::new(algorithm);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(hasher.finish());
        }
        hasher.update(&buf[..n]);
    }
}

fn digest_of_path(path: &Path) -> Option<Digest> {
    let hex = path.file_name()?.to_str()?;
    let alg = path.parent()?.parent()?.file_name()?.to_str()?;
    Digest::parse(&format!("{alg}:{hex}")).ok()
}

fn walk_blobs(dir: &Path, f: &mut dyn FnMut(&Path, &fs::Metadata)) -> Result<(), Error> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("read directory", dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let path = entry.path();
        let meta = entry.metadata().map_err(|e| Error::io("stat", &path, e))?;
        if meta.is_dir() {
            walk_blobs(&path, f)?;
        } else {
            f(&path, &meta);
        }
    }
    Ok(())
}

mod writer;
pub use writer::{Batch, BlobWriter};

#[cfg(test)]
mod tests;
