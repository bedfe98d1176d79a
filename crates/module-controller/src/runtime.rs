//! The module runtime: what addon-operator does inside Deckhouse once a module is on disk —
//! render its chart with its values, apply the objects, record the release, delete what left
//! the chart, follow the workloads' readiness, and write the Module status; and, when the
//! module is disabled, remove everything it applied.
//!
//! The stages, each its own room: [`render`] (module directory + values → objects),
//! [`converge`] (pure: apply or not, what left the chart), [`apply`] (the API edge: server-side
//! apply, deletes, release Secrets), [`release`] (Helm's release record), [`readiness`] and
//! [`status`] (pure: workloads → readiness → phase and conditions). [`Runtime::run_module`]
//! strings them together in addon-operator's order.

pub mod apply;
pub mod converge;
pub mod hooks;
pub mod metrics;
pub mod queue;
pub mod readiness;
pub mod release;
pub mod render;
pub mod status;
pub mod values;
pub mod worker;

use std::path::{Path, PathBuf};

use api::module::{Module, ModulePhase};
use api::module_config::{Maintenance, ModuleConfig};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use module_hooks::ModuleRef;
use serde_json::{Value, json};

use self::apply::Applier;
use self::converge::ObjectKey;
use self::readiness::Readiness;
use self::release::{Release, Status};
use self::status::Ending;
use crate::Error;
use crate::embedded::EmbeddedModule;
use crate::install::{Downloaded, ModuleFiles, read_module_files};

/// Where releases are stored, and the namespace of a module whose `module.yaml` names none.
pub const RELEASE_NAMESPACE: &str = "d8-system";

/// Where the modules are on disk: the embedded ones, and the downloaded modules directory.
#[derive(Clone, Debug, Default)]
pub struct ModuleDirs {
    /// Embedded modules.
    pub embedded: Vec<EmbeddedModule>,
    /// The downloaded modules directory.
    pub downloaded: Option<Downloaded>,
}

impl ModuleDirs {
    /// How the hooks of a module found at `dir` see it: an embedded module under its
    /// directory's name (`040-node-manager`), a downloaded one under its own name, as Deckhouse
    /// links `downloaded/modules/<name>` to the active release — so its hooks are named
    /// `<module>/hooks/…`, not after the release's version directory.
    pub fn hooks_ref(&self, module: &str, dir: &Path) -> ModuleRef {
        let embedded = self.embedded.iter().any(|e| e.dir == dir);
        let mut found = ModuleRef::new(module, dir);
        if !embedded {
            found.dir_name = module.to_owned();
        }
        found
    }

    /// The directory and files of a module's active release.
    pub fn find(&self, module: &str) -> Result<Option<(PathBuf, ModuleFiles)>, Error> {
        if let Some(e) = self
            .embedded
            .iter()
            .find(|e| e.files.definition.name == module)
        {
            return Ok(Some((e.dir.clone(), e.files.clone())));
        }
        let Some(downloaded) = &self.downloaded else {
            return Ok(None);
        };
        let Some(version) = downloaded.active_version(module) else {
            return Ok(None);
        };
        let dir = downloaded.release_dir(module, &version);
        let files = read_module_files(module, &dir)?;
        Ok(Some((dir, files)))
    }
}

/// What one run of a module did.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The release revision now deployed (`None`: the module has no chart).
    pub revision: Option<i64>,
    /// Objects applied (0 when the release was unchanged).
    pub applied: usize,
    /// Objects deleted because they left the chart.
    pub deleted: usize,
    /// The workloads' readiness.
    pub readiness: Readiness,
    /// `maintenance: NoResourceReconciliation` left the resources alone.
    pub maintenance: bool,
}

/// Runs modules.
pub struct Runtime {
    client: Client,
    applier: Applier,
    dirs: ModuleDirs,
    global: Value,
    global_hooks_dir: Option<PathBuf>,
    chroot_root: PathBuf,
    values: values::ValuesStore,
    hooks: hooks::HookHost,
    clock: std::sync::Arc<dyn release_controller::Clock>,
    queue_view: worker::QueueView,
    queue_metrics: worker::QueueMetrics,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("dirs", &self.dirs)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime for the modules in `dirs`.
    pub fn new(
        client: Client,
        dirs: ModuleDirs,
        clock: std::sync::Arc<dyn release_controller::Clock>,
    ) -> Self {
        Self {
            applier: Applier::new(client.clone()),
            client,
            dirs,
            global: json!({}),
            global_hooks_dir: None,
            chroot_root: PathBuf::from(hooks::CHROOT_ROOT),
            values: values::ValuesStore::default(),
            hooks: hooks::HookHost::default(),
            clock,
            queue_view: worker::QueueView::new(),
            queue_metrics: worker::QueueMetrics::default(),
        }
    }

