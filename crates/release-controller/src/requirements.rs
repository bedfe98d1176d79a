//! Requirement and disruption checks, as Deckhouse's `NewDeckhouseReleaseRequirementsChecker`
//! runs them, plus the facts about the cluster they read ([`ClusterFacts::gather`]).
//!
//! In Deckhouse's order, each check giving at most one message (joined with `;` in the status):
//! 1. the Deckhouse version of the release against the enabled Modules'
//!    `properties.requirements.deckhouse`;
//! 2. the release's `spec.requirements` keys: a key with a registered check must pass; a key
//!    registered by a Deckhouse module this platform does not run passes (as with a disabled
//!    module); a key nobody registers fails with Deckhouse's `Not registered` error;
//! 3. `autoK8sVersion` when the cluster configuration says `kubernetesVersion: Automatic`;
//! 4. `migratedModules`: each must be disabled by the module manager or offered by a
//!    ModuleSource without an error (and `d8_migrated_module_not_found` is raised otherwise),
//!    then downloaded — a Deployed ModuleRelease — before the release applies (`migrated
//!    module '<m>' is not pre-downloaded yet`; `d8_migrated_module_not_downloaded`).
//!
//! The decisions and messages are [`release_plan::requirements`]'; this module gathers facts.
//! A `spec.disruptions` entry with a registered disruption function that returns a reason needs
//! `disruption-approved` when `disruptionApprovalMode` is `Manual`. Registered by default, as in
//! Deckhouse: `ingressNginx`, computed from the IngressNginxControllers
//! ([`release_plan::disruption`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use api::module::Module;
use api::module_config::ModuleConfig;
use api::module_release::{ModuleRelease, ModuleReleasePhase};
use api::module_source::ModuleSource;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, ResourceExt};
use release_plan::ReleaseVersion;
use release_plan::deploy::{
    migrated_module_not_downloaded_message, migrated_module_not_found_message,
    requirement_not_met_message,
};
use release_plan::disruption::{self, IngressController};
use release_plan::requirements::{
    self as checks, KUBERNETES_AUTOMATIC, ModuleConstraint, RequirementKey, SourceModule,
};

use crate::Error;

/// The requirement key of the minimal Kubernetes version (`"k8s": "1.27"`).
pub const KUBERNETES_REQUIREMENT: &str = checks::K8S;

/// Facts about the cluster that checks read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// The Kubernetes version the cluster runs (`1.29.3`), when known.
    pub kubernetes_version: Option<String>,
    /// `kubernetesVersion` of the cluster configuration (`Automatic`, `1.29`), when there is
    /// one.
    pub configured_kubernetes_version: Option<String>,
    /// `requirements.deckhouse` of every enabled Module.
    pub deckhouse_constraints: Vec<ModuleConstraint>,
    /// `requirements.kubernetes` of every enabled Module.
    pub kubernetes_constraints: Vec<ModuleConstraint>,
    /// Modules whose `EnabledByModuleManager` condition is `False`.
    pub disabled_by_module_manager: BTreeSet<String>,
    /// What the ModuleSources offer.
    pub source_modules: Vec<SourceModule>,
    /// The `ingressNginx:hasDisruption` value the ingress-nginx module's hook would store, from
    /// the IngressNginxControllers and its ModuleConfig's `defaultControllerVersion`.
    pub ingress_nginx_has_disruption: Option<bool>,
    /// Modules with a Deployed ModuleRelease.
    pub deployed_modules: BTreeSet<String>,
}

