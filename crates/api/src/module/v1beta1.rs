//! `Module` `v1beta1`: the package system's shape of a module (a package, its version and
//! settings), present in the CRD but not served, as in Deckhouse — clients keep using `v1alpha1`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A module installed from a package.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1beta1",
    kind = "Module",
    root = "ModuleV1beta1",
    status = "ModuleStatus",
    served = false,
    storage = false,
    doc = "A module installed through the package system (not served yet).",
    printcolumn(name = "Package", type_ = "string", json_path = ".spec.packageName"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.packageVersion"),
    printcolumn(
        name = "Repository",
        type_ = "string",
        json_path = ".spec.packageRepositoryName",
        priority = 1
    ),
    printcolumn(
        name = "Installed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Installed')].status"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].message"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSpec {
    /// The module package to install.
    pub package_name: String,
    /// Its version.
    pub package_version: String,
    /// The PackageRepository holding it (default: the default repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_repository_name: Option<String>,
    /// Release channel the package follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_channel: Option<String>,
    /// The module's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub settings: Option<serde_json::Value>,
    /// Version of the settings' schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_version: Option<i64>,
}

/// Observed state of a package-installed module.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleStatus {
    /// The latest observations of the module's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::standard_condition_map")]
    pub conditions: Vec<Condition>,
    /// The version installed now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<CurrentVersion>,
}

/// The version installed now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CurrentVersion {
    /// Release channel it was installed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Its semantic version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}
