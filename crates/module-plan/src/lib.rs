//! Pure decisions about Deckhouse modules, shared by the module controller, the admission
//! webhook and `d8 module`:
//!
//! - [`settings`]: a module's OpenAPI settings schema (`openapi/config-values.yaml`) turned
//!   into a JSON-schema validator (OpenAPI `nullable`, closed objects as addon-operator closes
//!   them) and the defaulting walker that merges the schema's `default`s into the values;
//! - [`conversion`]: settings conversions (`openapi/conversions/vN.yaml`), jq programs run in
//!   order with jaq, as Deckhouse runs them with gojq;
//! - [`config`]: a module's settings as a whole ([`config::ModuleSettings`]): the ModuleConfig
//!   validator with Deckhouse's messages and warnings, the ModuleConfig status message, and the
//!   ModuleSettingsDefinition built from the schema and the conversions;
//! - [`definition`]: `module.yaml` and the `NNN-name` directory convention;
//! - [`constraint`]: Go/Masterminds version constraints (`>= 1.26 < 1.30 || ~1.31`) on top of
//!   `semver`;
//! - [`deprecated_policy`]: the modules a deprecated `v1alpha1` ModuleUpdatePolicy still
//!   selects (`ModuleHasDeprecatedUpdatePolicy`);
//! - [`enabling`]: the enabling chain in addon-operator's extender order, with the extender that
//!   decided as the condition reason and Deckhouse's messages;
//! - [`values`]: module and `global` values as addon-operator builds them (static values,
//!   settings, schema defaults, hooks' patches, what Deckhouse puts under `global`), hook
//!   patches checked and applied all or nothing, the chart's values and their checksum.
//!
//! Pure: no tokio, no sockets, no filesystem, no clock. Inputs are bytes and values the caller
//! read; the module controller does the reading. It must not depend on kube's client or on any
//! adapter crate of this workspace.

pub mod config;
pub mod constraint;
pub mod conversion;
pub mod definition;
pub mod deprecated_policy;
pub mod enabling;
mod error;
pub mod settings;
pub mod values;

pub use error::Error;
