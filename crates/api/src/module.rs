//! `Module` (`modules.deckhouse.io`): a module known to the cluster. Written only by the
//! controller; its data sits in `.properties`, not in a `spec`.

pub mod v1beta1;

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::ModuleCondition;
use crate::macros::string_enum;

/// The fields of a Module: `.properties` (and a legacy free-form `.spec`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "Module",
    no_spec,
    status = "ModuleStatus",
    doc = "A module known to the cluster: where it comes from, its version and whether it runs. Created and updated by Deckhouse only.",
    printcolumn(
        name = "Weight",
        type_ = "integer",
        json_path = ".properties.weight",
        priority = 1,
        description = "Module weight."
    ),
    printcolumn(
        name = "Stage",
        type_ = "string",
        json_path = ".properties.stage",
        description = "Module stage."
    ),
    printcolumn(
        name = "Release channel",
        type_ = "string",
        json_path = ".properties.releaseChannel",
        priority = 1,
        description = "Release channel of the module."
    ),
    printcolumn(
        name = "Source",
        type_ = "string",
        json_path = ".properties.source",
        description = "Where the module comes from."
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".properties.version",
        priority = 1,
        description = "Module version."
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Module phase."
    ),
    printcolumn(
        name = "Enabled",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='EnabledByModuleManager')].status",
        description = "Whether the module manager runs the module."
    ),
    printcolumn(
        name = "Disabled Message",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='EnabledByModuleManager')].message",
        priority = 1,
        description = "Why the module does not run."
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='IsReady')].status",
        description = "Whether the module is ready."
    )
)]
pub struct ModuleFields {
    /// What Deckhouse knows about the module.
    #[serde(default)]
    pub properties: ModuleProperties,
    /// Legacy free-form field kept so that older objects are not pruned.
    #[serde(rename = "spec", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub legacy_spec: Option<serde_json::Value>,
}

/// What Deckhouse knows about a module.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleProperties {
    /// Order of the module among the others; lower runs first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
    /// Lifecycle stage, for example `Experimental`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Release channel the module follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_channel: Option<String>,
    /// The ModuleSource the module is downloaded from, or `Embedded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Module version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Namespace the module's resources live in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Subsystems the module belongs to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subsystems: Vec<String>,
    /// ModuleUpdatePolicy governing the module's releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<String>,
    /// Group in which only one module may be enabled at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_group: Option<String>,
    /// ModuleSources that offer the module.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub available_sources: Vec<String>,
    /// Whether the module is critical (runs first, in the main queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical: Option<bool>,
    /// What must hold for the module to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<ModuleRequirements>,
    /// Protection against disabling the module by mistake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_options: Option<DisableOptions>,
    /// In which Deckhouse editions the module is available and enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessibility: Option<Accessibility>,
}

/// Requirements of a module (unknown keys are kept).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ModuleRequirements {
    /// Required Deckhouse version constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deckhouse: Option<String>,
    /// Required Kubernetes version constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    /// Required cluster bootstrap state (embedded modules only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrapped: Option<String>,
    /// Other modules that must be enabled, with version constraints.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub modules: BTreeMap<String, String>,
}

/// Disable protection of a module.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DisableOptions {
    /// Disabling needs the `modules.deckhouse.io/allow-disabling` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<bool>,
    /// Deprecated: use `messages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Warning shown when disabling, per language; `message` is the fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<LocalizedText>,
}

/// A text in English and Russian.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalizedText {
    /// English.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub en: Option<String>,
    /// Russian.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ru: Option<String>,
}

/// Availability of a module per Deckhouse edition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Accessibility {
    /// Per edition (`_default` applies to editions not listed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub editions: BTreeMap<String, EditionAccess>,
}

/// Availability of a module in one edition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EditionAccess {
    /// Whether the edition may run the module at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<bool>,
    /// Bundles (`Default`, `Minimal`, `Managed`) that enable the module by default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enabled_in_bundles: Vec<String>,
}

/// Observed state of a Module.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleStatus {
    /// Module phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ModulePhase>,
    /// Report of the module's hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks_state: Option<String>,
    /// Conditions, merged by `type` (see [`ModuleConditionType`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::patch_merge_by_type::<ModuleCondition>")]
    pub conditions: Vec<ModuleCondition>,
}

