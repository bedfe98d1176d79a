//! Condition shapes. Deckhouse uses three: the standard `metav1.Condition`
//! ([`k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition`]), the older free-form one on
//! Module and ApplicationPackageVersion ([`ModuleCondition`]), and the one the registry kinds
//! declare ([`RegistryCondition`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// `True`, `False` or `Unknown`, as Kubernetes spells condition statuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The condition could not be determined.
    Unknown,
}

impl ConditionStatus {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// A condition of a Module (and of an ApplicationPackageVersion): every field optional, merged by
/// `type`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleCondition {
    /// Condition type, for example `IsReady`.
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Machine-readable reason of the last transition (the extender that decided, for example).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the condition was last probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// A condition of the registry kinds: `type`, `status`, `lastTransitionTime` and `reason` are
/// required.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryCondition {
    /// The condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// The condition status.
    pub status: ConditionStatus,
    /// The `spec` generation the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the condition last changed.
    pub last_transition_time: Time,
    /// A machine-readable reason for the condition.
    pub reason: String,
    /// A human-readable explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
