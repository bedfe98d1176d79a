//! What the Application controller decides, without I/O: whether an Application may be
//! installed at the version it asks for (its package and version exist and are not drafts, its
//! settings fit the version's schema, the cluster meets the requirements, the move from the
//! installed version obeys `versionCompatibilityRules`), the objects its chart may hold (only
//! namespaced ones in its own namespace), its `urls`, and the status Deckhouse writes:
//! conditions `Processed`, `Installed`, `Ready` and the `summary`.

use api::module_release::ModuleReleaseRequirements;
use api::packages::{
    Application, ApplicationPackageVersion, ApplicationState, ApplicationUrl, Summary, UsedBy,
};
use kube::ResourceExt;
use serde_json::Value;

use crate::compat::{self, Move};

/// The finalizer Deckhouse's Application controller sets.
pub const FINALIZER: &str = "application.deckhouse.io/statistic-registered";

/// The maintenance mode `spec.maintenance` puts the Application in (`NoResourceReconciliation`:
/// applied once more with the maintenance label, then not reconciled, and
/// `deckhouse_application_maintenance` reports it), if any.
pub fn maintenance(app: &Application) -> Option<&'static str> {
    app.spec.maintenance.map(|m| m.as_str())
}
/// The repository of an Application that names none.
pub const DEFAULT_REPOSITORY: &str = "deckhouse";
/// Annotation on a chart's Ingress that makes it one of the Application's `urls`.
pub const ENDPOINT_ANNOTATION: &str = "packages.deckhouse.io/is-application-endpoint";

/// Condition: the Application's package and version were found and accepted.
pub const PROCESSED: &str = "Processed";
/// Condition: the requested version is installed.
pub const INSTALLED: &str = "Installed";
/// Condition: the installed workloads are ready.
pub const READY: &str = "Ready";

/// Reason: no ApplicationPackage of that name.
pub const REASON_PACKAGE_NOT_FOUND: &str = "ApplicationPackageNotFound";
/// Reason: no ApplicationPackageVersion `<repo>-<package>-<version>`.
pub const REASON_VERSION_NOT_FOUND: &str = "VersionNotFound";
/// Reason: the version's metadata is not loaded.
pub const REASON_VERSION_IS_DRAFT: &str = "VersionIsDraft";
/// Reason: `spec.settings` do not fit the version's `openapi/settings.yaml`.
pub const REASON_SETTINGS_INVALID: &str = "SettingsInvalid";
/// Reason: the cluster does not meet the version's requirements.
pub const REASON_REQUIREMENTS: &str = "RequirementsNotMet";
/// Reason: `versionCompatibilityRules` forbid the move from the installed version.
pub const REASON_VERSION_CHANGE_REFUSED: &str = "VersionChangeRefused";
/// Reason: downloading, rendering or applying failed.
pub const REASON_INSTALL_FAILED: &str = "InstallFailed";
/// Reason: the release channel the Application follows cannot be read.
pub const REASON_CHANNEL: &str = "ReleaseChannelUnavailable";
/// Reason: all is well.
pub const REASON_RECONCILED: &str = "Reconciled";
/// Reason: workloads are not ready yet.
pub const REASON_NOT_READY: &str = "NotReady";
/// Reason: a package hook failed between passes (the module runtime's `HookError`).
pub const REASON_HOOK_ERROR: &str = "HookError";

/// The repository an Application installs from.
pub fn repository(app: &Application) -> String {
    app.spec
        .package_repository_name
        .clone()
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| DEFAULT_REPOSITORY.to_owned())
}

/// The ApplicationPackageVersion of `version` of the Application's package.
pub fn version_name(app: &Application, version: &str) -> String {
    ApplicationPackageVersion::name_for(&repository(app), &app.spec.package_name, version)
}

/// Why an Application is not (re)installed; nothing in the cluster changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// The `Processed` condition's reason.
    pub reason: &'static str,
    /// What the user reads.
    pub message: String,
}

impl Blocked {
    pub(crate) fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// What the cluster holds for an Application's package.
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts<'a> {
    /// The ApplicationPackage exists.
    pub package_exists: bool,
    /// The requested version.
    pub target: Option<&'a ApplicationPackageVersion>,
    /// The installed version, when one is.
    pub current: Option<&'a ApplicationPackageVersion>,
    /// Every version of the package in the repository.
    pub available: &'a [String],
    /// The version `spec.releaseChannel` points at, when the Application follows a channel.
    pub channel_version: Option<&'a str>,
}

/// The version an Application asks for: the one its release channel points at when it follows
/// one, else `spec.packageVersion`.
pub fn wanted<'a>(app: &'a Application, channel_version: Option<&'a str>) -> &'a str {
    channel_version.unwrap_or(&app.spec.package_version)
}

