//! The package system (Deckhouse's marketplace): package repositories in OCI registries, the
//! packages and versions they offer, and the rules Applications move between versions under.
//!
//! - [`metadata`]: a version image's `package.yaml` and `changelog.yaml`, parsed (pure);
//! - [`operation`]: a PackageRepositoryOperation's steps and status (pure);
//! - [`repository`]: when a PackageRepository is scanned (pure);
//! - [`compat`]: `versionCompatibilityRules` — upgrades, downgrades, rollbacks (pure);
//! - [`registry`]: a repository's registry layout, read with the module manager's verified,
//!   bounded downloads and safe unpacker;
//! - [`incremental`]: which versions a scan takes up — full or from the last loaded (pure);
//! - [`scan`]: running an operation — ApplicationPackage and ApplicationPackageVersion objects;
//! - [`versions`]: loading a version's metadata (`MetadataLoaded`);
//! - [`application`]: what an Application may do and the status it shows (pure);
//! - [`runtime`]: what an Application's chart sees besides `.Values` — `$.Application` and
//!   `$.Platform` (pure);
//! - [`install`]: an Application's release, through the module runtime's release install;
//! - [`hooks`]: package hooks, through the module runtime's hook runner, scoped to the
//!   Application — every binding, their values kept in the Application's namespace;
//! - [`metrics`]: the metric `deckhouse_application_maintenance`;
//! - [`bookkeeping`]: Deckhouse's bookkeeping — registry spec checksums, owner references,
//!   old operations, gone repositories (pure);
//! - [`controller`]: the loop `d8 controller` runs under the platform's Lease.
//!
//! Decisions are pure functions with table tests; the API and registries are reached only from
//! `scan`, `versions` and `controller`.

pub mod application;
pub mod applications;
pub mod bookkeeping;
pub mod compat;
pub mod controller;
mod error;
pub mod hooks;
pub mod incremental;
pub mod install;
pub mod metadata;
pub mod metrics;
pub mod operation;
pub mod registry;
pub mod repository;
pub mod runtime;
pub mod scan;
pub mod versions;
pub mod view;

pub use error::Error;
