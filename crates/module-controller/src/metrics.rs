//! The module manager's metrics, with Deckhouse's names. Label values are module names (a
//! bounded set); families are cleared and refilled on every pass so that a module that left a
//! state does not linger as a stale series.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// Every metric family of the module manager (cheap to clone: families are shared).
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    pub(crate) config_maintenance: Family<Labels, Gauge>,
}

impl Metrics {
    /// Registers every family in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "d8_module_config_maintenance",
            "1 for each module whose ModuleConfig sets maintenance: NoResourceReconciliation (the ModuleIsInMaintenanceMode alert).",
            self.config_maintenance.clone(),
        );
    }

    /// Refills `d8_module_config_maintenance` with the modules in maintenance.
    pub(crate) fn set_maintenance<'a>(&self, modules: impl IntoIterator<Item = &'a str>) {
        self.config_maintenance.clear();
        for module in modules {
            self.config_maintenance
                .get_or_create(&vec![("module", module.to_owned())])
                .set(1);
        }
    }
}