/// The registry tag of a release channel (`R/<package>/release-channel:<tag>`), named as
/// Deckhouse names channel tags: `Alpha` → `alpha`, `EarlyAccess` → `early-access`, `RockSolid` →
/// `rock-solid`, `LTS` → `lts` (either spelling accepted). `None` for an empty channel (the
/// Application is pinned to `spec.packageVersion`); an unknown one is refused.
pub fn channel_tag(channel: Option<&str>) -> Result<Option<&'static str>, Blocked> {
    let Some(channel) = channel.map(str::trim).filter(|c| !c.is_empty()) else {
        return Ok(None);
    };
    let folded: String = channel
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    let tag = match folded.as_str() {
        "alpha" => "alpha",
        "beta" => "beta",
        "earlyaccess" => "early-access",
        "stable" => "stable",
        "rocksolid" => "rock-solid",
        "lts" => "lts",
        _ => {
            return Err(Blocked::new(
                REASON_CHANNEL,
                format!(
                    "release channel {channel:?} is unknown: Alpha, Beta, EarlyAccess, Stable, RockSolid or LTS"
                ),
            ));
        }
    };
    Ok(Some(tag))
}

/// The tag among `available` (the package's version tags) that is `version` (a channel's
/// `version.json` says `1.2.0` or `v1.2.0`).
pub fn channel_pick(available: &[String], version: &str) -> Option<String> {
    let want = crate::compat::parse_version(version)?;
    available
        .iter()
        .find(|t| crate::compat::parse_version(t).as_ref() == Some(&want))
        .cloned()
}

/// Whether the Application may move to the version it asks for; `installed` is the version
/// in its status.
pub fn judge(
    app: &Application,
    installed: Option<&str>,
    facts: Facts<'_>,
) -> Result<Move, Blocked> {
    let package = &app.spec.package_name;
    if !facts.package_exists {
        return Err(Blocked::new(
            REASON_PACKAGE_NOT_FOUND,
            format!("ApplicationPackage '{package}' not found"),
        ));
    }
    let wanted = wanted(app, facts.channel_version);
    let name = version_name(app, wanted);
    let Some(target) = facts.target else {
        return Err(Blocked::new(
            REASON_VERSION_NOT_FOUND,
            format!("ApplicationPackageVersion '{name}' not found"),
        ));
    };
    if crate::versions::is_draft(target) {
        return Err(Blocked::new(
            REASON_VERSION_IS_DRAFT,
            format!("ApplicationPackageVersion {name} is draft"),
        ));
    }
    let rules = |v: Option<&ApplicationPackageVersion>| {
        v.and_then(|v| v.status.as_ref())
            .and_then(|s| s.package_metadata.as_ref())
            .and_then(|m| m.version_compatibility_rules.clone())
    };
    compat::check(
        installed,
        wanted,
        rules(facts.current).as_ref(),
        rules(Some(target)).as_ref(),
        facts.available,
    )
    .map_err(|r| Blocked::new(REASON_VERSION_CHANGE_REFUSED, r.message))
}

/// Deckhouse's refusal of settings given to a package that declares no settings schema.
pub const NO_SCHEMA: &str = "config schema is not defined but config values were provided";

/// The settings the chart is rendered with: `settings` with the schema's defaults, or
/// Deckhouse's validation message. A package without a schema takes no settings (empty
/// settings are fine), as Deckhouse's values storage refuses them.
pub fn check_settings(
    package: &str,
    schema: Option<&str>,
    settings: Option<&Value>,
) -> Result<Value, Blocked> {
    let settings = settings.cloned().unwrap_or(Value::Null);
    let invalid = |m: String| Blocked::new(REASON_SETTINGS_INVALID, m);
    let Some(schema) = schema.filter(|s| !s.trim().is_empty()) else {
        return match &settings {
            Value::Null => Ok(Value::Object(Default::default())),
            Value::Object(m) if m.is_empty() => Ok(settings),
            _ => Err(invalid(format!("spec.settings are not valid: {NO_SCHEMA}"))),
        };
    };
    let schema = module_plan::settings::SettingsSchema::from_yaml(schema)
        .map_err(|e| invalid(format!("openapi/settings.yaml: {e}")))?;
    let values = schema.defaulted(&settings);
    schema
        .validate(&module_plan::definition::camel_case(package), &values)
        .map_err(|errors| {
            invalid(format!(
                "spec.settings are not valid: {}",
                module_plan::settings::multierror_one_line(&errors)
            ))
        })?;
    Ok(values)
}

