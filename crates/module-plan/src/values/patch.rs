//! Hook values patches: what a hook writes to `VALUES_JSON_PATCH_PATH` or
//! `CONFIG_VALUES_JSON_PATCH_PATH`, and how addon-operator applies it.
//!
//! - **Reading** ([`ValuesPatch::parse`]): the file is a stream of JSON documents, each an array
//!   of RFC 6902 operations or a single operation; an empty file is no patch.
//! - **Paths a hook may touch** ([`ValuesPatch::check_paths`]): a module hook only its module's
//!   key (`/userAuthn/...`), a global hook `global` and the `<module>Enabled` keys; `replace` is
//!   refused whatever the path.
//! - **Applying**: strictly when a hook's patch arrives (a `remove` of a missing path fails),
//!   leniently when the stored patches are replayed over recomputed values (such a `remove` is
//!   skipped), with evanphx/json-patch's wording in errors.
//! - **Keeping** ([`compact`]): one last operation per path, sub-paths of a later `add` or
//!   `remove` dropped, sorted by path, as addon-operator's `CompactPatches` keeps them.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::gojson::to_go_json;
use crate::definition::kebab_case;

/// The `global` values key.
pub const GLOBAL_KEY: &str = "global";
/// The suffix of the keys global hooks enable modules with (`certManagerEnabled`).
pub const ENABLED_SUFFIX: &str = "Enabled";

/// One RFC 6902 operation as a hook wrote it.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    /// `add`, `remove`, `replace`, `move`, `copy` or `test`.
    pub op: String,
    /// A JSON pointer into the values (`/echo/internal/x`).
    pub path: String,
    /// The value (`add`, `replace`, `test`).
    pub value: Option<Value>,
    /// The source pointer (`move`, `copy`).
    pub from: Option<String>,
}

impl Operation {
    /// An `add` operation.
    pub fn add(path: &str, value: Value) -> Self {
        Self {
            op: "add".into(),
            path: path.into(),
            value: Some(value),
            from: None,
        }
    }

    /// A `remove` operation.
    pub fn remove(path: &str) -> Self {
        Self {
            op: "remove".into(),
            path: path.into(),
            value: None,
            from: None,
        }
    }

    /// The first segment of the path (`echo` for `/echo/internal`), if the path has one.
    fn root(&self) -> Option<&str> {
        let mut parts = self.path.split('/');
        parts.next();
        parts.next()
    }

    /// How addon-operator quotes an operation in its messages: the value as JSON.
    fn quoted_value(&self) -> String {
        to_go_json(self.value.as_ref().unwrap_or(&Value::Null))
    }

    fn from_value(value: &Value) -> Result<Self, String> {
        let Value::Object(map) = value else {
            return Err(format!("an operation must be an object, got {value}"));
        };
        let text = |key: &str| -> Result<Option<String>, String> {
            match map.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(format!("{key:?} must be a string, got {other}")),
            }
        };
        Ok(Self {
            op: text("op")?.unwrap_or_default(),
            path: text("path")?.unwrap_or_default(),
            value: map.get("value").cloned(),
            from: text("from")?,
        })
    }
}

/// The operations of one hook run, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ValuesPatch {
    /// The operations.
    pub operations: Vec<Operation>,
}

impl ValuesPatch {
    /// A patch of these operations.
    pub fn new(operations: Vec<Operation>) -> Self {
        Self { operations }
    }

    /// Reads a patch file: a stream of JSON arrays of operations and single operations. An
    /// empty (or blank) file is an empty patch. `Err` is addon-operator's `bad json-patch data`
    /// message.
    pub fn parse(data: &[u8]) -> Result<Self, String> {
        let bad = |reason: String| {
            format!(
                "bad json-patch data: {reason}\n{}",
                String::from_utf8_lossy(data)
            )
        };
        let mut operations = Vec::new();
        for document in serde_json::Deserializer::from_slice(data).into_iter::<Value>() {
            let document = document.map_err(|e| bad(e.to_string()))?;
            match document {
                Value::Array(items) => {
                    for item in &items {
                        operations.push(Operation::from_value(item).map_err(bad)?);
                    }
                }
                Value::Object(_) => operations.push(Operation::from_value(&document).map_err(bad)?),
                // Other documents are skipped, as addon-operator's stream reader skips them.
                _ => {}
            }
        }
        Ok(Self { operations })
    }

