//! containerd's registry drop-in: one `_default/hosts.toml` that sends every registry without a
//! directory of its own to the agent, plus the agent's CA next to it.
//!
//! The file names only the agent, never a route or a credential, so it is byte-stable: routes
//! and credentials change in the agent's memory, not on the node's disk. Host directories the
//! Deckhouse-managed configuration created earlier (listed in `deckhouse_hosts_state.json`,
//! shared with the previous implementation's bashible step) are removed when no longer wanted,
//! because a per-host directory wins over `_default` and would route pulls around the agent.
//! Directories an administrator wrote are never touched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The fallback directory containerd reads for registries without their own.
pub const DEFAULT_HOST: &str = "_default";
/// The list of host directories the managed configuration owns.
pub const STATE_FILE: &str = "deckhouse_hosts_state.json";
/// The agent's CA, next to the hosts file.
pub const PROXY_CA_FILE: &str = "proxy-ca.crt";
/// containerd's per-host configuration file.
pub const HOSTS_FILE: &str = "hosts.toml";

/// The drop-in directory's wanted content: files relative to the root, and the host
/// directories they make up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desired {
    /// Relative path → content.
    pub files: BTreeMap<PathBuf, Vec<u8>>,
    /// Host directories owned by this content.
    pub hosts: Vec<String>,
}

/// What [`apply`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Files whose content changed.
    pub written: Vec<PathBuf>,
    /// Host directories removed.
    pub removed_hosts: Vec<String>,
}

impl Applied {
    /// Whether anything on disk changed.
    pub fn changed(&self) -> bool {
        !self.written.is_empty() || !self.removed_hosts.is_empty()
    }
}

/// Errors writing the drop-in.
#[derive(Debug, thiserror::Error)]
pub enum DropInError {
    /// A filesystem operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The drop-in for a layout. `configured` is false for an empty layout: then nothing is wanted
/// and [`apply`] withdraws what the agent wrote. `endpoint` is the agent's URL
/// (`https://127.0.0.1:5001`), `ca_pem` its CA, `root` the drop-in directory as containerd
/// sees it.
pub fn render(configured: bool, endpoint: &str, ca_pem: &str, root: &Path) -> Desired {
    if !configured {
        return Desired::default();
    }
    let ca_path = root.join(DEFAULT_HOST).join(PROXY_CA_FILE);
    let files = BTreeMap::from([
        (
            Path::new(DEFAULT_HOST).join(HOSTS_FILE),
            hosts_toml(endpoint, &ca_path).into_bytes(),
        ),
        (
            Path::new(DEFAULT_HOST).join(PROXY_CA_FILE),
            ca_pem.as_bytes().to_vec(),
        ),
    ]);
    Desired {
        files,
        hosts: vec![DEFAULT_HOST.to_owned()],
    }
}

/// The `_default/hosts.toml` text. Written by hand for byte stability. It has a `[host]` table
/// (containerd 1.6 cannot decode a file with root keys only) and no `server`, so containerd
/// still falls back to the registry itself when the agent is down.
fn hosts_toml(endpoint: &str, ca_path: &Path) -> String {
    format!(
        "# Managed by the Deckhouse registry agent. Do not edit.\n\
         #\n\
         # Every registry without a directory of its own is pulled through the agent, which\n\
         # routes each request by the registry named in the `ns` query parameter.\n\
         [host]\n\
         \n  [host.\"{endpoint}\"]\n    \
         capabilities = [\"pull\", \"resolve\"]\n    \
         ca = [{ca:?}]\n",
        ca = ca_path.display().to_string(),
    )
}

/// Converges `root` on `desired`: writes what differs (atomically, 0644), removes host
/// directories listed in the state file that are no longer wanted, and records the new list.
pub fn apply(root: &Path, desired: &Desired) -> Result<Applied, DropInError> {
    let previous = read_state(root);
    create_dir(root)?;
    let mut applied = Applied::default();
    for (relative, content) in &desired.files {
        if write_if_changed(&root.join(relative), content)? {
            applied.written.push(relative.clone());
        }
    }
    for host in previous {
        if desired.hosts.contains(&host) || !is_plain_name(&host) {
            continue;
        }
        let dir = root.join(&host);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => applied.removed_hosts.push(host),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(io("removing", &dir, source)),
        }
    }
    let state = serde_json::to_vec(&desired.hosts).expect("a list of strings serializes");
    write_if_changed(&root.join(STATE_FILE), &state)?;
    Ok(applied)
}

/// Whether the agent can write the drop-in directory (a read-only root filesystem cannot).
pub fn check_writable(root: &Path) -> Result<(), DropInError> {
    create_dir(root)?;
    let probe = root.join(".writable-probe");
    std::fs::write(&probe, b"").map_err(|source| io("writing", &probe, source))?;
    std::fs::remove_file(&probe).map_err(|source| io("removing", &probe, source))
}

/// A state file entry must name a directory directly under the root: a hostile or corrupt
/// state file must not make the agent delete anything else.
fn is_plain_name(host: &str) -> bool {
    !host.is_empty() && host != "." && host != ".." && !host.contains('/') && !host.contains('\0')
}

