//! Requirement and disruption checks: functions registered per key, as Deckhouse's modules
//! register them (`requirements.RegisterCheck`, `RegisterDisruption`), plus the facts about the
//! cluster they read.
//!
//! A release's `spec.requirements` key with a registered check must pass; a key without one
//! passes (Deckhouse does the same: only registered keys are checked). A `spec.disruptions`
//! entry with a registered disruption function that returns a reason needs
//! `disruption-approved` when `disruptionApprovalMode` is `Manual`.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use release_plan::ReleaseVersion;
use release_plan::deploy::requirement_not_met_message;

use crate::Error;

/// The requirement key of the minimal Kubernetes version (`"k8s": "1.27"`).
pub const KUBERNETES_REQUIREMENT: &str = "k8s";

/// Facts about the cluster that checks read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// The Kubernetes version (`1.29.3`), when known.
    pub kubernetes_version: Option<String>,
}

/// A requirement check: the required value and the facts, `Err(reason)` when not met.
pub type CheckFn = Box<dyn Fn(&str, &ClusterFacts) -> Result<(), String> + Send + Sync>;
/// A disruption check: `Some(reason)` when the release would disrupt this cluster.
pub type DisruptionFn = Box<dyn Fn(&ClusterFacts) -> Option<String> + Send + Sync>;

/// The registered checks.
#[derive(Default)]
pub struct Checks {
    requirements: BTreeMap<String, CheckFn>,
    disruptions: BTreeMap<String, DisruptionFn>,
}