    /// Whether the patch has no operations.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// addon-operator's `ValidateHookValuesPatch`: `replace` is refused, and every path must be
    /// under `key` — or, for global hooks (`key == "global"`), under a `…Enabled` key.
    pub fn check_paths(&self, key: &str) -> Result<(), String> {
        for op in &self.operations {
            if op.op == "replace" {
                return Err(format!(
                    "unsupported patch operation '{}': '{}'",
                    op.op,
                    op.quoted_value()
                ));
            }
            let Some(root) = op.root() else { continue };
            if root == key || (key == GLOBAL_KEY && root.ends_with(ENABLED_SUFFIX)) {
                continue;
            }
            let permitted = if key == GLOBAL_KEY {
                format!("only '{key}' and '*Enabled' are permitted")
            } else {
                format!("only '{key}' accepted")
            };
            return Err(format!(
                "unacceptable patch operation for path '{root}' ({permitted}): '{}'",
                op.quoted_value()
            ));
        }
        Ok(())
    }

    /// The operations under `key` (addon-operator's `FilterValuesPatch`).
    pub fn filter(&self, key: &str) -> Self {
        Self::new(
            self.operations
                .iter()
                .filter(|op| op.root() == Some(key))
                .cloned()
                .collect(),
        )
    }

    /// What a global hook's patch says about enabling modules: `/<moduleKey>Enabled` set to a
    /// boolean (`add`) or cleared (`remove`), by module name, the last operation winning.
    /// Values that are not booleans are left out (addon-operator refuses them).
    pub fn enabled_modules(&self) -> BTreeMap<String, Option<bool>> {
        let mut out = BTreeMap::new();
        for op in &self.operations {
            let Some(root) = op.root() else { continue };
            let Some(key) = root.strip_suffix(ENABLED_SUFFIX) else {
                continue;
            };
            if key.is_empty() || op.path.split('/').count() != 2 {
                continue;
            }
            let decision = match (op.op.as_str(), &op.value) {
                ("remove", _) => None,
                ("add", Some(Value::Bool(b))) => Some(*b),
                ("add", Some(Value::String(s))) if s.eq_ignore_ascii_case("true") => Some(true),
                ("add", Some(Value::String(s))) if s.eq_ignore_ascii_case("false") => Some(false),
                _ => continue,
            };
            out.insert(kebab_case(key), decision);
        }
        out
    }

    /// Applies the patch to `doc` as evanphx/json-patch's `Apply` does: all or nothing.
    pub fn apply_strict(&self, doc: &Value) -> Result<Value, String> {
        let mut out = doc.clone();
        for op in &self.operations {
            apply_one(&mut out, op)?;
        }
        Ok(out)
    }