string_enum! {
    /// Phase of a Module.
    pub enum ModulePhase {
        /// Not available in this edition.
        Unavailable = "Unavailable",
        /// Offered by a source, not installed.
        Available = "Available",
        /// Being downloaded.
        Downloading = "Downloading",
        /// The download failed.
        DownloadingError = "DownloadingError",
        /// Being reconciled after a change.
        Reconciling = "Reconciling",
        /// Being installed for the first time.
        Installing = "Installing",
        /// Hooks are disabled.
        HooksDisabled = "HooksDisabled",
        /// Waiting for synchronization tasks.
        WaitSyncTasks = "WaitSyncTasks",
        /// Downloaded but not running.
        Downloaded = "Downloaded",
        /// Several sources offer the module and none is chosen.
        Conflict = "Conflict",
        /// Running and ready.
        Ready = "Ready",
        /// A hook or the module failed.
        Error = "Error",
    }
}

string_enum! {
    /// Condition types of a Module.
    pub enum ModuleConditionType {
        /// The ModuleConfig enables the module.
        EnabledByModuleConfig = "EnabledByModuleConfig",
        /// The module manager runs the module.
        EnabledByModuleManager = "EnabledByModuleManager",
        /// The last release was deployed.
        LastReleaseDeployed = "LastReleaseDeployed",
        /// The module is ready.
        IsReady = "IsReady",
        /// A ModulePullOverride overrides the module.
        IsOverridden = "IsOverridden",
    }
}

string_enum! {
    /// Reasons of Module conditions: the extender or event that decided.
    pub enum ModuleConditionReason {
        /// Disabled by the bundle.
        Bundle = "Bundle",
        /// Disabled by the ModuleConfig.
        ModuleConfig = "ModuleConfig",
        /// Disabled by a global hook.
        DynamicGlobalHookExtender = "DynamicGlobalHookExtender",
        /// Disabled by the module's `enabled` script.
        EnabledScriptExtender = "EnabledScriptExtender",
        /// Disabled by the Deckhouse version requirement.
        DeckhouseVersionExtender = "DeckhouseVersionExtender",
        /// Disabled by the Kubernetes version requirement.
        KubernetesVersionExtender = "KubernetesVersionExtender",
        /// Disabled until the cluster is bootstrapped.
        ClusterBootstrappedExtender = "ClusterBootstrappedExtender",
        /// Disabled by unmet module dependencies.
        ModuleDependencyExtender = "ModuleDependencyExtender",
        /// Not available in the edition.
        EditionAvailableExtender = "EditionAvailableExtender",
        /// Not enabled in the edition.
        EditionEnabledExtender = "EditionEnabledExtender",
        /// Experimental modules are not allowed.
        ExperimentalExtender = "ExperimentalExtender",
        /// Not installed.
        NotInstalled = "NotInstalled",
        /// Disabled.
        Disabled = "Disabled",
        /// Several sources offer the module.
        Conflict = "Conflict",
        /// Downloading.
        Downloading = "Downloading",
        /// Reconciling.
        Reconciling = "Reconciling",
        /// Installing.
        Installing = "Installing",
        /// A hook failed.
        HookError = "HookError",
        /// The module failed.
        ModuleError = "ModuleError",
        /// Any other error.
        Error = "Error",
    }
}

impl ModuleConditionReason {
    /// The message Deckhouse writes with this reason, where it has a fixed one.
    pub const fn message(self) -> Option<&'static str> {
        Some(match self {
            Self::Bundle => "turned off by bundle",
            Self::ModuleConfig => "turned off by module config",
            Self::DynamicGlobalHookExtender => "turned off by global hook",
            Self::EnabledScriptExtender => "turned off by enabled script",
            Self::DeckhouseVersionExtender => "turned off by deckhouse version",
            Self::KubernetesVersionExtender => "turned off by kubernetes version",
            Self::ClusterBootstrappedExtender => {
                "turned off because the cluster not bootstrapped yet"
            }
            Self::ModuleDependencyExtender => "turned off because of unmet module dependencies",
            Self::NotInstalled => "not installed",
            Self::Disabled => "disabled",
            Self::Conflict => "several available sources",
            Self::Downloading => "downloading",
            Self::Reconciling => "reconciling",
            Self::Installing => "installing",
            _ => return None,
        })
    }
}

/// Message once the module's onStartup hooks ran.
pub const MESSAGE_ON_STARTUP_HOOKS_DONE: &str = "onStartup hooks done";
/// `properties.source` of a module shipped inside the Deckhouse image.
pub const SOURCE_EMBEDDED: &str = "Embedded";
