//! The CNI migration's decisions, pure: the manager's next step from the recorded phase and
//! what it observes, the node agent's next step, which pods a node restarts, and what
//! `d8 network cni-migration switch` refuses.
//!
//! The manager only ever moves forward from the phase recorded in `status.phase`, so a
//! restarted manager resumes there and never repeats a step it finished (the ModuleConfig
//! switches included).

use api::network::{CniMigrationCondition, CniMigrationPhase, TargetCni};

use super::detect::{NodeCni, current_from_nodes};

/// The CNI modules, in the order a detection prefers them.
pub const CNI_MODULES: [TargetCni; 3] = [
    TargetCni::Cilium,
    TargetCni::Flannel,
    TargetCni::SimpleBridge,
];

/// Reason written into `failedSummary` for a node deleted mid-migration.
pub const NODE_DELETED: &str = "the node was deleted during the migration";

/// A node as the manager sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeView {
    /// Node name.
    pub name: String,
    /// The Node object still exists.
    pub exists: bool,
    /// Its agent created its CNINodeMigration.
    pub agent_ready: bool,
    /// `CleanupDone=True` on its CNINodeMigration.
    pub cleaned: bool,
    /// `PodsRestarted=True` on its CNINodeMigration.
    pub pods_restarted: bool,
    /// A failure its agent reported.
    pub failed: Option<String>,
    /// What its agent found in the node's CNI configuration directory (not reported yet:
    /// `None`).
    pub detected: Option<NodeCni>,
}

/// What the manager observes.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// `status.phase` as recorded (`None`: not started).
    pub phase: Option<CniMigrationPhase>,
    /// `spec.targetCNI`.
    pub target: String,
    /// `status.currentCNI` as recorded.
    pub current: Option<String>,
    /// CNI modules enabled through their ModuleConfigs (`cilium`, …).
    pub enabled: Vec<String>,
    /// Every node involved: the cluster's Nodes and every node with a CNINodeMigration.
    pub nodes: Vec<NodeView>,
    /// The target CNI's DaemonSet has every pod ready.
    pub target_ready: bool,
}

/// A change to make before moving on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Act {
    /// Set `spec.enabled` of ModuleConfig `cni-<cni>`.
    Module {
        /// The CNI (`cilium`, …).
        cni: String,
        /// Enabled or not.
        enabled: bool,
    },
}

/// The manager's next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Stay in the phase; say why.
    Wait(String),
    /// The migration cannot go on: set this condition (True) with this message.
    Fail(CniMigrationCondition, String),
    /// Do `act` (if any), then record `phase` with `condition=True`.
    Advance {
        /// What to change first.
        act: Option<Act>,
        /// The phase to record.
        phase: CniMigrationPhase,
        /// The condition that became true.
        condition: CniMigrationCondition,
        /// Its message.
        message: String,
        /// The detected current CNI, recorded once in Preparing.
        current: Option<String>,
    },
}

