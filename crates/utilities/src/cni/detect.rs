//! Two detections of the CNI migration, pure:
//!
//! - [`hook_values`]: the job of Deckhouse's `detect-cni-migration` global hook — from the
//!   CNIMigrations in the cluster, the values `global.internal.cniMigrationEnabled`,
//!   `cniMigrationName` and `cniMigrationWebhooksDisable` that make the deckhouse chart render
//!   the migration's manager Deployment and agent DaemonSet (and remove them when unset);
//! - [`node_cni`]: the CNI a node runs, read from its CNI configuration directory (the file
//!   the container runtime loads: the first `.conf`, `.conflist` or `.json` in name order), and
//!   [`current_from_nodes`], the cluster's current CNI from every node's answer — what the
//!   manager falls back on when no CNI module is enabled.

use serde_json::{Value, json};

use super::plan::CNI_MODULES;

/// A CNIMigration as the hook sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationInfo {
    /// Its name.
    pub name: String,
    /// `metadata.creationTimestamp` (`None`: not set, sorts last).
    pub created: Option<jiff::Timestamp>,
    /// Its `Succeeded` condition is `True`.
    pub succeeded: bool,
}

/// The values the hook sets (all absent when no migration exists).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookValues {
    /// `global.internal.cniMigrationName`: the migration that runs (the oldest, then the
    /// smallest name).
    pub name: String,
    /// `global.internal.cniMigrationWebhooksDisable`: set while the migration has not
    /// succeeded (other modules' webhooks must not block the pod restarts).
    pub webhooks_disable: bool,
}

/// Deckhouse's `detect-cni-migration`: `None` (the three values removed) without a migration.
pub fn hook_values(migrations: &[MigrationInfo]) -> Option<HookValues> {
    let active = migrations.iter().min_by(|a, b| {
        let key = |m: &MigrationInfo| (m.created.unwrap_or(jiff::Timestamp::MAX), m.name.clone());
        key(a).cmp(&key(b))
    })?;
    Some(HookValues {
        name: active.name.clone(),
        webhooks_disable: !active.succeeded,
    })
}

/// The `global` values of the hook, as the chart reads them (`global.internal.*`); without a
/// migration, `cniMigrationEnabled` is `false` and the other two are left out.
pub fn global_values(values: Option<&HookValues>) -> Value {
    let internal = match values {
        None => json!({"cniMigrationEnabled": false}),
        Some(v) => {
            let mut internal = json!({
                "cniMigrationEnabled": true,
                "cniMigrationName": v.name,
            });
            if v.webhooks_disable {
                internal["cniMigrationWebhooksDisable"] = json!(true);
            }
            internal
        }
    };
    json!({"internal": internal})
}

/// What a node's CNI configuration directory says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeCni {
    /// The loaded configuration is this CNI's (`cilium`, `flannel`, `simple-bridge`).
    Known(String),
    /// No CNI configuration at all.
    None,
    /// A configuration this migration does not know (its file name).
    Unknown(String),
}

impl NodeCni {
    /// The value the agent reports (annotation [`DETECTED_CNI_ANNOTATION`]).
    pub fn report(&self) -> String {
        match self {
            Self::Known(cni) => cni.clone(),
            Self::None => "none".into(),
            Self::Unknown(file) => format!("unknown:{file}"),
        }
    }

    /// Reads a report back (`None`: not a report).
    pub fn parse(report: &str) -> Option<Self> {
        match report {
            "none" => Some(Self::None),
            r if r.starts_with("unknown:") => Some(Self::Unknown(r["unknown:".len()..].into())),
            r if CNI_MODULES.iter().any(|c| c.as_str() == r) => Some(Self::Known(r.into())),
            _ => None,
        }
    }
}

/// The annotation of a CNINodeMigration where the node's agent reports what its CNI
/// configuration directory holds ([`NodeCni::report`]).
pub const DETECTED_CNI_ANNOTATION: &str = "cni-migration.network.deckhouse.io/detected-cni";

