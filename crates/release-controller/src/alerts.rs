//! `update.blockOnAlerts`: updates wait while an alert at the configured severity or a more
//! critical one fires. Deckhouse's severity levels run from 1 (most critical) to 9, so an alert
//! blocks when its `severity_level` is at most the threshold; an alert without a level never
//! blocks. (Deckhouse's newest unit tests read it this way; an older suite compared the other
//! way round.) Forced releases are not blocked.
//!
//! Sources: [`ClusterAlerts`] (Deckhouse's: the ClusterAlert objects), [`PrometheusAlerts`]
//! (Prometheus's HTTP API) and [`StaticAlerts`] (none, or set by hand).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Deserialize;

use crate::Error;

/// A firing alert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alert {
    /// `alertname`.
    pub name: String,
    /// `severity_level`, when the alert has one.
    pub severity_level: Option<u8>,
}

impl Alert {
    /// An alert with a severity level.
    pub fn new(name: impl Into<String>, severity_level: u8) -> Self {
        Self {
            name: name.into(),
            severity_level: Some(severity_level),
        }
    }
}

/// Where firing alerts are read from.
pub trait AlertSource: Send + Sync + std::fmt::Debug {
    /// The alerts firing now.
    fn firing(&self) -> BoxFuture<'_, Result<Vec<Alert>, Error>>;
}

/// The status message of a release held by a firing alert, or `None` when nothing blocks.
pub fn blocking_message(alerts: &[Alert], threshold: u8) -> Option<String> {
    let alert = alerts
        .iter()
        .find(|a| a.severity_level.is_some_and(|level| level <= threshold))?;
    Some(format!(
        "Release is blocked by the firing alert {} with severity level {} (update.blockOnAlerts.severity is {threshold})",
        alert.name,
        alert.severity_level.unwrap_or_default()
    ))
}

/// Alerts held in memory: the single-machine default (none) and tests.
#[derive(Clone, Debug, Default)]
pub struct StaticAlerts(Arc<Mutex<Vec<Alert>>>);

impl StaticAlerts {
    /// No alerts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the firing alerts.
    pub fn set(&self, alerts: Vec<Alert>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = alerts;
    }
}

impl AlertSource for StaticAlerts {
    fn firing(&self) -> BoxFuture<'_, Result<Vec<Alert>, Error>> {
        let alerts = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Box::pin(std::future::ready(Ok(alerts)))
    }
}

/// Prometheus's HTTP API: `GET <base>/api/v1/alerts`, the alerts in state `firing`.
#[derive(Clone, Debug)]
pub struct PrometheusAlerts {
    http: reqwest::Client,
    base: String,
}

#[derive(Deserialize)]
struct AlertsResponse {
    status: String,
    #[serde(default)]
    data: AlertsData,
}

#[derive(Default, Deserialize)]
struct AlertsData {
    #[serde(default)]
    alerts: Vec<PromAlert>,
}

#[derive(Deserialize)]
struct PromAlert {
    #[serde(default)]
    labels: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    state: String,
}

impl PrometheusAlerts {
    /// Alerts of the Prometheus at `base` (e.g. `http://prometheus.d8-monitoring:9090`).
    pub fn new(base: impl Into<String>) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::Alerts {
                reason: format!("HTTP client: {e}"),
            })?;
        Ok(Self {
            http,
            base: base.into().trim_end_matches('/').to_owned(),
        })
    }

    async fn fetch(&self) -> Result<Vec<Alert>, Error> {
        let failed = |reason: String| Error::Alerts { reason };
        let url = format!("{}/api/v1/alerts", self.base);
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| failed(format!("GET {url}: {e}")))?;
        if !response.status().is_success() {
            return Err(failed(format!("GET {url}: {}", response.status())));
        }
        let body: AlertsResponse = response
            .json()
            .await
            .map_err(|e| failed(format!("GET {url}: {e}")))?;
        if body.status != "success" {
            return Err(failed(format!("GET {url}: status {}", body.status)));
        }
        Ok(body
            .data
            .alerts
            .into_iter()
            .filter(|a| a.state == "firing")
            .map(|a| Alert {
                name: a.labels.get("alertname").cloned().unwrap_or_default(),
                severity_level: a.labels.get("severity_level").and_then(|s| s.parse().ok()),
            })
            .collect())
    }
}

impl AlertSource for PrometheusAlerts {
    fn firing(&self) -> BoxFuture<'_, Result<Vec<Alert>, Error>> {
        Box::pin(self.fetch())
    }
}

