//! ModuleConfig: the `deckhouse` update windows policy and the module-configs webhook (settings
//! version, the `registry` settings rules, disabling, enabling, source, update policy,
//! exclusive groups, deletion).

use serde_json::Value;

use super::registry::registry_settings_errors;
use super::{Context, Denial, ModuleFacts, Operation, Request, Warnings, at, name_of};
use crate::keys;

/// Name of the webhook guarding ModuleConfigs (path `/validate/v1alpha1/module-configs`; the
/// registered name is not public).
pub(crate) const MODULE_CONFIG_WEBHOOK: &str = "module-configs.deckhouse-webhook.deckhouse.io";
const DISABLE_SUFFIX: &str = "Please annotate ModuleConfig with `modules.deckhouse.io/allow-disabling=true` if you're sure that you want to disable the module.";
pub(crate) const MSG_VERSION_REQUIRED: &str =
    "spec.version is required when spec.settings are specified";
pub(crate) const MSG_VERSION_WITHOUT_SETTINGS: &str = "spec.version has no effect without spec.settings, defaults from the latest version of settings schema will be applied";
pub(crate) const MSG_EMBEDDED_SOURCE: &str = "'Embedded' is a forbidden source";
pub(crate) const MSG_DELETE_MPO_FIRST: &str =
    "delete the ModulePullOverride before deleting the module config";

/// The fields of a ModuleConfig the rules read.
struct Config<'a> {
    name: &'a str,
    enabled: Option<bool>,
    version: i64,
    settings: Option<&'a Value>,
    source: Option<&'a str>,
    update_policy: Option<&'a str>,
    allow_disabling: bool,
}

impl<'a> Config<'a> {
    fn parse(object: &'a Value) -> Result<Self, Denial> {
        let spec = object.get("spec");
        let field = |k: &str| spec.and_then(|s| s.get(k));
        let version = match field("version") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_i64()
                .ok_or_else(|| deny(format!("spec.version must be a whole number, got {v}")))?,
        };
        Ok(Self {
            name: name_of(object),
            enabled: field("enabled").and_then(Value::as_bool),
            version,
            settings: field("settings").filter(|s| !s.is_null()),
            source: field("source")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty()),
            update_policy: field("updatePolicy")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty()),
            allow_disabling: at(
                object,
                &["metadata", "annotations", keys::ANNOTATION_ALLOW_DISABLING],
            )
            .is_some(),
        })
    }

    fn is_enabled(&self, default_enabled: bool) -> bool {
        self.enabled.unwrap_or(default_enabled)
    }
}

fn deny(message: impl Into<String>) -> Denial {
    Denial::webhook(MODULE_CONFIG_WEBHOOK, message)
}

pub(super) fn validate(request: &Request<'_>, context: &Context) -> Result<Warnings, Denial> {
    match request.operation {
        Operation::Delete => {
            let Some(old) = request.old else {
                return Ok(Vec::new());
            };
            validate_delete(&Config::parse(old)?, context)
        }
        Operation::Create => {
            let Some(new) = request.new else {
                return Ok(Vec::new());
            };
            super::update_windows::validate_deckhouse_settings(new)?;
            validate_create(&Config::parse(new)?, context)
        }
        Operation::Update => {
            let Some(new) = request.new else {
                return Ok(Vec::new());
            };
            super::update_windows::validate_deckhouse_settings(new)?;
            let old = request.old.map(Config::parse).transpose()?;
            validate_update(old.as_ref(), &Config::parse(new)?, context)
        }
    }
}

fn facts<'c>(context: &'c Context, name: &str) -> Option<&'c ModuleFacts> {
    context.modules.get(name)
}

fn default_enabled(context: &Context, name: &str) -> bool {
    name != crate::module_config::GLOBAL
        && facts(context, name).is_some_and(|f| f.enabled_by_default)
}

