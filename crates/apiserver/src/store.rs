//! Persistence: objects as JSON in redb, one global revision counter, fsync'd commits. Objects
//! of the resources an encryption provider config names are sealed before they are stored
//! ([`Sealer`]).
//!
//! Writes are serialized: read the current object, decide, commit, then publish the change to
//! the watch hub while still holding the write lock, so watchers see changes in commit order.

use crate::encryption::Sealer;
use crate::error::{ApiError, Error};
use crate::watch::{Event, EventType, Hub};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use std::path::Path;
use std::sync::Mutex;

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const RV: &str = "resourceVersion";

/// Where an object lives: `group/plural/namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    pub(crate) group: String,
    pub(crate) plural: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl Key {
    pub(crate) fn new(group: &str, plural: &str, namespace: &str, name: &str) -> Self {
        Self {
            group: group.into(),
            plural: plural.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The database key.
    pub(crate) fn encode(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.group, self.plural, self.namespace, self.name
        )
    }

    /// Parses a database key.
    pub(crate) fn decode(s: &str) -> Option<Self> {
        let mut it = s.splitn(4, '/');
        Some(Self::new(it.next()?, it.next()?, it.next()?, it.next()?))
    }
}

/// The prefix of every key of a resource, optionally within one namespace.
pub(crate) fn prefix(group: &str, plural: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("{group}/{plural}/{ns}/"),
        None => format!("{group}/{plural}/"),
    }
}

/// What a write decided to do with an object.
#[derive(Debug)]
pub(crate) enum Change {
    /// Store this object (create or replace).
    Put(Value),
    /// Remove the object.
    Delete,
    /// Leave everything as is (a no-op update does not bump the revision).
    Unchanged,
}

/// The result of a committed write.
#[derive(Debug, Clone)]
pub(crate) struct Committed {
    /// The object as stored (for deletions: its last state at the deletion revision).
    pub(crate) object: Value,
    /// `None` when nothing changed.
    pub(crate) event: Option<EventType>,
}

/// The object store.
#[derive(Debug)]
pub(crate) struct Store {
    db: redb::Database,
    write_lock: Mutex<()>,
    hub: Hub,
    sealer: Sealer,
}

/// Decodes what is stored under the database key `k`.
fn decode(sealer: &Sealer, k: &str, stored: &[u8]) -> Result<Value, Error> {
    let (group, plural) = Key::decode(k)
        .map(|key| (key.group, key.plural))
        .unwrap_or_default();
    let plain = sealer.open(&group, &plural, k, stored)?;
    serde_json::from_slice(&plain).map_err(|source| Error::Corrupt {
        key: k.to_string(),
        source,
    })
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

impl Store {
    /// Opens (or creates) the database file; `history` is how many changes a watch can replay.
    pub(crate) fn open(path: &Path, history: usize, sealer: Sealer) -> Result<Self, Error> {
        let db = create_private(path)?;
        let txn = db.begin_write().map_err(Error::db)?;
        txn.open_table(OBJECTS).map_err(Error::db)?;
        txn.open_table(META).map_err(Error::db)?;
        txn.commit().map_err(Error::db)?;
        let current = {
            let r = db.begin_read().map_err(Error::db)?;
            let meta = r.open_table(META).map_err(Error::db)?;
            meta.get(RV)
                .map_err(Error::db)?
                .map(|g| g.value())
                .unwrap_or(0)
        };
        Ok(Self {
            db,
            write_lock: Mutex::new(()),
            hub: Hub::new(current, history),
            sealer,
        })
    }

    /// The watch hub fed by this store.
    pub(crate) fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The current revision.
    #[cfg(test)]
    pub(crate) fn revision(&self) -> Result<u64, Error> {
        let r = self.db.begin_read().map_err(Error::db)?;
        let meta = r.open_table(META).map_err(Error::db)?;
        Ok(meta
            .get(RV)
            .map_err(Error::db)?
            .map(|g| g.value())
            .unwrap_or(0))
    }

    /// Reads one object.
    pub(crate) fn get(&self, key: &Key) -> Result<Option<Value>, Error> {
        let k = key.encode();
        let r = self.db.begin_read().map_err(Error::db)?;
        let t = r.open_table(OBJECTS).map_err(Error::db)?;
        match t.get(k.as_str()).map_err(Error::db)? {
            Some(g) => decode(&self.sealer, &k, g.value()).map(Some),
            None => Ok(None),
        }
    }

    /// Visits objects whose key starts with `prefix`, after key `after` (exclusive), in key
    /// order, from one consistent snapshot, until `visit` returns false. Returns the snapshot's
    /// revision.
    pub(crate) fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        mut visit: impl FnMut(&str, Value) -> bool,
    ) -> Result<u64, Error> {
        let r = self.db.begin_read().map_err(Error::db)?;
        let meta = r.open_table(META).map_err(Error::db)?;
        let rv = meta
            .get(RV)
            .map_err(Error::db)?
            .map(|g| g.value())
            .unwrap_or(0);
        let t = r.open_table(OBJECTS).map_err(Error::db)?;
        let start = after.unwrap_or(prefix);
        for item in t.range(start..).map_err(Error::db)? {
            let (k, v) = item.map_err(Error::db)?;
            let k = k.value();
            if !k.starts_with(prefix) {
                break;
            }
            if after == Some(k) {
                continue;
            }
            let obj = decode(&self.sealer, k, v.value())?;
            if !visit(k, obj) {
                break;
            }
        }
        Ok(rv)
    }

    /// Reads-decides-writes one object atomically, then publishes the change.
    pub(crate) fn mutate(
        &self,
        key: &Key,
        decide: impl FnOnce(Option<Value>) -> Result<Change, ApiError>,
    ) -> Result<Committed, ApiError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        let k = key.encode();
        let txn = self.db.begin_write().map_err(Error::db)?;
        let (event, object, old) = {
            let mut t = txn.open_table(OBJECTS).map_err(Error::db)?;
            let mut meta = txn.open_table(META).map_err(Error::db)?;
            let current: Option<Value> = match t.get(k.as_str()).map_err(Error::db)? {
                Some(g) => Some(decode(&self.sealer, &k, g.value())?),
                None => None,
            };
            let rv = meta
                .get(RV)
                .map_err(Error::db)?
                .map(|g| g.value())
                .unwrap_or(0)
                + 1;
            match decide(current.clone())? {
                Change::Unchanged => {
                    return Ok(Committed {
                        object: current.unwrap_or(Value::Null),
                        event: None,
                    });
                }
                Change::Put(mut obj) => {
                    set_rv(&mut obj, rv);
                    let bytes =
                        serde_json::to_vec(&obj).map_err(|e| ApiError::internal(e.to_string()))?;
                    let bytes = self.sealer.seal(&key.group, &key.plural, &k, bytes);
                    t.insert(k.as_str(), bytes.as_slice()).map_err(Error::db)?;
                    meta.insert(RV, rv).map_err(Error::db)?;
                    let ty = if current.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    };
                    (ty, obj, current)
                }
                Change::Delete => {
                    let Some(mut last) = current.clone() else {
                        return Err(ApiError::not_found(&key.group, &key.plural, &key.name));
                    };
                    t.remove(k.as_str()).map_err(Error::db)?;
                    meta.insert(RV, rv).map_err(Error::db)?;
                    set_rv(&mut last, rv);
                    (EventType::Deleted, last, current)
                }
            }
        };
        txn.commit().map_err(Error::db)?;
        let rv = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        self.hub.publish(Event {
            rv,
            type_: event,
            resource: format!("{}/{}", key.group, key.plural),
            namespace: key.namespace.clone(),
            object: object.clone(),
            old,
        });
        Ok(Committed {
            object,
            event: Some(event),
        })
    }
}

