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
pub mod deploy;
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
use self::readiness::Readiness;
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
            self.queue_metrics.config_checked(module, false);
            return Err(Error::SettingsRejected { reason });
        }
        let definition = values::module_definition(&dir, &files.settings)?;
        let module_values = values::next_module_values(
            self.values.module(module).as_ref(),
            definition,
            Some(&spec),
        );
        self.queue_metrics
            .config_checked(module, module_values.is_ok());
        let mut module_values = module_values.map_err(values::values_error)?;
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
        let force = match release::maintenance(maintenance, release::last(&history)) {
            release::Maintenance::Skip => {
                tracing::info!(module, "helm release is Unmanaged, skip helm upgrade");
                return Ok(Outcome {
                    revision: release::last(&history).map(|r| r.version),
                    applied: 0,
                    deleted: 0,
                    readiness: Readiness::Ready,
                    maintenance: true,
                });
            }
            release::Maintenance::Apply { force } => force,
        };
        let (labels, release_labels) = release::maintenance_labels(maintenance);
        let Some(chart) = render::read_chart(module, dir)? else {
            return Ok(Outcome {
                revision: None,
                applied: 0,
                deleted: 0,
                readiness: Readiness::Ready,
                maintenance,
            });
        };
        let target = module_target(module, &namespace);
        let prepared = deploy::prepare(
            &self.applier,
            deploy::Install {
                target,
                chart_name: module,
                chart,
                values,
                root: Default::default(),
                labels,
                release_labels,
                force,
            },
            history,
        )
        .await
        .map_err(|e| in_module(module, e))?;
        let mut outcome = Outcome {
            revision: prepared.revision(),
            applied: 0,
            deleted: 0,
            readiness: Readiness::Ready,
            maintenance,
        };
        if prepared.must_apply {
            if let Some((phase, conditions)) = starting {
                self.write_status(module, phase, conditions).await?;
            }
            let done = deploy::deploy(&self.applier, target, &prepared, self.now()).await?;
            outcome.revision = Some(done.revision);
            outcome.applied = done.applied;
            outcome.deleted = done.deleted;
            tracing::info!(
                module,
                revision = done.revision,
                applied = done.applied,
                deleted = done.deleted,
                "module release deployed"
            );
        }
        outcome.readiness = deploy::readiness(&self.applier, &prepared.settled).await?;
        Ok(outcome)
    }

    /// Removes a disabled module: every object its releases hold, then the release records.
    /// Returns how many objects were deleted.
    pub async fn delete_module(&self, module: &str) -> Result<usize, Error> {
        // The objects' namespace defaults to the one each revision records.
        let target = module_target(module, RELEASE_NAMESPACE);
        let deleted = deploy::uninstall(&self.applier, target).await?;
        if let Some(deleted) = deleted {
            tracing::info!(module, deleted, "module release uninstalled");
        }
        // afterDeleteHelm, then the module's watches and schedules stop.
        self.stop_hooks(module).await?;
        Ok(deleted.unwrap_or(0))
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

/// A module's release: named after the module, stored in [`RELEASE_NAMESPACE`], its objects
/// in the module's `namespace`.
fn module_target<'a>(module: &'a str, namespace: &'a str) -> deploy::Target<'a> {
    deploy::Target {
        name: module,
        storage: RELEASE_NAMESPACE,
        namespace,
        confined: false,
    }
}