/// The values an Application's chart and hooks start from (under the package's camelCase
/// key), layered as Deckhouse's package values storage layers them — the module runtime's
/// layers ([`module_plan::values::base_layers`]): the bundle's static `values.yaml`, the
/// settings schema's defaults, `settings` (already checked by [`check_settings`]), then the
/// defaults of `openapi/values.yaml`. Unusable values files fail the install.
pub fn package_values(
    package: &str,
    settings_schema: Option<&str>,
    settings: Option<&Value>,
    static_values: Option<&str>,
    values_schema: Option<&str>,
) -> Result<Value, Blocked> {
    use module_plan::config::ModuleSettings;
    use module_plan::values::{ValuesDefinition, base_layers};
    let failed = |e: module_plan::Error| {
        Blocked::new(
            REASON_INSTALL_FAILED,
            format!("the values files of package {package}: {e}"),
        )
    };
    let schema = settings_schema.filter(|s| !s.trim().is_empty());
    let settings_definition = ModuleSettings::from_files(package, schema, &[]).map_err(failed)?;
    let definition =
        ValuesDefinition::new(settings_definition, values_schema, static_values).map_err(failed)?;
    let config_values = match settings {
        Some(v @ Value::Object(_)) => v.clone(),
        _ => Value::Object(Default::default()),
    };
    Ok(base_layers(&definition, &config_values))
}

/// Whether the cluster meets a version's requirements (`kubernetes: ">= 1.29"`,
/// `deckhouse: ">= 1.70"`), read as the module manager reads module requirements (Deckhouse's
/// constraint syntax: `||`, `,`, `~`, `^`, wildcards); a requirement whose version is not known
/// (no `--deckhouse-version`) is not checked.
pub fn check_requirements(
    requirements: Option<&ModuleReleaseRequirements>,
    kubernetes: Option<&semver::Version>,
    deckhouse: Option<&semver::Version>,
) -> Result<(), Blocked> {
    let Some(r) = requirements else {
        return Ok(());
    };
    for (what, want, have) in [
        ("deckhouse", r.deckhouse.as_deref(), deckhouse),
        ("kubernetes", r.kubernetes.as_deref(), kubernetes),
    ] {
        let (Some(want), Some(have)) = (want.filter(|w| !w.trim().is_empty()), have) else {
            continue;
        };
        let constraint = module_plan::constraint::Constraint::parse(want).map_err(|e| {
            Blocked::new(
                REASON_REQUIREMENTS,
                format!("requirements.{what} {want:?} cannot be parsed: {e}"),
            )
        })?;
        let mut bare = have.clone();
        bare.pre = semver::Prerelease::EMPTY;
        bare.build = semver::BuildMetadata::EMPTY;
        if !constraint.matches(&bare) {
            return Err(Blocked::new(
                REASON_REQUIREMENTS,
                format!("requirement {what} {want} is not met: the cluster runs {have}"),
            ));
        }
    }
    Ok(())
}

/// `v1.31.2+k3s1` or `1.31` as a version (missing parts are 0).
pub fn loose_version(text: &str) -> Option<semver::Version> {
    let text = text.trim().trim_start_matches('v');
    let core = text.split(['+', '-']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some(semver::Version::new(major, minor, patch))
}

/// Why a rendered object may not be installed by an Application in `namespace`: it is
/// cluster-wide, or it names another namespace. `keys` are `(kind/name, namespace)` settled.
pub fn out_of_scope(keys: &[(String, Option<String>)], namespace: &str) -> Option<String> {
    keys.iter().find_map(|(what, ns)| match ns {
        None => Some(format!(
            "{what} is cluster-wide: an Application installs only into its namespace {namespace}"
        )),
        Some(ns) if ns != namespace => Some(format!(
            "{what} is in namespace {ns}: an Application installs only into its namespace {namespace}"
        )),
        Some(_) => None,
    })
}

/// The Application's endpoints: its chart's Ingresses annotated [`ENDPOINT_ANNOTATION`],
/// `https://` when the host has TLS, each rule's first path.
pub fn urls(objects: &[Value]) -> Vec<ApplicationUrl> {
    let mut out = Vec::new();
    for o in objects {
        if o.get("kind").and_then(Value::as_str) != Some("Ingress") {
            continue;
        }
        let Some(annotation) = o
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(ENDPOINT_ANNOTATION))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let description =
            (annotation != "true" && !annotation.is_empty()).then(|| annotation.to_owned());
        let tls_hosts: Vec<&str> = o
            .pointer("/spec/tls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.get("hosts").and_then(Value::as_array))
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for rule in o
            .pointer("/spec/rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(host) = rule.get("host").and_then(Value::as_str) else {
                continue;
            };
            let path = rule
                .pointer("/http/paths/0/path")
                .and_then(Value::as_str)
                .unwrap_or("/");
            let scheme = if tls_hosts.contains(&host) {
                "https"
            } else {
                "http"
            };
            out.push(ApplicationUrl {
                url: format!("{scheme}://{host}{path}"),
                description: description.clone(),
            });
        }
    }
    out
}

