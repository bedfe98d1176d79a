//! `CNIMigration` and `CNINodeMigration` (group `network.deckhouse.io`): switching the cluster's
//! CNI, as a whole and per node.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::macros::string_enum;

/// Which CNI to switch to.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "network.deckhouse.io",
    version = "v1alpha1",
    kind = "CNIMigration",
    plural = "cnimigrations",
    singular = "cnimigration",
    shortname = "cnimig",
    status = "CNIMigrationStatus",
    doc = "A switch of the cluster's CNI. Creating it starts the migration; deleting it removes the migration components."
)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct CNIMigrationSpec {
    /// The CNI to switch to: `cilium`, `flannel` or `simple-bridge`.
    #[serde(
        rename = "targetCNI",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub target_cni: String,
    /// Older clients: the phase the d8 CLI commands (`Prepare`, `Migrate`, `Cleanup`, `Abort`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

/// Observed state of a CNIMigration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CNIMigrationStatus {
    /// Current step (see [`CniMigrationPhase`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The CNI being switched from.
    #[serde(
        rename = "currentCNI",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub current_cni: Option<String>,
    /// Nodes involved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes_total: Option<i64>,
    /// Nodes done with the current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes_succeeded: Option<i64>,
    /// Nodes that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes_failed: Option<i64>,
    /// The failed nodes and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "failed_summary_schema")]
    pub failed_summary: Vec<FailedNode>,
    /// State of the migration as a whole; `Succeeded=True` when done.
    // A plain list, as Deckhouse's CRD has it (no list-type markers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// `failedSummary` as Deckhouse's CRD declares it: neither field is required.
fn failed_summary_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "The failed nodes and why.",
        "type": "array",
        "items": {
            "description": "A node where the migration failed.",
            "type": "object",
            "properties": {
                "node": {"description": "Node name.", "type": "string"},
                "reason": {"description": "Why it failed.", "type": "string"},
            },
        },
    })
}

/// A node where the migration failed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FailedNode {
    /// Node name.
    #[serde(default)]
    pub node: String,
    /// Why it failed.
    #[serde(default)]
    pub reason: String,
}

string_enum! {
    /// Target CNIs.
    pub enum TargetCni {
        /// Cilium.
        Cilium = "cilium",
        /// Flannel.
        Flannel = "flannel",
        /// Simple bridge.
        SimpleBridge = "simple-bridge",
    }
}

string_enum! {
    /// Phases of a CNIMigration, in order.
    pub enum CniMigrationPhase {
        /// Validating and preparing the environment.
        Preparing = "Preparing",
        /// Waiting for the agents on every node.
        WaitingForAgents = "WaitingForAgents",
        /// Enabling the target CNI module.
        EnablingTargetCni = "EnablingTargetCNI",
        /// Disabling the current CNI module.
        DisablingCurrentCni = "DisablingCurrentCNI",
        /// Agents clean the old CNI off the nodes.
        CleaningNodes = "CleaningNodes",
        /// Waiting for the target CNI to be ready.
        WaitingTargetCni = "WaitingTargetCNI",
        /// Restarting pods onto the new network.
        RestartingPods = "RestartingPods",
        /// Done.
        Completed = "Completed",
    }
}

string_enum! {
    /// Condition types of a CNIMigration.
    pub enum CniMigrationCondition {
        /// The environment is prepared.
        EnvironmentPrepared = "EnvironmentPrepared",
        /// The current CNI could not be detected.
        CurrentCniDetectionFailed = "CurrentCNIDetectionFailed",
        /// The agents run.
        AgentsReady = "AgentsReady",
        /// The target CNI is enabled.
        TargetCniEnabled = "TargetCNIEnabled",
        /// The current CNI is disabled.
        CurrentCniDisabled = "CurrentCNIDisabled",
        /// The nodes are cleaned.
        NodesCleaned = "NodesCleaned",
        /// The target CNI is ready.
        TargetCniReady = "TargetCNIReady",
        /// The pods were restarted.
        PodsRestarted = "PodsRestarted",
        /// The migration succeeded.
        Succeeded = "Succeeded",
    }
}

/// Per-node progress of a CNI migration (empty spec; one object per node, named after it).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "network.deckhouse.io",
    version = "v1alpha1",
    kind = "CNINodeMigration",
    plural = "cninodemigrations",
    singular = "cninodemigration",
    shortname = "cninm",
    status = "CNINodeMigrationStatus",
    doc = "Progress of a CNI migration on one node, reported by the node's agent."
)]
#[serde(remote = "Self")]
pub struct CNINodeMigrationSpec {}

crate::macros::spec_may_be_absent!(CNIMigrationSpec);
crate::macros::spec_may_be_absent!(CNINodeMigrationSpec);

impl JsonSchema for CNINodeMigrationSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CNINodeMigrationSpec".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "Empty: the configuration comes from the CNIMigration.",
        })
    }
}

/// Observed state of a CNINodeMigration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CNINodeMigrationStatus {
    /// Phase of this node (see [`CniNodePhase`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The steps performed on the node.
    // A plain list, as Deckhouse's CRD has it (no list-type markers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

string_enum! {
    /// Phases of a CNINodeMigration.
    pub enum CniNodePhase {
        /// Annotating the node's pods.
        PodsAnnotating = "PodsAnnotating",
        /// Cleaning the node.
        NodeCleaning = "NodeCleaning",
        /// Restarting the node's pods.
        RestartingPods = "RestartingPods",
        /// Done.
        Completed = "Completed",
    }
}

string_enum! {
    /// Condition types of a CNINodeMigration.
    pub enum CniNodeCondition {
        /// The node's pods are annotated.
        PodsAnnotated = "PodsAnnotated",
        /// The node is cleaned.
        CleanupDone = "CleanupDone",
        /// The node's pods were restarted.
        PodsRestarted = "PodsRestarted",
    }
}
