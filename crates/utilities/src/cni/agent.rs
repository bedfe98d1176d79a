//! The node agent: one per node (a DaemonSet in a cluster, `d8 network cni-migration agent`
//! here). It owns its node's CNINodeMigration (named after the node, owned by the
//! CNIMigration so it goes with it) and follows the cluster's phase ([`plan::agent_next`]):
//! marks the node's pod-network pods with the CNI they started with (`PodsAnnotating`),
//! removes the old CNI's files and links (`NodeCleaning`), deletes the marked pods once the
//! target CNI is ready (`RestartingPods`), then `Completed`. Each step records its phase
//! before it starts and its condition when it ends (`Success`, or `Error` with the message,
//! retried on the next pass).

use std::time::Duration;

use api::network::{
    CNIMigration, CNINodeMigration, CNINodeMigrationSpec, CniMigrationPhase, CniNodeCondition,
    CniNodePhase,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::detect::{self, DETECTED_CNI_ANNOTATION};
use super::plan::{self, AgentStep, PodView};
use super::{active_migration, cleanup, is_true, set_condition};
use crate::Error;

/// Settings of a node agent.
#[derive(Clone, Debug)]
pub struct Options {
    /// The node this agent runs on.
    pub node: String,
    /// Where it cleans.
    pub clean: cleanup::Node,
    /// Time between two passes.
    pub interval: Duration,
}

/// The agent of one node.
#[derive(Clone)]
pub struct Agent {
    client: Client,
    options: Options,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent for `options.node`.
    pub fn new(client: Client, options: Options) -> Self {
        Self { client, options }
    }

    /// Runs passes every interval until `stopped` resolves.
    pub async fn run(&self, stopped: impl std::future::Future<Output = ()>) {
        tokio::pin!(stopped);
        loop {
            if let Err(e) = self.pass().await {
                tracing::warn!(node = %self.options.node, error = %e, "CNI migration agent pass failed");
            }
            tokio::select! {
                _ = &mut stopped => return,
                _ = tokio::time::sleep(self.options.interval) => {}
            }
        }
    }

    /// One pass: at most one step on the node.
    pub async fn pass(&self) -> Result<(), Error> {
        let Some(migration) = active_migration(&self.client).await? else {
            return Ok(());
        };
        let mine = self.own(&migration).await?;
        let mine = self.report_cni(mine).await?;
        let status = mine.status.clone().unwrap_or_default();
        let cluster = migration
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .and_then(|p| p.parse::<CniMigrationPhase>().ok());
        let Some(current) = migration
            .status
            .as_ref()
            .and_then(|s| s.current_cni.clone())
        else {
            return Ok(());
        };
        let done = |c: CniNodeCondition| is_true(&status.conditions, c.as_str());
        let step = plan::agent_next(
            cluster,
            done(CniNodeCondition::PodsAnnotated),
            done(CniNodeCondition::CleanupDone),
            done(CniNodeCondition::PodsRestarted),
            status.phase.as_deref() == Some(CniNodePhase::Completed.as_str()),
        );
        let (phase, condition) = match step {
            AgentStep::Wait => return Ok(()),
            AgentStep::Complete => {
                return self.record(&mine, CniNodePhase::Completed, None).await;
            }
            AgentStep::AnnotatePods => (
                CniNodePhase::PodsAnnotating,
                CniNodeCondition::PodsAnnotated,
            ),
            AgentStep::Clean => (CniNodePhase::NodeCleaning, CniNodeCondition::CleanupDone),
            AgentStep::RestartPods => (
                CniNodePhase::RestartingPods,
                CniNodeCondition::PodsRestarted,
            ),
        };
        let mine = if status.phase.as_deref() == Some(phase.as_str()) {
            mine
        } else {
            self.record_phase(&mine, phase).await?
        };
        let outcome = match step {
            AgentStep::AnnotatePods => self.annotate(&current).await,
            AgentStep::Clean => cleanup::clean(&self.options.clean, &current)
                .await
                .map(|removed| {
                    tracing::info!(node = %self.options.node, files = ?removed.files, links = ?removed.links, "old CNI removed");
                    "Artifacts removed".to_owned()
                }),
            _ => self.restart(&current).await,
        };
        let result = match &outcome {
            Ok(message) => (true, "Success", message.clone()),
            Err(e) => (false, "Error", e.clone()),
        };
        self.record(&mine, phase, Some((condition, result))).await?;
        outcome.map(|_| ()).map_err(Error::Refused)
    }

    /// This node's CNINodeMigration, created (owned by the migration) when missing.
    async fn own(&self, migration: &CNIMigration) -> Result<CNINodeMigration, Error> {
        let api: Api<CNINodeMigration> = Api::all(self.client.clone());
        let node = &self.options.node;
        if let Some(found) = api
            .get_opt(node)
            .await
            .map_err(|e| Error::kube(format!("get CNINodeMigration {node}"), e))?
        {
            return Ok(found);
        }
        let owner = OwnerReference {
            api_version: CNIMigration::api_version(&()).into_owned(),
            kind: CNIMigration::kind(&()).into_owned(),
            name: migration.name_any(),
            uid: migration.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let object = CNINodeMigration {
            metadata: ObjectMeta {
                name: Some(node.clone()),
                owner_references: Some(vec![owner]),
                ..Default::default()
            },
            spec: CNINodeMigrationSpec {},
            status: None,
        };
        tracing::info!(%node, "creating the node's CNINodeMigration");
        api.create(&PostParams::default(), &object)
            .await
            .map_err(|e| Error::kube(format!("create CNINodeMigration {node}"), e))
    }

    /// Reports once, on its CNINodeMigration, which CNI the node's configuration directory
    /// holds (before anything is cleaned): the manager's detection when no CNI module is
    /// enabled.
    async fn report_cni(&self, mine: CNINodeMigration) -> Result<CNINodeMigration, Error> {
        if mine.annotations().contains_key(DETECTED_CNI_ANNOTATION) {
            return Ok(mine);
        }
        let files =
            cleanup::read_config_files(&self.options.clean.cni_conf_dir).map_err(Error::Refused)?;
        let report = detect::node_cni(&files).report();
        tracing::info!(node = %self.options.node, cni = %report, "the node's CNI configuration");
        let api: Api<CNINodeMigration> = Api::all(self.client.clone());
        api.patch(
            &self.options.node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {DETECTED_CNI_ANNOTATION: report}}})),
        )
        .await
        .map_err(|e| Error::kube(format!("report the CNI of node {}", self.options.node), e))
    }

    async fn record_phase(
        &self,
        mine: &CNINodeMigration,
        phase: CniNodePhase,
    ) -> Result<CNINodeMigration, Error> {
        let api: Api<CNINodeMigration> = Api::all(self.client.clone());
        api.patch_status(
            &self.options.node,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase.as_str()}})),
        )
        .await
        .map_err(|e| Error::kube(format!("record phase {phase} of {}", mine.name_any()), e))
    }

    /// Records `phase` and, when given, a condition `(type, (ok, reason, message))`.
    async fn record(
        &self,
        mine: &CNINodeMigration,
        phase: CniNodePhase,
        condition: Option<(CniNodeCondition, (bool, &str, String))>,
    ) -> Result<(), Error> {
        let mut conditions = mine
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        if let Some((type_, (ok, reason, message))) = condition {
            set_condition(
                &mut conditions,
                type_.as_str(),
                ok,
                reason,
                &message,
                Timestamp::now(),
            );
        }
        let api: Api<CNINodeMigration> = Api::all(self.client.clone());
        api.patch_status(
            &self.options.node,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase.as_str(), "conditions": conditions}})),
        )
        .await
        .map_err(|e| Error::kube(format!("record the status of {}", mine.name_any()), e))?;
        Ok(())
    }

    async fn pods(&self) -> Result<Vec<PodView>, String> {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let list = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={}", self.options.node)))
            .await
            .map_err(|e| format!("listing the pods of node {}: {e}", self.options.node))?;
        Ok(list.items.iter().map(view).collect())
    }

    async fn annotate(&self, current: &str) -> Result<String, String> {
        let mut marked = 0;
        for pod in self.pods().await? {
            if !plan::annotates(&pod, current) {
                continue;
            }
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
            let patch =
                json!({"metadata": {"annotations": {plan::EFFECTIVE_CNI_ANNOTATION: current}}});
            match api
                .patch(&pod.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => marked += 1,
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    return Err(format!(
                        "annotating pod {}/{}: {e}",
                        pod.namespace, pod.name
                    ));
                }
            }
        }
        tracing::info!(node = %self.options.node, marked, "pods annotated");
        Ok("Pods annotated".into())
    }

    async fn restart(&self, current: &str) -> Result<String, String> {
        let mut deleted = 0;
        for pod in self.pods().await? {
            if !plan::restarts(&pod, current) {
                continue;
            }
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
            match api.delete(&pod.name, &DeleteParams::default()).await {
                Ok(_) => deleted += 1,
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(format!("deleting pod {}/{}: {e}", pod.namespace, pod.name)),
            }
            tracing::info!(node = %self.options.node, pod = %pod.name, namespace = %pod.namespace, "pod restarted");
        }
        Ok(format!("{deleted} pods restarted"))
    }
}

/// How the plan sees a pod.
fn view(pod: &Pod) -> PodView {
    let namespace = pod.namespace().unwrap_or_default();
    let daemon = pod.owner_references().iter().any(|o| o.kind == "DaemonSet");
    PodView {
        cni_daemon: daemon && namespace.starts_with("d8-cni-"),
        namespace,
        name: pod.name_any(),
        host_network: pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        finished: pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed"),
        effective_cni: pod
            .annotations()
            .get(plan::EFFECTIVE_CNI_ANNOTATION)
            .cloned(),
    }
}