/// The current CNI: the one enabled CNI module other than the target.
pub fn detect_current(enabled: &[String], target: &str) -> Result<String, String> {
    let others: Vec<&String> = enabled.iter().filter(|c| *c != target).collect();
    match others.as_slice() {
        [one] => Ok((*one).clone()),
        [] if enabled.iter().any(|c| c == target) => {
            Err(format!("the cluster already runs the CNI {target:?}"))
        }
        [] => Err("no enabled CNI module found (ModuleConfig cni-cilium, cni-flannel or cni-simple-bridge)".into()),
        many => Err(format!(
            "more than one CNI module is enabled: {}",
            many.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Nodes that fail the migration: deleted ones, and those whose agent reported a failure.
pub fn failed_nodes(nodes: &[NodeView]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = nodes
        .iter()
        .filter_map(|n| {
            if !n.exists {
                Some((n.name.clone(), NODE_DELETED.to_owned()))
            } else {
                n.failed.clone().map(|r| (n.name.clone(), r))
            }
        })
        .collect();
    out.sort();
    out
}

/// The manager's next step from the recorded phase.
pub fn next(o: &Observed) -> Step {
    use CniMigrationCondition as C;
    use CniMigrationPhase as P;
    let live: Vec<&NodeView> = o
        .nodes
        .iter()
        .filter(|n| n.exists && n.failed.is_none())
        .collect();
    let all = |f: fn(&NodeView) -> bool| live.iter().all(|n| f(n));
    let waiting = |what: &str, f: fn(&NodeView) -> bool| {
        let left: Vec<&str> = live
            .iter()
            .filter(|n| !f(n))
            .map(|n| n.name.as_str())
            .collect();
        Step::Wait(format!("waiting for {what} on nodes: {}", left.join(", ")))
    };
    let advance = |act, phase, condition, message: String| Step::Advance {
        act,
        phase,
        condition,
        message,
        current: None,
    };
    let current = o.current.clone().unwrap_or_default();
    match o.phase {
        None | Some(P::Preparing) => prepare(o),
        Some(P::WaitingForAgents) if all(|n| n.agent_ready) => advance(
            None,
            P::EnablingTargetCni,
            C::AgentsReady,
            "The migration agents run on every node.".into(),
        ),
        Some(P::WaitingForAgents) => waiting("the migration agent", |n| n.agent_ready),
        Some(P::EnablingTargetCni) => advance(
            Some(Act::Module {
                cni: o.target.clone(),
                enabled: true,
            }),
            P::DisablingCurrentCni,
            C::TargetCniEnabled,
            format!("Module 'cni-{}' was enabled.", o.target),
        ),
        Some(P::DisablingCurrentCni) => advance(
            Some(Act::Module {
                cni: current.clone(),
                enabled: false,
            }),
            P::CleaningNodes,
            C::CurrentCniDisabled,
            format!("Module 'cni-{current}' was disabled."),
        ),
        Some(P::CleaningNodes) if all(|n| n.cleaned) => advance(
            None,
            P::WaitingTargetCni,
            C::NodesCleaned,
            "All nodes have been cleaned of the old CNI.".into(),
        ),
        Some(P::CleaningNodes) => waiting("the cleanup", |n| n.cleaned),
        Some(P::WaitingTargetCni) if o.target_ready => advance(
            None,
            P::RestartingPods,
            C::TargetCniReady,
            format!("The CNI {} is ready.", o.target),
        ),
        Some(P::WaitingTargetCni) => {
            Step::Wait(format!("waiting for the CNI {} to become ready", o.target))
        }
        Some(P::RestartingPods) if all(|n| n.pods_restarted) => advance(
            None,
            P::Completed,
            C::Succeeded,
            "CNI migration completed successfully.".into(),
        ),
        Some(P::RestartingPods) => waiting("pod restarts", |n| n.pods_restarted),
        Some(P::Completed) => Step::Wait("completed".into()),
    }
}

/// `Preparing`: the current CNI from the one enabled CNI module (as Deckhouse detects it) or,
/// when no CNI module is enabled, from what every node's agent found in its CNI configuration
/// directory.
fn prepare(o: &Observed) -> Step {
    use CniMigrationCondition as C;
    let detected = match detect_current(&o.enabled, &o.target) {
        Ok(current) => current,
        Err(e) if !o.enabled.is_empty() => return Step::Fail(C::CurrentCniDetectionFailed, e),
        Err(_) => {
            let reports: Vec<(String, Option<NodeCni>)> = o
                .nodes
                .iter()
                .filter(|n| n.exists)
                .map(|n| (n.name.clone(), n.detected.clone()))
                .collect();
            match current_from_nodes(&reports) {
                Ok(Some(current)) if current == o.target => {
                    return Step::Fail(
                        C::CurrentCniDetectionFailed,
                        format!("the cluster already runs the CNI {current:?}"),
                    );
                }
                Ok(Some(current)) => current,
                Ok(None) => {
                    let left: Vec<&str> = reports
                        .iter()
                        .filter(|(_, r)| r.is_none())
                        .map(|(n, _)| n.as_str())
                        .collect();
                    return Step::Wait(format!(
                        "no CNI module is enabled: waiting for the migration agents to report the CNI of nodes: {}",
                        left.join(", ")
                    ));
                }
                Err(e) => return Step::Fail(C::CurrentCniDetectionFailed, e),
            }
        }
    };
    Step::Advance {
        act: None,
        phase: CniMigrationPhase::WaitingForAgents,
        condition: C::EnvironmentPrepared,
        message: format!("Switching from {detected} to {}.", o.target),
        current: Some(detected),
    }
}

/// What `switch` refuses: an unknown CNI, a second migration, the CNI already running.
pub fn refuse_switch(target: &str, existing: &[String], enabled: &[String]) -> Option<String> {
    if CNI_MODULES.iter().all(|c| c.as_str() != target) {
        return Some(format!(
            "invalid --to-cni value {target:?}. Supported values are: cilium, flannel, simple-bridge"
        ));
    }
    if let Some(name) = existing.first() {
        return Some(format!(
            "a CNI migration already exists: {name}. Watch it with 'd8 network cni-migration status' or delete it first"
        ));
    }
    if enabled.len() == 1 && enabled[0] == target {
        return Some(format!(
            "the cluster already runs the CNI {target:?}: nothing to switch"
        ));
    }
    None
}

/// The annotation the agent puts on a node's pod-network pods: the CNI they were started
/// with (Deckhouse's `effective-cni.network.deckhouse.io`). Pods carrying the current CNI
/// are the ones restarted once the target CNI is ready.
pub const EFFECTIVE_CNI_ANNOTATION: &str = "effective-cni.network.deckhouse.io";

/// A pod as the agent sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodView {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.hostNetwork`.
    pub host_network: bool,
    /// Owned by a DaemonSet of a CNI module's namespace (`d8-cni-*`).
    pub cni_daemon: bool,
    /// Already gone (deletion requested).
    pub terminating: bool,
    /// `status.phase` is `Succeeded` or `Failed`: no network to move.
    pub finished: bool,
    /// Its `effective-cni.network.deckhouse.io` annotation.
    pub effective_cni: Option<String>,
}

/// Whether the agent marks this pod as started with `current`: it uses the pod network, still
/// runs, is not the CNI's own, and is not marked yet.
pub fn annotates(pod: &PodView, current: &str) -> bool {
    !pod.host_network
        && !pod.cni_daemon
        && !pod.terminating
        && !pod.finished
        && pod.effective_cni.as_deref() != Some(current)
}

/// Whether the agent restarts (deletes) this pod: it was marked as started with `current`
/// and is not already going.
pub fn restarts(pod: &PodView, current: &str) -> bool {
    pod.effective_cni.as_deref() == Some(current) && !pod.terminating
}

/// What a CNI leaves on a node: its configuration files (in the CNI config directory, matched
/// by name) and its network links.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifacts {
    /// A file of the CNI config directory is the CNI's when its name contains this.
    pub file_marker: &'static str,
    /// The CNI's links (`ip link delete`).
    pub links: &'static [&'static str],
}

/// The artifacts of `cni` (`None`: not a CNI this migration knows).
pub fn artifacts(cni: &str) -> Option<Artifacts> {
    let (file_marker, links): (&str, &[&str]) = match cni {
        "cilium" => ("cilium", &["cilium_host", "cilium_net", "cilium_vxlan"]),
        "flannel" => ("flannel", &["flannel.1", "cni0"]),
        "simple-bridge" => ("simple-bridge", &["cni0"]),
        _ => return None,
    };
    Some(Artifacts { file_marker, links })
}

/// Whether a file of the CNI config directory belongs to the CNI (`.conf`, `.conflist` or
/// `.json` whose name carries the marker).
pub fn is_cni_file(name: &str, artifacts: &Artifacts) -> bool {
    let config = [".conf", ".conflist", ".json"]
        .iter()
        .any(|ext| name.ends_with(ext));
    config && name.contains(artifacts.file_marker)
}

/// The migration that runs when several exist: the oldest, then the smallest name (as
/// Deckhouse's `detect-cni-migration` hook picks it). Items are `(name, creationTimestamp)`.
pub fn active<'a>(migrations: &[(&'a str, Option<jiff::Timestamp>)]) -> Option<&'a str> {
    migrations
        .iter()
        .min_by(|a, b| {
            let key = |m: &(&str, Option<jiff::Timestamp>)| {
                (m.1.unwrap_or(jiff::Timestamp::MAX), m.0.to_owned())
            };
            key(a).cmp(&key(b))
        })
        .map(|m| m.0)
}