/// What happened to an Application in a pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not (re)installed; what is installed stays.
    Blocked(Blocked),
    /// Installing failed (download, render, apply).
    Failed(String),
    /// The requested version is installed; `waiting` says why its workloads are not ready.
    Installed {
        /// Why the workloads are not ready (`None`: ready).
        waiting: Option<String>,
        /// A workload failed for good.
        failed: bool,
    },
}

/// A condition as `(type, ok, reason, message)`.
pub type Cond = (&'static str, bool, &'static str, String);

/// The conditions and summary of an Application after `outcome`; `installed` is the version
/// still installed (it keeps running when a change is blocked or fails).
pub fn status(outcome: &Outcome, installed: Option<&str>) -> (Vec<Cond>, Summary) {
    let summary = |state: ApplicationState, message: String, tip: Option<&str>| Summary {
        state: Some(state.to_string()),
        message: (!message.is_empty()).then_some(message),
        tip: tip.map(str::to_owned),
    };
    let running = installed.map_or(String::new(), |v| format!(" ({v} keeps running)"));
    match outcome {
        Outcome::Blocked(b) => {
            let tip = match b.reason {
                REASON_SETTINGS_INVALID => Some("fix spec.settings"),
                REASON_VERSION_CHANGE_REFUSED => Some(
                    "choose a version the package's versionCompatibilityRules allow, or go through an intermediate version",
                ),
                REASON_VERSION_IS_DRAFT | REASON_VERSION_NOT_FOUND | REASON_PACKAGE_NOT_FOUND => {
                    Some(
                        "wait for the repository scan or check spec.packageName and spec.packageVersion",
                    )
                }
                _ => None,
            };
            let state = if installed.is_some() {
                ApplicationState::Degraded
            } else if matches!(
                b.reason,
                REASON_VERSION_IS_DRAFT | REASON_VERSION_NOT_FOUND | REASON_PACKAGE_NOT_FOUND
            ) {
                ApplicationState::Pending
            } else {
                ApplicationState::Failed
            };
            (
                vec![
                    (PROCESSED, false, b.reason, b.message.clone()),
                    (
                        INSTALLED,
                        false,
                        b.reason,
                        format!("not installed: {}", b.message),
                    ),
                ],
                summary(state, format!("{}{running}", b.message), tip),
            )
        }
        Outcome::Failed(message) => (
            vec![
                (PROCESSED, true, REASON_RECONCILED, String::new()),
                (INSTALLED, false, REASON_INSTALL_FAILED, message.clone()),
            ],
            summary(
                if installed.is_some() {
                    ApplicationState::Degraded
                } else {
                    ApplicationState::Failed
                },
                format!("{message}{running}"),
                None,
            ),
        ),
        Outcome::Installed { waiting, failed } => {
            let mut conds = vec![
                (PROCESSED, true, REASON_RECONCILED, String::new()),
                (INSTALLED, true, REASON_RECONCILED, String::new()),
            ];
            let s = match waiting {
                None => {
                    conds.push((READY, true, REASON_RECONCILED, String::new()));
                    summary(ApplicationState::Ready, String::new(), None)
                }
                Some(why) => {
                    conds.push((READY, false, REASON_NOT_READY, why.clone()));
                    let state = if *failed {
                        ApplicationState::Degraded
                    } else {
                        ApplicationState::Updating
                    };
                    summary(state, why.clone(), None)
                }
            };
            (conds, s)
        }
    }
}

/// An installed Application whose hook failed between passes (kubernetes, schedule), as a
/// module with a failing hook shows it: `Ready=False` with reason `HookError` and the hook's
/// error, `summary.state: Degraded` with that error. What runs keeps running.
pub fn with_hook_error(conds: &mut Vec<Cond>, summary: &mut Summary, error: &str) {
    conds.retain(|c| c.0 != READY);
    conds.push((READY, false, REASON_HOOK_ERROR, error.to_owned()));
    summary.state = Some(ApplicationState::Degraded.to_string());
    summary.message = Some(error.to_owned());
    summary.tip = None;
}

/// `usedBy` with the Application in it (once).
pub fn with_user(used_by: &[UsedBy], app: &Application) -> Vec<UsedBy> {
    let me = user(app);
    let mut out: Vec<UsedBy> = used_by.iter().filter(|u| **u != me).cloned().collect();
    out.push(me);
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// `usedBy` without the Application.
pub fn without_user(used_by: &[UsedBy], app: &Application) -> Vec<UsedBy> {
    let me = user(app);
    used_by.iter().filter(|u| **u != me).cloned().collect()
}

fn user(app: &Application) -> UsedBy {
    UsedBy {
        name: Some(app.name_any()),
        namespace: app.namespace(),
    }
}

#[cfg(test)]
mod tests;
