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
//!   dropped when the release leaves Pending (the `ModuleRelease*` alerts);
//! - `d8_module_config_obsolete_version{name, version, latest}`: 1 per ModuleConfig (not
//!   `global`) whose `spec.version` is set and older than its module's latest settings version
//!   (Deckhouse's module config controller; `ModuleConfigObsoleteVersion`);
//! - `deckhouse_module_configuration_error{module, version, error}`: 1 while the settings of a
//!   module's ModuleConfig are refused by the release about to be installed (`version` the
//!   release's, `error` the validator's message), 0 with `error=""` once a release's validation
//!   passes (Deckhouse's module release controller; `D8DeckhouseModuleValidationError`);
//! - `deckhouse_module_update_policy_not_found{version, module_release, module}` (counter, no
//!   `_total` as in Deckhouse): +1 each time a Pending release cannot be processed because the
//!   update policy its module names does not exist (`D8DeckhouseModuleUpdatePolicyNotFound`);
//! - `d8_module_updating_broken_sequence{module, registry, actualVersion, version}`: 1 while a
//!   module source cannot create the step-by-step releases from `actualVersion` (the deployed
//!   one) because the registry lacks a minor version before `version` (Deckhouse's module source
//!   controller; `DeckhouseModuleUpdatingFailedBrokenSequence`), cleared on the module's next
//!   successful check;
//! - `d8_module_updating_module_is_not_valid{module, registry, actualVersion, version}`: 1 per
//!   step of that chain whose release image (`<module>/release:v<version>`) cannot be
//!   downloaded or read; the step's release is not created, the others are (Deckhouse's
//!   `DeckhouseModuleUpdatingFailedModuleIsNotValid`), cleared on the module's next check; and
//!   `{module, version="unknown", registry}` while the release image of the module's channel
//!   cannot be read and its ModuleConfig enables it (`enabled: true`) from this source (no
//!   `source`, `Embedded`, or this one), cleared when the source next checks the module;
//! - `d8_deprecated_update_policy{moduleName, updatePolicy}`: 1 per module enabled by its
//!   ModuleConfig, bound to no policy by name, that the `moduleReleaseSelector` of a `v1alpha1`
//!   ModuleUpdatePolicy still selects (Deckhouse's `d8_update_policy` group, labelled
//!   `moduleName` although its `ModuleHasDeprecatedUpdatePolicy` alert groups by `module`);
//! - `d8_edition_not_found{module="deckhouse"}`: 1 while neither the controller's edition nor
//!   the `deckhouse` ModuleConfig's `settings.license.edition` names a known edition (`ce`,
//!   `be`, `ee`, `se`, `se-plus`, `fe`), else 0 (Deckhouse's `deckhouse` module hook, whose
//!   metrics carry the `module` label; `DeckhouseEditionNotFound`).
//!
//! Label values are module names (a bounded set); families are cleared and refilled on every
//! pass (Deckhouse expires the group) so that a module that left a state does not linger as a
//! stale series.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::runtime::metrics::BareCounter;

