//! Reproducible OCI images of `d8` itself, built without Docker.
//!
//! A root filesystem is described as data ([`Rootfs`]: directories, files, symlinks), each
//! [`Rootfs`] becomes one layer written as a deterministic tar (sorted paths, fixed mtime,
//! owner root, explicit modes) compressed by gzip with no time or name in its header; the
//! config and manifest are JSON with fixed keys. The same inputs therefore always give the same
//! manifest digest — the image's identity — and `d8 image push` of an unchanged build is a
//! no-op for the registry.
//!
//! Layers:
//! - [`rootfs`]: the filesystem model and the minimal base (`/etc/passwd` with the non-root
//!   user, `/tmp`) — pure.
//! - [`ldd`]: which shared libraries a dynamically linked binary needs (the one exec).
//! - [`config`]: image config and manifest JSON — pure.
//! - [`layer`], [`layout`]: writing layers and an OCI image layout on disk.
//! - [`d8`]: what the `d8` image holds.
//!
//! It depends on no runtime, network or Kubernetes crate; pushing is `registry-client`'s job
//! (see `d8 image push`). Test helpers (`testkit`) are not used here.

pub mod config;
pub mod d8;
pub mod layer;
pub mod layout;
pub mod ldd;
pub mod rootfs;

pub use config::{ImageConfig, Labels, rfc3339};
pub use d8::D8Image;
pub use layer::Layer;
pub use layout::{Built, build};
pub use rootfs::{Entry, Rootfs, Source, User};

use std::path::PathBuf;

/// What can fail while building an image.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file the root filesystem takes from the host could not be read.
    #[error("read {path}: {source}")]
    Read {
        /// The host path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Writing the layout failed.
    #[error("write {path}: {source}")]
    Write {
        /// The path written.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `ldd` could not be run or named a library it could not find.
    #[error("find the shared libraries of {binary}: {reason}")]
    Libraries {
        /// The binary inspected.
        binary: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A path in the root filesystem is not absolute or not normal.
    #[error("invalid image path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
}
