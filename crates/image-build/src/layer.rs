//! One [`Rootfs`] written as a layer: a deterministic tar, gzip-compressed, hashed on the way
//! (the tar's digest is the config's `diff_id`, the gzip's the layer's digest).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::Error;
use crate::rootfs::{Entry, Rootfs, Source};
use flate2::Compression;

/// The layer media type.
pub const MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// A written layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    /// What the layer holds (the config's history says it).
    pub name: String,
    /// Digest of the compressed bytes.
    pub digest: oci::Digest,
    /// Digest of the uncompressed tar.
    pub diff_id: oci::Digest,
    /// Compressed size.
    pub size: u64,
}

/// A writer that hashes what passes through.
struct Hashing<W> {
    inner: W,
    hasher: oci::Hasher,
    written: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W> Hashing<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: oci::Hasher::new(oci::Algorithm::Sha256),
            written: 0,
        }
    }
    fn finish(self) -> (W, oci::Digest, u64) {
        (self.inner, self.hasher.finish(), self.written)
    }
}

/// Writes `fs` as a layer into `path` (the caller renames it to its digest). Every entry has
/// owner 0:0, mtime `mtime`, no user or group names; gzip's header has no time and no name, and
/// the compression level is fixed.
pub fn write(name: &str, fs: &Rootfs, mtime: u64, path: &Path) -> Result<Layer, Error> {
    let write_err = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = File::create(path).map_err(write_err)?;
    let compressed = Hashing::new(BufWriter::new(file));
    let gzip = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(compressed, Compression::new(6));
    let mut tar = tar::Builder::new(Hashing::new(gzip));
    for (entry_path, entry) in fs.entries() {
        append(&mut tar, entry_path, entry, mtime)?;
    }
    let (gzip, diff_id, _) = tar.into_inner().map_err(write_err)?.finish();
    let (mut file, digest, size) = gzip.finish().map_err(write_err)?.finish();
    file.flush().map_err(write_err)?;
    Ok(Layer {
        name: name.to_string(),
        digest,
        diff_id,
        size,
    })
}

fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    entry: &Entry,
    mtime: u64,
) -> Result<(), Error> {
    let mut header = tar::Header::new_gnu();
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(mtime);
    let io_err = |source| Error::Write {
        path: PathBuf::from(path),
        source,
    };
    match entry {
        Entry::Dir { mode } => {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(*mode);
            header.set_size(0);
            tar.append_data(&mut header, format!("{path}/"), io::empty())
                .map_err(io_err)
        }
        Entry::Symlink { target } => {
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_mode(0o777);
            header.set_size(0);
            tar.append_link(&mut header, path, target).map_err(io_err)
        }
        Entry::File { mode, source } => {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(*mode);
            match source {
                Source::Bytes(bytes) => {
                    header.set_size(bytes.len() as u64);
                    tar.append_data(&mut header, path, bytes.as_slice())
                        .map_err(io_err)
                }
                Source::Host(host) => {
                    let read_err = |source| Error::Read {
                        path: host.clone(),
                        source,
                    };
                    let file = File::open(host).map_err(read_err)?;
                    header.set_size(file.metadata().map_err(read_err)?.len());
                    tar.append_data(&mut header, path, file).map_err(io_err)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(order: &[(&str, &str)]) -> Rootfs {
        let mut fs = Rootfs::new();
        for (path, content) in order {
            fs.file(path, 0o644, *content).unwrap();
        }
        fs
    }

    #[test]
    fn same_files_give_the_same_digest_and_content_changes_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(
            "a",
            &sample(&[("/a", "1"), ("/b/c", "2")]),
            0,
            &dir.path().join("a"),
        )
        .unwrap();
        let b = write(
            "a",
            &sample(&[("/b/c", "2"), ("/a", "1")]),
            0,
            &dir.path().join("b"),
        )
        .unwrap();
        assert_eq!(a, b);
        let c = write(
            "a",
            &sample(&[("/a", "1"), ("/b/c", "3")]),
            0,
            &dir.path().join("c"),
        )
        .unwrap();
        assert_ne!(a.digest, c.digest);
        let d = write(
            "a",
            &sample(&[("/a", "1"), ("/b/c", "2")]),
            1,
            &dir.path().join("d"),
        )
        .unwrap();
        assert_ne!(a.diff_id, d.diff_id, "mtime is part of the layer");
    }

    #[test]
    fn the_layer_unpacks_with_owners_modes_and_contents() {
        let dir = tempfile::tempdir().unwrap();
        let mut fs = Rootfs::base(&crate::User::nonroot());
        fs.file("/usr/bin/tool", 0o755, "#!x").unwrap();
        fs.add(
            "/lib64/ld.so",
            Entry::Symlink {
                target: "/lib/ld.so".into(),
            },
        )
        .unwrap();
        let layer = write("base", &fs, 0, &dir.path().join("layer")).unwrap();
        let bytes = std::fs::read(dir.path().join("layer")).unwrap();
        assert_eq!(layer.size, bytes.len() as u64);
        assert_eq!(
            layer.digest,
            oci::Digest::compute(oci::Algorithm::Sha256, &bytes)
        );
        let mut tar = Vec::new();
        io::copy(
            &mut flate2::read::GzDecoder::new(bytes.as_slice()),
            &mut tar,
        )
        .unwrap();
        assert_eq!(
            layer.diff_id,
            oci::Digest::compute(oci::Algorithm::Sha256, &tar)
        );
        let mut archive = tar::Archive::new(tar.as_slice());
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let entry = entry.unwrap();
            let h = entry.header();
            assert_eq!(
                (h.uid().unwrap(), h.gid().unwrap(), h.mtime().unwrap()),
                (0, 0, 0)
            );
            seen.push((
                entry.path().unwrap().display().to_string(),
                h.mode().unwrap(),
            ));
        }
        assert!(seen.contains(&("usr/bin/tool".into(), 0o755)), "{seen:?}");
        assert!(seen.contains(&("tmp/".into(), 0o1777)), "{seen:?}");
        assert!(seen.contains(&("lib64/ld.so".into(), 0o777)), "{seen:?}");
        // gzip header: no mtime (bytes 4..8), OS unknown.
        assert_eq!(&bytes[4..8], &[0, 0, 0, 0]);
        assert_eq!(bytes[9], 255);
    }
}