    /// Applies the patch one operation at a time, skipping `remove`s of missing paths, as
    /// addon-operator replays stored patches over recomputed values.
    pub fn apply_lenient(&self, doc: &Value) -> Result<Value, String> {
        let mut out = doc.clone();
        for op in &self.operations {
            let mut next = out.clone();
            match apply_one(&mut next, op) {
                Ok(()) => out = next,
                Err(e)
                    if op.op == "remove"
                        && (e.starts_with("error in remove for path:")
                            || e.starts_with(
                                "remove operation does not apply: doc is missing path",
                            )) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// addon-operator's `CompactPatches`: `stored` (already compact) followed by `new`, one last
/// operation per path, sub-paths of a newer `add`/`remove` dropped, sorted by path.
pub fn compact(stored: &[Operation], new: &[Operation]) -> Vec<Operation> {
    let mut tree: BTreeMap<String, Vec<Operation>> = BTreeMap::new();
    for op in stored {
        tree.entry(op.path.clone()).or_default().push(op.clone());
    }
    for op in new {
        if op.op == "remove" || op.op == "add" {
            let prefix = format!("{}/", op.path);
            tree.retain(|path, _| !(path.len() > op.path.len() && path.starts_with(&prefix)));
        }
        tree.insert(op.path.clone(), vec![op.clone()]);
    }
    tree.into_values().flatten().collect()
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Splits a pointer into its parent's tokens and the last token; `None` for the root.
fn split(path: &str) -> Option<(Vec<String>, String)> {
    if path.is_empty() {
        return None;
    }
    let mut tokens: Vec<String> = path.split('/').skip(1).map(unescape).collect();
    let last = tokens.pop()?;
    Some((tokens, last))
}

fn get_mut<'v>(doc: &'v mut Value, tokens: &[String]) -> Option<&'v mut Value> {
    let mut current = doc;
    for token in tokens {
        current = match current {
            Value::Object(map) => map.get_mut(token)?,
            Value::Array(items) => {
                let index = array_index(token, items.len(), false)?;
                items.get_mut(index)?
            }
            _ => return None,
        };
    }
    Some(current)
}

fn get(doc: &Value, path: &str) -> Option<Value> {
    if path.is_empty() {
        return Some(doc.clone());
    }
    let (parent, last) = split(path)?;
    let mut doc = doc.clone();
    let container = get_mut(&mut doc, &parent)?;
    match container {
        Value::Object(map) => map.get(&last).cloned(),
        Value::Array(items) => {
            let index = array_index(&last, items.len(), false)?;
            items.get(index).cloned()
        }
        _ => None,
    }
}

/// An array index token; negative indexes count from the end (evanphx's default); `-` appends
/// when `append` is allowed.
fn array_index(token: &str, len: usize, append: bool) -> Option<usize> {
    if token == "-" {
        return append.then_some(len);
    }
    let index: i64 = token.parse().ok()?;
    let len = i64::try_from(len).ok()?;
    let resolved = if index < 0 { index + len } else { index };
    let limit = if append { len } else { len - 1 };
    (0..=limit)
        .contains(&resolved)
        .then(|| usize::try_from(resolved).ok())
        .flatten()
}

fn missing(op: &str, path: &str) -> String {
    format!("{op} operation does not apply: doc is missing path: \"{path}\": missing value")
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let Some((parent, last)) = split(path) else {
        *doc = value;
        return Ok(());
    };
    let container = get_mut(doc, &parent).ok_or_else(|| missing("add", path))?;
    match container {
        Value::Object(map) => {
            map.insert(last, value);
            Ok(())
        }
        Value::Array(items) => {
            let index = array_index(&last, items.len(), true).ok_or_else(|| {
                format!(
                    "error in add for path: '{path}': Unable to access invalid index: {last}: invalid index referenced"
                )
            })?;
            items.insert(index, value);
            Ok(())
        }
        _ => Err(missing("add", path)),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let Some((parent, last)) = split(path) else {
        return Ok(std::mem::replace(doc, Value::Null));
    };
    let container = get_mut(doc, &parent).ok_or_else(|| missing("remove", path))?;
    match container {
        Value::Object(map) => map.remove(&last).ok_or_else(|| {
            format!(
                "error in remove for path: '{path}': Unable to remove nonexistent key: {last}: missing value"
            )
        }),
        Value::Array(items) => {
            let index = array_index(&last, items.len(), false).ok_or_else(|| {
                format!(
                    "error in remove for path: '{path}': Unable to access invalid index: {last}: invalid index referenced"
                )
            })?;
            Ok(items.remove(index))
        }
        _ => Err(missing("remove", path)),
    }
}

fn apply_one(doc: &mut Value, op: &Operation) -> Result<(), String> {
    let path = op.path.as_str();
    let value = || op.value.clone().unwrap_or(Value::Null);
    match op.op.as_str() {
        "add" => add(doc, path, value()),
        "remove" => remove(doc, path).map(|_| ()),
        "replace" => {
            if get(doc, path).is_none() {
                return Err(format!(
                    "replace operation does not apply: doc is missing key: {path}: missing value"
                ));
            }
            remove(doc, path)?;
            add(doc, path, value())
        }
        "move" | "copy" => {
            let from = op.from.as_deref().unwrap_or_default();
            let moved = if op.op == "move" {
                remove(doc, from).map_err(|_| {
                    format!(
                        "move operation does not apply: doc is missing from path: {from}: missing value"
                    )
                })?
            } else {
                get(doc, from).ok_or_else(|| {
                    format!(
                        "copy operation does not apply: doc is missing from path: {from}: missing value"
                    )
                })?
            };
            add(doc, path, moved)
        }
        "test" => {
            if get(doc, path).unwrap_or(Value::Null) == value() {
                Ok(())
            } else {
                Err(format!("testing value {path} failed: test failed"))
            }
        }
        other => Err(format!("Unexpected kind: {other}")),
    }
}

/// `{key: values}`: the document a hook's patch paths are written against.
pub(crate) fn prefixed(key: &str, values: &Value) -> Value {
    let mut map = Map::new();
    map.insert(key.to_owned(), values.clone());
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parse_reads_a_stream_of_arrays_and_single_operations() {
        let text = br#"[{"op":"add","path":"/echo/internal/a","value":1}]
{"op":"remove","path":"/echo/internal/b"}
[]"#;
        let patch = ValuesPatch::parse(text).unwrap();
        assert_eq!(
            patch.operations,
            vec![
                Operation::add("/echo/internal/a", json!(1)),
                Operation::remove("/echo/internal/b")
            ]
        );
        assert!(ValuesPatch::parse(b"").unwrap().is_empty());
        assert!(ValuesPatch::parse(b"  \n").unwrap().is_empty());
        let err = ValuesPatch::parse(b"[{\"op\":").unwrap_err();
        assert!(err.starts_with("bad json-patch data: "), "{err}");
        assert!(err.ends_with("\n[{\"op\":"), "{err}");
    }

    #[test]
    fn paths_a_hook_may_touch() {
        let patch = |op: &str, path: &str| {
            ValuesPatch::new(vec![Operation {
                op: op.into(),
                path: path.into(),
                value: Some(json!("v")),
                from: None,
            }])
        };
        for (key, op, path, result) in [
            ("userAuthn", "add", "/userAuthn/internal/x", Ok(())),
            ("userAuthn", "remove", "/userAuthn", Ok(())),
            ("userAuthn", "add", "", Ok(())),
            (
                "userAuthn",
                "add",
                "/global/x",
                Err(
                    "unacceptable patch operation for path 'global' (only 'userAuthn' accepted): '\"v\"'",
                ),
            ),
            (
                "userAuthn",
                "add",
                "/certManagerEnabled",
                Err(
                    "unacceptable patch operation for path 'certManagerEnabled' (only 'userAuthn' accepted): '\"v\"'",
                ),
            ),
            (
                "userAuthn",
                "add",
                "/user-authn/internal",
                Err(
                    "unacceptable patch operation for path 'user-authn' (only 'userAuthn' accepted): '\"v\"'",
                ),
            ),
            (
                "userAuthn",
                "replace",
                "/userAuthn/internal/x",
                Err("unsupported patch operation 'replace': '\"v\"'"),
            ),
            ("global", "add", "/global/discovery/x", Ok(())),
            ("global", "add", "/certManagerEnabled", Ok(())),
            (
                "global",
                "add",
                "/userAuthn/x",
                Err(
                    "unacceptable patch operation for path 'userAuthn' (only 'global' and '*Enabled' are permitted): '\"v\"'",
                ),
            ),
        ] {
            assert_eq!(
                patch(op, path).check_paths(key),
                result.map_err(str::to_owned),
                "{key} {op} {path}"
            );
        }
    }

    #[test]
    fn enabled_keys_of_a_global_patch() {
        let patch = ValuesPatch::new(vec![
            Operation::add("/certManagerEnabled", json!(true)),
            Operation::add("/userAuthnEnabled", json!(false)),
            Operation::add("/userAuthnEnabled", json!(true)),
            Operation::remove("/prometheusEnabled"),
            Operation::add("/global/x", json!(1)),
            Operation::add("/badEnabled", json!(3)),
            Operation::add("/deepEnabled/x", json!(true)),
        ]);
        let enabled = patch.enabled_modules();
        assert_eq!(
            enabled.into_iter().collect::<Vec<_>>(),
            vec![
                ("cert-manager".to_owned(), Some(true)),
                ("prometheus".to_owned(), None),
                ("user-authn".to_owned(), Some(true)),
            ]
        );
        assert_eq!(patch.filter("global").operations.len(), 1);
    }

    #[test]
    fn strict_application_and_evanphx_errors() {
        let doc = json!({"m": {"internal": {"a": 1, "list": [1, 2]}}});
        let apply = |ops: Vec<Operation>| ValuesPatch::new(ops).apply_strict(&doc);
        assert_eq!(
            apply(vec![
                Operation::add("/m/internal/b", json!({"c": true})),
                Operation::add("/m/internal/list/-", json!(3)),
                Operation::add("/m/internal/list/0", json!(0)),
                Operation::remove("/m/internal/a"),
            ])
            .unwrap(),
            json!({"m": {"internal": {"b": {"c": true}, "list": [0, 1, 2, 3]}}})
        );
        for (ops, error) in [
            (
                vec![Operation::add("/m/missing/x", json!(1))],
                "add operation does not apply: doc is missing path: \"/m/missing/x\": missing value",
            ),
            (
                vec![Operation::remove("/m/missing/x")],
                "remove operation does not apply: doc is missing path: \"/m/missing/x\": missing value",
            ),
            (
                vec![Operation::remove("/m/internal/zzz")],
                "error in remove for path: '/m/internal/zzz': Unable to remove nonexistent key: zzz: missing value",
            ),
            (
                vec![Operation::add("/m/internal/list/9", json!(1))],
                "error in add for path: '/m/internal/list/9': Unable to access invalid index: 9: invalid index referenced",
            ),
            (
                vec![Operation {
                    op: "test".into(),
                    path: "/m/internal/a".into(),
                    value: Some(json!(2)),
                    from: None,
                }],
                "testing value /m/internal/a failed: test failed",
            ),
            (
                vec![Operation {
                    op: "merge".into(),
                    path: "/m".into(),
                    value: None,
                    from: None,
                }],
                "Unexpected kind: merge",
            ),
        ] {
            assert_eq!(apply(ops.clone()), Err(error.to_owned()), "{ops:?}");
        }
        // Lenient replay skips removes of missing paths only.
        let lenient = ValuesPatch::new(vec![
            Operation::remove("/m/internal/zzz"),
            Operation::remove("/m/nothing/here"),
            Operation::add("/m/internal/a", json!(5)),
        ])
        .apply_lenient(&doc)
        .unwrap();
        assert_eq!(lenient["m"]["internal"]["a"], json!(5));
    }

    #[test]
    fn move_copy_replace() {
        let doc = json!({"m": {"a": 1, "b": {}}});
        let op = |op: &str, path: &str, from: Option<&str>, value: Option<Value>| Operation {
            op: op.into(),
            path: path.into(),
            value,
            from: from.map(str::to_owned),
        };
        assert_eq!(
            ValuesPatch::new(vec![op("move", "/m/b/a", Some("/m/a"), None)])
                .apply_strict(&doc)
                .unwrap(),
            json!({"m": {"b": {"a": 1}}})
        );
        assert_eq!(
            ValuesPatch::new(vec![op("copy", "/m/b/a", Some("/m/a"), None)])
                .apply_strict(&doc)
                .unwrap(),
            json!({"m": {"a": 1, "b": {"a": 1}}})
        );
        assert_eq!(
            ValuesPatch::new(vec![op("replace", "/m/a", None, Some(json!(2)))])
                .apply_strict(&doc)
                .unwrap(),
            json!({"m": {"a": 2, "b": {}}})
        );
        assert_eq!(
            ValuesPatch::new(vec![op("replace", "/m/z", None, Some(json!(2)))]).apply_strict(&doc),
            Err("replace operation does not apply: doc is missing key: /m/z: missing value".into())
        );
    }

    #[test]
    fn compaction_keeps_the_last_operation_per_path() {
        let stored = compact(
            &[],
            &[
                Operation::add("/m/settings", json!({"p": {}})),
                Operation::add("/m/settings/p/f1", json!("foo")),
                Operation::add("/m/z", json!(1)),
            ],
        );
        assert_eq!(stored.len(), 3);
        // A new add of the parent drops the sub-paths; a second add of a path replaces it.
        let compacted = compact(
            &stored,
            &[
                Operation::add("/m/settings", json!({})),
                Operation::add("/m/z", json!(2)),
                Operation::add("/m/a", json!(0)),
            ],
        );
        assert_eq!(
            compacted,
            vec![
                Operation::add("/m/a", json!(0)),
                Operation::add("/m/settings", json!({})),
                Operation::add("/m/z", json!(2)),
            ]
        );
        let removed = compact(&compacted, &[Operation::remove("/m")]);
        assert_eq!(removed, vec![Operation::remove("/m")]);
    }
}
