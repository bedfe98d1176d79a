//! What the previous implementation leaves in the cluster after the handover, and when it goes.
//!
//! The previous implementation kept its state and material in Secrets of `d8-system`: its state
//! machine in `registry-state`, its desired configuration in `registry-config`, its CA and keys
//! in `registry-pki`, and one configuration Secret per node for its node services (labelled
//! `app.kubernetes.io/managed-by: registry-nodeservices`). Nothing of this implementation reads
//! them once it took over, and they keep credentials and keys that no longer serve anyone, so
//! they are deleted — but only once the handover is complete:
//!
//! - the switch happened (`registry-v2-switch` exists: the gate never reads the legacy state
//!   again), and
//! - either the module is not Managed (nodes pull from the install registry, nothing of the
//!   previous implementation is on the pull path), or the image address is published, which
//!   happens only after every node's agent applied its layout — from then on the agent owns
//!   each node's `registry.d` and has removed the per-host directories the previous
//!   implementation listed in `deckhouse_hosts_state.json`.
//!
//! Until then everything stays, so a node still on the previous path keeps working. Deleting is
//! idempotent: a second pass finds nothing left and changes nothing.

use std::collections::BTreeMap;

/// Secret names the previous implementation used in `d8-system`.
pub const LEGACY_SECRETS: [&str; 3] = ["registry-state", "registry-config", "registry-pki"];
/// Label the previous implementation's per-node Secrets carry.
pub const NODE_SERVICES_LABEL: (&str, &str) =
    ("app.kubernetes.io/managed-by", "registry-nodeservices");

/// Whether the handover is complete, so the previous implementation's objects may go.
pub fn complete(switched: bool, wanted_managed: bool, image_address_published: bool) -> bool {
    switched && (!wanted_managed || image_address_published)
}

/// The Secrets of `d8-system` (name and labels) that belong to the previous implementation.
pub fn leftovers<'a>(
    secrets: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
) -> Vec<String> {
    let (key, value) = NODE_SERVICES_LABEL;
    secrets
        .into_iter()
        .filter(|(name, labels)| {
            LEGACY_SECRETS.contains(name) || labels.get(key).is_some_and(|v| v == value)
        })
        .map(|(name, _)| name.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_only_after_the_switch_and_the_nodes_took_over() {
        // (switched, wanted managed, image address published) → complete
        let table = [
            ((false, true, true), false),
            ((false, false, false), false),
            ((true, true, false), false),
            ((true, true, true), true),
            ((true, false, false), true),
            ((true, false, true), true),
        ];
        for ((switched, managed, published), want) in table {
            assert_eq!(
                complete(switched, managed, published),
                want,
                "switched={switched} managed={managed} published={published}"
            );
        }
    }

    #[test]
    fn leftovers_are_the_previous_implementations_secrets_only() {
        let none = BTreeMap::new();
        let node_services = BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_owned(),
            "registry-nodeservices".to_owned(),
        )]);
        let other_manager = BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_owned(),
            "someone-else".to_owned(),
        )]);
        let secrets = [
            ("registry-state", &none),
            ("registry-config", &none),
            ("registry-pki", &none),
            ("registry-node-config-master-0", &node_services),
            ("registry-node-config-x", &other_manager),
            ("registry-v2-switch", &none),
            ("registry-resolved-auth", &none),
            ("registry-storage-pki", &none),
            ("deckhouse-registry", &none),
        ];
        assert_eq!(
            leftovers(secrets),
            [
                "registry-state",
                "registry-config",
                "registry-pki",
                "registry-node-config-master-0"
            ]
        );
    }
}
