//! The Application controller's pass: each Application judged ([`crate::application`]),
//! installed or upgraded with [`crate::install`], its status written as Deckhouse writes it,
//! `usedBy` on its version and its instance on the ApplicationPackage kept; a deleted one
//! uninstalled (only what its release holds) before its finalizer is dropped.

use std::collections::HashMap;
use std::sync::Mutex;

use api::packages::{
    Application, ApplicationPackage, ApplicationPackageVersion, ApplicationStatus, CurrentVersion,
    PackageInstance, PackageRepository,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use module_controller::runtime::readiness::Readiness;
use serde_json::{Value, json};

use crate::Error;
use crate::application::{self as decide, Blocked, Facts, Outcome};
use crate::bookkeeping;
use crate::hooks::AppRef;
use crate::install::Installer;
use crate::registry::PackageImages;
use crate::runtime;
use module_controller::runtime::render::RootObjects;

/// Reconciles Applications.
pub struct Applications {
    client: Client,
    registries: registry_client::Client,
    installer: Installer,
    deckhouse: Option<semver::Version>,
    global_values: Option<crate::runtime::GlobalValues>,
    /// `openapi/settings.yaml` per ApplicationPackageVersion, read once.
    schemas: Mutex<HashMap<String, Option<String>>>,
    metrics: crate::metrics::Metrics,
}

impl std::fmt::Debug for Applications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applications")
            .field("installer", &self.installer)
            .finish_non_exhaustive()
    }
}

/// What an install leaves in the status.
struct Applied {
    urls: Vec<api::packages::ApplicationUrl>,
    values: Value,
}

/// Everything a pass reads once.
struct World {
    packages: Vec<ApplicationPackage>,
    versions: Vec<ApplicationPackageVersion>,
    repositories: Vec<PackageRepository>,
    kubernetes: Option<semver::Version>,
}

impl Applications {
    /// Applications on `client`; bundles are kept under `cache`.
    pub fn new(
        client: Client,
        registries: registry_client::Client,
        cache: std::path::PathBuf,
    ) -> Self {
        Self {
            installer: Installer::new(client.clone(), cache),
            deckhouse: None,
            global_values: None,
            client,
            registries,
            schemas: Mutex::default(),
            metrics: crate::metrics::Metrics::default(),
        }
    }

    /// The metric families (`deckhouse_application_maintenance`).
    pub fn metrics(&self) -> crate::metrics::Metrics {
        self.metrics.clone()
    }

    /// Notified when a package hook run between passes (kubernetes, schedule) changed an
    /// Application's values: a pass releases it again.
    pub fn wake(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.installer.wake()
    }

    /// The running Deckhouse version, for versions' `requirements.deckhouse`.
    pub fn with_deckhouse_version(mut self, version: Option<semver::Version>) -> Self {
        self.deckhouse = version;
        self
    }

    /// The platform's global values, the charts' `$.Platform`.
    pub fn with_global_values(mut self, global: Option<crate::runtime::GlobalValues>) -> Self {
        self.global_values = global;
        self
    }

    /// One pass over every Application; `true` when one should be retried soon.
    pub async fn pass(&self) -> Result<bool, Error> {
        let apps: Api<Application> = Api::all(self.client.clone());
        let list = apps
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list Applications", e))?;
        let namespaces: Vec<String> = list
            .items
            .iter()
            .map(|a| a.namespace().unwrap_or_default())
            .collect();
        self.metrics
            .set_maintenance(list.items.iter().zip(&namespaces).filter_map(|(a, ns)| {
                Some((
                    ns.as_str(),
                    a.metadata.name.as_deref()?,
                    decide::maintenance(a)?,
                ))
            }));
        if list.items.is_empty() {
            return Ok(false);
        }
        let mut retry = false;
        for app in list.items {
            let world = self.world().await?;
            let name = format!("{}/{}", app.namespace().unwrap_or_default(), app.name_any());
            if let Err(e) = self.reconcile(&app, &world).await {
                tracing::warn!(application = %name, error = %e, "application not reconciled");
                retry = true;
            }
        }
        Ok(retry)
    }

