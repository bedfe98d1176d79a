//! The garbage collector and the finalizing controllers that run inside the server:
//! `ownerReferences` cascading deletion (background, foreground, orphan), namespace
//! termination and CRD cleanup, driven by the watch hub like Kubernetes' controllers.

use crate::core::{CRD_CLEANUP, Core, DeleteOpts, FOREGROUND, ORPHAN, Propagation};
use crate::meta;
use crate::store::{Key, prefix};
use crate::watch::{Event, EventType};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;

/// Who owns whom, kept in step with committed changes.
#[derive(Debug, Default)]
struct Index {
    /// uid of every live object → its key.
    uids: HashMap<String, Key>,
    /// owner uid → dependents.
    dependents: HashMap<String, BTreeSet<Key>>,
    /// dependent key → its owner uids (to unindex on change).
    owners: HashMap<Key, Vec<String>>,
}

impl Index {
    fn forget(&mut self, key: &Key, uid: Option<&str>) {
        if let Some(uid) = uid
            && self.uids.get(uid) == Some(key)
        {
            self.uids.remove(uid);
        }
        for o in self.owners.remove(key).unwrap_or_default() {
            if let Some(set) = self.dependents.get_mut(&o) {
                set.remove(key);
                if set.is_empty() {
                    self.dependents.remove(&o);
                }
            }
        }
    }

    fn record(&mut self, key: &Key, obj: &Value) {
        self.forget(key, None);
        if let Some(uid) = meta::get(obj, "uid") {
            self.uids.insert(uid.to_string(), key.clone());
        }
        let owners = meta::owner_uids(obj);
        for o in &owners {
            self.dependents
                .entry(o.clone())
                .or_default()
                .insert(key.clone());
        }
        if !owners.is_empty() {
            self.owners.insert(key.clone(), owners);
        }
    }

    fn dependents_of(&self, uid: &str) -> Vec<Key> {
        self.dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

fn key_of(ev: &Event) -> Key {
    let (group, plural) = ev.resource.split_once('/').unwrap_or(("", &ev.resource));
    Key::new(
        group,
        plural,
        &ev.namespace,
        meta::get(&ev.object, "name").unwrap_or_default(),
    )
}

struct Gc {
    core: Arc<Core>,
    index: Index,
}

impl Gc {
    fn delete(&self, key: &Key, propagation: Propagation) {
        let reg = self.core.registry();
        let Some(def) = reg.get(&key.group, &key.plural) else {
            return;
        };
        let opts = DeleteOpts {
            propagation: Some(propagation),
            ..DeleteOpts::default()
        };
        let ns = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
        match self.core.delete(&def, ns, &key.name, &opts) {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(object = %key.encode(), error = %e, "garbage collector could not delete")
            }
        }
    }

    fn edit(&self, key: &Key, f: impl FnOnce(&mut Value) -> bool) {
        if let Err(e) = self.core.edit(key, f) {
            tracing::warn!(object = %key.encode(), error = %e, "garbage collector could not update");
        }
    }

    /// Rebuilds the index and re-examines every object.
    fn full_pass(&mut self) {
        let mut all = Vec::new();
        let r = self.core.store.scan("", None, |k, v| {
            if let Some(key) = Key::decode(k) {
                all.push((key, v));
            }
            true
        });
        if let Err(e) = r {
            tracing::error!(error = %e, "garbage collector could not read the store");
            return;
        }
        self.index = Index::default();
        for (k, v) in &all {
            self.index.record(k, v);
        }
        for (k, v) in &all {
            self.examine(k, v);
        }
    }

    fn on_event(&mut self, ev: &Event) {
        let key = key_of(ev);
        match ev.type_ {
            EventType::Deleted => {
                self.index.forget(&key, meta::get(&ev.object, "uid"));
                if let Some(uid) = meta::get(&ev.object, "uid") {
                    for dep in self.index.dependents_of(uid) {
                        self.owner_gone(&dep);
                    }
                }
                // Owners waiting in the foreground for this dependent.
                for owner in meta::owner_uids(&ev.object) {
                    if let Some(ok) = self.index.uids.get(&owner).cloned()
                        && let Ok(Some(o)) = self.core.store.get(&ok)
                    {
                        self.examine(&ok, &o);
                    }
                }
                self.recheck_containers(&key);
            }
            EventType::Added | EventType::Modified => {
                self.index.record(&key, &ev.object);
                self.examine(&key, &ev.object);
            }
        }
    }

    /// A namespace or CRD that was waiting for this object to go.
    fn recheck_containers(&mut self, key: &Key) {
        if !key.namespace.is_empty() {
            let nk = Key::new("", "namespaces", "", &key.namespace);
            if let Ok(Some(ns)) = self.core.store.get(&nk)
                && meta::deleting(&ns)
            {
                self.examine(&nk, &ns);
            }
        }
        if !key.group.is_empty() {
            let ck = Key::new(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "",
                &format!("{}.{}", key.plural, key.group),
            );
            if let Ok(Some(crd)) = self.core.store.get(&ck)
                && meta::deleting(&crd)
            {
                self.examine(&ck, &crd);
            }
        }
    }

    /// An owner of `dep` is gone: delete it if no owner remains, else drop the dangling refs.
    fn owner_gone(&mut self, dep: &Key) {
        let Ok(Some(obj)) = self.core.store.get(dep) else {
            return;
        };
        let owners = meta::owner_uids(&obj);
        let alive: Vec<&String> = owners
            .iter()
            .filter(|u| self.index.uids.contains_key(*u))
            .collect();
        if alive.is_empty() {
            self.delete(dep, Propagation::Background);
        } else {
            let alive: Vec<String> = alive.into_iter().cloned().collect();
            self.edit(dep, move |o| {
                if let Some(Value::Array(refs)) = o.pointer_mut("/metadata/ownerReferences") {
                    refs.retain(|r| {
                        r.get("uid")
                            .and_then(Value::as_str)
                            .is_some_and(|u| alive.iter().any(|a| a == u))
                    });
                }
                true
            });
        }
    }

    fn remove_finalizer(&self, key: &Key, fin: &str) {
        let fin = fin.to_string();
        self.edit(key, move |o| {
            let mut f = meta::finalizers(o);
            f.retain(|x| *x != fin);
            meta::set_finalizers(o, &f);
            true
        });
    }

    fn examine(&mut self, key: &Key, obj: &Value) {
        // Dangling owner references (the owner was deleted before this object appeared).
        let owners = meta::owner_uids(obj);
        if !owners.is_empty() && owners.iter().any(|u| !self.index.uids.contains_key(u)) {
            self.owner_gone(key);
            return;
        }
        if !meta::deleting(obj) {
            return;
        }
        let uid = meta::get(obj, "uid").unwrap_or_default().to_string();
        let fins = meta::finalizers(obj);
        if fins.iter().any(|f| f == ORPHAN) {
            for dep in self.index.dependents_of(&uid) {
                let u = uid.clone();
                self.edit(&dep, move |o| {
                    if let Some(Value::Array(refs)) = o.pointer_mut("/metadata/ownerReferences") {
                        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(u.as_str()));
                    }
                    if o.pointer("/metadata/ownerReferences")
                        .and_then(Value::as_array)
                        .is_some_and(Vec::is_empty)
                    {
                        meta::meta_mut(o).remove("ownerReferences");
                    }
                    true
                });
            }
            self.remove_finalizer(key, ORPHAN);
        } else if fins.iter().any(|f| f == FOREGROUND) {
            let deps = self.index.dependents_of(&uid);
            if deps.is_empty() {
                self.remove_finalizer(key, FOREGROUND);
            }
            for dep in deps {
                if let Ok(Some(d)) = self.core.store.get(&dep)
                    && !meta::deleting(&d)
                {
                    self.delete(&dep, Propagation::Foreground);
                }
            }
        }
        if key.group.is_empty() && key.plural == "namespaces" {
            self.terminate_namespace(key);
        }
        if key.group == "apiextensions.k8s.io" && fins.iter().any(|f| f == CRD_CLEANUP) {
            self.cleanup_crd(key, obj);
        }
    }

