//! A module's readiness from its workloads, as `kubectl rollout status` and Helm's `--wait`
//! judge them: Deployments, StatefulSets and DaemonSets rolled out and available, Jobs
//! complete. Other kinds are ready once they exist. Pure.

use serde_json::Value;

/// One workload's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Ready.
    Ready,
    /// Not yet: why.
    Waiting(String),
    /// Will not become ready without a change (a failed Job).
    Failed(String),
}

fn int(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn name(v: &Value) -> String {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    let ns = v.pointer("/metadata/namespace").and_then(Value::as_str);
    let n = v
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match ns {
        Some(ns) => format!("{kind} {ns}/{n}"),
        None => format!("{kind} {n}"),
    }
}

fn condition(v: &Value, type_: &str) -> Option<bool> {
    v.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .map(|c| c.get("status").and_then(Value::as_str) == Some("True"))
}

/// The readiness of one object as read from the cluster.
pub fn of(object: &Value) -> Readiness {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let generation = int(object, "/metadata/generation");
    let observed = int(object, "/status/observedGeneration");
    let waiting = |what: String| Readiness::Waiting(format!("{}: {what}", name(object)));
    match kind {
        "Deployment" | "StatefulSet" => {
            if observed < generation {
                return waiting("the new spec is not observed yet".into());
            }
            let want = object
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let updated = int(object, "/status/updatedReplicas");
            let ready = if kind == "Deployment" {
                int(object, "/status/availableReplicas")
            } else {
                int(object, "/status/readyReplicas")
            };
            if updated < want {
                waiting(format!("{updated} of {want} updated replicas"))
            } else if ready < want {
                waiting(format!("{ready} of {want} replicas available"))
            } else {
                Readiness::Ready
            }
        }
        "DaemonSet" => {
            if observed < generation {
                return waiting("the new spec is not observed yet".into());
            }
            let want = int(object, "/status/desiredNumberScheduled");
            let updated = int(object, "/status/updatedNumberScheduled");
            let available = int(object, "/status/numberAvailable");
            if updated < want {
                waiting(format!("{updated} of {want} updated pods"))
            } else if available < want {
                waiting(format!("{available} of {want} pods available"))
            } else {
                Readiness::Ready
            }
        }
        "Job" => {
            if condition(object, "Failed") == Some(true) {
                Readiness::Failed(format!("{}: the job failed", name(object)))
            } else if condition(object, "Complete") == Some(true) {
                Readiness::Ready
            } else {
                waiting("the job is not complete".into())
            }
        }
        _ => Readiness::Ready,
    }
}

/// Whether an object of this kind is a workload whose status must be read.
pub fn is_workload(kind: &str) -> bool {
    matches!(kind, "Deployment" | "StatefulSet" | "DaemonSet" | "Job")
}

/// The module's readiness: the first failure, else the first wait, else ready.
pub fn module(states: &[Readiness]) -> Readiness {
    if let Some(f) = states.iter().find(|s| matches!(s, Readiness::Failed(_))) {
        return f.clone();
    }
    states
        .iter()
        .find(|s| matches!(s, Readiness::Waiting(_)))
        .cloned()
        .unwrap_or(Readiness::Ready)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn workloads() {
        let deploy = |generation: i64, status: Value| {
            json!({"kind": "Deployment", "metadata": {"name": "d", "namespace": "n", "generation": generation},
                "spec": {"replicas": 2}, "status": status})
        };
        let rows: Vec<(Value, Readiness)> = vec![
            (
                deploy(
                    2,
                    json!({"observedGeneration": 1, "updatedReplicas": 2, "availableReplicas": 2}),
                ),
                Readiness::Waiting("Deployment n/d: the new spec is not observed yet".into()),
            ),
            (
                deploy(
                    1,
                    json!({"observedGeneration": 1, "updatedReplicas": 1, "availableReplicas": 2}),
                ),
                Readiness::Waiting("Deployment n/d: 1 of 2 updated replicas".into()),
            ),
            (
                deploy(
                    1,
                    json!({"observedGeneration": 1, "updatedReplicas": 2, "availableReplicas": 1}),
                ),
                Readiness::Waiting("Deployment n/d: 1 of 2 replicas available".into()),
            ),
            (
                deploy(
                    1,
                    json!({"observedGeneration": 1, "updatedReplicas": 2, "availableReplicas": 2}),
                ),
                Readiness::Ready,
            ),
            (
                deploy(1, json!(null)),
                Readiness::Waiting("Deployment n/d: the new spec is not observed yet".into()),
            ),
            (
                json!({"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": 1},
                    "status": {"updatedReplicas": 1, "readyReplicas": 1}}),
                Readiness::Ready,
            ),
            (
                json!({"kind": "DaemonSet", "metadata": {"name": "ds"},
                    "status": {"desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 2}}),
                Readiness::Waiting("DaemonSet ds: 2 of 3 pods available".into()),
            ),
            (
                json!({"kind": "DaemonSet", "metadata": {"name": "ds"},
                    "status": {"desiredNumberScheduled": 0}}),
                Readiness::Ready,
            ),
            (
                json!({"kind": "Job", "metadata": {"name": "j"}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}),
                Readiness::Ready,
            ),
            (
                json!({"kind": "Job", "metadata": {"name": "j"}, "status": {"conditions": [{"type": "Failed", "status": "True"}]}}),
                Readiness::Failed("Job j: the job failed".into()),
            ),
            (
                json!({"kind": "Job", "metadata": {"name": "j"}}),
                Readiness::Waiting("Job j: the job is not complete".into()),
            ),
            (
                json!({"kind": "ConfigMap", "metadata": {"name": "c"}}),
                Readiness::Ready,
            ),
        ];
        for (object, want) in rows {
            assert_eq!(of(&object), want, "{object}");
        }
    }

    #[test]
    fn module_takes_the_worst() {
        let w = Readiness::Waiting("w".into());
        let f = Readiness::Failed("f".into());
        assert_eq!(module(&[]), Readiness::Ready);
        assert_eq!(module(&[Readiness::Ready, w.clone()]), w);
        assert_eq!(module(&[w, f.clone(), Readiness::Ready]), f);
        assert!(is_workload("Job") && !is_workload("ConfigMap"));
    }
}
