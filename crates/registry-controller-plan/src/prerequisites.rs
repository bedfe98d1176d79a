//! The module's prerequisites (the registry seed, "requirements for using the module"): before
//! the module takes over the nodes' image pull paths, the cluster must
//!
//! - run containerd or containerd v2 on its nodes (`defaultCRI` of ClusterConfiguration);
//! - be fully managed by the platform — the module does not work in Managed Kubernetes, which
//!   the platform recognises by the absence of ClusterConfiguration (Secret
//!   `kube-system/d8-cluster-configuration`);
//! - be a static cluster when the in-cluster cache is on (the cache lives on the master nodes'
//!   disks).
//!
//! A Managed configuration on a cluster that does not meet them is refused: nothing is laid out,
//! and the reasons are shown in `RegistryConfig.status` (condition `Valid`).

use api::registry::{RegistryConfigSpec, RegistryMode};
use serde::Deserialize;

/// Namespace of [`CLUSTER_CONFIGURATION_SECRET`].
pub const CLUSTER_CONFIGURATION_NAMESPACE: &str = "kube-system";
/// Secret holding ClusterConfiguration; only clusters the platform manages have it.
pub const CLUSTER_CONFIGURATION_SECRET: &str = "d8-cluster-configuration";
/// Key of [`CLUSTER_CONFIGURATION_SECRET`].
pub const CLUSTER_CONFIGURATION_KEY: &str = "cluster-configuration.yaml";
/// Reason of the refusal in the `Valid` condition.
pub const REASON: &str = "PrerequisitesNotMet";

/// What ClusterConfiguration says about the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFacts {
    /// `clusterType`: `Cloud` or `Static`.
    #[serde(default)]
    pub cluster_type: Option<String>,
    /// `defaultCRI`: `Containerd` (the schema's default), `ContainerdV2`, `Docker`, `NotManaged`.
    #[serde(default, rename = "defaultCRI")]
    pub default_cri: Option<String>,
}

impl ClusterFacts {
    /// A static cluster running `cri` (the single machine: one static node with containerd).
    pub fn static_with(cri: &str) -> Self {
        Self {
            cluster_type: Some("Static".into()),
            default_cri: Some(cri.into()),
        }
    }
}

/// Reads `cluster-configuration.yaml`.
pub fn read_cluster_configuration(yaml: &[u8]) -> Result<ClusterFacts, String> {
    let text = std::str::from_utf8(yaml)
        .map_err(|_| format!("{CLUSTER_CONFIGURATION_KEY} is not UTF-8"))?;
    serde_saphyr::from_str(text).map_err(|e| format!("{CLUSTER_CONFIGURATION_KEY}: {e}"))
}

/// One prerequisite the cluster does not meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unmet {
    /// `defaultCRI` names something other than containerd or containerd v2.
    ContainerRuntime(String),
    /// No ClusterConfiguration: a Managed Kubernetes the platform does not fully manage.
    ManagedKubernetes,
    /// The cache is on in a cluster whose `clusterType` is not `Static`.
    CacheNotStatic(String),
}

impl std::fmt::Display for Unmet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unmet::ContainerRuntime(cri) => write!(
                f,
                "the nodes must use containerd or containerd v2 (defaultCRI Containerd or \
                 ContainerdV2 in ClusterConfiguration), defaultCRI is {cri}"
            ),
            Unmet::ManagedKubernetes => write!(
                f,
                "the cluster must be fully managed by the platform: the module does not work in \
                 Managed Kubernetes (there is no ClusterConfiguration, Secret \
                 {CLUSTER_CONFIGURATION_NAMESPACE}/{CLUSTER_CONFIGURATION_SECRET})"
            ),
            Unmet::CacheNotStatic(cluster_type) => write!(
                f,
                "the in-cluster cache uses the master nodes' disks and is supported on static \
                 clusters only, clusterType is {cluster_type} (turn storage.cache off)"
            ),
        }
    }
}

