//! chroot mode: with ConfigMap `d8-system/chroot-mode`, the Deckhouse controller runs shell
//! hooks and `enabled` scripts chrooted into `<root>/<module>`, where only the module's own
//! directory and a short list of system directories are bind-mounted (addon-operator's
//! environment manager with Deckhouse's object list). Everything else of the controller's
//! filesystem is invisible to them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::mount::{MountFlags, UnmountFlags, mount_bind_recursive, mount_remount, unmount};

use crate::error::Error;

/// How prepared a module's chroot is: enabled scripts need less than hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Environment {
    None,
    EnabledScript,
    ShellHook,
}

/// What an object puts into the chroot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectKind {
    /// A bind mount of a directory, optionally read-only.
    Mount { read_only: bool },
    /// A copy of a file.
    File,
    /// An empty file standing for `/dev/null` (a device node in Deckhouse).
    DevNull,
}

/// One entry of the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChrootObject {
    pub source: PathBuf,
    /// Where it appears inside the chroot; `None` means at the source path.
    pub target: Option<PathBuf>,
    pub kind: ObjectKind,
    /// The environment from which on it is present.
    pub environment: Environment,
}

impl ChrootObject {
    fn mount(source: &str, read_only: bool, environment: Environment) -> Self {
        Self {
            source: source.into(),
            target: None,
            kind: ObjectKind::Mount { read_only },
            environment,
        }
    }
}

/// Where chroots live and what goes into them.
#[derive(Debug, Clone)]
pub struct ChrootOptions {
    /// Deckhouse uses `/chroot`; each module gets `<root>/<module>`.
    pub root: PathBuf,
    /// Mounted at `/tmp` inside; the runner writes a chrooted hook's files here.
    pub tmp_source: PathBuf,
    pub objects: Vec<ChrootObject>,
}

impl ChrootOptions {
    /// Deckhouse's list: the shell/python/helm libraries and candi for hooks; `/usr`, `/bin`,
    /// `/lib`, `/lib64`, the shell library and shell-operator read-only, `/tmp`,
    /// `cap_last_cap` and `/dev/null` for everything. Sources missing on this machine are
    /// skipped when the environment is assembled.
    pub fn deckhouse(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let tmp_source = root.join("tmp");
        use Environment::{EnabledScript, ShellHook};
        let objects = vec![
            ChrootObject::mount("/deckhouse/python_lib", true, ShellHook),
            ChrootObject::mount("/deckhouse/candi", true, ShellHook),
            ChrootObject::mount("/deckhouse/helm_lib", true, ShellHook),
            ChrootObject {
                source: tmp_source.clone(),
                target: Some("/tmp".into()),
                kind: ObjectKind::Mount { read_only: false },
                environment: EnabledScript,
            },
            ChrootObject::mount("/usr", true, EnabledScript),
            ChrootObject::mount("/bin", true, EnabledScript),
            ChrootObject::mount("/lib", true, EnabledScript),
            ChrootObject::mount("/lib64", true, EnabledScript),
            ChrootObject::mount("/deckhouse/shell_lib", true, EnabledScript),
            ChrootObject::mount("/shell-operator", true, EnabledScript),
            ChrootObject {
                source: "/proc/sys/kernel/cap_last_cap".into(),
                target: None,
                kind: ObjectKind::File,
                environment: EnabledScript,
            },
            ChrootObject {
                source: "/deckhouse/shell_lib.sh".into(),
                target: None,
                kind: ObjectKind::File,
                environment: EnabledScript,
            },
            ChrootObject {
                source: PathBuf::new(),
                target: Some("/dev/null".into()),
                kind: ObjectKind::DevNull,
                environment: EnabledScript,
            },
        ];
        Self {
            root,
            tmp_source,
            objects,
        }
    }

    /// `<root>/<module>`.
    pub fn module_root(&self, module: &str) -> PathBuf {
        self.root.join(module)
    }
}

/// `inner` (absolute) under `root`.
pub(crate) fn inside(root: &Path, inner: &Path) -> PathBuf {
    root.join(inner.strip_prefix("/").unwrap_or(inner))
}

