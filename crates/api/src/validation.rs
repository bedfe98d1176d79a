//! The rules Deckhouse enforces on writes — CEL rules in its CRDs (`x-kubernetes-validations`),
//! its ValidatingAdmissionPolicies and its validating webhooks — as pure functions with
//! Deckhouse's own messages.
//!
//! The embedded API server calls [`validate`] (or [`validate_request`] when it knows the user
//! and has cluster facts) on every write, after structural validation and defaulting; the
//! admission webhook calls the same functions. A rule that needs facts about the cluster
//! (whether a module is experimental, which update policies exist…) reads them from
//! [`Context`]; facts the caller does not supply are treated as unknown and those rules are
//! skipped, never guessed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

mod deckhouse_release;
mod module_config;
mod object_keeper;
mod policies;
mod registry;
mod update_windows;

pub use deckhouse_release::approval_denial_message;
pub use registry::registry_settings_errors;

/// Advisory messages for an admitted request (Kubernetes `Warning` headers).
pub type Warnings = Vec<String>;

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A new object.
    Create,
    /// A change to an existing object (including its status).
    Update,
    /// Deleting an object.
    Delete,
}

/// Who makes a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name, e.g. `system:serviceaccount:d8-system:deckhouse`.
    pub username: String,
    /// Groups the user belongs to.
    pub groups: Vec<String>,
}

/// A write to check.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// `kind` of the object, e.g. `ModuleConfig`.
    pub kind: &'a str,
    /// What the request does.
    pub operation: Operation,
    /// The requester, when known; rules about users are skipped without one.
    pub user: Option<&'a UserInfo>,
    /// The stored object (UPDATE and DELETE).
    pub old: Option<&'a Value>,
    /// The object as it would be stored (CREATE and UPDATE).
    pub new: Option<&'a Value>,
}

/// Who refused a request, which decides how the API server words and codes the refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeniedBy {
    /// A CEL rule or a pattern of the CRD schema: `422 Invalid`.
    Schema,
    /// A ValidatingAdmissionPolicy and its binding: `403 Forbidden`.
    Policy {
        /// Policy name, e.g. `mup-update-windows.deckhouse.io`.
        policy: &'static str,
        /// Binding name.
        binding: &'static str,
    },
    /// A validating webhook: `403 Forbidden`.
    Webhook {
        /// Webhook name as registered in the ValidatingWebhookConfiguration.
        name: &'static str,
    },
}

/// One reason a request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// Field path the reason is about (`spec`, `spec.update.windows[0].from`); empty for
    /// policy and webhook refusals.
    pub field: String,
    /// The offending value as Kubernetes quotes it (`"object"` for CEL rules on an object).
    pub value: Option<String>,
    /// Deckhouse's message.
    pub message: String,
}

/// A refused request: who refused it and why (at least one cause).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// Who refused it.
    pub by: DeniedBy,
    /// Why.
    pub causes: Vec<Cause>,
}

impl Denial {
    pub(crate) fn schema_all(causes: Vec<Cause>) -> Self {
        Self {
            by: DeniedBy::Schema,
            causes,
        }
    }

    pub(crate) fn policy(
        policy: &'static str,
        binding: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            by: DeniedBy::Policy { policy, binding },
            causes: vec![Cause::plain(message)],
        }
    }

    pub(crate) fn webhook(name: &'static str, message: impl Into<String>) -> Self {
        Self {
            by: DeniedBy::Webhook { name },
            causes: vec![Cause::plain(message)],
        }
    }

    /// Deckhouse's message (several causes joined with `; `), without the API server's framing.
    pub fn message(&self) -> String {
        self.causes
            .iter()
            .map(|c| c.message.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// HTTP status of the refusal.
    pub fn code(&self) -> u16 {
        match self.by {
            DeniedBy::Schema => 422,
            DeniedBy::Policy { .. } | DeniedBy::Webhook { .. } => 403,
        }
    }

    /// `reason` of the Kubernetes `Status`.
    pub fn reason(&self) -> &'static str {
        match self.by {
            DeniedBy::Schema => "Invalid",
            DeniedBy::Policy { .. } | DeniedBy::Webhook { .. } => "Forbidden",
        }
    }

    /// The `Status` message kube-apiserver would return, e.g.
    /// `ObjectKeeper.deckhouse.io "k" is invalid: spec: Invalid value: "object": ttl is required …`.
    /// `kind` and `plural` are the object's kind and resource, `group` its API group.
    pub fn status_message(&self, kind: &str, plural: &str, group: &str, name: &str) -> String {
        let qualify = |s: &str| {
            if group.is_empty() {
                s.to_string()
            } else {
                format!("{s}.{group}")
            }
        };
        match &self.by {
            DeniedBy::Schema => {
                let parts: Vec<String> = self.causes.iter().map(Cause::render).collect();
                let body = if parts.len() == 1 {
                    parts[0].clone()
                } else {
                    format!("[{}]", parts.join(", "))
                };
                format!("{} {name:?} is invalid: {body}", qualify(kind))
            }
            DeniedBy::Policy { policy, binding } => format!(
                "{} {name:?} is forbidden: ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {}",
                qualify(plural),
                self.message()
            ),
            DeniedBy::Webhook { name: webhook } => {
                format!(
                    "admission webhook {webhook:?} denied the request: {}",
                    self.message()
                )
            }
        }
    }
}

