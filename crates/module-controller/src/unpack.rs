//! Unpacking module image layers without trusting them.
//!
//! - Entry paths must be relative and free of `..`; `./` prefixes are dropped.
//! - Nothing is written through a symlink: every parent of an entry must be a real directory
//!   created by the unpacking, so a symlink's location is what its path says.
//! - Symlinks must be relative and must resolve inside the module directory *physically*
//!   (following the other symlinks, `..` after a symlink included); they are checked once every
//!   layer is unpacked ([`check_symlinks`]), so a later layer cannot retarget one.
//! - Hard links must name a regular file already unpacked; the file is copied.
//! - Devices, FIFOs and other special entries are refused.
//! - Sizes are bounded per file and in total, entries in number ([`Limits`]).
//! - Permissions are cut to the owner's bits (`mode & 0o700`), directories stay `0o700`.
//! - Whiteouts (`.wh.<name>`, `.wh..wh..opq`) of later layers delete what earlier ones wrote.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::Error;

/// Bounds on what a module image may unpack to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest single file.
    pub max_file_bytes: u64,
    /// Largest total of all files.
    pub max_total_bytes: u64,
    /// Most entries over all layers.
    pub max_entries: u64,
    /// Largest compressed layer downloaded.
    pub max_layer_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_file_bytes: 256 << 20,
            max_total_bytes: 1 << 30,
            max_entries: 100_000,
            max_layer_bytes: 512 << 20,
        }
    }
}

/// What was unpacked so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unpacked {
    /// Entries seen.
    pub entries: u64,
    /// Bytes of regular files written.
    pub bytes: u64,
    /// Symlinks created (paths relative to the root), checked by [`check_symlinks`].
    pub symlinks: Vec<Vec<String>>,
}

/// The components of a layer path: relative, no `..`, `./` and empty parts dropped.
pub fn clean_path(path: &str) -> Result<Vec<String>, Error> {
    let escape = |reason: &str| Error::Escape {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    if path.starts_with('/') {
        return Err(escape("absolute path"));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(escape("\"..\" component")),
            p => parts.push(p.to_owned()),
        }
    }
    Ok(parts)
}

fn join(root: &Path, parts: &[String]) -> PathBuf {
    parts.iter().fold(root.to_path_buf(), |p, c| p.join(c))
}

/// Opens a layer, gzip or plain tar.
fn open_layer<'a>(layer: impl Read + 'a) -> Result<Box<dyn Read + 'a>, Error> {
    let mut reader = BufReader::new(layer);
    let head = reader.fill_buf().map_err(|e| Error::NotTar {
        reason: e.to_string(),
    })?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(flate2::read::GzDecoder::new(reader)))
    } else {
        Ok(Box::new(reader))
    }
}

/// Makes every parent of `parts` a real directory under `root`; refuses symlinks and files.
fn ensure_parents(root: &Path, parts: &[String], shown: &str) -> Result<(), Error> {
    let mut dir = root.to_path_buf();
    for part in &parts[..parts.len().saturating_sub(1)] {
        dir.push(part);
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::Escape {
                    path: shown.to_owned(),
                    reason: format!("its parent {part:?} is a symlink"),
                });
            }
            Ok(_) => {
                return Err(Error::Forbidden {
                    path: shown.to_owned(),
                    kind: format!("child of the non-directory {part:?}"),
                });
            }
            Err(_) => {
                fs::create_dir(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                    .map_err(|e| Error::io("chmod", &dir, e))?;
            }
        }
    }
    Ok(())
}

/// Removes whatever is at `path` (never following a symlink).
fn remove_existing(path: &Path) -> Result<(), Error> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_dir() => {
            fs::remove_dir_all(path).map_err(|e| Error::io("remove", path, e))
        }
        Ok(_) => fs::remove_file(path).map_err(|e| Error::io("remove", path, e)),
        Err(_) => Ok(()),
    }
}

