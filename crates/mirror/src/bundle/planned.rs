//! A package laid out before any of its bytes arrive: every tar entry's header, data offset and
//! padding are known from the sizes alone, so blobs can be written straight into their place in
//! the package files (each chunk a file) in any order, while the files' sha256 is computed in
//! order behind them.
//!
//! The bytes are exactly those `tar::Builder` writes for the same entries (GNU headers, mode
//! 0644, mtime 0, long names as GNU extension entries, a 1024-byte trailer), so the bundle
//! format does not depend on how it was written.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;

use super::{FileEntry, chunk_name, header};

/// What goes into one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Content {
    /// Small contents known now (`index.json`, `oci-layout`).
    Bytes(Vec<u8>),
    /// A blob that arrives later.
    Blob {
        /// Its digest.
        digest: oci::Digest,
        /// Its size.
        size: u64,
    },
}

impl Content {
    fn size(&self) -> u64 {
        match self {
            Self::Bytes(bytes) => bytes.len() as u64,
            Self::Blob { size, .. } => *size,
        }
    }
}

/// One entry in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placed {
    /// Its path in the tar.
    pub path: String,
    /// Where its header starts in the package stream.
    pub start: u64,
    /// Its header bytes (with any long-name extension entry).
    pub header: Vec<u8>,
    /// Where its data starts.
    pub data: u64,
    /// What it holds.
    pub content: Content,
    /// Where the next entry starts (after the data's padding to 512 bytes).
    pub end: u64,
}

/// A package laid out: its entries in tar order and its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// `platform`, `module-foo`.
    pub package: String,
    /// The entries in path order.
    pub entries: Vec<Placed>,
    /// Size of the whole stream (trailer included).
    pub total: u64,
    /// The files: name and size (one tar, or its chunks in order).
    pub files: Vec<(String, u64)>,
}

/// Lays out `package` with `entries` (in path order), split into files of at most `chunk`
/// bytes.
pub(crate) fn plan(
    package: &str,
    entries: BTreeMap<String, Content>,
    chunk: Option<u64>,
) -> io::Result<Plan> {
    let mut placed = Vec::with_capacity(entries.len());
    let mut at = 0u64;
    for (path, content) in entries {
        let size = content.size();
        let mut builder = tar::Builder::new(Vec::new());
        builder.append_data(&mut header(size), &path, io::empty())?;
        let header_bytes = builder.get_ref().clone();
        drop(builder);
        let data = at + header_bytes.len() as u64;
        let end = data + size.div_ceil(512) * 512;
        placed.push(Placed {
            path,
            start: at,
            header: header_bytes,
            data,
            content,
            end,
        });
        at = end;
    }
    let total = at + 1024;
    let files = match chunk.filter(|c| *c > 0) {
        None => vec![(format!("{package}.tar"), total)],
        Some(chunk) => (0..total.div_ceil(chunk))
            .map(|i| {
                let size = chunk.min(total - i * chunk);
                (chunk_name(package, i as usize), size)
            })
            .collect(),
    };
    Ok(Plan {
        package: package.to_owned(),
        entries: placed,
        total,
        files,
    })
}

impl Plan {
    /// A fingerprint of the layout: an interrupted pull's files are reused only for the same
    /// layout.
    pub(crate) fn fingerprint(&self) -> String {
        let mut hasher = oci::Hasher::new(oci::Algorithm::Sha256);
        for (name, size) in &self.files {
            hasher.update(format!("file {name} {size}\n").as_bytes());
        }
        for entry in &self.entries {
            let what = match &entry.content {
                Content::Bytes(bytes) => oci::Digest::sha256(bytes),
                Content::Blob { digest, .. } => *digest,
            };
            hasher.update(format!("{} {} {what}\n", entry.path, entry.data).as_bytes());
        }
        hasher.finish().encoded()
    }
}

/// The files of a package being written, under temporary names; written and read at offsets
/// of the package stream.
#[derive(Debug)]
pub(crate) struct Files {
    dir: PathBuf,
    /// Each file: handle, temporary path, final name, start in the stream, size.
    files: Vec<(File, PathBuf, String, u64, u64)>,
}