    fn terminate_namespace(&mut self, key: &Key) {
        let ns = key.name.clone();
        let reg = self.core.registry();
        let mut remaining = 0usize;
        for def in reg.all().filter(|d| d.namespaced) {
            let mut keys = Vec::new();
            let _ =
                self.core
                    .store
                    .scan(&prefix(&def.group, &def.plural, Some(&ns)), None, |k, v| {
                        if let Some(k) = Key::decode(k) {
                            keys.push((k, meta::deleting(&v)));
                        }
                        true
                    });
            remaining += keys.len();
            for (k, deleting) in keys {
                if !deleting {
                    self.delete(&k, Propagation::Background);
                }
            }
        }
        if remaining == 0 {
            self.edit(key, |o| {
                if let Some(s) = o.get_mut("spec").and_then(Value::as_object_mut) {
                    s.remove("finalizers");
                }
                true
            });
        }
    }

    fn cleanup_crd(&mut self, key: &Key, crd: &Value) {
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let plural = crd
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut keys = Vec::new();
        let _ = self
            .core
            .store
            .scan(&prefix(group, plural, None), None, |k, v| {
                if let Some(k) = Key::decode(k) {
                    keys.push((k, meta::deleting(&v)));
                }
                true
            });
        if keys.is_empty() {
            self.remove_finalizer(key, CRD_CLEANUP);
        }
        for (k, deleting) in keys {
            if !deleting {
                self.delete(&k, Propagation::Background);
            }
        }
    }
}

/// Runs the collector until the hub closes.
pub(crate) async fn run(core: Arc<Core>) {
    let mut gc = Some(Gc {
        core: core.clone(),
        index: Index::default(),
    });
    loop {
        let mut rx = core.store.hub().receiver();
        let Some(mut g) = gc.take() else { return };
        g = match tokio::task::spawn_blocking(move || {
            g.full_pass();
            g
        })
        .await
        {
            Ok(g) => g,
            Err(e) => {
                tracing::error!(error = %e, "garbage collector pass failed");
                return;
            }
        };
        gc = Some(g);
        loop {
            let first = match rx.recv().await {
                Ok(ev) => ev,
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "garbage collector lagged; rescanning");
                    break;
                }
                Err(RecvError::Closed) => return,
            };
            let mut batch = vec![first];
            while let Ok(ev) = rx.try_recv() {
                batch.push(ev);
            }
            let Some(mut g) = gc.take() else { return };
            match tokio::task::spawn_blocking(move || {
                for ev in &batch {
                    g.on_event(ev);
                }
                g
            })
            .await
            {
                Ok(g) => gc = Some(g),
                Err(e) => {
                    tracing::error!(error = %e, "garbage collector failed");
                    return;
                }
            }
        }
    }
}