fn write_file(
    path: &Path,
    data: impl Read,
    size: u64,
    mode: u32,
    shown: &str,
    limits: &Limits,
    stats: &mut Unpacked,
) -> Result<(), Error> {
    if size > limits.max_file_bytes {
        return Err(Error::TooLarge {
            what: format!("file {shown:?}"),
            actual: size,
            limit: limits.max_file_bytes,
        });
    }
    if stats.bytes + size > limits.max_total_bytes {
        return Err(Error::TooLarge {
            what: "the unpacked module".into(),
            actual: stats.bytes + size,
            limit: limits.max_total_bytes,
        });
    }
    remove_existing(path)?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::io("create", path, e))?;
    let written =
        std::io::copy(&mut data.take(size), &mut file).map_err(|e| Error::io("write", path, e))?;
    if written != size {
        return Err(Error::NotTar {
            reason: format!("entry {shown:?} is truncated ({written} of {size} bytes)"),
        });
    }
    stats.bytes += size;
    let mode = (mode & 0o700) | 0o400;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| Error::io("chmod", path, e))
}

/// Unpacks one layer into `root` (which must exist), adding to `stats`.
pub fn unpack_layer(
    layer: impl Read,
    root: &Path,
    limits: &Limits,
    stats: &mut Unpacked,
) -> Result<(), Error> {
    let mut archive = tar::Archive::new(open_layer(layer)?);
    let entries = archive.entries().map_err(|e| Error::NotTar {
        reason: e.to_string(),
    })?;
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::NotTar {
            reason: e.to_string(),
        })?;
        stats.entries += 1;
        if stats.entries > limits.max_entries {
            return Err(Error::TooLarge {
                what: "the number of entries".into(),
                actual: stats.entries,
                limit: limits.max_entries,
            });
        }
        let shown = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let parts = clean_path(&shown)?;
        let Some(name) = parts.last().cloned() else {
            continue;
        };
        ensure_parents(root, &parts, &shown)?;
        let target = join(root, &parts);
        if let Some(hidden) = name.strip_prefix(".wh.") {
            if hidden == ".wh..opq" {
                let dir = join(root, &parts[..parts.len() - 1]);
                let children = fs::read_dir(&dir).map_err(|e| Error::io("read", &dir, e))?;
                for child in children.flatten() {
                    remove_existing(&child.path())?;
                }
            } else {
                let mut hidden_parts = parts.clone();
                *hidden_parts.last_mut().unwrap_or(&mut String::new()) = hidden.to_owned();
                remove_existing(&join(root, &hidden_parts))?;
            }
            continue;
        }
        let kind = entry.header().entry_type();
        let mode = entry.header().mode().unwrap_or(0o600);
        match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.size();
                write_file(&target, &mut entry, size, mode, &shown, limits, stats)?;
            }
            tar::EntryType::Directory => match fs::symlink_metadata(&target) {
                Ok(m) if m.file_type().is_dir() => {}
                Ok(_) => {
                    remove_existing(&target)?;
                    fs::create_dir(&target).map_err(|e| Error::io("create", &target, e))?;
                }
                Err(_) => {
                    fs::create_dir(&target).map_err(|e| Error::io("create", &target, e))?;
                    fs::set_permissions(&target, fs::Permissions::from_mode(0o700))
                        .map_err(|e| Error::io("chmod", &target, e))?;
                }
            },
            tar::EntryType::Symlink => {
                let link = entry
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                if link.is_empty() || link.starts_with('/') {
                    return Err(Error::Escape {
                        path: shown,
                        reason: format!("symlink to the absolute or empty path {link:?}"),
                    });
                }
                remove_existing(&target)?;
                std::os::unix::fs::symlink(&link, &target)
                    .map_err(|e| Error::io("symlink", &target, e))?;
                stats.symlinks.push(parts);
            }
            tar::EntryType::Link => {
                let link = entry
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                let source_parts = clean_path(&link).map_err(|_| Error::Escape {
                    path: shown.clone(),
                    reason: format!("hard link to {link:?}"),
                })?;
                let source = join(root, &source_parts);
                ensure_parents(root, &source_parts, &shown)?;
                let meta = fs::symlink_metadata(&source).map_err(|_| Error::Escape {
                    path: shown.clone(),
                    reason: format!("hard link to {link:?}, which is not in the image"),
                })?;
                if !meta.file_type().is_file() {
                    return Err(Error::Forbidden {
                        path: shown,
                        kind: "hard link to a non-regular file".into(),
                    });
                }
                let file = fs::File::open(&source).map_err(|e| Error::io("open", &source, e))?;
                let mode = meta.permissions().mode();
                write_file(&target, file, meta.len(), mode, &shown, limits, stats)?;
            }
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => {}
            other => {
                let kind = match other {
                    tar::EntryType::Char => "character device".to_owned(),
                    tar::EntryType::Block => "block device".to_owned(),
                    tar::EntryType::Fifo => "FIFO".to_owned(),
                    other => format!("{other:?} entry"),
                };
                return Err(Error::Forbidden { path: shown, kind });
            }
        }
    }
    Ok(())
}

