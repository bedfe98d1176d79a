//! What an Application's chart sees besides `.Values`, as Deckhouse's package runtime hands it
//! to nelm in the templates' root context (`$`):
//!
//! - `$.Application`: `Instance` (`Name`, `Namespace` of the Application), `Package` (`Name`,
//!   `Version`, `Registry` — the PackageRepository's registry as Deckhouse's `registry.Remote`
//!   serializes it: `name`, `repository`, `dockercfg`, `login`, `password`, `scheme`, `ca` — and
//!   `Images`: each image of the bundle's `images_digests.json` as
//!   `<repository>/<package>@<digest>`) and `Settings` (the settings with their defaults);
//! - `$.Platform`: the platform's global values as they are, so `global.<path>` reads as
//!   `.Platform.<path>`.
//!
//! Pure: the caller gathers the facts.

use std::collections::BTreeMap;

use api::packages::PackageRegistry;
use module_controller::runtime::render::RootObjects;
use serde_json::{Map, Value, json};

/// Where the platform's global values come from (in `d8 controller`: the module runtime's
/// global values of its last converge).
#[derive(Clone)]
pub struct GlobalValues(std::sync::Arc<dyn Fn() -> Value + Send + Sync>);

impl GlobalValues {
    /// Global values read from `source` at each install.
    pub fn new(source: impl Fn() -> Value + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(source))
    }

    /// The global values now.
    pub fn get(&self) -> Value {
        (self.0)()
    }
}

impl std::fmt::Debug for GlobalValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GlobalValues(..)")
    }
}

/// The bundle file naming the package's images and their digests.
pub const IMAGES_DIGESTS: &str = "images_digests.json";

/// What `$.Application` is built from.
#[derive(Clone, Debug)]
pub struct Facts<'a> {
    /// The Application's namespace.
    pub namespace: &'a str,
    /// The Application's name.
    pub name: &'a str,
    /// The package.
    pub package: &'a str,
    /// The version installed.
    pub version: &'a str,
    /// The PackageRepository's name.
    pub repository: &'a str,
    /// The PackageRepository's registry.
    pub registry: &'a PackageRegistry,
    /// `images_digests.json`: image name → digest.
    pub digests: &'a BTreeMap<String, String>,
    /// The settings with their defaults.
    pub settings: &'a Value,
}

/// `$.Application`.
pub fn application(f: &Facts<'_>) -> Value {
    let images: Map<String, Value> = f
        .digests
        .iter()
        .map(|(image, digest)| {
            let reference = format!("{}/{}@{digest}", f.registry.repo, f.package);
            (image.clone(), Value::String(reference))
        })
        .collect();
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    json!({
        "Instance": {"Name": f.name, "Namespace": f.namespace},
        "Package": {
            "Name": f.package,
            "Version": f.version,
            "Images": images,
            "Registry": {
                "name": f.repository,
                "repository": f.registry.repo,
                "dockercfg": text(&f.registry.docker_cfg),
                // Our PackageRepository takes credentials as `dockerCfg` only.
                "login": "",
                "password": "",
                "scheme": text(&f.registry.scheme),
                "ca": text(&f.registry.ca),
            },
        },
        "Settings": f.settings,
    })
}

/// `$.Platform`: the global values `global` (an object; anything else is taken as none), with
/// `discovery.kubernetesVersion` filled from the API server's `kubernetes` version when they
/// carry none.
pub fn platform(global: Value, kubernetes: Option<&str>) -> Value {
    let mut global = match global {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    if let Some(version) = kubernetes {
        let discovery = global
            .entry("discovery")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(d) = discovery {
            d.entry("kubernetesVersion")
                .or_insert_with(|| Value::String(version.to_owned()));
        }
    }
    Value::Object(global)
}

/// The root objects of an Application's render.
pub fn root(application: Value, platform: Value) -> RootObjects {
    [
        ("Application".to_owned(), application),
        ("Platform".to_owned(), platform),
    ]
    .into()
}

/// `images_digests.json`: an object of image names to digests.
pub fn image_digests(text: &str) -> Result<BTreeMap<String, String>, String> {
    serde_json::from_str(text)
        .map_err(|e| format!("{IMAGES_DIGESTS}: an object of image names to digests: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> PackageRegistry {
        PackageRegistry {
            repo: "registry.example.com/packages".into(),
            docker_cfg: Some("e30=".into()),
            ca: None,
            scheme: Some("HTTPS".into()),
        }
    }

    #[test]
    fn application_holds_instance_package_registry_images_and_settings() {
        let registry = registry();
        let digests: BTreeMap<String, String> =
            [("app".to_owned(), "sha256:abc".to_owned())].into();
        let settings = json!({"replicas": 1});
        let value = application(&Facts {
            namespace: "a",
            name: "shop",
            package: "echo",
            version: "v1.0.0",
            repository: "main",
            registry: &registry,
            digests: &digests,
            settings: &settings,
        });
        assert_eq!(
            value,
            json!({
                "Instance": {"Name": "shop", "Namespace": "a"},
                "Package": {
                    "Name": "echo",
                    "Version": "v1.0.0",
                    "Images": {"app": "registry.example.com/packages/echo@sha256:abc"},
                    "Registry": {
                        "name": "main",
                        "repository": "registry.example.com/packages",
                        "dockercfg": "e30=",
                        "login": "",
                        "password": "",
                        "scheme": "HTTPS",
                        "ca": "",
                    },
                },
                "Settings": {"replicas": 1},
            })
        );
    }

    #[test]
    fn platform_is_the_global_values_with_the_kubernetes_version() {
        let cases = [
            (json!(null), None, json!({})),
            (
                json!(null),
                Some("1.31.0"),
                json!({"discovery": {"kubernetesVersion": "1.31.0"}}),
            ),
            (
                json!({"discovery": {"clusterDomain": "cluster.local"}, "modulesImages": {}}),
                Some("1.31.0"),
                json!({
                    "discovery": {"clusterDomain": "cluster.local", "kubernetesVersion": "1.31.0"},
                    "modulesImages": {},
                }),
            ),
            // What the global values discovered stays.
            (
                json!({"discovery": {"kubernetesVersion": "1.30.4"}}),
                Some("1.31.0"),
                json!({"discovery": {"kubernetesVersion": "1.30.4"}}),
            ),
        ];
        for (global, kubernetes, want) in cases {
            assert_eq!(platform(global.clone(), kubernetes), want, "{global}");
        }
    }

    #[test]
    fn image_digests_read_or_refused() {
        assert_eq!(
            image_digests(r#"{"app": "sha256:abc"}"#).unwrap(),
            BTreeMap::from([("app".to_owned(), "sha256:abc".to_owned())])
        );
        let err = image_digests("[1]").unwrap_err();
        assert!(
            err.starts_with("images_digests.json: an object of image names to digests: "),
            "{err}"
        );
    }
}
