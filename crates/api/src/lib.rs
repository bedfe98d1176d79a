//! Deckhouse API types (WIP).
mod macros;

pub mod conditions;
pub mod crds;
pub mod deckhouse_release;
pub mod error;
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
pub mod webhooks;

pub use error::Error;
