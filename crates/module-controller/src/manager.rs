//! The module manager: level-triggered passes over ModuleSources, Modules, ModuleConfigs,
//! ModuleReleases and ModulePullOverrides (observe → plan with `module-plan`/`release-plan` →
//! act). [`Manager::reconcile_all`] is one pass; [`Manager::run`] repeats it.
//!
//! - Sources: the registry's tags become Modules (phase `Available`, `IsReady=False
//!   NotInstalled`); each module's channel image is read with its update policy's channel;
//!   for an enabled module whose active source this is, ModuleReleases are created by the
//!   step-by-step rule (`<module>-v<version>`, labels and annotations of Deckhouse, the first
//!   one `apply-now`). Status: `modules[]` (`error` when the module's channel cannot be read
//!   and its ModuleConfig wants it from the source, as Deckhouse), count, `syncTime`.
//! - Modules: the enabling chain decides `EnabledByModuleManager`; several sources and none
//!   chosen is `Conflict`; the ModuleConfig status gets Deckhouse's message.
//! - Releases: the task calculator and the deploy-time rules of the module's policy decide; an
//!   applied release is downloaded, verified, unpacked, checked against the current settings
//!   and switched in; the previous one becomes Superseded; 3 outdated releases are kept.
//! - Overrides: the tag's digest is compared; a change re-installs the module from it; while an
//!   override exists, releases are neither created nor applied; `rollback` on delete goes back
//!   to the Deployed release.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::conditions::ModuleCondition;
use api::keys;
use api::module::{
    Module, ModuleConditionReason, ModuleConditionType, ModulePhase, ModuleStatus, SOURCE_EMBEDDED,
};
use api::module_config::ModuleConfig;
use api::module_pull_override::{self as mpo, ModulePullOverride};
use api::module_release::{ModuleRelease, ModuleReleasePhase};
use api::module_source::{AvailableModule, MESSAGE_SOME_ERRORS, ModuleSource};
use api::module_update_policy::v1alpha2::ModuleUpdatePolicy;
use api::update::ReleaseChannel;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use module_plan::enabling::{self, Facts};
use release_controller::Clock;
use release_plan::deploy::{self, UpdateMode};
use release_plan::{Phase, ReleaseKind, ReleaseVersion, Window, Windows, channel, cleanup, task};
use serde_json::{Value, json};

use crate::Error;
use crate::apply::install;
use crate::install::{Downloaded, read_module_files};
use crate::registry::ModuleRegistry;
use crate::unpack::Limits;

/// The name of the default ModuleSource.
pub const DEFAULT_SOURCE: &str = "deckhouse";

/// The version an overridden module is installed as.
pub const OVERRIDE_VERSION: &str = "dev";

/// How a module's releases are applied.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The ModuleUpdatePolicy name (`""` for the embedded policy).
    pub name: String,
    /// The release channel.
    pub channel: ReleaseChannel,
    /// The update mode.
    pub mode: UpdateMode,
    /// The update windows.
    pub windows: Windows,
    /// `update.notification` of the `deckhouse` ModuleConfig (module releases are announced
    /// through the platform's webhook).
    pub notification: release_controller::settings::Notification,
}

/// The module manager.
#[derive(Clone)]
pub struct Manager {
    client: Client,
    registries: registry_client::Client,
    downloaded: Downloaded,
    clock: Arc<dyn Clock>,
    facts: Facts,
    limits: Limits,
    embedded: Vec<crate::embedded::EmbeddedModule>,
    notifier: release_controller::notify::Notifier,
    cluster_uuid: String,
    metrics: crate::metrics::Metrics,
    full_passes: Arc<std::sync::atomic::AtomicU64>,
    default_source: Option<api::module_source::SourceRegistry>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("downloaded", &self.downloaded)
            .field("facts", &self.facts)
            .finish_non_exhaustive()
    }
}

/// Why a module has no update policy to follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoPolicy {
    /// The ModuleUpdatePolicy its ModuleConfig names does not exist.
    NotFound(String),
    /// The policy holds its releases (`Ignore`) or cannot be read (the message).
    Refused(String),
}

impl std::fmt::Display for NoPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound(name) => {
                f.write_str(&api::module_release::message_policy_not_found(name))
            }
            Self::Refused(message) => f.write_str(message),
        }
    }
}

fn pp() -> PatchParams {
    PatchParams::default()
}

fn checksum_label(digest: &oci::Digest) -> String {
    // The md5 of the channel image's digest: 32 hex digits fit a label (at most 63).
    crate::install::md5_hex(digest.to_string().as_bytes())
}

