//! The enabling chain: addon-operator's extenders in Deckhouse's order.
//!
//! Three *setters* may each turn a module on or off, a later answer replacing an earlier one:
//! the bundle default (`accessibility.editions[<edition>|_default].enabledInBundles`, compared in
//! lower case; embedded modules without `accessibility` use their legacy default), the
//! ModuleConfig (`spec.enabled`), and global hooks. Then *filters* may only turn an enabled
//! module off, and the first that does decides: the `enabled` script, the Deckhouse version, the
//! Kubernetes version, the bootstrapped requirement, module dependencies, the edition's
//! availability, experimental modules. The extender that decided is the condition reason, with
//! Deckhouse's message.
//!
//! Dependencies depend on the other modules' answers: [`decide_all`] starts with every module
//! as the setters and other filters leave it, then turns off modules with unmet dependencies
//! until nothing changes (a module is never turned back on, so it ends).

use std::collections::{BTreeMap, BTreeSet};

use api::module::{ModuleConditionReason as Reason, ModuleProperties};
use semver::Version;

use crate::constraint::{Constraint, parse_version};
use crate::definition::STAGE_EXPERIMENTAL;

/// Marks an optional dependency: `cni-cilium: ">= 1.0 !optional"`.
pub const OPTIONAL_MARK: &str = "!optional";

/// Cluster-wide facts the extenders read.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The bundle (`Default`, `Minimal`, `Managed`).
    pub bundle: String,
    /// The edition (`ce`, `ee`, …); `_default` entries apply to editions not listed.
    pub edition: String,
    /// The Deckhouse version, when known.
    pub deckhouse_version: Option<Version>,
    /// The Kubernetes version, when known.
    pub kubernetes_version: Option<Version>,
    /// The cluster is bootstrapped.
    pub bootstrapped: bool,
    /// `allowExperimentalModules` of the `deckhouse` ModuleConfig.
    pub allow_experimental: bool,
    /// `allowedExperimentalModules` of the `deckhouse` ModuleConfig.
    pub allowed_experimental: BTreeSet<String>,
}

impl Facts {
    /// These facts with what the `deckhouse` ModuleConfig's `spec.settings` decide:
    /// `bundle` when it names one (else the facts' own, from the `--bundle` flag),
    /// `allowExperimentalModules` and `allowedExperimentalModules` (off and empty without
    /// them).
    pub fn with_deckhouse_settings(&self, settings: Option<&serde_json::Value>) -> Facts {
        use serde_json::Value;
        let mut facts = self.clone();
        let Some(settings) = settings else {
            return facts;
        };
        if let Some(bundle) = settings
            .get("bundle")
            .and_then(Value::as_str)
            .and_then(crate::values::Bundle::parse)
        {
            facts.bundle = bundle.as_str().to_owned();
        }
        facts.allow_experimental = settings
            .get("allowExperimentalModules")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        facts.allowed_experimental = settings
            .get("allowedExperimentalModules")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        facts
    }
}

/// One module as the extenders see it.
#[derive(Clone, Debug, Default)]
pub struct Input {
    /// The module name.
    pub name: String,
    /// Its `.properties` (accessibility, stage, requirements).
    pub properties: ModuleProperties,
    /// The module's version (for dependants' constraints), when known.
    pub version: Option<Version>,
    /// Legacy bundle default of an embedded module without `accessibility`.
    pub legacy_default: bool,
    /// `spec.enabled` of its ModuleConfig.
    pub config_enabled: Option<bool>,
    /// What global hooks decided, if anything.
    pub dynamic: Option<bool>,
    /// The `enabled` script refused, with its reason.
    pub script_refusal: Option<String>,
}

/// The chain's answer for one module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether the module runs.
    pub enabled: bool,
    /// The extender that decided.
    pub reason: Reason,
    /// Deckhouse's message (empty when enabled).
    pub message: String,
}

impl Decision {
    fn on(reason: Reason) -> Self {
        Self {
            enabled: true,
            reason,
            message: String::new(),
        }
    }

    fn off(reason: Reason, detail: Option<&str>) -> Self {
        let base = reason.message().map(str::to_owned).unwrap_or_else(|| {
            match reason {
                Reason::ExperimentalExtender => "turned off because the module is experimental",
                Reason::EditionAvailableExtender => "turned off by edition",
                _ => "turned off",
            }
            .to_owned()
        });
        let message = match detail {
            Some(d) if !d.is_empty() => format!("{base}: {d}"),
            _ => base,
        };
        Self {
            enabled: false,
            reason,
            message,
        }
    }

    /// Whether the module is unavailable in the edition (phase `Unavailable`).
    pub fn is_unavailable(&self) -> bool {
        self.reason == Reason::EditionAvailableExtender && !self.enabled
    }
}

fn edition_entry<'p>(
    properties: &'p ModuleProperties,
    edition: &str,
) -> Option<&'p api::module::EditionAccess> {
    let editions = &properties.accessibility.as_ref()?.editions;
    editions
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(edition))
        .map(|(_, v)| v)
        .or_else(|| editions.get("_default"))
}

/// The bundle default of a module.
pub fn bundle_default(input: &Input, facts: &Facts) -> bool {
    if input.properties.accessibility.is_none() {
        return input.legacy_default;
    }
    edition_entry(&input.properties, &facts.edition).is_some_and(|e| {
        e.enabled_in_bundles
            .iter()
            .any(|b| b.eq_ignore_ascii_case(&facts.bundle))
    })
}

