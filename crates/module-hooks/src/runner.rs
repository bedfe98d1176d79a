//! Running hook processes (the I/O edge): `--config`, module-sdk binaries, hook runs with
//! their temporary files and environment, `enabled` scripts, optionally chrooted.

mod process;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

pub use process::{LogLine, Stream};

use crate::chroot::{ChrootManager, Environment, inside};
use crate::config::{self, HookConfig, HookScope};
use crate::context::{BindingContext, render};
use crate::discover;
use crate::error::Error;
use crate::output::{self, KubeOperation, MetricOperation};

/// A module whose hooks run: its name (`echo`) and directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleRef {
    pub name: String,
    pub dir: PathBuf,
    /// The module's directory as the modules directory names it: its hooks are named
    /// `<dir_name>/hooks/…` (addon-operator names a hook by its path relative to the modules
    /// directory) — `040-node-manager` for an embedded module, the module's name for a
    /// downloaded one (Deckhouse links `downloaded/modules/<name>` to the active release).
    pub dir_name: String,
}

impl ModuleRef {
    /// A module whose directory sits in a modules directory under its own name
    /// (`dir_name` is the last component of `dir`).
    pub fn new(name: impl Into<String>, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        let dir_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self {
            name: name.into(),
            dir,
            dir_name,
        }
    }
}

/// How a hook file is executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookKind {
    /// Executed directly (a script with a shebang or a binary).
    Shell,
    /// A `.py` file: run by the module's `hooks/venv/bin/python3` when it has one.
    Python { venv: Option<PathBuf> },
    /// One hook of a module-sdk binary: `hook run <index>`.
    Batch { index: usize },
}

/// A discovered, configured hook.
#[derive(Debug, Clone)]
pub struct Hook {
    /// `<module dir>/hooks/…` for module hooks, the path under the directory for global ones;
    /// `<binary>:<name>:<index>` for module-sdk hooks.
    pub name: String,
    pub path: PathBuf,
    pub kind: HookKind,
    /// `None` for global hooks.
    pub module: Option<ModuleRef>,
    pub config: HookConfig,
}

/// Everything a hook run produced.
#[derive(Debug, Clone, Default)]
pub struct HookOutput {
    /// `VALUES_JSON_PATCH_PATH`, as one RFC 6902 patch.
    pub values_patch: Vec<Value>,
    /// `CONFIG_VALUES_JSON_PATCH_PATH`.
    pub config_values_patch: Vec<Value>,
    pub kube_operations: Vec<KubeOperation>,
    pub metrics: Vec<MetricOperation>,
    /// What the hook printed, line by line (JSON log lines parsed).
    pub logs: Vec<LogLine>,
    /// `VALIDATING_RESPONSE_PATH`: the first JSON document (`{"allowed": …, "message": …}`),
    /// `None` when the hook wrote nothing.
    pub validating_response: Option<Value>,
    /// `CONVERSION_RESPONSE_PATH`: `{"convertedObjects": […]}` or `{"failedMessage": …}`.
    pub conversion_response: Option<Value>,
}

/// Settings of the runner.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Where temporary files are written (addon-operator's `--tmp-dir`).
    pub tmp_dir: PathBuf,
    /// A run (or a `--config`) is killed after this long.
    pub timeout: Duration,
    /// Extra environment for every hook, on top of the controller's own.
    pub env: Vec<(String, String)>,
    /// Keep the temporary files after a run (debugging).
    pub keep_tmp_files: bool,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        Self {
            tmp_dir: std::env::temp_dir().join("addon-operator"),
            timeout: Duration::from_secs(30 * 60),
            env: Vec::new(),
            keep_tmp_files: false,
        }
    }
}

/// Runs hooks. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Runner {
    options: Arc<RunnerOptions>,
    chroot: Option<Arc<ChrootManager>>,
    counter: Arc<AtomicU64>,
}

/// Where a command runs: directly, or chrooted into a module root.
struct Exec<'a> {
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    chroot_root: Option<&'a Path>,
}

