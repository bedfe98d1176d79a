//! `d8 network cni-migration switch` and `status`: the operator's side. `switch` only creates
//! the CNIMigration (the manager and the agents do the work); `status` shows the cluster's
//! phase and a table of nodes.

use api::network::{
    CNIMigration, CNIMigrationSpec, CNINodeMigration, CniMigrationCondition, CniNodeCondition,
};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client, ResourceExt};

use super::{active_migration, is_true, manager, plan};
use crate::Error;

/// The name `switch` gives the CNIMigration.
pub const MIGRATION_NAME: &str = "cni-migration";

/// Creates the CNIMigration to `target`, or says why not. Returns what to tell the operator.
pub async fn switch(client: &Client, target: &str) -> Result<String, Error> {
    let target = target.to_lowercase();
    let api: Api<CNIMigration> = Api::all(client.clone());
    let existing: Vec<String> = api
        .list(&Default::default())
        .await
        .map_err(|e| Error::kube("list CNIMigrations", e))?
        .items
        .iter()
        .map(|m| m.name_any())
        .collect();
    let enabled = manager::enabled_cnis(client).await?;
    if let Some(refusal) = plan::refuse_switch(&target, &existing, &enabled) {
        return Err(Error::Refused(refusal));
    }
    let migration = CNIMigration {
        metadata: ObjectMeta {
            name: Some(MIGRATION_NAME.to_owned()),
            ..Default::default()
        },
        spec: CNIMigrationSpec {
            target_cni: target.clone(),
            phase: None,
        },
        status: None,
    };
    api.create(&PostParams::default(), &migration)
        .await
        .map_err(|e| Error::kube(format!("create CNIMigration {MIGRATION_NAME}"), e))?;
    Ok(format!(
        "CNIMigration {MIGRATION_NAME} created: switching the CNI to {target}.\nWatch it with 'd8 network cni-migration status'.\n"
    ))
}

/// The migration's phase and its nodes, as `status` prints them.
pub async fn status(client: &Client) -> Result<String, Error> {
    let Some(migration) = active_migration(client).await? else {
        return Ok("No active CNI migration found.\n".into());
    };
    let api: Api<CNINodeMigration> = Api::all(client.clone());
    let nodes = api
        .list(&Default::default())
        .await
        .map_err(|e| Error::kube("list CNINodeMigrations", e))?;
    Ok(render(&migration, &nodes.items))
}

/// Renders the status: the migration, its true conditions in order, the node table, the
/// failed nodes.
pub fn render(migration: &CNIMigration, nodes: &[CNINodeMigration]) -> String {
    let status = migration.status.clone().unwrap_or_default();
    let dash = |s: Option<&str>| s.filter(|s| !s.is_empty()).unwrap_or("-").to_owned();
    let mut out = format!(
        "Migration:   {}\nTarget CNI:  {}\nCurrent CNI: {}\nPhase:       {}\n",
        migration.name_any(),
        migration.spec.target_cni,
        dash(status.current_cni.as_deref()),
        dash(status.phase.as_deref()),
    );
    if let Some(total) = status.nodes_total {
        out += &format!(
            "Nodes:       {}/{total} succeeded, {} failed\n",
            status.nodes_succeeded.unwrap_or(0),
            status.nodes_failed.unwrap_or(0)
        );
    }
    let mut conditions: Vec<_> = status
        .conditions
        .iter()
        .filter(|c| c.status == "True")
        .collect();
    conditions.sort_by_key(|c| c.last_transition_time.0);
    if !conditions.is_empty() {
        out += "\nConditions:\n";
        for c in conditions {
            let failure = c.type_ == CniMigrationCondition::CurrentCniDetectionFailed.as_str();
            out += &format!(
                "  {}{}: {}\n",
                if failure { "✗ " } else { "" },
                c.type_,
                c.message
            );
        }
    }
    let mut rows = vec![[
        "NODE".to_owned(),
        "PHASE".to_owned(),
        "PODS ANNOTATED".to_owned(),
        "CLEANED".to_owned(),
        "PODS RESTARTED".to_owned(),
    ]];
    let mut sorted: Vec<&CNINodeMigration> = nodes
        .iter()
        .filter(|n| {
            n.owner_references()
                .iter()
                .any(|o| Some(&o.uid) == migration.metadata.uid.as_ref())
        })
        .collect();
    sorted.sort_by_key(|n| n.name_any());
    for node in sorted {
        let s = node.status.clone().unwrap_or_default();
        let mark = |c: CniNodeCondition| match s.conditions.iter().find(|x| x.type_ == c.as_str()) {
            Some(_) if is_true(&s.conditions, c.as_str()) => "yes".to_owned(),
            Some(x) => format!("error: {}", x.message),
            None => "-".to_owned(),
        };
        rows.push([
            node.name_any(),
            dash(s.phase.as_deref()),
            mark(CniNodeCondition::PodsAnnotated),
            mark(CniNodeCondition::CleanupDone),
            mark(CniNodeCondition::PodsRestarted),
        ]);
    }
    out += "\n";
    out += &table(&rows);
    if !status.failed_summary.is_empty() {
        out += "\nFailed nodes:\n";
        for f in &status.failed_summary {
            out += &format!("  - {}: {}\n", f.node, f.reason);
        }
    }
    out
}

