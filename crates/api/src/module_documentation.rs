//! `ModuleDocumentation` (`moduledocumentations.deckhouse.io`): renders the documentation of a
//! module release on the documentation builders. Created by Deckhouse.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which module documentation to render.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "ModuleDocumentation",
    status = "ModuleDocumentationStatus",
    doc = "Documentation of a module release to render on the documentation builders. Created by Deckhouse.",
    printcolumn(
        name = "result",
        type_ = "string",
        json_path = ".status.result",
        description = "Current render status."
    )
)]
pub struct ModuleDocumentationSpec {
    /// Module version, for example `v1.0.0`.
    pub version: String,
    /// Checksum of the module version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// Path of the module release on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Observed state of a ModuleDocumentation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModuleDocumentationStatus {
    /// Render result over all builders, for example `Rendered`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// One entry per documentation builder `address`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "retain_keys")]
    pub conditions: Vec<DocumentationCondition>,
}

fn retain_keys(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let items = generator.subschema_for::<DocumentationCondition>();
    schemars::json_schema!({
        "type": "array",
        "description": "One entry per documentation builder `address`.",
        "items": items,
        "x-kubernetes-patch-strategy": "retainKeys",
    })
}

/// Render result on one documentation builder.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentationCondition {
    /// Condition type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Module version rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Checksum rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// Address of the builder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// When the entry last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
