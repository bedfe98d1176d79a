//! The package controller's loop: while `d8 controller` holds the platform's Lease, every pass
//! schedules the repositories' automatic scans, runs every unfinished PackageRepositoryOperation
//! to its end (one status write per step) and loads the metadata of draft
//! ApplicationPackageVersions, then reconciles every Application. A pass runs on every change to those kinds (debounced) and when
//! the next scan is due.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use api::packages::{
    Application, ApplicationPackage, ApplicationPackageVersion, PackageRepository,
    PackageRepositoryOperation, PackageRepositoryOperationSpec, UpdateOperation,
};
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::Error;
use crate::applications::Applications;
use crate::bookkeeping;
use crate::operation;
use crate::registry::PackageImages;
use crate::repository::{self, Operations, Schedule};
use crate::scan::{LABEL_OPERATION_TYPE, LABEL_REPOSITORY, LABEL_TRIGGER, Scanner, owner};
use crate::versions;

/// Steps one operation may take in a pass (a bound, not a limit users meet: one per package).
const MAX_STEPS: usize = 10_000;

/// Timings and directories of the controller.
#[derive(Clone, Debug)]
pub struct Options {
    /// After a failed pass or a version whose metadata could not be loaded.
    pub retry: Duration,
    /// How long changes are collected before the pass they trigger.
    pub debounce: Duration,
    /// Where Applications' package bundles are downloaded (one directory per version).
    pub packages_dir: std::path::PathBuf,
    /// The running Deckhouse version, for versions' `requirements.deckhouse` (not checked
    /// when unknown, as for modules).
    pub deckhouse_version: Option<semver::Version>,
    /// The platform's global values, an Application's chart's `$.Platform` (none without).
    pub global_values: Option<crate::runtime::GlobalValues>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            retry: Duration::from_secs(30),
            debounce: Duration::from_millis(200),
            packages_dir: std::env::temp_dir().join("d8-packages"),
            deckhouse_version: None,
            global_values: None,
        }
    }
}

/// The package controller.
#[derive(Clone)]
pub struct Controller {
    client: Client,
    scanner: Scanner,
    registries: registry_client::Client,
    applications: std::sync::Arc<Applications>,
    options: Options,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller on `client`.
    pub fn new(client: Client, options: Options) -> Self {
        let registries = registry_client::Client::new(registry_client::Config::default());
        Self {
            scanner: Scanner::new(client.clone(), registries.clone()),
            applications: std::sync::Arc::new(
                Applications::new(
                    client.clone(),
                    registries.clone(),
                    options.packages_dir.clone(),
                )
                .with_deckhouse_version(options.deckhouse_version.clone())
                .with_global_values(options.global_values.clone()),
            ),
            client,
            registries,
            options,
        }
    }

    /// The metric families of the Applications (`deckhouse_application_maintenance`).
    pub fn metrics(&self) -> crate::metrics::Metrics {
        self.applications.metrics()
    }