pub(crate) fn condition(
    type_: ModuleConditionType,
    status: bool,
    reason: Option<ModuleConditionReason>,
    message: &str,
    now: &Time,
) -> ModuleCondition {
    ModuleCondition {
        type_: type_.as_str().to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.map(|r| r.as_str().to_owned()),
        message: (!message.is_empty()).then(|| message.to_owned()),
        last_probe_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
    }
}

/// Merges `new` into `conditions` by type; keeps the transition time when the status holds.
pub(crate) fn merge_conditions(
    conditions: &[ModuleCondition],
    new: Vec<ModuleCondition>,
) -> Vec<ModuleCondition> {
    let mut out = conditions.to_vec();
    for mut c in new {
        match out.iter_mut().find(|o| o.type_ == c.type_) {
            Some(old) => {
                if old.status == c.status {
                    c.last_transition_time = old.last_transition_time.clone();
                }
                *old = c;
            }
            None => out.push(c),
        }
    }
    out
}

/// The key of `version.json`'s `canary` map for a channel.
fn canary_key(channel: ReleaseChannel) -> &'static str {
    match channel {
        ReleaseChannel::Alpha => "alpha",
        ReleaseChannel::Beta => "beta",
        ReleaseChannel::EarlyAccess => "earlyAccess",
        ReleaseChannel::Stable => "stable",
        ReleaseChannel::RockSolid => "rockSolid",
        ReleaseChannel::Lts => "lts",
    }
}

fn release_phase(r: &ModuleRelease) -> Phase {
    Phase::parse(
        r.status
            .as_ref()
            .and_then(|s| s.phase)
            .map_or("", |p| p.as_str()),
    )
}

impl Manager {
    /// A manager writing modules under `downloaded`, with the cluster `facts`.
    pub fn new(
        client: Client,
        downloaded: Downloaded,
        clock: Arc<dyn Clock>,
        facts: Facts,
    ) -> Self {
        Self {
            client,
            registries: registry_client::Client::new(registry_client::Config::default()),
            downloaded,
            notifier: release_controller::notify::Notifier::new(clock.clone()),
            clock,
            facts,
            limits: Limits::default(),
            embedded: Vec::new(),
            cluster_uuid: String::new(),
            metrics: crate::metrics::Metrics::default(),
            full_passes: Arc::default(),
            default_source: None,
        }
    }

    /// Keeps the default ModuleSource `deckhouse` (what Deckhouse's helm template renders from
    /// the platform registry, `<registry>/modules`) with these registry settings. Pointed at the
    /// node agent (`127.0.0.1:5001/system/deckhouse/modules` with the agent's CA), every module
    /// download goes through the agent.
    pub fn with_default_source(mut self, registry: api::module_source::SourceRegistry) -> Self {
        self.default_source = Some(registry);
        self
    }

    /// How many full passes ([`Manager::reconcile_all`]) have started: what a controller's
    /// triggers cost.
    pub fn full_passes(&self) -> u64 {
        self.full_passes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The manager's metrics (register them where `/metrics` is served).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// The cluster's UUID, which decides its canary wave.
    pub fn with_cluster_uuid(mut self, uuid: impl Into<String>) -> Self {
        self.cluster_uuid = uuid.into();
        self
    }

    /// Manages these embedded modules (Modules with `source: Embedded`).
    pub fn with_embedded(mut self, embedded: Vec<crate::embedded::EmbeddedModule>) -> Self {
        self.embedded = embedded;
        self
    }

    /// Uses other unpack limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    fn now(&self) -> Time {
        Time(self.clock.now())
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::ClusterResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::all(self.client.clone())
    }

    /// Repeats [`Manager::reconcile_all`] every `interval`, logging failures.
    pub async fn run(&self, interval: std::time::Duration) {
        loop {
            if let Err(e) = self.reconcile_all().await {
                tracing::warn!(error = %e, "module manager pass failed");
            }
            tokio::time::sleep(interval).await;
        }
    }

    /// The Kubernetes client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Settles the Pending releases of every module that has one, then refreshes the Module
    /// and ModuleConfig statuses if any was.
    pub async fn reconcile_releases(&self) -> Result<(), Error> {
        let pending = self
            .api::<ModuleRelease>()
            .list(&ListParams::default().labels(&format!("{}=pending", keys::LABEL_STATUS)))
            .await
            .map_err(|e| Error::kube("list ModuleReleases", e))?;
        let modules: BTreeSet<String> = pending
            .items
            .iter()
            .map(|r| r.spec.module_name.clone())
            .collect();
        for module in &modules {
            self.process_releases(module).await?;
        }
        if modules.is_empty() {
            Ok(())
        } else {
            self.sync_modules().await
        }
    }