/// Assembles and tears down modules' chroots, remembering what each has.
#[derive(Debug)]
pub struct ChrootManager {
    options: ChrootOptions,
    prepared: Mutex<HashMap<String, (Environment, Vec<PathBuf>)>>,
}

impl ChrootManager {
    pub fn new(options: ChrootOptions) -> Self {
        Self {
            options,
            prepared: Mutex::new(HashMap::new()),
        }
    }

    pub fn options(&self) -> &ChrootOptions {
        &self.options
    }

    /// Makes `<root>/<module>` ready for `target`: the module directory bind-mounted at its own
    /// path, then every object up to that environment.
    pub fn assemble(
        &self,
        module: &str,
        module_dir: &Path,
        target: Environment,
    ) -> Result<(), Error> {
        let mut prepared = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
        let (current, mounts) = prepared
            .entry(module.to_owned())
            .or_insert((Environment::None, Vec::new()));
        if *current >= target {
            return Ok(());
        }
        let root = self.options.module_root(module);
        let fail = |what: String| {
            move |source| Error::Chroot {
                module: module.to_owned(),
                what,
                source,
            }
        };
        if *current == Environment::None {
            let dir = inside(&root, module_dir);
            std::fs::create_dir_all(&dir)
                .map_err(fail(format!("make {} module's dir", module_dir.display())))?;
            mount_bind_recursive(module_dir, &dir).map_err(|e| {
                fail(format!("mount {} module's dir", module_dir.display()))(e.into())
            })?;
            mounts.push(dir);
        }
        std::fs::create_dir_all(&self.options.tmp_source)
            .map_err(fail(format!("make {}", self.options.tmp_source.display())))?;
        for object in &self.options.objects {
            if object.environment <= *current || object.environment > target {
                continue;
            }
            let at = inside(&root, object.target.as_deref().unwrap_or(&object.source));
            match &object.kind {
                ObjectKind::Mount { read_only } => {
                    if !object.source.exists() {
                        continue;
                    }
                    std::fs::create_dir_all(&at)
                        .map_err(fail(format!("make dir {}", at.display())))?;
                    mount_bind_recursive(&object.source, &at)
                        .map_err(|e| fail(format!("mount folder {}", at.display()))(e.into()))?;
                    if *read_only {
                        mount_remount(&at, MountFlags::BIND | MountFlags::RDONLY, "").map_err(
                            |e| fail(format!("remount read-only {}", at.display()))(e.into()),
                        )?;
                    }
                    mounts.push(at);
                }
                ObjectKind::File => {
                    let Ok(bytes) = std::fs::read(&object.source) else {
                        continue;
                    };
                    if let Some(parent) = at.parent() {
                        std::fs::create_dir_all(parent)
                            .map_err(fail(format!("make dir {}", parent.display())))?;
                    }
                    std::fs::write(&at, bytes)
                        .map_err(fail(format!("write to file {}", at.display())))?;
                }
                ObjectKind::DevNull => {
                    if let Some(parent) = at.parent() {
                        std::fs::create_dir_all(parent)
                            .map_err(fail(format!("make dir {}", parent.display())))?;
                    }
                    if !at.exists() {
                        std::fs::write(&at, b"")
                            .map_err(fail(format!("create null file {}", at.display())))?;
                    }
                }
            }
        }
        *current = target;
        Ok(())
    }

    /// Unmounts everything mounted for `module` (innermost first).
    pub fn disassemble(&self, module: &str) -> Result<(), Error> {
        let mut prepared = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
        let Some((_, mounts)) = prepared.remove(module) else {
            return Ok(());
        };
        for at in mounts.iter().rev() {
            unmount(at, UnmountFlags::DETACH).map_err(|e| Error::Chroot {
                module: module.to_owned(),
                what: format!("unmount folder {}", at.display()),
                source: e.into(),
            })?;
        }
        Ok(())
    }

    /// Tears down every module's chroot.
    pub fn disassemble_all(&self) -> Result<(), Error> {
        let modules: Vec<String> = self
            .prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        for m in modules {
            self.disassemble(&m)?;
        }
        Ok(())
    }
}

impl Drop for ChrootManager {
    fn drop(&mut self) {
        if let Err(e) = self.disassemble_all() {
            tracing::warn!(error = %e, "cannot tear down chroot environments");
        }
    }
}