/// The CNI of a node from the files of its CNI configuration directory (`(name, contents)`):
/// the container runtime loads the first configuration file in name order, and that file's
/// plugin types tell the CNI — `cilium-cni` for cilium, `flannel` for flannel, `bridge` on
/// the `cni0` bridge for simple-bridge (Deckhouse's `simple-bridge.conflist`). A file that does
/// not parse is told by its name.
pub fn node_cni(files: &[(String, String)]) -> NodeCni {
    let mut configs: Vec<&(String, String)> = files
        .iter()
        .filter(|(name, _)| {
            [".conf", ".conflist", ".json"]
                .iter()
                .any(|ext| name.ends_with(ext))
        })
        .collect();
    configs.sort_by(|a, b| a.0.cmp(&b.0));
    // The loopback plugin's own configuration gives pods no network: not a CNI.
    let parsed: Vec<(&String, Option<Value>)> = configs
        .iter()
        .map(|(name, contents)| (name, serde_json::from_str::<Value>(contents).ok()))
        .filter(|(_, v)| !v.as_ref().is_some_and(only_loopback))
        .collect();
    let Some((name, config)) = parsed.first() else {
        return NodeCni::None;
    };
    let by_types = config.as_ref().and_then(cni_of_config);
    let by_name = || {
        CNI_MODULES
            .iter()
            .map(|c| c.as_str())
            .find(|c| name.contains(c))
            .map(str::to_owned)
    };
    match by_types.or_else(by_name) {
        Some(cni) => NodeCni::Known(cni),
        None => NodeCni::Unknown((*name).clone()),
    }
}

/// Whether a configuration only sets up the loopback interface.
fn only_loopback(config: &Value) -> bool {
    let plugins: Vec<&Value> = match config.get("plugins").and_then(Value::as_array) {
        Some(list) => list.iter().collect(),
        None => vec![config],
    };
    !plugins.is_empty()
        && plugins
            .iter()
            .all(|p| p.get("type").and_then(Value::as_str) == Some("loopback"))
}

/// The CNI of one parsed configuration (a `.conflist`'s `plugins`, or a `.conf`'s own `type`).
fn cni_of_config(config: &Value) -> Option<String> {
    let plugins: Vec<&Value> = match config.get("plugins").and_then(Value::as_array) {
        Some(list) => list.iter().collect(),
        None => vec![config],
    };
    let types: Vec<&str> = plugins
        .iter()
        .filter_map(|p| p.get("type").and_then(Value::as_str))
        .collect();
    if types.contains(&"cilium-cni") {
        return Some("cilium".into());
    }
    if types.contains(&"flannel") {
        return Some("flannel".into());
    }
    let on_cni0 = plugins.iter().any(|p| {
        p.get("type").and_then(Value::as_str) == Some("bridge")
            && p.get("bridge").and_then(Value::as_str) == Some("cni0")
    });
    on_cni0.then(|| "simple-bridge".into())
}

