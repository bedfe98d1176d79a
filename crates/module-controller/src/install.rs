//! The downloaded modules directory (`$DOWNLOADED_MODULES_DIR`):
//!
//! ```text
//! <root>/<module>/v<version>/…           one directory per installed release
//! <root>/modules/<weight>-<module>       → ../<module>/v<version>, the active release
//! <root>/.staging/…                      unpacking in progress (same file system, so a rename
//!                                        publishes it)
//! ```
//!
//! A release is unpacked in staging, checked, renamed into place, and only then the link is
//! switched — by renaming a new symlink over the old one, so a reader sees the old release or
//! the new one, never neither. A failed download or a refused image leaves the active release
//! untouched.

use std::fs;
use std::path::{Path, PathBuf};

use module_plan::config::ModuleSettings;
use module_plan::definition::ModuleDefinition;

use crate::Error;

/// Name of the directory holding the active-release links.
pub const LINKS_DIR: &str = "modules";
const STAGING_DIR: &str = ".staging";

/// The files of a module that matter before it runs.
#[derive(Clone, Debug)]
pub struct ModuleFiles {
    /// From `module.yaml` (and the module name).
    pub definition: ModuleDefinition,
    /// From `openapi/config-values.yaml` and `openapi/conversions/*.yaml`.
    pub settings: ModuleSettings,
}

/// Reads `module.yaml` and the settings files of an unpacked module.
pub fn read_module_files(module: &str, dir: &Path) -> Result<ModuleFiles, Error> {
    let read = |rel: &str| -> Result<Option<String>, Error> {
        let path = dir.join(rel);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_file() => fs::read_to_string(&path)
                .map(Some)
                .map_err(|e| Error::io("read", &path, e)),
            _ => Ok(None),
        }
    };
    let definition = ModuleDefinition::downloaded(module, read("module.yaml")?.as_deref())?;
    let config_values = read("openapi/config-values.yaml")?;
    let mut conversions = Vec::new();
    let conversions_dir = dir.join("openapi/conversions");
    if let Ok(entries) = fs::read_dir(&conversions_dir) {
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
            .collect();
        names.sort();
        for name in names {
            let rel = format!("openapi/conversions/{name}");
            if let Some(text) = read(&rel)? {
                conversions.push((rel, text));
            }
        }
    }
    let settings = ModuleSettings::from_files(module, config_values.as_deref(), &conversions)?;
    Ok(ModuleFiles {
        definition,
        settings,
    })
}

/// The downloaded modules directory.
#[derive(Clone, Debug)]
pub struct Downloaded {
    root: PathBuf,
}

impl Downloaded {
    /// Uses (and creates) `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, Error> {
        let root = root.into();
        for dir in [root.clone(), root.join(LINKS_DIR), root.join(STAGING_DIR)] {
            fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
        }
        Ok(Self { root })
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A fresh staging directory (removed on drop unless installed).
    pub fn staging(&self) -> Result<tempfile::TempDir, Error> {
        let dir = self.root.join(STAGING_DIR);
        tempfile::Builder::new()
            .prefix("module-")
            .tempdir_in(&dir)
            .map_err(|e| Error::io("create staging directory in", &dir, e))
    }

    /// `<root>/<module>/v<version>`.
    pub fn release_dir(&self, module: &str, version: &str) -> PathBuf {
        self.root
            .join(module)
            .join(format!("v{}", version.trim_start_matches('v')))
    }

