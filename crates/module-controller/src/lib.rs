//! Deckhouse modules from OCI registries.
//!
//! - [`apply`]: download, verify, unpack, check the settings, place and activate a release;
//! - [`controller`]: when the module manager's passes run (changes, timers, overrides);
//! - [`embedded`]: the embedded modules directory (`module.yaml` or `NNN-name`);
//! - [`metrics`]: the manager's metrics (`deckhouse_mm_module_info`, `deckhouse_mm_module_maintenance`);
//! - [`runtime`]: modules running — render, server-side apply, release records, deletes,
//!   readiness and Module status, as addon-operator runs them;
//! - [`registry`]: a ModuleSource's registry layout (module names, release channels, module
//!   images) and verified downloads;
//! - [`install`]: the downloaded modules directory, releases placed and activated atomically;
//! - [`unpack`]: module image layers unpacked without trusting them (no traversal, no escaping
//!   symlinks, no devices, bounded sizes, owner-only permissions).
//!
//! It is an adapter: it reads registries and writes the file system; every decision about
//! settings, enabling and releases is made by `module-plan` and `release-plan`.

pub mod apply;
pub mod controller;
pub mod embedded;
mod error;
pub mod install;
pub mod manager;
pub mod metrics;
pub mod registry;
pub mod runtime;
pub mod unpack;
pub mod view;

pub use error::Error;
pub use module_hooks;
