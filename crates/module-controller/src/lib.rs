//! Deckhouse modules from OCI registries.
//!
//! - [`unpack`]: module image layers unpacked without trusting them (no traversal, no escaping
//!   symlinks, no devices, bounded sizes, owner-only permissions).
//!
//! It is an adapter: it reads registries and writes the file system; every decision about
//! settings, enabling and releases is made by `module-plan` and `release-plan`.

mod error;
pub mod unpack;

pub use error::Error;