/// Deckhouse's own source: the ClusterAlert objects (`deckhouse.io/v1alpha1`) the monitoring
/// stack keeps for every firing alert, `alert.name` and `alert.severityLevel` (a string or a
/// number). A cluster without the ClusterAlert kind has no firing alerts.
#[derive(Clone)]
pub struct ClusterAlerts {
    api: kube::Api<kube::api::DynamicObject>,
}

impl std::fmt::Debug for ClusterAlerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterAlerts")
    }
}

impl ClusterAlerts {
    /// ClusterAlerts read through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            api: kube::Api::all_with(client, &Self::resource()),
        }
    }

    /// The ClusterAlert resource (`deckhouse.io/v1alpha1`, cluster-scoped), for dynamic APIs.
    pub fn resource() -> kube::api::ApiResource {
        kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "ClusterAlert"),
            "clusteralerts",
        )
    }

    async fn fetch(&self) -> Result<Vec<Alert>, Error> {
        let list = match self.api.list(&Default::default()).await {
            Ok(list) => list,
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Vec::new()),
            Err(e) => {
                return Err(Error::Alerts {
                    reason: format!("list ClusterAlerts: {e}"),
                });
            }
        };
        Ok(list.items.iter().map(|o| cluster_alert(&o.data)).collect())
    }
}

/// The alert a ClusterAlert object describes.
fn cluster_alert(data: &serde_json::Value) -> Alert {
    let alert = &data["alert"];
    let severity_level = match &alert["severityLevel"] {
        serde_json::Value::String(s) => s.trim().parse().ok(),
        serde_json::Value::Number(n) => n.as_u64().and_then(|n| u8::try_from(n).ok()),
        _ => None,
    };
    Alert {
        name: alert["name"].as_str().unwrap_or_default().to_owned(),
        severity_level,
    }
}

impl AlertSource for ClusterAlerts {
    fn firing(&self) -> BoxFuture<'_, Result<Vec<Alert>, Error>> {
        Box::pin(self.fetch())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_alert_objects_are_read_as_deckhouse_writes_them() {
        let string = serde_json::json!({"alert": {"name": "a", "severityLevel": "4"}});
        let number = serde_json::json!({"alert": {"name": "b", "severityLevel": 7}});
        let none = serde_json::json!({"alert": {"name": "c"}});
        assert_eq!(cluster_alert(&string), Alert::new("a", 4));
        assert_eq!(cluster_alert(&number), Alert::new("b", 7));
        assert_eq!(
            cluster_alert(&none),
            Alert {
                name: "c".into(),
                severity_level: None
            }
        );
    }

    /// Deckhouse's `TestCheckBlockOnAlerts` cases.
    #[test]
    fn severity_threshold() {
        let none: Vec<Alert> = vec![];
        assert_eq!(blocking_message(&none, 4), None);
        let equal = blocking_message(&[Alert::new("alert-eq", 4)], 4).unwrap();
        assert_eq!(
            equal,
            "Release is blocked by the firing alert alert-eq with severity level 4 (update.blockOnAlerts.severity is 4)"
        );
        assert!(
            blocking_message(&[Alert::new("alert-low", 2)], 4)
                .unwrap()
                .contains("alert-low")
        );
        assert_eq!(blocking_message(&[Alert::new("alert-high", 7)], 4), None);
        let unlabelled = Alert {
            name: "no-sev".into(),
            severity_level: None,
        };
        assert_eq!(blocking_message(&[unlabelled], 4), None);
        assert_eq!(blocking_message(&[Alert::new("d", 5)], 0), None);
        assert!(blocking_message(&[Alert::new("d", 0)], 0).is_some());
        let first = blocking_message(
            &[Alert::new("safe-alert", 8), Alert::new("blocking-alert", 3)],
            4,
        )
        .unwrap();
        assert!(first.contains("blocking-alert"), "{first}");
        assert!(blocking_message(&[Alert::new("c", 5)], 6).is_some());
        assert_eq!(blocking_message(&[Alert::new("c", 7)], 6), None);
    }

    #[tokio::test]
    async fn static_source() {
        let source = StaticAlerts::new();
        assert!(source.firing().await.unwrap().is_empty());
        source.set(vec![Alert::new("X", 1)]);
        assert_eq!(source.firing().await.unwrap(), vec![Alert::new("X", 1)]);
    }
}
