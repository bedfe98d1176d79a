//! What a module says about itself: `module.yaml`, or, when it has none (or it names no name
//! or weight), its directory name `NNN-name` (`^(([0-9]+)-)?(.+)$`, weight 100 by default).
//! Names must be kebab-case and survive a kebab → camel → kebab round trip, because the
//! module's values live under the camelCase key.

use api::module::{
    Accessibility, DisableOptions, LocalizedText, ModuleProperties, ModuleRequirements,
};
use serde::Deserialize;

use crate::Error;

/// Weight of an embedded module whose directory and `module.yaml` name none.
pub const DEFAULT_WEIGHT: i64 = 100;
/// Weight of a downloaded module whose `module.yaml` names none.
pub const DOWNLOADED_WEIGHT: i64 = 900;
/// Embedded directories that are not modules.
pub const SKIPPED_DIRS: [&str; 2] = ["000-common", "007-registrypackages"];
/// The `stage` of experimental modules.
pub const STAGE_EXPERIMENTAL: &str = "Experimental";

/// `module.yaml` as written.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleYaml {
    /// Module name.
    #[serde(default)]
    pub name: Option<String>,
    /// Module weight.
    #[serde(default)]
    pub weight: Option<i64>,
    /// Runs first, in the main queue.
    #[serde(default)]
    pub critical: Option<bool>,
    /// Tags (become `module.deckhouse.io/<tag>` labels).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Subsystems.
    #[serde(default)]
    pub subsystems: Vec<String>,
    /// The module's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Lifecycle stage (`Experimental`, `Preview`, `General Availability`…).
    #[serde(default)]
    pub stage: Option<String>,
    /// Only one module of the group may be enabled.
    #[serde(default)]
    pub exclusive_group: Option<String>,
    /// Descriptions.
    #[serde(default)]
    pub descriptions: Option<LocalizedText>,
    /// Requirements.
    #[serde(default)]
    pub requirements: Option<ModuleRequirements>,
    /// Availability per edition.
    #[serde(default)]
    pub accessibility: Option<Accessibility>,
    /// Disable protection.
    #[serde(default)]
    pub disable: Option<DisableOptions>,
}

impl ModuleYaml {
    /// Parses `module.yaml` (an empty file is an empty definition).
    pub fn parse(text: &str) -> Result<Self, Error> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_saphyr::from_str(text).map_err(|e| Error::Parse {
            what: "module.yaml".into(),
            reason: e.to_string(),
        })
    }
}

/// A module's identity and metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleDefinition {
    /// The module name (kebab-case).
    pub name: String,
    /// Its weight.
    pub weight: i64,
    /// `module.yaml` (default when absent).
    pub yaml: ModuleYaml,
}

impl ModuleDefinition {
    /// The definition of an embedded module in directory `dir_name` with its `module.yaml`.
    pub fn embedded(dir_name: &str, module_yaml: Option<&str>) -> Result<Self, Error> {
        let yaml = module_yaml
            .map(ModuleYaml::parse)
            .transpose()?
            .unwrap_or_default();
        let (dir_weight, dir_module) = parse_dir_name(dir_name);
        let name = yaml.name.clone().unwrap_or(dir_module);
        let weight = yaml.weight.or(dir_weight).unwrap_or(DEFAULT_WEIGHT);
        validate_name(&name)?;
        Ok(Self { name, weight, yaml })
    }

    /// The definition of a downloaded module `name` with the `module.yaml` of its release.
    pub fn downloaded(name: &str, module_yaml: Option<&str>) -> Result<Self, Error> {
        let yaml = module_yaml
            .map(ModuleYaml::parse)
            .transpose()?
            .unwrap_or_default();
        validate_name(name)?;
        if let Some(other) = yaml.name.as_deref()
            && other != name
        {
            return Err(Error::Definition {
                name: name.to_owned(),
                reason: format!("module.yaml names the module {other:?}"),
            });
        }
        let weight = yaml.weight.unwrap_or(DOWNLOADED_WEIGHT);
        Ok(Self {
            name: name.to_owned(),
            weight,
            yaml,
        })
    }

    /// Whether the module's stage is Experimental.
    pub fn is_experimental(&self) -> bool {
        self.yaml.stage.as_deref() == Some(STAGE_EXPERIMENTAL)
    }

    /// The Module `.properties` this definition sets (source, version and channel are the
    /// caller's).
    pub fn properties(&self) -> ModuleProperties {
        ModuleProperties {
            weight: Some(self.weight),
            stage: self.yaml.stage.clone(),
            namespace: self.yaml.namespace.clone(),
            subsystems: self.yaml.subsystems.clone(),
            exclusive_group: self.yaml.exclusive_group.clone(),
            critical: self.yaml.critical,
            requirements: self.yaml.requirements.clone(),
            disable_options: self.yaml.disable.clone(),
            accessibility: self.yaml.accessibility.clone(),
            ..Default::default()
        }
    }

