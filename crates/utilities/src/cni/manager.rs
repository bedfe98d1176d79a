//! The migration manager: one per cluster (a control-plane Deployment in Deckhouse; here
//! `d8 controller`, under the platform Lease, or `d8 network cni-migration manager`). Each pass
//! observes the CNIMigration, the CNI ModuleConfigs, the Nodes, the CNINodeMigrations and the
//! target CNI's DaemonSets, asks [`plan::next`] for the step, makes the change (a ModuleConfig
//! switch) and only then records the next phase. A manager killed at any point resumes from the
//! recorded phase; the only thing it may do twice is set a ModuleConfig to the value it already
//! has.

use std::sync::Arc;
use std::time::Duration;

use api::module_config::{ModuleConfig, ModuleConfigSpec};
use api::network::{
    CNIMigration, CNINodeMigration, CniMigrationCondition, CniMigrationPhase, CniNodeCondition,
    CniNodePhase, FailedNode,
};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use release_controller::{Clock, SystemClock};
use serde_json::json;

use super::detect::{DETECTED_CNI_ANNOTATION, NodeCni};
use super::plan::{self, Act, NodeView, Observed, Step};
use super::{active_migration, is_true, set_condition};
use crate::Error;

/// Settings of the manager.
#[derive(Clone, Debug)]
pub struct Options {
    /// Time between two passes.
    pub interval: Duration,
    /// Where "now" comes from (conditions' transition times).
    pub clock: Arc<dyn Clock>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(5),
            clock: Arc::new(SystemClock),
        }
    }
}

/// The migration manager.
#[derive(Clone)]
pub struct Manager {
    client: Client,
    options: Options,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The CNI modules whose ModuleConfig enables them (`cilium`, …).
pub async fn enabled_cnis(client: &Client) -> Result<Vec<String>, Error> {
    let configs: Api<ModuleConfig> = Api::all(client.clone());
    let list = configs
        .list(&Default::default())
        .await
        .map_err(|e| Error::kube("list ModuleConfigs", e))?;
    let mut enabled: Vec<String> = list
        .items
        .iter()
        .filter(|c| c.spec.enabled == Some(true))
        .filter_map(|c| c.name_any().strip_prefix("cni-").map(str::to_owned))
        .filter(|cni| plan::CNI_MODULES.iter().any(|m| m.as_str() == cni))
        .collect();
    enabled.sort();
    Ok(enabled)
}

/// The reason written with each condition of the migration.
fn reason(condition: CniMigrationCondition) -> &'static str {
    use CniMigrationCondition as C;
    match condition {
        C::EnvironmentPrepared => "CurrentCNIDetected",
        C::CurrentCniDetectionFailed => "CNIDetectionError",
        C::AgentsReady => "AllAgentsRunning",
        C::TargetCniEnabled => "ModuleEnabled",
        C::CurrentCniDisabled => "ModuleDisabled",
        C::NodesCleaned => "AllNodesCleanedUp",
        C::TargetCniReady => "DaemonSetReady",
        C::PodsRestarted => "AllPodsRestarted",
        C::Succeeded => "MigrationComplete",
    }
}

impl Manager {
    /// A manager talking to `client`.
    pub fn new(client: Client, options: Options) -> Self {
        Self { client, options }
    }

    /// Runs passes every interval until `stopped` resolves.
    pub async fn run(&self, stopped: impl std::future::Future<Output = ()>) {
        tokio::pin!(stopped);
        loop {
            if let Err(e) = self.pass().await {
                tracing::warn!(error = %e, "CNI migration pass failed");
            }
            tokio::select! {
                _ = &mut stopped => return,
                _ = tokio::time::sleep(self.options.interval) => {}
            }
        }
    }

    /// One pass: at most one phase forward. Returns the phase recorded at the end (`None`:
    /// no migration).
    pub async fn pass(&self) -> Result<Option<CniMigrationPhase>, Error> {
        let Some(migration) = active_migration(&self.client).await? else {
            return Ok(None);
        };
        let name = migration.name_any();
        let status = migration.status.clone().unwrap_or_default();
        let phase = status
            .phase
            .as_deref()
            .and_then(|p| p.parse::<CniMigrationPhase>().ok());
        let Some(phase) = phase else {
            // Started: recorded before anything is looked at.
            tracing::info!(migration = %name, "CNI migration started");
            self.patch_status(
                &name,
                json!({"phase": CniMigrationPhase::Preparing.as_str()}),
            )
            .await?;
            return Ok(Some(CniMigrationPhase::Preparing));
        };
        let (observed, succeeded) = self.observe(&migration, phase).await?;
        let failed = plan::failed_nodes(&observed.nodes);
        let mut conditions = status.conditions.clone();
        let mut patch = json!({
            "nodesTotal": observed.nodes.len(),
            "nodesSucceeded": succeeded,
            "nodesFailed": failed.len(),
            "failedSummary": failed
                .iter()
                .map(|(node, reason)| FailedNode { node: node.clone(), reason: reason.clone() })
                .collect::<Vec<_>>(),
        });
        let now = self.options.clock.now();
        let mut recorded = phase;
        match plan::next(&observed) {
            Step::Wait(why) => tracing::debug!(migration = %name, %phase, %why, "waiting"),
            Step::Fail(condition, message) => {
                tracing::warn!(migration = %name, %message, "CNI migration cannot go on");
                set_condition(
                    &mut conditions,
                    condition.as_str(),
                    true,
                    reason(condition),
                    &message,
                    now,
                );
            }
            Step::Advance {
                act,
                phase: next,
                condition,
                message,
                current,
            } => {
                if let Some(Act::Module { cni, enabled }) = act {
                    self.switch_module(&cni, enabled).await?;
                }
                use CniMigrationCondition as C;
                // A detection that failed before and works now leaves no failure behind.
                conditions.retain(|c| c.type_ != C::CurrentCniDetectionFailed.as_str());
                set_condition(
                    &mut conditions,
                    condition.as_str(),
                    true,
                    reason(condition),
                    &message,
                    now,
                );
                if next == CniMigrationPhase::Completed {
                    set_condition(
                        &mut conditions,
                        C::PodsRestarted.as_str(),
                        true,
                        reason(C::PodsRestarted),
                        "Pods using the pod network were restarted on every node.",
                        now,
                    );
                }
                patch["phase"] = json!(next.as_str());
                if let Some(current) = current {
                    patch["currentCNI"] = json!(current);
                }
                tracing::info!(migration = %name, from = %phase, to = %next, %message, "CNI migration phase");
                recorded = next;
            }
        }
        patch["conditions"] = json!(conditions);
        self.patch_status(&name, patch).await?;
        Ok(Some(recorded))
    }

