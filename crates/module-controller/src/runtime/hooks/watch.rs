//! The `kubernetes` bindings' watches (the API edge): one kube-rs watcher per binding, its
//! first list handed back as the Synchronization context, later changes fed to the binding's
//! [`Monitor`](module_hooks::Monitor) and queued as Event contexts. A re-list after a broken
//! watch synchronizes the cache again and queues a Synchronization run.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
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

type MonitorFn<'a> =
    dyn FnMut(&mut module_hooks::Monitor) -> Result<Option<BindingContext>, String> + 'a;

/// Runs `f` on the monitor of a binding (`Ok(None)` when the module or hook is gone).
fn with_monitor(
    modules: &Mutex<HashMap<String, super::ModuleHooks>>,
    module: &str,
    hook: &str,
    binding: &str,
    f: &mut MonitorFn,
) -> Result<Option<BindingContext>, String> {
    let Ok(mut m) = modules.lock() else {
        return Err("hook state lock poisoned".to_owned());
    };
    let Some(state) = m.get_mut(module) else {
        return Ok(None);
    };
    let Some(i) = state.hooks.iter().position(|h| h.name == hook) else {
        return Ok(None);
    };
    match state.monitors[i].get_mut(binding) {
        Some(monitor) => f(monitor),
        None => Ok(None),
    }
}

/// The least of an object a Deleted event needs when the snapshot kept no full object.
fn object_of(item: &module_hooks::context::ObjectAndFilterResult, kind: &str) -> Value {
    if let Some(o) = &item.object {
        return o.clone();
    }
    let mut parts = item.resource_id.splitn(3, '/');
    let namespace = parts.next().unwrap_or_default();
    let _kind = parts.next();
    let name = parts.next().unwrap_or_default();
    serde_json::json!({"kind": kind, "metadata": {"name": name, "namespace": namespace}})
}