impl ClusterFacts {
    /// Reads the facts: the Kubernetes versions from `kubernetes`, the Modules and the
    /// ModuleSources from the API server.
    pub async fn gather(
        client: &Client,
        kubernetes: &KubernetesVersionSource,
    ) -> Result<Self, Error> {
        let (configured, running) = kubernetes.read(client).await;
        let modules: Api<Module> = Api::all(client.clone());
        let modules = modules
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list Modules", e))?;
        let sources: Api<ModuleSource> = Api::all(client.clone());
        let sources = sources
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list ModuleSources", e))?;
        let mut facts = Self {
            kubernetes_version: running,
            configured_kubernetes_version: configured,
            ..Self::default()
        };
        for module in &modules.items {
            let name = module.name_any();
            let enabled_by_manager = module.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == "EnabledByModuleManager")
                    .map(|c| c.status.as_str())
            });
            match enabled_by_manager {
                Some("True") => {
                    let requirements = module.spec.properties.requirements.as_ref();
                    if let Some(c) = requirements.and_then(|r| r.deckhouse.as_deref()) {
                        facts
                            .deckhouse_constraints
                            .push(ModuleConstraint::new(&name, c));
                    }
                    if let Some(c) = requirements.and_then(|r| r.kubernetes.as_deref()) {
                        facts
                            .kubernetes_constraints
                            .push(ModuleConstraint::new(&name, c));
                    }
                }
                Some("False") => {
                    facts.disabled_by_module_manager.insert(name);
                }
                _ => {}
            }
        }
        for source in &sources.items {
            let name = source.name_any();
            for offered in source.status.iter().flat_map(|s| s.modules.iter()) {
                facts.source_modules.push(SourceModule {
                    source: name.clone(),
                    module: offered.name.clone(),
                    has_error: offered.pull_error.as_deref().is_some_and(|e| !e.is_empty())
                        || offered.error.as_deref().is_some_and(|e| !e.is_empty()),
                });
            }
        }
        let releases: Api<ModuleRelease> = Api::all(client.clone());
        let releases = releases
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list ModuleReleases", e))?;
        facts.deployed_modules = releases
            .items
            .iter()
            .filter(|r| {
                r.status.as_ref().and_then(|s| s.phase) == Some(ModuleReleasePhase::Deployed)
            })
            .map(|r| r.spec.module_name.clone())
            .collect();
        facts.ingress_nginx_has_disruption = disruption::ingress_nginx_has_disruption(
            &ingress_controllers(client).await?,
            ingress_default_version(client).await?.as_deref(),
        );
        Ok(facts)
    }
}

/// The IngressNginxController resource (`deckhouse.io/v1`, cluster-scoped) of the ingress-nginx
/// module.
pub fn ingress_nginx_controller_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("deckhouse.io", "v1", "IngressNginxController"),
        "ingressnginxcontrollers",
    )
}

/// The IngressNginxControllers (none when the kind is not installed).
async fn ingress_controllers(client: &Client) -> Result<Vec<IngressController>, Error> {
    let api: Api<kube::api::DynamicObject> =
        Api::all_with(client.clone(), &ingress_nginx_controller_resource());
    let list = match api.list(&Default::default()).await {
        Ok(list) => list,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Vec::new()),
        Err(e) => return Err(Error::kube("list IngressNginxControllers", e)),
    };
    let text = |o: &kube::api::DynamicObject, field: &str| {
        o.data["spec"][field].as_str().map(str::to_owned)
    };
    Ok(list
        .items
        .iter()
        .map(|o| IngressController {
            ingress_class: text(o, "ingressClass"),
            controller_version: text(o, "controllerVersion"),
        })
        .collect())
}

/// `defaultControllerVersion` of the `ingress-nginx` ModuleConfig's settings.
async fn ingress_default_version(client: &Client) -> Result<Option<String>, Error> {
    let configs: Api<ModuleConfig> = Api::all(client.clone());
    let config = configs
        .get_opt("ingress-nginx")
        .await
        .map_err(|e| Error::kube("get ModuleConfig ingress-nginx", e))?;
    Ok(config
        .and_then(|c| c.spec.settings)
        .and_then(|s| s.get("defaultControllerVersion").cloned())
        .and_then(|v| match v {
            serde_json::Value::String(s) => Some(s),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }))
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
    checks::minimal_kubernetes(required, facts.kubernetes_version.as_deref())
}

impl Checks {
    /// No checks.
    pub fn new() -> Self {
        Self::default()
    }