fn enabled_now(context: &Context, name: &str) -> bool {
    facts(context, name).is_some_and(|f| f.enabled)
}

/// The refusal of disabling a module that asks for confirmation; unknown modules are not
/// guarded.
fn confirmation(context: &Context, name: &str) -> Result<(), Denial> {
    let Some(reason) = facts(context, name).and_then(|f| f.disable_confirmation.as_deref()) else {
        return Ok(());
    };
    let reason = if reason.ends_with('.') {
        reason.to_string()
    } else {
        format!("{reason}.")
    };
    Err(deny(format!("{reason} {DISABLE_SUFFIX}")))
}

/// The message refusing an experimental module.
pub(crate) fn experimental_message(name: &str) -> String {
    format!(
        "the '{name}' module is experimental; to allow it, in the 'deckhouse' ModuleConfig either set spec.settings.allowExperimentalModules: true (allows all experimental modules) or add '{name}' to spec.settings.allowedExperimentalModules"
    )
}

/// The checks before a module may be enabled.
fn enabling(context: &Context, name: &str, reject_unknown: bool) -> Result<(), Denial> {
    let allowed =
        context.allow_experimental_modules || context.allowed_experimental_modules.contains(name);
    if let Some(f) = facts(context, name) {
        if f.experimental && !allowed {
            return Err(deny(experimental_message(name)));
        }
        if !f.disabled_parents.is_empty() {
            let mut parents = f.disabled_parents.clone();
            parents.sort();
            return Err(deny(format!(
                "the '{name}' module depends on disabled module(s): {}",
                parents.join(", ")
            )));
        }
    } else if reject_unknown && context.modules_complete && name != crate::module_config::GLOBAL {
        return Err(deny(format!("the '{name}' module not found")));
    }
    Ok(())
}

fn validate_delete(config: &Config<'_>, context: &Context) -> Result<Warnings, Denial> {
    if !config.allow_disabling && config.is_enabled(default_enabled(context, config.name)) {
        confirmation(context, config.name)?;
    }
    if facts(context, config.name).is_some_and(|f| f.pull_override) {
        return Err(deny(MSG_DELETE_MPO_FIRST));
    }
    Ok(Vec::new())
}

fn validate_create(config: &Config<'_>, context: &Context) -> Result<Warnings, Denial> {
    if !config.allow_disabling && config.enabled == Some(false) && enabled_now(context, config.name)
    {
        confirmation(context, config.name)?;
    }
    if config.is_enabled(default_enabled(context, config.name)) {
        enabling(context, config.name, true)?;
    }
    common(config, context)
}

fn validate_update(
    old: Option<&Config<'_>>,
    new: &Config<'_>,
    context: &Context,
) -> Result<Warnings, Denial> {
    let old_enabled =
        old.is_some_and(|o| o.enabled == Some(true)) || enabled_now(context, new.name);
    let new_enabled = new.is_enabled(default_enabled(context, new.name));
    if !old_enabled && new_enabled {
        enabling(context, new.name, false)?;
    }
    let old_allows = old.is_some_and(|o| o.allow_disabling);
    if old_enabled && !new_enabled && !new.allow_disabling && !old_allows {
        confirmation(context, new.name)?;
    }
    common(new, context)
}

/// What the settings validator concluded: an error refuses, a warning is passed on.
#[derive(Default)]
struct SettingsResult {
    error: Option<String>,
    warnings: Vec<String>,
}

