//! What a package version image says about itself, parsed without I/O.
//!
//! Deckhouse publishes a package `P` of repository `R` as two images:
//!
//! - `R/P/version:<tag>`, the small **version image**: `package.yaml` (name, type, description,
//!   category, stage, licensing, requirements, `versionCompatibilityRules`), `version.json`,
//!   optionally `changelog.yaml` (`features`, `fixes`) and `openapi/settings.yaml` (the
//!   settings schema an Application's `spec.settings` is checked against);
//! - `R/P:<tag>`, the **package bundle**: the chart and everything an installation needs.
//!
//! A scan reads only version images; a bundle is downloaded when an Application installs it.

use std::collections::BTreeMap;

use api::packages::{
    CompatibilityRule, EditionLicense, Licensing, PackageChangelog, PackageMetadata,
    VersionCompatibilityRules,
};
use serde::Deserialize;

/// The file of a version image that makes it a package.
pub const PACKAGE_YAML: &str = "package.yaml";
/// The changelog of a version.
pub const CHANGELOG_YAML: &str = "changelog.yaml";
/// The settings schema of a version.
pub const SETTINGS_SCHEMA: &str = "openapi/settings.yaml";
/// The settings schema's legacy name, read when [`SETTINGS_SCHEMA`] is absent (as Deckhouse's
/// package loader does).
pub const LEGACY_SETTINGS_SCHEMA: &str = "openapi/config-values.yaml";

/// The schema of all of a package's values (internal ones too), in its bundle.
pub const VALUES_SCHEMA: &str = "openapi/values.yaml";
/// A package's static values, in its bundle.
pub const STATIC_VALUES: &str = "values.yaml";

/// A package's settings schema among its files (`read` gives a file's text by path):
/// `openapi/settings.yaml`, else the legacy `openapi/config-values.yaml`.
pub fn settings_schema(read: impl Fn(&str) -> Option<String>) -> Option<String> {
    read(SETTINGS_SCHEMA).or_else(|| read(LEGACY_SETTINGS_SCHEMA))
}

/// The package type of Deckhouse's `package.yaml` `type` (and image label
/// `io.deckhouse.package.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackageType {
    /// An application, installed into namespaces by Applications.
    Application,
    /// A module (served by the module manager, not by this controller).
    Module,
}

impl PackageType {
    /// The value as Deckhouse writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Application => "Application",
            Self::Module => "Module",
        }
    }
}

/// Why a version image's metadata cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// No `package.yaml`: an old-style module, not a package.
    #[error(
        "package has no type labels and no package.yaml, processed as the legacy module (v1alpha1)"
    )]
    NoPackageYaml,
    /// `type` is empty or unknown.
    #[error("package type could not be determined: unknown value {0:?}")]
    UnknownType(String),
    /// `package.yaml` is not YAML of the expected shape.
    #[error("package.yaml: {0}")]
    BadPackageYaml(String),
    /// `changelog.yaml` is not YAML of the expected shape.
    #[error("changelog.yaml: {0}")]
    BadChangelog(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PackageYaml {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "type")]
    type_: Option<String>,
    #[serde(default)]
    description: Option<Localized>,
    // Some packages write `descriptions`; both are read.
    #[serde(default)]
    descriptions: Option<Localized>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    requirements: Option<Requirements>,
    #[serde(default)]
    licensing: Option<LicensingYaml>,
    #[serde(default)]
    version_compatibility_rules: Option<RulesYaml>,
}