impl Cause {
    fn plain(message: impl Into<String>) -> Self {
        Self {
            field: String::new(),
            value: None,
            message: message.into(),
        }
    }

    fn render(&self) -> String {
        match &self.value {
            Some(v) => format!("{}: Invalid value: {v:?}: {}", self.field, self.message),
            None => format!("{}: {}", self.field, self.message),
        }
    }
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

/// Settings versions of a module: the latest, and every version it can convert from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SettingsVersions {
    /// The latest version (at least 1).
    pub latest: i64,
    /// Every known version, including 1 and the latest.
    pub known: BTreeSet<i64>,
}

/// A module's settings validator: its schema and conversions, as the module manager knows them
/// (implemented by `module_plan::config::ModuleSettings`). It lives behind this trait so that
/// the rules stay in this crate while the schema machinery stays in the module planner.
pub trait SettingsCheck: std::fmt::Debug + Send + Sync {
    /// What Deckhouse's ModuleConfig validator concludes about `settings` written for
    /// `version` (0 when `spec.version` is unset) of a ModuleConfig whose `spec.enabled` is
    /// `enabled`: the refusal in Deckhouse's words, or the warnings of an admitted config.
    fn check(
        &self,
        version: i64,
        settings: Option<&Value>,
        enabled: Option<bool>,
    ) -> Result<Warnings, String>;
}

/// What the cluster knows about one module, for ModuleConfig rules.
#[derive(Clone, Debug, Default)]
pub struct ModuleFacts {
    /// The module manager runs the module now.
    pub enabled: bool,
    /// The module is enabled when its ModuleConfig says nothing (bundle and edition).
    pub enabled_by_default: bool,
    /// The module's stage is `Experimental`.
    pub experimental: bool,
    /// Disabling needs confirmation, with this reason (from `disableOptions`).
    pub disable_confirmation: Option<String>,
    /// The module's exclusive group.
    pub exclusive_group: Option<String>,
    /// Known settings versions; `None` leaves version checks to the defaults (latest 1).
    /// Ignored when `settings` is known: the validator checks versions itself.
    pub settings_versions: Option<SettingsVersions>,
    /// The module's settings validator (schema and conversions); `None` when not known, and
    /// then settings are not checked against a schema.
    pub settings: Option<std::sync::Arc<dyn SettingsCheck>>,
    /// Sources offering the module (`ModulePackage.status.availableRepositories` as source
    /// names); `None` when the catalog has no entry for it.
    pub available_sources: Option<Vec<String>>,
    /// A ModulePullOverride exists for the module.
    pub pull_override: bool,
    /// Modules the module requires that are not enabled.
    pub disabled_parents: Vec<String>,
}

/// Cluster facts for the rules that need them. `Context::default()` knows nothing.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Facts per module (by name). A module missing here is unknown.
    pub modules: BTreeMap<String, ModuleFacts>,
    /// Whether `modules` is the complete catalog, so that a missing module is really unknown.
    pub modules_complete: bool,
    /// `spec.settings.allowExperimentalModules` of the `deckhouse` ModuleConfig.
    pub allow_experimental_modules: bool,
    /// `spec.settings.allowedExperimentalModules` of the `deckhouse` ModuleConfig.
    pub allowed_experimental_modules: BTreeSet<String>,
    /// Names of the existing ModuleUpdatePolicies; `None` when not known.
    pub update_policies: Option<BTreeSet<String>>,
    /// `spec.updatePolicy` of every ModuleConfig (by ModuleConfig name); `None` when not known.
    pub module_config_update_policies: Option<BTreeMap<String, String>>,
    /// Unmet requirements of DeckhouseReleases, by release name, as the requirements checker
    /// reports them.
    pub unmet_release_requirements: BTreeMap<String, Vec<String>>,
}

/// Checks a CREATE (`old` is `None`) or UPDATE of an object of `kind`, with no user and no
/// cluster facts: the rules of the CRDs and everything decidable from the objects alone.
pub fn validate(kind: &str, old: Option<&Value>, new: &Value) -> Result<Warnings, Denial> {
    let operation = if old.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    validate_request(
        &Request {
            kind,
            operation,
            user: None,
            old,
            new: Some(new),
        },
        &Context::default(),
    )
}

/// Checks a DELETE of an object of `kind`.
pub fn validate_delete(kind: &str, old: &Value, context: &Context) -> Result<Warnings, Denial> {
    validate_request(
        &Request {
            kind,
            operation: Operation::Delete,
            user: None,
            old: Some(old),
            new: None,
        },
        context,
    )
}

/// Checks any request with what is known about the user and the cluster. Kinds without rules
/// are admitted with no warnings.
pub fn validate_request(request: &Request<'_>, context: &Context) -> Result<Warnings, Denial> {
    let mut warnings = policies::validate(request)?;
    let more = match request.kind {
        "ObjectKeeper" => object_keeper::validate(request),
        "ModuleUpdatePolicy" => update_windows::validate_policy(request, context),
        "ModuleConfig" => module_config::validate(request, context),
        "RegistryConfig" => registry::validate_config(request),
        "DeckhouseRelease" => deckhouse_release::validate(request, context),
        _ => Ok(Vec::new()),
    }?;
    warnings.extend(more);
    Ok(warnings)
}

/// `object.spec.<path…>` of a JSON object.
pub(crate) fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

/// `metadata.name`, or the empty string.
pub(crate) fn name_of(value: &Value) -> &str {
    at(value, &["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