/// The node agent's next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentStep {
    /// Nothing to do now.
    Wait,
    /// Annotate the node's pods (phase `PodsAnnotating`, then `PodsAnnotated`).
    AnnotatePods,
    /// Remove the old CNI's files and links (phase `NodeCleaning`, then `CleanupDone`).
    Clean,
    /// Restart the node's pod-network pods (phase `RestartingPods`, then `PodsRestarted`).
    RestartPods,
    /// Record `Completed`.
    Complete,
}

/// What the agent does next, from the cluster's phase and its own conditions.
pub fn agent_next(
    cluster: Option<CniMigrationPhase>,
    annotated: bool,
    cleaned: bool,
    restarted: bool,
    completed: bool,
) -> AgentStep {
    use CniMigrationPhase as P;
    let rank = |p: P| {
        CniMigrationPhase::ALL
            .iter()
            .position(|q| *q == p)
            .unwrap_or(0)
    };
    let Some(phase) = cluster else {
        return AgentStep::Wait;
    };
    if rank(phase) >= rank(P::CleaningNodes) && !annotated {
        return AgentStep::AnnotatePods;
    }
    if rank(phase) >= rank(P::CleaningNodes) && !cleaned {
        return AgentStep::Clean;
    }
    if rank(phase) >= rank(P::RestartingPods) && !restarted {
        return AgentStep::RestartPods;
    }
    if restarted && !completed {
        return AgentStep::Complete;
    }
    AgentStep::Wait
}

#[cfg(test)]
mod tests;
