//! The controller's metrics, with Deckhouse's names (`d8_registry_*`). Label values are bounded:
//! node names, reasons, outcomes, the upstream host — never a repository, digest or credential.
//! Families are cleared and refilled on every reconcile so a node or reason that went away
//! does not linger as a stale series.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// Every metric family of the controller.
#[derive(Debug, Default)]
pub struct Metrics {
    pub(crate) managed: Gauge,
    pub(crate) config_valid: Gauge,
    pub(crate) effective_upstream: Family<Labels, Gauge>,
    pub(crate) nodes: Gauge,
    pub(crate) node_reconciled: Family<Labels, Gauge>,
    pub(crate) node_layout_from_disk: Family<Labels, Gauge>,
    pub(crate) node_foreign_registry_config: Family<Labels, Gauge>,
    pub(crate) storage_replicas: Gauge,
    pub(crate) storage_replica_full: Family<Labels, Gauge>,
    pub(crate) storage_all_replicas_full: Gauge,
    pub(crate) storage_safe_to_drop_upstream: Gauge,
    pub(crate) storage_stale_data_bytes: Family<Labels, Gauge>,
    pub(crate) store_used_bytes: Family<Labels, Gauge>,
    pub(crate) store_budget_bytes: Family<Labels, Gauge>,
    pub(crate) store_reserve_bytes: Family<Labels, Gauge>,
    pub(crate) store_filesystem_free_bytes: Family<Labels, Gauge>,
    pub(crate) store_filesystem_capacity_bytes: Family<Labels, Gauge>,
    pub(crate) store_writable: Family<Labels, Gauge>,
    pub(crate) air_gap_transition_held: Gauge,
    pub(crate) upstreams_rejected: Family<Labels, Gauge>,
    pub(crate) upstream_probes: Family<Labels, Counter>,
    pub(crate) drain_seconds: Gauge,
    pub(crate) drain_references: Gauge,
    pub(crate) migration_pending: Family<Labels, Gauge>,
    pub(crate) migration_preflight: Family<Labels, Gauge>,
}

impl Metrics {
    /// Registers every family in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        macro_rules! reg {
            ($name:literal, $help:literal, $metric:ident) => {
                registry.register($name, $help, self.$metric.clone());
            };
        }
        reg!(
            "d8_registry_managed",
            "1 when the registry module manages the pull path.",
            managed
        );
        reg!(
            "d8_registry_config_valid",
            "1 when the registry configuration is usable.",
            config_valid
        );
        reg!(
            "d8_registry_effective_upstream",
            "The primary upstream in effect.",
            effective_upstream
        );
        reg!("d8_registry_nodes", "Nodes that get a RegistryNode.", nodes);
        reg!(
            "d8_registry_node_reconciled",
            "1 when the node's agent applied its current layout.",
            node_reconciled
        );
        reg!(
            "d8_registry_node_layout_from_disk",
            "1 when the node's agent routes from its on-disk copy.",
            node_layout_from_disk
        );
        reg!(
            "d8_registry_node_foreign_registry_config",
            "1 for a node whose containerd configuration carries registry fields the module did not write.",
            node_foreign_registry_config
        );
        reg!(
            "d8_registry_storage_replicas",
            "Cache replicas that report.",
            storage_replicas
        );
        reg!(
            "d8_registry_storage_replica_full",
            "1 when the replica holds the expected set.",
            storage_replica_full
        );
        reg!(
            "d8_registry_storage_all_replicas_full",
            "1 when every replica holds the expected set.",
            storage_all_replicas_full
        );
        reg!(
            "d8_registry_storage_safe_to_drop_upstream",
            "1 when the lease holder holds the expected set.",
            storage_safe_to_drop_upstream
        );
        reg!(
            "d8_registry_storage_stale_data_bytes",
            "Cache data left on a node while no cache is configured.",
            storage_stale_data_bytes
        );
        reg!(
            "d8_registry_store_used_bytes",
            "Bytes held by the replica's store.",
            store_used_bytes
        );
        reg!(
            "d8_registry_store_budget_bytes",
            "storage.size of the replica's store; 0 when unset.",
            store_budget_bytes
        );
        reg!(
            "d8_registry_store_reserve_bytes",
            "Bytes kept free for the node.",
            store_reserve_bytes
        );
        reg!(
            "d8_registry_store_filesystem_free_bytes",
            "Free bytes on the store's filesystem.",
            store_filesystem_free_bytes
        );
        reg!(
            "d8_registry_store_filesystem_capacity_bytes",
            "Size of the store's filesystem.",
            store_filesystem_capacity_bytes
        );
        reg!(
            "d8_registry_store_writable",
            "0 while the replica refuses writes.",
            store_writable
        );
        reg!(
            "d8_registry_air_gap_transition_held",
            "1 while air gap is asked for and the upstream is still held.",
            air_gap_transition_held
        );
        reg!(
            "d8_registry_upstreams_rejected",
            "RegistryUpstreams rejected, per reason.",
            upstreams_rejected
        );
        reg!(
            "d8_registry_upstream_probes",
            "Preflight probes of the primary upstream, per outcome.",
            upstream_probes
        );
        reg!(
            "d8_registry_drain_seconds",
            "How long the Managed to Unmanaged drain has been running.",
            drain_seconds
        );
        reg!(
            "d8_registry_drain_references",
            "Objects still naming the in-cluster registry address.",
            drain_references
        );
        reg!(
            "d8_registry_migration_pending",
            "1 while the previous implementation keeps the pull path.",
            migration_pending
        );
        reg!(
            "d8_registry_migration_preflight",
            "Failing migration preflight checks.",
            migration_preflight
        );
    }

    /// Counts one probe outcome.
    pub(crate) fn probed(&self, outcome: &str) {
        self.upstream_probes
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc();
    }
}

/// A label set of one `name=value` pair.
pub(crate) fn label(name: &'static str, value: impl Into<String>) -> Labels {
    vec![(name, value.into())]
}

/// Encodes `registry` in the Prometheus text format.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)
        .expect("writing to a String cannot fail");
    text
}