/// Every prerequisite `config` needs that the cluster (`None`: no ClusterConfiguration) does not
/// meet; empty when the module may proceed. Unmanaged needs nothing.
pub fn check(config: &RegistryConfigSpec, cluster: Option<&ClusterFacts>) -> Vec<Unmet> {
    if config.mode != RegistryMode::Managed {
        return Vec::new();
    }
    let Some(cluster) = cluster else {
        return vec![Unmet::ManagedKubernetes];
    };
    let mut unmet = Vec::new();
    // The schema's default for defaultCRI is Containerd.
    let cri = cluster.default_cri.as_deref().unwrap_or("Containerd");
    if !matches!(cri, "Containerd" | "ContainerdV2") {
        unmet.push(Unmet::ContainerRuntime(cri.to_owned()));
    }
    let cache = config.storage.as_ref().is_some_and(|s| s.cache);
    let cluster_type = cluster.cluster_type.as_deref().unwrap_or("unset");
    if cache && cluster_type != "Static" {
        unmet.push(Unmet::CacheNotStatic(cluster_type.to_owned()));
    }
    unmet
}

/// The `Valid` condition's message for a refusal.
pub fn message(unmet: &[Unmet]) -> String {
    let reasons: Vec<String> = unmet.iter().map(ToString::to_string).collect();
    format!(
        "the cluster does not meet the registry module's requirements: {}",
        reasons.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::registry::StorageConfig;

    fn managed(cache: bool) -> RegistryConfigSpec {
        RegistryConfigSpec {
            mode: RegistryMode::Managed,
            primary: None,
            storage: Some(StorageConfig {
                cache,
                ..Default::default()
            }),
        }
    }

    fn facts(cluster_type: &str, cri: Option<&str>) -> ClusterFacts {
        ClusterFacts {
            cluster_type: Some(cluster_type.into()),
            default_cri: cri.map(Into::into),
        }
    }

    #[test]
    fn the_seeds_three_requirements() {
        let unmanaged = RegistryConfigSpec {
            mode: RegistryMode::Unmanaged,
            primary: None,
            storage: None,
        };
        let rows: Vec<(&str, RegistryConfigSpec, Option<ClusterFacts>, Vec<Unmet>)> = vec![
            (
                "static, containerd, cache",
                managed(true),
                Some(facts("Static", Some("Containerd"))),
                vec![],
            ),
            (
                "static, containerd v2, cache",
                managed(true),
                Some(facts("Static", Some("ContainerdV2"))),
                vec![],
            ),
            (
                "defaultCRI absent means Containerd",
                managed(true),
                Some(facts("Static", None)),
                vec![],
            ),
            (
                "cloud without the cache",
                managed(false),
                Some(facts("Cloud", Some("Containerd"))),
                vec![],
            ),
            (
                "cloud with the cache",
                managed(true),
                Some(facts("Cloud", Some("Containerd"))),
                vec![Unmet::CacheNotStatic("Cloud".into())],
            ),
            (
                "docker",
                managed(false),
                Some(facts("Static", Some("Docker"))),
                vec![Unmet::ContainerRuntime("Docker".into())],
            ),
            (
                "CRI not managed by the platform, cloud, cache",
                managed(true),
                Some(facts("Cloud", Some("NotManaged"))),
                vec![
                    Unmet::ContainerRuntime("NotManaged".into()),
                    Unmet::CacheNotStatic("Cloud".into()),
                ],
            ),
            (
                "managed Kubernetes",
                managed(false),
                None,
                vec![Unmet::ManagedKubernetes],
            ),
            ("Unmanaged needs nothing", unmanaged, None, vec![]),
        ];
        for (what, config, cluster, want) in rows {
            assert_eq!(check(&config, cluster.as_ref()), want, "{what}");
        }
    }

    #[test]
    fn cluster_configuration_is_read_from_its_yaml() {
        let yaml =
            b"apiVersion: deckhouse.io/v1\nkind: ClusterConfiguration\nclusterType: Static\n\
podSubnetCIDR: 10.111.0.0/16\ndefaultCRI: ContainerdV2\nkubernetesVersion: \"1.31\"\n";
        assert_eq!(
            read_cluster_configuration(yaml).unwrap(),
            facts("Static", Some("ContainerdV2"))
        );
        let error = read_cluster_configuration(b"clusterType: [").unwrap_err();
        assert!(error.starts_with("cluster-configuration.yaml: "), "{error}");
    }

    #[test]
    fn the_message_names_every_reason() {
        let text = message(&[
            Unmet::ContainerRuntime("Docker".into()),
            Unmet::CacheNotStatic("Cloud".into()),
        ]);
        assert!(text.contains("defaultCRI is Docker"), "{text}");
        assert!(text.contains("clusterType is Cloud"), "{text}");
        assert!(
            message(&[Unmet::ManagedKubernetes]).contains("does not work in Managed Kubernetes")
        );
    }
}