    async fn world(&self) -> Result<World, Error> {
        let packages = Api::<ApplicationPackage>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list ApplicationPackages", e))?
            .items;
        let versions = Api::<ApplicationPackageVersion>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list ApplicationPackageVersions", e))?
            .items;
        let repositories = Api::<PackageRepository>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list PackageRepositories", e))?
            .items;
        let kubernetes = self
            .client
            .apiserver_version()
            .await
            .ok()
            .and_then(|v| decide::loose_version(&v.git_version));
        Ok(World {
            packages,
            versions,
            repositories,
            kubernetes,
        })
    }

    async fn reconcile(&self, app: &Application, world: &World) -> Result<(), Error> {
        let namespace = app.namespace().unwrap_or_default();
        let name = app.name_any();
        let api: Api<Application> = Api::namespaced(self.client.clone(), &namespace);
        let status = app.status.clone().unwrap_or_default();
        let installed = status
            .current_version
            .as_ref()
            .and_then(|c| c.version.clone());
        let version = |v: &str| {
            let n = decide::version_name(app, v);
            world.versions.iter().find(|a| a.name_any() == n)
        };
        if app.metadata.deletion_timestamp.is_some() {
            if !app.finalizers().iter().any(|f| f == decide::FINALIZER) {
                return Ok(());
            }
            let package = &app.spec.package_name;
            let bundle = installed
                .as_deref()
                .and_then(|v| self.installer.cached(&decide::repository(app), package, v));
            self.installer
                .uninstall(&namespace, &name, package, bundle.as_deref())
                .await?;
            for v in [
                installed.as_deref(),
                Some(app.spec.package_version.as_str()),
            ]
            .into_iter()
            .flatten()
            {
                if let Some(apv) = version(v) {
                    self.set_used_by(apv, app, false).await?;
                }
            }
            self.set_instance(&world.packages, app, false).await?;
            let rest: Vec<String> = app
                .finalizers()
                .iter()
                .filter(|f| *f != decide::FINALIZER)
                .cloned()
                .collect();
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {
                    "finalizers": rest,
                    "resourceVersion": app.metadata.resource_version,
                }})),
            )
            .await
            .map_err(|e| Error::kube(format!("remove the finalizer of Application {name}"), e))?;
            tracing::info!(namespace, application = %name, "application deleted");
            return Ok(());
        }
        let maintenance = decide::maintenance(app).is_some();
        if maintenance
            && self
                .installer
                .applied_in_maintenance(&namespace, &name)
                .await?
        {
            // As a module in maintenance: applied once with the maintenance label, then
            // nothing of it is reconciled until the mode is removed.
            tracing::debug!(namespace, application = %name, "application in maintenance, not reconciled");
            return Ok(());
        }
        if !app.finalizers().iter().any(|f| f == decide::FINALIZER) {
            let mut finalizers = app.finalizers().to_vec();
            finalizers.push(decide::FINALIZER.to_owned());
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
            )
            .await
            .map_err(|e| Error::kube(format!("add the finalizer of Application {name}"), e))?;
        }
        let package = &app.spec.package_name;
        let repo_name = decide::repository(app);
        let available: Vec<String> = world
            .versions
            .iter()
            .filter(|v| {
                v.spec.package_name.as_deref() == Some(package.as_str())
                    && v.spec.package_repository_name.as_deref() == Some(repo_name.as_str())
            })
            .filter_map(|v| v.spec.package_version.clone())
            .collect();
        let channel = self
            .channel_version(app, world, &repo_name, &available)
            .await;
        let channel_version = channel.clone().ok().flatten();
        let wanted = decide::wanted(app, channel_version.as_deref()).to_owned();
        let target = version(&wanted);
        let facts = Facts {
            package_exists: world.packages.iter().any(|p| p.name_any() == *package),
            target,
            current: installed.as_deref().and_then(version),
            available: &available,
            channel_version: channel_version.as_deref(),
        };
        if let Some(apv) = target.filter(|t| !crate::versions::is_draft(t))
            && let Some(ap) = world.packages.iter().find(|p| p.name_any() == *package)
        {
            self.link(app, apv, ap).await?;
        }
        let mut new_status = status.clone();
        let judged = channel
            .and_then(|_| decide::judge(app, installed.as_deref(), facts))
            .and_then(|_| {
                decide::check_requirements(
                    target
                        .and_then(|t| t.status.as_ref())
                        .and_then(|s| s.package_metadata.as_ref())
                        .and_then(|m| m.requirements.as_ref()),
                    world.kubernetes.as_ref(),
                    self.deckhouse.as_ref(),
                )
            });
        let (outcome, applied) = match judged {
            Err(b) => (Outcome::Blocked(b), None),
            Ok(()) => {
                self.install(app, world, &repo_name, target, &wanted, maintenance)
                    .await
            }
        };
        if let Some(applied) = applied {
            new_status.urls = applied.urls;
            new_status.last_applied_configuration = Some(applied.values);
        }
        let now_installed = match &outcome {
            Outcome::Installed { .. } => Some(wanted.clone()),
            _ => installed.clone(),
        };
        if let Outcome::Installed { .. } = &outcome {
            if let Some(apv) = target {
                self.set_used_by(apv, app, true).await?;
            }
            if let Some(old) = installed.as_deref().filter(|o| *o != wanted)
                && let Some(apv) = version(old)
            {
                self.set_used_by(apv, app, false).await?;
            }
            self.set_instance(&world.packages, app, true).await?;
            new_status.current_version = Some(CurrentVersion {
                version: Some(wanted.clone()),
                channel: app.spec.release_channel.clone(),
            });
        }
        let (mut conds, mut summary) = decide::status(&outcome, now_installed.as_deref());
        if let Outcome::Installed { .. } = &outcome
            && let Some(error) =
                self.installer
                    .hook_error(&namespace, &name, &app.spec.package_name)
        {
            decide::with_hook_error(&mut conds, &mut summary, &error);
        }
        new_status.conditions = merge_conditions(&status.conditions, &conds, app);
        new_status.summary = Some(summary);
        if new_status != status {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status_patch(&new_status)})),
            )
            .await
            .map_err(|e| Error::kube(format!("patch Application {name} status"), e))?;
        }
        Ok(())
    }

    /// Deckhouse's links once the version is found: the Application owned by its version
    /// and package (stale version references replaced) and its `registry-spec-changed`
    /// annotation removed — the registry is read again below (the version's schema and, when
    /// it is not installed yet, its bundle).
    async fn link(
        &self,
        app: &Application,
        apv: &ApplicationPackageVersion,
        ap: &ApplicationPackage,
    ) -> Result<(), Error> {
        use kube::Resource;
        let owner = |api_version: &str, kind: &str, name: String, uid: Option<String>| {
            bookkeeping::application_owner(api_version, kind, &name, &uid.unwrap_or_default())
        };
        let version = owner(
            &ApplicationPackageVersion::api_version(&()),
            &ApplicationPackageVersion::kind(&()),
            apv.name_any(),
            apv.metadata.uid.clone(),
        );
        let package = owner(
            &ApplicationPackage::api_version(&()),
            &ApplicationPackage::kind(&()),
            ap.name_any(),
            ap.metadata.uid.clone(),
        );
        let existing = app.metadata.owner_references.clone().unwrap_or_default();
        let owners = bookkeeping::application_owners(&existing, version, package);
        let changed = app
            .annotations()
            .contains_key(bookkeeping::ANNOTATION_SPEC_CHANGED);
        if owners == existing && !changed {
            return Ok(());
        }
        if changed && let Ok(mut m) = self.schemas.lock() {
            m.remove(&apv.name_any());
        }
        let mut meta = json!({"ownerReferences": owners});
        if changed {
            meta["annotations"] = json!({bookkeeping::ANNOTATION_SPEC_CHANGED: null});
        }
        let name = app.name_any();
        Api::<Application>::namespaced(self.client.clone(), &app.namespace().unwrap_or_default())
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": meta})),
            )
            .await
            .map_err(|e| Error::kube(format!("link Application {name}"), e))?;
        Ok(())
    }

    /// The version tag the Application's `spec.releaseChannel` points at (`None`: it follows
    /// no channel).
    async fn channel_version(
        &self,
        app: &Application,
        world: &World,
        repo_name: &str,
        available: &[String],
    ) -> Result<Option<String>, Blocked> {
        let channel = app.spec.release_channel.as_deref();
        let Some(tag) = decide::channel_tag(channel)? else {
            return Ok(None);
        };
        let channel = channel.unwrap_or_default();
        let package = &app.spec.package_name;
        let unavailable = |m: String| Blocked::new(decide::REASON_CHANNEL, m);
        let images = self.images(world, repo_name).map_err(unavailable)?;
        let version = images.channel_version(package, tag).await.map_err(|e| {
            unavailable(format!(
                "release channel {channel} of package {package}: {e}"
            ))
        })?;
        decide::channel_pick(available, &version)
            .map(Some)
            .ok_or_else(|| {
                unavailable(format!(
                    "release channel {channel} of package {package} points at {version}, which repository {repo_name} does not offer yet"
                ))
            })
    }

    /// The registry of PackageRepository `repo_name`.
    fn images(&self, world: &World, repo_name: &str) -> Result<PackageImages, String> {
        let Some(repo) = world
            .repositories
            .iter()
            .find(|r| r.name_any() == repo_name)
        else {
            return Err(format!("PackageRepository '{repo_name}' not found"));
        };
        PackageImages::new(&self.registries, &repo.spec.registry).map_err(|e| e.to_string())
    }

    /// Downloads, checks the settings and installs; the outcome for the status. Settings
    /// and cluster-scope refusals change nothing.
    async fn install(
        &self,
        app: &Application,
        world: &World,
        repo_name: &str,
        target: Option<&ApplicationPackageVersion>,
        wanted: &str,
        maintenance: bool,
    ) -> (Outcome, Option<Applied>) {
        let package = &app.spec.package_name;
        let images = match self.images(world, repo_name) {
            Ok(i) => i,
            Err(e) => return (Outcome::Failed(e), None),
        };
        let key = target.map(|t| t.name_any()).unwrap_or_default();
        let cached = self.schemas.lock().ok().and_then(|m| m.get(&key).cloned());
        let schema = match cached {
            Some(s) => s,
            None => match images.version_files(package, wanted).await {
                Ok(files) => {
                    if let Ok(mut m) = self.schemas.lock() {
                        m.insert(key, files.settings_schema.clone());
                    }
                    files.settings_schema
                }
                Err(e) => {
                    return (
                        Outcome::Failed(format!("read the version image: {e}")),
                        None,
                    );
                }
            },
        };
        let settings = app.spec.settings.as_ref();
        // Settings the version image's schema refuses are refused before any download.
        if schema.is_some()
            && let Err(b) = decide::check_settings(package, schema.as_deref(), settings)
        {
            return (Outcome::Blocked(b), None);
        }
        let dir = match self
            .installer
            .bundle(&images, repo_name, package, wanted)
            .await
        {
            Ok(d) => d,
            Err(e) => {
                return (
                    Outcome::Failed(format!("download {package} {wanted}: {e}")),
                    None,
                );
            }
        };
        // Without a schema in the version image, the bundle's (where Deckhouse's package loader
        // reads it) is the one.
        let files = crate::registry::bundle_files(&dir);
        let schema = schema.or(files.settings_schema.clone());
        let values = match decide::check_settings(package, schema.as_deref(), settings) {
            Ok(v) => v,
            Err(b) => return (Outcome::Blocked(b), None),
        };
        let base = match decide::package_values(
            package,
            schema.as_deref(),
            settings,
            files.static_values.as_deref(),
            files.values_schema.as_deref(),
        ) {
            Ok(v) => v,
            Err(b) => return (Outcome::Blocked(b), None),
        };
        let root = match self.root(app, world, repo_name, wanted, &values, &files) {
            Ok(r) => r,
            Err(why) => {
                let blocked = Blocked::new(decide::REASON_INSTALL_FAILED, why);
                return (Outcome::Blocked(blocked), None);
            }
        };
        let target = AppRef {
            namespace: app.namespace().unwrap_or_default(),
            name: app.name_any(),
            package: package.to_owned(),
        };
        match self
            .installer
            .install(&target, &dir, &base, &values, maintenance, &root)
            .await
        {
            Ok(done) => {
                let applied = Applied {
                    urls: done.urls,
                    values,
                };
                let outcome = match done.readiness {
                    Readiness::Ready => Outcome::Installed {
                        waiting: None,
                        failed: false,
                    },
                    Readiness::Waiting(w) => Outcome::Installed {
                        waiting: Some(w),
                        failed: false,
                    },
                    Readiness::Failed(w) => Outcome::Installed {
                        waiting: Some(w),
                        failed: true,
                    },
                };
                (outcome, Some(applied))
            }
            Err(Error::Install(why)) => (
                Outcome::Blocked(Blocked {
                    reason: decide::REASON_INSTALL_FAILED,
                    message: why,
                }),
                None,
            ),
            Err(e) => (Outcome::Failed(e.to_string()), None),
        }
    }

    /// What the chart of `app` at `version` sees besides `.Values`: `$.Application` (with the
    /// `settings` with their defaults) and `$.Platform`.
    fn root(
        &self,
        app: &Application,
        world: &World,
        repo_name: &str,
        version: &str,
        settings: &Value,
        files: &crate::registry::BundleFiles,
    ) -> Result<RootObjects, String> {
        let digests = match &files.image_digests {
            Some(text) => runtime::image_digests(text)?,
            None => Default::default(),
        };
        let registry = world
            .repositories
            .iter()
            .find(|r| r.name_any() == repo_name)
            .map(|r| r.spec.registry.clone())
            .unwrap_or_default();
        let namespace = app.namespace().unwrap_or_default();
        let application = runtime::application(&runtime::Facts {
            namespace: &namespace,
            name: &app.name_any(),
            package: &app.spec.package_name,
            version,
            repository: repo_name,
            registry: &registry,
            digests: &digests,
            settings,
        });
        let global = self
            .global_values
            .as_ref()
            .map(|g| g.get())
            .unwrap_or(Value::Null);
        let kubernetes = world.kubernetes.as_ref().map(|v| v.to_string());
        let platform = runtime::platform(global, kubernetes.as_deref());
        Ok(runtime::root(application, platform))
    }

    /// Adds the Application to (or removes it from) a version's `usedBy`.
    async fn set_used_by(
        &self,
        apv: &ApplicationPackageVersion,
        app: &Application,
        add: bool,
    ) -> Result<(), Error> {
        let api: Api<ApplicationPackageVersion> = Api::all(self.client.clone());
        // Read fresh: another Application may have changed the list in this pass.
        let Some(apv) = api
            .get_opt(&apv.name_any())
            .await
            .map_err(|e| Error::kube("get ApplicationPackageVersion", e))?
        else {
            return Ok(());
        };
        let old = apv.status.clone().unwrap_or_default().used_by;
        let new = if add {
            decide::with_user(&old, app)
        } else {
            decide::without_user(&old, app)
        };
        if new == old {
            return Ok(());
        }
        api.patch_status(
            &apv.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"usedBy": new, "usedByCount": new.len()}})),
        )
        .await
        .map_err(|e| Error::kube("patch ApplicationPackageVersion usedBy", e))?;
        Ok(())
    }

    /// Adds the Application to (or removes it from) its package's instances (by namespace).
    async fn set_instance(
        &self,
        packages: &[ApplicationPackage],
        app: &Application,
        add: bool,
    ) -> Result<(), Error> {
        let package = &app.spec.package_name;
        if !packages.iter().any(|p| p.name_any() == *package) {
            return Ok(());
        }
        let api: Api<ApplicationPackage> = Api::all(self.client.clone());
        let Some(current) = api
            .get_opt(package)
            .await
            .map_err(|e| Error::kube("get ApplicationPackage", e))?
        else {
            return Ok(());
        };
        let status = current.status.clone().unwrap_or_default();
        let instances = instances_with(&status.instances, app, add);
        if instances == status.instances {
            return Ok(());
        }
        let overall: usize = instances.values().map(Vec::len).sum();
        // Every namespace key is written (null removes one), as a merge patch keeps the rest.
        let mut map = serde_json::Map::new();
        for ns in status.instances.keys() {
            map.insert(ns.clone(), Value::Null);
        }
        for (ns, list) in &instances {
            map.insert(ns.clone(), json!(list));
        }
        api.patch_status(
            package,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"instances": map, "instancesOverall": overall}})),
        )
        .await
        .map_err(|e| Error::kube("patch ApplicationPackage instances", e))?;
        Ok(())
    }
}

