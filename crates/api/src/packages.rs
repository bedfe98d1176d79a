//! The package system: `Application`, `ApplicationPackage`, `ApplicationPackageVersion`,
//! `PackageRepository` and `PackageRepositoryOperation`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::ModuleCondition;
use crate::macros::string_enum;

/// Which package to install in a namespace, and with which settings.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "Application",
    shortname = "app",
    namespaced,
    status = "ApplicationStatus",
    doc = "An application package installed into a namespace.",
    printcolumn(name = "Package", type_ = "string", json_path = ".spec.packageName"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.packageVersion"),
    printcolumn(
        name = "Repository",
        type_ = "string",
        json_path = ".spec.packageRepositoryName",
        priority = 1
    ),
    printcolumn(name = "State", type_ = "string", json_path = ".status.summary.state"),
    printcolumn(
        name = "Installed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Installed')].status",
        priority = 1
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status",
        priority = 1
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.summary.message"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSpec {
    /// Name of the package to install.
    pub package_name: String,
    /// Version of the package to install.
    pub package_version: String,
    /// PackageRepository holding the package; the default repository when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_repository_name: Option<String>,
    /// Release channel of the package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_channel: Option<String>,
    /// Settings of the application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub settings: Option<serde_json::Value>,
    /// Maintenance mode. `NoResourceReconciliation`: the templates are applied once more with the
    /// label `maintenance.deckhouse.io/no-resource-reconciliation` on every resource, then the
    /// application is not reconciled (a new version, settings or a deleted resource are not
    /// applied or restored) and the `ApplicationIsInMaintenanceMode` alert fires; remove it to
    /// reconcile again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "application_maintenance_schema")]
    pub maintenance: Option<crate::module_config::Maintenance>,
}

fn application_maintenance_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Maintenance mode. `NoResourceReconciliation`: the templates are applied once more with the label `maintenance.deckhouse.io/no-resource-reconciliation` on every resource, then the application is not reconciled (a new version, settings or a deleted resource are not applied or restored) and the `ApplicationIsInMaintenanceMode` alert fires; remove it to reconcile again.",
        "type": "string",
        "enum": ["NoResourceReconciliation"],
    })
}

/// Observed state of an Application.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationStatus {
    /// Conditions (`Installed`, `Ready`, …), keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::standard_condition_map")]
    pub conditions: Vec<Condition>,
    /// The installed version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<CurrentVersion>,
    /// Effective settings (user settings merged with defaults) of the last successful apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub last_applied_configuration: Option<serde_json::Value>,
    /// One user-facing state, message and hint; clients should not re-derive it from the
    /// conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Resource tracking of the release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub tracking: Option<serde_json::Value>,
    /// Endpoints of the application, from its chart's Ingresses annotated
    /// `packages.deckhouse.io/is-application-endpoint`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<ApplicationUrl>,
}

/// The installed version of an Application.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CurrentVersion {
    /// Channel the version came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Installed version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// User-facing summary of an Application.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    /// What is happening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// One of `Pending`, `Failed`, `Updating`, `Ready`, `Degraded`, `Suspended`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// How to resolve the state; empty when nothing is needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tip: Option<String>,
}

string_enum! {
    /// `status.summary.state` of an Application.
    pub enum ApplicationState {
        /// Not installed yet.
        Pending = "Pending",
        /// Failed.
        Failed = "Failed",
        /// Being updated.
        Updating = "Updating",
        /// Running.
        Ready = "Ready",
        /// Running with problems.
        Degraded = "Degraded",
        /// Suspended.
        Suspended = "Suspended",
    }
}

/// An endpoint of an Application.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplicationUrl {
    /// The URL.
    pub url: String,
    /// The annotation's value; empty when it is `"true"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// An application package known to the cluster (status only).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "ApplicationPackage",
    no_spec,
    status = "ApplicationPackageStatus",
    doc = "An application package available in the cluster and its installed instances."
)]
pub struct ApplicationPackageFields {}

