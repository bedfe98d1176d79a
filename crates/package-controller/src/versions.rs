//! Loading an ApplicationPackageVersion's metadata from its version image: the draft a scan
//! created becomes a complete version (`MetadataLoaded=True`, the `draft` label removed), or
//! says why it could not (`MetadataLoaded=False` with Deckhouse's reasons). A draft is never
//! installed.

use api::conditions::ModuleCondition;
use api::packages::{ApplicationPackageVersion, PackageRepository};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::Error;
use crate::metadata::package_metadata;
use crate::registry::PackageImages;
use crate::scan::{LABEL_DRAFT, now};

/// Condition of an ApplicationPackageVersion.
pub const METADATA_LOADED: &str = "MetadataLoaded";
/// Reason: the version image could not be read.
pub const REASON_FETCH: &str = "FetchingReleaseError";
/// Reason: the PackageRepository could not be read.
pub const REASON_GET_REPOSITORY: &str = "GetPackageRepositoryError";
/// Reason: the registry settings cannot be used.
pub const REASON_REGISTRY_CLIENT: &str = "GetRegistryClientError";
/// Reason: the version image could not be fetched.
pub const REASON_GET_IMAGE: &str = "GetImageError";

/// Whether the version still needs its metadata.
pub fn needs_metadata(apv: &ApplicationPackageVersion) -> bool {
    if apv.labels().contains_key(LABEL_DRAFT) {
        return true;
    }
    !apv.status.as_ref().is_some_and(|s| {
        s.package_metadata.is_some()
            && s.conditions
                .iter()
                .any(|c| c.type_ == METADATA_LOADED && c.status == "True")
    })
}

/// Whether the version may be installed (its metadata is loaded).
pub fn is_draft(apv: &ApplicationPackageVersion) -> bool {
    needs_metadata(apv)
}

/// The condition list with `MetadataLoaded` set.
pub fn with_condition(
    mut conditions: Vec<ModuleCondition>,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
) -> Vec<ModuleCondition> {
    let time = now();
    let status = if ok { "True" } else { "False" };
    match conditions.iter_mut().find(|c| c.type_ == METADATA_LOADED) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = Some(time.clone());
            }
            c.status = status.into();
            c.last_probe_time = Some(time);
            c.reason = reason.map(String::from);
            c.message = message;
        }
        None => conditions.push(ModuleCondition {
            type_: METADATA_LOADED.into(),
            status: status.into(),
            reason: reason.map(String::from),
            message,
            last_probe_time: Some(time.clone()),
            last_transition_time: Some(time),
        }),
    }
    conditions
}

/// Loads one version's metadata and writes its status; `Err` when it should be retried.
pub async fn load(
    client: &Client,
    registries: &registry_client::Client,
    apv: &ApplicationPackageVersion,
) -> Result<(), Error> {
    let name = apv.name_any();
    let api: Api<ApplicationPackageVersion> = Api::all(client.clone());
    let repo_name = apv.spec.package_repository_name.clone().unwrap_or_default();
    let package = apv.spec.package_name.clone().unwrap_or_default();
    let version = apv.spec.package_version.clone().unwrap_or_default();
    let conditions = apv.status.clone().unwrap_or_default().conditions;
    let fail = |reason: &'static str, message: String| {
        let conditions = with_condition(conditions.clone(), false, Some(reason), Some(message));
        let api = api.clone();
        let name = name.clone();
        async move {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": conditions}})),
            )
            .await
            .map_err(|e| Error::kube("update ApplicationPackageVersion status", e))
        }
    };
    let repos: Api<PackageRepository> = Api::all(client.clone());
    let repo = match repos.get(&repo_name).await {
        Ok(r) => r,
        Err(e) => {
            fail(
                REASON_GET_REPOSITORY,
                format!("failed to get packageRepository {repo_name}: {e}"),
            )
            .await?;
            return Err(Error::kube("get PackageRepository", e));
        }
    };
    let images = match PackageImages::new(registries, &repo.spec.registry) {
        Ok(i) => i,
        Err(e) => {
            fail(
                REASON_REGISTRY_CLIENT,
                format!("failed to get registry client: {e}"),
            )
            .await?;
            return Err(e);
        }
    };
    let files = match images.version_files(&package, &version).await {
        Ok(f) => f,
        Err(e) => {
            fail(REASON_GET_IMAGE, format!("failed to get image: {e}")).await?;
            return Err(e);
        }
    };
    let metadata = match package_metadata(files.package_yaml.as_deref(), files.changelog.as_deref())
    {
        Ok(m) => m,
        Err(e) => {
            fail(
                REASON_FETCH,
                format!("failed to fetch package metadata: {e}"),
            )
            .await?;
            return Err(e.into());
        }
    };
    let conditions = with_condition(conditions, true, None, None);
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "conditions": conditions,
            "packageMetadata": metadata,
            "packageName": package,
            "packageRepositoryName": repo_name,
            "packageVersion": version,
        }})),
    )
    .await
    .map_err(|e| Error::kube("update ApplicationPackageVersion status", e))?;
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {LABEL_DRAFT: null}}})),
    )
    .await
    .map_err(|e| Error::kube("remove the draft label", e))?;
    tracing::info!(version = %name, "ApplicationPackageVersion metadata loaded");
    Ok(())
}
