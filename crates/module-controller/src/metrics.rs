//! The module manager's metrics, with Deckhouse's names and labels (addon-operator's module
//! manager group `mm_module_info` / `mm_module_maintenance`, prefixed `deckhouse_`):
//!
//! - `deckhouse_mm_module_info{module, enabled, critical}`: 1 per known Module, `enabled` and
//!   `critical` `"true"`/`"false"` (the `D8DeckhouseQueueIsHung*` and `ModuleRelease*` alerts
//!   join on it);
//! - `deckhouse_mm_module_maintenance{module, state}`: 1 per module whose ModuleConfig sets a
//!   maintenance mode, `state` the mode (`NoResourceReconciliation`; the
//!   `ModuleIsInMaintenanceMode` alert);
//! - `d8_moduleconfig_allowed_to_disable{module}`: per ModuleConfig, 1 while it carries
//!   `modules.deckhouse.io/allow-disabling` and is still enabled, else 0 (Deckhouse's webhook
//!   writes it on every admission; here every pass; `D8HasModuleConfigAllowedToDisable`);
//! - `d8_module_at_conflict{moduleName}`: 1 per module several sources offer and none is chosen
//!   (labelled `moduleName` as Deckhouse labels it, although its `ModuleAtConflict` alert
//!   groups by `module`);
//! - `d8_module_release_info{name, …, module}`: `d8_release_info`'s labels (why a release waits)
//!   and the module, 1 per Pending ModuleRelease the manager planned, replaced on every plan and
//!   dropped when the release leaves Pending (the `ModuleRelease*` alerts).
//!
//! Label values are module names (a bounded set); families are cleared and refilled on every
//! pass (Deckhouse expires the group) so that a module that left a state does not linger as a
//! stale series.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
    module_release_info: Family<Labels, Gauge>,
    allowed_to_disable: Family<Labels, Gauge>,
    at_conflict: Family<Labels, Gauge>,
    /// The `d8_module_release_info` labels last written per release, to replace them.
    module_release_labels: Arc<Mutex<HashMap<String, Labels>>>,
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
        registry.register(
            "d8_module_release_info",
            "Why a ModuleRelease waits (1 per planned Pending release).",
            self.module_release_info.clone(),
        );
        registry.register(
            "d8_moduleconfig_allowed_to_disable",
            "1 while a ModuleConfig allows disabling its module and the module is still enabled.",
            self.allowed_to_disable.clone(),
        );
        registry.register(
            "d8_module_at_conflict",
            "1 per module several sources offer with none chosen.",
            self.at_conflict.clone(),
        );
    }

    /// Refills `d8_moduleconfig_allowed_to_disable` with `(module, allowed)` pairs.
    pub(crate) fn set_allowed_to_disable<'a>(
        &self,
        configs: impl IntoIterator<Item = (&'a str, bool)>,
    ) {
        self.allowed_to_disable.clear();
        for (module, allowed) in configs {
            self.allowed_to_disable
                .get_or_create(&vec![("module", module.to_owned())])
                .set(i64::from(allowed));
        }
    }

    /// Refills `d8_module_at_conflict` with the modules in conflict.
    pub(crate) fn set_at_conflict<'a>(&self, modules: impl IntoIterator<Item = &'a str>) {
        self.at_conflict.clear();
        for module in modules {
            self.at_conflict
                .get_or_create(&vec![("moduleName", module.to_owned())])
                .set(1);
        }
    }

    /// Replaces the `d8_module_release_info` series of `release` (of `module`).
    pub(crate) fn set_module_release_info(
        &self,
        release: &str,
        module: &str,
        info: &release_plan::deploy::ReleaseInfo,
    ) {
        let mut labels = info.labels(release);
        labels.push(("module", module.to_owned()));
        let mut last = self
            .module_release_labels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = last.insert(release.to_owned(), labels.clone())
            && previous != labels
        {
            self.module_release_info.remove(&previous);
        }
        self.module_release_info.get_or_create(&labels).set(1);
    }

    /// Drops the `d8_module_release_info` series of `release`.
    pub(crate) fn purge_module_release_info(&self, release: &str) {
        let mut last = self
            .module_release_labels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = last.remove(release) {
            self.module_release_info.remove(&previous);
        }
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

    #[test]
    fn module_release_info_is_replaced_and_purged() {
        let metrics = Metrics::default();
        let waiting = release_plan::deploy::ReleaseInfo {
            manual_approval: true,
            release_queue_depth: Some(2),
            ..Default::default()
        };
        metrics.set_module_release_info("echo-v1.2.0", "echo", &waiting);
        let text = metrics.encode();
        assert!(
            text.lines().any(|l| l == "d8_module_release_info{name=\"echo-v1.2.0\",manualApproval=\"true\",disruptionApproval=\"false\",requirementsNotMet=\"false\",notificationNotSent=\"false\",releaseQueueDepth=\"2\",majorReleaseDepth=\"0\",majorReleaseName=\"nil\",fromToName=\"nil\",module=\"echo\"} 1"),
            "{text}"
        );
        let blocked = release_plan::deploy::ReleaseInfo {
            requirements_not_met: true,
            ..Default::default()
        };
        metrics.set_module_release_info("echo-v1.2.0", "echo", &blocked);
        let text = metrics.encode();
        assert_eq!(text.matches("d8_module_release_info{").count(), 1, "{text}");
        assert!(text.contains("requirementsNotMet=\"true\""), "{text}");
        metrics.purge_module_release_info("echo-v1.2.0");
        assert!(!metrics.encode().contains("d8_module_release_info{"));
    }

    #[test]
    fn module_config_families_are_refilled() {
        let metrics = Metrics::default();
        metrics.set_allowed_to_disable([("echo", true), ("hello", false)]);
        metrics.set_at_conflict(["echo"]);
        let text = metrics.encode();
        for line in [
            "d8_moduleconfig_allowed_to_disable{module=\"echo\"} 1",
            "d8_moduleconfig_allowed_to_disable{module=\"hello\"} 0",
            "d8_module_at_conflict{moduleName=\"echo\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        metrics.set_allowed_to_disable([("hello", false)]);
        metrics.set_at_conflict([]);
        let text = metrics.encode();
        assert!(!text.contains("module=\"echo\""), "{text}");
        assert!(!text.contains("d8_module_at_conflict{"), "{text}");
    }
}
