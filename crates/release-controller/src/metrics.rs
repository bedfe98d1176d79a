//! The release engine's metrics, with Deckhouse's names and labels:
//!
//! - `d8_release_info{name, manualApproval, disruptionApproval, requirementsNotMet,
//!   notificationNotSent, releaseQueueDepth, majorReleaseDepth, majorReleaseName, fromToName}`:
//!   1 per release the controller checked, replaced on every reconcile and dropped once the
//!   release is Skipped, Superseded or Suspended;
//! - `d8_is_updating{deployingRelease}`: 1 while a deployed release waits for the new Deckhouse
//!   to become ready;
//! - `deckhouse_release_channel{release_channel}`: 1, labelled with the `deckhouse` module's
//!   `releaseChannel` as the settings write it (`""` without one: D8DeckhouseIsNotOnReleaseChannel);
//! - `d8_updating_is_failed{version}`: 1 while the intermediate releases up to the channel's
//!   `version` cannot be read from the registry (step-by-step update), 0 once they can;
//! - `d8_migrated_module_not_found{module}`: 1 for a module of `migratedModules` that no
//!   ModuleSource offers;
//! - `deckhouse_registry_errors` (counter, no `_total` as in Deckhouse): +1 each time the
//!   release channel could not be read from the registry (`D8DeckhouseHasNoAccessToRegistry`);
//! - `d8_migrated_module_not_downloaded{module}`: 1 for each module of `migratedModules` that a
//!   ModuleSource offers but that has no Deployed ModuleRelease yet.
//!
//! Label values are release and module names (bounded by the objects in the cluster), never a
//! registry address or credential.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use release_plan::deploy::ReleaseInfo;

type Labels = Vec<(&'static str, String)>;

/// A counter exposed under its own name, as Go's client exposes Deckhouse's counters without
/// `_total` (`# TYPE deckhouse_live_ticks counter`, sample `deckhouse_live_ticks`): prometheus-client
/// would append `_total` to a `Counter`'s sample.
#[derive(Clone, Debug, Default)]
pub struct BareCounter(Arc<AtomicU64>);

impl BareCounter {
    /// One more.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl TypedMetric for BareCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for BareCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// Every metric family of the release engine.
#[derive(Debug, Default)]
pub struct Metrics {
    release_info: Family<Labels, Gauge>,
    is_updating: Family<Labels, Gauge>,
    updating_is_failed: Family<Labels, Gauge>,
    release_channel: Family<Labels, Gauge>,
    migrated_module_not_found: Family<Labels, Gauge>,
    migrated_module_not_downloaded: Family<Labels, Gauge>,
    registry_errors: BareCounter,
    /// The `d8_release_info` labels last written per release, to replace them.
    release_info_labels: Mutex<HashMap<String, Labels>>,
}

impl Metrics {
    /// Registers every family in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "d8_release_info",
            "Why a DeckhouseRelease waits (1 per checked release).",
            self.release_info.clone(),
        );
        registry.register(
            "d8_is_updating",
            "1 while Deckhouse is updating to deployingRelease.",
            self.is_updating.clone(),
        );
        registry.register(
            "deckhouse_release_channel",
            "1, labelled with the release channel the deckhouse module follows (empty: none).",
            self.release_channel.clone(),
        );
        registry.register(
            "d8_updating_is_failed",
            "1 while the releases up to version cannot be read from the registry.",
            self.updating_is_failed.clone(),
        );
        registry.register(
            "d8_migrated_module_not_found",
            "1 for a migrated module that no ModuleSource offers.",
            self.migrated_module_not_found.clone(),
        );
        registry.register(
            "d8_migrated_module_not_downloaded",
            "1 for a migrated module a ModuleSource offers that is not downloaded (deployed) yet.",
            self.migrated_module_not_downloaded.clone(),
        );
        registry.register(
            "deckhouse_registry_errors",
            "Times the release channel could not be read from the registry.",
            self.registry_errors.clone(),
        );
    }

    /// One more failed read of the release channel from the registry.
    pub(crate) fn registry_error(&self) {
        self.registry_errors.inc();
    }

    /// Replaces the `d8_release_info` series of `release`.
    pub(crate) fn set_release_info(&self, release: &str, info: &ReleaseInfo) {
        let labels = info.labels(release);
        let mut last = self
            .release_info_labels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = last.insert(release.to_owned(), labels.clone())
            && previous != labels
        {
            self.release_info.remove(&previous);
        }
        self.release_info.get_or_create(&labels).set(1);
    }

    /// Drops the `d8_release_info` series of `release`.
    pub(crate) fn purge_release_info(&self, release: &str) {
        let mut last = self
            .release_info_labels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = last.remove(release) {
            self.release_info.remove(&previous);
        }
    }

    /// `d8_is_updating{deployingRelease=release} 1`, or no series when `release` is `None`.
    pub(crate) fn set_updating(&self, release: Option<&str>) {
        self.is_updating.clear();
        if let Some(release) = release {
            self.is_updating
                .get_or_create(&vec![("deployingRelease", release.to_owned())])
                .set(1);
        }
    }

    /// `deckhouse_release_channel{release_channel} 1` for the channel now in the settings.
    pub(crate) fn set_release_channel(&self, channel: &str) {
        self.release_channel.clear();
        self.release_channel
            .get_or_create(&vec![("release_channel", channel.to_owned())])
            .set(1);
    }

    /// `d8_updating_is_failed{version}`: whether reading the steps up to `version` failed.
    pub(crate) fn set_updating_failed(&self, version: &str, failed: bool) {
        self.updating_is_failed.clear();
        self.updating_is_failed
            .get_or_create(&vec![("version", version.to_owned())])
            .set(i64::from(failed));
    }

    /// The migrated module that is missing now (Deckhouse expires the group on every check).
    pub(crate) fn set_migrated_module_not_found(&self, module: Option<&str>) {
        self.migrated_module_not_found.clear();
        if let Some(module) = module {
            self.migrated_module_not_found
                .get_or_create(&vec![("module", module.to_owned())])
                .set(1);
        }
    }

    /// The migrated modules offered but not downloaded now (refilled on every check).
    pub(crate) fn set_migrated_modules_not_downloaded(&self, modules: &[String]) {
        self.migrated_module_not_downloaded.clear();
        for module in modules {
            self.migrated_module_not_downloaded
                .get_or_create(&vec![("module", module.clone())])
                .set(1);
        }
    }

    /// The families in Prometheus text format (for tests and simple endpoints).
    pub fn encode(&self) -> String {
        text(|registry| self.register(registry))
    }
}

