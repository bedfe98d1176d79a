//! `ModuleRelease` (`modulereleases.deckhouse.io`, `mr`): one version of an external module,
//! created by Deckhouse from a ModuleSource and applied according to the module's update policy.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::keys;
use crate::macros::string_enum;

/// Desired state of a ModuleRelease.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "ModuleRelease",
    shortname = "mr",
    status = "ModuleReleaseStatus",
    doc = "A release of a module, created by Deckhouse. Approve one in `Manual` mode with the `modules.deckhouse.io/approved: \"true\"` annotation.",
    printcolumn(
        name = "phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Current release status."
    ),
    printcolumn(
        name = "update policy",
        type_ = "string",
        json_path = ".metadata.labels.modules\\.deckhouse\\.io/update-policy",
        description = "Associated update policy."
    ),
    printcolumn(
        name = "transitionTime",
        type_ = "date",
        format = "date-time",
        json_path = ".status.transitionTime",
        description = "When the release status was changed."
    ),
    printcolumn(
        name = "message",
        type_ = "string",
        json_path = ".status.message",
        description = "Release status details."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ModuleReleaseSpec {
    /// Module name.
    pub module_name: String,
    /// Module version without the `v` prefix, for example `1.26.2`.
    pub version: String,
    /// Module weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
    /// The release is not applied before this time (canary waves, notification delay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::plain_string")]
    pub apply_after: Option<Time>,
    /// What must hold for the release to be applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<ModuleReleaseRequirements>,
    /// Version ranges from which the release may be reached directly, skipping the releases in
    /// between. (Deckhouse's Go type names this field `update`, which is read as an alias.)
    #[serde(default, alias = "update", skip_serializing_if = "Option::is_none")]
    pub update_constraints: Option<UpdateConstraints>,
    /// The release's changelog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub changelog: Option<serde_json::Value>,
}

/// Requirements of a release.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModuleReleaseRequirements {
    /// Required Deckhouse version constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deckhouse: Option<String>,
    /// Required Kubernetes version constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    /// Modules that must be enabled, with version constraints.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub modules: BTreeMap<String, String>,
}

/// Transition rules that allow skipping step-by-step updates.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UpdateConstraints {
    /// The ranges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<UpdateConstraint>,
}

/// From any version in `[from, to)` the release at `to` may be applied directly.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UpdateConstraint {
    /// Lowest version allowed to jump (`major.minor` or full semver).
    pub from: String,
    /// Endpoint of the jump.
    pub to: String,
}

/// Observed state of a ModuleRelease.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleReleaseStatus {
    /// Release phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ModuleReleasePhase>,
    /// Why the release is in its phase (what it waits for, why it was skipped).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the phase last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::plain_string")]
    pub transition_time: Option<Time>,
    /// The release may be deployed (meaningful in `Manual` mode).
    #[serde(default)]
    pub approved: bool,
    /// Size of the module image in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// How long the module took to download (a Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_duration: Option<String>,
}

string_enum! {
    /// Phase of a ModuleRelease.
    pub enum ModuleReleasePhase {
        /// Waiting to be applied.
        Pending = "Pending",
        /// Applied; the module runs this version.
        Deployed = "Deployed",
        /// Replaced by a newer deployed release.
        Superseded = "Superseded",
        /// Suspended.
        Suspended = "Suspended",
        /// Never applied, for example because a newer patch exists.
        Skipped = "Skipped",
        /// Being deleted.
        Terminating = "Terminating",
    }
}

impl ModuleReleasePhase {
    /// The value of the `status` label for this phase (the phase lower-cased).
    pub fn label(self) -> String {
        self.as_str().to_ascii_lowercase()
    }
}

impl ModuleRelease {
    /// The conventional name of a release: `<module>-v<version>`.
    pub fn name_for(module: &str, version: &str) -> String {
        format!("{module}-v{}", version.trim_start_matches('v'))
    }

    /// Whether the release is manually approved (`modules.deckhouse.io/approved`).
    pub fn is_approved(&self) -> bool {
        keys::flag(
            self.metadata.annotations.as_ref(),
            keys::MODULE_RELEASE_APPROVED,
        )
    }

    /// Whether the release is forced (`modules.deckhouse.io/force` or `release.deckhouse.io/force`).
    pub fn is_forced(&self) -> bool {
        let a = self.metadata.annotations.as_ref();
        let is_true = |k| {
            a.and_then(|a| a.get(k))
                .is_some_and(|v: &String| v == "true")
        };
        is_true(keys::RELEASE_FORCE) || is_true(keys::MODULE_RELEASE_FORCE)
    }

    /// Whether the release should be applied at once (`modules.deckhouse.io/apply-now`).
    pub fn is_apply_now(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::MODULE_RELEASE_APPLY_NOW))
            .is_some_and(|v| v == "true")
    }
}

/// Message of a release waiting for a ModuleUpdatePolicy that does not exist.
pub fn message_policy_not_found(policy: &str) -> String {
    format!("Update policy {policy} not found")
}
/// Message of a release whose ModuleUpdatePolicy has the `Ignore` mode.
pub const MESSAGE_DISABLED_BY_IGNORE_POLICY: &str = "Update disabled by 'Ignore' update policy";
/// Message of a release no ModuleUpdatePolicy could be found for.
pub const MESSAGE_POLICY_NOT_SET: &str =
    "Update policy not set. Create a suitable ModuleUpdatePolicy object";
/// Message of a release whose policy is `Ignore`.
pub const MESSAGE_UPDATE_DISABLED: &str = "Update disabled by 'Ignore' update policy";
/// Denial when a user changes the update-policy label (Deckhouse's admission policy).
pub const MESSAGE_MANUAL_UPDATE_POLICY_CHANGE: &str = "Manual update-policy change is forbidden. Please, remove the update-policy label to automatically find a new suitable policy";
