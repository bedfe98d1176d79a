//! Requirement checks of a platform release (Deckhouse's `NewDeckhouseReleaseRequirementsChecker`)
//! that need no cluster access: the caller gathers the facts (enabled modules and their
//! constraints, ModuleSource listings, the cluster's Kubernetes version) and these functions
//! decide, with Deckhouse's messages.
//!
//! The checks, in Deckhouse's order, each yielding at most one message (the controller joins
//! them with `;`):
//! 1. [`deckhouse_version`]: the release version against the `requirements.deckhouse`
//!    constraints of the enabled modules;
//! 2. the release's `spec.requirements` keys through the registered checks (see
//!    [`RequirementKey`]): the first key whose check fails gives
//!    `"<key>" requirement for DeckhouseRelease "<version>" not met: <error>`;
//! 3. [`auto_kubernetes_version`]: when the cluster's `kubernetesVersion` is `Automatic`, the
//!    release's `autoK8sVersion` against the enabled modules' `requirements.kubernetes`;
//! 4. [`migrated_modules`]: every module of the `migratedModules` list must be offered by some
//!    ModuleSource without an error (or be disabled by the module manager).
//!
//! Version constraints are read as Go's Masterminds semver reads them ([`Constraint`]), and a
//! failed one is explained with its words (`1.70.0 is greater than or equal to 1.70`).

use std::collections::{BTreeMap, BTreeSet};

use crate::{Error, ReleaseVersion};

/// `requirements.migratedModules`: comma-separated modules that moved to a ModuleSource.
pub const MIGRATED_MODULES: &str = "migratedModules";
/// `requirements.autoK8sVersion`: the Kubernetes version `Automatic` clusters move to.
pub const AUTO_K8S_VERSION: &str = "autoK8sVersion";
/// `requirements.k8s`: the minimal Kubernetes version.
pub const K8S: &str = "k8s";
/// The `kubernetesVersion` of a cluster configuration that follows Deckhouse's default.
pub const KUBERNETES_AUTOMATIC: &str = "Automatic";

/// The requirement keys the module extenders check instead of a registered check (Deckhouse's
/// `IsExtendersField`): they are skipped by the registered-check pass.
pub const EXTENDER_FIELDS: [&str; 4] = ["kubernetes", "deckhouse", "bootstrapped", "modules"];

/// Requirement keys whose checks Deckhouse registers in modules this platform does not run
/// (ingress-nginx, node-manager, istio, cloud providers, metallb, monitoring-kubernetes,
/// control-plane-manager's companions). Deckhouse skips the checks of disabled modules, so a
/// release carrying them passes here as it does in a cluster where those modules are off.
/// Found in Deckhouse's `release.yaml` and the modules' `requirements` packages.
pub const FOREIGN_KEYS: [&str; 16] = [
    "disabledModules",
    "ingressNginx",
    "nodesMinimalOSVersionUbuntu",
    "nodesMinimalOSVersionDebian",
    "nodesMinimalLinuxKernelVersion",
    "containerdOnAllNodes",
    "istioMinimalVersion",
    "yandexHasDeprecatedZoneInConfig",
    "yandexHasDeprecatedZoneInNodes",
    "metallbHasStandardConfiguration",
    "checkAdditionalPropertiesDhctlConfigs",
    "unmetCloudConditions",
    "cniConfigurationSettled",
    "checkCloudProviderConfig",
    "kubernetesVersionMigrated",
    // monitoring-kubernetes registers a check under this key too; the platform's own part of
    // it is `auto_kubernetes_version`.
    AUTO_K8S_VERSION,
];

/// How the registered-check pass treats a `spec.requirements` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequirementKey {
    /// Checked by an extender or by a dedicated check of this module: skipped here.
    Dedicated,
    /// Registered by a module this platform does not run: passes (its module is disabled).
    Foreign,
    /// Registered by the platform: the caller runs its check.
    Registered,
    /// Nobody registers it: fails with [`not_registered_message`], as in Deckhouse.
    Unknown,
}

/// How the registered-check pass treats `key`, given the keys the platform registers.
pub fn classify_key(key: &str, registered: &BTreeSet<String>) -> RequirementKey {
    if EXTENDER_FIELDS.contains(&key) || key == MIGRATED_MODULES {
        RequirementKey::Dedicated
    } else if registered.contains(key) {
        RequirementKey::Registered
    } else if FOREIGN_KEYS.contains(&key) {
        RequirementKey::Foreign
    } else {
        RequirementKey::Unknown
    }
}

/// Deckhouse's error for a requirement key no module registered:
/// `requirement with a key: <key>: Not registered`.
pub fn not_registered_message(key: &str) -> String {
    format!("requirement with a key: {key}: Not registered")
}

