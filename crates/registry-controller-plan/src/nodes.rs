//! What the controller reads off Nodes and NodeGroups: nodes carrying container-runtime registry
//! configuration the module did not write (bashible labels them), and the garbage-collection
//! schedule derived from the masters' maintenance windows.

use std::collections::BTreeMap;

use serde_json::Value;

/// Label bashible sets on a node whose containerd `conf.d` files carry registry fields.
pub const FOREIGN_CONFIG_LABEL: &str = "node.deckhouse.io/containerd-config-registry";
/// The label's value when such a file exists.
pub const FOREIGN_CONFIG_VALUE: &str = "custom";

/// Nodes (name, labels) whose registry configuration the module did not write, sorted. Their next
/// full bashible run refuses that file, hence one series per node in
/// `d8_registry_node_foreign_registry_config`.
pub fn foreign_registry_config<'a>(
    nodes: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
) -> Vec<String> {
    let mut out: Vec<String> = nodes
        .into_iter()
        .filter(|(_, labels)| {
            labels.get(FOREIGN_CONFIG_LABEL).map(String::as_str) == Some(FOREIGN_CONFIG_VALUE)
        })
        .map(|(name, _)| name.to_owned())
        .collect();
    out.sort();
    out
}

fn day_number(day: &str) -> Option<u8> {
    Some(match day.to_ascii_lowercase().get(..3)? {
        "sun" => 0,
        "mon" => 1,
        "tue" => 2,
        "wed" => 3,
        "thu" => 4,
        "fri" => 5,
        "sat" => 6,
        _ => return None,
    })
}

/// `"M H * * <days>"` for one window (`from: "HH:MM"`, `days: [Mon, …]`), `None` when it cannot
/// be read.
fn window_schedule(window: &Value) -> Option<String> {
    let from = window.get("from")?.as_str()?;
    let (hour, minute) = from.trim().split_once(':')?;
    let hour: u8 = hour.parse().ok().filter(|h| *h < 24)?;
    let minute: u8 = minute.parse().ok().filter(|m| *m < 60)?;
    let mut days = match window.get("days") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(days)) => days
            .iter()
            .map(|d| d.as_str().and_then(day_number))
            .collect::<Option<Vec<u8>>>()?,
        Some(_) => return None,
    };
    days.sort_unstable();
    days.dedup();
    let days = if days.is_empty() {
        "*".to_owned()
    } else {
        days.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
    };
    Some(format!("{minute} {hour} * * {days}"))
}

/// The GC schedule from NodeGroup `master`'s spec: the start of its first readable maintenance
/// window (`disruptions.automatic.windows`, then `disruptions.rollingUpdate.windows` — where
/// Deckhouse reads them is **unverified**), or `None` (the caller falls back to
/// [`crate::DEFAULT_GC_SCHEDULE`]).
pub fn gc_schedule_from_windows(node_group_spec: &Value) -> Option<String> {
    ["automatic", "rollingUpdate"]
        .iter()
        .filter_map(|kind| {
            node_group_spec
                .get("disruptions")?
                .get(kind)?
                .get("windows")?
                .as_array()
        })
        .flatten()
        .find_map(window_schedule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_labelled_nodes_report_foreign_configuration() {
        let custom = BTreeMap::from([(FOREIGN_CONFIG_LABEL.to_owned(), "custom".to_owned())]);
        let module = BTreeMap::from([(FOREIGN_CONFIG_LABEL.to_owned(), "module".to_owned())]);
        let none = BTreeMap::new();
        let nodes = [
            ("worker-2", &custom),
            ("master-0", &module),
            ("worker-1", &custom),
            ("worker-3", &none),
        ];
        assert_eq!(
            foreign_registry_config(nodes),
            vec!["worker-1".to_owned(), "worker-2".to_owned()]
        );
    }

    #[test]
    fn the_first_readable_window_gives_the_schedule() {
        let rows = [
            (json!({}), None),
            (
                json!({"disruptions": {"automatic": {"windows": [
                    {"from": "25:00", "to": "26:00"},
                    {"from": "4:30", "to": "6:00", "days": ["Wed", "Mon", "Sun", "Mon"]},
                ]}}}),
                Some("30 4 * * 0,1,3"),
            ),
            (
                json!({"disruptions": {"automatic": {"windows": [
                    {"from": "01:05", "days": ["Someday"]},
                ]}, "rollingUpdate": {"windows": [{"from": "23:59", "to": "00:30"}]}}}),
                Some("59 23 * * *"),
            ),
            (
                json!({"disruptions": {"automatic": {"windows": [{"to": "01:00"}]}}}),
                None,
            ),
        ];
        for (spec, expected) in rows {
            assert_eq!(
                gc_schedule_from_windows(&spec).as_deref(),
                expected,
                "{spec}"
            );
        }
    }
}
