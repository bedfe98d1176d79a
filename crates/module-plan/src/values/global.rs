//! What Deckhouse itself puts under `global`, beside the `global` ModuleConfig's settings: the
//! enabled modules, the registry and image digests (`modulesImages`), what it discovered about
//! the cluster (`discovery`), its version and edition. The runtime learns these and passes them
//! in; here they only become values.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The registry modules' images come from (`global.modulesImages.registry`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GlobalRegistry {
    /// `base`: address and path, e.g. `registry.example.com/deckhouse/ce`.
    pub base: Option<String>,
    /// `dockercfg`: the base64 of the registry's `.dockerconfigjson`.
    pub dockercfg: Option<String>,
    /// `scheme`: `http` or `https`.
    pub scheme: Option<String>,
    /// `CA`: the registry's CA certificate (PEM).
    pub ca: Option<String>,
    /// `address`: the registry host, e.g. `registry.example.com`.
    pub address: Option<String>,
    /// `path`: the repository path, e.g. `/deckhouse/ce`.
    pub path: Option<String>,
}

/// `global.modulesImages`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModulesImages {
    /// `registry`.
    pub registry: GlobalRegistry,
    /// `digests`: module key → image key → digest (`sha256:…`).
    pub digests: BTreeMap<String, BTreeMap<String, String>>,
}

/// `global.discovery`: what Deckhouse learns about the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Discovery {
    /// `kubernetesVersion` (`1.31.2`).
    pub kubernetes_version: Option<String>,
    /// `clusterDomain` (`cluster.local`).
    pub cluster_domain: Option<String>,
    /// `clusterUUID`.
    pub cluster_uuid: Option<String>,
    /// `podSubnet` (`10.111.0.0/16`).
    pub pod_subnet: Option<String>,
    /// `serviceSubnet` (`10.222.0.0/16`).
    pub service_subnet: Option<String>,
    /// `clusterDNSAddress`.
    pub cluster_dns_address: Option<String>,
    /// `kubernetesCA`: the API server's CA certificate.
    pub kubernetes_ca: Option<String>,
    /// `defaultStorageClass`.
    pub default_storage_class: Option<String>,
    /// `apiVersions`: the API groups/versions served (sorted in the values).
    pub api_versions: Vec<String>,
    /// Anything else under `discovery` (`clusterMasterCount`, `d8SpecificNodeCountByRole`, …).
    pub extra: Map<String, Value>,
}

/// Everything Deckhouse puts under `global` beside the settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GlobalFacts {
    /// `enabledModules` (sorted in the values; absent when empty, as addon-operator leaves it).
    pub enabled_modules: Vec<String>,
    /// `modulesImages`.
    pub modules_images: ModulesImages,
    /// `discovery`.
    pub discovery: Discovery,
    /// `deckhouseVersion` (`v1.70.3`, or `dev`).
    pub deckhouse_version: Option<String>,
    /// `deckhouseEdition` (`CE`, `EE`, …).
    pub deckhouse_edition: Option<String>,
    /// `clusterIsBootstrapped`.
    pub cluster_is_bootstrapped: Option<bool>,
    /// Anything else under `global`, merged last.
    pub extra: Map<String, Value>,
}

fn put(map: &mut Map<String, Value>, key: &str, value: &Option<String>) {
    if let Some(v) = value {
        map.insert(key.into(), Value::String(v.clone()));
    }
}

impl GlobalFacts {
    /// The facts as the `global` values they become (only what is known).
    pub fn to_values(&self) -> Value {
        let mut global = Map::new();
        if !self.enabled_modules.is_empty() {
            let mut modules = self.enabled_modules.clone();
            modules.sort();
            modules.dedup();
            global.insert(
                "enabledModules".into(),
                Value::Array(modules.into_iter().map(Value::String).collect()),
            );
        }
        let mut registry = Map::new();
        let r = &self.modules_images.registry;
        put(&mut registry, "base", &r.base);
        put(&mut registry, "dockercfg", &r.dockercfg);
        put(&mut registry, "scheme", &r.scheme);
        put(&mut registry, "CA", &r.ca);
        put(&mut registry, "address", &r.address);
        put(&mut registry, "path", &r.path);
        let mut images = Map::new();
        if !registry.is_empty() {
            images.insert("registry".into(), Value::Object(registry));
        }
        if !self.modules_images.digests.is_empty() {
            let digests = self
                .modules_images
                .digests
                .iter()
                .map(|(module, images)| {
                    let images = images
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                        .collect();
                    (module.clone(), Value::Object(images))
                })
                .collect();
            images.insert("digests".into(), Value::Object(digests));
        }
        if !images.is_empty() {
            global.insert("modulesImages".into(), Value::Object(images));
        }
        let d = &self.discovery;
        let mut discovery = Map::new();
        put(&mut discovery, "kubernetesVersion", &d.kubernetes_version);
        put(&mut discovery, "clusterDomain", &d.cluster_domain);
        put(&mut discovery, "clusterUUID", &d.cluster_uuid);
        put(&mut discovery, "podSubnet", &d.pod_subnet);
        put(&mut discovery, "serviceSubnet", &d.service_subnet);
        put(&mut discovery, "clusterDNSAddress", &d.cluster_dns_address);
        put(&mut discovery, "kubernetesCA", &d.kubernetes_ca);
        put(
            &mut discovery,
            "defaultStorageClass",
            &d.default_storage_class,
        );
        if !d.api_versions.is_empty() {
            let mut versions = d.api_versions.clone();
            versions.sort();
            versions.dedup();
            discovery.insert(
                "apiVersions".into(),
                Value::Array(versions.into_iter().map(Value::String).collect()),
            );
        }
        for (k, v) in &d.extra {
            discovery.insert(k.clone(), v.clone());
        }
        if !discovery.is_empty() {
            global.insert("discovery".into(), Value::Object(discovery));
        }
        put(&mut global, "deckhouseVersion", &self.deckhouse_version);
        put(&mut global, "deckhouseEdition", &self.deckhouse_edition);
        if let Some(b) = self.cluster_is_bootstrapped {
            global.insert("clusterIsBootstrapped".into(), Value::Bool(b));
        }
        let mut out = Value::Object(global);
        super::merge(&mut out, &Value::Object(self.extra.clone()));
        out
    }
}