/// The `k8s` check (control-plane-manager's): the cluster's Kubernetes version must be at least
/// the required one. Deckhouse's words, including the odd line breaks of the unset case.
pub fn minimal_kubernetes(required: &str, current: Option<&str>) -> Result<(), String> {
    let required =
        ReleaseVersion::parse(required.trim()).map_err(|_| INVALID_SEMANTIC_VERSION.to_owned())?;
    let current =
        current.ok_or_else(|| "\nminUsedControlPlaneKubernetesVersion\n is not set".to_owned())?;
    let current =
        ReleaseVersion::parse(current.trim()).map_err(|_| INVALID_SEMANTIC_VERSION.to_owned())?;
    if current < required {
        return Err("current kubernetes version is lower than required".to_owned());
    }
    Ok(())
}

/// Masterminds semver's error for text that is not a version.
pub const INVALID_SEMANTIC_VERSION: &str = "Invalid Semantic Version";

/// An enabled module's constraint on a version (`requirements.deckhouse` or
/// `requirements.kubernetes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleConstraint {
    /// The module name.
    pub module: String,
    /// The constraint as written, e.g. `>= 1.61`.
    pub constraint: String,
}

impl ModuleConstraint {
    /// `module` requires `constraint`.
    pub fn new(module: impl Into<String>, constraint: impl Into<String>) -> Self {
        Self {
            module: module.into(),
            constraint: constraint.into(),
        }
    }
}

/// The first module (in name order) whose constraint `version` does not satisfy, with
/// Masterminds' reason. Constraints that cannot be read are ignored, as Deckhouse never
/// registers them.
fn first_unsatisfied(
    version: &ReleaseVersion,
    modules: &[ModuleConstraint],
) -> Option<(String, String)> {
    let mut sorted: Vec<&ModuleConstraint> = modules.iter().collect();
    sorted.sort_by(|a, b| a.module.cmp(&b.module));
    sorted.into_iter().find_map(|m| {
        let constraint = Constraint::parse(&m.constraint).ok()?;
        constraint
            .check(version)
            .err()
            .map(|reason| (m.module.clone(), reason))
    })
}

/// The Deckhouse-version check: `requirements of the '<module>' module are not satisfied:
/// <version> deckhouse version is not suitable: <reason>`.
pub fn deckhouse_version(
    version: &ReleaseVersion,
    enabled_modules: &[ModuleConstraint],
) -> Result<(), String> {
    match first_unsatisfied(version, enabled_modules) {
        None => Ok(()),
        Some((module, reason)) => Err(format!(
            "requirements of the '{module}' module are not satisfied: {version} deckhouse version is not suitable: {reason}"
        )),
    }
}

/// The `autoK8sVersion` check, which only applies when the cluster's `kubernetesVersion` is
/// [`KUBERNETES_AUTOMATIC`]: `requirements of the '<module>' module are not satisfied: <version>
/// kubernetes version is not suitable: <reason>`, or `requirements cannot be checked: kubernetes
/// version is invalid: Invalid Semantic Version`.
pub fn auto_kubernetes_version(
    cluster_kubernetes_version: Option<&str>,
    auto_version: Option<&str>,
    enabled_modules: &[ModuleConstraint],
) -> Result<(), String> {
    let Some(auto) = auto_version.filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    if cluster_kubernetes_version != Some(KUBERNETES_AUTOMATIC) {
        return Ok(());
    }
    let version = ReleaseVersion::parse(auto.trim()).map_err(|_| {
        format!("requirements cannot be checked: kubernetes version is invalid: {INVALID_SEMANTIC_VERSION}")
    })?;
    match first_unsatisfied(&version, enabled_modules) {
        None => Ok(()),
        Some((module, reason)) => Err(format!(
            "requirements of the '{module}' module are not satisfied: {auto} kubernetes version is not suitable: {reason}"
        )),
    }
}

/// What a ModuleSource's status says about one module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceModule {
    /// The ModuleSource.
    pub source: String,
    /// The module.
    pub module: String,
    /// Whether the source reported an error (or a pull error) for it.
    pub has_error: bool,
}

/// The `migratedModules` check: every listed module must be disabled by the module manager or
/// offered by a ModuleSource without an error. `Err(module)` names the first that is not;
/// its message is [`crate::deploy::migrated_module_not_found_message`], and the controller
/// raises `d8_migrated_module_not_found{module_name}` for it.
pub fn migrated_modules(
    requirements: &BTreeMap<String, String>,
    disabled_by_module_manager: &BTreeSet<String>,
    sources: &[SourceModule],
) -> Result<(), String> {
    let Some(list) = requirements.get(MIGRATED_MODULES) else {
        return Ok(());
    };
    for module in list.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        if disabled_by_module_manager.contains(module) {
            continue;
        }
        // Deckhouse looks at the first entry of the module in each source.
        let available = sources.iter().any(|s| s.module == module && !s.has_error);
        if !available {
            return Err(module.to_owned());
        }
    }
    Ok(())
}