fn version_refusal(constraint: Option<&str>, version: Option<&Version>) -> Option<String> {
    let constraint = constraint.filter(|c| !c.trim().is_empty())?;
    match Constraint::parse(constraint) {
        Err(e) => Some(e.to_string()),
        Ok(c) => match version {
            Some(v) if c.matches(v) => None,
            Some(v) => Some(format!("{v} does not satisfy {constraint:?}")),
            None => None,
        },
    }
}

/// The chain without dependencies (setters, then the filters up to the bootstrapped one, then
/// edition availability and experimental).
fn decide_alone(input: &Input, facts: &Facts) -> Decision {
    let mut decision = if bundle_default(input, facts) {
        Decision::on(Reason::Bundle)
    } else {
        Decision::off(Reason::Bundle, None)
    };
    if let Some(enabled) = input.config_enabled {
        decision = if enabled {
            Decision::on(Reason::ModuleConfig)
        } else {
            Decision::off(Reason::ModuleConfig, None)
        };
    }
    if let Some(enabled) = input.dynamic {
        decision = if enabled {
            Decision::on(Reason::DynamicGlobalHookExtender)
        } else {
            Decision::off(Reason::DynamicGlobalHookExtender, None)
        };
    }
    if !decision.enabled {
        return decision;
    }
    if let Some(reason) = &input.script_refusal {
        return Decision::off(Reason::EnabledScriptExtender, Some(reason));
    }
    let requirements = input.properties.requirements.as_ref();
    if let Some(why) = version_refusal(
        requirements.and_then(|r| r.deckhouse.as_deref()),
        facts.deckhouse_version.as_ref(),
    ) {
        return Decision::off(Reason::DeckhouseVersionExtender, Some(&why));
    }
    if let Some(why) = version_refusal(
        requirements.and_then(|r| r.kubernetes.as_deref()),
        facts.kubernetes_version.as_ref(),
    ) {
        return Decision::off(Reason::KubernetesVersionExtender, Some(&why));
    }
    let needs_bootstrap = requirements
        .and_then(|r| r.bootstrapped.as_deref())
        .is_some_and(|b| b.trim().eq_ignore_ascii_case("true"));
    if needs_bootstrap && !facts.bootstrapped {
        return Decision::off(Reason::ClusterBootstrappedExtender, None);
    }
    decision
}

fn after_dependencies(input: &Input, facts: &Facts, decision: Decision) -> Decision {
    if !decision.enabled {
        return decision;
    }
    if edition_entry(&input.properties, &facts.edition).is_some_and(|e| e.available == Some(false))
    {
        return Decision::off(Reason::EditionAvailableExtender, None);
    }
    let experimental = input.properties.stage.as_deref() == Some(STAGE_EXPERIMENTAL);
    if experimental
        && !facts.allow_experimental
        && !facts.allowed_experimental.contains(&input.name)
    {
        return Decision::off(Reason::ExperimentalExtender, None);
    }
    decision
}

/// Unmet dependencies of `input` given the modules enabled now (name → version).
pub fn unmet_dependencies(
    input: &Input,
    enabled: &BTreeMap<String, Option<Version>>,
) -> Vec<String> {
    let Some(requirements) = input.properties.requirements.as_ref() else {
        return Vec::new();
    };
    let mut unmet = Vec::new();
    for (dependency, constraint) in &requirements.modules {
        let optional = constraint.contains(OPTIONAL_MARK);
        let constraint = constraint.replace(OPTIONAL_MARK, "");
        match enabled.get(dependency) {
            None if optional => {}
            None => unmet.push(dependency.clone()),
            Some(version) => {
                if let Some(why) = version_refusal(Some(&constraint), version.as_ref()) {
                    unmet.push(format!("{dependency} ({why})"));
                }
            }
        }
    }
    unmet
}

/// The chain for every module; see the module docs.
pub fn decide_all(inputs: &[Input], facts: &Facts) -> BTreeMap<String, Decision> {
    let mut decisions: BTreeMap<String, Decision> = inputs
        .iter()
        .map(|i| (i.name.clone(), decide_alone(i, facts)))
        .collect();
    loop {
        let enabled: BTreeMap<String, Option<Version>> = inputs
            .iter()
            .filter(|i| decisions[&i.name].enabled)
            .map(|i| (i.name.clone(), i.version.clone()))
            .collect();
        let mut changed = false;
        for input in inputs {
            if !decisions[&input.name].enabled {
                continue;
            }
            let unmet = unmet_dependencies(input, &enabled);
            if !unmet.is_empty() {
                decisions.insert(
                    input.name.clone(),
                    Decision::off(Reason::ModuleDependencyExtender, Some(&unmet.join(", "))),
                );
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    inputs
        .iter()
        .map(|i| {
            let d = decisions
                .remove(&i.name)
                .unwrap_or_else(|| decide_alone(i, facts));
            (i.name.clone(), after_dependencies(i, facts, d))
        })
        .collect()
}

/// Reads a version for [`Input::version`] leniently (`v1.2.3`, `1.2`); `None` when unreadable.
pub fn version_of(text: &str) -> Option<Version> {
    parse_version(text).ok()
}

#[cfg(test)]
mod tests;
