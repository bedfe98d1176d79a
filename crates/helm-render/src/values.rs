//! Values: the user's sources merged as `helm template` merges them (`--values` files, then
//! `--set-json`, `--set`, `--set-string`, `--set-file`), and Helm's coalescing of those with
//! the chart's and its subcharts' `values.yaml` (`chartutil.CoalesceValues` / `MergeValues`):
//! user values win, `null` deletes a key, subchart values live under the subchart's name and
//! `global` is copied down.
//!
//! Maps are Go maps here: shared and mutated in place ([`Value::Map`]), so the aliasing Helm's
//! code has (a global table shared between a parent and a child) is the same.

use std::cell::RefCell;
use std::rc::Rc;

use go_template::{Map, Value};

use crate::chart::Chart;
use crate::strvals;

/// A Go `map[string]interface{}`.
pub(crate) type GoMap = Rc<RefCell<Map>>;

/// The key whose table is copied into every subchart.
pub const GLOBAL_KEY: &str = "global";

/// The user's value sources, in the kinds `helm template` has flags for.
#[derive(Clone, Debug, Default)]
pub struct ValueSources {
    /// `--values`/`-f` files: `(name as given, contents)`.
    pub files: Vec<(String, String)>,
    /// `--set-json` lines.
    pub set_json: Vec<String>,
    /// `--set` lines.
    pub set: Vec<String>,
    /// `--set-string` lines.
    pub set_string: Vec<String>,
    /// `--set-file` lines (values are paths, read through the reader given to
    /// [`ValueSources::merge`]).
    pub set_file: Vec<String>,
}

impl ValueSources {
    /// Merges the sources as Helm's `values.Options.MergeValues` does (kind by kind, not in
    /// command-line order). `read_file` serves `--set-file` paths. The error is Helm's text.
    pub fn merge(&self, read_file: &dyn Fn(&str) -> Result<String, String>) -> Result<Map, String> {
        let mut base = Map::new();
        for (name, text) in &self.files {
            let current = crate::yaml::parse_values(text)
                .map_err(|e| format!("failed to parse {name}: {e}"))?;
            base = merge_maps(base, current);
        }
        for line in &self.set_json {
            strvals::parse_json(line, &mut base)
                .map_err(|_| format!("failed parsing --set-json data {line}"))?;
        }
        for line in &self.set {
            strvals::parse_into(line, &mut base)
                .map_err(|e| format!("failed parsing --set data: {e}"))?;
        }
        for line in &self.set_string {
            strvals::parse_into_string(line, &mut base)
                .map_err(|e| format!("failed parsing --set-string data: {e}"))?;
        }
        for line in &self.set_file {
            strvals::parse_into_file(line, &mut base, read_file)
                .map_err(|e| format!("failed parsing --set-file data: {e}"))?;
        }
        Ok(base)
    }
}

/// Helm's `mergeMaps` for `--values` files: tables merge recursively, anything else replaces.
pub fn merge_maps(a: Map, b: Map) -> Map {
    let mut out = a;
    for (k, v) in b {
        if let Value::Map(bm) = &v
            && let Some(Value::Map(am)) = out.get(&k)
        {
            let merged = merge_maps(am.borrow().clone(), bm.borrow().clone());
            out.insert(k, Value::map(merged));
            continue;
        }
        out.insert(k, v);
    }
    out
}

/// A deep copy (maps and lists copied, so that no mutation reaches the original).
pub fn deep_copy(v: &Value) -> Value {
    match v {
        Value::Map(m) => Value::map(deep_copy_map(&m.borrow())),
        Value::List(l) => Value::list(l.iter().map(deep_copy).collect()),
        other => other.clone(),
    }
}

/// [`deep_copy`] of a map.
pub fn deep_copy_map(m: &Map) -> Map {
    m.iter().map(|(k, v)| (k.clone(), deep_copy(v))).collect()
}

fn concat_prefix(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_owned()
    } else {
        format!("{a}.{b}")
    }
}

/// `chartutil.CoalesceValues`: the chart's (and subcharts') defaults under the user's `vals`,
/// nulls deleting keys.
pub fn coalesce_values(chart: &Chart, vals: &Map) -> Result<Map, String> {
    let dest: GoMap = Rc::new(RefCell::new(deep_copy_map(vals)));
    coalesce(chart, &dest, "", false)?;
    let out = dest.borrow().clone();
    Ok(out)
}

/// `chartutil.MergeValues`: as [`coalesce_values`], but nulls are kept.
pub fn merge_values(chart: &Chart, vals: &Map) -> Result<Map, String> {
    let dest: GoMap = Rc::new(RefCell::new(deep_copy_map(vals)));
    coalesce(chart, &dest, "", true)?;
    let out = dest.borrow().clone();
    Ok(out)
}

fn coalesce(ch: &Chart, dest: &GoMap, prefix: &str, merge: bool) -> Result<(), String> {
    coalesce_chart_values(ch, dest, prefix, merge);
    coalesce_deps(ch, dest, prefix, merge)
}

fn coalesce_deps(ch: &Chart, dest: &GoMap, prefix: &str, merge: bool) -> Result<(), String> {
    for sub in &ch.dependencies {
        let name = sub.name();
        let existing = dest.borrow().get(name).cloned();
        let dv = match existing {
            None => {
                let m: GoMap = Rc::new(RefCell::new(Map::new()));
                dest.borrow_mut()
                    .insert(name.to_owned(), Value::Map(m.clone()));
                m
            }
            Some(Value::Map(m)) => m,
            Some(other) => {
                let shown = go_template::fmt::sprintf("%t", &[other]);
                return Err(format!("type mismatch on {name}: {shown}"));
            }
        };
        let sub_prefix = concat_prefix(prefix, &ch.metadata.name);
        coalesce_globals(&dv, dest, &sub_prefix);
        coalesce(sub, &dv, &sub_prefix, merge)?;
    }
    Ok(())
}