/// Unreadable or corrupt state means "nothing known": better to leave a directory behind than
/// to delete configuration on a parse error.
fn read_state(root: &Path) -> Vec<String> {
    std::fs::read(root.join(STATE_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn create_dir(dir: &Path) -> Result<(), DropInError> {
    std::fs::create_dir_all(dir).map_err(|source| io("creating", dir, source))
}

/// Writes `content` to `path` atomically when it differs; returns whether it wrote.
fn write_if_changed(path: &Path, content: &[u8]) -> Result<bool, DropInError> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    if std::fs::read(path).is_ok_and(|existing| existing == content) {
        return Ok(false);
    }
    let dir = path.parent().expect("drop-in files live in a directory");
    create_dir(dir)?;
    let mut temp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|source| io("creating a file in", dir, source))?;
    temp.write_all(content)
        .and_then(|()| temp.as_file().sync_all())
        .and_then(|()| {
            temp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))
        })
        .map_err(|source| io("writing", temp.path(), source))?;
    temp.persist(path)
        .map_err(|e| io("renaming into", path, e.error))?;
    Ok(true)
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> DropInError {
    DropInError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn hosts_file_is_byte_stable_and_names_only_the_agent() {
        let root = Path::new("/etc/containerd/registry.d");
        let desired = render(true, "https://127.0.0.1:5001", CA, root);
        assert_eq!(desired, render(true, "https://127.0.0.1:5001", CA, root));
        let hosts = String::from_utf8(
            desired.files[&Path::new("_default/hosts.toml").to_path_buf()].clone(),
        )
        .unwrap();
        assert!(hosts.contains("[host]\n"));
        assert!(hosts.contains("[host.\"https://127.0.0.1:5001\"]"));
        assert!(hosts.contains("capabilities = [\"pull\", \"resolve\"]"));
        assert!(hosts.contains("ca = [\"/etc/containerd/registry.d/_default/proxy-ca.crt\"]"));
        assert!(
            !hosts.contains("server"),
            "containerd keeps its own fallback"
        );
        assert_eq!(desired.hosts, ["_default"]);
    }

    #[test]
    fn apply_writes_once_then_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let desired = render(true, "https://127.0.0.1:5001", CA, dir.path());
        let first = apply(dir.path(), &desired).unwrap();
        assert_eq!(first.written.len(), 2);
        let mtime = std::fs::metadata(dir.path().join("_default/hosts.toml"))
            .unwrap()
            .modified()
            .unwrap();
        let second = apply(dir.path(), &desired).unwrap();
        assert!(!second.changed());
        let again = std::fs::metadata(dir.path().join("_default/hosts.toml"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(mtime, again);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap(),
            r#"["_default"]"#
        );
    }

    #[test]
    fn empty_layout_withdraws_managed_dirs_and_keeps_the_admins() {
        let dir = tempfile::tempdir().unwrap();
        // What the previous implementation left behind, and what an admin wrote.
        std::fs::create_dir_all(dir.path().join("registry.deckhouse.io")).unwrap();
        std::fs::write(dir.path().join("registry.deckhouse.io/hosts.toml"), "x").unwrap();
        std::fs::create_dir_all(dir.path().join("admin.example")).unwrap();
        std::fs::write(
            dir.path().join(STATE_FILE),
            r#"["registry.deckhouse.io", "../etc", "/"]"#,
        )
        .unwrap();

        let applied = apply(
            dir.path(),
            &render(true, "https://127.0.0.1:5001", CA, dir.path()),
        )
        .unwrap();
        assert_eq!(applied.removed_hosts, ["registry.deckhouse.io"]);
        assert!(dir.path().join("_default/hosts.toml").exists());

        let withdrawn = apply(
            dir.path(),
            &render(false, "https://127.0.0.1:5001", CA, dir.path()),
        )
        .unwrap();
        assert_eq!(withdrawn.removed_hosts, ["_default"]);
        assert!(!dir.path().join("_default").exists());
        assert!(
            dir.path().join("admin.example").exists(),
            "an admin's directory stays"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap(),
            "[]"
        );
    }

    /// Issue #19 point 4, the node side of the Direct-mode handover: what the previous
    /// implementation's bashible step 030 left (a directory per host with its CA, and the list
    /// as that step writes it) is taken over at the first apply and nothing changes after.
    #[test]
    fn the_previous_implementations_host_dirs_are_taken_over_once() {
        let dir = tempfile::tempdir().unwrap();
        for host in ["registry.d8-system.svc:5001", "registry.deckhouse.ru"] {
            std::fs::create_dir_all(dir.path().join(host)).unwrap();
            std::fs::write(dir.path().join(host).join("ca.crt"), CA).unwrap();
            std::fs::write(
                dir.path().join(host).join("hosts.toml"),
                format!("server = \"https://{host}\"\n[host]\n"),
            )
            .unwrap();
        }
        // Step 030 writes the list with `echo`, so with a trailing newline.
        std::fs::write(
            dir.path().join(STATE_FILE),
            "[\"registry.d8-system.svc:5001\",\"registry.deckhouse.ru\"]\n",
        )
        .unwrap();
        let desired = render(true, "https://127.0.0.1:5001", CA, dir.path());

        let first = apply(dir.path(), &desired).unwrap();
        assert_eq!(
            first.removed_hosts,
            ["registry.d8-system.svc:5001", "registry.deckhouse.ru"]
        );
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["_default", STATE_FILE]);

        let second = apply(dir.path(), &desired).unwrap();
        assert!(!second.changed(), "{second:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap(),
            r#"["_default"]"#
        );
    }

    #[test]
    fn corrupt_state_removes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("keep.example")).unwrap();
        std::fs::write(dir.path().join(STATE_FILE), "{not json").unwrap();
        let applied = apply(dir.path(), &render(false, "x", CA, dir.path())).unwrap();
        assert!(applied.removed_hosts.is_empty());
        assert!(dir.path().join("keep.example").exists());
    }

    #[test]
    fn unwritable_root_is_reported() {
        let error = check_writable(Path::new("/proc/d8-agent-dropin")).unwrap_err();
        assert!(
            error.to_string().contains("/proc/d8-agent-dropin"),
            "{error}"
        );
    }
}