    /// One pass over everything.
    pub async fn reconcile_all(&self) -> Result<(), Error> {
        self.full_passes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.ensure_default_source().await?;
        let sources = self
            .api::<ModuleSource>()
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list ModuleSources", e))?;
        // Every source's modules are registered first, so that a module offered by several
        // sources is seen as such before any release is created.
        let mut registered = Vec::new();
        for source in &sources {
            if let Some((registry, modules)) = self.register_source(source).await? {
                registered.push((source, registry, modules));
            }
        }
        for (source, registry, modules) in registered {
            self.scan_source(source, &registry, &modules).await?;
        }
        self.sync_modules().await?;
        let modules = self
            .api::<Module>()
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list Modules", e))?;
        for module in &modules {
            self.process_releases(&module.name_any()).await?;
        }
        let overrides = self
            .api::<ModulePullOverride>()
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list ModulePullOverrides", e))?;
        for o in &overrides {
            self.sync_override(o).await?;
        }
        // Once more, so that conditions and ModuleConfig statuses reflect what was installed.
        self.sync_modules().await
    }

    async fn get_opt<K>(&self, name: &str) -> Result<Option<K>, Error>
    where
        K: Resource<Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as Resource>::DynamicType: Default,
    {
        self.api::<K>()
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(format!("get {} {name}", K::kind(&Default::default())), e))
    }

    /// The policy of `module`: its ModuleConfig's `updatePolicy`, else the embedded one from the
    /// `deckhouse` ModuleConfig. `Err` says why there is none (its text is the status message).
    pub async fn policy_for(&self, module: &str) -> Result<Result<Policy, NoPolicy>, Error> {
        let deckhouse: Option<ModuleConfig> = self.get_opt("deckhouse").await?;
        let settings = deckhouse.and_then(|d| d.spec.settings);
        let parsed =
            release_controller::settings::DeckhouseSettings::from_settings(settings.as_ref());
        let config: Option<ModuleConfig> = self.get_opt(module).await?;
        if let Some(name) = config
            .and_then(|c| c.spec.update_policy)
            .filter(|n| !n.is_empty())
        {
            let Some(policy) = self.get_opt::<ModuleUpdatePolicy>(&name).await? else {
                return Ok(Err(NoPolicy::NotFound(name)));
            };
            if policy.spec.update.mode == api::update::UpdateMode::Ignore {
                return Ok(Err(NoPolicy::Refused(
                    api::module_release::MESSAGE_DISABLED_BY_IGNORE_POLICY.to_string(),
                )));
            }
            let mut windows = Vec::new();
            for w in &policy.spec.update.windows {
                let days: Vec<&str> = w.days.iter().map(|d| d.as_str()).collect();
                match Window::new(&w.from, &w.to, &days) {
                    Ok(w) => windows.push(w),
                    Err(e) => return Ok(Err(NoPolicy::Refused(e.to_string()))),
                }
            }
            let mode = UpdateMode::parse_or(policy.spec.update.mode.as_str(), UpdateMode::Auto);
            return Ok(Ok(Policy {
                name,
                channel: policy.spec.release_channel,
                mode,
                windows: Windows::new(windows),
                notification: parsed.map(|p| p.notification).unwrap_or_default(),
            }));
        }
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => return Ok(Err(NoPolicy::Refused(e.to_string()))),
        };
        let mode_set = settings
            .as_ref()
            .and_then(|s| s.get("update"))
            .and_then(|u| u.get("mode"))
            .is_some();
        let channel = parsed
            .release_channel
            .map(|c| match c {
                release_controller::settings::Channel::Alpha => ReleaseChannel::Alpha,
                release_controller::settings::Channel::Beta => ReleaseChannel::Beta,
                release_controller::settings::Channel::EarlyAccess => ReleaseChannel::EarlyAccess,
                release_controller::settings::Channel::Stable => ReleaseChannel::Stable,
                release_controller::settings::Channel::RockSolid => ReleaseChannel::RockSolid,
                release_controller::settings::Channel::Lts => ReleaseChannel::Lts,
            })
            .unwrap_or_default();
        Ok(Ok(Policy {
            name: String::new(),
            channel,
            mode: if mode_set {
                parsed.mode
            } else {
                UpdateMode::Auto
            },
            windows: parsed.windows,
            notification: parsed.notification,
        }))
    }

    fn registry(&self, source: &ModuleSource) -> Result<ModuleRegistry, Error> {
        ModuleRegistry::from_source(&self.registries, &source.spec.registry)
    }

    async fn set_source_status(&self, name: &str, status: Value) -> Result<(), Error> {
        self.api::<ModuleSource>()
            .patch_status(name, &pp(), &Patch::Merge(json!({ "status": status })))
            .await
            .map_err(|e| Error::kube(format!("patch ModuleSource {name} status"), e))?;
        Ok(())
    }

    /// Scans one ModuleSource on its own ([`Manager::reconcile_all`] registers every source
    /// first).
    pub async fn sync_source(&self, source: &ModuleSource) -> Result<(), Error> {
        if let Some((registry, modules)) = self.register_source(source).await? {
            self.scan_source(source, &registry, &modules).await?;
        }
        Ok(())
    }

    /// Handles deletion and the finalizer, lists the source's modules and records the source in
    /// their `availableSources`. `None` when there is nothing more to do.
    async fn register_source(
        &self,
        source: &ModuleSource,
    ) -> Result<Option<(ModuleRegistry, Vec<String>)>, Error> {
        let name = source.name_any();
        let sources: Api<ModuleSource> = self.api();
        if source.meta().deletion_timestamp.is_some() {
            self.delete_source(source).await?;
            return Ok(None);
        }
        if !source
            .finalizers()
            .iter()
            .any(|f| f == keys::FINALIZER_MODULE_EXISTS)
        {
            let mut finalizers = source.finalizers().to_vec();
            finalizers.push(keys::FINALIZER_MODULE_EXISTS.to_owned());
            sources
                .patch(
                    &name,
                    &pp(),
                    &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
                )
                .await
                .map_err(|e| Error::kube(format!("patch ModuleSource {name}"), e))?;
        }
        let registry = match self.registry(source) {
            Ok(r) => r,
            Err(e) => {
                self.set_source_status(&name, json!({"message": e.to_string()}))
                    .await?;
                return Ok(None);
            }
        };
        self.sync_registry_checksum(source).await?;
        let modules = match registry.modules().await {
            Ok(m) => m,
            Err(e) => {
                self.set_source_status(
                    &name,
                    json!({"phase": "Active", "message": e.to_string(), "syncTime": self.now()}),
                )
                .await?;
                return Ok(None);
            }
        };
        for module in &modules {
            let policy = self.policy_for(module).await?;
            self.ensure_module(&name, module, policy.as_ref().ok())
                .await?;
        }
        Ok(Some((registry, modules)))
    }

    /// The registry-settings rule: when md5(`spec.registry`) differs from the source's
    /// `registry-spec-checksum` annotation, every Deployed release of the source is marked
    /// `registry-spec-changed` (the release pass then rewrites the installed module's registry
    /// values) and the annotation is updated.
    async fn sync_registry_checksum(&self, source: &ModuleSource) -> Result<(), Error> {
        let name = source.name_any();
        let checksum = crate::install::registry_checksum(&source.spec.registry);
        if source
            .annotations()
            .get(keys::ANNOTATION_REGISTRY_SPEC_CHECKSUM)
            == Some(&checksum)
        {
            return Ok(());
        }
        let releases: Api<ModuleRelease> = self.api();
        let deployed = releases
            .list(&ListParams::default().labels(&format!(
                "{}={name},{}=deployed",
                keys::LABEL_SOURCE,
                keys::LABEL_STATUS
            )))
            .await
            .map_err(|e| Error::kube("list ModuleReleases", e))?;
        let changed_at = self.clock.now().to_string();
        for r in &deployed.items {
            let release = r.name_any();
            releases
                .patch(
                    &release,
                    &pp(),
                    &Patch::Merge(json!({"metadata": {"annotations": {
                        keys::MODULE_RELEASE_REGISTRY_SPEC_CHANGED: changed_at,
                    }}})),
                )
                .await
                .map_err(|e| Error::kube(format!("patch ModuleRelease {release}"), e))?;
        }
        self.api::<ModuleSource>()
            .patch(
                &name,
                &pp(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    keys::ANNOTATION_REGISTRY_SPEC_CHECKSUM: checksum,
                }}})),
            )
            .await
            .map_err(|e| Error::kube(format!("patch ModuleSource {name}"), e))?;
        Ok(())
    }

    /// Creates or updates the default ModuleSource `deckhouse` when one is configured.
    async fn ensure_default_source(&self) -> Result<(), Error> {
        let Some(registry) = &self.default_source else {
            return Ok(());
        };
        let api: Api<ModuleSource> = self.api();
        match self.get_opt::<ModuleSource>(DEFAULT_SOURCE).await? {
            Some(existing) if &existing.spec.registry == registry => Ok(()),
            Some(_) => api
                .patch(
                    DEFAULT_SOURCE,
                    &pp(),
                    &Patch::Merge(json!({"spec": {"registry": registry}})),
                )
                .await
                .map(drop)
                .map_err(|e| Error::kube(format!("patch ModuleSource {DEFAULT_SOURCE}"), e)),
            None => {
                let source = ModuleSource::new(
                    DEFAULT_SOURCE,
                    api::module_source::ModuleSourceSpec {
                        registry: registry.clone(),
                        ..Default::default()
                    },
                );
                api.create(&PostParams::default(), &source)
                    .await
                    .map(drop)
                    .map_err(|e| Error::kube(format!("create ModuleSource {DEFAULT_SOURCE}"), e))
            }
        }
    }

    /// Creates or updates the ModuleDocumentation of a module's running version, owned by the
    /// release (or override) that put it there.
    async fn ensure_documentation(
        &self,
        module: &str,
        spec: api::module_documentation::ModuleDocumentationSpec,
        owner: OwnerReference,
    ) -> Result<(), Error> {
        use api::module_documentation::ModuleDocumentation;
        let api: Api<ModuleDocumentation> = self.api();
        match self.get_opt::<ModuleDocumentation>(module).await? {
            Some(existing)
                if existing.spec == spec
                    && existing.owner_references().first().map(|o| &o.uid) == Some(&owner.uid) =>
            {
                Ok(())
            }
            Some(_) => api
                .patch(
                    module,
                    &pp(),
                    &Patch::Merge(json!({
                        "metadata": {"ownerReferences": [owner]},
                        "spec": spec,
                    })),
                )
                .await
                .map(drop)
                .map_err(|e| Error::kube(format!("patch ModuleDocumentation {module}"), e)),
            None => {
                let mut doc = ModuleDocumentation::new(module, spec);
                doc.metadata.owner_references = Some(vec![owner]);
                api.create(&PostParams::default(), &doc)
                    .await
                    .map(drop)
                    .map_err(|e| Error::kube(format!("create ModuleDocumentation {module}"), e))
            }
        }
    }

    /// Reads each module's channel, creates releases, writes the source's status.
    async fn scan_source(
        &self,
        source: &ModuleSource,
        registry: &ModuleRegistry,
        modules: &[String],
    ) -> Result<(), Error> {
        let name = source.name_any();
        let mut entries = Vec::new();
        let mut some_errors = false;
        for module in modules {
            let entry = self.sync_source_module(source, registry, module).await?;
            some_errors |= entry.pull_error.is_some() || entry.error.is_some();
            entries.push(entry);
        }
        let message = if some_errors { MESSAGE_SOME_ERRORS } else { "" };
        self.set_source_status(
            &name,
            json!({
                "phase": "Active",
                "syncTime": self.now(),
                "modulesCount": entries.len(),
                "modules": entries,
                "message": message,
            }),
        )
        .await
    }

    async fn ensure_module(
        &self,
        source: &str,
        module: &str,
        policy: Option<&Policy>,
    ) -> Result<Module, Error> {
        let modules: Api<Module> = self.api();
        let now = self.now();
        let existing: Option<Module> = self.get_opt(module).await?;
        let mut object = match existing {
            Some(m) => m,
            None => {
                let mut m = Module::new(module, Default::default());
                m.spec.properties.available_sources = vec![source.to_owned()];
                m.spec.properties.weight = Some(module_plan::definition::DOWNLOADED_WEIGHT);
                let created = modules
                    .create(&PostParams::default(), &m)
                    .await
                    .map_err(|e| Error::kube(format!("create Module {module}"), e))?;
                let status = ModuleStatus {
                    phase: Some(ModulePhase::Available),
                    hooks_state: None,
                    conditions: vec![condition(
                        ModuleConditionType::IsReady,
                        false,
                        Some(ModuleConditionReason::NotInstalled),
                        "not installed",
                        &now,
                    )],
                };
                modules
                    .patch_status(module, &pp(), &Patch::Merge(json!({"status": status})))
                    .await
                    .map_err(|e| Error::kube(format!("patch Module {module} status"), e))?;
                let _ = created;
                self.get_opt(module).await?.unwrap_or(m)
            }
        };
        let mut patch = serde_json::Map::new();
        if !object
            .spec
            .properties
            .available_sources
            .iter()
            .any(|s| s == source)
        {
            let mut sources = object.spec.properties.available_sources.clone();
            sources.push(source.to_owned());
            sources.sort();
            patch.insert("availableSources".into(), json!(sources));
            object.spec.properties.available_sources = sources;
        }
        if let Some(policy) = policy
            && object.spec.properties.source.as_deref() != Some(SOURCE_EMBEDDED)
            && object.spec.properties.release_channel.as_deref() != Some(policy.channel.as_str())
        {
            patch.insert("releaseChannel".into(), json!(policy.channel.as_str()));
            object.spec.properties.release_channel = Some(policy.channel.as_str().to_owned());
        }
        if !patch.is_empty() {
            modules
                .patch(module, &pp(), &Patch::Merge(json!({"properties": patch})))
                .await
                .map_err(|e| Error::kube(format!("patch Module {module}"), e))?;
        }
        Ok(object)
    }

    async fn sync_source_module(
        &self,
        source: &ModuleSource,
        registry: &ModuleRegistry,
        module: &str,
    ) -> Result<AvailableModule, Error> {
        let source_name = source.name_any();
        let mut entry = AvailableModule {
            name: module.to_owned(),
            ..Default::default()
        };
        let policy = self.policy_for(module).await?;
        let object = self
            .ensure_module(&source_name, module, policy.as_ref().ok())
            .await?;
        if object.spec.properties.source.as_deref() == Some(SOURCE_EMBEDDED) {
            entry.error = Some("the module is embedded".into());
            return Ok(entry);
        }
        if self.get_opt::<ModulePullOverride>(module).await?.is_some() {
            entry.overridden = Some(true);
            return Ok(entry);
        }
        let policy = match policy {
            Ok(p) => p,
            Err(no_policy) => {
                entry.error = Some(no_policy.to_string());
                return Ok(entry);
            }
        };
        entry.policy = Some(policy.name.clone()).filter(|n| !n.is_empty());
        let config: Option<ModuleConfig> = self.get_opt(module).await?;
        let enabled = config
            .as_ref()
            .is_some_and(|c| c.spec.enabled == Some(true));
        let active = match object.spec.properties.source.as_deref() {
            Some(s) => s == source_name,
            None => object.spec.properties.available_sources == [source_name.clone()],
        };
        // Deckhouse expires the module's failures of this source before every check.
        self.metrics
            .set_updating_failures(module, &source_name, &[]);
        let meta = match registry.release(module, policy.channel.image_tag()).await {
            Ok(m) => m,
            Err(e) => {
                entry.version = Some(crate::metrics::UNKNOWN_VERSION.into());
                if modules::wants_module_from(config.as_ref(), &source_name) {
                    tracing::warn!(module, source = %source_name, error = %e, "the release image of the module's channel cannot be read");
                    self.metrics.set_updating_failures(
                        module,
                        &source_name,
                        &[crate::metrics::UpdatingFailure::channel_not_valid(
                            &source.spec.registry.repo,
                        )],
                    );
                    entry.error = Some(e.to_string());
                }
                return Ok(entry);
            }
        };
        entry.version = Some(meta.version.to_string());
        entry.checksum = Some(checksum_label(&meta.digest));
        if enabled
            && active
            && let Err(reason) = self
                .ensure_releases(source, registry, module, &policy, &meta)
                .await?
        {
            entry.error = Some(reason);
        }
        Ok(entry)
    }

    async fn module_releases(&self, module: &str) -> Result<Vec<ModuleRelease>, Error> {
        let list = self
            .api::<ModuleRelease>()
            .list(&ListParams::default().labels(&format!("{}={module}", keys::LABEL_MODULE)))
            .await
            .map_err(|e| Error::kube(format!("list ModuleReleases of {module}"), e))?;
        Ok(list.items)
    }

    /// Creates the releases the channel asks for; `Ok(Err(reason))` when the chain is broken.
    async fn ensure_releases(
        &self,
        source: &ModuleSource,
        registry: &ModuleRegistry,
        module: &str,
        policy: &Policy,
        meta: &crate::registry::ReleaseMetadata,
    ) -> Result<Result<(), String>, Error> {
        let checksum = checksum_label(&meta.digest);
        let existing = self.module_releases(module).await?;
        let cluster: Vec<channel::ClusterRelease> = existing
            .iter()
            .filter_map(|r| {
                let v = ReleaseVersion::parse(&r.spec.version).ok()?;
                Some(channel::ClusterRelease::new(
                    r.name_any(),
                    v,
                    release_phase(r),
                ))
            })
            .collect();
        let plan = channel::plan_new_releases(
            &cluster,
            &meta.version,
            policy.channel == ReleaseChannel::Lts,
        );
        // The channel's release exists: nothing to do, unless the chain up to it has a hole (a
        // step whose release image was not valid), which is walked again from the deployed one.
        if existing
            .iter()
            .any(|r| r.labels().get(keys::LABEL_RELEASE_CHECKSUM) == Some(&checksum))
            && !matches!(plan, Ok(channel::NewReleases::StepByStep { .. }))
        {
            return Ok(Ok(()));
        }
        let (versions, from) = match plan {
            Ok(channel::NewReleases::Channel { .. }) => (vec![meta.version.clone()], None),
            Ok(channel::NewReleases::StepByStep { from, .. }) => {
                let tags = match registry.versions(module).await {
                    Ok(t) => t,
                    Err(e) => return Ok(Err(e.to_string())),
                };
                match channel::step_by_step(&from, &meta.version, &tags) {
                    Ok(v) => (v, Some(from)),
                    Err(e) => {
                        let failure =
                            crate::metrics::UpdatingFailure::of(&source.spec.registry.repo, &e);
                        self.metrics.set_updating_failures(
                            module,
                            &source.name_any(),
                            failure.as_slice(),
                        );
                        return Ok(Err(e.to_string()));
                    }
                }
            }
            Err(e) => return Ok(Err(e.to_string())),
        };
        // Each step of the chain is created from its own release image, as Deckhouse downloads
        // it; a step whose image cannot be read is not created and is reported, the walk goes on.
        let mut steps: BTreeMap<String, crate::registry::ReleaseMetadata> = BTreeMap::new();
        let mut not_valid = Vec::new();
        let mut failed: BTreeSet<String> = BTreeSet::new();
        let mut errors = Vec::new();
        for version in &versions {
            if *version == meta.version
                || existing
                    .iter()
                    .any(|r| r.name_any() == ModuleRelease::name_for(module, &version.to_string()))
            {
                continue;
            }
            match registry.release(module, &format!("v{version}")).await {
                Ok(step) => {
                    steps.insert(version.to_string(), step);
                }
                Err(e) => {
                    tracing::warn!(module, version = %version, error = %e, "the release image of a step is not valid");
                    errors.push(format!(
                        "load release metadata v{version}: {e}: module is corrupted"
                    ));
                    not_valid.push(crate::metrics::UpdatingFailure::not_valid(
                        &source.spec.registry.repo,
                        &from.as_ref().map(ToString::to_string).unwrap_or_default(),
                        &version.to_string(),
                    ));
                    failed.insert(version.to_string());
                }
            }
        }
        self.metrics
            .set_updating_failures(module, &source.name_any(), &not_valid);
        let versions: Vec<ReleaseVersion> = versions
            .into_iter()
            .filter(|v| !failed.contains(&v.to_string()))
            .collect();
        let cause = match channel::plan_new_releases(&cluster, &meta.version, false) {
            Ok(channel::NewReleases::Channel { cause }) => cause,
            _ => channel::CreateCause::StepByStep,
        };
        let first = existing.is_empty();
        let releases: Api<ModuleRelease> = self.api();
        let owner = OwnerReference {
            api_version: "deckhouse.io/v1alpha1".into(),
            kind: "ModuleSource".into(),
            name: source.name_any(),
            uid: source.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: None,
        };
        for version in versions {
            let name = ModuleRelease::name_for(module, &version.to_string());
            if existing.iter().any(|r| r.name_any() == name) {
                continue;
            }
            let step = steps.get(&version.to_string()).unwrap_or(meta);
            let requirements = step
                .module_yaml
                .as_deref()
                .and_then(|y| module_plan::definition::ModuleYaml::parse(y).ok())
                .and_then(|y| y.requirements);
            // The channel's canary wave postpones the channel version (not the first release,
            // which is applied at once).
            let apply_after = if version == meta.version && !first {
                release_plan::canary::new_release_apply_after(
                    self.clock.now(),
                    meta.canary.get(canary_key(policy.channel)),
                    &self.cluster_uuid,
                    meta.version.original(),
                    None,
                )?
            } else {
                None
            };
            let mut release = ModuleRelease::new(
                &name,
                api::module_release::ModuleReleaseSpec {
                    module_name: module.to_owned(),
                    version: version.to_string(),
                    weight: None,
                    apply_after: apply_after.map(Time),
                    requirements: requirements.as_ref().map(|r| {
                        api::module_release::ModuleReleaseRequirements {
                            deckhouse: r.deckhouse.clone(),
                            kubernetes: r.kubernetes.clone(),
                            modules: r.modules.clone(),
                        }
                    }),
                    update_constraints: None,
                    changelog: step.changelog.clone(),
                },
            );
            let labels = release.labels_mut();
            labels.insert(keys::LABEL_MODULE.into(), module.into());
            labels.insert(keys::LABEL_SOURCE.into(), source.name_any());
            labels.insert(keys::LABEL_STATUS.into(), "pending".into());
            labels.insert(keys::LABEL_UPDATE_POLICY.into(), policy.name.clone());
            if version == meta.version {
                labels.insert(keys::LABEL_RELEASE_CHECKSUM.into(), checksum.clone());
            }
            let change_cause = if version == meta.version {
                cause
            } else {
                channel::CreateCause::StepByStep
            };
            let annotations = release.annotations_mut();
            annotations.insert(
                keys::MODULE_RELEASE_CHANGE_CAUSE.into(),
                change_cause.change_cause(),
            );
            if first {
                annotations.insert(keys::MODULE_RELEASE_APPLY_NOW.into(), "true".into());
            }
            release.metadata.owner_references = Some(vec![owner.clone()]);
            releases
                .create(&PostParams::default(), &release)
                .await
                .map_err(|e| Error::kube(format!("create ModuleRelease {name}"), e))?;
            tracing::info!(release = %name, "module release created");
        }
        let object: Option<Module> = self.get_opt(module).await?;
        if let Some(object) = object
            && matches!(
                object.status.as_ref().and_then(|s| s.phase),
                Some(ModulePhase::Available | ModulePhase::Conflict)
            )
        {
            self.set_module_phase(module, ModulePhase::Downloading, vec![])
                .await?;
        }
        if !errors.is_empty() {
            // Deckhouse's words: its step errors joined under "step by step update failed".
            return Ok(Err(format!(
                "step by step update failed: {}",
                errors.join("\n")
            )));
        }
        Ok(Ok(()))
    }

    async fn set_module_phase(
        &self,
        module: &str,
        phase: ModulePhase,
        conditions: Vec<ModuleCondition>,
    ) -> Result<(), Error> {
        self.patch_module_status(module, Some(phase), conditions)
            .await
    }

    /// Merges `conditions` into the Module status (and sets `phase` when given) with the
    /// resourceVersion read, so that a concurrent write of the module runtime is not undone.
    async fn patch_module_status(
        &self,
        module: &str,
        phase: Option<ModulePhase>,
        conditions: Vec<ModuleCondition>,
    ) -> Result<(), Error> {
        let modules: Api<Module> = self.api();
        for _ in 0..8 {
            let Some(current) = self.get_opt::<Module>(module).await? else {
                return Ok(());
            };
            let version = current.metadata.resource_version.clone();
            let old = current.status.map(|s| s.conditions).unwrap_or_default();
            let merged = merge_conditions(&old, conditions.clone());
            let mut status = json!({"conditions": merged});
            if let Some(phase) = phase {
                status["phase"] = json!(phase);
            }
            let patch = json!({"metadata": {"resourceVersion": version}, "status": status});
            match modules
                .patch_status(module, &pp(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(Error::kube(format!("patch Module {module} status"), e)),
            }
        }
        Ok(())
    }

    async fn delete_source(&self, source: &ModuleSource) -> Result<(), Error> {
        let name = source.name_any();
        let deployed = self
            .api::<ModuleRelease>()
            .list(&ListParams::default().labels(&format!(
                "{}={name},{}=deployed",
                keys::LABEL_SOURCE,
                keys::LABEL_STATUS
            )))
            .await
            .map_err(|e| Error::kube("list ModuleReleases", e))?;
        let forced = source
            .annotations()
            .contains_key(keys::ANNOTATION_FORCE_DELETE);
        if !deployed.items.is_empty() && !forced {
            return self
                .set_source_status(
                    &name,
                    json!({"phase": "Terminating", "message": api::module_source::MESSAGE_DEPLOYED_RELEASES_BLOCK_DELETE}),
                )
                .await;
        }
        let modules: Api<Module> = self.api();
        for module in modules
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list Modules", e))?
        {
            if module
                .spec
                .properties
                .available_sources
                .iter()
                .any(|s| s == &name)
            {
                let rest: Vec<&String> = module
                    .spec
                    .properties
                    .available_sources
                    .iter()
                    .filter(|s| **s != name)
                    .collect();
                modules
                    .patch(
                        &module.name_any(),
                        &pp(),
                        &Patch::Merge(json!({"properties": {"availableSources": rest}})),
                    )
                    .await
                    .map_err(|e| Error::kube("patch Module", e))?;
            }
        }
        let finalizers: Vec<&String> = source
            .finalizers()
            .iter()
            .filter(|f| *f != keys::FINALIZER_MODULE_EXISTS && *f != keys::FINALIZER_RELEASE_EXISTS)
            .collect();
        self.api::<ModuleSource>()
            .patch(
                &name,
                &pp(),
                &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
            )
            .await
            .map_err(|e| Error::kube(format!("patch ModuleSource {name}"), e))?;
        Ok(())
    }
}

mod modules;
mod overrides;
mod releases;
