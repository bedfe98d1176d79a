//! Persistence: objects as JSON in redb, one global revision counter, fsync'd commits. Objects
//! of the resources an encryption provider config names are sealed before they are stored
//! ([`Sealer`]).
//!
//! Writes are decided one after another (read the current object, decide, write) into one open
//! transaction, which the first of them to reach the commit commits for all (group commit); the
//! batch's changes are published to the watch hub after its commit, under the lock that orders
//! commits, so watchers see changes in revision order. Lists read a snapshot, at an earlier
//! revision by undoing the hub's retained changes.

use crate::encryption::Sealer;
use crate::error::{ApiError, Error};
use crate::list::{Item, undo};
use crate::watch::{Event, EventType, Hub};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

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
pub(crate) struct Store {
    db: redb::Database,
    /// The transaction collecting concurrent writes (see [`Store::mutate`]).
    open: Mutex<Open>,
    /// Which batches are committed (or failed); held by the writer committing one.
    settled: Mutex<Settled>,
    /// Writes past their admission, queued to decide into the open batch.
    joining: AtomicUsize,
    hub: Hub,
    sealer: Sealer,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("hub", &self.hub)
            .finish_non_exhaustive()
    }
}

/// The open write transaction: the changes of one batch, decided one after another.
#[derive(Default)]
struct Open {
    txn: Option<redb::WriteTransaction>,
    /// The number of the batch the open transaction belongs to.
    batch: u64,
    /// The revision of the last change decided (committed or in the open transaction).
    rv: u64,
    /// The batch's changes, published in order once it is committed.
    events: Vec<Event>,
}

/// How many times a committer yields to writes queued to join its batch (a bound, so that a
/// stream of arrivals cannot hold a commit back).
const JOIN_YIELDS: usize = 64;

/// Counts a write as queued to join the open batch while it lives.
struct Joining<'a>(&'a AtomicUsize);

impl<'a> Joining<'a> {
    fn enter(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count)
    }
}

impl Drop for Joining<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How many failed batches are remembered for their members to read.
const FAILED_KEPT: usize = 64;

/// The outcome of the batches committed so far.
#[derive(Default)]
struct Settled {
    /// Every batch up to this number is committed or has failed.
    through: u64,
    /// Recently failed batches, with the reason.
    failed: VecDeque<(u64, String)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What [`Store::list`] found.
#[derive(Debug)]
pub(crate) struct Listed {
    /// The revision listed.
    pub(crate) rv: u64,
    /// How many objects were left: after `visit` stopped, all of them when counted, else one.
    pub(crate) rest: u64,
}

/// Why [`Store::list`] failed.
#[derive(Debug)]
pub(crate) enum ListError {
    /// The revision asked for is older than the history.
    TooOld,
    Other(ApiError),
}

impl From<Error> for ListError {
    fn from(e: Error) -> Self {
        Self::Other(e.into())
    }
}

impl From<ApiError> for ListError {
    fn from(e: ApiError) -> Self {
        Self::Other(e)
    }
}

/// The group and resource of a database key.
fn group_plural(k: &str) -> (&str, &str) {
    let mut it = k.splitn(3, '/');
    (it.next().unwrap_or_default(), it.next().unwrap_or_default())
}

/// Decodes what is stored under the database key `k`.
fn decode(sealer: &Sealer, k: &str, stored: &[u8]) -> Result<Value, Error> {
    let (group, plural) = group_plural(k);
    let plain = sealer.open(group, plural, k, stored)?;
    decode_plain(k, &plain)
}

/// Decodes the JSON of the object under the database key `k`.
fn decode_plain(k: &str, json: &[u8]) -> Result<Value, Error> {
    serde_json::from_slice(json).map_err(|source| Error::Corrupt {
        key: k.to_string(),
        source,
    })
}

/// The `metadata.resourceVersion` of an object's JSON, read without decoding the rest.
fn stored_rv(json: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "resourceVersion")]
        resource_version: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Head {
        metadata: Option<Meta>,
    }
    serde_json::from_slice::<Head>(json)
        .ok()?
        .metadata?
        .resource_version
}

