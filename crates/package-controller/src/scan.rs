//! Running a PackageRepositoryOperation against the registry and the API: the I/O around
//! [`crate::operation`]'s steps. Each call of [`Scanner::step`] takes one step and writes the
//! operation's status.

use std::collections::BTreeMap;

use api::packages::{
    ApplicationPackage, ApplicationPackageStatus, ApplicationPackageVersion,
    ApplicationPackageVersionSpec, PackageRepository, PackageRepositoryOperation,
    PackageRepositoryOperationStatus, RepositoryPackage, VersionError,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use crate::Error;
use crate::incremental;
use crate::metadata::{MetadataError, PackageType, package_type};
use crate::operation::{self, PackageOutcome, Step};
use crate::registry::PackageImages;

/// Label: the PackageRepository an object belongs to.
pub const LABEL_REPOSITORY: &str = "packages.deckhouse.io/repository";
/// Label: the package an ApplicationPackageVersion is a version of.
pub const LABEL_PACKAGE: &str = "packages.deckhouse.io/package";
/// Label: an ApplicationPackageVersion whose metadata is not loaded yet.
pub const LABEL_DRAFT: &str = "packages.deckhouse.io/draft";
/// Label: what started an operation (`auto` or `manual`).
pub const LABEL_TRIGGER: &str = "packages.deckhouse.io/operation-trigger";
/// Label: the operation's type.
pub const LABEL_OPERATION_TYPE: &str = "packages.deckhouse.io/operation-type";
/// PackageRepository condition: the last operation's outcome.
pub const LAST_OPERATION_SCAN_FINISHED: &str = "LastOperationScanFinished";
/// PackageRepository phase once scanned.
pub const PHASE_ACTIVE: &str = "Active";

pub(crate) fn now() -> Time {
    Time(jiff::Timestamp::now())
}

pub(crate) fn owner(repo: &PackageRepository) -> OwnerReference {
    OwnerReference {
        api_version: PackageRepository::api_version(&()).into_owned(),
        kind: PackageRepository::kind(&()).into_owned(),
        name: repo.name_any(),
        uid: repo.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// Runs operations.
#[derive(Clone)]
pub struct Scanner {
    client: Client,
    registries: registry_client::Client,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner").finish_non_exhaustive()
    }
}

impl Scanner {
    /// A scanner reading registries with `registries`.
    pub fn new(client: Client, registries: registry_client::Client) -> Self {
        Self { client, registries }
    }

    /// Takes the operation's next step; `Ok(true)` while steps remain.
    pub async fn step(&self, op: &PackageRepositoryOperation) -> Result<bool, Error> {
        let name = op.name_any();
        self.ensure_labels(op).await?;
        let status = op.status.clone().unwrap_or_default();
        let step = operation::next_step(&status);
        tracing::debug!(operation = %name, ?step, "PackageRepositoryOperation step");
        let repo_name = &op.spec.package_repository_name;
        let new_status = match step {
            Step::Done => return Ok(false),
            Step::Start => operation::started(status, &now()),
            Step::Discover => match self.images(repo_name).await {
                Err((reason, message)) => {
                    self.repository_condition(repo_name, false, reason, &message)
                        .await?;
                    operation::failed(status, reason, &message, &now())
                }
                Ok((_, images)) => match images.packages().await {
                    Ok(packages) => operation::discovered(status, &packages, &now()),
                    Err(e) => {
                        let message = format!("Failed to list packages: {e}");
                        let reason = operation::REASON_LISTING_FAILED;
                        self.repository_condition(repo_name, false, reason, &message)
                            .await?;
                        operation::failed(status, reason, &message, &now())
                    }
                },
            },
            Step::Process(package) => match self.images(repo_name).await {
                Err((reason, message)) => {
                    self.repository_condition(repo_name, false, reason, &message)
                        .await?;
                    operation::failed(status, reason, &message, &now())
                }
                Ok((repo, images)) => {
                    let full_scan = op.spec.update.as_ref().and_then(|u| u.full_scan) == Some(true);
                    let outcome = self
                        .process_package(&repo, &images, &package, full_scan)
                        .await;
                    operation::processed(status, &package, outcome)
                }
            },
            Step::Complete => {
                let packages = status.packages.clone().unwrap_or_default();
                self.finish_repository(repo_name, &packages.processed, packages.total.unwrap_or(0))
                    .await?;
                operation::completed(status, &now())
            }
        };
        self.write_status(&name, &new_status).await?;
        Ok(true)
    }

    async fn ensure_labels(&self, op: &PackageRepositoryOperation) -> Result<(), Error> {
        let labels = op.labels();
        let mut patch = BTreeMap::new();
        if !labels.contains_key(LABEL_TRIGGER) {
            patch.insert(LABEL_TRIGGER, "manual".to_owned());
        }
        if labels.get(LABEL_OPERATION_TYPE) != Some(&op.spec.type_) {
            patch.insert(LABEL_OPERATION_TYPE, op.spec.type_.clone());
        }
        if !labels.contains_key(LABEL_REPOSITORY) {
            patch.insert(LABEL_REPOSITORY, op.spec.package_repository_name.clone());
        }
        // An operation created by hand is owned by its repository too (deleted with it).
        let kind = PackageRepository::kind(&());
        let mut owners = None;
        let refs = op.metadata.owner_references.clone().unwrap_or_default();
        if !refs.iter().any(|r| r.kind == kind) {
            let repos: Api<PackageRepository> = Api::all(self.client.clone());
            if let Some(repo) = repos
                .get_opt(&op.spec.package_repository_name)
                .await
                .map_err(|e| Error::kube("get PackageRepository", e))?
            {
                let mut refs = refs;
                refs.push(owner(&repo));
                owners = Some(refs);
            }
        }
        if patch.is_empty() && owners.is_none() {
            return Ok(());
        }
        let mut meta = json!({"labels": patch});
        if let Some(owners) = owners {
            meta["ownerReferences"] = json!(owners);
        }
        let api: Api<PackageRepositoryOperation> = Api::all(self.client.clone());
        api.patch(
            &op.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": meta})),
        )
        .await
        .map_err(|e| Error::kube("label PackageRepositoryOperation", e))?;
        Ok(())
    }

    /// The repository and its registry, or the reason and message the operation fails with.
    async fn images(
        &self,
        repo_name: &str,
    ) -> Result<(PackageRepository, PackageImages), (&'static str, String)> {
        let repos: Api<PackageRepository> = Api::all(self.client.clone());
        let repo = match repos.get_opt(repo_name).await {
            Ok(Some(repo)) => repo,
            Ok(None) => {
                return Err((
                    operation::REASON_REPOSITORY_NOT_FOUND,
                    format!(
                        "PackageRepository not found: packagerepositories.deckhouse.io \"{repo_name}\" not found"
                    ),
                ));
            }
            Err(e) => {
                return Err((
                    operation::REASON_REPOSITORY_NOT_FOUND,
                    format!("Failed to create operation service: {e}"),
                ));
            }
        };
        match PackageImages::new(&self.registries, &repo.spec.registry) {
            Ok(images) => Ok((repo, images)),
            Err(e) => Err((
                operation::REASON_CLIENT_FAILED,
                format!("Failed to create registry client: {e}"),
            )),
        }
    }

    /// Lists the package's versions (all of them for a full scan, else those newer than the
    /// newest loaded: [`incremental`]), decides its type from the newest version image, and makes
    /// sure every version has its ApplicationPackageVersion and the package its
    /// ApplicationPackage.
    async fn process_package(
        &self,
        repo: &PackageRepository,
        images: &PackageImages,
        package: &str,
        full_scan: bool,
    ) -> PackageOutcome {
        let whole = |message: String| PackageOutcome {
            errors: vec![VersionError {
                version: String::new(),
                message,
            }],
            ..Default::default()
        };
        let versions = match images.versions(package).await {
            Ok(v) => v,
            Err(e) => return whole(format!("get found tags to process: {e}")),
        };
        let versions = if full_scan {
            versions
        } else {
            let last = self.last_loaded(repo, package).await;
            incremental::to_process(versions, false, last.as_deref())
        };
        let Some(latest) = versions.last() else {
            if full_scan {
                return PackageOutcome::default();
            }
            // Nothing new since the last loaded version: the package's type is stable, the one
            // the repository already shows.
            let type_ = repo.status.as_ref().and_then(|s| {
                s.packages
                    .iter()
                    .find(|p| p.name == package)
                    .map(|p| p.type_.clone())
            });
            return PackageOutcome {
                type_,
                ..Default::default()
            };
        };
        let kind = match images.version_files(package, latest).await {
            Ok(files) => package_type(files.package_yaml.as_deref()),
            Err(e) => return whole(format!("read package definition: {e}")),
        };
        let kind = match kind {
            Ok(k) => k,
            Err(MetadataError::NoPackageYaml) => {
                return whole(MetadataError::NoPackageYaml.to_string());
            }
            Err(e) => {
                return PackageOutcome {
                    errors: vec![VersionError {
                        version: latest.clone(),
                        message: e.to_string(),
                    }],
                    ..Default::default()
                };
            }
        };
        let mut outcome = PackageOutcome {
            type_: Some(kind.as_str().to_owned()),
            found_versions: versions.len() as i64,
            ..Default::default()
        };
        if kind == PackageType::Module {
            // Module packages are the module manager's (ModuleSource); nothing to create here.
            return outcome;
        }
        for version in &versions {
            match self.ensure_version(repo, package, version).await {
                Ok(true) => outcome.new_versions += 1,
                Ok(false) => {}
                Err(e) => outcome.errors.push(VersionError {
                    version: version.clone(),
                    message: format!("ensure package version: {e}"),
                }),
            }
        }
        if let Err(e) = self.ensure_package(repo, package).await {
            tracing::warn!(package, error = %e, "ApplicationPackage not ensured");
            outcome.errors.push(VersionError {
                version: String::new(),
                message: format!("ensure application package: {e}"),
            });
        }
        outcome
    }

    /// The newest version of the package already loaded from this repository (its
    /// ApplicationPackageVersion has `status.packageMetadata`); `None` when there is none or
    /// they cannot be listed (the scan then takes every version).
    async fn last_loaded(&self, repo: &PackageRepository, package: &str) -> Option<String> {
        let api: Api<ApplicationPackageVersion> = Api::all(self.client.clone());
        let selector = format!(
            "{LABEL_REPOSITORY}={},{LABEL_PACKAGE}={package}",
            repo.name_any()
        );
        let list = match api.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => list.items,
            Err(e) => {
                tracing::warn!(package, error = %e, "ApplicationPackageVersions not listed, scanning every version");
                return None;
            }
        };
        incremental::last_loaded(list.iter().filter_map(|v| {
            let loaded = v
                .status
                .as_ref()
                .is_some_and(|s| s.package_metadata.is_some());
            v.spec.package_version.as_deref().map(|t| (t, loaded))
        }))
    }

    /// Creates the draft ApplicationPackageVersion; `Ok(true)` when it is new.
    async fn ensure_version(
        &self,
        repo: &PackageRepository,
        package: &str,
        version: &str,
    ) -> Result<bool, Error> {
        let api: Api<ApplicationPackageVersion> = Api::all(self.client.clone());
        let name = ApplicationPackageVersion::name_for(&repo.name_any(), package, version);
        if api
            .get_opt(&name)
            .await
            .map_err(|e| Error::kube("get ApplicationPackageVersion", e))?
            .is_some()
        {
            return Ok(false);
        }
        let apv = ApplicationPackageVersion {
            metadata: ObjectMeta {
                name: Some(name),
                labels: Some(BTreeMap::from([
                    ("heritage".into(), "deckhouse".into()),
                    (LABEL_REPOSITORY.into(), repo.name_any()),
                    (LABEL_PACKAGE.into(), package.into()),
                    (LABEL_DRAFT.into(), "true".into()),
                ])),
                owner_references: Some(vec![owner(repo)]),
                ..Default::default()
            },
            spec: ApplicationPackageVersionSpec {
                package_name: Some(package.into()),
                package_repository_name: Some(repo.name_any()),
                package_version: Some(version.into()),
            },
            status: None,
        };
        match api.create(&PostParams::default(), &apv).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(Error::kube("create ApplicationPackageVersion", e)),
        }
    }

    /// Creates the ApplicationPackage and lists the repository among its available ones.
    async fn ensure_package(&self, repo: &PackageRepository, package: &str) -> Result<(), Error> {
        let api: Api<ApplicationPackage> = Api::all(self.client.clone());
        let existing = api
            .get_opt(package)
            .await
            .map_err(|e| Error::kube("get ApplicationPackage", e))?;
        let existing = match existing {
            Some(p) => p,
            None => {
                let mut p = ApplicationPackage::new(package, Default::default());
                p.metadata.labels = Some(BTreeMap::from([("heritage".into(), "deckhouse".into())]));
                p.metadata.owner_references = Some(vec![owner(repo)]);
                match api.create(&PostParams::default(), &p).await {
                    Ok(p) => p,
                    Err(kube::Error::Api(e)) if e.code == 409 => api
                        .get(package)
                        .await
                        .map_err(|e| Error::kube("get ApplicationPackage", e))?,
                    Err(e) => return Err(Error::kube("create ApplicationPackage", e)),
                }
            }
        };
        let mut status: ApplicationPackageStatus = existing.status.unwrap_or_default();
        let repo_name = repo.name_any();
        if status.available_repositories.contains(&repo_name) {
            return Ok(());
        }
        status.available_repositories.push(repo_name);
        api.patch_status(
            package,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"availableRepositories": status.available_repositories}}),
            ),
        )
        .await
        .map_err(|e| Error::kube("update ApplicationPackage status", e))?;
        Ok(())
    }

    async fn write_status(
        &self,
        name: &str,
        status: &PackageRepositoryOperationStatus,
    ) -> Result<(), Error> {
        let api: Api<PackageRepositoryOperation> = Api::all(self.client.clone());
        let mut value = serde_json::to_value(status).unwrap_or_default();
        // A merge patch keeps a list it does not name: emptied lists are written as `[]`.
        if let Some(packages) = value.get_mut("packages").and_then(|p| p.as_object_mut()) {
            for list in ["discovered", "failed", "processed"] {
                packages.entry(list).or_insert_with(|| json!([]));
            }
        }
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": value })),
        )
        .await
        .map_err(|e| Error::kube("update PackageRepositoryOperation status", e))?;
        Ok(())
    }

    async fn repository_condition(
        &self,
        repo_name: &str,
        ok: bool,
        reason: &str,
        message: &str,
    ) -> Result<(), Error> {
        let repos: Api<PackageRepository> = Api::all(self.client.clone());
        let Some(repo) = repos
            .get_opt(repo_name)
            .await
            .map_err(|e| Error::kube("get PackageRepository", e))?
        else {
            return Ok(());
        };
        let mut conditions = repo.status.unwrap_or_default().conditions;
        operation::set_condition(
            &mut conditions,
            LAST_OPERATION_SCAN_FINISHED,
            ok,
            if reason.is_empty() {
                operation::REASON_READY
            } else {
                reason
            },
            message,
            &now(),
        );
        repos
            .patch_status(
                repo_name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": conditions}})),
            )
            .await
            .map_err(|e| Error::kube("update PackageRepository status", e))?;
        Ok(())
    }

    /// The repository's packages, count, phase and sync time after a completed operation.
    async fn finish_repository(
        &self,
        repo_name: &str,
        processed: &[api::packages::ProcessedPackage],
        total: i64,
    ) -> Result<(), Error> {
        let packages: Vec<RepositoryPackage> = processed
            .iter()
            .filter_map(|p| {
                p.type_.as_ref().map(|t| RepositoryPackage {
                    name: p.name.clone(),
                    type_: t.clone(),
                })
            })
            .collect();
        let repos: Api<PackageRepository> = Api::all(self.client.clone());
        if repos
            .get_opt(repo_name)
            .await
            .map_err(|e| Error::kube("get PackageRepository", e))?
            .is_none()
        {
            return Ok(());
        }
        repos
            .patch_status(
                repo_name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "packages": packages,
                    "packagesCount": packages.len(),
                    "phase": PHASE_ACTIVE,
                    "syncTime": now(),
                }})),
            )
            .await
            .map_err(|e| Error::kube("update PackageRepository status", e))?;
        self.repository_condition(
            repo_name,
            true,
            "",
            &operation::scan_finished_message(total),
        )
        .await
    }
}