    /// Runs passes until `stopped` resolves.
    pub async fn run(&self, stopped: impl std::future::Future<Output = ()>) {
        tokio::pin!(stopped);
        let ops = watcher(
            Api::<PackageRepositoryOperation>::all(self.client.clone()),
            Default::default(),
        )
        .map(|e| e.is_ok());
        let repos = watcher(
            Api::<PackageRepository>::all(self.client.clone()),
            Default::default(),
        )
        .map(|e| e.is_ok());
        let apvs = watcher(
            Api::<ApplicationPackageVersion>::all(self.client.clone()),
            Default::default(),
        )
        .map(|e| e.is_ok());
        let apps = watcher(
            Api::<Application>::all(self.client.clone()),
            Default::default(),
        )
        .map(|e| e.is_ok());
        let events = futures_util::stream::select(
            futures_util::stream::select(ops, apps),
            futures_util::stream::select(repos, apvs),
        );
        tokio::pin!(events);
        let wake = self.applications.wake();
        loop {
            let wait = match self.pass().await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(error = %e, "package controller pass failed");
                    self.options.retry
                }
            };
            let sleep = tokio::time::sleep(wait);
            tokio::pin!(sleep);
            tokio::select! {
                _ = &mut stopped => return,
                _ = &mut sleep => {}
                _ = wake.notified() => {}
                event = events.next() => match event {
                    None => return,
                    Some(ok) => {
                        // Our own writes come back as events: the debounce folds them.
                        let pause = if ok { self.options.debounce } else { Duration::from_secs(1) };
                        tokio::time::sleep(pause).await;
                    }
                },
            }
        }
    }

    /// One pass; returns when the next one is due.
    pub async fn pass(&self) -> Result<Duration, Error> {
        let mut next = self.schedule_scans().await?;
        let ops: Api<PackageRepositoryOperation> = Api::all(self.client.clone());
        let list = ops
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list PackageRepositoryOperations", e))?;
        for op in list.items {
            let name = op.name_any();
            let mut current = op;
            for _ in 0..MAX_STEPS {
                if !self.scanner.step(&current).await? {
                    break;
                }
                current = ops
                    .get(&name)
                    .await
                    .map_err(|e| Error::kube("get PackageRepositoryOperation", e))?;
            }
        }
        self.keep_books().await?;
        let apvs: Api<ApplicationPackageVersion> = Api::all(self.client.clone());
        let list = apvs
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list ApplicationPackageVersions", e))?;
        for apv in list.items.iter().filter(|a| versions::needs_metadata(a)) {
            if let Err(e) = versions::load(&self.client, &self.registries, apv).await {
                tracing::warn!(version = %apv.name_any(), error = %e, "metadata not loaded");
                next = next.min(self.options.retry);
            }
        }
        if self.applications.pass().await? {
            next = next.min(self.options.retry);
        }
        Ok(next)
    }

    /// Deckhouse's bookkeeping ([`bookkeeping`]): registry spec checksums (and the
    /// Applications told of a change), the 10 newest operations of each repository kept, gone
    /// repositories removed from the packages' `availableRepositories`.
    async fn keep_books(&self) -> Result<(), Error> {
        let repos = Api::<PackageRepository>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list PackageRepositories", e))?
            .items;
        let live: BTreeSet<String> = repos
            .iter()
            .filter(|r| r.metadata.deletion_timestamp.is_none())
            .map(|r| r.name_any())
            .collect();
        for repo in repos.iter().filter(|r| live.contains(&r.name_any())) {
            self.registry_checksum(repo).await?;
        }
        let ops: Api<PackageRepositoryOperation> = Api::all(self.client.clone());
        let all = ops
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list PackageRepositoryOperations", e))?
            .items;
        let mut by_repo: BTreeMap<&str, Vec<(String, Option<Time>)>> = BTreeMap::new();
        let mut completed: BTreeSet<&str> = BTreeSet::new();
        for op in &all {
            let repo = op.spec.package_repository_name.as_str();
            by_repo
                .entry(repo)
                .or_default()
                .push((op.name_any(), op.metadata.creation_timestamp.clone()));
            if operation::next_step(&op.status.clone().unwrap_or_default()) == operation::Step::Done
            {
                completed.insert(repo);
            }
        }
        for (repo, list) in by_repo.iter().filter(|(r, _)| completed.contains(*r)) {
            for name in bookkeeping::operations_to_delete(list) {
                match ops.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {
                        tracing::info!(repository = %repo, operation = %name, "old operation deleted")
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(Error::kube("delete PackageRepositoryOperation", e)),
                }
            }
        }
        let packages: Api<ApplicationPackage> = Api::all(self.client.clone());
        let list = packages
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list ApplicationPackages", e))?;
        for p in list.items {
            let available = p.status.clone().unwrap_or_default().available_repositories;
            let kept = bookkeeping::available_repositories(&available, |r| live.contains(r));
            if kept == available {
                continue;
            }
            packages
                .patch_status(
                    &p.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"availableRepositories": kept}})),
                )
                .await
                .map_err(|e| Error::kube("update ApplicationPackage status", e))?;
            tracing::info!(package = %p.name_any(), repositories = ?kept, "gone repository removed from the package");
        }
        Ok(())
    }

    /// Records in `status.partialScanAvailable` whether the repository's registry pages tag
    /// lists (a registry that cannot be reached is left for the scan to report).
    async fn probe_pagination(&self, repo: &PackageRepository) -> Result<(), Error> {
        let name = repo.name_any();
        let pages = match PackageImages::new(&self.registries, &repo.spec.registry) {
            Ok(images) => images.pages_tags().await,
            Err(e) => Err(e),
        };
        let pages = match pages {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(repository = %name, error = %e, "pagination support not checked");
                return Ok(());
            }
        };
        let known = repo
            .status
            .as_ref()
            .and_then(|s| s.partial_scan_available)
            .unwrap_or(false);
        if pages == known {
            return Ok(());
        }
        Api::<PackageRepository>::all(self.client.clone())
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"partialScanAvailable": pages}})),
            )
            .await
            .map_err(|e| Error::kube("update PackageRepository partialScanAvailable", e))?;
        Ok(())
    }

    /// Records the repository's registry spec checksum; when it changed, annotates its
    /// Applications `registry-spec-changed` first.
    async fn registry_checksum(&self, repo: &PackageRepository) -> Result<(), Error> {
        let name = repo.name_any();
        let sum = match bookkeeping::checksum(repo.annotations(), &repo.spec.registry) {
            bookkeeping::Checksum::Same => return Ok(()),
            bookkeeping::Checksum::Record(sum) => sum,
            bookkeeping::Checksum::Changed(sum) => {
                let apps = Api::<Application>::all(self.client.clone())
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| Error::kube("list Applications", e))?;
                let now = jiff::Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%SZ")
                    .to_string();
                for app in apps
                    .items
                    .iter()
                    .filter(|a| crate::application::repository(a) == name)
                {
                    let api: Api<Application> =
                        Api::namespaced(self.client.clone(), &app.namespace().unwrap_or_default());
                    let patch = json!({"metadata": {"annotations": {bookkeeping::ANNOTATION_SPEC_CHANGED: now}}});
                    if let Err(e) = api
                        .patch(
                            &app.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(patch),
                        )
                        .await
                    {
                        tracing::warn!(application = %app.name_any(), error = %e, "registry-spec-changed not set");
                        continue;
                    }
                    tracing::info!(repository = %name, application = %app.name_any(), "registry settings changed: application reconciled");
                }
                sum
            }
        };
        let patch = json!({"metadata": {"annotations": {bookkeeping::ANNOTATION_CHECKSUM: sum}}});
        Api::<PackageRepository>::all(self.client.clone())
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| Error::kube("record the registry spec checksum", e))?;
        Ok(())
    }

    /// Creates the automatic operations that are due; returns when the next one is.
    async fn schedule_scans(&self) -> Result<Duration, Error> {
        let repos: Api<PackageRepository> = Api::all(self.client.clone());
        let ops: Api<PackageRepositoryOperation> = Api::all(self.client.clone());
        let repos = repos
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list PackageRepositories", e))?;
        let all_ops = ops
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list PackageRepositoryOperations", e))?;
        let now = jiff::Timestamp::now();
        let mut next = repository::DEFAULT_INTERVAL;
        for repo in repos.items {
            if repo.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = repo.name_any();
            let mine: Vec<&PackageRepositoryOperation> = all_ops
                .items
                .iter()
                .filter(|o| o.spec.package_repository_name == name)
                .collect();
            let newest = mine
                .iter()
                .filter_map(|o| o.metadata.creation_timestamp.as_ref().map(|t| t.0))
                .max();
            let state = Operations {
                succeeded: mine.iter().any(|o| {
                    o.status.as_ref().is_some_and(|s| {
                        s.conditions
                            .iter()
                            .any(|c| c.type_ == operation::COMPLETED && c.status == "True")
                    })
                }),
                unfinished: mine.iter().any(|o| {
                    operation::next_step(&o.status.clone().unwrap_or_default())
                        != operation::Step::Done
                }),
                newest_age: newest
                    .map(|t| Duration::from_secs(now.duration_since(t).as_secs().max(0) as u64)),
            };
            let interval = repository::interval(repo.spec.scan_interval.as_deref());
            match repository::schedule(interval, state) {
                Schedule::Wait(d) => next = next.min(d),
                Schedule::Create { full_scan } => {
                    self.probe_pagination(&repo).await?;
                    let op = PackageRepositoryOperation {
                        metadata: ObjectMeta {
                            name: Some(repository::operation_name(&name, now.as_second())),
                            labels: Some(
                                [
                                    (LABEL_REPOSITORY.to_owned(), name.clone()),
                                    (LABEL_TRIGGER.to_owned(), "auto".to_owned()),
                                    (
                                        LABEL_OPERATION_TYPE.to_owned(),
                                        api::packages::OPERATION_UPDATE.to_owned(),
                                    ),
                                ]
                                .into(),
                            ),
                            owner_references: Some(vec![owner(&repo)]),
                            ..Default::default()
                        },
                        spec: PackageRepositoryOperationSpec {
                            package_repository_name: name.clone(),
                            type_: api::packages::OPERATION_UPDATE.into(),
                            update: Some(UpdateOperation {
                                full_scan: Some(full_scan),
                                timeout: Some("5m".into()),
                            }),
                        },
                        status: None,
                    };
                    match ops.create(&PostParams::default(), &op).await {
                        Ok(_) => tracing::info!(repository = %name, "scan scheduled"),
                        Err(kube::Error::Api(e)) if e.code == 409 => {}
                        Err(e) => return Err(Error::kube("create PackageRepositoryOperation", e)),
                    }
                    next = next.min(interval);
                }
            }
        }
        Ok(next)
    }
}