/// The `metadata.resourceVersion` of a decoded object.
fn meta_rv(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
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
            // Batch 0 counts as settled: the first one to commit is batch 1.
            open: Mutex::new(Open {
                batch: 1,
                ..Open::default()
            }),
            settled: Mutex::new(Settled::default()),
            joining: AtomicUsize::new(0),
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
        let (r, rv) = self.read()?;
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

    /// Visits the objects whose key starts with `prefix`, from key `from` on (inclusive), in key
    /// order, as they were at revision `at` (`None`: the latest), until `visit` returns false;
    /// then, with `count_rest`, counts the objects not visited. Objects are given as stored
    /// (JSON) when read from the snapshot, or decoded when the history had to restore them.
    /// Returns the revision listed and the count of the rest.
    pub(crate) fn list(
        &self,
        prefix: &str,
        from: &str,
        at: Option<u64>,
        count_rest: bool,
        mut visit: impl FnMut(&str, Item) -> Result<bool, ApiError>,
    ) -> Result<Listed, ListError> {
        let (r, rv) = match at {
            // All committed changes are published under the `settled` lock: the history
            // holds every change up to the snapshot.
            Some(_) => {
                let _settled = lock(&self.settled);
                self.read()?
            }
            None => self.read()?,
        };
        let (rv, mut restored) = match at {
            Some(at) if at < rv => {
                let events = self.hub.between(at, rv).map_err(|_| ListError::TooOld)?;
                (at, undo(prefix, from, &events).into_iter().peekable())
            }
            _ => (rv, BTreeMap::new().into_iter().peekable()),
        };
        let t = r.open_table(OBJECTS).map_err(Error::db)?;
        let mut rest = 0u64;
        let mut going = true;
        let mut give = |k: &str, item: Option<Item>, going: &mut bool| -> Result<bool, ApiError> {
            // Returns whether to go on scanning.
            let Some(item) = item else { return Ok(true) };
            if *going {
                *going = visit(k, item)?;
                if *going {
                    return Ok(true);
                }
            }
            rest += 1;
            Ok(count_rest)
        };
        'scan: for entry in t.range(from..).map_err(Error::db)? {
            let (k, v) = entry.map_err(Error::db)?;
            let k = k.value();
            if !k.starts_with(prefix) {
                break;
            }
            while let Some((rk, _)) = restored.peek().filter(|(rk, _)| rk.as_str() < k) {
                let rk = rk.clone();
                let item = restored.next().and_then(|(_, o)| o).map(Item::Value);
                if !give(&rk, item, &mut going)? {
                    break 'scan;
                }
            }
            let item = if restored.peek().is_some_and(|(rk, _)| rk == k) {
                restored.next().and_then(|(_, o)| o).map(Item::Value)
            } else if going {
                Some(Item::Raw(self.open_raw(k, v.value())?))
            } else {
                // Counted only.
                Some(Item::Raw(Vec::new()))
            };
            if !give(k, item, &mut going)? {
                break;
            }
        }
        if going || count_rest {
            for (rk, o) in restored {
                if !give(&rk, o.map(Item::Value), &mut going)? {
                    break;
                }
            }
        }
        Ok(Listed { rv, rest })
    }

    /// A snapshot of the committed state, and its revision.
    fn read(&self) -> Result<(redb::ReadTransaction, u64), Error> {
        let r = self.db.begin_read().map_err(Error::db)?;
        let meta = r.open_table(META).map_err(Error::db)?;
        let rv = meta
            .get(RV)
            .map_err(Error::db)?
            .map(|g| g.value())
            .unwrap_or(0);
        Ok((r, rv))
    }

    /// The JSON of what is stored under the database key `k`.
    fn open_raw(&self, k: &str, stored: &[u8]) -> Result<Vec<u8>, Error> {
        let (group, plural) = group_plural(k);
        self.sealer.open(group, plural, k, stored)
    }

    /// Reads-decides-writes one object atomically, then publishes the change.
    ///
    /// Group commit: concurrent writes are decided one after another in one open transaction
    /// (each sees the changes decided before it), and the first of them to reach the commit
    /// commits them all with one fsync; the others only wait for that commit. Revisions are
    /// given in decision order and events published in that order after the commit. A write
    /// that fails its own decision fails alone; a failed commit fails every write of its
    /// batch, and only those.
    pub(crate) fn mutate(
        &self,
        key: &Key,
        decide: impl FnOnce(Option<Value>) -> Result<Change, ApiError>,
    ) -> Result<Committed, ApiError> {
        let committed = self.write(key, |k, stored| {
            let current = stored.map(|b| decode_plain(k, &b)).transpose()?;
            let change = decide(current.clone())?;
            Ok(Some((current, change)))
        })?;
        committed.ok_or_else(|| ApiError::internal("a decided write was refused as stale"))
    }

    /// Commits `change`, decided outside the lock on `seen` (the object as read then, `None`:
    /// absent), if the object is still what was seen; `Ok(None)` when it has changed meanwhile
    /// (decide again). Only this comparison is serialised with the other writes: every change
    /// bumps `resourceVersion`, so the stored object's revision says whether it is the one
    /// seen, without decoding it. Batches, revisions and events as [`Store::mutate`].
    pub(crate) fn mutate_seen(
        &self,
        key: &Key,
        seen: Option<Value>,
        change: Change,
    ) -> Result<Option<Committed>, ApiError> {
        self.write(key, |k, stored| {
            let same = match (&seen, stored.as_deref()) {
                (None, None) => true,
                (Some(seen), Some(b)) => match (stored_rv(b), meta_rv(seen)) {
                    (Some(now), Some(then)) => now == then,
                    // Without revisions (not written by this store): compare the objects.
                    _ => decode_plain(k, b)? == *seen,
                },
                _ => false,
            };
            Ok(same.then_some((seen, change)))
        })
    }

    /// One write in the open batch: `plan` gets the object's stored JSON in the open
    /// transaction and returns the object as it is and what to do with it, or `None` when the
    /// write is stale (nothing is written). Waits for the commit of the batch it joined.
    fn write(
        &self,
        key: &Key,
        plan: impl FnOnce(&str, Option<Vec<u8>>) -> Result<Option<(Option<Value>, Change)>, ApiError>,
    ) -> Result<Option<Committed>, ApiError> {
        let k = key.encode();
        let joining = Joining::enter(&self.joining);
        let (batch, outcome) = {
            let mut open = lock(&self.open);
            let txn = match open.txn.take() {
                Some(t) => t,
                None => {
                    // Waits while the previous batch commits.
                    let t = self.db.begin_write().map_err(Error::db)?;
                    open.rv = read_rv(&t)?;
                    t
                }
            };
            let next = open.rv + 1;
            let outcome = self.apply(&txn, key, &k, next, plan);
            let dirty = !open.events.is_empty();
            match outcome {
                Ok(Some((committed, Some(event)))) => {
                    open.rv = next;
                    open.events.push(event);
                    open.txn = Some(txn);
                    (open.batch, Ok(Some(committed)))
                }
                Ok(Some((committed, None))) if dirty => {
                    open.txn = Some(txn);
                    (open.batch, Ok(Some(committed)))
                }
                // Stale against a change of the open batch: decided again once it is
                // committed, so that the next read sees it.
                Ok(None) if dirty => {
                    open.txn = Some(txn);
                    (open.batch, Ok(None))
                }
                Err(e) if dirty => {
                    open.txn = Some(txn);
                    (open.batch, Err(e))
                }
                // Nothing to commit, and the decision saw only committed state.
                other => {
                    txn.abort().map_err(Error::db)?;
                    return other.map(|o| o.map(|(c, _)| c));
                }
            }
        };
        drop(joining);
        // A decision that saw uncommitted changes waits for them to be committed.
        self.settle(batch)?;
        outcome
    }

    /// Reads the current object in `txn`, plans, and writes the change at revision `rv`;
    /// `None` when the plan found the write stale.
    fn apply(
        &self,
        txn: &redb::WriteTransaction,
        key: &Key,
        k: &str,
        rv: u64,
        plan: impl FnOnce(&str, Option<Vec<u8>>) -> Result<Option<(Option<Value>, Change)>, ApiError>,
    ) -> Result<Option<(Committed, Option<Event>)>, ApiError> {
        let mut t = txn.open_table(OBJECTS).map_err(Error::db)?;
        let stored = match t.get(k).map_err(Error::db)? {
            Some(g) => Some(self.open_raw(k, g.value())?),
            None => None,
        };
        let Some((current, change)) = plan(k, stored)? else {
            return Ok(None);
        };
        let (type_, object, old) = match change {
            Change::Unchanged => {
                let object = current.unwrap_or(Value::Null);
                return Ok(Some((
                    Committed {
                        object,
                        event: None,
                    },
                    None,
                )));
            }
            Change::Put(mut obj) => {
                set_rv(&mut obj, rv);
                let bytes =
                    serde_json::to_vec(&obj).map_err(|e| ApiError::internal(e.to_string()))?;
                let bytes = self.sealer.seal(&key.group, &key.plural, k, bytes);
                t.insert(k, bytes.as_slice()).map_err(Error::db)?;
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
                t.remove(k).map_err(Error::db)?;
                set_rv(&mut last, rv);
                (EventType::Deleted, last, current)
            }
        };
        let mut meta = txn.open_table(META).map_err(Error::db)?;
        meta.insert(RV, rv).map_err(Error::db)?;
        let event = Event {
            rv,
            type_,
            resource: format!("{}/{}", key.group, key.plural),
            namespace: key.namespace.clone(),
            object: object.clone(),
            old,
        };
        Ok(Some((
            Committed {
                object,
                event: Some(type_),
            },
            Some(event),
        )))
    }

    /// Returns once `batch` is committed (committing it if nobody has yet), or its failure.
    fn settle(&self, batch: u64) -> Result<(), ApiError> {
        let mut settled = lock(&self.settled);
        if settled.through < batch {
            // The writes already queued for the open batch are past their admission and decide
            // in microseconds: let them in, so that one fsync serves them too, rather than
            // leaving them to wait for this commit and then commit again.
            for _ in 0..JOIN_YIELDS {
                if self.joining.load(Ordering::Acquire) == 0 {
                    break;
                }
                std::thread::yield_now();
            }
            // Batches are committed in order under this lock: `batch` is still the open one.
            let (txn, events) = {
                let mut open = lock(&self.open);
                open.batch += 1;
                (open.txn.take(), std::mem::take(&mut open.events))
            };
            let result = match txn {
                Some(t) => t.commit().map_err(|e| e.to_string()),
                None => Err("the write transaction was lost".to_string()),
            };
            settled.through = batch;
            match result {
                Ok(()) => {
                    for ev in events {
                        self.hub.publish(ev);
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, writes = events.len(), "commit failed");
                    settled.failed.push_back((batch, e));
                    if settled.failed.len() > FAILED_KEPT {
                        settled.failed.pop_front();
                    }
                }
            }
        }
        match settled.failed.iter().find(|(b, _)| *b == batch) {
            Some((_, e)) => Err(Error::db(e).into()),
            None => Ok(()),
        }
    }
}

