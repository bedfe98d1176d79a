//! `ModulePullOverride` (`modulepulloverrides.deckhouse.io`, `mpo`): run a module from an image
//! tag instead of its releases. For development only. The object is named after the module.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Pattern of `scanInterval` (Go durations in hours, minutes and seconds).
pub const SCAN_INTERVAL_PATTERN: &str = r"^(\d+h)?(\d+m)?(\d+s)?$";

fn default_scan_interval() -> String {
    "15s".to_string()
}

/// The stored version.
pub mod v1alpha2 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    pub use super::ModulePullOverrideStatus;

    /// Which image tag to run the module from.
    #[derive(
        CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
    )]
    #[kube(
        group = "deckhouse.io",
        version = "v1alpha2",
        kind = "ModulePullOverride",
        shortname = "mpo",
        status = "ModulePullOverrideStatus",
        doc = "Runs a module from an image tag instead of its releases, re-pulling when the tag's digest changes. For development and debugging only; not for production clusters.",
        printcolumn(
            name = "Updated",
            type_ = "date",
            format = "date-time",
            json_path = ".status.updatedAt",
            description = "When the module was last updated."
        ),
        printcolumn(
            name = "Message",
            type_ = "string",
            json_path = ".status.message",
            description = "Detailed description."
        ),
        printcolumn(
            name = "Rollback",
            type_ = "string",
            json_path = ".spec.rollback",
            description = "Whether the module goes back to its deployed release when the override is deleted."
        )
    )]
    #[serde(rename_all = "camelCase")]
    pub struct ModulePullOverrideSpec {
        /// Tag of the module image to pull.
        pub image_tag: String,
        /// How often to check the tag's digest; the module is redeployed when it changes. Units
        /// `h`, `m`, `s`.
        #[serde(default = "super::default_scan_interval")]
        #[schemars(regex(pattern = r"^(\d+h)?(\d+m)?(\d+s)?$"))]
        pub scan_interval: String,
        /// Go back to the deployed release when the override is deleted.
        #[serde(default)]
        pub rollback: bool,
    }
}

/// The deprecated version, no longer served.
pub mod v1alpha1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    pub use super::ModulePullOverrideStatus;

    /// Which source and image tag to run the module from.
    #[derive(
        CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
    )]
    #[kube(
        group = "deckhouse.io",
        version = "v1alpha1",
        kind = "ModulePullOverride",
        shortname = "mpo",
        status = "ModulePullOverrideStatus",
        served = false,
        storage = false,
        deprecated,
        doc = "Deprecated and not served: use v1alpha2.",
        printcolumn(
            name = "Updated",
            type_ = "date",
            format = "date-time",
            json_path = ".status.updatedAt",
            description = "When the module was last updated."
        ),
        printcolumn(
            name = "msg",
            type_ = "string",
            json_path = ".status.message",
            description = "Detailed description."
        )
    )]
    #[serde(rename_all = "camelCase")]
    pub struct ModulePullOverrideSpec {
        /// The ModuleSource holding the module.
        pub source: String,
        /// Tag of the module image to pull.
        pub image_tag: String,
        /// How often to check the tag's digest. Units `h`, `m`, `s`.
        #[serde(default = "super::default_scan_interval")]
        #[schemars(regex(pattern = r"^(\d+h)?(\d+m)?(\d+s)?$"))]
        pub scan_interval: String,
        /// Go back to the deployed release when the override is deleted.
        #[serde(default)]
        pub rollback: bool,
    }
}

/// Observed state of a ModulePullOverride.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModulePullOverrideStatus {
    /// Outcome of the last reconcile (see the `MESSAGE_*` constants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the module was last redeployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::plain_string")]
    pub updated_at: Option<Time>,
    /// Digest of the module image in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// Module weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
}

/// The override is applied.
pub const MESSAGE_READY: &str = "Ready";
/// The module is shipped in the image and cannot be overridden.
pub const MESSAGE_EMBEDDED: &str = "The module is embedded";
/// The module is disabled.
pub const MESSAGE_DISABLED: &str = "The module disabled";
/// No Module of that name.
pub const MESSAGE_MODULE_NOT_FOUND: &str = "The module not found";
/// The module's ModuleSource is missing.
pub const MESSAGE_SOURCE_NOT_FOUND: &str = "The source not found";
/// The module has no `properties.source`.
pub const MESSAGE_NO_ACTIVE_SOURCE: &str = "The module does not have an active source";

/// Message when the image digest could not be fetched.
pub fn message_download_error(error: &str) -> String {
    format!("Download error: {error}")
}

pub use v1alpha2::{ModulePullOverride, ModulePullOverrideSpec};