    /// The name of the symlink that activates a downloaded module: `<weight>-<name>`.
    pub fn link_name(&self) -> String {
        format!("{}-{}", self.weight, self.name)
    }
}

/// Splits `NNN-name` into its weight and name (`^(([0-9]+)-)?(.+)$`).
pub fn parse_dir_name(dir_name: &str) -> (Option<i64>, String) {
    if let Some((prefix, rest)) = dir_name.split_once('-')
        && !prefix.is_empty()
        && prefix.bytes().all(|b| b.is_ascii_digit())
        && !rest.is_empty()
        && let Ok(weight) = prefix.parse()
    {
        return (Some(weight), rest.to_owned());
    }
    (None, dir_name.to_owned())
}

/// `echo-server` → `echoServer`.
pub fn camel_case(kebab: &str) -> String {
    let mut out = String::with_capacity(kebab.len());
    let mut upper = false;
    for c in kebab.chars() {
        if c == '-' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `echoServer` → `echo-server`.
pub fn kebab_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A module name must be kebab-case and restorable from its camelCase form.
pub fn validate_name(name: &str) -> Result<(), Error> {
    let kebab = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if !kebab || kebab_case(&camel_case(name)) != name {
        return Err(Error::Definition {
            name: name.to_owned(),
            reason: "should be in kebab-case and be restorable from camelCase".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_names() {
        for (dir, weight, name) in [
            ("040-node-manager", Some(40), "node-manager"),
            ("echo", None, "echo"),
            ("900-x", Some(900), "x"),
            ("-x", None, "-x"),
            ("12-", None, "12-"),
            ("1a-b", None, "1a-b"),
        ] {
            assert_eq!(parse_dir_name(dir), (weight, name.to_owned()), "{dir}");
        }
    }

    #[test]
    fn names_round_trip_or_are_refused() {
        assert_eq!(camel_case("cert-manager"), "certManager");
        assert_eq!(kebab_case("certManager"), "cert-manager");
        for good in ["echo", "cert-manager", "cni-cilium", "a1-b2"] {
            validate_name(good).unwrap();
        }
        for bad in ["Echo", "echo_server", "a--b", "-a", "a-", "", "x-1a"] {
            // "x-1a" → "x1a" → "x1a": not restorable.
            let err = validate_name(bad).unwrap_err().to_string();
            assert!(err.contains("kebab-case"), "{bad}: {err}");
        }
    }

    #[test]
    fn module_yaml_wins_over_the_directory() {
        let d = ModuleDefinition::embedded(
            "040-node-manager",
            Some("name: node-manager\nweight: 41\nstage: Experimental\ncritical: true\nexclusiveGroup: nm\nrequirements:\n  deckhouse: '>= 1.60'\n  modules:\n    cni-cilium: '>= 1.0'\naccessibility:\n  editions:\n    _default:\n      available: true\n      enabledInBundles: [Default]\ndisable:\n  confirmation: true\n  message: careful\n"),
        )
        .unwrap();
        assert_eq!((d.name.as_str(), d.weight), ("node-manager", 41));
        assert!(d.is_experimental());
        let p = d.properties();
        assert_eq!(p.exclusive_group.as_deref(), Some("nm"));
        assert_eq!(
            p.requirements.unwrap().modules["cni-cilium"],
            ">= 1.0".to_owned()
        );
        assert_eq!(
            p.accessibility.unwrap().editions["_default"].enabled_in_bundles,
            vec!["Default".to_owned()]
        );
        assert_eq!(p.disable_options.unwrap().confirmation, Some(true));
        let d = ModuleDefinition::embedded("040-node-manager", None).unwrap();
        assert_eq!((d.name.as_str(), d.weight), ("node-manager", 40));
        let d = ModuleDefinition::embedded("echo", Some("")).unwrap();
        assert_eq!(d.weight, DEFAULT_WEIGHT);
        assert_eq!(d.link_name(), "100-echo");
    }

    #[test]
    fn downloaded_modules() {
        let d = ModuleDefinition::downloaded("echo", Some("weight: 910\n")).unwrap();
        assert_eq!(d.link_name(), "910-echo");
        assert_eq!(
            ModuleDefinition::downloaded("echo", None).unwrap().weight,
            DOWNLOADED_WEIGHT
        );
        let err = ModuleDefinition::downloaded("echo", Some("name: other\n"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "module \"echo\": module.yaml names the module \"other\""
        );
        let err = ModuleDefinition::downloaded("echo", Some("weight: [")).unwrap_err();
        assert!(err.to_string().starts_with("module.yaml: "), "{err}");
    }
}
