//! `DeckhouseRelease` (`deckhousereleases.deckhouse.io`): one platform version from the release
//! channel. Named after the version (`v1.69.3`). Manual approval is the top-level `approved`
//! field: `kubectl patch DeckhouseRelease v1.69.3 --type=merge -p '{"approved": true}'`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::keys;
use crate::macros::string_enum;

/// The root fields of a DeckhouseRelease besides `metadata` and `status`: the top-level
/// `approved` and the `spec`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "DeckhouseRelease",
    no_spec,
    status = "DeckhouseReleaseStatus",
    doc = "A Deckhouse platform release, created from the release channel. Approve it in Manual mode by setting the top-level `approved: true`.",
    printcolumn(
        name = "phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Current release status."
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
pub struct DeckhouseReleaseFields {
    /// Manual approval of the release. Ignored in the `Auto` update mode.
    #[serde(default)]
    pub approved: bool,
    /// The release.
    pub spec: DeckhouseReleaseSpec,
}

/// The release itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeckhouseReleaseSpec {
    /// Deckhouse version, for example `v1.24.20`.
    pub version: String,
    /// The release is held until this time (canary waves, notification delay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::plain_string")]
    pub apply_after: Option<Time>,
    /// Requirements the cluster must meet, e.g. `{"k8s": "1.19"}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requirements: BTreeMap<String, String>,
    /// Deprecated: disruptive changes of the release.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disruptions: Vec<String>,
    /// Changelog of the enabled modules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub changelog: Option<serde_json::Value>,
    /// Link to the full changelog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changelog_link: Option<String>,
}

/// Observed state of a DeckhouseRelease.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeckhouseReleaseStatus {
    /// Release phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<DeckhouseReleasePhase>,
    /// Why the release is in its phase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the phase last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::plain_string")]
    pub transition_time: Option<Time>,
    /// The release may be deployed (meaningful in `Manual` mode).
    #[serde(default)]
    pub approved: bool,
}

string_enum! {
    /// Phase of a DeckhouseRelease.
    pub enum DeckhouseReleasePhase {
        /// Waiting to be applied.
        Pending = "Pending",
        /// Applied.
        Deployed = "Deployed",
        /// Deprecated.
        Outdated = "Outdated",
        /// Suspended by the release channel.
        Suspended = "Suspended",
        /// Replaced by a newer deployed release.
        Superseded = "Superseded",
        /// Never applied.
        Skipped = "Skipped",
    }
}

impl DeckhouseRelease {
    /// Whether the release is manually approved: the top-level `approved`, or the
    /// `release.deckhouse.io/approved: "true"` annotation.
    pub fn is_manually_approved(&self) -> bool {
        self.spec.approved
            || self
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys::RELEASE_APPROVED))
                .is_some_and(|v| v == "true")
    }
}

/// Message of a release restored from the running version.
pub const MESSAGE_RESTORED: &str = "Release object was restored";
/// Message of a suspended release.
pub const MESSAGE_SUSPENDED: &str = "Release is suspended";
/// Message of a release skipped by the cleanup.
pub const MESSAGE_SKIPPED_BY_CLEANUP: &str = "Skipped by cleanup hook";
