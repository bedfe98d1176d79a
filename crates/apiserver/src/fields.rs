//! Field paths and field sets, as server-side apply tracks ownership: the `fieldsV1` encoding
//! of `metadata.managedFields` (`f:name`, `k:{"name":"app"}`, `v:"x"`, `i:0`, `.`), the
//! paths Kubernetes prints in conflicts (`.spec.containers[name="app"].image`), and the walk
//! from an object to the set of fields it sets. Pure: no I/O.

use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::fmt;

mod shape;
pub(crate) use shape::{ListShape, Shape};

/// One step of a path into an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Element {
    /// A field of a map: `f:name`.
    Field(String),
    /// An item of an associative list, by its key fields: `k:{"name":"app"}` (canonical JSON,
    /// fields sorted by name).
    Key(String),
    /// An item of a set (a list of scalars merged by value): `v:"x"`.
    Value(String),
    /// An item of an atomic list by position: `i:0` (only read, never produced).
    Index(usize),
}

/// A path from the object's root.
pub(crate) type Path = Vec<Element>;

/// A set of owned paths.
pub(crate) type FieldSet = BTreeSet<Path>;

/// Canonical JSON of a scalar or a key object (object fields sorted by name).
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[*k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

impl Element {
    /// The `fieldsV1` key of this element.
    fn encode(&self) -> String {
        match self {
            Self::Field(f) => format!("f:{f}"),
            Self::Key(k) => format!("k:{k}"),
            Self::Value(v) => format!("v:{v}"),
            Self::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Option<Self> {
        let (tag, rest) = s.split_at_checked(2)?;
        Some(match tag {
            "f:" => Self::Field(rest.into()),
            "k:" => Self::Key(canonical(&serde_json::from_str(rest).ok()?)),
            "v:" => Self::Value(canonical(&serde_json::from_str(rest).ok()?)),
            "i:" => Self::Index(rest.parse().ok()?),
            _ => return None,
        })
    }

    /// An associative-list element for `item` with `keys` (a missing key takes its default).
    pub(crate) fn key_of(item: &Value, keys: &[(String, Option<Value>)]) -> Self {
        let mut m = Map::new();
        for (k, default) in keys {
            if let Some(v) = item.get(k).cloned().or_else(|| default.clone()) {
                m.insert(k.clone(), v);
            }
        }
        Self::Key(canonical(&Value::Object(m)))
    }

    /// A set element for the scalar `v`.
    pub(crate) fn value_of(v: &Value) -> Self {
        Self::Value(canonical(v))
    }
}

impl fmt::Display for Element {
    /// As Kubernetes prints a path element: `.field`, `[name="app"]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Field(n) => write!(f, ".{n}"),
            Self::Key(k) => {
                let parts: Vec<String> = match serde_json::from_str::<Value>(k) {
                    Ok(Value::Object(m)) => m.iter().map(|(n, v)| format!("{n}={v}")).collect(),
                    _ => vec![k.clone()],
                };
                write!(f, "[{}]", parts.join(","))
            }
            Self::Value(v) => write!(f, "[={v}]"),
            Self::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path as Kubernetes prints it in conflicts.
pub(crate) fn display(path: &[Element]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// Encodes a field set as `fieldsV1`.
pub(crate) fn encode(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for e in path {
            let child = node
                .entry(e.encode())
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(m) = child else { break };
            node = m;
        }
    }
    // A node that is both owned and has children carries ".".
    mark_members(&mut root, set, &mut Vec::new());
    Value::Object(root)
}

fn mark_members(node: &mut Map<String, Value>, set: &FieldSet, path: &mut Path) {
    for (k, v) in node.iter_mut() {
        let Some(e) = Element::decode(k) else {
            continue;
        };
        let Value::Object(child) = v else { continue };
        path.push(e);
        if !child.is_empty() && set.contains(path.as_slice()) {
            child.insert(".".into(), Value::Object(Map::new()));
        }
        mark_members(child, set, path);
        path.pop();
    }
}

/// Decodes `fieldsV1`; unknown keys are skipped.
pub(crate) fn decode(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    fn walk(node: &Value, path: &mut Path, out: &mut FieldSet) {
        let Value::Object(m) = node else { return };
        for (k, child) in m {
            if k == "." {
                out.insert(path.clone());
                continue;
            }
            let Some(e) = Element::decode(k) else {
                continue;
            };
            path.push(e);
            if child.as_object().is_some_and(Map::is_empty) {
                out.insert(path.clone());
            } else {
                walk(child, path, out);
            }
            path.pop();
        }
    }
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// The fields `obj` sets under `path`: scalars, atomic lists and maps, empty maps, the items
/// of associative lists and sets (with the fields inside associative items).
pub(crate) fn leaves(obj: &Value, shape: &Shape<'_>) -> FieldSet {
    let mut out = FieldSet::new();
    walk_leaves(obj, &mut Vec::new(), shape, &mut out);
    out
}

fn walk_leaves(v: &Value, path: &mut Path, shape: &Shape<'_>, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() && (path.is_empty() || !shape.atomic_map(path)) => {
            for (k, c) in m {
                path.push(Element::Field(k.clone()));
                walk_leaves(c, path, shape, out);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match shape.list(path) {
            ListShape::Atomic => {
                out.insert(path.clone());
            }
            ListShape::Set => {
                for x in items {
                    path.push(Element::value_of(x));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            ListShape::Map(keys) => {
                for item in items {
                    path.push(Element::key_of(item, &keys));
                    out.insert(path.clone());
                    if let Value::Object(m) = item {
                        for (k, c) in m {
                            path.push(Element::Field(k.clone()));
                            walk_leaves(c, path, shape, out);
                            path.pop();
                        }
                    }
                    path.pop();
                }
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The value at `path` in `obj`.
pub(crate) fn get<'a>(obj: &'a Value, path: &[Element], shape: &Shape<'_>) -> Option<&'a Value> {
    let mut cur = obj;
    for (i, e) in path.iter().enumerate() {
        cur = match e {
            Element::Field(f) => cur.get(f)?,
            Element::Key(k) => {
                let ListShape::Map(keys) = shape.list(&path[..i]) else {
                    return None;
                };
                cur.as_array()?
                    .iter()
                    .find(|x| matches!(Element::key_of(x, &keys), Element::Key(ref o) if o == k))?
            }
            Element::Value(v) => cur.as_array()?.iter().find(|x| &canonical(x) == v)?,
            Element::Index(n) => cur.as_array()?.get(*n)?,
        };
    }
    Some(cur)
}

/// Removes the field at `path` from `obj`; returns whether something was removed.
pub(crate) fn remove(obj: &mut Value, path: &[Element], shape: &Shape<'_>) -> bool {
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    let keys = match shape.list(parent_path) {
        ListShape::Map(keys) => keys,
        _ => Vec::new(),
    };
    let Some(parent) = get_mut(obj, parent_path, shape) else {
        return false;
    };
    match (last, parent) {
        (Element::Field(f), Value::Object(m)) => m.remove(f).is_some(),
        (Element::Key(k), Value::Array(a)) => {
            let before = a.len();
            a.retain(|x| !matches!(Element::key_of(x, &keys), Element::Key(ref o) if o == k));
            a.len() != before
        }
        (Element::Value(v), Value::Array(a)) => {
            let before = a.len();
            a.retain(|x| &canonical(x) != v);
            a.len() != before
        }
        _ => false,
    }
}

fn get_mut<'a>(obj: &'a mut Value, path: &[Element], shape: &Shape<'_>) -> Option<&'a mut Value> {
    let mut cur = obj;
    for (i, e) in path.iter().enumerate() {
        cur = match e {
            Element::Field(f) => cur.get_mut(f)?,
            Element::Key(k) => {
                let ListShape::Map(keys) = shape.list(&path[..i]) else {
                    return None;
                };
                cur.as_array_mut()?
                    .iter_mut()
                    .find(|x| matches!(Element::key_of(x, &keys), Element::Key(ref o) if o == k))?
            }
            Element::Value(v) => cur
                .as_array_mut()?
                .iter_mut()
                .find(|x| &canonical(x) == v)?,
            Element::Index(n) => cur.as_array_mut()?.get_mut(*n)?,
        };
    }
    Some(cur)
}

/// Merges the applied configuration `src` into `dst`: maps field by field, associative lists
/// item by key, sets by value; atomic lists, atomic maps and scalars are replaced.
pub(crate) fn merge(dst: &mut Value, src: &Value, path: &mut Path, shape: &Shape<'_>) {
    match (&mut *dst, src) {
        (Value::Object(d), Value::Object(s)) if path.is_empty() || !shape.atomic_map(path) => {
            for (k, sv) in s {
                path.push(Element::Field(k.clone()));
                match d.get_mut(k) {
                    Some(dv) => merge(dv, sv, path, shape),
                    None => {
                        d.insert(k.clone(), sv.clone());
                    }
                }
                path.pop();
            }
        }
        (Value::Array(d), Value::Array(s)) => match shape.list(path) {
            ListShape::Atomic => *dst = src.clone(),
            ListShape::Set => {
                for x in s {
                    if !d.contains(x) {
                        d.push(x.clone());
                    }
                }
            }
            ListShape::Map(keys) => {
                for item in s {
                    let e = Element::key_of(item, &keys);
                    match d.iter().position(|x| Element::key_of(x, &keys) == e) {
                        Some(i) => {
                            path.push(e);
                            merge(&mut d[i], item, path, shape);
                            path.pop();
                        }
                        None => d.push(item.clone()),
                    }
                }
            }
        },
        _ => *dst = src.clone(),
    }
}

/// Drops `null` fields (an applied `null` sets nothing).
pub(crate) fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, c| !c.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