/// The temporary name of a package file.
pub(crate) fn partial_name(name: &str) -> String {
    format!(".{name}.partial")
}

impl Files {
    /// Opens the files of `plan` in `dir`; `keep` keeps what an earlier run wrote in them
    /// (when they have the planned sizes), else they start empty. Returns whether they were
    /// kept.
    pub(crate) fn open(dir: &Path, plan: &Plan, keep: bool) -> io::Result<(Self, bool)> {
        let keep = keep
            && plan.files.iter().all(|(name, size)| {
                std::fs::metadata(dir.join(partial_name(name))).is_ok_and(|m| m.len() == *size)
            });
        let mut files = Vec::new();
        let mut start = 0;
        for (name, size) in &plan.files {
            let temp = dir.join(partial_name(name));
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(!keep)
                .open(&temp)?;
            file.set_len(*size)?;
            files.push((file, temp, name.clone(), start, *size));
            start += size;
        }
        Ok((
            Self {
                dir: dir.to_owned(),
                files,
            },
            keep,
        ))
    }

    /// Calls `f` with each (file, offset in it, range of `len` bytes) covering `len` bytes at
    /// `offset` of the stream.
    fn each(
        &self,
        mut offset: u64,
        len: usize,
        mut f: impl FnMut(&File, u64, std::ops::Range<usize>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut done = 0;
        for (file, _, _, start, size) in &self.files {
            if done == len {
                break;
            }
            let end = start + size;
            if offset >= end {
                continue;
            }
            let take = ((end - offset) as usize).min(len - done);
            f(file, offset - start, done..done + take)?;
            done += take;
            offset += take as u64;
        }
        if done < len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "write past the end of the package",
            ));
        }
        Ok(())
    }

    /// Writes `bytes` at `offset` of the stream.
    pub(crate) fn write_at(&self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.each(offset, bytes.len(), |file, at, range| {
            file.write_all_at(&bytes[range], at)
        })
    }

    /// Writes `chunks` one after another from `offset` of the stream.
    pub(crate) fn write_chunks(&self, mut offset: u64, chunks: &[bytes::Bytes]) -> io::Result<()> {
        for chunk in chunks {
            self.write_at(offset, chunk)?;
            offset += chunk.len() as u64;
        }
        Ok(())
    }

    /// Flushes every file to disk.
    pub(crate) fn sync(&self) -> io::Result<()> {
        for (file, ..) in &self.files {
            file.sync_all()?;
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes at `offset` of the stream.
    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.each(offset, buf.len(), |file, at, range| {
            file.read_exact_at(&mut buf[range], at)
        })
    }

    /// Copies `len` bytes at `from` of `source` to `to` of this package.
    pub(crate) fn copy_from(&self, source: &Files, from: u64, to: u64, len: u64) -> io::Result<()> {
        let mut buf = vec![0u8; (len as usize).min(COPY_BUFFER)];
        let mut done = 0;
        while done < len {
            let n = ((len - done) as usize).min(buf.len());
            source.read_at(from + done, &mut buf[..n])?;
            self.write_at(to + done, &buf[..n])?;
            done += n as u64;
        }
        Ok(())
    }

    /// Whether `len` bytes at `offset` hash to `digest`.
    pub(crate) fn hashes_to(&self, offset: u64, len: u64, digest: oci::Digest) -> bool {
        let mut verifier = digest.verifier();
        let mut buf = vec![0u8; (len as usize).min(COPY_BUFFER)];
        let mut done = 0;
        while done < len {
            let n = ((len - done) as usize).min(buf.len());
            if self.read_at(offset + done, &mut buf[..n]).is_err() {
                return false;
            }
            verifier.update(&buf[..n]);
            done += n as u64;
        }
        verifier.finish().is_ok()
    }

    /// Writes the headers, the small contents and the padding of every entry, and the trailer.
    pub(crate) fn write_frame(&self, plan: &Plan) -> io::Result<()> {
        let mut run = Vec::new();
        let mut run_start = 0;
        for entry in &plan.entries {
            // The previous entry's padding and this header are one contiguous run.
            run.extend_from_slice(&entry.header);
            if let Content::Bytes(bytes) = &entry.content {
                run.extend_from_slice(bytes);
                run.resize((entry.end - run_start) as usize, 0);
                continue;
            }
            self.write_at(run_start, &run)?;
            let size = entry.content.size();
            let data_end = entry.data + size;
            run.clear();
            run.resize((entry.end - data_end) as usize, 0);
            run_start = data_end;
        }
        run.resize(run.len() + 1024, 0);
        self.write_at(run_start, &run)
    }

    /// Renames every file (flushed by [`sync`](Self::sync)) to its final name and returns the
    /// bundle manifest's entries for them, given their digests in order.
    pub(crate) fn finish(self, digests: Vec<oci::Digest>) -> io::Result<Vec<FileEntry>> {
        let mut out = Vec::new();
        for ((file, temp, name, _, size), digest) in self.files.into_iter().zip(digests) {
            drop(file);
            std::fs::rename(&temp, self.dir.join(&name))?;
            out.push(FileEntry {
                name,
                size,
                digest: digest.to_string(),
            });
        }
        Ok(out)
    }

    /// Hashes each file front to back, entry by entry as `done` announces them (indexes into
    /// `plan.entries`; `ready` lists those complete from the start). Returns the files' digests;
    /// `None` when `done` closed before every entry was announced (the pull failed).
    pub(crate) fn hash_in_order(
        &self,
        plan: &Plan,
        mut ready: Vec<bool>,
        done: &Receiver<usize>,
    ) -> io::Result<Option<Vec<oci::Digest>>> {
        let mut hashing = InOrder::new(self);
        for (index, entry) in plan.entries.iter().enumerate() {
            while !ready[index] {
                match done.recv() {
                    Ok(i) => ready[i] = true,
                    Err(_) => return Ok(None),
                }
            }
            hashing.to(entry.end)?;
        }
        hashing.to(plan.total)?;
        Ok(Some(hashing.finish()))
    }
}