    /// Moves a checked staging directory to `<root>/<module>/v<version>` (replacing an older copy
    /// of the same version).
    pub fn place(
        &self,
        staged: tempfile::TempDir,
        module: &str,
        version: &str,
    ) -> Result<PathBuf, Error> {
        let target = self.release_dir(module, version);
        let parent = self.root.join(module);
        fs::create_dir_all(&parent).map_err(|e| Error::io("create", &parent, e))?;
        let staged = staged.keep();
        if fs::symlink_metadata(&target).is_ok() {
            let old = self
                .root
                .join(STAGING_DIR)
                .join(format!("replaced-{module}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&old);
            fs::rename(&target, &old).map_err(|e| Error::io("move aside", &target, e))?;
            let _ = fs::remove_dir_all(&old);
        }
        fs::rename(&staged, &target).map_err(|e| Error::io("place", &target, e))?;
        Ok(target)
    }

    /// Points `modules/<weight>-<module>` at `../<module>/v<version>` atomically and removes
    /// links of the module under another weight.
    pub fn activate(&self, module: &str, version: &str, weight: i64) -> Result<(), Error> {
        let links = self.root.join(LINKS_DIR);
        let name = format!("{weight}-{module}");
        let target = format!("../{module}/v{}", version.trim_start_matches('v'));
        let temp = links.join(format!(".{name}.tmp"));
        let _ = fs::remove_file(&temp);
        std::os::unix::fs::symlink(&target, &temp).map_err(|e| Error::io("symlink", &temp, e))?;
        let link = links.join(&name);
        fs::rename(&temp, &link).map_err(|e| Error::io("switch", &link, e))?;
        for (other, _) in self.links(module)? {
            if other != name {
                let path = links.join(&other);
                fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
            }
        }
        Ok(())
    }

    /// Removes the module's active link (`rollback` of an override, module deletion).
    pub fn deactivate(&self, module: &str) -> Result<(), Error> {
        let links = self.root.join(LINKS_DIR);
        for (name, _) in self.links(module)? {
            let path = links.join(name);
            fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        }
        Ok(())
    }

    fn links(&self, module: &str) -> Result<Vec<(String, String)>, Error> {
        let links = self.root.join(LINKS_DIR);
        let entries = fs::read_dir(&links).map_err(|e| Error::io("read", &links, e))?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let (weight, rest) = module_plan::definition::parse_dir_name(&name);
            if weight.is_none() || rest != module {
                continue;
            }
            if let Ok(target) = fs::read_link(entry.path()) {
                out.push((name, target.to_string_lossy().into_owned()));
            }
        }
        Ok(out)
    }

    /// The active version of a module (`1.2.3` for a link to `../<module>/v1.2.3`).
    pub fn active_version(&self, module: &str) -> Option<String> {
        let links = self.links(module).ok()?;
        let (_, target) = links.first()?;
        let last = target.rsplit('/').next()?;
        Some(last.trim_start_matches('v').to_owned())
    }

    /// Removes an installed release directory (cleanup of old releases).
    pub fn remove_release(&self, module: &str, version: &str) -> Result<(), Error> {
        let dir = self.release_dir(module, version);
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", &dir, e)),
        }
    }
}

/// Writes the source's registry settings into the module's values schema
/// (`openapi/values.yaml`, property `registry` with defaults `base`, `dockercfg`, `scheme`,
/// `ca`), as Deckhouse's downloader does, so that the module pulls its images from where it
/// came from. The file is rewritten owner-only: it may hold credentials.
pub fn inject_registry(
    dir: &Path,
    module: &str,
    registry: &api::module_source::SourceRegistry,
) -> Result<(), Error> {
    use serde_json::{Value, json};
    let path = dir.join("openapi/values.yaml");
    let mut schema: Value = match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => {
            serde_saphyr::from_str(&text).map_err(|e| module_plan::Error::Parse {
                what: "openapi/values.yaml".into(),
                reason: e.to_string(),
            })?
        }
        // A module without a values schema has its values checked against its config schema
        // (addon-operator's rule); the schema made here keeps that by extending it.
        Ok(_) => json!({"x-extend": {"schema": "config-values.yaml"}, "type": "object"}),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            json!({"x-extend": {"schema": "config-values.yaml"}, "type": "object"})
        }
        Err(e) => return Err(Error::io("read", &path, e)),
    };
    let Some(object) = schema.as_object_mut() else {
        return Err(module_plan::Error::Parse {
            what: "openapi/values.yaml".into(),
            reason: "the schema is not an object".into(),
        }
        .into());
    };
    let properties = object.entry("properties").or_insert_with(|| json!({}));
    let Some(properties) = properties.as_object_mut() else {
        return Err(module_plan::Error::Parse {
            what: "openapi/values.yaml".into(),
            reason: "properties is not an object".into(),
        }
        .into());
    };
    let string = |default: &str| json!({"type": "string", "default": default});
    let base = format!("{}/{module}", registry.repo.trim().trim_end_matches('/'));
    properties.insert(
        "registry".into(),
        json!({
            "type": "object",
            "default": {},
            "properties": {
                "base": string(&base),
                "dockercfg": string(registry.docker_cfg.as_deref().unwrap_or_default()),
                "scheme": string(&registry.scheme.as_str().to_lowercase()),
                "ca": string(registry.ca.as_deref().unwrap_or_default()),
            }
        }),
    );
    let parent = path.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, e))?;
    let text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    let temp = parent.join(".values.yaml.tmp");
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| Error::io("create", &temp, e))?;
        file.write_all(text.as_bytes())
            .map_err(|e| Error::io("write", &temp, e))?;
    }
    std::fs::rename(&temp, &path).map_err(|e| Error::io("rename", &path, e))?;
    Ok(())
}

/// The md5 of the ModuleSource's `spec.registry` JSON (hex): the
/// `modules.deckhouse.io/registry-spec-checksum` annotation.
pub fn registry_checksum(registry: &api::module_source::SourceRegistry) -> String {
    md5_hex(&serde_json::to_vec(registry).unwrap_or_default())
}

/// The md5 of `data` in lower-case hex (Go's `fmt.Sprintf("%x", md5.Sum(data))`).
pub fn md5_hex(data: &[u8]) -> String {
    use md5::Digest;
    md5::Md5::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
