//! `ModuleSettingsDefinition` (`modulesettingsdefinitions.deckhouse.io`): the settings schemas of
//! a module, one per settings version. Named after the module, labelled `heritage: deckhouse`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The settings versions of a module.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "ModuleSettingsDefinition",
    doc = "The settings schemas of a module, one per settings version, as used to validate ModuleConfig.spec.settings."
)]
pub struct ModuleSettingsDefinitionSpec {
    /// The settings versions, each with its OpenAPI schema.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<SettingsVersion>,
}

/// One settings version of a module.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SettingsVersion {
    /// The version, for example `"1"`.
    pub name: String,
    /// The OpenAPI v3 schema of the settings of this version, stored as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub schema: Option<serde_json::Value>,
}
