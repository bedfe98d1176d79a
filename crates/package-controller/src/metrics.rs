//! The package controller's metrics, with Deckhouse's names and labels:
//!
//! - `deckhouse_application_maintenance{namespace, name, state}`: 1 per Application whose
//!   `spec.maintenance` sets a maintenance mode, `state` the mode (`NoResourceReconciliation`;
//!   the `ApplicationIsInMaintenanceMode` alert), refilled on every pass over the Applications.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// Every metric family of the package controller (cheap to clone: families are shared).
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    maintenance: Family<Labels, Gauge>,
}

impl Metrics {
    /// Registers every family in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "deckhouse_application_maintenance",
            "1 per Application in a maintenance mode (state is the mode).",
            self.maintenance.clone(),
        );
    }

    /// Refills `deckhouse_application_maintenance` with `(namespace, name, state)`.
    pub(crate) fn set_maintenance<'a>(
        &self,
        applications: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) {
        self.maintenance.clear();
        for (namespace, name, state) in applications {
            self.maintenance
                .get_or_create(&vec![
                    ("namespace", namespace.to_owned()),
                    ("name", name.to_owned()),
                    ("state", state.to_owned()),
                ])
                .set(1);
        }
    }

    /// The families in Prometheus text format.
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maintenance_is_refilled_under_deckhouse_name() {
        let metrics = Metrics::default();
        metrics.set_maintenance([("shop", "echo", "NoResourceReconciliation")]);
        let text = metrics.encode();
        assert!(
            text.lines().any(|l| l
                == "deckhouse_application_maintenance{namespace=\"shop\",name=\"echo\",state=\"NoResourceReconciliation\"} 1"),
            "{text}"
        );
        metrics.set_maintenance([]);
        assert!(
            !metrics
                .encode()
                .contains("deckhouse_application_maintenance{")
        );
    }
}