/// Observed state of an ApplicationPackage.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationPackageStatus {
    /// PackageRepositories offering the package.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub available_repositories: Vec<String>,
    /// Installed instances, per version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub instances: BTreeMap<String, Vec<PackageInstance>>,
    /// Number of installed instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances_overall: Option<i64>,
}

/// One installed instance of a package.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PackageInstance {
    /// Instance name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One version of an application package, named `<repo>-<package>-<version>`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "ApplicationPackageVersion",
    shortname = "apv",
    status = "ApplicationPackageVersionStatus",
    doc = "A version of an application package. Without loaded metadata it is a draft and is never deployed.",
    printcolumn(name = "Package", type_ = "string", json_path = ".spec.packageName"),
    // Deckhouse's column reads `.spec.packageRepository` (not the `packageRepositoryName`
    // field), so it shows an empty cell; kept as Deckhouse ships it.
    printcolumn(
        name = "Repository",
        type_ = "string",
        json_path = ".spec.packageRepository"
    ),
    printcolumn(
        name = "TransitionTime",
        type_ = "date",
        json_path = ".status.conditions[?(@.type=='MetadataLoaded')].lastTransitionTime"
    ),
    printcolumn(
        name = "MetadataLoaded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='MetadataLoaded')].status"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='MetadataLoaded')].message"
    ),
    printcolumn(name = "UsedBy", type_ = "integer", json_path = ".status.usedByCount")
)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct ApplicationPackageVersionSpec {
    /// Package name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_name: Option<String>,
    /// Repository holding the package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_repository_name: Option<String>,
    /// Package version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_version: Option<String>,
}

crate::macros::spec_may_be_absent!(ApplicationPackageVersionSpec);

impl ApplicationPackageVersion {
    /// The conventional name `<repo>-<package>-<version>`.
    pub fn name_for(repository: &str, package: &str, version: &str) -> String {
        format!("{repository}-{package}-{version}")
    }
}

/// Observed state of an ApplicationPackageVersion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationPackageVersionStatus {
    /// Conditions (`MetadataLoaded`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ModuleCondition>,
    /// Metadata read from the package image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_metadata: Option<PackageMetadata>,
    /// Package name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_name: Option<String>,
    /// Repository holding the package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_repository_name: Option<String>,
    /// Package version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_version: Option<String>,
    /// Applications using this version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub used_by: Vec<UsedBy>,
    /// Number of applications using this version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_by_count: Option<i64>,
}

/// An application using a package version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UsedBy {
    /// Application name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Application namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Metadata of a package version.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageMetadata {
    /// Category of the package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Changes in this version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changelog: Option<PackageChangelog>,
    /// Localized descriptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<crate::module::LocalizedText>,
    /// Licensing per edition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub licensing: Option<Licensing>,
    /// What the package requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<crate::module_release::ModuleReleaseRequirements>,
    /// Development stage (alpha, beta, stable…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Upgrade and downgrade rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_compatibility_rules: Option<VersionCompatibilityRules>,
}

/// Changes in a package version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PackageChangelog {
    /// New features.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// Bug fixes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<String>,
}

/// Licensing of a package.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Licensing {
    /// Per edition.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub editions: BTreeMap<String, EditionLicense>,
}

/// Licensing in one edition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EditionLicense {
    /// Whether the edition may use the package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<bool>,
}

/// Upgrade and downgrade rules of a package version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VersionCompatibilityRules {
    /// Rules for upgrading to this version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<CompatibilityRule>,
    /// Rules for downgrading from this version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downgrade: Option<CompatibilityRule>,
}

/// One compatibility rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompatibilityRule {
    /// Start of the version range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// End of the version range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// How many patch versions may be skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_skip_patches: Option<i64>,
    /// How many minor versions may be skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_skip_minor: Option<i64>,
    /// How many major versions may be skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_skip_major: Option<i64>,
    /// How many versions may be rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rollback: Option<i64>,
}

