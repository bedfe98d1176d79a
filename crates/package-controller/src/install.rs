//! Installing an Application with the module runtime's release install
//! ([`module_controller::runtime::deploy`], the one modules use): the package bundle
//! downloaded once per version (verified digests, safe unpacking), its chart rendered with the
//! Application's settings, the objects applied server-side under Helm's field manager and
//! recorded as a Helm release named after the Application and stored in its namespace —
//! so two Applications in two namespaces are two releases that never touch each other's
//! objects. An upgrade deletes what left the chart; an uninstall deletes everything the
//! release's revisions hold, and nothing else.

use std::path::{Path, PathBuf};

use module_controller::runtime::apply::Applier;
use module_controller::runtime::deploy;
use module_controller::runtime::readiness::Readiness;
use module_controller::runtime::release;
use module_controller::runtime::render::{self, RootObjects};
use module_controller::unpack::Limits;
use serde_json::{Value, json};

use crate::Error;
use crate::application::{out_of_scope, urls};
use crate::hooks::{AppRef, PackageHooks};
use crate::registry::PackageImages;
use module_controller::runtime::hooks::plan::Phase;

/// What an install did.
#[derive(Clone, Debug, PartialEq)]
pub struct Installed {
    /// The release revision deployed (`None`: the package has no chart).
    pub revision: Option<i64>,
    /// Objects applied (0 when the release was unchanged).
    pub applied: usize,
    /// Objects deleted because they left the chart.
    pub deleted: usize,
    /// The workloads' readiness.
    pub readiness: Readiness,
    /// The endpoints of the chart's annotated Ingresses.
    pub urls: Vec<api::packages::ApplicationUrl>,
}

/// Installs and removes Applications.
pub struct Installer {
    applier: Applier,
    hooks: PackageHooks,
    cache: PathBuf,
}

impl std::fmt::Debug for Installer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Installer")
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

/// A path component from a registry tag or an object name: no separators, no `.`/`..`.
fn component(s: &str) -> Result<&str, Error> {
    if s.is_empty() || s == "." || s == ".." || s.contains(['/', '\\', '\0']) {
        return Err(Error::Install(format!("{s:?} cannot name a directory")));
    }
    Ok(s)
}

impl Installer {
    /// An installer keeping downloaded bundles under `cache`.
    pub fn new(client: kube::Client, cache: PathBuf) -> Self {
        Self {
            applier: Applier::new(client.clone()),
            hooks: PackageHooks::new(client),
            cache,
        }
    }

    /// Notified when a hook run between passes changed an Application's values.
    pub fn wake(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.hooks.wake()
    }

