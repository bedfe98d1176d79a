//! [`BlobWriter`]: a blob being written to a temporary file of the store.

use std::fs::{self, File};
use std::io::IoSlice;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use oci::{Digest, Hasher};

use super::{Store, create_dirs, fsync_dir, remember};
use crate::error::Error;

/// A blob being written: hashed as written, committed only when it verifies.
///
/// Dropped without [`commit`](Self::commit), the temporary file is removed and its reservation
/// released. [`file`](Self::file) gives concurrent readers the growing file (positional reads).
#[derive(Debug)]
pub struct BlobWriter {
    store: Store,
    file: Arc<File>,
    path: PathBuf,
    hasher: Option<Hasher>,
    len: u64,
    reserved: u64,
    committed: bool,
}

/// Writes all of `chunks` at `at`, in order, resuming after short writes.
fn write_all_at(file: &File, chunks: &[impl AsRef<[u8]>], mut at: u64) -> std::io::Result<()> {
    /// The most slices one `pwritev` takes (Linux's `IOV_MAX`).
    const IOV_MAX: usize = 1024;
    let mut slices: Vec<IoSlice<'_>> = chunks
        .iter()
        .map(|c| c.as_ref())
        .filter(|c| !c.is_empty())
        .map(IoSlice::new)
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let window = rest.len().min(IOV_MAX);
        match rustix::io::pwritev(file, &rest[..window], at) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(written) => {
                at += written as u64;
                IoSlice::advance_slices(&mut rest, written);
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Received chunks gathered for one write (a fill's, an upload's), kept as they arrived rather
/// than copied into one buffer: [`BlobWriter::write_batch`] writes them with one `pwritev`.
#[derive(Debug, Default)]
pub struct Batch {
    chunks: Vec<Bytes>,
    len: usize,
}

impl Batch {
    /// Bytes that fill a batch: large enough to amortise the blocking-pool hop of its write,
    /// small enough that a fill's readers see bytes promptly.
    pub const BYTES: usize = 1 << 20;
    /// Chunks that fill a batch, however small they are.
    const CHUNKS: usize = 256;

    /// Adds `chunk` (an empty one is dropped).
    pub fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.len += chunk.len();
            self.chunks.push(chunk);
        }
    }

    /// Bytes gathered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was gathered.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the batch should be written before more is received.
    pub fn is_full(&self) -> bool {
        self.len >= Self::BYTES || self.chunks.len() >= Self::CHUNKS
    }
}

/// Reservations for writes of unknown size grow by at least this much at a time.
const RESERVE_STEP: u64 = 8 << 20;

impl BlobWriter {
    pub(super) fn new(
        store: Store,
        file: File,
        path: PathBuf,
        hasher: Hasher,
        reserved: u64,
    ) -> Self {
        Self {
            store,
            file: Arc::new(file),
            path,
            hasher: Some(hasher),
            len: 0,
            reserved,
            committed: false,
        }
    }

    /// The file being written, for positional reads of the part already written.
    pub fn file(&self) -> Arc<File> {
        self.file.clone()
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `data`, reserving more room against the limits when needed.
    pub fn write(&mut self, data: &[u8]) -> Result<(), Error> {
        self.write_chunks(&[data])
    }

    /// Appends the chunks of `batch`, in order.
    pub fn write_batch(&mut self, batch: &Batch) -> Result<(), Error> {
        self.write_chunks(&batch.chunks)
    }

    /// Appends `chunks` in order with as few system calls as they allow (`pwritev`), reserving
    /// more room against the limits when needed.
    fn write_chunks(&mut self, chunks: &[impl AsRef<[u8]>]) -> Result<(), Error> {
        let size: u64 = chunks.iter().map(|c| c.as_ref().len() as u64).sum();
        let needed = (self.len + size).saturating_sub(self.reserved);
        if needed > 0 {
            let step = needed.max(RESERVE_STEP);
            if self.store.reserve_bytes(step).is_ok() {
                self.reserved += step;
            } else {
                self.store.reserve_bytes(needed)?;
                self.reserved += needed;
            }
        }
        write_all_at(&self.file, chunks, self.len)
            .map_err(|e| Error::io("write", &self.path, e))?;
        if let Some(h) = self.hasher.as_mut() {
            for chunk in chunks {
                h.update(chunk.as_ref());
            }
        }
        self.len += size;
        Ok(())
    }

    /// The digest of what was written so far (without committing).
    pub fn digest(&self) -> Option<Digest> {
        self.hasher.clone().map(Hasher::finish)
    }

    /// Verifies against `expected` (when given), syncs, and renames into place. Returns the
    /// digest. On a mismatch nothing is stored.
    pub fn commit(mut self, expected: Option<Digest>) -> Result<Digest, Error> {
        let actual = self.hasher.take().map(Hasher::finish).ok_or_else(|| {
            Error::Config("blob writer committed twice, or after a failed write".into())
        })?;
        if let Some(expected) = expected
            && expected != actual
        {
            return Err(oci::DigestMismatch { expected, actual }.into());
        }
        self.file
            .sync_all()
            .map_err(|e| Error::io("fsync", &self.path, e))?;
        let target = self.store.blob_path(&actual);
        let dir = target.parent().unwrap_or(self.store.root()).to_owned();
        create_dirs(&dir)?;
        let existed = {
            let mut used = self.store.uses();
            let existed = target.exists();
            fs::rename(&self.path, &target).map_err(|e| Error::io("rename", &target, e))?;
            remember(&mut used, actual);
            existed
        };
        self.committed = true;
        fsync_dir(&dir)?;
        let mut a = self.store.accounting();
        a.pending = a.pending.saturating_sub(self.reserved);
        self.reserved = 0;
        if !existed {
            a.used += self.len;
        }
        Ok(actual)
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.path);
        }
        if self.reserved > 0 {
            self.store.release(self.reserved);
        }
    }
}
