//! Embedded modules: the modules directory shipped with the platform (`/deckhouse/modules`).
//! Each sub-directory (symlinks to directories are followed) is a module named by its
//! `module.yaml` or by the `NNN-name` convention; `000-common` and `007-registrypackages` are
//! not modules.

use std::fs;
use std::path::{Path, PathBuf};

use module_plan::definition::{ModuleDefinition, SKIPPED_DIRS};

use crate::Error;
use crate::install::{ModuleFiles, read_module_files};

/// An embedded module found on disk.
#[derive(Clone, Debug)]
pub struct EmbeddedModule {
    /// Its directory.
    pub dir: PathBuf,
    /// Its definition and settings.
    pub files: ModuleFiles,
}

/// Reads every module under `dir`, sorted by weight then name.
pub fn discover(dir: &Path) -> Result<Vec<EmbeddedModule>, Error> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io("read", dir, e))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let dir_name = entry.file_name().to_string_lossy().into_owned();
        if SKIPPED_DIRS.contains(&dir_name.as_str()) || dir_name.starts_with('.') {
            continue;
        }
        // `metadata` follows symlinks: a link to a directory is a module too.
        if !fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let module_yaml = match fs::read_to_string(path.join("module.yaml")) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io("read", path.join("module.yaml"), e)),
        };
        let definition = ModuleDefinition::embedded(&dir_name, module_yaml.as_deref())?;
        let mut files = read_module_files(&definition.name, &path)?;
        files.definition = definition;
        out.push(EmbeddedModule { dir: path, files });
    }
    out.sort_by(|a, b| {
        (a.files.definition.weight, &a.files.definition.name)
            .cmp(&(b.files.definition.weight, &b.files.definition.name))
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_and_module_yaml() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [
            "000-common",
            "007-registrypackages",
            "040-node-manager",
            "101-cert-manager/openapi",
            "other/openapi",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(
            root.join("101-cert-manager/openapi/config-values.yaml"),
            "type: object\nproperties:\n  a: {type: string, default: x}\n",
        )
        .unwrap();
        fs::write(
            root.join("other/module.yaml"),
            "name: prometheus\nweight: 300\nstage: Experimental\n",
        )
        .unwrap();
        fs::write(
            root.join("other/openapi/config-values.yaml"),
            "type: object\nx-config-version: 2\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(root.join("040-node-manager"), root.join("050-linked")).unwrap();
        fs::write(root.join("README.md"), "not a module").unwrap();
        let found = discover(root).unwrap();
        let names: Vec<(i64, &str)> = found
            .iter()
            .map(|m| (m.files.definition.weight, m.files.definition.name.as_str()))
            .collect();
        assert_eq!(
            names,
            vec![
                (40, "node-manager"),
                (50, "linked"),
                (101, "cert-manager"),
                (300, "prometheus")
            ]
        );
        let cert = &found[2].files.settings;
        assert_eq!(
            cert.values(None, None).unwrap(),
            serde_json::json!({"a": "x"})
        );
        assert_eq!(found[3].files.settings.latest(), 2);
        assert!(found[3].files.definition.is_experimental());
        fs::create_dir_all(root.join("bad_name")).unwrap();
        let err = discover(root).unwrap_err().to_string();
        assert!(err.contains("should be in kebab-case"), "{err}");
    }
}
