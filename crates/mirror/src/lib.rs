//! `d8 mirror pull` and `d8 mirror push`: move a Deckhouse platform release and its modules
//! into an air-gapped cluster, through bundles compatible with Deckhouse's own `d8 mirror`.
//!
//! - [`select`]: which platform versions, channels and module versions to mirror (pure).
//! - [`bundle`]: the bundle format — tar packages of OCI image layouts, chunking, our
//!   `d8-mirror-bundle.json`, and the one-pass scan that verifies every blob.
//! - [`images`]: images of your own (`--image`, `--images-file`) and where they go (pure).
//! - [`layout`]: `index.json` entries and which registry repository each layout stands for.
//! - [`pull`] and [`push`]: the two commands; [`progress`]: bars, plain lines, JSON lines.
//!
//! All registry traffic goes through `registry-client` (tokens, TLS with a CA and a client
//! certificate, verified streaming bodies). This crate must not depend on Kubernetes crates or
//! on the agent and storage crates (their tests use them as real components only).

pub mod bundle;
mod error;
pub mod images;
pub mod layout;
pub mod progress;
pub mod pull;
pub mod push;
pub mod select;

pub use error::Error;
pub use progress::{Mode, Progress};
pub use pull::{PullOptions, PullSummary, pull};
pub use push::{PushOptions, PushSummary, push};
