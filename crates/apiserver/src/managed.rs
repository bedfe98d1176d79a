//! `metadata.managedFields`: which field manager owns which fields, kept as Kubernetes keeps
//! it, and server-side apply on top of it.
//!
//! - An apply (`application/apply-patch+yaml`) owns exactly the fields its configuration sets:
//!   they are merged into the object (associative lists by key, sets by value, the rest
//!   replaced); fields it set last time and no longer sets are removed unless another manager
//!   owns them too; a field it sets to a new value while another manager owns it is a
//!   conflict (409), unless forced, which takes the field over.
//! - Any other write (create, update, patch) gives its manager (`Update` operation) the fields
//!   it changed, taking them from the others; fields that disappeared are owned by nobody.
//! - A write that changes nothing leaves the entries (and their times) as they were, so the
//!   object is unchanged and no revision or watch event follows.
//!
//! Pure: objects in, objects out.

use crate::error::ApiError;
use crate::fields::{self, Element, FieldSet, Path, Shape};
use serde_json::{Map, Value, json};

/// One entry of `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), fields::encode(&self.fields));
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), json!(s));
        }
        Value::Object(m)
    }

    /// As Kubernetes names a manager in a conflict message.
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s = format!("{s} with subresource {sub:?}");
        }
        if self.operation == "Update" {
            s = match &self.time {
                Some(t) => format!("{s} using {} at {t}", self.api_version),
                None => format!("{s} using {}", self.api_version),
            };
        }
        s
    }
}

fn read(obj: &Value) -> Vec<Entry> {
    let s = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some(Entry {
                manager: s(e, "manager").unwrap_or_default(),
                operation: s(e, "operation")?,
                api_version: s(e, "apiVersion").unwrap_or_default(),
                time: s(e, "time"),
                subresource: s(e, "subresource").filter(|x| !x.is_empty()),
                fields: e.get("fieldsV1").map(fields::decode).unwrap_or_default(),
            })
        })
        .collect()
}

fn write(obj: &mut Value, entries: &[Entry]) {
    let m = crate::meta::meta_mut(obj);
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_json)
        .collect();
    if list.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), Value::Array(list));
    }
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(Value::Object(m)) = o.get_mut("metadata") {
        m.remove("managedFields");
    }
    o
}

/// Who writes and where.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writer<'a> {
    /// The field manager.
    pub(crate) manager: &'a str,
    /// `group/version` of the request.
    pub(crate) api_version: &'a str,
    /// `status` for the status subresource.
    pub(crate) subresource: Option<&'a str>,
    /// Whether the resource has a status subresource (then the main resource's writes do not
    /// own `status`, and the status subresource's own nothing else).
    pub(crate) has_status: bool,
    /// The time stamped on changed entries.
    pub(crate) now: &'a str,
}

/// Metadata that nobody owns.
const UNOWNED_METADATA: [&str; 10] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

impl Writer<'_> {
    /// Whether a write through this endpoint can own `path`.
    fn owns(&self, path: &Path) -> bool {
        let first = match path.first() {
            Some(Element::Field(f)) => f.as_str(),
            _ => return false,
        };
        match first {
            "apiVersion" | "kind" => false,
            "metadata" => {
                self.subresource.is_none()
                    && !matches!(path.get(1), Some(Element::Field(f)) if UNOWNED_METADATA.contains(&f.as_str()))
                    && path.len() > 1
            }
            "status" if self.has_status => self.subresource == Some("status"),
            _ => self.subresource.is_none() || !self.has_status,
        }
    }
}

/// Whether `path` differs between `a` and `b`: items of lists and sets by presence, the rest
/// by value.
fn differs(a: &Value, b: &Value, path: &[Element], shape: &Shape<'_>) -> bool {
    let (x, y) = (fields::get(a, path, shape), fields::get(b, path, shape));
    match path.last() {
        Some(Element::Key(_) | Element::Value(_)) => x.is_some() != y.is_some(),
        _ => x != y,
    }
}

/// Removes `path` and then the maps and lists it leaves empty that nobody owns.
fn remove_and_prune(obj: &mut Value, path: &[Element], owned: &FieldSet, shape: &Shape<'_>) {
    if !fields::remove(obj, path, shape) {
        return;
    }
    let mut parent = &path[..path.len() - 1];
    while parent.len() > 1 && !owned.contains(parent) {
        let empty = match fields::get(obj, parent, shape) {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if !empty || !fields::remove(obj, parent, shape) {
            break;
        }
        parent = &parent[..parent.len() - 1];
    }
}

/// The 409 of an apply whose fields other managers own with other values.
fn conflict_error(conflicts: &[(String, Path)]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(who, p)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {who}"),
                   "field": fields::display(p)})
        })
        .collect();
    let message = if let [(who, p)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {who}: {}",
            fields::display(p)
        )
    } else {
        let mut by_manager: Vec<(&String, Vec<&Path>)> = Vec::new();
        for (who, p) in conflicts {
            match by_manager.iter_mut().find(|(w, _)| *w == who) {
                Some((_, ps)) => ps.push(p),
                None => by_manager.push((who, vec![p])),
            }
        }
        by_manager.sort_by(|a, b| a.0.cmp(b.0));
        let mut lines = Vec::new();
        for (who, ps) in by_manager {
            lines.push(format!("conflicts with {who}:"));
            lines.extend(ps.iter().map(|p| format!("- {}", fields::display(p))));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApiError::apply_conflict(message, causes)
}

/// What an applied configuration may set through `w`: no nulls, `status` only through the
/// status subresource (when there is one), nothing but `status` there.
fn scoped_config(config: &Value, w: &Writer<'_>) -> Value {
    let mut cfg = config.clone();
    fields::strip_nulls(&mut cfg);
    if let Value::Object(m) = &mut cfg
        && w.has_status
    {
        if w.subresource == Some("status") {
            m.retain(|k, _| matches!(k.as_str(), "status" | "apiVersion" | "kind" | "metadata"));
            if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                meta.retain(|k, _| UNOWNED_METADATA.contains(&k.as_str()));
            }
        } else {
            m.remove("status");
        }
    }
    cfg
}

