//! The object cache of one `kubernetes` binding (shell-operator's resource informer, minus
//! the watch): it applies `jqFilter`, keeps checksums and decides which events run the hook.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use serde_json::Value;

use super::{BindingContext, ContextKind, ObjectAndFilterResult};
use crate::config::{KubernetesBinding, WatchEvent};

/// `namespace/kind/name` of an object.
pub fn resource_id(object: &Value) -> String {
    let md = &object["metadata"];
    format!(
        "{}/{}/{}",
        md["namespace"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
        md["name"].as_str().unwrap_or_default()
    )
}

fn canonical_hash(v: &Value, h: &mut impl Hasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.to_string()).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(a) => {
            (4u8, a.len()).hash(h);
            a.iter().for_each(|x| canonical_hash(x, h));
        }
        Value::Object(o) => {
            (5u8, o.len()).hash(h);
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            for k in keys {
                k.hash(h);
                canonical_hash(&o[k], h);
            }
        }
    }
}

/// A checksum that does not depend on key order.
pub(crate) fn checksum(v: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    canonical_hash(v, &mut h);
    h.finish()
}

/// Cached objects of one binding.
#[derive(Debug, Clone)]
pub struct Monitor {
    binding: KubernetesBinding,
    objects: BTreeMap<String, ObjectAndFilterResult>,
}

impl Monitor {
    pub fn new(binding: KubernetesBinding) -> Self {
        Self {
            binding,
            objects: BTreeMap::new(),
        }
    }

    pub fn binding(&self) -> &KubernetesBinding {
        &self.binding
    }

    fn filter(&self, object: Value) -> Result<ObjectAndFilterResult, String> {
        let filter_result = match &self.binding.jq_filter {
            Some(p) => Some(p.run(&object).map_err(|e| {
                format!(
                    "jqFilter '{}' failed on {}: {e}",
                    p.source(),
                    resource_id(&object)
                )
            })?),
            None => None,
        };
        let checksum = checksum(filter_result.as_ref().unwrap_or(&object));
        Ok(ObjectAndFilterResult {
            resource_id: resource_id(&object),
            // Without a filter the object is the only content, so it is always kept.
            object: (self.binding.keep_full_objects_in_memory || self.binding.jq_filter.is_none())
                .then_some(object),
            filter_result,
            checksum,
        })
    }

    /// The current objects, sorted by resource id.
    pub fn snapshot(&self) -> Vec<ObjectAndFilterResult> {
        self.objects.values().cloned().collect()
    }

    /// Replaces the cache with the listed objects; returns the Synchronization context unless
    /// the binding sets `executeHookOnSynchronization: false`.
    pub fn synchronize(&mut self, objects: Vec<Value>) -> Result<Option<BindingContext>, String> {
        self.objects.clear();
        for o in objects {
            let f = self.filter(o)?;
            self.objects.insert(f.resource_id.clone(), f);
        }
        if !self.binding.execute_hook_on_synchronization {
            return Ok(None);
        }
        Ok(Some(BindingContext::kubernetes(
            &self.binding,
            ContextKind::Synchronization {
                objects: self.snapshot(),
            },
        )))
    }

    /// Applies a watch event to the cache; returns the Event context when the hook must run:
    /// the event is in `executeHookOnEvent` and, for Added/Modified, the filter result (the
    /// object without a filter) changed.
    pub fn event(
        &mut self,
        watch_event: WatchEvent,
        object: Value,
    ) -> Result<Option<BindingContext>, String> {
        let f = self.filter(object)?;
        let changed = match watch_event {
            WatchEvent::Added | WatchEvent::Modified => {
                let same = self
                    .objects
                    .get(&f.resource_id)
                    .is_some_and(|c| c.checksum == f.checksum);
                self.objects.insert(f.resource_id.clone(), f.clone());
                !same
            }
            WatchEvent::Deleted => {
                self.objects.remove(&f.resource_id);
                true
            }
        };
        if !changed || !self.binding.execute_hook_on_event.contains(&watch_event) {
            return Ok(None);
        }
        Ok(Some(BindingContext::kubernetes(
            &self.binding,
            ContextKind::Event {
                watch_event,
                object: f,
            },
        )))
    }
}