/// The package's instances (namespace → Applications) with or without `app`.
pub fn instances_with(
    instances: &std::collections::BTreeMap<String, Vec<PackageInstance>>,
    app: &Application,
    add: bool,
) -> std::collections::BTreeMap<String, Vec<PackageInstance>> {
    let ns = app.namespace().unwrap_or_default();
    let me = PackageInstance {
        name: Some(app.name_any()),
    };
    let mut out = instances.clone();
    let list = out.entry(ns.clone()).or_default();
    list.retain(|i| *i != me);
    if add {
        list.push(me);
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    if list.is_empty() {
        out.remove(&ns);
    }
    out
}

/// The conditions with `new` set: the transition time kept while a condition's status holds.
/// `status` as a merge patch: a summary's message or tip that is gone is written as `null`
/// (a merge patch keeps what it does not name).
fn status_patch(status: &ApplicationStatus) -> serde_json::Value {
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let Some(summary) = value.get_mut("summary").and_then(|s| s.as_object_mut()) {
        for key in ["message", "tip"] {
            summary.entry(key).or_insert(serde_json::Value::Null);
        }
    }
    value
}

fn merge_conditions(old: &[Condition], new: &[decide::Cond], app: &Application) -> Vec<Condition> {
    let now = Time(jiff::Timestamp::now());
    let mut out: Vec<Condition> = old
        .iter()
        .filter(|c| !new.iter().any(|n| n.0 == c.type_))
        .cloned()
        .collect();
    for (type_, ok, reason, message) in new {
        let status = if *ok { "True" } else { "False" };
        let previous = old.iter().find(|c| c.type_ == *type_);
        let same = previous
            .is_some_and(|p| p.status == status && p.reason == *reason && p.message == *message);
        if let Some(p) = previous.filter(|_| same) {
            out.push(p.clone());
            continue;
        }
        out.push(Condition {
            type_: (*type_).to_owned(),
            status: status.to_owned(),
            reason: (*reason).to_owned(),
            message: message.clone(),
            last_transition_time: match previous {
                Some(p) if p.status == status => p.last_transition_time.clone(),
                _ => now.clone(),
            },
            observed_generation: app.metadata.generation,
        });
    }
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}