impl fmt::Debug for Checks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checks")
            .field(
                "requirements",
                &self.requirements.keys().collect::<Vec<_>>(),
            )
            .field("disruptions", &self.disruptions.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The `k8s` check: the cluster's Kubernetes version must be at least the required one.
pub fn kubernetes_check(required: &str, facts: &ClusterFacts) -> Result<(), String> {
    let required_version = ReleaseVersion::parse(required.trim())
        .map_err(|_| format!("invalid required kubernetes version {required:?}"))?;
    let current = facts
        .kubernetes_version
        .as_deref()
        .ok_or_else(|| "the cluster kubernetes version is unknown".to_owned())?;
    let current_version = ReleaseVersion::parse(current.trim())
        .map_err(|_| format!("invalid cluster kubernetes version {current:?}"))?;
    if current_version < required_version {
        return Err(format!(
            "current kubernetes version {current} is lower than required {required}"
        ));
    }
    Ok(())
}

impl Checks {
    /// No checks.
    pub fn new() -> Self {
        Self::default()
    }

    /// The checks this crate knows: [`KUBERNETES_REQUIREMENT`].
    pub fn with_defaults() -> Self {
        Self::new().requirement(KUBERNETES_REQUIREMENT, kubernetes_check)
    }

    /// Registers the requirement check of `key`.
    pub fn requirement(
        mut self,
        key: impl Into<String>,
        check: impl Fn(&str, &ClusterFacts) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.requirements.insert(key.into(), Box::new(check));
        self
    }

    /// Registers the disruption check of `key`.
    pub fn disruption(
        mut self,
        key: impl Into<String>,
        check: impl Fn(&ClusterFacts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.disruptions.insert(key.into(), Box::new(check));
        self
    }

    /// The messages of the registered requirement checks that fail for `requirements`, in key
    /// order: `"<key>" requirement for DeckhouseRelease "<version>" not met: <reason>`.
    pub fn requirement_failures(
        &self,
        version: &ReleaseVersion,
        requirements: &BTreeMap<String, String>,
        facts: &ClusterFacts,
    ) -> Vec<String> {
        requirements
            .iter()
            .filter_map(|(key, value)| {
                let check = self.requirements.get(key)?;
                check(value, facts)
                    .err()
                    .map(|reason| requirement_not_met_message(key, version, &reason))
            })
            .collect()
    }

    /// The reasons of the registered disruption checks that hold for `disruptions`, in order.
    pub fn disruption_reasons(&self, disruptions: &[String], facts: &ClusterFacts) -> Vec<String> {
        disruptions
            .iter()
            .filter_map(|key| self.disruptions.get(key).and_then(|check| check(facts)))
            .collect()
    }
}

/// Where the Kubernetes version comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KubernetesVersionSource {
    /// A fixed value (a single machine, where nothing else knows it).
    Fixed(String),
    /// `kubernetesVersion` of `cluster-configuration.yaml` in the Secret
    /// `kube-system/d8-cluster-configuration`; when it is `Automatic` (or the Secret is
    /// missing), the API server's `/version`.
    ClusterConfiguration,
}

impl KubernetesVersionSource {
    /// Reads the version; `None` when it cannot be known (checks then fail with a reason).
    pub async fn read(&self, client: &Client) -> Option<String> {
        match self {
            Self::Fixed(v) => Some(v.clone()),
            Self::ClusterConfiguration => match configured_version(client).await {
                Ok(Some(v)) if v != "Automatic" => Some(v),
                Ok(_) => server_version(client).await,
                Err(error) => {
                    tracing::warn!(%error, "reading the cluster configuration");
                    server_version(client).await
                }
            },
        }
    }
}

async fn configured_version(client: &Client) -> Result<Option<String>, Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let secret = secrets
        .get_opt("d8-cluster-configuration")
        .await
        .map_err(|e| Error::kube("get Secret kube-system/d8-cluster-configuration", e))?;
    let Some(bytes) = secret
        .and_then(|s| s.data)
        .and_then(|mut d| d.remove("cluster-configuration.yaml"))
    else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes.0);
    let value: serde_json::Value = serde_saphyr::from_str(&text)
        .map_err(|e| Error::Settings(format!("cluster-configuration.yaml: {e}")))?;
    Ok(match value.get("kubernetesVersion") {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

async fn server_version(client: &Client) -> Option<String> {
    match client.apiserver_version().await {
        Ok(info) => Some(info.git_version.trim_start_matches('v').to_owned()),
        Err(error) => {
            tracing::warn!(%error, "reading the API server version");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> ReleaseVersion {
        ReleaseVersion::parse(s).unwrap()
    }

    fn facts(k8s: Option<&str>) -> ClusterFacts {
        ClusterFacts {
            kubernetes_version: k8s.map(str::to_owned),
        }
    }

    #[test]
    fn kubernetes_requirement() {
        assert_eq!(kubernetes_check("1.27", &facts(Some("1.29.3"))), Ok(()));
        assert_eq!(kubernetes_check("1.29", &facts(Some("1.29"))), Ok(()));
        assert_eq!(
            kubernetes_check("1.30", &facts(Some("1.29.3"))),
            Err("current kubernetes version 1.29.3 is lower than required 1.30".into())
        );
        assert_eq!(
            kubernetes_check("1.30", &facts(None)),
            Err("the cluster kubernetes version is unknown".into())
        );
        assert!(kubernetes_check("soon", &facts(Some("1.29"))).is_err());
    }

    #[test]
    fn failures_use_deckhouse_wording_and_skip_unregistered_keys() {
        let checks = Checks::with_defaults().requirement("ingressNginx", |value, _| {
            Err(format!("controller version is older than {value}"))
        });
        let requirements = [
            ("k8s".to_owned(), "1.30".to_owned()),
            ("ingressNginx".to_owned(), "1.9".to_owned()),
            ("unregistered".to_owned(), "x".to_owned()),
        ]
        .into_iter()
        .collect();
        let failures =
            checks.requirement_failures(&v("v1.68.0"), &requirements, &facts(Some("1.29")));
        assert_eq!(
            failures,
            vec![
                "\"ingressNginx\" requirement for DeckhouseRelease \"1.68.0\" not met: controller version is older than 1.9".to_owned(),
                "\"k8s\" requirement for DeckhouseRelease \"1.68.0\" not met: current kubernetes version 1.29 is lower than required 1.30".to_owned(),
            ]
        );
        let ok = checks.requirement_failures(
            &v("v1.68.0"),
            &[("k8s".to_owned(), "1.28".to_owned())]
                .into_iter()
                .collect(),
            &facts(Some("1.29")),
        );
        assert!(ok.is_empty());
    }

    #[test]
    fn disruptions() {
        let checks = Checks::new()
            .disruption("ingressNginx", |_| {
                Some("ingress controllers restart".into())
            })
            .disruption("quiet", |_| None);
        let reasons = checks.disruption_reasons(
            &["quiet".into(), "ingressNginx".into(), "unknown".into()],
            &ClusterFacts::default(),
        );
        assert_eq!(reasons, vec!["ingress controllers restart".to_owned()]);
        assert!(format!("{checks:?}").contains("ingressNginx"));
    }
}
