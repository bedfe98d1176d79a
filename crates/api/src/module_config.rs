//! `ModuleConfig` (`moduleconfigs.deckhouse.io`, `mc`): the configuration of one module. The
//! object's name is the module name; `global` holds the global settings.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::macros::string_enum;

/// Desired configuration of a module.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "ModuleConfig",
    shortname = "mc",
    status = "ModuleConfigStatus",
    doc = "Configuration of a Deckhouse module. The object is named after the module (for example `control-plane-manager`); `global` holds the global settings.",
    printcolumn(
        name = "Enabled",
        type_ = "boolean",
        json_path = ".spec.enabled",
        description = "Module enabled state"
    ),
    printcolumn(
        name = "UpdatePolicy",
        type_ = "string",
        json_path = ".spec.updatePolicy",
        priority = 1,
        description = "The update policy of the module."
    ),
    printcolumn(
        name = "Source",
        type_ = "string",
        json_path = ".spec.source",
        priority = 1,
        description = "The source of the module."
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".status.version",
        description = "Version of settings schema in use"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation."
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.message",
        description = "Additional information"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ModuleConfigSpec {
    /// Turns the module on or off. Unset leaves the decision to the bundle and edition defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Maintenance mode. `NoResourceReconciliation`: configuration and hook changes are not
    /// applied, deleted resources are not restored, every resource of the module gets the
    /// `maintenance.deckhouse.io/no-resource-reconciliation` label and the
    /// `ModuleIsInMaintenanceMode` alert fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<Maintenance>,
    /// Version of the settings schema `settings` are written for. Required with `settings`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "number_schema")]
    pub version: Option<i64>,
    /// Module settings, validated against the module's schema of `version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub settings: Option<serde_json::Value>,
    /// Name of the ModuleUpdatePolicy for the module's releases; unset uses the policy derived
    /// from the `deckhouse` ModuleConfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<String>,
    /// ModuleSource to take the module from, when several offer it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

fn number_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "number", "description": "Version of the settings schema `settings` are written for. Required with `settings`." })
}

string_enum! {
    /// Maintenance mode of a module.
    pub enum Maintenance {
        /// Nothing of the module is reconciled or monitored.
        NoResourceReconciliation = "NoResourceReconciliation",
    }
}

/// Observed state of a ModuleConfig.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModuleConfigStatus {
    /// Version of the settings schema in use.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Additional information, for example a validation error.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Name of the ModuleConfig holding the global settings.
pub const GLOBAL: &str = "global";

/// Status message of a ModuleConfig whose module is unknown.
pub const MESSAGE_UNKNOWN_MODULE: &str = "Ignored: unknown module name";

/// Status message of a ModuleConfig that fails validation.
pub fn message_error(error: &str) -> String {
    format!("Error: {error}")
}

/// Status message of a ModuleConfig whose `spec.version` is not a known version.
pub fn message_invalid_version(latest: i64) -> String {
    format!("Error: invalid spec.version, use version {latest}")
}

/// Status message of a ModuleConfig written for an older settings version.
pub fn message_update_available(latest: i64) -> String {
    format!("Update available, latest spec.settings schema version is {latest}")
}

impl ModuleConfig {
    /// Whether the config explicitly disables its module (`spec.enabled: false`).
    pub fn is_disabled(&self) -> bool {
        self.spec.enabled == Some(false)
    }

    /// Whether the module is enabled, given its default when `spec.enabled` is unset.
    pub fn is_enabled(&self, default_enabled: bool) -> bool {
        self.spec.enabled.unwrap_or(default_enabled)
    }
}