/// A registry of packages.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "PackageRepository",
    status = "PackageRepositoryStatus",
    doc = "A container registry Deckhouse scans for packages.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Sync", type_ = "date", json_path = ".status.syncTime"),
    printcolumn(
        name = "MSG",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='LastOperationScanFinished')].message"
    ),
    printcolumn(
        name = "Packages",
        type_ = "integer",
        json_path = ".status.packagesCount",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PackageRepositorySpec {
    /// The registry.
    pub registry: PackageRegistry,
    /// How often to scan for new packages (default `6h`, at least `3m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(\d+h)?(\d+m)?(\d+s)?$"))]
    pub scan_interval: Option<String>,
}

/// Where and how to reach a package registry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageRegistry {
    /// Repository path in the registry.
    pub repo: String,
    /// Base64 Docker `config.json` with the credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_cfg: Option<String>,
    /// PEM certificate authority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Scheme used to reach the registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
}

/// Observed state of a PackageRepository.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageRepositoryStatus {
    /// Conditions (`LastOperationScanFinished`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::standard_condition_list")]
    pub conditions: Vec<Condition>,
    /// Human-readable state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Packages in the repository.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<RepositoryPackage>,
    /// Number of packages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages_count: Option<i64>,
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// When the repository was last scanned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_time: Option<Time>,
    /// Whether the registry paginates tag lists, so that partial scans are possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_scan_available: Option<bool>,
}

/// A package in a repository.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RepositoryPackage {
    /// Package name.
    pub name: String,
    /// Package type.
    #[serde(rename = "type")]
    pub type_: String,
}

/// A scan of a package repository.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "PackageRepositoryOperation",
    shortname = "pro",
    status = "PackageRepositoryOperationStatus",
    doc = "One scan of a PackageRepository, named `<repo>-scan-<unix time>` when created by the repository controller.",
    printcolumn(
        name = "Count",
        type_ = "integer",
        json_path = ".status.packages.total"
    ),
    printcolumn(
        name = "Completed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Completed')].status"
    ),
    printcolumn(
        name = "MSG",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Completed')].message"
    ),
    printcolumn(
        name = "CompletionTime",
        type_ = "date",
        json_path = ".status.completionTime"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PackageRepositoryOperationSpec {
    /// The repository to scan.
    pub package_repository_name: String,
    /// Operation type (`Update`).
    #[serde(rename = "type")]
    pub type_: String,
    /// Settings of an `Update` operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<UpdateOperation>,
}

/// Settings of an `Update` operation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateOperation {
    /// Scan every package, not only new tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_scan: Option<bool>,
    /// Time limit of the operation (a Go duration, default `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// Operation type of a PackageRepositoryOperation.
pub const OPERATION_UPDATE: &str = "Update";

/// Observed state of a PackageRepositoryOperation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageRepositoryOperationStatus {
    /// When the operation started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the operation completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Conditions (`Completed`), keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::standard_condition_map")]
    pub conditions: Vec<Condition>,
    /// Packages seen by the operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<OperationPackages>,
}

/// Packages seen by an operation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationPackages {
    /// Packages discovered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discovered: Vec<DiscoveredPackage>,
    /// Packages that failed, with their per-version errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedPackage>,
    /// Packages processed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processed: Vec<ProcessedPackage>,
    /// Number of newly found versions over all packages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_versions_overall: Option<i64>,
    /// Number of packages processed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processed_overall: Option<i64>,
    /// Number of packages found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
}

/// A discovered package.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiscoveredPackage {
    /// Package name.
    pub name: String,
}

/// A package that failed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FailedPackage {
    /// Package name.
    pub name: String,
    /// Errors per version.
    pub errors: Vec<VersionError>,
}

/// An error for one package version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VersionError {
    /// The version.
    pub version: String,
    /// The error.
    pub message: String,
}

/// A processed package.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessedPackage {
    /// Package name.
    pub name: String,
    /// Package type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Versions found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_versions: Option<i64>,
    /// Versions new to the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_versions: Option<i64>,
}