fn coalesce_globals(dest: &GoMap, src: &GoMap, prefix: &str) {
    let dg: GoMap = match dest.borrow().get(GLOBAL_KEY) {
        None => Rc::new(RefCell::new(Map::new())),
        Some(Value::Map(m)) => m.clone(),
        // Helm warns "skipping globals because destination global is not a table".
        Some(_) => return,
    };
    let sg: GoMap = match src.borrow().get(GLOBAL_KEY) {
        None => Rc::new(RefCell::new(Map::new())),
        Some(Value::Map(m)) => m.clone(),
        Some(_) => return,
    };
    let entries: Vec<(String, Value)> = sg
        .borrow()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, val) in entries {
        if let Value::Map(vm) = &val {
            // A shallow copy, as Helm's copyMap.
            let vv: GoMap = Rc::new(RefCell::new(vm.borrow().clone()));
            let destv = dg.borrow().get(&key).cloned();
            match destv {
                None => {
                    dg.borrow_mut().insert(key, Value::Map(vv));
                }
                Some(Value::Map(destvmap)) => {
                    coalesce_tables(&vv, &destvmap, true);
                    dg.borrow_mut().insert(key, Value::Map(vv));
                }
                // "Conflict: cannot merge map onto non-map": skipped.
                Some(_) => {}
            }
        } else if matches!(dg.borrow().get(&key), Some(Value::Map(_))) {
            // "key is table. Skipping"
        } else {
            dg.borrow_mut().insert(key, val);
        }
    }
    let _ = prefix;
    dest.borrow_mut().insert(GLOBAL_KEY.into(), Value::Map(dg));
}

fn coalesce_chart_values(c: &Chart, v: &GoMap, prefix: &str, merge: bool) {
    let _ = prefix;
    let vc = deep_copy_map(&c.values);
    for (key, val) in vc {
        let existing = v.borrow().get(&key).cloned();
        match existing {
            Some(Value::Nil) if !merge => {
                v.borrow_mut().remove(&key);
            }
            Some(Value::Map(dest)) => {
                if let Value::Map(src) = &val {
                    let merge = merge || c.dependencies.iter().any(|d| d.name() == key);
                    coalesce_tables_full(&dest, src, merge);
                }
                // else: "skipped value … Not a table" (a warning)
            }
            Some(_) => {}
            None => {
                v.borrow_mut().insert(key, val);
            }
        }
    }
}

/// `CoalesceTables` (`merge` false) / `MergeTables` (`merge` true): `src` into `dst`, `dst`
/// authoritative.
fn coalesce_tables(dst: &GoMap, src: &GoMap, merge: bool) {
    coalesce_tables_full(dst, src, merge);
}

fn coalesce_tables_full(dst: &GoMap, src: &GoMap, merge: bool) {
    if Rc::ptr_eq(dst, src) {
        return;
    }
    let entries: Vec<(String, Value)> = src
        .borrow()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, val) in entries {
        let dv = dst.borrow().get(&key).cloned();
        match dv {
            Some(Value::Nil) if !merge => {
                dst.borrow_mut().remove(&key);
            }
            None => {
                dst.borrow_mut().insert(key, val);
            }
            Some(dv) => {
                // A table merges into a table; otherwise dst wins (Helm warns "cannot
                // overwrite table with non table" when only src is a table).
                if let (Value::Map(sv), Value::Map(dvm)) = (&val, &dv) {
                    coalesce_tables_full(dvm, sv, merge);
                }
            }
        }
    }
}

/// `CoalesceTables(dst, src)` on plain maps.
pub(crate) fn coalesce_tables_maps(dst: Map, src: Map, merge: bool) -> Map {
    let d: GoMap = Rc::new(RefCell::new(dst));
    let s: GoMap = Rc::new(RefCell::new(src));
    coalesce_tables_full(&d, &s, merge);
    d.take()
}

/// Helm's `Values.Table(path)`: the map at a dotted path (`a.b`), if every step is a map.
pub(crate) fn table(vals: &Map, path: &str) -> Option<Map> {
    let mut cur = vals.clone();
    for part in path.split('.') {
        let next = match cur.get(part) {
            Some(Value::Map(m)) => m.borrow().clone(),
            _ => return None,
        };
        cur = next;
    }
    Some(cur)
}

/// Helm's `Values.PathValue(path)`: the value at a dotted path whose last step is not a
/// table (`None` when absent or a table).
pub(crate) fn path_value(vals: &Map, path: &str) -> Option<Value> {
    let (parent, last) = match path.rsplit_once('.') {
        Some((p, l)) => (table(vals, p)?, l),
        None => (vals.clone(), path),
    };
    match parent.get(last) {
        Some(Value::Map(_)) | None => None,
        Some(v) => Some(v.clone()),
    }
}

/// Helm's `pathToMap`: `a.b` and `data` → `{a: {b: data}}`; `.` is the top level.
pub(crate) fn path_to_map(path: &str, data: Map) -> Map {
    if path == "." {
        return data;
    }
    let parts: Vec<&str> = path.split('.').filter(|p| !p.is_empty()).collect();
    let mut cur = data;
    for p in parts.iter().rev() {
        let mut m = Map::new();
        m.insert((*p).to_owned(), Value::map(cur));
        cur = m;
    }
    cur
}
