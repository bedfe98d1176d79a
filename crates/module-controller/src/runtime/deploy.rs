//! Deploy: one Helm release installed, upgraded and removed the way addon-operator's Helm
//! client does it — for a module (release named after the module, stored in `d8-system`) and
//! for an Application of a package (release named after the Application, stored in its own
//! namespace) alike. [`prepare`] renders and settles the objects and decides whether anything
//! is to be applied; [`deploy`] records the pending revision, applies what changed, deletes
//! what left the chart and marks the revision deployed; [`readiness`] follows the workloads;
//! [`uninstall`] removes what the release holds and its records.

use std::collections::BTreeMap;

use serde_json::Value;

use super::apply::Applier;
use super::converge::{self, ObjectKey};
use super::readiness::{self, Readiness};
use super::release::{self, Release, Status};
use super::render::{self, ChartFiles};
use crate::Error;

/// Which release, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    /// The release's name.
    pub name: &'a str,
    /// The namespace holding the release's records (Helm's `--namespace` for the storage).
    pub storage: &'a str,
    /// The release's namespace: namespaced objects that name none go there.
    pub namespace: &'a str,
    /// Only objects in `namespace` are ever touched (an Application's release): anything else
    /// a stored revision names is left alone.
    pub confined: bool,
}

/// What is to be installed as a release.
#[derive(Clone, Debug)]
pub struct Install<'a> {
    /// Which release.
    pub target: Target<'a>,
    /// The chart's name (the module or the package).
    pub chart_name: &'a str,
    /// The chart's files.
    pub chart: ChartFiles,
    /// The values, as Helm reads them.
    pub values: Value,
    /// Root objects besides Helm's (an Application's `$.Application` and `$.Platform`); not
    /// recorded in the release, which keeps the values.
    pub root: render::RootObjects,
    /// Labels put on every object besides Helm's.
    pub labels: Vec<(String, String)>,
    /// Labels of the release record besides the checksum.
    pub release_labels: BTreeMap<String, String>,
    /// Apply even when the manifest is unchanged and every object exists.
    pub force: bool,
}

/// A release rendered and settled, with the decision whether to apply it.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The release's revisions so far.
    pub history: Vec<Release>,
    /// The objects, settled (kind resolved, namespace filled), in install order.
    pub settled: Vec<(ObjectKey, Value)>,
    /// Something is to be applied: the manifest changed, an object is missing, or forced.
    pub must_apply: bool,
    manifest: String,
    checksum: String,
    chart: (String, String),
    values: Value,
    release_labels: BTreeMap<String, String>,
}

impl Prepared {
    /// The revision deployed now (`None`: never installed).
    pub fn revision(&self) -> Option<i64> {
        release::last(&self.history).map(|r| r.version)
    }
}

/// What a deploy did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deployed {
    /// The revision now deployed.
    pub revision: i64,
    /// Objects applied.
    pub applied: usize,
    /// Objects deleted because they left the chart.
    pub deleted: usize,
}

