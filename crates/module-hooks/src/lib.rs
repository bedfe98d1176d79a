//! The shell-operator / addon-operator hook protocol, as the Deckhouse controller speaks it.
//!
//! Pure parts (no process, no filesystem): [`config`] (a hook's `--config` answer into typed
//! bindings, with shell-operator's defaults and messages; module-sdk binaries' `hook config`),
//! [`context`] (binding contexts in the JSON shapes of `BINDING_CONTEXT_PATH`, and the
//! per-binding object cache that applies `jqFilter` and drops events whose filter result did
//! not change), [`output`] (values / config values JSON patches, Kubernetes operations and
//! metric operations a hook writes), [`metrics`] (a store applying metric operations, rendered
//! as Prometheus text), [`retry`] (backoff and `allowFailure`).
//!
//! I/O edges: [`discover`] (the executable files under `hooks/`), [`runner`] (processes:
//! `--config`, `hook list|config|run <n>` of module-sdk binaries, runs with temporary files,
//! `enabled` scripts, timeouts, logs), [`chroot`] (chroot mode's bind mounts).
//!
//! It must not depend on kube or k8s-openapi: objects are `serde_json::Value`s.
//!
//! # API for the runtime
//! ```no_run
//! # async fn demo() -> Result<(), module_hooks::Error> {
//! use module_hooks::{BindingContext, ModuleRef, Runner, RunnerOptions, context};
//! let runner = Runner::new(RunnerOptions::default(), None); // Some(chroot) in chroot mode
//! let module = ModuleRef::new("echo", "/modules/echo");
//! let hooks = runner.discover_module(&module).await?; // runs every hook with --config
//! for hook in &hooks {
//!     // one Monitor per kubernetes binding; feed it the list, then watch events
//!     let mut monitors = context::monitors_for(&hook.config);
//!     let mut contexts = Vec::new();
//!     for (_, m) in monitors.iter_mut() {
//!         if let Some(c) = m.synchronize(vec![]).map_err(|_| ()).ok().flatten() {
//!             contexts.push(c);
//!         }
//!     }
//!     let contexts: Vec<BindingContext> =
//!         contexts.into_iter().map(|c| c.with_snapshots(&monitors)).collect();
//!     let out = runner.run(hook, &contexts, &serde_json::json!({}), &serde_json::json!({})).await?;
//!     let _ = (out.values_patch, out.config_values_patch, out.kube_operations, out.metrics);
//! }
//! # Ok(()) }
//! ```

pub mod chroot;
pub mod config;
pub mod context;
pub mod discover;
mod duration;
mod error;
pub mod jq;
pub mod metrics;
pub mod output;
pub mod retry;
pub mod runner;

pub use chroot::{ChrootManager, ChrootOptions};
pub use config::{
    ConfigError, HookConfig, HookScope, KubernetesBinding, ScheduleBinding, WatchEvent,
};
pub use context::{BindingContext, ContextKind, Monitor, ObjectAndFilterResult};
pub use error::Error;
pub use metrics::MetricStore;
pub use output::{KubeOperation, MetricOperation};
pub use runner::{Hook, HookKind, HookOutput, ModuleRef, Runner, RunnerOptions};