/// Opens or creates the database file, readable by its owner only.
fn create_private(path: &Path) -> Result<redb::Database, Error> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(Error::io(path))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(Error::io(path))?;
    drop(file);
    redb::Database::create(path).map_err(Error::db)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_bump_one_counter_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.redb");
        let key = Key::new("", "configmaps", "ns", "a");
        {
            let s = Store::open(&path, 10, Sealer::default()).unwrap();
            let c = s
                .mutate(&key, |_| {
                    Ok(Change::Put(json!({"metadata": {"name": "a"}})))
                })
                .unwrap();
            assert_eq!(c.object["metadata"]["resourceVersion"], "1");
            assert_eq!(c.event, Some(EventType::Added));
            let c = s.mutate(&key, |_| Ok(Change::Unchanged)).unwrap();
            assert_eq!(c.event, None);
            let k2 = Key::new("", "configmaps", "ns", "b");
            s.mutate(&k2, |_| Ok(Change::Put(json!({"metadata": {"name": "b"}}))))
                .unwrap();
            let c = s.mutate(&key, |_| Ok(Change::Delete)).unwrap();
            assert_eq!(c.object["metadata"]["resourceVersion"], "3");
            let err = s.mutate(&key, |_| Ok(Change::Delete)).unwrap_err();
            assert_eq!(err.code, 404);
        }
        let s = Store::open(&path, 10, Sealer::default()).unwrap();
        assert_eq!(s.revision().unwrap(), 3);
        let mut names = Vec::new();
        let rv = s
            .scan(&prefix("", "configmaps", None), None, |_, v| {
                names.push(v["metadata"]["name"].as_str().unwrap().to_string());
                true
            })
            .unwrap();
        assert_eq!((rv, names), (3, vec!["b".to_string()]));
        // History does not survive a restart: watches from before it are too old.
        assert!(s.hub().subscribe(2).is_err());
        assert!(s.hub().subscribe(3).is_ok());
    }

    #[test]
    fn scan_respects_prefix_and_after() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("db"), 10, Sealer::default()).unwrap();
        for (ns, n) in [("a", "1"), ("a", "2"), ("b", "1"), ("ab", "1")] {
            let k = Key::new("", "configmaps", ns, n);
            s.mutate(&k, |_| {
                Ok(Change::Put(
                    json!({"metadata": {"name": n, "namespace": ns}}),
                ))
            })
            .unwrap();
        }
        let mut seen = Vec::new();
        s.scan(
            &prefix("", "configmaps", Some("a")),
            Some("/configmaps/a/1"),
            |k, _| {
                seen.push(k.to_string());
                true
            },
        )
        .unwrap();
        assert_eq!(seen, ["/configmaps/a/2"]);
        assert_eq!(
            Key::decode("/configmaps/a/2"),
            Some(Key::new("", "configmaps", "a", "2"))
        );
    }
}