/// The families `register` adds to an empty registry, in Prometheus text format.
pub fn text(register: impl FnOnce(&mut Registry)) -> String {
    let mut registry = Registry::default();
    register(&mut registry);
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_info_is_replaced_and_purged() {
        let metrics = Metrics::default();
        let waiting = ReleaseInfo {
            manual_approval: true,
            release_queue_depth: Some(1),
            ..ReleaseInfo::default()
        };
        metrics.set_release_info("v1.67.0", &waiting);
        let text = metrics.encode();
        assert!(
            text.contains("d8_release_info{name=\"v1.67.0\",manualApproval=\"true\",disruptionApproval=\"false\",requirementsNotMet=\"false\",notificationNotSent=\"false\",releaseQueueDepth=\"1\",majorReleaseDepth=\"0\",majorReleaseName=\"nil\",fromToName=\"nil\"} 1"),
            "{text}"
        );
        metrics.set_release_info(
            "v1.67.0",
            &ReleaseInfo {
                requirements_not_met: true,
                ..ReleaseInfo::default()
            },
        );
        let text = metrics.encode();
        assert!(!text.contains("manualApproval=\"true\""), "{text}");
        assert!(text.contains("requirementsNotMet=\"true\""), "{text}");
        metrics.purge_release_info("v1.67.0");
        assert!(!metrics.encode().contains("d8_release_info{"));
    }

    #[test]
    fn updating_and_migrated_modules() {
        let metrics = Metrics::default();
        metrics.set_updating(Some("v1.68.0"));
        metrics.set_migrated_module_not_found(Some("echo"));
        let text = metrics.encode();
        assert!(
            text.contains("d8_is_updating{deployingRelease=\"v1.68.0\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("d8_migrated_module_not_found{module=\"echo\"} 1"),
            "{text}"
        );
        metrics.set_updating(None);
        metrics.set_migrated_modules_not_downloaded(&["echo".into()]);
        assert!(
            metrics
                .encode()
                .contains("d8_migrated_module_not_downloaded{module=\"echo\"} 1")
        );
        metrics.set_migrated_modules_not_downloaded(&[]);
        assert!(
            !metrics
                .encode()
                .contains("d8_migrated_module_not_downloaded{")
        );
        metrics.set_migrated_module_not_found(None);
        let text = metrics.encode();
        assert!(!text.contains("d8_is_updating{"), "{text}");
        assert!(!text.contains("d8_migrated_module_not_found{"), "{text}");
    }
}