    /// Why the hooks of Application `namespace`/`name` fail between passes (kubernetes and
    /// schedule runs), until each has succeeded again.
    pub fn hook_error(&self, namespace: &str, name: &str, package: &str) -> Option<String> {
        self.hooks.hook_error(&AppRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            package: package.to_owned(),
        })
    }

    /// The bundle of `package` `version` from repository `repo`, when it was downloaded.
    pub fn cached(&self, repo: &str, package: &str, version: &str) -> Option<PathBuf> {
        let dir = self
            .cache
            .join(component(repo).ok()?)
            .join(component(package).ok()?)
            .join(component(version).ok()?);
        dir.is_dir().then_some(dir)
    }

    /// The unpacked bundle of `package` `version` from repository `repo`: downloaded (verified,
    /// safely unpacked) the first time, then reused.
    pub async fn bundle(
        &self,
        images: &PackageImages,
        repo: &str,
        package: &str,
        version: &str,
    ) -> Result<PathBuf, Error> {
        let parent = self.cache.join(component(repo)?).join(component(package)?);
        let dir = parent.join(component(version)?);
        if dir.is_dir() {
            return Ok(dir);
        }
        std::fs::create_dir_all(&parent).map_err(Error::Temp)?;
        let staging = tempfile::tempdir_in(&parent).map_err(Error::Temp)?;
        let unpacked = staging.path().join("bundle");
        std::fs::create_dir(&unpacked).map_err(Error::Temp)?;
        images
            .download(package, version, &unpacked, Limits::default())
            .await?;
        // The rename makes the bundle appear whole or not at all.
        std::fs::rename(&unpacked, &dir).map_err(Error::Temp)?;
        Ok(dir)
    }

    /// Whether release `name` of `namespace` was last applied in maintenance
    /// (`NoResourceReconciliation`): while the Application stays in it, nothing is applied
    /// ([`release::Maintenance::Skip`]).
    pub async fn applied_in_maintenance(&self, namespace: &str, name: &str) -> Result<bool, Error> {
        let history = self.applier.history(namespace, name).await?;
        Ok(release::maintenance(true, release::last(&history)) == release::Maintenance::Skip)
    }

    /// Runs the package's `beforeHelm` hooks, renders the chart in `dir` with the values they
    /// leave as release `name` in `namespace` and applies it, then runs its `afterHelm` hooks
    /// (values they change render the chart once more); a chart holding anything outside the
    /// namespace is refused before anything changes. `settings` are the package's values the
    /// hooks start from ([`crate::application::package_values`]), `config` the settings with
    /// their defaults (the hooks' config values), `root` what the chart sees besides `.Values`
    /// ([`crate::runtime`]). `maintenance`: the Application is in `NoResourceReconciliation` —
    /// applied once with the maintenance label on every object (and not rendered again after
    /// `afterHelm`), as Deckhouse puts it in the mode.
    pub async fn install(
        &self,
        app: &AppRef,
        dir: &Path,
        settings: &Value,
        config: &Value,
        maintenance: bool,
        root: &RootObjects,
    ) -> Result<Installed, Error> {
        self.hooks.start(app, dir, settings, config).await?;
        let values = self.hooks.values(app, settings).await?;
        let values = self.hooks.run_phase(app, Phase::BeforeHelm, values).await?;
        let mut out = self.release(app, dir, &values, maintenance, root).await?;
        let after = self
            .hooks
            .run_phase(app, Phase::AfterHelm, values.clone())
            .await?;
        if after != values && !maintenance {
            tracing::info!(
                namespace = %app.namespace,
                application = %app.name,
                "afterHelm hooks changed the values: rendering again"
            );
            out = self.release(app, dir, &after, false, root).await?;
        }
        self.hooks.released(app);
        Ok(out)
    }

    /// Renders and applies the release with the package's `settings` (its values) and the
    /// `root` objects, labelled for `maintenance` ([`release::maintenance_labels`]).
    async fn release(
        &self,
        app: &AppRef,
        dir: &Path,
        settings: &Value,
        maintenance: bool,
        root: &RootObjects,
    ) -> Result<Installed, Error> {
        let (namespace, name, package) = (&*app.namespace, &*app.name, &*app.package);
        let Some(chart) = render::read_chart(package, dir)? else {
            return Ok(Installed {
                revision: None,
                applied: 0,
                deleted: 0,
                readiness: Readiness::Ready,
                urls: Vec::new(),
            });
        };
        let values = json!({
            "global": {},
            module_plan::definition::camel_case(package): settings,
        });
        let target = target(namespace, name);
        let history = self.applier.history(namespace, name).await?;
        // Entering or leaving maintenance applies once more even with nothing else changed;
        // the caller does not come here while a labelled revision stays in maintenance.
        let force = match release::maintenance(maintenance, release::last(&history)) {
            release::Maintenance::Apply { force } => force,
            release::Maintenance::Skip => false,
        };
        let (labels, release_labels) = release::maintenance_labels(maintenance);
        let install = deploy::Install {
            target,
            chart_name: package,
            chart,
            values,
            root: root.clone(),
            labels,
            release_labels,
            force,
        };
        let prepared = deploy::prepare(&self.applier, install, history).await?;
        let scope: Vec<(String, Option<String>)> = prepared
            .settled
            .iter()
            .map(|(k, _)| (format!("{}/{}", k.kind, k.name), k.namespace.clone()))
            .collect();
        if let Some(why) = out_of_scope(&scope, namespace) {
            return Err(Error::Install(why));
        }
        let objects: Vec<Value> = prepared.settled.iter().map(|(_, o)| o.clone()).collect();
        let mut out = Installed {
            revision: prepared.revision(),
            applied: 0,
            deleted: 0,
            readiness: Readiness::Ready,
            urls: urls(&objects),
        };
        if prepared.must_apply {
            let now = jiff::Timestamp::now().to_string();
            let done = deploy::deploy(&self.applier, target, &prepared, now).await?;
            out.revision = Some(done.revision);
            out.applied = done.applied;
            out.deleted = done.deleted;
            tracing::info!(
                namespace,
                application = name,
                revision = done.revision,
                applied = done.applied,
                deleted = done.deleted,
                "application release deployed"
            );
        }
        out.readiness = deploy::readiness(&self.applier, &prepared.settled).await?;
        Ok(out)
    }

    /// Removes release `name` of `namespace`: every object its revisions hold in the
    /// namespace, then the release records; then the `afterDeleteHelm` hooks of the
    /// installed bundle (`package` in `bundle`, when it is on disk) with the values the release
    /// was last rendered with. Returns how many objects were deleted.
    pub async fn uninstall(
        &self,
        namespace: &str,
        name: &str,
        package: &str,
        bundle: Option<&Path>,
    ) -> Result<usize, Error> {
        let app = AppRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            package: package.to_owned(),
        };
        self.hooks.stop(&app);
        let history = self.applier.history(namespace, name).await?;
        let values = release::last(&history)
            .and_then(|r| r.config.get(module_plan::definition::camel_case(package)))
            .cloned()
            .unwrap_or_else(|| json!({}));
        let deleted = deploy::uninstall(&self.applier, target(namespace, name))
            .await?
            .unwrap_or(0);
        if let Some(dir) = bundle {
            self.hooks.after_delete(&app, dir, values).await?;
        }
        self.hooks.forget(&app).await?;
        tracing::info!(
            namespace,
            application = name,
            deleted,
            "application release uninstalled"
        );
        Ok(deleted)
    }
}

/// An Application's release: named after it, stored in its namespace, confined to it.
fn target<'a>(namespace: &'a str, name: &'a str) -> deploy::Target<'a> {
    deploy::Target {
        name,
        storage: namespace,
        namespace,
        confined: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_components() {
        assert!(component("v1.0.0").is_ok());
        for bad in ["", ".", "..", "a/b", "a\\b"] {
            assert!(component(bad).is_err(), "{bad:?}");
        }
    }
}
