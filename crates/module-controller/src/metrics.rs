//! The module manager's metrics, with Deckhouse's names and labels (addon-operator's module
//! manager group `mm_module_info` / `mm_module_maintenance`, prefixed `deckhouse_`):
//!
//! - `deckhouse_mm_module_info{module, enabled, critical}`: 1 per known Module, `enabled` and
//!   `critical` `"true"`/`"false"` (the `D8DeckhouseQueueIsHung*` and `ModuleRelease*` alerts
//!   join on it);
//! - `deckhouse_mm_module_maintenance{module, state}`: 1 per module whose ModuleConfig sets a
//!   maintenance mode, `state` the mode (`NoResourceReconciliation`; the
//!   `ModuleIsInMaintenanceMode` alert).
//!
//! Label values are module names (a bounded set); families are cleared and refilled on every
//! pass (Deckhouse expires the group) so that a module that left a state does not linger as a
//! stale series.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// A module's line of `deckhouse_mm_module_info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    /// The module's name.
    pub module: String,
    /// Whether the module manager enabled it.
    pub enabled: bool,
    /// Whether it is critical (its queue being hung is a critical alert).
    pub critical: bool,
}

impl ModuleInfo {
    fn labels(&self) -> Labels {
        vec![
            ("module", self.module.clone()),
            ("enabled", self.enabled.to_string()),
            ("critical", self.critical.to_string()),
        ]
    }
}

/// Every metric family of the module manager (cheap to clone: families are shared).
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    pub(crate) module_info: Family<Labels, Gauge>,
    pub(crate) module_maintenance: Family<Labels, Gauge>,
}

impl Metrics {
    /// Registers every family in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        // prometheus-client appends nothing to a gauge's name, so the names are Deckhouse's.
        registry.register(
            "deckhouse_mm_module_info",
            "1 per module: whether the module manager enabled it and whether it is critical.",
            self.module_info.clone(),
        );
        registry.register(
            "deckhouse_mm_module_maintenance",
            "1 per module whose ModuleConfig sets a maintenance mode (state is the mode).",
            self.module_maintenance.clone(),
        );
    }

    /// Refills `deckhouse_mm_module_info`.
    pub(crate) fn set_module_info<'a>(&self, modules: impl IntoIterator<Item = &'a ModuleInfo>) {
        self.module_info.clear();
        for info in modules {
            self.module_info.get_or_create(&info.labels()).set(1);
        }
    }

    /// Refills `deckhouse_mm_module_maintenance` with `(module, state)` pairs.
    pub(crate) fn set_maintenance<'a>(
        &self,
        modules: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) {
        self.module_maintenance.clear();
        for (module, state) in modules {
            self.module_maintenance
                .get_or_create(&vec![
                    ("module", module.to_owned()),
                    ("state", state.to_owned()),
                ])
                .set(1);
        }
    }

    /// The families in Prometheus text format.
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_refilled_under_deckhouse_names() {
        let metrics = Metrics::default();
        let echo = ModuleInfo {
            module: "echo".into(),
            enabled: true,
            critical: false,
        };
        let cni = ModuleInfo {
            module: "cni-cilium".into(),
            enabled: false,
            critical: true,
        };
        metrics.set_module_info([&echo, &cni]);
        metrics.set_maintenance([("echo", "NoResourceReconciliation")]);
        let text = metrics.encode();
        for line in [
            "# TYPE deckhouse_mm_module_info gauge",
            "deckhouse_mm_module_info{module=\"echo\",enabled=\"true\",critical=\"false\"} 1",
            "deckhouse_mm_module_info{module=\"cni-cilium\",enabled=\"false\",critical=\"true\"} 1",
            "deckhouse_mm_module_maintenance{module=\"echo\",state=\"NoResourceReconciliation\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        metrics.set_module_info([&echo]);
        metrics.set_maintenance([]);
        let text = metrics.encode();
        assert!(!text.contains("cni-cilium"), "{text}");
        assert!(!text.contains("deckhouse_mm_module_maintenance{"), "{text}");
    }
}