type Labels = Vec<(&'static str, String)>;

/// The step-by-step failure series written per module: the family's kind and the labels.
type FailureSeries = Vec<(&'static str, Labels)>;

/// Why a module source could not create a module's releases step by step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdatingFailure {
    /// The registry lacks a minor version between the deployed `actual` and `version` (both
    /// `v`-prefixed, as Deckhouse labels them).
    BrokenSequence {
        /// The registry (`spec.registry.repo` of the source).
        registry: String,
        /// The version the chain starts from.
        actual: String,
        /// The version that does not follow it.
        version: String,
    },
    /// The release image of `version`, a step of the chain from `actual`, cannot be downloaded
    /// or read (Deckhouse's "module is corrupted").
    ModuleIsNotValid {
        /// The registry (`spec.registry.repo` of the source).
        registry: String,
        /// The version the chain starts from.
        actual: String,
        /// The version whose release image is not valid.
        version: String,
    },
    /// The release image of the module's release channel cannot be downloaded or read, for a
    /// module its ModuleConfig enables from this source (Deckhouse labels it `version="unknown"`
    /// and without `actualVersion`).
    ChannelNotValid {
        /// The registry (`spec.registry.repo` of the source).
        registry: String,
    },
}

/// The version a module source reports for a module whose channel could not be read.
pub const UNKNOWN_VERSION: &str = "unknown";

impl UpdatingFailure {
    /// The failure the step-by-step planner's error means, if it is one of these.
    pub fn of(registry: &str, error: &release_plan::Error) -> Option<Self> {
        match error {
            release_plan::Error::NotInSequence { actual, next } => Some(Self::BrokenSequence {
                registry: registry.to_owned(),
                actual: v_prefixed(actual),
                version: v_prefixed(next),
            }),
            _ => None,
        }
    }

    /// The failure of step `version` of a chain from `actual` whose release image is not valid.
    pub fn not_valid(registry: &str, actual: &str, version: &str) -> Self {
        Self::ModuleIsNotValid {
            registry: registry.to_owned(),
            actual: v_prefixed(actual),
            version: v_prefixed(version),
        }
    }

    /// The failure of a module whose channel release image cannot be read.
    pub fn channel_not_valid(registry: &str) -> Self {
        Self::ChannelNotValid {
            registry: registry.to_owned(),
        }
    }

    /// The family it is reported in and its labels.
    fn series(&self, module: &str) -> (&'static str, Labels) {
        let chain = |registry: &String, actual: &String, version: &String| {
            vec![
                ("module", module.to_owned()),
                ("version", version.clone()),
                ("registry", registry.clone()),
                ("actualVersion", actual.clone()),
            ]
        };
        match self {
            Self::BrokenSequence {
                registry,
                actual,
                version,
            } => ("broken_sequence", chain(registry, actual, version)),
            Self::ModuleIsNotValid {
                registry,
                actual,
                version,
            } => ("module_is_not_valid", chain(registry, actual, version)),
            Self::ChannelNotValid { registry } => (
                "module_is_not_valid",
                vec![
                    ("module", module.to_owned()),
                    ("version", UNKNOWN_VERSION.to_owned()),
                    ("registry", registry.clone()),
                ],
            ),
        }
    }
}

/// The editions Deckhouse knows.
const EDITIONS: [&str; 6] = ["ce", "be", "ee", "se", "se-plus", "fe"];

/// Whether the controller's `edition` or the `deckhouse` ModuleConfig's
/// `settings.license.edition` names a known edition (case-insensitive), as Deckhouse's
/// `check_deckhouse_edition` hook decides.
pub fn edition_found(edition: &str, license_edition: Option<&str>) -> bool {
    let known = |e: &str| EDITIONS.contains(&e.to_lowercase().as_str());
    known(edition) || license_edition.is_some_and(known)
}

fn v_prefixed(version: &str) -> String {
    if version.starts_with('v') {
        version.to_owned()
    } else {
        format!("v{version}")
    }
}

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
    deprecated_update_policy: Family<Labels, Gauge>,
    obsolete_version: Family<Labels, Gauge>,
    configuration_error: Family<Labels, Gauge>,
    update_policy_not_found: Family<Labels, BareCounter>,
    broken_sequence: Family<Labels, Gauge>,
    module_is_not_valid: Family<Labels, Gauge>,
    /// Per module and source: the failures last written (family kind and labels).
    updating_failures: Arc<Mutex<BTreeMap<(String, String), FailureSeries>>>,
    edition_not_found: Family<Labels, Gauge>,
    /// The `d8_module_release_info` labels last written per release, to replace them.
    module_release_labels: Arc<Mutex<HashMap<String, Labels>>>,
    /// Per module: the `deckhouse_module_configuration_error` labels last written, to replace
    /// them.
    per_module: Arc<Mutex<BTreeMap<(&'static str, String), Labels>>>,
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
        registry.register(
            "d8_deprecated_update_policy",
            "1 per module a deprecated v1alpha1 ModuleUpdatePolicy still selects.",
            self.deprecated_update_policy.clone(),
        );
        registry.register(
            "d8_module_config_obsolete_version",
            "1 per ModuleConfig whose settings version is older than its module's latest.",
            self.obsolete_version.clone(),
        );
        registry.register(
            "deckhouse_module_configuration_error",
            "1 while a module's settings are refused by the release to install, 0 once valid.",
            self.configuration_error.clone(),
        );
        registry.register(
            "deckhouse_module_update_policy_not_found",
            "Times a module release waited for an update policy that does not exist.",
            self.update_policy_not_found.clone(),
        );
        registry.register(
            "d8_edition_not_found",
            "1 while no known Deckhouse edition is configured.",
            self.edition_not_found.clone(),
        );
        registry.register(
            "d8_module_updating_broken_sequence",
            "1 while a module's step-by-step releases cannot be created (a minor version is missing).",
            self.broken_sequence.clone(),
        );
        registry.register(
            "d8_module_updating_module_is_not_valid",
            "1 while the release image of a step of a module's step-by-step releases is not valid.",
            self.module_is_not_valid.clone(),
        );
    }

    /// `d8_edition_not_found`: whether no known edition was found.
    pub(crate) fn set_edition_not_found(&self, not_found: bool) {
        self.edition_not_found
            .get_or_create(&vec![("module", "deckhouse".to_owned())])
            .set(i64::from(not_found));
    }

    /// Refills `d8_module_config_obsolete_version` with `(name, version, latest)`.
    pub(crate) fn set_obsolete_versions<'a>(
        &self,
        configs: impl IntoIterator<Item = (&'a str, i64, i64)>,
    ) {
        self.obsolete_version.clear();
        for (name, version, latest) in configs {
            self.obsolete_version
                .get_or_create(&vec![
                    ("name", name.to_owned()),
                    ("version", version.to_string()),
                    ("latest", latest.to_string()),
                ])
                .set(1);
        }
    }

    /// Replaces the series `kind` holds for `module` with `labels` set to `value` (`None`: drops
    /// it).
    fn replace_per_module(
        &self,
        family: &Family<Labels, Gauge>,
        kind: &'static str,
        module: &str,
        next: Option<(Labels, i64)>,
    ) {
        let mut last = self.per_module.lock().unwrap_or_else(|e| e.into_inner());
        let key = (kind, module.to_owned());
        if let Some(previous) = last.remove(&key) {
            family.remove(&previous);
        }
        if let Some((labels, value)) = next {
            family.get_or_create(&labels).set(value);
            last.insert(key, labels);
        }
    }

    /// `deckhouse_module_configuration_error` of `module` after validating its settings
    /// against release `version`: `Some(error)` when refused (1), `None` when valid (0,
    /// `error=""`).
    pub(crate) fn set_configuration_error(&self, module: &str, version: &str, error: Option<&str>) {
        let labels = vec![
            ("module", module.to_owned()),
            ("version", version.to_owned()),
            ("error", error.unwrap_or_default().to_owned()),
        ];
        self.replace_per_module(
            &self.configuration_error,
            "configuration_error",
            module,
            Some((labels, i64::from(error.is_some()))),
        );
    }

    /// One more `deckhouse_module_update_policy_not_found` for `release` (of `module`, at
    /// `version`).
    pub(crate) fn count_update_policy_not_found(&self, release: &str, module: &str, version: &str) {
        self.update_policy_not_found
            .get_or_create(&vec![
                ("version", version.to_owned()),
                ("module_release", release.to_owned()),
                ("module", module.to_owned()),
            ])
            .inc();
    }

    /// The update state of `module` after `source` checked it: each failure raises
    /// `d8_module_updating_broken_sequence` or `d8_module_updating_module_is_not_valid`; the
    /// failures this source wrote for the module before are cleared (Deckhouse expires the
    /// module's group of the source).
    pub(crate) fn set_updating_failures(
        &self,
        module: &str,
        source: &str,
        failures: &[UpdatingFailure],
    ) {
        let mut last = self
            .updating_failures
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let family = |kind: &str| {
            if kind == "broken_sequence" {
                &self.broken_sequence
            } else {
                &self.module_is_not_valid
            }
        };
        let key = (module.to_owned(), source.to_owned());
        for (kind, labels) in last.remove(&key).unwrap_or_default() {
            family(kind).remove(&labels);
        }
        let series: FailureSeries = failures.iter().map(|f| f.series(module)).collect();
        for (kind, labels) in &series {
            family(kind).get_or_create(labels).set(1);
        }
        if !series.is_empty() {
            last.insert(key, series);
        }
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

    /// Refills `d8_deprecated_update_policy` with `(module, policy)` pairs.
    pub(crate) fn set_deprecated_update_policies<'a>(
        &self,
        matches: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) {
        self.deprecated_update_policy.clear();
        for (module, policy) in matches {
            self.deprecated_update_policy
                .get_or_create(&vec![
                    ("moduleName", module.to_owned()),
                    ("updatePolicy", policy.to_owned()),
                ])
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
        release_controller::metrics::text(|registry| self.register(registry))
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
        metrics.set_deprecated_update_policies([("echo", "old")]);
        let text = metrics.encode();
        for line in [
            "d8_moduleconfig_allowed_to_disable{module=\"echo\"} 1",
            "d8_moduleconfig_allowed_to_disable{module=\"hello\"} 0",
            "d8_module_at_conflict{moduleName=\"echo\"} 1",
            "d8_deprecated_update_policy{moduleName=\"echo\",updatePolicy=\"old\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        metrics.set_allowed_to_disable([("hello", false)]);
        metrics.set_at_conflict([]);
        metrics.set_deprecated_update_policies([]);
        let text = metrics.encode();
        assert!(!text.contains("module=\"echo\""), "{text}");
        assert!(!text.contains("d8_deprecated_update_policy{"), "{text}");
        assert!(!text.contains("d8_module_at_conflict{"), "{text}");
    }

    #[test]
    fn obsolete_versions_are_refilled() {
        let metrics = Metrics::default();
        metrics.set_obsolete_versions([("echo", 1, 2)]);
        let text = metrics.encode();
        assert!(
            text.lines().any(|l| l
                == "d8_module_config_obsolete_version{name=\"echo\",version=\"1\",latest=\"2\"} 1"),
            "{text}"
        );
        metrics.set_obsolete_versions([]);
        assert!(
            !metrics
                .encode()
                .contains("d8_module_config_obsolete_version{")
        );
    }

    #[test]
    fn configuration_error_is_replaced_per_module() {
        let metrics = Metrics::default();
        metrics.set_configuration_error("echo", "1.2.0", Some("echo.replicas is required"));
        let text = metrics.encode();
        assert!(
            text.lines().any(|l| l
                == "deckhouse_module_configuration_error{module=\"echo\",version=\"1.2.0\",error=\"echo.replicas is required\"} 1"),
            "{text}"
        );
        metrics.set_configuration_error("echo", "1.2.0", None);
        let text = metrics.encode();
        assert_eq!(
            text.matches("deckhouse_module_configuration_error{")
                .count(),
            1,
            "{text}"
        );
        assert!(
            text.lines().any(|l| l
                == "deckhouse_module_configuration_error{module=\"echo\",version=\"1.2.0\",error=\"\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn update_policy_not_found_counts_without_total() {
        let metrics = Metrics::default();
        metrics.count_update_policy_not_found("echo-v1.2.0", "echo", "v1.2.0");
        metrics.count_update_policy_not_found("echo-v1.2.0", "echo", "v1.2.0");
        let text = metrics.encode();
        assert!(
            text.contains("# TYPE deckhouse_module_update_policy_not_found counter\n"),
            "{text}"
        );
        assert!(
            text.lines().any(|l| l
                == "deckhouse_module_update_policy_not_found{version=\"v1.2.0\",module_release=\"echo-v1.2.0\",module=\"echo\"} 2"),
            "{text}"
        );
    }

    #[test]
    fn updating_failures_from_the_planner() {
        let broken = release_plan::Error::NotInSequence {
            actual: "v1.0.1".into(),
            next: "1.3.0".into(),
        };
        let table = [
            (
                broken,
                Some(UpdatingFailure::BrokenSequence {
                    registry: "r.example/m".into(),
                    actual: "v1.0.1".into(),
                    version: "v1.3.0".into(),
                }),
            ),
            (release_plan::Error::NoMatchedTags, None),
        ];
        for (error, want) in table {
            assert_eq!(UpdatingFailure::of("r.example/m", &error), want, "{error}");
        }
        let metrics = Metrics::default();
        let failure = UpdatingFailure::of(
            "r.example/m",
            &release_plan::Error::NotInSequence {
                actual: "v1.0.1".into(),
                next: "v1.3.0".into(),
            },
        );
        metrics.set_updating_failures("echo", "src", failure.as_slice());
        let text = metrics.encode();
        assert!(
            text.lines().any(|l| l
                == "d8_module_updating_broken_sequence{module=\"echo\",version=\"v1.3.0\",registry=\"r.example/m\",actualVersion=\"v1.0.1\"} 1"),
            "{text}"
        );
        metrics.set_updating_failures(
            "echo",
            "src",
            &[
                UpdatingFailure::not_valid("r.example/m", "1.0.1", "1.1.2"),
                UpdatingFailure::not_valid("r.example/m", "1.0.1", "v1.2.0"),
            ],
        );
        let text = metrics.encode();
        assert!(
            !text.contains("d8_module_updating_broken_sequence{"),
            "{text}"
        );
        for version in ["v1.1.2", "v1.2.0"] {
            let line = format!(
                "d8_module_updating_module_is_not_valid{{module=\"echo\",version=\"{version}\",registry=\"r.example/m\",actualVersion=\"v1.0.1\"}} 1"
            );
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        metrics.set_updating_failures("echo", "src", &[]);
        assert!(!metrics.encode().contains("d8_module_updating_"));
        // The channel's release image of a module cannot be read: `version="unknown"`, no
        // `actualVersion`; each source's failures are its own.
        metrics.set_updating_failures(
            "echo",
            "src",
            &[UpdatingFailure::channel_not_valid("r.example/m")],
        );
        metrics.set_updating_failures("echo", "other", &[]);
        let text = metrics.encode();
        assert!(
            text.lines().any(|l| l
                == "d8_module_updating_module_is_not_valid{module=\"echo\",version=\"unknown\",registry=\"r.example/m\"} 1"),
            "{text}"
        );
        metrics.set_updating_failures("echo", "src", &[]);
        assert!(!metrics.encode().contains("d8_module_updating_"));
    }

    #[test]
    fn editions_as_deckhouse_finds_them() {
        for (edition, license, want) in [
            ("ce", None, true),
            ("EE", None, true),
            ("se-plus", None, true),
            ("", Some("fe"), true),
            ("unknown", Some("Be"), true),
            ("", None, false),
            ("unknown", Some("pro"), false),
        ] {
            assert_eq!(
                edition_found(edition, license),
                want,
                "{edition} {license:?}"
            );
        }
        let metrics = Metrics::default();
        metrics.set_edition_not_found(true);
        assert!(
            metrics
                .encode()
                .contains("d8_edition_not_found{module=\"deckhouse\"} 1")
        );
        metrics.set_edition_not_found(false);
        assert!(
            metrics
                .encode()
                .contains("d8_edition_not_found{module=\"deckhouse\"} 0")
        );
    }
}