#[derive(Debug, Default, Deserialize)]
struct Localized {
    #[serde(default)]
    en: Option<String>,
    #[serde(default)]
    ru: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Requirements {
    #[serde(default)]
    deckhouse: Option<String>,
    #[serde(default)]
    kubernetes: Option<String>,
    #[serde(default)]
    modules: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct LicensingYaml {
    #[serde(default)]
    editions: BTreeMap<String, EditionYaml>,
}

#[derive(Debug, Default, Deserialize)]
struct EditionYaml {
    #[serde(default)]
    available: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct RulesYaml {
    #[serde(default)]
    upgrade: Option<RuleYaml>,
    #[serde(default)]
    downgrade: Option<RuleYaml>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleYaml {
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    to: Option<String>,
    #[serde(default)]
    allow_skip_patches: Option<u32>,
    #[serde(default)]
    allow_skip_minor: Option<u32>,
    #[serde(default)]
    allow_skip_major: Option<u32>,
    #[serde(default)]
    max_rollback: Option<u32>,
}

impl From<RuleYaml> for CompatibilityRule {
    fn from(r: RuleYaml) -> Self {
        Self {
            from: r.from.filter(|s| !s.is_empty()),
            to: r.to.filter(|s| !s.is_empty()),
            allow_skip_patches: r.allow_skip_patches.map(i64::from),
            allow_skip_minor: r.allow_skip_minor.map(i64::from),
            allow_skip_major: r.allow_skip_major.map(i64::from),
            max_rollback: r.max_rollback.map(i64::from),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ChangelogYaml {
    #[serde(default)]
    features: Vec<String>,
    #[serde(default)]
    fixes: Vec<String>,
}

/// The package type `package.yaml` declares.
pub fn package_type(package_yaml: Option<&str>) -> Result<PackageType, MetadataError> {
    let text = package_yaml.ok_or(MetadataError::NoPackageYaml)?;
    let parsed: PackageYaml =
        serde_saphyr::from_str(text).map_err(|e| MetadataError::BadPackageYaml(e.to_string()))?;
    match parsed.type_.as_deref().unwrap_or("") {
        "Application" => Ok(PackageType::Application),
        "Module" => Ok(PackageType::Module),
        other => Err(MetadataError::UnknownType(other.to_owned())),
    }
}

/// `package.yaml` and `changelog.yaml` as an ApplicationPackageVersion's `packageMetadata`.
pub fn package_metadata(
    package_yaml: Option<&str>,
    changelog_yaml: Option<&str>,
) -> Result<PackageMetadata, MetadataError> {
    let text = package_yaml.ok_or(MetadataError::NoPackageYaml)?;
    let parsed: PackageYaml =
        serde_saphyr::from_str(text).map_err(|e| MetadataError::BadPackageYaml(e.to_string()))?;
    let changelog = match changelog_yaml {
        Some(text) if !text.trim().is_empty() => {
            let c: ChangelogYaml = serde_saphyr::from_str(text)
                .map_err(|e| MetadataError::BadChangelog(e.to_string()))?;
            Some(PackageChangelog {
                features: c.features,
                fixes: c.fixes,
            })
        }
        _ => None,
    };
    let _ = parsed.name;
    let description = parsed
        .description
        .or(parsed.descriptions)
        .map(|d| api::module::LocalizedText { en: d.en, ru: d.ru });
    let rules = parsed.version_compatibility_rules.and_then(|r| {
        let rules = VersionCompatibilityRules {
            upgrade: r.upgrade.map(Into::into),
            downgrade: r.downgrade.map(Into::into),
        };
        (rules.upgrade.is_some() || rules.downgrade.is_some()).then_some(rules)
    });
    Ok(PackageMetadata {
        category: parsed.category.filter(|s| !s.is_empty()),
        changelog,
        description,
        licensing: parsed.licensing.map(|l| Licensing {
            editions: l
                .editions
                .into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        EditionLicense {
                            available: v.available,
                        },
                    )
                })
                .collect(),
        }),
        requirements: parsed
            .requirements
            .map(|r| api::module_release::ModuleReleaseRequirements {
                deckhouse: r.deckhouse.filter(|s| !s.is_empty()),
                kubernetes: r.kubernetes.filter(|s| !s.is_empty()),
                modules: r.modules,
            }),
        stage: parsed.stage.filter(|s| !s.is_empty()),
        version_compatibility_rules: rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"
name: echo
type: Application
description:
  en: An echo server
  ru: Эхо-сервер
category: Networking
stage: General Availability
requirements:
  deckhouse: ">= 1.70"
  kubernetes: ">= 1.29"
licensing:
  editions:
    ce: {available: true}
    ee: {available: false}
versionCompatibilityRules:
  upgrade:
    from: v1.0.0
    allowSkipMinor: 1
  downgrade:
    maxRollback: 2
"#;

    #[test]
    fn settings_schema_by_name() {
        let files = |names: &'static [&'static str]| {
            move |rel: &str| names.contains(&rel).then(|| rel.to_owned())
        };
        let table: &[(&'static [&'static str], Option<&str>)] = &[
            (&[], None),
            (&[SETTINGS_SCHEMA], Some(SETTINGS_SCHEMA)),
            (&[LEGACY_SETTINGS_SCHEMA], Some(LEGACY_SETTINGS_SCHEMA)),
            (
                &[LEGACY_SETTINGS_SCHEMA, SETTINGS_SCHEMA],
                Some(SETTINGS_SCHEMA),
            ),
            (&["openapi/values.yaml"], None),
        ];
        for (present, want) in table {
            assert_eq!(
                settings_schema(files(present)).as_deref(),
                *want,
                "{present:?}"
            );
        }
    }

    #[test]
    fn types() {
        let table: &[(Option<&str>, Result<PackageType, MetadataError>)] = &[
            (None, Err(MetadataError::NoPackageYaml)),
            (Some("type: Application"), Ok(PackageType::Application)),
            (Some("type: Module"), Ok(PackageType::Module)),
            (
                Some("name: x"),
                Err(MetadataError::UnknownType(String::new())),
            ),
            (
                Some("type: Garbage"),
                Err(MetadataError::UnknownType("Garbage".into())),
            ),
        ];
        for (yaml, want) in table {
            assert_eq!(&package_type(*yaml), want, "{yaml:?}");
        }
        assert!(matches!(
            package_type(Some("type: [")),
            Err(MetadataError::BadPackageYaml(_))
        ));
    }

    #[test]
    fn full_metadata() {
        let m = package_metadata(Some(FULL), Some("features: [one]\nfixes: [two, three]")).unwrap();
        assert_eq!(m.category.as_deref(), Some("Networking"));
        assert_eq!(m.stage.as_deref(), Some("General Availability"));
        let d = m.description.unwrap();
        assert_eq!(d.en.as_deref(), Some("An echo server"));
        assert_eq!(d.ru.as_deref(), Some("Эхо-сервер"));
        let c = m.changelog.unwrap();
        assert_eq!((c.features.len(), c.fixes.len()), (1, 2));
        let editions = m.licensing.unwrap().editions;
        assert_eq!(editions["ce"].available, Some(true));
        assert_eq!(editions["ee"].available, Some(false));
        let r = m.requirements.unwrap();
        assert_eq!(r.deckhouse.as_deref(), Some(">= 1.70"));
        let rules = m.version_compatibility_rules.unwrap();
        let up = rules.upgrade.unwrap();
        assert_eq!(
            (
                up.from.as_deref(),
                up.allow_skip_minor,
                up.allow_skip_patches
            ),
            (Some("v1.0.0"), Some(1), None)
        );
        assert_eq!(rules.downgrade.unwrap().max_rollback, Some(2));
    }

    #[test]
    fn sparse_metadata() {
        let m = package_metadata(Some("type: Application\ndescriptions: {en: x}"), None).unwrap();
        assert_eq!(m.description.unwrap().en.as_deref(), Some("x"));
        assert!(m.changelog.is_none());
        assert!(m.version_compatibility_rules.is_none());
        assert_eq!(
            package_metadata(None, None),
            Err(MetadataError::NoPackageYaml)
        );
        assert!(matches!(
            package_metadata(Some("type: Application"), Some("features: 3")),
            Err(MetadataError::BadChangelog(_))
        ));
    }
}