const COPY_BUFFER: usize = 1 << 20;

/// Hashed bytes after which the hasher flushes what is behind it: the kernel would otherwise
/// keep a whole package dirty in memory until the fsync at the end, and the pull would wait
/// for all of it there (a 2 GiB package: 1.06 s of a 5.3 s pull).
const FLUSH_EVERY: u64 = 128 << 20;

/// Hashes the files of a package in stream order, flushing to disk behind itself.
struct InOrder<'a> {
    files: &'a Files,
    at: u64,
    /// Where the last flush was (stream offset).
    flushed: u64,
    current: usize,
    hasher: oci::Hasher,
    digests: Vec<oci::Digest>,
    buf: Vec<u8>,
}

impl<'a> InOrder<'a> {
    fn new(files: &'a Files) -> Self {
        Self {
            files,
            at: 0,
            flushed: 0,
            current: 0,
            hasher: oci::Hasher::new(oci::Algorithm::Sha256),
            digests: Vec::new(),
            buf: vec![0u8; COPY_BUFFER],
        }
    }

    /// Hashes up to `end` of the stream.
    fn to(&mut self, end: u64) -> io::Result<()> {
        while self.at < end {
            let (_, _, _, start, size) = &self.files.files[self.current];
            let file_end = start + size;
            let n = ((end.min(file_end) - self.at) as usize).min(self.buf.len());
            self.files.read_at(self.at, &mut self.buf[..n])?;
            self.hasher.update(&self.buf[..n]);
            self.at += n as u64;
            if self.at - self.flushed >= FLUSH_EVERY {
                self.files.files[self.current].0.sync_data()?;
                self.flushed = self.at;
            }
            if self.at == file_end && self.current + 1 < self.files.files.len() {
                let hasher =
                    std::mem::replace(&mut self.hasher, oci::Hasher::new(oci::Algorithm::Sha256));
                self.digests.push(hasher.finish());
                self.current += 1;
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Vec<oci::Digest> {
        self.digests.push(self.hasher.finish());
        self.digests
    }
}

#[cfg(test)]
mod tests;
