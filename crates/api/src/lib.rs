//! The Deckhouse API: Rust types for every custom resource the platform and the registry module
//! use, the CRD manifests generated from them, and the validation rules Deckhouse enforces on
//! writes, as pure functions.
//!
//! Compatibility is the point: groups (`deckhouse.io`, `network.deckhouse.io`), versions,
//! field names, enum values, defaults, printer columns, annotation and label keys ([`keys`]),
//! status messages and refusal messages are Deckhouse's own.
//!
//! - Kinds: one module per kind or family ([`module`], [`module_config`], [`module_source`],
//!   [`module_release`], [`module_update_policy`] (`v1alpha1` served, `v1alpha2` stored),
//!   [`module_pull_override`], [`module_settings_definition`], [`module_documentation`],
//!   [`deckhouse_release`], [`object_keeper`], [`webhooks`], [`packages`], [`network`],
//!   [`registry`]). Irregular shapes use kube's `no_spec`: Module keeps its data in
//!   `.properties`, the webhook kinds at the top level, DeckhouseRelease has a top-level
//!   `approved` next to its `spec`.
//! - [`crds::all`] returns every CustomResourceDefinition; the manifests in `crds/` at the
//!   repository root are generated from it and checked by `tests/crds.rs`.
//! - [`validation::validate`] (and [`validation::validate_request`] with the user and cluster
//!   facts) is what the embedded API server and the admission webhook both run.
//! - `fixtures` (feature `test-fixtures`): constructors such as `ModuleRelease::test("echo", "1.2.3")`.
//!
//! Pure: no tokio, no sockets, no filesystem (only the tests read and write `crds/`). It depends
//! on kube's derive and core types and on k8s-openapi, and must not depend on kube's client or
//! runtime behaviour, or on any other crate of this workspace.
// kube's `printcolumn(...)` repeats `name`/`type_` per column, which this lint misreads.
#![allow(clippy::duplicated_attributes)]
mod macros;

pub mod conditions;
pub mod crds;
pub mod deckhouse_release;
pub mod error;
#[cfg(any(test, feature = "test-fixtures"))]
pub mod fixtures;
pub mod keys;
pub mod module;
pub mod module_config;
pub mod module_documentation;
pub mod module_pull_override;
pub mod module_release;
pub mod module_settings_definition;
pub mod module_source;
pub mod module_update_policy;
pub mod network;
pub mod object_keeper;
pub mod packages;
pub mod registry;
pub(crate) mod schema;
pub mod update;
pub mod validation;
pub mod webhooks;

pub use error::Error;