    /// The checks this crate knows: the requirement [`KUBERNETES_REQUIREMENT`] and the
    /// disruption `ingressNginx` ([`disruption::ingress_nginx_disruption`]).
    pub fn with_defaults() -> Self {
        Self::new()
            .requirement(KUBERNETES_REQUIREMENT, kubernetes_check)
            .disruption(disruption::INGRESS_NGINX, |facts| {
                disruption::ingress_nginx_disruption(facts.ingress_nginx_has_disruption)
            })
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

    /// The messages of the requirement checks that fail for a release of `version` with
    /// `requirements`, in Deckhouse's order (see the module docs).
    pub fn requirement_failures(
        &self,
        version: &ReleaseVersion,
        requirements: &BTreeMap<String, String>,
        facts: &ClusterFacts,
    ) -> Vec<String> {
        let mut failures = Vec::new();
        if let Err(message) = checks::deckhouse_version(version, &facts.deckhouse_constraints) {
            failures.push(message);
        }
        let registered: BTreeSet<String> = self.requirements.keys().cloned().collect();
        let key_failure = requirements.iter().find_map(|(key, value)| {
            let error = match checks::classify_key(key, &registered) {
                RequirementKey::Dedicated | RequirementKey::Foreign => return None,
                RequirementKey::Unknown => checks::not_registered_message(key),
                RequirementKey::Registered => (self.requirements.get(key)?)(value, facts).err()?,
            };
            Some(requirement_not_met_message(key, version, &error))
        });
        failures.extend(key_failure);
        if let Err(message) = checks::auto_kubernetes_version(
            facts.configured_kubernetes_version.as_deref(),
            requirements
                .get(checks::AUTO_K8S_VERSION)
                .map(String::as_str),
            &facts.kubernetes_constraints,
        ) {
            failures.push(message);
        }
        if let Some(module) = missing_migrated_module(requirements, facts) {
            failures.push(migrated_module_not_found_message(&module));
        } else if let Some(module) = migrated_modules_not_downloaded(requirements, facts).first() {
            // Offered, but not downloaded yet: the release is held until it is.
            failures.push(migrated_module_not_downloaded_message(module));
        }
        failures
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
    /// Reads the configured `kubernetesVersion` (`Automatic`, `1.29`; `None` without a cluster
    /// configuration) and the version the cluster runs (`None` when it cannot be known; the
    /// `k8s` check then fails with a reason).
    pub async fn read(&self, client: &Client) -> (Option<String>, Option<String>) {
        match self {
            Self::Fixed(v) if v == KUBERNETES_AUTOMATIC => {
                (Some(v.clone()), server_version(client).await)
            }
            Self::Fixed(v) => (Some(v.clone()), Some(v.clone())),
            Self::ClusterConfiguration => match configured_version(client).await {
                Ok(Some(v)) if v != KUBERNETES_AUTOMATIC => (Some(v.clone()), Some(v)),
                Ok(configured) => (configured, server_version(client).await),
                Err(error) => {
                    tracing::warn!(%error, "reading the cluster configuration");
                    (None, server_version(client).await)
                }
            },
        }
    }
}

/// The first module of `migratedModules` that no ModuleSource offers without an error (and
/// the module manager has not disabled).
pub fn missing_migrated_module(
    requirements: &BTreeMap<String, String>,
    facts: &ClusterFacts,
) -> Option<String> {
    checks::migrated_modules(
        requirements,
        &facts.disabled_by_module_manager,
        &facts.source_modules,
    )
    .err()
}

/// The modules of `migratedModules` offered by a ModuleSource but not deployed yet.
pub fn migrated_modules_not_downloaded(
    requirements: &BTreeMap<String, String>,
    facts: &ClusterFacts,
) -> Vec<String> {
    checks::migrated_modules_not_downloaded(
        requirements,
        &facts.disabled_by_module_manager,
        &facts.source_modules,
        &facts.deployed_modules,
    )
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
            ..ClusterFacts::default()
        }
    }