fn table(rows: &[[String; 5]]) -> String {
    let widths: Vec<usize> = (0..5)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out += line.join("   ").trim_end();
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::network::{
        CNIMigrationStatus, CNINodeMigrationSpec, CNINodeMigrationStatus, FailedNode,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn status_shows_the_phase_and_a_table_of_nodes() {
        let now = "2025-01-01T00:00:00Z".parse().unwrap();
        let mut conditions = Vec::new();
        super::super::set_condition(
            &mut conditions,
            "EnvironmentPrepared",
            true,
            "r",
            "Switching from flannel to cilium.",
            now,
        );
        let migration = CNIMigration {
            metadata: ObjectMeta {
                name: Some("cni-migration".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: CNIMigrationSpec {
                target_cni: "cilium".into(),
                phase: None,
            },
            status: Some(CNIMigrationStatus {
                phase: Some("CleaningNodes".into()),
                current_cni: Some("flannel".into()),
                nodes_total: Some(2),
                nodes_succeeded: Some(0),
                nodes_failed: Some(1),
                failed_summary: vec![FailedNode {
                    node: "b".into(),
                    reason: plan::NODE_DELETED.into(),
                }],
                conditions,
            }),
        };
        let node = |name: &str, uid: &str, phase: &str, cleaned: Option<bool>| {
            let mut conditions = Vec::new();
            super::super::set_condition(
                &mut conditions,
                "PodsAnnotated",
                true,
                "Success",
                "Pods annotated",
                now,
            );
            if let Some(ok) = cleaned {
                super::super::set_condition(
                    &mut conditions,
                    "CleanupDone",
                    ok,
                    "Error",
                    "ip: busy",
                    now,
                );
            }
            CNINodeMigration {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    owner_references: Some(vec![OwnerReference {
                        uid: uid.into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                },
                spec: CNINodeMigrationSpec {},
                status: Some(CNINodeMigrationStatus {
                    phase: Some(phase.into()),
                    conditions,
                }),
            }
        };
        let out = render(
            &migration,
            &[
                node("b", "u1", "NodeCleaning", Some(false)),
                node("a", "u1", "NodeCleaning", None),
                node("old", "u0", "Completed", None),
            ],
        );
        assert_eq!(
            out,
            "Migration:   cni-migration\nTarget CNI:  cilium\nCurrent CNI: flannel\nPhase:       CleaningNodes\n\
             Nodes:       0/2 succeeded, 1 failed\n\nConditions:\n  EnvironmentPrepared: Switching from flannel to cilium.\n\n\
             NODE   PHASE          PODS ANNOTATED   CLEANED           PODS RESTARTED\n\
             a      NodeCleaning   yes              -                 -\n\
             b      NodeCleaning   yes              error: ip: busy   -\n\
             \nFailed nodes:\n  - b: the node was deleted during the migration\n"
        );
    }
}