/// The revision last committed, as `txn` sees it.
fn read_rv(txn: &redb::WriteTransaction) -> Result<u64, Error> {
    let meta = txn.open_table(META).map_err(Error::db)?;
    Ok(meta
        .get(RV)
        .map_err(Error::db)?
        .map(|g| g.value())
        .unwrap_or(0))
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

    /// Writes queued while a batch is open share its commit: a write whose own decision fails
    /// fails alone, the others get consecutive revisions in decision order, one fsync.
    #[test]
    fn a_failed_write_in_a_batch_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let s = std::sync::Arc::new(Store::open(&path, 100, Sealer::default()).unwrap());
        let (_, mut rx) = s.hub().subscribe(0).unwrap();
        // Hold the commit back until every write has been decided into the open batch.
        let held = lock(&s.settled);
        let decided = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let (s, d) = (s.clone(), decided.clone());
                let h = std::thread::spawn(move || {
                    let key = Key::new("", "configmaps", "ns", &format!("cm-{i}"));
                    s.mutate(&key, |_| {
                        d.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        if i == 3 {
                            Err(ApiError::bad_request("invalid object"))
                        } else {
                            Ok(Change::Put(
                                json!({"metadata": {"name": format!("cm-{i}")}}),
                            ))
                        }
                    })
                });
                // One at a time, so decision order is known.
                while decided.load(std::sync::atomic::Ordering::SeqCst) <= i {
                    std::thread::yield_now();
                }
                h
            })
            .collect();
        assert_eq!(lock(&s.open).events.len(), 7);
        drop(held);
        let results: Vec<_> = writers.into_iter().map(|h| h.join().unwrap()).collect();
        let mut rvs = Vec::new();
        for (i, r) in results.iter().enumerate() {
            match r {
                Err(e) => {
                    assert_eq!(i, 3);
                    assert_eq!(e.message, "invalid object");
                }
                Ok(c) => rvs.push(c.object["metadata"]["resourceVersion"].clone()),
            }
        }
        assert_eq!(
            rvs,
            (1..=7).map(|v| json!(v.to_string())).collect::<Vec<_>>()
        );
        assert_eq!(lock(&s.settled).through, 1, "one commit for the batch");
        let events: Vec<_> = (0..7).map(|_| rx.try_recv().unwrap()).collect();
        assert_eq!(
            events.iter().map(|e| e.rv).collect::<Vec<_>>(),
            (1..=7).collect::<Vec<_>>()
        );
        assert_eq!(events[3].object["metadata"]["name"], "cm-4");
        drop(s);
        let s = Store::open(&path, 10, Sealer::default()).unwrap();
        assert_eq!(s.revision().unwrap(), 7);
        assert_eq!(
            s.get(&Key::new("", "configmaps", "ns", "cm-3")).unwrap(),
            None
        );
    }

    /// A change decided outside the lock is committed only on the object it was decided on.
    #[test]
    fn a_change_decided_on_a_stale_object_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("db"), 100, Sealer::default()).unwrap();
        let (_, mut rx) = s.hub().subscribe(0).unwrap();
        let key = Key::new("", "configmaps", "ns", "a");
        let put = |v: &str| Change::Put(json!({"metadata": {"name": "a"}, "data": {"v": v}}));
        // Absent when seen: created; then absent is stale.
        let c = s.mutate_seen(&key, None, put("1")).unwrap().unwrap();
        assert_eq!(c.event, Some(EventType::Added));
        assert!(s.mutate_seen(&key, None, put("x")).unwrap().is_none());
        let seen = s.get(&key).unwrap();
        let c = s
            .mutate_seen(&key, seen.clone(), put("2"))
            .unwrap()
            .unwrap();
        assert_eq!(c.object["metadata"]["resourceVersion"], "2");
        // The first version is stale now: nothing written, no revision used.
        assert!(
            s.mutate_seen(&key, seen.clone(), put("y"))
                .unwrap()
                .is_none()
        );
        assert!(s.mutate_seen(&key, seen, Change::Delete).unwrap().is_none());
        assert_eq!(s.revision().unwrap(), 2);
        let events: Vec<_> = (0..2).map(|_| rx.try_recv().unwrap()).collect();
        assert!(rx.try_recv().is_err());
        assert_eq!(events[1].object["data"]["v"], "2");
        assert_eq!(events[1].old.as_ref().unwrap()["data"]["v"], "1");
        let seen = s.get(&key).unwrap();
        let c = s.mutate_seen(&key, seen, Change::Delete).unwrap().unwrap();
        assert_eq!(c.event, Some(EventType::Deleted));
        assert_eq!(s.get(&key).unwrap(), None);
    }

    #[test]
    fn the_stored_revision_is_read_without_the_rest() {
        let cases: [(&[u8], Option<&str>); 5] = [
            (
                br#"{"metadata":{"name":"a","resourceVersion":"7"},"data":{"x":[1,{"y":2}]}}"#,
                Some("7"),
            ),
            (
                br#"{"data":{},"metadata":{"resourceVersion":"12"}}"#,
                Some("12"),
            ),
            (br#"{"metadata":{"name":"a"}}"#, None),
            (br#"{"kind":"K"}"#, None),
            (b"not json", None),
        ];
        for (json, want) in cases {
            assert_eq!(stored_rv(json).as_deref(), want);
        }
    }

    /// A decision that read an uncommitted change of its batch is answered after the commit.
    #[test]
    fn a_decision_on_uncommitted_state_waits_for_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let s = std::sync::Arc::new(
            Store::open(&dir.path().join("db"), 100, Sealer::default()).unwrap(),
        );
        let key = Key::new("", "configmaps", "ns", "a");
        let held = lock(&s.settled);
        let first = {
            let (s, key) = (s.clone(), key.clone());
            std::thread::spawn(move || {
                s.mutate(&key, |_| {
                    Ok(Change::Put(json!({"metadata": {"name": "a"}})))
                })
            })
        };
        while lock(&s.open).events.is_empty() {
            std::thread::yield_now();
        }
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let second = {
            let (s, key) = (s.clone(), key.clone());
            std::thread::spawn(move || {
                let r = s.mutate(&key, |now| {
                    assert!(now.is_some(), "sees the first write");
                    Err(ApiError::conflict("", "configmaps", "a", "already exists"))
                });
                done_tx.send(()).unwrap();
                r
            })
        };
        // Not answered while the batch it read from is uncommitted.
        assert!(
            done_rx
                .recv_timeout(std::time::Duration::from_millis(200))
                .is_err()
        );
        drop(held);
        assert_eq!(second.join().unwrap().unwrap_err().code, 409);
        assert_eq!(first.join().unwrap().unwrap().event, Some(EventType::Added));
    }
}
