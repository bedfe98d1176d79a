//! Removing a CNI's traces from a node: its configuration files in the CNI config directory
//! and its links, through an `ip` command. Both are parameters, so a test points them at a
//! temporary directory and a fake `ip`. Every step is idempotent: a file or link already gone
//! is not an error.

use std::path::{Path, PathBuf};

use super::plan::{self, Artifacts};

/// Where the agent cleans.
#[derive(Clone, Debug)]
pub struct Node {
    /// The CNI config directory (`/etc/cni/net.d`).
    pub cni_conf_dir: PathBuf,
    /// The `ip` command (`ip`, from iproute2).
    pub ip_command: PathBuf,
}

impl Default for Node {
    fn default() -> Self {
        Self {
            cni_conf_dir: PathBuf::from("/etc/cni/net.d"),
            ip_command: PathBuf::from("ip"),
        }
    }
}

/// What a cleanup removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Files removed (names in the CNI config directory).
    pub files: Vec<String>,
    /// Links deleted.
    pub links: Vec<String>,
}

/// Removes `cni`'s configuration files and links from the node.
pub async fn clean(node: &Node, cni: &str) -> Result<Removed, String> {
    let artifacts =
        plan::artifacts(cni).ok_or_else(|| format!("unknown CNI {cni:?}: nothing to clean"))?;
    let mut removed = Removed {
        files: remove_files(&node.cni_conf_dir, &artifacts)?,
        ..Default::default()
    };
    for link in artifacts.links {
        if delete_link(&node.ip_command, link).await? {
            removed.links.push((*link).to_owned());
        }
    }
    Ok(removed)
}

/// The configuration files of the CNI config directory, `(name, contents)` (a missing
/// directory holds none; a file that cannot be read as text is left out). Bounded: a node's
/// CNI configuration is a few small files.
pub fn read_config_files(dir: &Path) -> Result<Vec<(String, String)>, String> {
    const MAX_FILE: u64 = 1 << 20;
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("reading {}: {e}", dir.display())),
    };
    let mut files = Vec::new();
    for entry in entries.flatten().take(256) {
        let path = entry.path();
        if !entry
            .metadata()
            .is_ok_and(|m| m.is_file() && m.len() <= MAX_FILE)
        {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(&path) {
            files.push((entry.file_name().to_string_lossy().into_owned(), text));
        }
    }
    Ok(files)
}

fn remove_files(dir: &Path, artifacts: &Artifacts) -> Result<Vec<String>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("reading {}: {e}", dir.display())),
    };
    let mut removed = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("reading {}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !plan::is_cni_file(&name, artifacts) {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => removed.push(name),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("removing {}: {e}", entry.path().display())),
        }
    }
    removed.sort();
    Ok(removed)
}

/// `ip link delete LINK`; `Ok(false)` when there is no such link.
async fn delete_link(ip: &Path, link: &str) -> Result<bool, String> {
    let output = tokio::process::Command::new(ip)
        .args(["link", "delete", link])
        .output()
        .await
        .map_err(|e| format!("running {} link delete {link}: {e}", ip.display()))?;
    if output.status.success() {
        return Ok(true);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("Cannot find device") {
        return Ok(false);
    }
    Err(format!(
        "{} link delete {link}: {}",
        ip.display(),
        stderr.trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn removes_the_old_cnis_files_and_links_once() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("net.d");
        std::fs::create_dir(&conf).unwrap();
        for f in ["10-flannel.conflist", "05-cilium-cni.conf", "README"] {
            std::fs::write(conf.join(f), "{}").unwrap();
        }
        let links = dir.path().join("links");
        std::fs::create_dir(&links).unwrap();
        std::fs::write(links.join("flannel.1"), "").unwrap();
        let ip = dir.path().join("ip");
        std::fs::write(
            &ip,
            format!(
                "#!/bin/sh\n[ -e {l}/$3 ] || {{ echo \"Cannot find device \\\"$3\\\"\" >&2; exit 1; }}\nrm {l}/$3\n",
                l = links.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&ip, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let node = Node {
            cni_conf_dir: conf.clone(),
            ip_command: ip,
        };
        let removed = clean(&node, "flannel").await.unwrap();
        assert_eq!(removed.files, ["10-flannel.conflist"]);
        assert_eq!(removed.links, ["flannel.1"]);
        assert!(conf.join("05-cilium-cni.conf").exists());
        assert!(conf.join("README").exists());
        // Again: nothing left, no error.
        assert_eq!(clean(&node, "flannel").await.unwrap(), Removed::default());
    }
}