impl Runtime {
    /// Lists the namespaces `selector` matches and keeps following them: when a namespace
    /// starts matching, the binding's objects in it arrive as Added events; when it stops,
    /// its objects leave the snapshot as Deleted events.
    async fn follow_namespaces(
        &self,
        module: &str,
        hook: &str,
        binding: &module_hooks::KubernetesBinding,
        selector: &str,
        resource: &ApiResource,
    ) -> Result<Arc<RwLock<BTreeSet<String>>>, Error> {
        let failed = |message: String| Error::Hook {
            module: module.to_owned(),
            hook: hook.to_owned(),
            message: plan::hook_failure(module == super::GLOBAL, hook, &message),
        };
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let listed = namespaces
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| failed(format!("list namespaces {selector}: {e}")))?;
        let set: BTreeSet<String> = listed.items.iter().map(|n| n.name_any()).collect();
        let set = Arc::new(RwLock::new(set));
        let shared = set.clone();
        let modules = self.hooks.modules.clone();
        let queues = self.queue_view.clone();
        let client = self.client.clone();
        let resource = resource.clone();
        let request = plan::watch_request(binding);
        let (name, hook_name, keep) = (module.to_owned(), hook.to_owned(), binding.clone());
        let config = watcher::Config::default().labels(selector);
        let metrics = self.queue_metrics.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(namespaces, config).default_backoff());
            let mut relisted: BTreeSet<String> = BTreeSet::new();
            while let Some(event) = stream.next().await {
                let now: BTreeSet<String> = {
                    let current = shared.read().map(|s| s.clone()).unwrap_or_default();
                    match event {
                        Ok(watcher::Event::Init) => {
                            relisted.clear();
                            continue;
                        }
                        Ok(watcher::Event::InitApply(n)) => {
                            relisted.insert(n.name_any());
                            continue;
                        }
                        Ok(watcher::Event::InitDone) => std::mem::take(&mut relisted),
                        Ok(watcher::Event::Apply(n)) => {
                            let mut next = current.clone();
                            next.insert(n.name_any());
                            next
                        }
                        Ok(watcher::Event::Delete(n)) => {
                            let mut next = current.clone();
                            next.remove(&n.name_any());
                            next
                        }
                        Err(e) => {
                            metrics.watch_failed(&e);
                            continue;
                        }
                    }
                };
                let current = shared.read().map(|s| s.clone()).unwrap_or_default();
                if let Ok(mut s) = shared.write() {
                    *s = now.clone();
                }
                let mut contexts = Vec::new();
                for gone in current.difference(&now) {
                    let prefix = format!("{gone}/");
                    let result = with_monitor(&modules, &name, &hook_name, &keep.name, &mut |m| {
                        for item in m.snapshot() {
                            if item.resource_id.starts_with(&prefix) {
                                let o = object_of(&item, &keep.kind);
                                if let Some(c) = m.event(WatchEvent::Deleted, o)? {
                                    contexts.push(c);
                                }
                            }
                        }
                        Ok(None)
                    });
                    if let Err(e) = result {
                        tracing::warn!(module = %name, hook = %hook_name, error = %e, "event dropped");
                    }
                }
                for added in now.difference(&current) {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), added, &resource);
                    let mut params = ListParams::default();
                    if let Some(l) = &request.label_selector {
                        params = params.labels(l);
                    }
                    if let Some(f) = &request.field_selector {
                        params = params.fields(f);
                    }
                    let Ok(list) = api.list(&params).await else {
                        continue;
                    };
                    for o in list.items {
                        let o = serde_json::to_value(o).unwrap_or_default();
                        if !plan::keeps(&keep, Some(&now), &o) {
                            continue;
                        }
                        let result =
                            with_monitor(&modules, &name, &hook_name, &keep.name, &mut |m| {
                                m.event(WatchEvent::Added, o.clone())
                            });
                        match result {
                            Ok(Some(c)) => contexts.push(c),
                            Ok(None) => {}
                            Err(e) => {
                                tracing::warn!(module = %name, hook = %hook_name, error = %e, "event dropped")
                            }
                        }
                    }
                }
                for c in contexts {
                    queue_context(&modules, &queues, &name, &hook_name, &keep.name, c);
                }
            }
        });
        if let Ok(mut m) = self.hooks.modules.lock()
            && let Some(state) = m.get_mut(module)
        {
            state.tasks.push(task.abort_handle());
        }
        Ok(set)
    }

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
            // `namespace.labelSelector`: the matching namespaces, kept by a Namespace watch.
            let namespaces = match plan::namespace_selector(&binding) {
                Some(selector) => Some(
                    self.follow_namespaces(module, &hook, &binding, &selector, &resource)
                        .await?,
                ),
                None => None,
            };
            let (first_tx, first_rx) = oneshot::channel::<Result<Option<BindingContext>, String>>();
            let modules = self.hooks.modules.clone();
            let queues = self.queue_view.clone();
            let name = module.to_owned();
            let hook_name = hook.clone();
            let binding_name = binding.name.clone();
            let keep = binding.clone();
            let metrics = self.queue_metrics.clone();
            let task = tokio::spawn(async move {
                let mut first = Some(first_tx);
                let mut listed: Vec<Value> = Vec::new();
                let stream = watcher(api, config).default_backoff();
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    let event = match event {
                        Ok(e) => e,
                        Err(e) => {
                            metrics.watch_failed(&e);
                            tracing::warn!(module = %name, hook = %hook_name, binding = %binding_name, error = %e, "watch failed, retrying");
                            continue;
                        }
                    };
                    let value = |o: DynamicObject| serde_json::to_value(o).unwrap_or_default();
                    let update = |f: &mut MonitorFn| {
                        with_monitor(&modules, &name, &hook_name, &binding_name, f)
                    };
                    let keeps = |o: &Value| {
                        let set = namespaces
                            .as_ref()
                            .map(|n| n.read().map(|n| n.clone()).unwrap_or_default());
                        plan::keeps(&keep, set.as_ref(), o)
                    };
                    let context = match event {
                        watcher::Event::Init => {
                            listed.clear();
                            continue;
                        }
                        watcher::Event::InitApply(o) => {
                            let o = value(o);
                            if keeps(&o) {
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
                            if !keeps(&o) {
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
                            if !keeps(&o) {
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