/// Server-side apply of `config` by `w.manager` onto `live` (`{}` when the object does not
/// exist yet): the new object with its `managedFields`, or the conflict error.
pub(crate) fn apply(
    live: &Value,
    config: &Value,
    shape: &Shape<'_>,
    w: &Writer<'_>,
    force: bool,
) -> Result<Value, ApiError> {
    let mut entries = read(live);
    let before = without_managed_fields(live);
    let cfg = scoped_config(config, w);
    let applied: FieldSet = fields::leaves(&cfg, shape)
        .into_iter()
        .filter(|p| w.owns(p))
        .collect();
    let mine = entries
        .iter()
        .position(|e| e.is(w.manager, "Apply", w.subresource));
    let previous = mine.map(|i| entries[i].fields.clone()).unwrap_or_default();

    let mut obj = before.clone();
    let cfg_without_meta_managed = without_managed_fields(&cfg);
    fields::merge(&mut obj, &cfg_without_meta_managed, &mut Vec::new(), shape);

    let mut conflicts = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if Some(i) == mine {
            continue;
        }
        for p in applied.intersection(&e.fields) {
            if differs(&before, &obj, p, shape) {
                conflicts.push((i, p.clone()));
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            let named: Vec<(String, Path)> = conflicts
                .into_iter()
                .map(|(i, p)| (entries[i].describe(), p))
                .collect();
            return Err(conflict_error(&named));
        }
        for (i, p) in &conflicts {
            entries[*i].fields.remove(p);
        }
    }

    let others: FieldSet = entries
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != mine)
        .flat_map(|(_, e)| e.fields.iter().cloned())
        .collect();
    for p in previous.difference(&applied) {
        let shared = others.iter().any(|o| o.starts_with(p));
        if !shared {
            let owned: FieldSet = others.union(&applied).cloned().collect();
            remove_and_prune(&mut obj, p, &owned, shape);
        }
    }

    let unchanged = mine
        .is_some_and(|i| entries[i].fields == applied && entries[i].api_version == w.api_version)
        && obj == before;
    let entry = Entry {
        manager: w.manager.to_string(),
        operation: "Apply".into(),
        api_version: w.api_version.to_string(),
        time: if unchanged {
            mine.and_then(|i| entries[i].time.clone())
        } else {
            Some(w.now.to_string())
        },
        subresource: w.subresource.map(str::to_string),
        fields: applied,
    };
    match mine {
        Some(i) => entries[i] = entry,
        None => entries.push(entry),
    }
    write(&mut obj, &entries);
    Ok(obj)
}

/// Records a non-apply write (`Update` operation) of `new` over `old` by `w.manager`: it owns
/// what it changed, the others lose it, and fields gone from the object are owned by nobody.
pub(crate) fn update(old: Option<&Value>, new: &mut Value, shape: &Shape<'_>, w: &Writer<'_>) {
    let mut entries = old.map(read).unwrap_or_default();
    let before = old.map_or_else(|| json!({}), without_managed_fields);
    if let Some(Value::Object(m)) = new.get_mut("metadata") {
        m.remove("managedFields");
    }
    let changed: FieldSet = fields::leaves(new, shape)
        .into_iter()
        .filter(|p| w.owns(p) && differs(&before, new, p, shape))
        .collect();
    for e in &mut entries {
        e.fields
            .retain(|p| !changed.contains(p) && fields::get(new, p, shape).is_some());
    }
    if !changed.is_empty() {
        match entries
            .iter_mut()
            .find(|e| e.is(w.manager, "Update", w.subresource))
        {
            Some(e) => {
                e.fields.extend(changed);
                e.time = Some(w.now.to_string());
                e.api_version = w.api_version.to_string();
            }
            None => entries.push(Entry {
                manager: w.manager.to_string(),
                operation: "Update".into(),
                api_version: w.api_version.to_string(),
                time: Some(w.now.to_string()),
                subresource: w.subresource.map(str::to_string),
                fields: changed,
            }),
        }
    }
    write(new, &entries);
}

#[cfg(test)]
mod tests;
