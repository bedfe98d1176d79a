//! Global hooks (`--global-hooks-dir`), as addon-operator runs them: discovered and configured
//! before the first converge, `onStartup` once, their `kubernetes` bindings watched and
//! `schedule` bindings fired like a module's (queued as `GlobalHookRun` tasks), `beforeAll` at
//! the start of every converge and `afterAll` after its modules. They see and patch the
//! `global` values (`{"global": …}`); a change of them (but from `beforeAll`, whose converge
//! runs the modules next anyway) queues a converge of every module.

use std::path::Path;

use module_hooks::BindingContext;

use super::plan::{self, Phase};
use super::{GLOBAL, ModuleHooks, Runtime, poisoned};
use crate::Error;
use crate::runtime::queue::{MAIN, TaskKind};

impl Runtime {
    /// Before the first converge: discovers the global hooks, runs `onStartup`, starts their
    /// bindings. Later calls (and a runtime without global hooks) do nothing; a failure is
    /// retried with the converge that called it.
    pub(crate) async fn start_global_hooks(&self) -> Result<(), Error> {
        let Some(dir) = self.global_hooks_dir.clone() else {
            return Ok(());
        };
        if self.hook_started(GLOBAL) {
            return Ok(());
        }
        let hooks = discover(self, &dir).await?;
        if !hooks.is_empty() {
            tracing::info!(hooks = hooks.len(), dir = %dir.display(), "global hooks discovered");
        }
        let monitors = hooks
            .iter()
            .map(|h| module_hooks::context::monitors_for(&h.config))
            .collect();
        self.hooks
            .modules
            .lock()
            .map_err(|_| poisoned(GLOBAL))?
            .insert(GLOBAL.to_owned(), ModuleHooks::new(hooks, monitors));
        let mut values = self.global_module_values()?;
        let result = self.start_bindings(GLOBAL, &mut values).await;
        if result.is_err()
            && let Ok(mut m) = self.hooks.modules.lock()
        {
            m.remove(GLOBAL);
        }
        result
    }

    /// The global hooks bound to `beforeAll` and `afterAll`, in their order.
    pub(crate) fn global_phase_hooks(&self) -> (Vec<String>, Vec<String>) {
        let Ok(modules) = self.hooks.modules.lock() else {
            return (Vec::new(), Vec::new());
        };
        let Some(state) = modules.get(GLOBAL) else {
            return (Vec::new(), Vec::new());
        };
        let names = |phase| {
            plan::hooks_for(&state.hooks, phase)
                .into_iter()
                .map(|i| state.hooks[i].name.clone())
                .collect()
        };
        (names(Phase::BeforeAll), names(Phase::AfterAll))
    }

    /// A `GlobalHookRun` task: a `beforeAll`/`afterAll` hook of a converge, or the waiting
    /// contexts of a kubernetes or schedule binding.
    pub(crate) async fn run_global_hook_task(
        &self,
        hook: &str,
        binding: &str,
    ) -> Result<(), Error> {
        let phase =
            Phase::of_binding(binding).filter(|p| matches!(p, Phase::BeforeAll | Phase::AfterAll));
        let Some(phase) = phase else {
            return self.run_hook_task(GLOBAL, hook, binding).await;
        };
        let mut values = self.global_module_values()?;
        let before = values.checksum();
        let contexts =
            self.with_snapshots(GLOBAL, hook, vec![BindingContext::helm(phase.binding())])?;
        self.run_hook(GLOBAL, hook, binding, contexts, &mut values)
            .await?;
        if plan::reconverge_after_global_hook(binding, &before, &values.checksum()) {
            tracing::info!(
                hook,
                binding,
                "global values changed: converging every module"
            );
            self.queue_view.push(MAIN, TaskKind::ConvergeModules);
        }
        Ok(())
    }
}

async fn discover(runtime: &Runtime, dir: &Path) -> Result<Vec<module_hooks::Hook>, Error> {
    runtime
        .hooks
        .runner()
        .discover_global(dir)
        .await
        .map_err(|e| Error::Hook {
            module: String::new(),
            hook: String::new(),
            message: e.to_string(),
        })
}
