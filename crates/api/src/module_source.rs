//! `ModuleSource` (`modulesources.deckhouse.io`, `ms`): an OCI registry offering modules.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::macros::string_enum;

/// Desired state of a ModuleSource.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "ModuleSource",
    shortname = "ms",
    status = "ModuleSourceStatus",
    doc = "A container registry Deckhouse discovers modules in: every tag of `spec.registry.repo` is a module.",
    printcolumn(
        name = "count",
        type_ = "integer",
        json_path = ".status.modulesCount",
        description = "The number of modules available."
    ),
    printcolumn(
        name = "status",
        type_ = "string",
        json_path = ".status.phase",
        description = "The current phase."
    ),
    printcolumn(
        name = "sync",
        type_ = "date",
        format = "date-time",
        json_path = ".status.syncTime",
        description = "When the repository was synchronized."
    ),
    printcolumn(
        name = "msg",
        type_ = "string",
        json_path = ".status.message",
        description = "The error message if exists."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSourceSpec {
    /// Deprecated: default release channel of the source's modules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_channel: Option<String>,
    /// The registry to scan.
    pub registry: SourceRegistry,
}

/// Where and how to reach a module registry (shared with PackageRepository).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceRegistry {
    /// Protocol used to reach the registry.
    #[serde(default = "Scheme::https")]
    pub scheme: Scheme,
    /// Repository holding the modules, for example `registry.example.io/deckhouse/modules`.
    pub repo: String,
    /// Base64 of a Docker `config.json` with the credentials; leave empty for anonymous access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_cfg: Option<String>,
    /// PEM certificate authority for a registry with a self-signed certificate. Setting it restarts
    /// containerd on every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
}

string_enum! {
    /// `HTTP` or `HTTPS`.
    #[derive(Default)]
    pub enum Scheme {
        /// Plain HTTP: only for trusted, insecure registries.
        Http = "HTTP",
        /// HTTPS (the default).
        #[default]
        Https = "HTTPS",
    }
}

impl Scheme {
    /// `HTTPS`, the default everywhere.
    pub const fn https() -> Self {
        Self::Https
    }
}

/// Observed state of a ModuleSource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSourceStatus {
    /// When the registry was last scanned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::plain_string")]
    pub sync_time: Option<Time>,
    /// `Active`, or `Terminating` while being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ModuleSourcePhase>,
    /// Number of modules the source offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules_count: Option<i64>,
    /// The modules the source offers and their update policies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<AvailableModule>,
    /// Error or progress message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A module offered by a source.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AvailableModule {
    /// Module name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Version on the module's release channel (`unknown` after a pull error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Checksum of the channel metadata image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// Why the module could not be pulled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_error: Option<String>,
    /// Why the module could not be processed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The ModuleUpdatePolicy the module follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// A ModulePullOverride overrides the module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overridden: Option<bool>,
}

string_enum! {
    /// Phase of a ModuleSource.
    pub enum ModuleSourcePhase {
        /// Scanned periodically.
        Active = "Active",
        /// Being deleted.
        Terminating = "Terminating",
    }
}

/// Name of the default source the `deckhouse` module creates.
pub const DEFAULT_SOURCE: &str = "deckhouse";
/// Status message when some modules could not be pulled.
pub const MESSAGE_SOME_ERRORS: &str = "Some errors occurred. Inspect status for details";

/// Status message of a source that cannot be deleted yet.
pub const MESSAGE_DEPLOYED_RELEASES_BLOCK_DELETE: &str = "The source contains at least 1 deployed release and cannot be deleted. Please delete target ModuleReleases manually to continue";