/// `spec.version` and `spec.settings` against the module's validator (schema and conversions)
/// when the cluster knows it, else against the known versions alone; then the settings rules.
fn settings(config: &Config<'_>, context: &Context) -> SettingsResult {
    let mut result = SettingsResult::default();
    if let Some(check) = facts(context, config.name).and_then(|f| f.settings.as_ref()) {
        match check.check(config.version, config.settings, config.enabled) {
            Err(error) => {
                result.error = Some(error);
                return result;
            }
            Ok(warnings) => result.warnings = warnings,
        }
    } else if config.version == 0 {
        if config.settings.is_some() {
            result.error = Some(MSG_VERSION_REQUIRED.to_string());
            return result;
        }
    } else {
        // Deckhouse's validator keeps one warning: a later one replaces an earlier one.
        if config.settings.is_none() {
            result.warnings = vec![MSG_VERSION_WITHOUT_SETTINGS.to_string()];
        }
        if let Some(versions) =
            facts(context, config.name).and_then(|f| f.settings_versions.as_ref())
        {
            if !versions.known.contains(&config.version) {
                let previous: Vec<String> = versions
                    .known
                    .iter()
                    .filter(|v| **v != versions.latest)
                    .map(i64::to_string)
                    .collect();
                let previous = if previous.is_empty() {
                    String::new()
                } else {
                    format!(", or one of previous versions: {}", previous.join(", "))
                };
                let message = format!(
                    "spec.version={} is unsupported. Use latest version {}{previous}",
                    config.version, versions.latest
                );
                if config.settings.is_some() {
                    result.error = Some(message);
                } else {
                    result.warnings = vec![message];
                }
                return result;
            }
            if config.version != versions.latest {
                result.warnings = vec![format!(
                    "spec.version={} is obsolete. Please migrate spec.settings to the latest version {}",
                    config.version, versions.latest
                )];
            }
        }
    }
    if config.enabled == Some(false) {
        return result;
    }
    if config.name == "registry" {
        let empty = Value::Object(Default::default());
        let errors = registry_settings_errors(config.settings.unwrap_or(&empty));
        if !errors.is_empty() {
            result.error = Some(format!(
                "spec.settings are not valid (version {}): {}",
                config.version,
                errors.join("; ")
            ));
        }
    }
    result
}

fn common(config: &Config<'_>, context: &Context) -> Result<Warnings, Denial> {
    let mut warnings = Vec::new();
    if config.source == Some(crate::module::SOURCE_EMBEDDED) {
        return Err(deny(MSG_EMBEDDED_SOURCE));
    }
    let result = settings(config, context);
    let name = config.name;
    let enabled = config.is_enabled(default_enabled(context, name));
    if name != crate::module_config::GLOBAL {
        match facts(context, name).and_then(|f| f.available_sources.as_ref()) {
            None if context.modules_complete => {
                // A module the catalog does not know is admitted with a warning, unchecked.
                warnings.push(format!("the '{name}' module not found"));
                return Ok(warnings);
            }
            None => {}
            Some(sources) => {
                if let Some(source) = config.source
                    && !sources.iter().any(|s| s == source)
                {
                    return Err(deny(format!(
                        "the '{source}' module source is an unavailable source for the '{name}' module, available sources: [{}]",
                        sources.join(" ")
                    )));
                }
                if enabled && config.source.is_none() && sources.len() > 1 {
                    warnings.push(format!(
                        "module '{name}' is enabled but didn\u{2019}t run because multiple sources were found ({}), please specify a source in ModuleConfig resource ",
                        sources.join(", ")
                    ));
                }
            }
        }
    }
    if let (Some(policy), Some(policies)) = (config.update_policy, &context.update_policies)
        && !policies.contains(policy)
    {
        return Err(deny(format!("the '{policy}' module policy does not exist")));
    }
    if let Some(error) = result.error {
        return Err(deny(error));
    }
    warnings.extend(result.warnings);
    if enabled
        && let Some(group) = facts(context, name).and_then(|f| f.exclusive_group.as_deref())
        && let Some((other, _)) = context.modules.iter().find(|(other, f)| {
            other.as_str() != name && f.enabled && f.exclusive_group.as_deref() == Some(group)
        })
    {
        return Err(deny(format!(
            "can't enable module {name:?} because different module {other:?} with same exclusiveGroup {group} enabled"
        )));
    }
    Ok(warnings)
}
