//! The image's root filesystem as data: what goes where, with which mode. Pure.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::Error;

/// Where a file's bytes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Bytes given here (small generated files).
    Bytes(Vec<u8>),
    /// A file on the host, read (streamed) when the layer is written.
    Host(PathBuf),
}

/// One entry of the root filesystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir {
        /// Permission bits.
        mode: u32,
    },
    /// A regular file.
    File {
        /// Permission bits.
        mode: u32,
        /// Its contents.
        source: Source,
    },
    /// A symbolic link.
    Symlink {
        /// Where it points.
        target: String,
    },
}

/// The user the image runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Login name.
    pub name: String,
    /// User and group id.
    pub id: u32,
}

impl User {
    /// `nonroot`, 65532: the id distroless images use, so policies written for them apply.
    pub fn nonroot() -> Self {
        Self {
            name: "nonroot".into(),
            id: 65532,
        }
    }
}

/// A root filesystem: absolute paths (without the leading `/`) to entries, kept sorted so the
/// layer is the same whatever order entries were added in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rootfs {
    entries: BTreeMap<String, Entry>,
}

/// Directory mode for parents created implicitly.
const DIR_MODE: u32 = 0o755;

impl Rootfs {
    /// An empty filesystem.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `entry` at `path` (absolute, normal: no `.`, `..` or empty components), creating its
    /// parent directories with mode 0755. A later entry at the same path replaces the earlier.
    pub fn add(&mut self, path: &str, entry: Entry) -> Result<&mut Self, Error> {
        let key = normal(path)?;
        let mut parent = String::new();
        let components: Vec<&str> = key.split('/').collect();
        for component in &components[..components.len() - 1] {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(component);
            self.entries
                .entry(parent.clone())
                .or_insert(Entry::Dir { mode: DIR_MODE });
        }
        self.entries.insert(key, entry);
        Ok(self)
    }

    /// Adds a file with the given bytes.
    pub fn file(
        &mut self,
        path: &str,
        mode: u32,
        bytes: impl Into<Vec<u8>>,
    ) -> Result<&mut Self, Error> {
        self.add(
            path,
            Entry::File {
                mode,
                source: Source::Bytes(bytes.into()),
            },
        )
    }

    /// Adds a file copied from the host.
    pub fn host_file(
        &mut self,
        path: &str,
        mode: u32,
        host: impl Into<PathBuf>,
    ) -> Result<&mut Self, Error> {
        self.add(
            path,
            Entry::File {
                mode,
                source: Source::Host(host.into()),
            },
        )
    }

    /// The entries in the order they go into the layer (parents before children).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries
            .iter()
            .map(|(path, entry)| (path.as_str(), entry))
    }

    /// The minimal base every `d8` image has: `/etc/passwd` and `/etc/group` naming root and
    /// `user` (so tools that look the user up find it), `/etc/nsswitch.conf` (files only: no
    /// daemon to ask), a world-writable sticky `/tmp`, and the user's home.
    pub fn base(user: &User) -> Self {
        let mut fs = Rootfs::new();
        let User { name, id } = user;
        let passwd = format!(
            "root:x:0:0:root:/root:/sbin/nologin\n{name}:x:{id}:{id}:{name}:/home/{name}:/sbin/nologin\n"
        );
        let group = format!("root:x:0:\n{name}:x:{id}:\n");
        // The paths are constants, valid by construction.
        fs.file("/etc/passwd", 0o644, passwd)
            .expect("constant path");
        fs.file("/etc/group", 0o644, group).expect("constant path");
        fs.file(
            "/etc/nsswitch.conf",
            0o644,
            "hosts: files dns\npasswd: files\ngroup: files\n",
        )
        .expect("constant path");
        fs.add("/tmp", Entry::Dir { mode: 0o1777 })
            .expect("constant path");
        fs.add("/root", Entry::Dir { mode: 0o700 })
            .expect("constant path");
        // A name with a slash makes no home directory (it would be refused as a path).
        let _ = fs.add(&format!("/home/{name}"), Entry::Dir { mode: 0o755 });
        fs
    }
}

/// `/a/b` → `a/b`, refusing relative and non-normal paths.
fn normal(path: &str) -> Result<String, Error> {
    let invalid = |reason| Error::InvalidPath {
        path: path.to_string(),
        reason,
    };
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| invalid("not absolute"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Err(invalid("the root itself"));
    }
    if rest
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(invalid("empty, `.` or `..` component"));
    }
    Ok(rest.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_are_created_and_order_is_sorted_whatever_the_insertion_order() {
        let mut a = Rootfs::new();
        a.file("/usr/bin/d8", 0o755, "x").unwrap();
        a.file("/etc/passwd", 0o644, "p").unwrap();
        let mut b = Rootfs::new();
        b.file("/etc/passwd", 0o644, "p").unwrap();
        b.file("/usr/bin/d8", 0o755, "x").unwrap();
        assert_eq!(a, b);
        let paths: Vec<&str> = a.entries().map(|(p, _)| p).collect();
        assert_eq!(paths, ["etc", "etc/passwd", "usr", "usr/bin", "usr/bin/d8"]);
    }

    #[test]
    fn bad_paths_are_refused() {
        for (path, reason) in [
            ("etc/passwd", "not absolute"),
            ("/", "the root itself"),
            ("/a/../b", "empty, `.` or `..` component"),
            ("/a//b", "empty, `.` or `..` component"),
            ("/a/./b", "empty, `.` or `..` component"),
        ] {
            match Rootfs::new().file(path, 0o644, "") {
                Err(Error::InvalidPath { reason: got, .. }) => assert_eq!(got, reason, "{path}"),
                other => panic!("{path}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_base_names_the_non_root_user() {
        let fs = Rootfs::base(&User::nonroot());
        let passwd = fs.entries().find(|(p, _)| *p == "etc/passwd").unwrap().1;
        let Entry::File {
            source: Source::Bytes(bytes),
            ..
        } = passwd
        else {
            panic!()
        };
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains("nonroot:x:65532:65532:"), "{text}");
        assert!(
            fs.entries()
                .any(|(p, e)| p == "tmp" && *e == Entry::Dir { mode: 0o1777 })
        );
    }
}
