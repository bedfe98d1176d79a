//! The watch hub: every committed change, in order, to every watcher; a bounded history so a
//! watch can resume from a recent `resourceVersion`, and `410 Gone` beyond it.

use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug)]
pub(crate) struct Event {
    /// The revision the change was committed at.
    pub(crate) rv: u64,
    pub(crate) type_: EventType,
    /// `group/plural` of the object's resource.
    pub(crate) resource: String,
    pub(crate) namespace: String,
    /// The object after the change (for deletions: its last state).
    pub(crate) object: Value,
    /// The object before the change, if it existed.
    pub(crate) old: Option<Value>,
}

#[derive(Debug)]
struct History {
    events: VecDeque<Arc<Event>>,
    /// A watch may start from any revision `>= oldest`; older ones have been compacted away.
    oldest: u64,
    capacity: usize,
}

/// Fan-out of committed changes.
#[derive(Debug)]
pub(crate) struct Hub {
    history: Mutex<History>,
    tx: broadcast::Sender<Arc<Event>>,
}

/// The retained events after a version, and a receiver of later ones.
pub(crate) type Subscription = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>);

/// A watch start older than the retained history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooOld {
    pub(crate) requested: u64,
    pub(crate) oldest: u64,
}

impl Hub {
    /// A hub whose history starts at `current` (nothing older can be replayed).
    pub(crate) fn new(current: u64, capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.clamp(1024, 1 << 16));
        Self {
            history: Mutex::new(History {
                events: VecDeque::new(),
                oldest: current,
                capacity: capacity.max(1),
            }),
            tx,
        }
    }

    /// Publishes a committed change. Callers publish in commit order.
    pub(crate) fn publish(&self, ev: Event) {
        let ev = Arc::new(ev);
        let mut h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        h.events.push_back(ev.clone());
        while h.events.len() > h.capacity {
            if let Some(old) = h.events.pop_front() {
                h.oldest = old.rv;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(ev);
    }

    /// Every event after `from`, then a live receiver for later ones, atomically.
    pub(crate) fn subscribe(&self, from: u64) -> Result<Subscription, TooOld> {
        let h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        if from < h.oldest {
            return Err(TooOld {
                requested: from,
                oldest: h.oldest,
            });
        }
        let backlog = h.events.iter().filter(|e| e.rv > from).cloned().collect();
        Ok((backlog, self.tx.subscribe()))
    }

    /// The events after revision `from` up to `to` (inclusive), oldest first; too old when
    /// the history no longer reaches back to `from`.
    pub(crate) fn between(&self, from: u64, to: u64) -> Result<Vec<Arc<Event>>, TooOld> {
        let h = self.history.lock().unwrap_or_else(|p| p.into_inner());
        if from < h.oldest {
            return Err(TooOld {
                requested: from,
                oldest: h.oldest,
            });
        }
        Ok(h.events
            .iter()
            .filter(|e| e.rv > from && e.rv <= to)
            .cloned()
            .collect())
    }

    /// A live receiver only.
    pub(crate) fn receiver(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(rv: u64) -> Event {
        Event {
            rv,
            type_: EventType::Added,
            resource: "/configmaps".into(),
            namespace: "ns".into(),
            object: json!({"rv": rv}),
            old: None,
        }
    }

    #[test]
    fn replays_from_a_version_and_expires_old_ones() {
        let hub = Hub::new(10, 3);
        for rv in 11..=15 {
            hub.publish(ev(rv));
        }
        // Retained: 13, 14, 15; a watch from 12 still sees everything after it.
        let (backlog, _) = hub.subscribe(12).unwrap();
        assert_eq!(
            backlog.iter().map(|e| e.rv).collect::<Vec<_>>(),
            [13, 14, 15]
        );
        assert_eq!(
            hub.subscribe(11).unwrap_err(),
            TooOld {
                requested: 11,
                oldest: 12
            }
        );
        let (backlog, mut rx) = hub.subscribe(15).unwrap();
        assert!(backlog.is_empty());
        hub.publish(ev(16));
        assert_eq!(rx.try_recv().unwrap().rv, 16);
    }
}