impl Runner {
    /// A runner; `chroot` is `Some` when the ConfigMap `d8-system/chroot-mode` exists.
    pub fn new(options: RunnerOptions, chroot: Option<Arc<ChrootManager>>) -> Self {
        Self {
            options: Arc::new(options),
            chroot,
            counter: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn chroot_enabled(&self) -> bool {
        self.chroot.is_some()
    }

    fn command(&self, exec: &Exec<'_>) -> tokio::process::Command {
        let mut cmd = match exec.chroot_root {
            Some(root) => {
                let mut c = tokio::process::Command::new("chroot");
                c.arg(root).arg(&exec.program);
                c.current_dir("/");
                c
            }
            None => tokio::process::Command::new(&exec.program),
        };
        cmd.args(&exec.args);
        cmd.envs(self.options.env.iter().map(|(k, v)| (k, v)));
        cmd.envs(exec.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// The chroot of `module` prepared for `env`, or `None` without chroot mode.
    fn chroot_for(
        &self,
        module: Option<&ModuleRef>,
        env: Environment,
    ) -> Result<Option<PathBuf>, Error> {
        let (Some(manager), Some(module)) = (&self.chroot, module) else {
            return Ok(None);
        };
        manager.assemble(&module.name, &module.dir, env)?;
        Ok(Some(manager.options().module_root(&module.name)))
    }

    /// Runs `exec` to completion and returns its stdout; the error carries stderr.
    async fn output(&self, exec: Exec<'_>, name: &str) -> Result<Vec<u8>, Error> {
        let mut cmd = self.command(&exec);
        cmd.stdin(std::process::Stdio::null());
        cmd.kill_on_drop(true);
        let out = tokio::time::timeout(self.options.timeout, cmd.output())
            .await
            .map_err(|_| Error::Timeout {
                hook: name.to_owned(),
                timeout: self.options.timeout,
            })?
            .map_err(|source| Error::Spawn {
                path: exec.program.clone(),
                source,
            })?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(Error::ConfigRun {
                path: exec.program.clone(),
                message: format!("{}: {}", out.status, process::tail(&stderr)),
            });
        }
        Ok(out.stdout)
    }

    fn python_exec(
        path: &Path,
        kind: &HookKind,
        mut args: Vec<String>,
        env: &mut Vec<(String, String)>,
    ) -> (PathBuf, Vec<String>) {
        if let HookKind::Python { venv: Some(venv) } = kind {
            env.push(("PYTHONHOME".into(), venv.display().to_string()));
            args.insert(0, path.display().to_string());
            return (venv.join("bin/python3"), args);
        }
        (path.to_owned(), args)
    }

    /// Finds and configures every hook of a module: shell and Python hooks (`--config`) and
    /// module-sdk binaries (`hook list`, `hook config`), sorted by path.
    pub async fn discover_module(&self, module: &ModuleRef) -> Result<Vec<Hook>, Error> {
        let hooks_dir = module.dir.join("hooks");
        self.discover(&hooks_dir, &module.dir, Some(module), HookScope::Module)
            .await
    }

    /// Finds and configures global hooks under `dir` (`--global-hooks-dir`), or under
    /// `dir/hooks` when there is one (as addon-operator looks for them); named by their path
    /// relative to that directory.
    pub async fn discover_global(&self, dir: &Path) -> Result<Vec<Hook>, Error> {
        let sub = dir.join("hooks");
        let dir = if sub.is_dir() { sub } else { dir.to_owned() };
        self.discover(&dir, &dir, None, HookScope::Global).await
    }

    async fn discover(
        &self,
        dir: &Path,
        base: &Path,
        module: Option<&ModuleRef>,
        scope: HookScope,
    ) -> Result<Vec<Hook>, Error> {
        let files = discover::executable_files(dir)
            .map_err(|e| Error::io(format!("search hooks in {}", dir.display()), e))?;
        let venv = module
            .map(|m| m.dir.join("hooks/venv"))
            .filter(|v| v.join("bin/python3").is_file());
        let mut hooks = Vec::new();
        for path in files {
            let name = discover::hook_name(module.map(|m| m.dir_name.as_str()), base, &path);
            if discover::may_be_batch(&path)
                && let Some(batch) = self.batch_hooks(&path, &name, module).await?
            {
                hooks.extend(batch);
                continue;
            }
            let kind = if path.extension().is_some_and(|e| e == "py") {
                HookKind::Python { venv: venv.clone() }
            } else {
                HookKind::Shell
            };
            let config = self.load_config(&path, &kind, &name, module, scope).await?;
            hooks.push(Hook {
                name,
                path,
                kind,
                module: module.cloned(),
                config,
            });
        }
        hooks.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(hooks)
    }

    /// `Some` when `path` is a module-sdk binary (its `hook list` says `Found N items`).
    async fn batch_hooks(
        &self,
        path: &Path,
        name: &str,
        module: Option<&ModuleRef>,
    ) -> Result<Option<Vec<Hook>>, Error> {
        let list = Exec {
            program: path.to_owned(),
            args: vec!["hook".into(), "list".into()],
            env: Vec::new(),
            chroot_root: None,
        };
        let Ok(stdout) = self.output(list, name).await else {
            return Ok(None);
        };
        if !discover::is_batch_listing(&String::from_utf8_lossy(&stdout)) {
            return Ok(None);
        }
        let config = Exec {
            program: path.to_owned(),
            args: vec!["hook".into(), "config".into()],
            env: Vec::new(),
            chroot_root: None,
        };
        let stdout = self.output(config, name).await?;
        let wrap = |source| match module {
            Some(m) => Error::ModuleConfig {
                module: m.name.clone(),
                hook: name.to_owned(),
                source,
            },
            None => Error::GlobalConfig {
                hook: name.to_owned(),
                source,
            },
        };
        let configs = config::batch_configs(&stdout).map_err(wrap)?;
        Ok(Some(
            configs
                .into_iter()
                .map(|c| Hook {
                    name: format!("{name}:{}:{}", c.name, c.index),
                    path: path.to_owned(),
                    kind: HookKind::Batch { index: c.index },
                    module: module.cloned(),
                    config: c.config,
                })
                .collect(),
        ))
    }

    /// Runs `<hook> --config` and parses the answer.
    pub async fn load_config(
        &self,
        path: &Path,
        kind: &HookKind,
        name: &str,
        module: Option<&ModuleRef>,
        scope: HookScope,
    ) -> Result<HookConfig, Error> {
        let chroot_root = self.chroot_for(module, Environment::ShellHook)?;
        let mut env = Vec::new();
        let (program, args) = Self::python_exec(path, kind, vec!["--config".into()], &mut env);
        let stdout = self
            .output(
                Exec {
                    program,
                    args,
                    env,
                    chroot_root: chroot_root.as_deref(),
                },
                name,
            )
            .await?;
        HookConfig::parse(&stdout, scope).map_err(|source| match module {
            Some(m) => Error::ModuleConfig {
                module: m.name.clone(),
                hook: name.to_owned(),
                source,
            },
            None => Error::GlobalConfig {
                hook: name.to_owned(),
                source,
            },
        })
    }

    fn unique(&self, what: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{what}-{}-{n}", std::process::id())
    }

    /// Runs a hook with binding contexts and values; returns its outputs.
    pub async fn run(
        &self,
        hook: &Hook,
        contexts: &[BindingContext],
        values: &Value,
        config_values: &Value,
    ) -> Result<HookOutput, Error> {
        let chrooted = !matches!(hook.kind, HookKind::Batch { .. });
        let chroot_root = if chrooted {
            self.chroot_for(hook.module.as_ref(), Environment::ShellHook)?
        } else {
            None
        };
        // A chrooted hook finds its files under /tmp, which is the chroot's tmp source.
        let (host_dir, inner_dir) = match (&chroot_root, &self.chroot) {
            (Some(_), Some(m)) => (m.options().tmp_source.clone(), PathBuf::from("/tmp")),
            _ => (self.options.tmp_dir.clone(), self.options.tmp_dir.clone()),
        };
        std::fs::create_dir_all(&host_dir)
            .map_err(|e| Error::io(format!("make tmp dir {}", host_dir.display()), e))?;
        let module_name = hook
            .module
            .as_ref()
            .map(|m| m.name.as_str())
            .unwrap_or("global");
        let safe = hook.name.replace(['/', ':', '.'], "-");
        let files = TmpFiles::new(
            &host_dir,
            &inner_dir,
            &[
                (
                    "BINDING_CONTEXT_PATH",
                    self.unique(&format!("{module_name}.hook-{safe}-binding-context")) + ".json",
                ),
                (
                    "VALUES_PATH",
                    self.unique(&format!("{module_name}.module-values")) + ".json",
                ),
                (
                    "CONFIG_VALUES_PATH",
                    self.unique(&format!("{module_name}.module-config-values")) + ".json",
                ),
                (
                    "VALUES_JSON_PATCH_PATH",
                    self.unique(&format!("{safe}.module-hook-values")) + ".json-patch",
                ),
                (
                    "CONFIG_VALUES_JSON_PATCH_PATH",
                    self.unique(&format!("{safe}.module-hook-config-values")) + ".json-patch",
                ),
                (
                    "METRICS_PATH",
                    self.unique(&format!("{safe}.module-hook-metrics")) + ".json",
                ),
                (
                    "KUBERNETES_PATCH_PATH",
                    self.unique(&format!("{safe}-object-patch")),
                ),
                (
                    "VALIDATING_RESPONSE_PATH",
                    self.unique(&format!("{safe}-validating-response")) + ".json",
                ),
                (
                    "CONVERSION_RESPONSE_PATH",
                    self.unique(&format!("{safe}-conversion-response")) + ".json",
                ),
            ],
            self.options.keep_tmp_files,
        );
        let version = hook.config.version;
        files.write("BINDING_CONTEXT_PATH", render(contexts, version).as_bytes())?;
        files.write(
            "VALUES_PATH",
            &serde_json::to_vec(values).unwrap_or_default(),
        )?;
        files.write(
            "CONFIG_VALUES_PATH",
            &serde_json::to_vec(config_values).unwrap_or_default(),
        )?;
        for empty in [
            "VALUES_JSON_PATCH_PATH",
            "CONFIG_VALUES_JSON_PATCH_PATH",
            "METRICS_PATH",
            "KUBERNETES_PATCH_PATH",
            "VALIDATING_RESPONSE_PATH",
            "CONVERSION_RESPONSE_PATH",
        ] {
            files.write(empty, b"")?;
        }
        let mut env = files.env();
        let (program, args) = match &hook.kind {
            HookKind::Batch { index } => (
                hook.path.clone(),
                vec!["hook".into(), "run".into(), index.to_string()],
            ),
            kind => Self::python_exec(&hook.path, kind, Vec::new(), &mut env),
        };
        let exec = Exec {
            program,
            args,
            env,
            chroot_root: chroot_root.as_deref(),
        };
        let cmd = self.command(&exec);
        let run = process::run_logged(cmd, &hook.name, self.options.timeout).await;
        let logs = match run {
            Ok(logs) => logs,
            Err(e) => {
                return Err(match e {
                    process::RunError::Spawn(source) => Error::Spawn {
                        path: exec.program,
                        source,
                    },
                    process::RunError::Timeout => Error::Timeout {
                        hook: hook.name.clone(),
                        timeout: self.options.timeout,
                    },
                    process::RunError::Failed { exit_code, message } => Error::Failed {
                        hook: hook.name.clone(),
                        exit_code,
                        message,
                    },
                });
            }
        };
        let out_err = |context, source| Error::Output {
            hook: hook.name.clone(),
            context,
            source,
        };
        Ok(HookOutput {
            config_values_patch: output::parse_values_patch(
                &files.read("CONFIG_VALUES_JSON_PATCH_PATH")?,
            )
            .map_err(|e| out_err("got bad json patch for config values", e))?,
            values_patch: output::parse_values_patch(&files.read("VALUES_JSON_PATCH_PATH")?)
                .map_err(|e| out_err("got bad json patch for values", e))?,
            metrics: output::parse_metric_operations(&files.read("METRICS_PATH")?, None)
                .map_err(|e| out_err("metrics", e))?,
            kube_operations: output::parse_kube_operations(&files.read("KUBERNETES_PATCH_PATH")?)
                .map_err(|e| out_err("kubernetes patch", e))?,
            validating_response: output::parse_first_document(
                &files.read("VALIDATING_RESPONSE_PATH")?,
            )
            .map_err(|e| out_err("validating response", e))?,
            conversion_response: output::parse_first_document(
                &files.read("CONVERSION_RESPONSE_PATH")?,
            )
            .map_err(|e| out_err("conversion response", e))?,
            logs,
        })
    }

    /// Runs a module's `enabled` script (chrooted in chroot mode) with `CONFIG_VALUES_PATH`,
    /// `VALUES_PATH` and `MODULE_ENABLED_RESULT`; a missing script means enabled.
    pub async fn run_enabled_script(
        &self,
        module: &ModuleRef,
        values: &Value,
        config_values: &Value,
    ) -> Result<bool, Error> {
        let script = module.dir.join("enabled");
        if !script.is_file() {
            return Ok(true);
        }
        let chroot_root = self.chroot_for(Some(module), Environment::EnabledScript)?;
        let (host_dir, inner_dir) = match (&chroot_root, &self.chroot) {
            (Some(_), Some(m)) => (m.options().tmp_source.clone(), PathBuf::from("/tmp")),
            _ => (self.options.tmp_dir.clone(), self.options.tmp_dir.clone()),
        };
        std::fs::create_dir_all(&host_dir)
            .map_err(|e| Error::io(format!("make tmp dir {}", host_dir.display()), e))?;
        let files = TmpFiles::new(
            &host_dir,
            &inner_dir,
            &[
                (
                    "CONFIG_VALUES_PATH",
                    self.unique(&format!("{}.module-config-values", module.name)) + ".json",
                ),
                (
                    "VALUES_PATH",
                    self.unique(&format!("{}.module-values", module.name)) + ".json",
                ),
                (
                    "MODULE_ENABLED_RESULT",
                    self.unique(&format!("{}.module-enabled-result", module.name)),
                ),
            ],
            self.options.keep_tmp_files,
        );
        files.write(
            "CONFIG_VALUES_PATH",
            &serde_json::to_vec(config_values).unwrap_or_default(),
        )?;
        files.write(
            "VALUES_PATH",
            &serde_json::to_vec(values).unwrap_or_default(),
        )?;
        files.write("MODULE_ENABLED_RESULT", b"")?;
        let exec = Exec {
            program: script.clone(),
            args: Vec::new(),
            env: files.env(),
            chroot_root: chroot_root.as_deref(),
        };
        let name = format!("{}/enabled", module.name);
        process::run_logged(self.command(&exec), &name, self.options.timeout)
            .await
            .map_err(|e| match e {
                process::RunError::Spawn(source) => Error::Spawn {
                    path: script.clone(),
                    source,
                },
                process::RunError::Timeout => Error::Timeout {
                    hook: name.clone(),
                    timeout: self.options.timeout,
                },
                process::RunError::Failed { exit_code, message } => Error::Failed {
                    hook: name.clone(),
                    exit_code,
                    message,
                },
            })?;
        let result = String::from_utf8_lossy(&files.read("MODULE_ENABLED_RESULT")?)
            .trim()
            .to_owned();
        match result.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(Error::EnabledResult {
                path: script,
                value: result,
            }),
        }
    }
}

/// The temporary files of one run: written on the host, named by their path inside.
struct TmpFiles {
    files: Vec<(&'static str, PathBuf, PathBuf)>,
    keep: bool,
}

impl TmpFiles {
    fn new(host: &Path, inner: &Path, names: &[(&'static str, String)], keep: bool) -> Self {
        Self {
            files: names
                .iter()
                .map(|(env, file)| (*env, host.join(file), inner.join(file)))
                .collect(),
            keep,
        }
    }

    fn host(&self, env: &str) -> &Path {
        self.files
            .iter()
            .find(|(e, _, _)| *e == env)
            .map(|(_, h, _)| h.as_path())
            .unwrap_or(Path::new("/nonexistent"))
    }

    fn write(&self, env: &str, data: &[u8]) -> Result<(), Error> {
        let path = self.host(env);
        std::fs::write(path, data).map_err(|e| Error::io(format!("write {}", path.display()), e))
    }

    fn read(&self, env: &str) -> Result<Vec<u8>, Error> {
        let path = self.host(env);
        std::fs::read(path).map_err(|e| Error::io(format!("cannot read {}", path.display()), e))
    }

    fn env(&self) -> Vec<(String, String)> {
        self.files
            .iter()
            .map(|(e, _, inner)| ((*e).to_owned(), inner.display().to_string()))
            .collect()
    }
}

impl Drop for TmpFiles {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for (_, host, _) in &self.files {
            let _ = std::fs::remove_file(host);
        }
    }
}

/// `inside(root, path)`, re-exported for tests that look into a chroot.
pub fn path_inside(root: &Path, inner: &Path) -> PathBuf {
    inside(root, inner)
}
