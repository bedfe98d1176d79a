//! The image address, step two of the switch: ConfigMap `d8-system/registry-image-address`
//! (`base: registry.d8-system.svc:5001/system/deckhouse`) tells the platform to name images by
//! the in-cluster address. It may appear only once every node can resolve that address, i.e.
//! every node's agent reports the current generation applied; once published it is sticky
//! (a node joining later must not flip the whole platform back); it goes at once when the
//! registry is no longer Managed, so the platform falls back to the install registry.

use std::collections::BTreeMap;

/// What the agent of one node reported in its RegistryNode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeProgress {
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
    /// `status.reconciled`.
    pub reconciled: Option<bool>,
}

impl NodeProgress {
    /// The agent applied the generation it is looking at.
    pub fn applied(&self) -> bool {
        self.reconciled == Some(true)
            && self.generation.is_some()
            && self.observed_generation == self.generation
    }
}

/// Whether the ConfigMap must exist after this reconcile.
pub fn published(
    managed: bool,
    exists: bool,
    nodes: &[String],
    registry_nodes: &BTreeMap<String, NodeProgress>,
) -> bool {
    if !managed {
        return false;
    }
    if exists {
        return true;
    }
    !nodes.is_empty()
        && nodes
            .iter()
            .all(|node| registry_nodes.get(node).is_some_and(NodeProgress::applied))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(generation: i64) -> NodeProgress {
        NodeProgress {
            generation: Some(generation),
            observed_generation: Some(generation),
            reconciled: Some(true),
        }
    }

    type Row<'a> = (
        &'a str,
        bool,
        bool,
        &'a [String],
        &'a BTreeMap<String, NodeProgress>,
        bool,
    );

    #[test]
    fn the_two_step_rule() {
        let nodes = vec!["a".to_owned(), "b".to_owned()];
        let all = BTreeMap::from([("a".to_owned(), applied(2)), ("b".to_owned(), applied(1))]);
        let behind = BTreeMap::from([
            ("a".to_owned(), applied(2)),
            (
                "b".to_owned(),
                NodeProgress {
                    generation: Some(2),
                    observed_generation: Some(1),
                    reconciled: Some(true),
                },
            ),
        ]);
        let failed = BTreeMap::from([
            ("a".to_owned(), applied(2)),
            (
                "b".to_owned(),
                NodeProgress {
                    reconciled: Some(false),
                    ..applied(1)
                },
            ),
        ]);
        let missing = BTreeMap::from([("a".to_owned(), applied(2))]);
        let rows: [Row<'_>; 8] = [
            ("every node applied", true, false, &nodes, &all, true),
            (
                "one node behind a generation",
                true,
                false,
                &nodes,
                &behind,
                false,
            ),
            (
                "one node failed to apply",
                true,
                false,
                &nodes,
                &failed,
                false,
            ),
            (
                "one node has no RegistryNode",
                true,
                false,
                &nodes,
                &missing,
                false,
            ),
            ("no nodes at all", true, false, &[], &all, false),
            ("sticky once published", true, true, &nodes, &behind, true),
            (
                "removed at once when not Managed",
                false,
                true,
                &nodes,
                &all,
                false,
            ),
            (
                "never published when not Managed",
                false,
                false,
                &nodes,
                &all,
                false,
            ),
        ];
        for (what, managed, exists, nodes, registry_nodes, want) in rows {
            assert_eq!(
                published(managed, exists, nodes, registry_nodes),
                want,
                "{what}"
            );
        }
    }
}
