//! Installing an Application with the module runtime's parts: the package bundle downloaded
//! once per version (verified digests, safe unpacking), its chart rendered by `helm-render`
//! with the Application's settings, the objects applied server-side under Helm's field manager
//! and recorded as a Helm release named after the Application and stored in its namespace —
//! so two Applications in two namespaces are two releases that never touch each other's
//! objects. An upgrade deletes what left the chart; an uninstall deletes everything the
//! release's revisions hold, and nothing else.

use std::path::{Path, PathBuf};

use module_controller::runtime::apply::Applier;
use module_controller::runtime::converge::{self, ObjectKey};
use module_controller::runtime::readiness::{self, Readiness};
use module_controller::runtime::release::{self, Release, Status};
use module_controller::runtime::render;
use module_controller::unpack::Limits;
use serde_json::{Value, json};

use crate::Error;
use crate::application::{out_of_scope, urls};
use crate::registry::PackageImages;

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
            applier: Applier::new(client),
            cache,
        }
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

    /// Renders the chart in `dir` with `settings` as release `name` in `namespace` and applies
    /// it; a chart holding anything outside the namespace is refused before anything changes.
    pub async fn install(
        &self,
        namespace: &str,
        name: &str,
        package: &str,
        dir: &Path,
        settings: &Value,
    ) -> Result<Installed, Error> {
        let Some(chart) = render::read_chart(package, dir)? else {
            return Ok(Installed {
                revision: None,
                applied: 0,
                deleted: 0,
                readiness: Readiness::Ready,
                urls: Vec::new(),
            });
        };
        let chart_version = chart_version(&chart);
        let values = json!({
            "global": {},
            module_plan::definition::camel_case(package): settings,
        });
        let rendered = render::render(name, chart, &values, namespace).await?;
        let mut objects = rendered.objects;
        render::decorate(&mut objects, name, namespace, &[]);
        let mut settled = Vec::with_capacity(objects.len());
        for mut object in objects {
            let key = self.applier.settle(&mut object, namespace).await?;
            settled.push((key, object));
        }
        let scope: Vec<(String, Option<String>)> = settled
            .iter()
            .map(|(k, _)| (format!("{}/{}", k.kind, k.name), k.namespace.clone()))
            .collect();
        if let Some(why) = out_of_scope(&scope, namespace) {
            return Err(Error::Install(why));
        }
        let found_urls = urls(
            &settled
                .iter()
                .map(|(_, o)| o.clone())
                .collect::<Vec<Value>>(),
        );
        let history = self.applier.history(namespace, name).await?;
        let last = release::last(&history);
        let checksum = converge::checksum(&rendered.manifest);
        let mut must_apply = converge::needs_apply(last, &checksum, false);
        if !must_apply {
            for (key, _) in &settled {
                if self.applier.get(key).await?.is_none() {
                    must_apply = true;
                    break;
                }
            }
        }
        let mut out = Installed {
            revision: last.map(|r| r.version),
            applied: 0,
            deleted: 0,
            readiness: Readiness::Ready,
            urls: found_urls,
        };
        if must_apply {
            let now = jiff::Timestamp::now().to_string();
            let revision = last.map_or(1, |r| r.version + 1);
            let mut record = Release {
                name: name.to_owned(),
                namespace: namespace.to_owned(),
                version: revision,
                status: if last.is_some() {
                    Status::PendingUpgrade
                } else {
                    Status::PendingInstall
                },
                manifest: rendered.manifest.clone(),
                config: values.clone(),
                chart: (package.to_owned(), chart_version),
                first_deployed: history
                    .first()
                    .map(|r| r.first_deployed.clone())
                    .unwrap_or_else(|| now.clone()),
                last_deployed: now,
                description: "Preparing upgrade".into(),
                labels: [(release::LABEL_MODULE_CHECKSUM.to_owned(), checksum)].into(),
            };
            // The pending record first: an install cut short is taken over by the next one.
            self.applier.store(namespace, &record).await?;
            let result = self.apply(namespace, &history, &settled).await;
            let (applied, deleted) = match result {
                Ok(counts) => counts,
                Err(e) => {
                    record.status = Status::Failed;
                    record.description = format!("Upgrade \"{name}\" failed: {e}");
                    self.applier.store(namespace, &record).await?;
                    return Err(e);
                }
            };
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
                self.applier.store(namespace, &old).await?;
            }
            record.status = Status::Deployed;
            record.description = if revision == 1 {
                "Install complete".into()
            } else {
                "Upgrade complete".into()
            };
            self.applier.store(namespace, &record).await?;
            let mut all = history.clone();
            all.push(record);
            for version in release::to_prune(&all) {
                self.applier.forget(namespace, name, version).await?;
            }
            out.revision = Some(revision);
            out.applied = applied;
            out.deleted = deleted;
            tracing::info!(
                namespace,
                application = name,
                revision,
                applied,
                deleted,
                "application release deployed"
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
        out.readiness = readiness::module(&states);
        Ok(out)
    }

    /// Applies every object, then deletes what the release's revisions since the last
    /// deployed one held and this one does not.
    async fn apply(
        &self,
        namespace: &str,
        history: &[Release],
        settled: &[(ObjectKey, Value)],
    ) -> Result<(usize, usize), Error> {
        let mut applied = 0;
        for (key, object) in settled {
            self.applier.apply(key, object).await?;
            applied += 1;
        }
        let released = self.released(namespace, history, false).await;
        let current: Vec<ObjectKey> = settled.iter().map(|(k, _)| k.clone()).collect();
        let mut deleted = 0;
        for key in converge::removed(&released, &current) {
            if self.applier.delete(&key).await? {
                deleted += 1;
            }
        }
        Ok((applied, deleted))
    }

    /// The objects the revisions hold (`all`: every revision; otherwise from the last deployed
    /// one on), with their `keep` policy.
    async fn released(
        &self,
        namespace: &str,
        history: &[Release],
        all: bool,
    ) -> Vec<(ObjectKey, bool)> {
        let from = if all {
            0
        } else {
            history
                .iter()
                .filter(|r| r.status == Status::Deployed)
                .map(|r| r.version)
                .max()
                .unwrap_or(0)
        };
        let mut out = Vec::new();
        for r in history.iter().filter(|r| r.version >= from) {
            let Ok(objects) = render::parse_manifest(&r.manifest) else {
                continue;
            };
            for mut object in objects {
                let keep = converge::kept(&object);
                if let Ok(key) = self.applier.settle(&mut object, namespace).await {
                    // Only what the Application may own: its namespace.
                    if key.namespace.as_deref() == Some(namespace) {
                        out.push((key, keep));
                    }
                }
            }
        }
        out
    }

    /// Removes release `name` of `namespace`: every object its revisions hold, then the
    /// release records. Returns how many objects were deleted.
    pub async fn uninstall(&self, namespace: &str, name: &str) -> Result<usize, Error> {
        let history = self.applier.history(namespace, name).await?;
        let objects = self.released(namespace, &history, true).await;
        let mut deleted = 0;
        for key in converge::removed(&objects, &[]) {
            if self.applier.delete(&key).await? {
                deleted += 1;
            }
        }
        for r in &history {
            self.applier.forget(namespace, name, r.version).await?;
        }
        tracing::info!(
            namespace,
            application = name,
            deleted,
            "application release uninstalled"
        );
        Ok(deleted)
    }
}

/// `version` of the chart's `Chart.yaml`.
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