fn label_refs(labels: &[(String, String)]) -> Vec<(&str, &str)> {
    labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// Renders `install` and settles its objects; `history` is the release's revisions as
/// [`Applier::history`] reads them from the release's storage.
pub async fn prepare(
    applier: &Applier,
    install: Install<'_>,
    history: Vec<Release>,
) -> Result<Prepared, Error> {
    let Install {
        target,
        chart_name,
        chart,
        values,
        root,
        labels,
        release_labels,
        force,
    } = install;
    let chart_version = chart_version(&chart);
    let rendered = render::render(target.name, chart, &values, root, target.namespace).await?;
    let mut objects = rendered.objects;
    render::decorate(
        &mut objects,
        target.name,
        target.namespace,
        &label_refs(&labels),
    );
    let mut settled = Vec::with_capacity(objects.len());
    for mut object in objects {
        let key = applier.settle(&mut object, target.namespace).await?;
        settled.push((key, object));
    }
    let checksum = converge::checksum(&rendered.manifest);
    let mut must_apply = force || converge::needs_apply(release::last(&history), &checksum, false);
    if !must_apply {
        for (key, _) in &settled {
            if applier.get(key).await?.is_none() {
                must_apply = true;
                break;
            }
        }
    }
    Ok(Prepared {
        history,
        settled,
        must_apply,
        manifest: rendered.manifest,
        checksum,
        chart: (chart_name.to_owned(), chart_version),
        values,
        release_labels,
    })
}

/// Deploys a prepared release as the next revision at `now`: the pending record first (an
/// install cut short is taken over by the next one), the changed and missing objects applied,
/// what the revisions since the last deployed one held and this one does not deleted, the
/// earlier revisions superseded (or failed, when they were left pending), old ones pruned.
pub async fn deploy(
    applier: &Applier,
    target: Target<'_>,
    prepared: &Prepared,
    now: String,
) -> Result<Deployed, Error> {
    let history = &prepared.history;
    let last = release::last(history);
    let revision = last.map_or(1, |r| r.version + 1);
    let mut labels = prepared.release_labels.clone();
    labels.insert(
        release::LABEL_MODULE_CHECKSUM.to_owned(),
        prepared.checksum.clone(),
    );
    let mut record = Release {
        name: target.name.to_owned(),
        namespace: target.namespace.to_owned(),
        version: revision,
        status: if last.is_some() {
            Status::PendingUpgrade
        } else {
            Status::PendingInstall
        },
        manifest: prepared.manifest.clone(),
        config: prepared.values.clone(),
        chart: prepared.chart.clone(),
        first_deployed: history
            .first()
            .map(|r| r.first_deployed.clone())
            .unwrap_or_else(|| now.clone()),
        last_deployed: now,
        description: "Preparing upgrade".into(),
        labels,
    };
    applier.store(target.storage, &record).await?;
    let (applied, deleted) = match apply_release(applier, target, prepared).await {
        Ok(counts) => counts,
        Err(e) => {
            record.status = Status::Failed;
            record.description = format!("Upgrade \"{}\" failed: {e}", target.name);
            applier.store(target.storage, &record).await?;
            return Err(e);
        }
    };
    for old in history {
        let mut old = old.clone();
        match old.status {
            Status::Deployed => old.status = Status::Superseded,
            Status::PendingInstall | Status::PendingUpgrade => {
                old.status = Status::Failed;
                old.description = "Interrupted: taken over by the next revision".into();
            }
            _ => continue,
        }
        applier.store(target.storage, &old).await?;
    }
    record.status = Status::Deployed;
    record.description = if revision == 1 {
        "Install complete".into()
    } else {
        "Upgrade complete".into()
    };
    applier.store(target.storage, &record).await?;
    let mut all = history.clone();
    all.push(record);
    for version in release::to_prune(&all) {
        applier.forget(target.storage, target.name, version).await?;
    }
    Ok(Deployed {
        revision,
        applied,
        deleted,
    })
}

/// Applies what changed since the deployed revision (or is missing), then deletes what the
/// revisions since the last deployed one held and this one does not.
async fn apply_release(
    applier: &Applier,
    target: Target<'_>,
    prepared: &Prepared,
) -> Result<(usize, usize), Error> {
    let previous = deployed_objects(applier, target, prepared).await;
    let settled = &prepared.settled;
    let mut applied = 0;
    for ((key, object), changed) in settled.iter().zip(converge::to_apply(&previous, settled)) {
        if changed || applier.get(key).await?.is_none() {
            applier.apply(key, object).await?;
            applied += 1;
        }
    }
    let released = released_objects(applier, target, &prepared.history).await;
    let current: Vec<ObjectKey> = settled.iter().map(|(k, _)| k.clone()).collect();
    let mut deleted = 0;
    for key in converge::removed(&released, &current) {
        if applier.delete(&key).await? {
            tracing::info!(release = target.name, object = %key, "resource left the chart: deleted");
            deleted += 1;
        }
    }
    Ok((applied, deleted))
}

/// The objects of the last deployed revision, decorated as they were applied — with the
/// maintenance label when that revision was applied in maintenance — and settled as the current
/// ones are (empty when none is deployed). Entering or leaving maintenance thus changes every
/// object, and every object is applied again.
async fn deployed_objects(
    applier: &Applier,
    target: Target<'_>,
    prepared: &Prepared,
) -> Vec<(ObjectKey, Value)> {
    let Some(deployed) = prepared
        .history
        .iter()
        .filter(|r| r.status == Status::Deployed)
        .max_by_key(|r| r.version)
    else {
        return Vec::new();
    };
    let Ok(mut objects) = render::parse_manifest(&deployed.manifest) else {
        return Vec::new();
    };
    let (labels, _) = release::maintenance_labels(release::applied_in_maintenance(deployed));
    render::decorate(
        &mut objects,
        target.name,
        target.namespace,
        &label_refs(&labels),
    );
    let mut out = Vec::new();
    for mut object in objects {
        if let Ok(key) = applier.settle(&mut object, target.namespace).await {
            out.push((key, object));
        }
    }
    out
}

/// Whether a confined release may touch the object `key`.
pub fn in_scope(target: Target<'_>, key: &ObjectKey) -> bool {
    !target.confined || key.namespace.as_deref() == Some(target.namespace)
}

/// The objects of the last deployed revision and of every later one (pending, failed), with
/// their `keep` policy.
async fn released_objects(
    applier: &Applier,
    target: Target<'_>,
    history: &[Release],
) -> Vec<(ObjectKey, bool)> {
    let from = history
        .iter()
        .filter(|r| r.status == Status::Deployed)
        .map(|r| r.version)
        .max()
        .unwrap_or(0);
    let mut out = Vec::new();
    for r in history.iter().filter(|r| r.version >= from) {
        let Ok(objects) = render::parse_manifest(&r.manifest) else {
            tracing::warn!(
                release = target.name,
                revision = r.version,
                "stored manifest unreadable"
            );
            continue;
        };
        let ns = if r.namespace.is_empty() {
            target.namespace
        } else {
            &r.namespace
        };
        for mut object in objects {
            let keep = converge::kept(&object);
            match applier.settle(&mut object, ns).await {
                Ok(key) if in_scope(target, &key) => out.push((key, keep)),
                Ok(key) => tracing::warn!(
                    release = target.name,
                    object = %key,
                    "stored object outside the release's namespace: left alone"
                ),
                Err(e) => {
                    tracing::warn!(release = target.name, error = %e, "stored object skipped")
                }
            }
        }
    }
    out
}

/// The workloads' readiness among `settled`.
pub async fn readiness(
    applier: &Applier,
    settled: &[(ObjectKey, Value)],
) -> Result<Readiness, Error> {
    let mut states = Vec::new();
    for (key, _) in settled
        .iter()
        .filter(|(k, _)| readiness::is_workload(&k.kind))
    {
        match applier.get(key).await? {
            Some(object) => states.push(readiness::of(
                &serde_json::to_value(object).unwrap_or_default(),
            )),
            None => states.push(Readiness::Waiting(format!("{key}: not found"))),
        }
    }
    Ok(readiness::module(&states))
}

/// Removes the release: every object it holds (but those kept by `helm.sh/resource-policy`),
/// then its records. `None` when there is no such release; otherwise how many objects were
/// deleted.
pub async fn uninstall(applier: &Applier, target: Target<'_>) -> Result<Option<usize>, Error> {
    let history = applier.history(target.storage, target.name).await?;
    if history.is_empty() {
        return Ok(None);
    }
    let objects = released_objects(applier, target, &history).await;
    let mut deleted = 0;
    for key in converge::removed(&objects, &[]) {
        if applier.delete(&key).await? {
            deleted += 1;
        }
    }
    for r in &history {
        applier
            .forget(target.storage, target.name, r.version)
            .await?;
    }
    Ok(Some(deleted))
}

/// `version` of the chart's `Chart.yaml` (addon-operator's generated one: 0.2.0).
pub fn chart_version(files: &[(String, Vec<u8>)]) -> String {
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

    fn key(namespace: Option<&str>) -> ObjectKey {
        ObjectKey {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: namespace.map(str::to_owned),
            name: "x".into(),
        }
    }

    #[test]
    fn scope_of_confined_and_free_releases() {
        let confined = Target {
            name: "app",
            storage: "a",
            namespace: "a",
            confined: true,
        };
        let free = Target {
            confined: false,
            ..confined
        };
        let cases = [
            (confined, Some("a"), true),
            (confined, Some("b"), false),
            (confined, None, false),
            (free, Some("b"), true),
            (free, None, true),
        ];
        for (target, ns, want) in cases {
            assert_eq!(in_scope(target, &key(ns)), want, "{target:?} {ns:?}");
        }
    }

    #[test]
    fn chart_versions() {
        let chart = |text: &str| vec![("Chart.yaml".to_owned(), text.as_bytes().to_vec())];
        assert_eq!(chart_version(&chart("name: a\nversion: 1.2.3\n")), "1.2.3");
        assert_eq!(chart_version(&chart("name: a\nversion: 2\n")), "2");
        assert_eq!(chart_version(&[]), render::GENERATED_CHART_VERSION);
    }
}
