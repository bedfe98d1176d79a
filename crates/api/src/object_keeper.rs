//! `ObjectKeeper` (`objectkeepers.deckhouse.io`): keeps the objects that have it as an owner
//! alive while another object exists and/or for a time-to-live, then deletes itself so that the
//! garbage collector removes them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::macros::string_enum;

/// Message of the rule: a follow mode needs `followObjectRef`.
pub const MSG_FOLLOW_REF_REQUIRED: &str =
    "followObjectRef is required when mode is FollowObject or FollowObjectWithTTL";
/// Message of the rule: a TTL mode needs `ttl`.
pub const MSG_TTL_REQUIRED: &str = "ttl is required when mode is TTL or FollowObjectWithTTL";
/// Message of the rule: `TTL` mode forbids `followObjectRef`.
pub const MSG_FOLLOW_REF_FORBIDDEN: &str = "followObjectRef must not be set when mode is TTL";
/// Message of the rule: `FollowObject` mode forbids `ttl`.
pub const MSG_TTL_FORBIDDEN: &str = "ttl must not be set when mode is FollowObject";

/// How long to retain, and following what.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "ObjectKeeper",
    status = "ObjectKeeperStatus",
    doc = "Deferred and cascaded deletion: objects owned by the keeper live while the followed object exists and/or until the TTL expires; then the keeper deletes itself and the garbage collector removes them.",
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "FollowObject",
        type_ = "string",
        json_path = ".spec.followObjectRef.name"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.mode in ['FollowObject','FollowObjectWithTTL'] ? has(self.followObjectRef) : true", "message": MSG_FOLLOW_REF_REQUIRED},
    {"rule": "self.mode in ['TTL','FollowObjectWithTTL'] ? has(self.ttl) : true", "message": MSG_TTL_REQUIRED},
    {"rule": "self.mode == 'TTL' ? !has(self.followObjectRef) : true", "message": MSG_FOLLOW_REF_FORBIDDEN},
    {"rule": "self.mode == 'FollowObject' ? !has(self.ttl) : true", "message": MSG_TTL_FORBIDDEN},
]))]
pub struct ObjectKeeperSpec {
    /// `FollowObject`: live while the referenced object exists. `TTL`: live for `ttl` after
    /// creation. `FollowObjectWithTTL`: live until `ttl` after the referenced object is gone.
    pub mode: ObjectKeeperMode,
    /// The namespaced object to follow; required with the follow modes. A different UID means
    /// the object was recreated, which counts as gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_object_ref: Option<FollowObjectRef>,
    /// How long to keep (a Go duration such as `24h`); required with the TTL modes. With
    /// `FollowObjectWithTTL` it counts from when the followed object disappeared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
}

string_enum! {
    /// Retention mode of an ObjectKeeper.
    #[derive(Default)]
    pub enum ObjectKeeperMode {
        /// Live while the followed object exists.
        #[default]
        FollowObject = "FollowObject",
        /// Live for a fixed time after creation.
        Ttl = "TTL",
        /// Live for a fixed time after the followed object is gone.
        FollowObjectWithTtl = "FollowObjectWithTTL",
    }
}

/// The object an ObjectKeeper follows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FollowObjectRef {
    /// API version of the object.
    pub api_version: String,
    /// Kind of the object.
    pub kind: String,
    /// Namespace of the object.
    pub namespace: String,
    /// Name of the object.
    pub name: String,
    /// UID of the object, to tell deletion and recreation apart.
    pub uid: String,
}

/// Observed state of an ObjectKeeper.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectKeeperStatus {
    /// Conditions (type `Active`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::standard_condition_list")]
    pub conditions: Vec<Condition>,
    /// Details, e.g. "Following object v1/ConfigMap/x" or "TTL expires at …".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ObjectKeeperPhase>,
    /// When the followed object was found missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_at: Option<Time>,
}

string_enum! {
    /// Phase of an ObjectKeeper.
    pub enum ObjectKeeperPhase {
        /// The reference cannot be followed yet.
        Pending = "Pending",
        /// Following the object.
        Tracking = "Tracking",
        /// Waiting for the TTL to run out.
        Expiring = "Expiring",
    }
}

/// Condition type of an ObjectKeeper.
pub const CONDITION_ACTIVE: &str = "Active";
/// Condition reason: `followObjectRef` is missing.
pub const REASON_MISSING_FOLLOW_OBJECT_REF: &str = "MissingFollowObjectRef";
/// Condition reason: `followObjectRef.apiVersion` cannot be parsed.
pub const REASON_INVALID_API_VERSION: &str = "InvalidAPIVersion";