    /// The base of the global values (`global` in every chart): what the caller knows about
    /// the cluster; the global ModuleConfig's settings and Deckhouse's own keys go over it.
    pub fn with_global(mut self, global: Value) -> Self {
        self.global = global;
        self
    }

    /// Global hooks from `dir` (addon-operator's `GLOBAL_HOOKS_DIR`): run before the first
    /// converge and around every converge.
    pub fn with_global_hooks_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.global_hooks_dir = dir;
        self
    }

    /// Where chroot mode assembles the modules' chroots (`/chroot` by default).
    pub fn with_chroot_root(mut self, root: PathBuf) -> Self {
        self.chroot_root = root;
        self
    }

    /// The global values of the last converge.
    pub fn global_values(&self) -> Value {
        self.global_module_values()
            .map(|g| g.values().clone())
            .unwrap_or_default()
    }

    /// The API edge (for tests and tools).
    pub fn applier(&self) -> &Applier {
        &self.applier
    }

    fn now(&self) -> String {
        self.clock.now().to_string()
    }

    /// One run of an enabled module, with the Module status written before and after.
    pub async fn run_module(&self, module: &str) -> Result<Outcome, Error> {
        let current = Api::<Module>::all(self.client.clone())
            .get_opt(module)
            .await
            .map_err(|e| Error::kube(format!("get Module {module}"), e))?;
        let phase = current
            .as_ref()
            .and_then(|m| m.status.as_ref())
            .and_then(|s| s.phase);
        // Installing/Reconciling is written only when something is applied: an unchanged
        // module costs reads only.
        let starting = current.is_some().then(|| status::starting(phase));
        let result = self.reconcile(module, starting).await;
        let ending = match &result {
            Ok(o) if o.maintenance => Ending::Maintenance,
            Ok(o) => Ending::Done(o.readiness.clone()),
            Err(e @ Error::Hook { .. }) => Ending::HookError(e.to_string()),
            Err(e) => Ending::ModuleError(e.to_string()),
        };
        // A failing hook shows before anything else, as Deckhouse's status reporter has it.
        let ending = match self.hooks.error_status(module) {
            Some((message, _)) => Ending::HookError(message),
            None => ending,
        };
        let (phase, conditions) = status::ended(&ending);
        if current.is_some() {
            self.write_status(module, phase, conditions).await?;
        }
        result
    }

    async fn write_status(
        &self,
        module: &str,
        phase: ModulePhase,
        conditions: Vec<status::Condition>,
    ) -> Result<(), Error> {
        let api: Api<Module> = Api::all(self.client.clone());
        let now = Time(self.clock.now());
        // `status.hooksState`: every failing hook with its error (empty when none fails).
        let hooks_state = self
            .hooks
            .error_status(module)
            .map(|(_, state)| state)
            .unwrap_or_default();
        let new: Vec<_> = conditions
            .into_iter()
            .map(|(t, ok, reason, message)| {
                crate::manager::condition(t, ok, reason, &message, &now)
            })
            .collect();
        // Read, merge, write with the resourceVersion read: the module manager writes other
        // conditions of the same list, and a stale write must not undo its.
        for _ in 0..8 {
            let Some(current) = api
                .get_opt(module)
                .await
                .map_err(|e| Error::kube(format!("get Module {module}"), e))?
            else {
                return Ok(());
            };
            let current_phase = current.status.as_ref().and_then(|s| s.phase);
            let current_hooks = current
                .status
                .as_ref()
                .and_then(|s| s.hooks_state.clone())
                .unwrap_or_default();
            let old = current.status.map(|s| s.conditions).unwrap_or_default();
            if current_phase == Some(phase)
                && status::holds(&old, &new)
                && current_hooks == hooks_state
            {
                return Ok(());
            }
            let merged = crate::manager::merge_conditions(&old, new.clone());
            let patch = json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "status": {"phase": phase, "conditions": merged, "hooksState": hooks_state},
            });
            match api
                .patch_status(module, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(Error::kube(format!("patch Module {module} status"), e)),
            }
        }
        Err(Error::Render {
            module: module.to_owned(),
            message: "the Module status kept changing while it was written".into(),
        })
    }

    /// Render → apply → release → readiness; `starting` is the status written before applying.
    async fn reconcile(
        &self,
        module: &str,
        starting: Option<(ModulePhase, Vec<status::Condition>)>,
    ) -> Result<Outcome, Error> {
        let Some((dir, files)) = self.dirs.find(module)? else {
            return Err(Error::Render {
                module: module.to_owned(),
                message: "the module is not on disk".into(),
            });
        };
        let config = Api::<ModuleConfig>::all(self.client.clone())
            .get_opt(module)
            .await
            .map_err(|e| Error::kube(format!("get ModuleConfig {module}"), e))?;
        let spec = config.map(|c| c.spec).unwrap_or_default();
        let maintenance = spec.maintenance == Some(Maintenance::NoResourceReconciliation);
        let checked = files.settings.check(&spec);
        if let Some(reason) = checked.error {
            return Err(Error::SettingsRejected { reason });
        }
        let definition = values::module_definition(&dir, &files.settings)?;
        let mut module_values = values::next_module_values(
            self.values.module(module).as_ref(),
            definition,
            Some(&spec),
        )
        .map_err(values::values_error)?;
        self.values.set_module(module_values.clone());
        self.start_hooks(module, &dir, &mut module_values).await?;
        self.run_phase(module, hooks::plan::Phase::BeforeHelm, &mut module_values)
            .await?;
        let mut starting = starting;
        let mut outcome = self
            .helm(
                module,
                &dir,
                &files,
                maintenance,
                &module_values,
                starting.take(),
            )
            .await?;
        for _ in 0..hooks::plan::AFTER_HELM_RERENDERS {
            let before = module_values.checksum();
            self.run_phase(module, hooks::plan::Phase::AfterHelm, &mut module_values)
                .await?;
            if !hooks::plan::rerun_module(&before, &module_values.checksum()) {
                break;
            }
            tracing::info!(
                module,
                "afterHelm hooks changed the values: rendering again"
            );
            outcome = self
                .helm(module, &dir, &files, maintenance, &module_values, None)
                .await?;
        }
        Ok(outcome)
    }

    /// Render → apply → release → readiness with the module's values.
    async fn helm(
        &self,
        module: &str,
        dir: &std::path::Path,
        files: &ModuleFiles,
        maintenance: bool,
        module_values: &module_plan::values::ModuleValues,
        starting: Option<(ModulePhase, Vec<status::Condition>)>,
    ) -> Result<Outcome, Error> {
        module_values.check_helm().map_err(values::values_error)?;
        let global = self.global_module_values()?;
        let values = module_plan::values::helm_values(&global, module_values);
        let namespace = files
            .definition
            .yaml
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| RELEASE_NAMESPACE.to_owned());
        let history = self.applier.history(RELEASE_NAMESPACE, module).await?;
        let last = release::last(&history);
        if maintenance
            && last.is_some_and(|r| {
                r.labels
                    .get(render::LABEL_NO_RESOURCE_RECONCILIATION)
                    .map(String::as_str)
                    == Some("true")
            })
        {
            tracing::info!(module, "helm release is Unmanaged, skip helm upgrade");
            return Ok(Outcome {
                revision: last.map(|r| r.version),
                applied: 0,
                deleted: 0,
                readiness: Readiness::Ready,
                maintenance: true,
            });
        }
        let Some(chart) = render::read_chart(module, dir)? else {
            return Ok(Outcome {
                revision: None,
                applied: 0,
                deleted: 0,
                readiness: Readiness::Ready,
                maintenance,
            });
        };
        let chart_version = chart_version(&chart);
        let rendered = render::render(module, chart, &values, &namespace).await?;
        let mut objects = rendered.objects;
        let extra: &[(&str, &str)] = if maintenance {
            &[(render::LABEL_NO_RESOURCE_RECONCILIATION, "")]
        } else {
            &[]
        };
        render::decorate(&mut objects, module, &namespace, extra);
        let mut settled = Vec::with_capacity(objects.len());
        for mut object in objects {
            let key = self
                .applier
                .settle(&mut object, &namespace)
                .await
                .map_err(|e| in_module(module, e))?;
            settled.push((key, object));
        }
        let checksum = converge::checksum(&rendered.manifest);
        let label_maintenance = if maintenance { "true" } else { "false" };
        let same_mode = last.is_some_and(|r| {
            r.labels
                .get(render::LABEL_NO_RESOURCE_RECONCILIATION)
                .map(String::as_str)
                .unwrap_or("false")
                == label_maintenance
        });
        let mut must_apply = converge::needs_apply(last, &checksum, false) || !same_mode;
        if !must_apply {
            for (key, _) in &settled {
                if self.applier.get(key).await?.is_none() {
                    must_apply = true;
                    break;
                }
            }
        }
        let mut outcome = Outcome {
            revision: last.map(|r| r.version),
            applied: 0,
            deleted: 0,
            readiness: Readiness::Ready,
            maintenance,
        };
        if must_apply {
            let revision = last.map_or(1, |r| r.version + 1);
            let first_deployed = history
                .first()
                .map(|r| r.first_deployed.clone())
                .unwrap_or_else(|| self.now());
            let mut record = Release {
                name: module.to_owned(),
                namespace: namespace.clone(),
                version: revision,
                status: if last.is_some() {
                    Status::PendingUpgrade
                } else {
                    Status::PendingInstall
                },
                manifest: rendered.manifest.clone(),
                config: values.clone(),
                chart: (module.to_owned(), chart_version),
                first_deployed,
                last_deployed: self.now(),
                description: "Preparing upgrade".into(),
                labels: [
                    (release::LABEL_MODULE_CHECKSUM.to_owned(), checksum.clone()),
                    (
                        render::LABEL_NO_RESOURCE_RECONCILIATION.to_owned(),
                        label_maintenance.to_owned(),
                    ),
                ]
                .into(),
            };
            if let Some((phase, conditions)) = starting {
                self.write_status(module, phase, conditions).await?;
            }
            // The pending record first: a controller killed mid-apply leaves a release that
            // is not `deployed`, so the next leader applies it again and deletes what the
            // earlier revisions held and this one does not.
            self.applier.store(RELEASE_NAMESPACE, &record).await?;
            let previous = self
                .deployed_objects(module, &history, &namespace, extra)
                .await;
            match self
                .apply_release(module, &history, &previous, &settled)
                .await
            {
                Ok((applied, deleted)) => {
                    outcome.applied = applied;
                    outcome.deleted = deleted;
                }
                Err(e) => {
                    record.status = Status::Failed;
                    record.description = format!("Upgrade \"{module}\" failed: {e}");
                    self.applier.store(RELEASE_NAMESPACE, &record).await?;
                    return Err(e);
                }
            }
            // The deployed revision is superseded; a pending one left by a controller that
            // died mid-apply is marked failed (its objects were taken over above).
            for old in &history {
                let mut old = old.clone();
                match old.status {
                    Status::Deployed => old.status = Status::Superseded,
                    Status::PendingInstall | Status::PendingUpgrade => {
                        old.status = Status::Failed;
                        old.description = "Interrupted: taken over by the next revision".into();
                    }
                    _ => continue,
                }
                self.applier.store(RELEASE_NAMESPACE, &old).await?;
            }
            record.status = Status::Deployed;
            record.description = if revision == 1 {
                "Install complete".into()
            } else {
                "Upgrade complete".into()
            };
            self.applier.store(RELEASE_NAMESPACE, &record).await?;
            let mut all = history.clone();
            all.push(record);
            for version in release::to_prune(&all) {
                self.applier
                    .forget(RELEASE_NAMESPACE, module, version)
                    .await?;
            }
            outcome.revision = Some(revision);
            tracing::info!(
                module,
                revision,
                applied = outcome.applied,
                deleted = outcome.deleted,
                "module release deployed"
            );
        }
        let mut states = Vec::new();
        for (key, _) in settled
            .iter()
            .filter(|(k, _)| readiness::is_workload(&k.kind))
        {
            match self.applier.get(key).await? {
                Some(object) => states.push(readiness::of(
                    &serde_json::to_value(object).unwrap_or_default(),
                )),
                None => states.push(Readiness::Waiting(format!("{key}: not found"))),
            }
        }
        outcome.readiness = readiness::module(&states);
        Ok(outcome)
    }

    /// Applies every object, then deletes what the earlier revisions (since the last deployed
    /// one) held and this one does not.
    async fn apply_release(
        &self,
        module: &str,
        history: &[Release],
        previous: &[(ObjectKey, Value)],
        settled: &[(ObjectKey, Value)],
    ) -> Result<(usize, usize), Error> {
        let mut applied = 0;
        for ((key, object), changed) in settled.iter().zip(converge::to_apply(previous, settled)) {
            if changed || self.applier.get(key).await?.is_none() {
                self.applier.apply(key, object).await?;
                applied += 1;
            }
        }
        let released = self.released_objects(module, history).await;
        let current: Vec<ObjectKey> = settled.iter().map(|(k, _)| k.clone()).collect();
        let mut deleted = 0;
        for key in converge::removed(&released, &current) {
            if self.applier.delete(&key).await? {
                tracing::info!(module, object = %key, "resource left the chart: deleted");
                deleted += 1;
            }
        }
        Ok((applied, deleted))
    }

    /// The objects of the last deployed revision, decorated and settled as the current ones
    /// are (empty when none is deployed).
    async fn deployed_objects(
        &self,
        module: &str,
        history: &[Release],
        namespace: &str,
        extra: &[(&str, &str)],
    ) -> Vec<(ObjectKey, Value)> {
        let Some(deployed) = history
            .iter()
            .filter(|r| r.status == Status::Deployed)
            .max_by_key(|r| r.version)
        else {
            return Vec::new();
        };
        let Ok(mut objects) = render::parse_manifest(&deployed.manifest) else {
            return Vec::new();
        };
        render::decorate(&mut objects, module, namespace, extra);
        let mut out = Vec::new();
        for mut object in objects {
            if let Ok(key) = self.applier.settle(&mut object, namespace).await {
                out.push((key, object));
            }
        }
        out
    }

    /// The objects of the last deployed revision and of every later one (pending, failed),
    /// with their `keep` policy.
    async fn released_objects(&self, module: &str, history: &[Release]) -> Vec<(ObjectKey, bool)> {
        let from = history
            .iter()
            .filter(|r| r.status == Status::Deployed)
            .map(|r| r.version)
            .max()
            .unwrap_or(0);
        let mut out = Vec::new();
        for r in history.iter().filter(|r| r.version >= from) {
            let Ok(objects) = render::parse_manifest(&r.manifest) else {
                tracing::warn!(module, revision = r.version, "stored manifest unreadable");
                continue;
            };
            for mut object in objects {
                let ns = if r.namespace.is_empty() {
                    RELEASE_NAMESPACE.to_owned()
                } else {
                    r.namespace.clone()
                };
                let keep = converge::kept(&object);
                match self.applier.settle(&mut object, &ns).await {
                    Ok(key) => out.push((key, keep)),
                    Err(e) => tracing::warn!(module, error = %e, "stored object skipped"),
                }
            }
        }
        out
    }

    /// Removes a disabled module: every object its releases hold, then the release records.
    /// Returns how many objects were deleted.
    pub async fn delete_module(&self, module: &str) -> Result<usize, Error> {
        let history = self.applier.history(RELEASE_NAMESPACE, module).await?;
        if history.is_empty() {
            self.stop_hooks(module).await?;
            return Ok(0);
        }
        let objects = self.released_objects(module, &history).await;
        let mut deleted = 0;
        for key in converge::removed(&objects, &[]) {
            if self.applier.delete(&key).await? {
                deleted += 1;
            }
        }
        for r in &history {
            self.applier
                .forget(RELEASE_NAMESPACE, module, r.version)
                .await?;
        }
        tracing::info!(module, deleted, "module release uninstalled");
        // afterDeleteHelm, then the module's watches and schedules stop.
        self.stop_hooks(module).await?;
        Ok(deleted)
    }

    /// A converge done at once (without the queues): every disabled module that still has a
    /// release is removed, then every enabled module is run in weight order. Returns each
    /// module's result.
    pub async fn converge(&self) -> Result<Vec<(String, Result<Outcome, Error>)>, Error> {
        let (enabled, to_delete) = self.converge_plan().await?;
        let mut out = Vec::new();
        for kind in queue::converge_tasks(&enabled, &to_delete) {
            match kind {
                queue::TaskKind::ModuleDelete { module } => {
                    if let Err(e) = self.delete_module(&module).await {
                        out.push((module, Err(e)));
                    }
                }
                queue::TaskKind::ModuleRun { module } => {
                    let result = self.run_module(&module).await;
                    if let Err(e) = &result {
                        tracing::warn!(module = %module, error = %e, "module run failed");
                    }
                    out.push((module, result));
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

fn in_module(module: &str, e: Error) -> Error {
    match e {
        Error::Render { message, .. } => Error::Render {
            module: module.to_owned(),
            message,
        },
        other => other,
    }
}

/// `version` of the chart's `Chart.yaml` (addon-operator's generated one: 0.2.0).
fn chart_version(files: &[(String, Vec<u8>)]) -> String {
    files
        .iter()
        .find(|(n, _)| n == "Chart.yaml")
        .and_then(|(_, data)| {
            let v: Value = serde_saphyr::from_str(&String::from_utf8_lossy(data)).ok()?;
            match v.get("version")? {
                Value::String(s) => Some(s.clone()),
                other => Some(other.to_string()),
            }
        })
        .unwrap_or_else(|| render::GENERATED_CHART_VERSION.to_owned())
}