    fn reqs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn kubernetes_requirement() {
        assert_eq!(kubernetes_check("1.27", &facts(Some("1.29.3"))), Ok(()));
        assert_eq!(kubernetes_check("1.29", &facts(Some("1.29"))), Ok(()));
        assert_eq!(
            kubernetes_check("1.30", &facts(Some("1.29.3"))),
            Err("current kubernetes version is lower than required".into())
        );
        assert!(kubernetes_check("1.30", &facts(None)).is_err());
        assert!(kubernetes_check("soon", &facts(Some("1.29"))).is_err());
    }

    /// Every check in Deckhouse's order, one message each, with Deckhouse's words.
    #[test]
    fn failures_follow_deckhouse_order_and_wording() {
        let checks = Checks::with_defaults().requirement("platformFeature", |value, _| {
            Err(format!("feature {value} is off"))
        });
        let mut cluster = facts(Some("1.29"));
        cluster.configured_kubernetes_version = Some("Automatic".into());
        cluster.deckhouse_constraints = vec![ModuleConstraint::new("echo", "< 1.68")];
        cluster.kubernetes_constraints = vec![ModuleConstraint::new("echo", "< 1.31")];
        cluster.disabled_by_module_manager = ["off".to_owned()].into();
        cluster.source_modules = vec![SourceModule {
            source: "deckhouse".into(),
            module: "moved".into(),
            has_error: false,
        }];
        let all = reqs(&[
            ("k8s", "1.30"),
            ("platformFeature", "x"),
            ("ingressNginx", "1.9"),
            ("autoK8sVersion", "1.31"),
            ("migratedModules", "moved,off,gone"),
            ("deckhouse", ">= 1.0"),
        ]);
        assert_eq!(
            checks.requirement_failures(&v("v1.68.0"), &all, &cluster),
            vec![
                "requirements of the 'echo' module are not satisfied: 1.68.0 deckhouse version is not suitable: 1.68.0 is greater than or equal to 1.68".to_owned(),
                "\"k8s\" requirement for DeckhouseRelease \"1.68.0\" not met: current kubernetes version is lower than required".to_owned(),
                "requirements of the 'echo' module are not satisfied: 1.31 kubernetes version is not suitable: 1.31.0 is greater than or equal to 1.31".to_owned(),
                "migrated module 'gone' not found in any ModuleSource registry".to_owned(),
            ]
        );
        assert_eq!(missing_migrated_module(&all, &cluster), Some("gone".into()));

        // A key nobody registers fails as in Deckhouse; foreign keys pass.
        assert_eq!(
            checks.requirement_failures(
                &v("v1.67.0"),
                &reqs(&[("ingressNginx", "1.9"), ("madeUp", "1")]),
                &cluster
            ),
            vec!["\"madeUp\" requirement for DeckhouseRelease \"1.67.0\" not met: requirement with a key: madeUp: Not registered".to_owned()]
        );
        // The registered check of a platform key.
        assert_eq!(
            checks.requirement_failures(&v("v1.67.0"), &reqs(&[("platformFeature", "x")]), &cluster),
            vec!["\"platformFeature\" requirement for DeckhouseRelease \"1.67.0\" not met: feature x is off".to_owned()]
        );
        // Offered but not downloaded: held until a ModuleRelease of it is Deployed.
        assert_eq!(
            checks.requirement_failures(
                &v("v1.67.0"),
                &reqs(&[("migratedModules", "moved,off")]),
                &cluster
            ),
            vec!["migrated module 'moved' is not pre-downloaded yet".to_owned()]
        );
        cluster.deployed_modules = ["moved".to_owned()].into();
        // Everything met.
        let ok = checks.requirement_failures(
            &v("v1.67.0"),
            &reqs(&[
                ("k8s", "1.28"),
                ("autoK8sVersion", "1.30"),
                ("migratedModules", "moved"),
            ]),
            &cluster,
        );
        assert!(ok.is_empty(), "{ok:?}");
        // autoK8sVersion is only checked on Automatic clusters.
        cluster.configured_kubernetes_version = Some("1.29".into());
        assert!(
            checks
                .requirement_failures(
                    &v("v1.67.0"),
                    &reqs(&[("autoK8sVersion", "1.31")]),
                    &cluster
                )
                .is_empty()
        );
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