/// Most symlinks followed while resolving one path.
const MAX_HOPS: usize = 40;

/// Resolves `parts` under `root` physically, following symlinks; `Err(reason)` when the path
/// leaves the root.
fn resolve(root: &Path, parts: &[String]) -> Result<(), String> {
    let mut queue: std::collections::VecDeque<String> = parts.iter().cloned().collect();
    let mut stack: Vec<String> = Vec::new();
    let mut hops = 0;
    while let Some(part) = queue.pop_front() {
        match part.as_str() {
            "" | "." => {}
            ".." => {
                if stack.pop().is_none() {
                    return Err("it resolves outside the module directory".into());
                }
            }
            name => {
                let here = join(root, &stack).join(name);
                match fs::symlink_metadata(&here) {
                    Ok(m) if m.file_type().is_symlink() => {
                        hops += 1;
                        if hops > MAX_HOPS {
                            return Err("too many levels of symlinks".into());
                        }
                        let target = fs::read_link(&here).map_err(|e| e.to_string())?;
                        let target = target.to_string_lossy().into_owned();
                        if target.starts_with('/') {
                            return Err(format!("it passes through a symlink to {target:?}"));
                        }
                        for (i, t) in target.split('/').enumerate() {
                            queue.insert(i, t.to_owned());
                        }
                    }
                    _ => stack.push(name.to_owned()),
                }
            }
        }
    }
    Ok(())
}

/// Checks that every symlink created resolves inside `root`.
pub fn check_symlinks(root: &Path, stats: &Unpacked) -> Result<(), Error> {
    for parts in &stats.symlinks {
        let path = join(root, parts);
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue; // removed by a later whiteout
        };
        if !meta.file_type().is_symlink() {
            continue;
        }
        let shown = parts.join("/");
        resolve(root, parts).map_err(|reason| Error::Escape {
            path: shown,
            reason: format!("symlink: {reason}"),
        })?;
    }
    Ok(())
}

/// Reads the small files named in `names` from the root of a layer (gzip or plain tar):
/// `(name, bytes)` for each found, later entries winning. Paths are checked as when unpacking.
pub fn read_files(
    layer: impl Read,
    names: &[&str],
    max_file_bytes: u64,
) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let mut archive = tar::Archive::new(open_layer(layer)?);
    let entries = archive.entries().map_err(|e| Error::NotTar {
        reason: e.to_string(),
    })?;
    let mut found: Vec<(String, Vec<u8>)> = Vec::new();
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::NotTar {
            reason: e.to_string(),
        })?;
        let shown = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let parts = clean_path(&shown)?;
        if parts.len() != 1 || !names.contains(&parts[0].as_str()) {
            continue;
        }
        if !entry.header().entry_type().is_file() {
            continue;
        }
        if entry.size() > max_file_bytes {
            return Err(Error::TooLarge {
                what: format!("file {shown:?}"),
                actual: entry.size(),
                limit: max_file_bytes,
            });
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(max_file_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::NotTar {
                reason: e.to_string(),
            })?;
        found.retain(|(n, _)| n != &parts[0]);
        found.push((parts[0].clone(), bytes));
    }
    Ok(found)
}

#[cfg(test)]
mod tests;