    /// What [`plan::next`] needs, and how many nodes completed.
    async fn observe(
        &self,
        migration: &CNIMigration,
        phase: CniMigrationPhase,
    ) -> Result<(Observed, usize), Error> {
        let status = migration.status.clone().unwrap_or_default();
        let target = migration.spec.target_cni.to_lowercase();
        let nodes: Api<Node> = Api::all(self.client.clone());
        let nodes = nodes
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list Nodes", e))?;
        let node_names: Vec<String> = nodes.items.iter().map(|n| n.name_any()).collect();
        let per_node: Api<CNINodeMigration> = Api::all(self.client.clone());
        let per_node = per_node
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list CNINodeMigrations", e))?;
        let mut views: Vec<NodeView> = node_names
            .iter()
            .map(|n| NodeView {
                name: n.clone(),
                exists: true,
                ..Default::default()
            })
            .collect();
        let mut succeeded = 0;
        for m in &per_node.items {
            let owned = m
                .owner_references()
                .iter()
                .any(|o| Some(&o.uid) == migration.metadata.uid.as_ref());
            if !owned {
                continue;
            }
            let name = m.name_any();
            let s = m.status.clone().unwrap_or_default();
            if s.phase.as_deref() == Some(CniNodePhase::Completed.as_str()) {
                succeeded += 1;
            }
            let idx = match views.iter().position(|v| v.name == name) {
                Some(i) => i,
                None => {
                    views.push(NodeView {
                        name: name.clone(),
                        exists: false,
                        ..Default::default()
                    });
                    views.len() - 1
                }
            };
            let v = &mut views[idx];
            v.agent_ready = true;
            v.detected = m
                .annotations()
                .get(DETECTED_CNI_ANNOTATION)
                .and_then(|r| NodeCni::parse(r));
            v.cleaned = is_true(&s.conditions, CniNodeCondition::CleanupDone.as_str());
            v.pods_restarted = is_true(&s.conditions, CniNodeCondition::PodsRestarted.as_str());
            v.failed = s
                .conditions
                .iter()
                .find(|c| c.status == "False" && c.reason == "Error")
                .map(|c| format!("{}: {}", c.type_, c.message));
        }
        let target_ready = if phase == CniMigrationPhase::WaitingTargetCni {
            self.target_ready(&target).await?
        } else {
            false
        };
        let enabled = if matches!(phase, CniMigrationPhase::Preparing) {
            enabled_cnis(&self.client).await?
        } else {
            Vec::new()
        };
        Ok((
            Observed {
                phase: Some(phase),
                target,
                current: status.current_cni,
                enabled,
                nodes: views,
                target_ready,
            },
            succeeded,
        ))
    }

    /// Every DaemonSet of the target CNI's namespace (`d8-cni-<target>`) has all its pods ready.
    async fn target_ready(&self, target: &str) -> Result<bool, Error> {
        let namespace = format!("d8-cni-{target}");
        let sets: Api<DaemonSet> = Api::namespaced(self.client.clone(), &namespace);
        let list = sets
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube(format!("list DaemonSets in {namespace}"), e))?;
        Ok(!list.items.is_empty()
            && list.items.iter().all(|d| {
                d.status.as_ref().is_some_and(|s| {
                    s.desired_number_scheduled > 0 && s.number_ready >= s.desired_number_scheduled
                })
            }))
    }

    /// Sets `spec.enabled` of ModuleConfig `cni-<cni>` (created when missing).
    async fn switch_module(&self, cni: &str, enabled: bool) -> Result<(), Error> {
        let name = format!("cni-{cni}");
        let configs: Api<ModuleConfig> = Api::all(self.client.clone());
        let found = configs
            .get_opt(&name)
            .await
            .map_err(|e| Error::kube(format!("get ModuleConfig {name}"), e))?;
        match found {
            Some(c) if c.spec.enabled == Some(enabled) => return Ok(()),
            Some(_) => {
                configs
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"enabled": enabled}})),
                    )
                    .await
                    .map_err(|e| Error::kube(format!("switch ModuleConfig {name}"), e))?;
            }
            None => {
                let config = ModuleConfig {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        ..Default::default()
                    },
                    spec: ModuleConfigSpec {
                        enabled: Some(enabled),
                        ..Default::default()
                    },
                    status: None,
                };
                configs
                    .create(&PostParams::default(), &config)
                    .await
                    .map_err(|e| Error::kube(format!("create ModuleConfig {name}"), e))?;
            }
        }
        tracing::info!(module = %name, enabled, "CNI module switched");
        Ok(())
    }

    async fn patch_status(&self, name: &str, status: serde_json::Value) -> Result<(), Error> {
        let api: Api<CNIMigration> = Api::all(self.client.clone());
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map_err(|e| Error::kube(format!("record the status of CNIMigration {name}"), e))?;
        Ok(())
    }
}