/// The cluster's current CNI from its nodes' reports (`(node, report)`; `None`: the node's
/// agent has not reported yet). `Ok(None)`: wait for the nodes named in the error-free
/// message; `Err`: the detection failed, with the reason.
pub fn current_from_nodes(reports: &[(String, Option<NodeCni>)]) -> Result<Option<String>, String> {
    if reports.is_empty() {
        return Err("no enabled CNI module found (ModuleConfig cni-cilium, cni-flannel or cni-simple-bridge) and no node to detect the CNI on".into());
    }
    if reports.iter().any(|(_, r)| r.is_none()) {
        return Ok(None);
    }
    let mut found: Vec<String> = Vec::new();
    let mut unclear: Vec<String> = Vec::new();
    for (node, report) in reports {
        match report {
            Some(NodeCni::Known(cni)) if !found.contains(cni) => found.push(cni.clone()),
            Some(NodeCni::Known(_)) => {}
            Some(NodeCni::None) => unclear.push(format!("{node}: no CNI configuration")),
            Some(NodeCni::Unknown(file)) => {
                unclear.push(format!("{node}: unknown CNI configuration {file}"))
            }
            None => {}
        }
    }
    found.sort();
    match (found.as_slice(), unclear.is_empty()) {
        ([one], true) => Ok(Some(one.clone())),
        ([], _) => Err(format!(
            "no enabled CNI module found and no node runs a known CNI ({})",
            unclear.join("; ")
        )),
        ([_], false) => Err(format!(
            "no enabled CNI module found and the nodes disagree: {} on some, {}",
            found[0],
            unclear.join("; ")
        )),
        (many, _) => Err(format!(
            "no enabled CNI module found and the nodes run different CNIs: {}",
            many.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn migration(name: &str, created: Option<&str>, succeeded: bool) -> MigrationInfo {
        MigrationInfo {
            name: name.into(),
            created: created.map(|t| t.parse().unwrap()),
            succeeded,
        }
    }

    /// The cases of Deckhouse's own test of the hook.
    #[test]
    fn hook_values_as_deckhouse_sets_them() {
        let rows: [(&str, Vec<MigrationInfo>, Value); 5] = [
            (
                "empty cluster",
                vec![],
                json!({"internal": {"cniMigrationEnabled": false}}),
            ),
            (
                "one migration in progress",
                vec![migration("test-migration", None, false)],
                json!({"internal": {"cniMigrationEnabled": true, "cniMigrationName": "test-migration", "cniMigrationWebhooksDisable": true}}),
            ),
            (
                "the oldest of two",
                vec![
                    migration("migration-newer", Some("2024-01-02T00:00:00Z"), false),
                    migration("migration-older", Some("2024-01-01T00:00:00Z"), false),
                ],
                json!({"internal": {"cniMigrationEnabled": true, "cniMigrationName": "migration-older", "cniMigrationWebhooksDisable": true}}),
            ),
            (
                "same time: the smaller name",
                vec![
                    migration("migration-b", Some("2024-01-01T00:00:00Z"), false),
                    migration("migration-a", Some("2024-01-01T00:00:00Z"), false),
                ],
                json!({"internal": {"cniMigrationEnabled": true, "cniMigrationName": "migration-a", "cniMigrationWebhooksDisable": true}}),
            ),
            (
                "succeeded: webhooks back",
                vec![migration("test-migration-success", None, true)],
                json!({"internal": {"cniMigrationEnabled": true, "cniMigrationName": "test-migration-success"}}),
            ),
        ];
        for (case, migrations, want) in rows {
            assert_eq!(
                global_values(hook_values(&migrations).as_ref()),
                want,
                "{case}"
            );
        }
    }

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, c)| ((*n).to_owned(), (*c).to_owned()))
            .collect()
    }

    const FLANNEL: &str = r#"{"name":"cbr0","cniVersion":"0.3.1","plugins":[{"type":"flannel","delegate":{"hairpinMode":true,"isDefaultGateway":true}},{"type":"portmap","capabilities":{"portMappings":true}}]}"#;
    const CILIUM: &str = r#"{"cniVersion":"0.3.1","name":"cilium","plugins":[{"type":"cilium-cni","enable-debug":false}]}"#;
    const SIMPLE_BRIDGE: &str = r#"{"name":"cni0","cniVersion":"0.3.1","plugins":[{"type":"bridge","bridge":"cni0","isDefaultGateway":true,"ipam":{"type":"host-local","subnet":"10.111.1.0/24"}},{"type":"portmap","capabilities":{"portMappings":true}}]}"#;

    #[test]
    fn a_node_cni_from_its_configuration_directory() {
        const LOOPBACK: &str = r#"{"cniVersion":"0.3.1","name":"lo","type":"loopback"}"#;
        type Row = (&'static str, Vec<(String, String)>, NodeCni);
        let rows: [Row; 10] = [
            (
                "loopback only",
                files(&[("99-loopback.conf", LOOPBACK)]),
                NodeCni::None,
            ),
            (
                "loopback first, then flannel",
                files(&[
                    ("00-loopback.conf", LOOPBACK),
                    ("10-flannel.conflist", FLANNEL),
                ]),
                NodeCni::Known("flannel".into()),
            ),
            ("empty", files(&[]), NodeCni::None),
            (
                "flannel",
                files(&[("10-flannel.conflist", FLANNEL)]),
                NodeCni::Known("flannel".into()),
            ),
            (
                "cilium",
                files(&[("05-cilium.conflist", CILIUM)]),
                NodeCni::Known("cilium".into()),
            ),
            (
                "simple-bridge",
                files(&[("simple-bridge.conflist", SIMPLE_BRIDGE)]),
                NodeCni::Known("simple-bridge".into()),
            ),
            (
                "the first file in name order is the one loaded",
                files(&[
                    ("10-flannel.conflist", FLANNEL),
                    ("05-cilium.conflist", CILIUM),
                ]),
                NodeCni::Known("cilium".into()),
            ),
            (
                "not a configuration file",
                files(&[("README", "x"), ("10-flannel.conflist.bak", FLANNEL)]),
                NodeCni::None,
            ),
            (
                "unparsable: told by its name",
                files(&[("10-flannel.conf", "{")]),
                NodeCni::Known("flannel".into()),
            ),
            (
                "another CNI",
                files(&[("10-calico.conflist", r#"{"plugins":[{"type":"calico"}]}"#)]),
                NodeCni::Unknown("10-calico.conflist".into()),
            ),
        ];
        for (case, list, want) in rows {
            assert_eq!(node_cni(&list), want, "{case}");
        }
    }

    #[test]
    fn reports_read_back() {
        for report in [
            NodeCni::None,
            NodeCni::Known("flannel".into()),
            NodeCni::Unknown("10-calico.conflist".into()),
        ] {
            assert_eq!(NodeCni::parse(&report.report()), Some(report));
        }
        assert_eq!(NodeCni::parse("weave"), None);
    }

    #[test]
    fn the_current_cni_from_the_nodes() {
        let known = |c: &str| Some(NodeCni::Known(c.into()));
        type Row = (
            &'static str,
            Vec<(String, Option<NodeCni>)>,
            Result<Option<String>, &'static str>,
        );
        let rows: [Row; 6] = [
            (
                "all flannel",
                vec![
                    ("a".into(), known("flannel")),
                    ("b".into(), known("flannel")),
                ],
                Ok(Some("flannel".into())),
            ),
            (
                "one not reported yet",
                vec![("a".into(), known("flannel")), ("b".into(), None)],
                Ok(None),
            ),
            (
                "no node",
                vec![],
                Err(
                    "no enabled CNI module found (ModuleConfig cni-cilium, cni-flannel or cni-simple-bridge) and no node to detect the CNI on",
                ),
            ),
            (
                "nothing anywhere",
                vec![("a".into(), Some(NodeCni::None))],
                Err(
                    "no enabled CNI module found and no node runs a known CNI (a: no CNI configuration)",
                ),
            ),
            (
                "two CNIs",
                vec![
                    ("a".into(), known("flannel")),
                    ("b".into(), known("cilium")),
                ],
                Err(
                    "no enabled CNI module found and the nodes run different CNIs: cilium, flannel",
                ),
            ),
            (
                "one node unclear",
                vec![
                    ("a".into(), known("flannel")),
                    (
                        "b".into(),
                        Some(NodeCni::Unknown("10-calico.conflist".into())),
                    ),
                ],
                Err(
                    "no enabled CNI module found and the nodes disagree: flannel on some, b: unknown CNI configuration 10-calico.conflist",
                ),
            ),
        ];
        for (case, reports, want) in rows {
            assert_eq!(
                current_from_nodes(&reports),
                want.map_err(str::to_owned),
                "{case}"
            );
        }
    }
}