/// The modules of `migratedModules` that a ModuleSource offers (without an error) but that
/// have no Deployed ModuleRelease yet (`deployed` names the modules that have one), in the
/// listed order; the controller raises `d8_migrated_module_not_downloaded{module}` for each.
/// Modules disabled by the module manager are left out, as in [`migrated_modules`].
pub fn migrated_modules_not_downloaded(
    requirements: &BTreeMap<String, String>,
    disabled_by_module_manager: &BTreeSet<String>,
    sources: &[SourceModule],
    deployed: &BTreeSet<String>,
) -> Vec<String> {
    let Some(list) = requirements.get(MIGRATED_MODULES) else {
        return Vec::new();
    };
    list.split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty() && !disabled_by_module_manager.contains(*m))
        .filter(|m| sources.iter().any(|s| s.module == *m && !s.has_error))
        .filter(|m| !deployed.contains(*m))
        .map(str::to_owned)
        .collect()
}

/// A version constraint as Go's Masterminds semver (v3) reads it: `||` alternatives of
/// comparators separated by spaces or commas, hyphen ranges (`1.2 - 1.4`), wildcards (`1.x`,
/// `*`), a `v` prefix, missing parts as wildcards (`1.2` = `1.2.x`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Constraint {
    groups: Vec<Vec<Comparator>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    Tilde,
    Caret,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Comparator {
    op: Op,
    /// The bound with wildcards as zeros.
    version: semver::Version,
    /// The version text as written (Masterminds quotes it in its errors).
    orig: String,
    dirty: bool,
    /// `*`, `x`: any version.
    major_dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

const OPERATORS: [(&str, Op); 12] = [
    (">=", Op::Ge),
    ("=>", Op::Ge),
    ("<=", Op::Le),
    ("=<", Op::Le),
    ("!=", Op::Ne),
    ("~>", Op::Tilde),
    (">", Op::Gt),
    ("<", Op::Lt),
    ("=", Op::Eq),
    ("~", Op::Tilde),
    ("^", Op::Caret),
    ("", Op::Eq),
];

fn is_wildcard(part: &str) -> bool {
    matches!(part, "x" | "X" | "*")
}

impl Comparator {
    fn parse(op: Op, text: &str, whole: &str) -> Result<Self, Error> {
        let bad = || Error::InvalidConstraint {
            constraint: whole.to_owned(),
        };
        let body = text.strip_prefix('v').unwrap_or(text);
        let core_end = body.find(['-', '+']).unwrap_or(body.len());
        let (core, rest) = body.split_at(core_end);
        let parts: Vec<&str> = core.split('.').collect();
        if parts.is_empty() || parts.len() > 3 || parts.iter().any(|p| p.is_empty()) {
            return Err(bad());
        }
        let number = |p: &str| -> Result<u64, Error> {
            if p.bytes().all(|b| b.is_ascii_digit()) {
                p.parse().map_err(|_| bad())
            } else {
                Err(bad())
            }
        };
        let (mut dirty, mut major_dirty, mut minor_dirty, mut patch_dirty) =
            (false, false, false, false);
        let mut numbers = [0u64; 3];
        for (i, part) in parts.iter().enumerate() {
            if is_wildcard(part) {
                dirty = true;
                major_dirty = i == 0;
                minor_dirty |= i <= 1;
                patch_dirty = true;
                break;
            }
            numbers[i] = number(part)?;
        }
        if !dirty && parts.len() < 3 {
            dirty = true;
            minor_dirty = parts.len() == 1;
            patch_dirty = true;
        }
        let full = format!("{}.{}.{}{rest}", numbers[0], numbers[1], numbers[2]);
        let version = semver::Version::parse(&full).map_err(|_| bad())?;
        Ok(Self {
            op,
            version,
            orig: text.to_owned(),
            dirty,
            major_dirty,
            minor_dirty,
            patch_dirty,
        })
    }

    /// Masterminds' check of one comparator, with its error text.
    fn check(&self, v: &semver::Version) -> Result<(), String> {
        let c = &self.version;
        let fail = |template: &str| {
            Err(template
                .replacen("{v}", &v.to_string(), 1)
                .replacen("{c}", &self.orig, 1))
        };
        if !v.pre.is_empty() && c.pre.is_empty() {
            return fail(
                "{v} is a prerelease version and the constraint is only looking for release versions",
            );
        }
        if self.major_dirty && matches!(self.op, Op::Eq | Op::Tilde | Op::Caret | Op::Ge | Op::Le) {
            return Ok(());
        }
        let tilde = || {
            if v < c {
                return fail("{v} is less than {c}");
            }
            if v.major != c.major || (v.minor != c.minor && !self.minor_dirty) {
                return fail("{v} does not have same major and minor version as {c}");
            }
            Ok(())
        };
        match self.op {
            Op::Eq => {
                if self.dirty {
                    // Masterminds reads a partial equality (`1.2`, `1.2.x`) as a tilde range.
                    tilde()
                } else if v == c {
                    Ok(())
                } else {
                    fail("{v} is not equal to {c}")
                }
            }
            Op::Ne => {
                let equal = if self.dirty {
                    v.major == c.major && (self.minor_dirty || v.minor == c.minor)
                } else {
                    v == c
                };
                if equal {
                    fail("{v} is equal to {c}")
                } else {
                    Ok(())
                }
            }
            Op::Gt => {
                let greater = if !self.dirty {
                    v > c
                } else if v.major != c.major {
                    v.major > c.major
                } else if self.minor_dirty {
                    false
                } else {
                    v.minor > c.minor
                };
                if greater {
                    Ok(())
                } else {
                    fail("{v} is less than or equal to {c}")
                }
            }
            Op::Lt => {
                if v < c {
                    Ok(())
                } else {
                    fail("{v} is greater than or equal to {c}")
                }
            }
            Op::Ge => {
                if v >= c {
                    Ok(())
                } else {
                    fail("{v} is less than {c}")
                }
            }
            Op::Le => {
                let within = if !self.dirty {
                    v <= c
                } else if v.major != c.major {
                    v.major < c.major
                } else {
                    self.minor_dirty || v.minor <= c.minor
                };
                if within {
                    Ok(())
                } else {
                    fail("{v} is greater than {c}")
                }
            }
            Op::Tilde => tilde(),
            Op::Caret => {
                if v < c {
                    return fail("{v} is less than {c}");
                }
                if c.major > 0 || self.minor_dirty {
                    return if v.major == c.major {
                        Ok(())
                    } else {
                        fail("{v} does not have same major version as {c}")
                    };
                }
                if c.minor > 0 || self.patch_dirty {
                    return if v.major == c.major && v.minor == c.minor {
                        Ok(())
                    } else {
                        fail("{v} does not have same minor version as {c}")
                    };
                }
                if v.major == c.major && v.minor == c.minor && v.patch == c.patch {
                    Ok(())
                } else {
                    fail("{v} does not equal {c}")
                }
            }
        }
    }
}

impl Constraint {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let bad = || Error::InvalidConstraint {
            constraint: text.to_owned(),
        };
        let mut groups = Vec::new();
        for group in text.split("||") {
            let tokens: Vec<&str> = group
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|t| !t.is_empty())
                .collect();
            if tokens.is_empty() {
                return Err(bad());
            }
            let mut comparators = Vec::new();
            let mut i = 0;
            while i < tokens.len() {
                if tokens.get(i + 1) == Some(&"-") {
                    let upper = tokens.get(i + 2).ok_or_else(bad)?;
                    comparators.push(Comparator::parse(Op::Ge, tokens[i], text)?);
                    comparators.push(Comparator::parse(Op::Le, upper, text)?);
                    i += 3;
                    continue;
                }
                let token = tokens[i];
                let (symbol, op) = OPERATORS
                    .iter()
                    .find(|(symbol, _)| token.starts_with(symbol))
                    .copied()
                    .ok_or_else(bad)?;
                let mut version = &token[symbol.len()..];
                if version.is_empty() {
                    i += 1;
                    version = tokens.get(i).ok_or_else(bad)?;
                }
                comparators.push(Comparator::parse(op, version, text)?);
                i += 1;
            }
            groups.push(comparators);
        }
        Ok(Self { groups })
    }

    /// `Ok` when `version` satisfies some alternative; otherwise Masterminds' first error (the
    /// first failing comparator of the first alternative).
    pub fn check(&self, version: &ReleaseVersion) -> Result<(), String> {
        self.check_semver(version.semver())
    }

    /// Whether `version` satisfies some alternative.
    pub fn matches(&self, version: &semver::Version) -> bool {
        self.check_semver(version).is_ok()
    }

    /// [`check`](Self::check) of a plain semantic version.
    pub fn check_semver(&self, v: &semver::Version) -> Result<(), String> {
        let mut first_error = None;
        for group in &self.groups {
            let mut ok = true;
            for comparator in group {
                if let Err(e) = comparator.check(v) {
                    ok = false;
                    first_error.get_or_insert(e);
                }
            }
            if ok {
                return Ok(());
            }
        }
        Err(first_error.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests;
