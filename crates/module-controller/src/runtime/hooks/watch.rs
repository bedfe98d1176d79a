//! The `kubernetes` bindings' watches (the API edge): one kube-rs watcher per binding, its
//! first list handed back as the Synchronization context, later changes fed to the binding's
//! [`Monitor`](module_hooks::Monitor) and queued as Event contexts. A re-list after a broken
//! watch synchronizes the cache again and queues a Synchronization run.

use futures_util::StreamExt;
use kube::Api;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use module_hooks::{BindingContext, WatchEvent};
use serde_json::Value;
use tokio::sync::oneshot;

use super::plan;
use super::{Runtime, queue_context};
use crate::Error;

/// How long a module run waits for a binding's first list.
const FIRST_LIST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// (hook, binding, Synchronization context, waitForSynchronization).
type Sync = (String, String, BindingContext, bool);

impl Runtime {
    /// Starts every kubernetes binding of a module and waits for their first lists.
    pub(crate) async fn start_watches(&self, module: &str) -> Result<Vec<Sync>, Error> {
        let bindings: Vec<(String, module_hooks::KubernetesBinding)> = {
            let modules = self
                .hooks
                .modules
                .lock()
                .map_err(|_| super::poisoned(module))?;
            let Some(state) = modules.get(module) else {
                return Ok(Vec::new());
            };
            state
                .hooks
                .iter()
                .flat_map(|h| {
                    h.config
                        .kubernetes
                        .iter()
                        .map(|k| (h.name.clone(), k.clone()))
                })
                .collect()
        };
        let mut firsts = Vec::new();
        for (hook, binding) in bindings {
            let api_version = binding.api_version.clone().unwrap_or_else(|| "v1".into());
            let (resource, namespaced) = self
                .applier
                .resolve(&api_version, &binding.kind)
                .await
                .map_err(|e| Error::Hook {
                    module: module.to_owned(),
                    hook: hook.clone(),
                    message: e.to_string(),
                })?;
            let request = plan::watch_request(&binding);
            let api: Api<DynamicObject> = match (&request.namespace, namespaced) {
                (Some(ns), true) => Api::namespaced_with(self.client.clone(), ns, &resource),
                _ => Api::all_with(self.client.clone(), &resource),
            };
            let mut config = watcher::Config::default();
            if let Some(l) = &request.label_selector {
                config = config.labels(l);
            }
            if let Some(f) = &request.field_selector {
                config = config.fields(f);
            }
            let (first_tx, first_rx) = oneshot::channel::<Result<Option<BindingContext>, String>>();
            let modules = self.hooks.modules.clone();
            let queues = self.queue_view.clone();
            let name = module.to_owned();
            let hook_name = hook.clone();
            let binding_name = binding.name.clone();
            let keep = binding.clone();
            let task = tokio::spawn(async move {
                let mut first = Some(first_tx);
                let mut listed: Vec<Value> = Vec::new();
                let stream = watcher(api, config).default_backoff();
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    let event = match event {
                        Ok(e) => e,
                        Err(e) => {
                            tracing::warn!(module = %name, hook = %hook_name, binding = %binding_name, error = %e, "watch failed, retrying");
                            continue;
                        }
                    };
                    let value = |o: DynamicObject| serde_json::to_value(o).unwrap_or_default();
                    let update =
                        |f: &mut dyn FnMut(
                            &mut module_hooks::Monitor,
                        )
                            -> Result<Option<BindingContext>, String>| {
                            let Ok(mut m) = modules.lock() else {
                                return Err("hook state lock poisoned".to_owned());
                            };
                            let Some(state) = m.get_mut(&name) else {
                                return Ok(None);
                            };
                            let Some(i) = state.hooks.iter().position(|h| h.name == hook_name)
                            else {
                                return Ok(None);
                            };
                            match state.monitors[i].get_mut(&binding_name) {
                                Some(monitor) => f(monitor),
                                None => Ok(None),
                            }
                        };
                    let context = match event {
                        watcher::Event::Init => {
                            listed.clear();
                            continue;
                        }
                        watcher::Event::InitApply(o) => {
                            let o = value(o);
                            if plan::keeps(&keep, &o) {
                                listed.push(o);
                            }
                            continue;
                        }
                        watcher::Event::InitDone => {
                            let objects = std::mem::take(&mut listed);
                            let result = update(&mut |m| m.synchronize(objects.clone()));
                            if let Some(tx) = first.take() {
                                let _ = tx.send(result);
                                continue;
                            }
                            result
                        }
                        watcher::Event::Apply(o) => {
                            let o = value(o);
                            if !plan::keeps(&keep, &o) {
                                continue;
                            }
                            let id = module_hooks::context::resource_id(&o);
                            update(&mut |m| {
                                let seen = m.snapshot().iter().any(|s| s.resource_id == id);
                                m.event(plan::applied_event(seen), o.clone())
                            })
                        }
                        watcher::Event::Delete(o) => {
                            let o = value(o);
                            if !plan::keeps(&keep, &o) {
                                continue;
                            }
                            update(&mut |m| m.event(WatchEvent::Deleted, o.clone()))
                        }
                    };
                    match context {
                        Ok(Some(c)) => {
                            queue_context(&modules, &queues, &name, &hook_name, &binding_name, c)
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(module = %name, hook = %hook_name, binding = %binding_name, error = %e, "event dropped")
                        }
                    }
                }
            });
            if let Ok(mut m) = self.hooks.modules.lock()
                && let Some(state) = m.get_mut(module)
            {
                state.tasks.push(task.abort_handle());
            }
            firsts.push((hook, binding, first_rx));
        }
        let mut out = Vec::new();
        for (hook, binding, rx) in firsts {
            let failed = |message: String| Error::Hook {
                module: module.to_owned(),
                hook: hook.clone(),
                message: plan::hook_failure(module == super::GLOBAL, &hook, &message),
            };
            let first = tokio::time::timeout(FIRST_LIST_TIMEOUT, rx)
                .await
                .map_err(|_| failed("no list of the watched objects in time".into()))?;
            match first {
                Ok(Ok(Some(context))) => out.push((
                    hook.clone(),
                    binding.name.clone(),
                    context,
                    binding.wait_for_synchronization,
                )),
                Ok(Ok(None)) => {}
                Ok(Err(e)) => return Err(failed(e)),
                Err(_) => return Err(failed("the watch stopped before its first list".into())),
            }
        }
        Ok(out)
    }
}
