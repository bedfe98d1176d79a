//! What a hook leaves in its output files, parsed (pure): values JSON patches, Kubernetes
//! operations and metric operations, in shell-operator's accepted forms.

#[cfg(test)]
mod tests;

use serde_json::Value;

/// An output file that shell-operator would reject; the message is its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct OutputError {
    pub message: String,
}

fn err(message: impl Into<String>) -> OutputError {
    OutputError {
        message: message.into(),
    }
}

/// A stream of JSON documents (`{..}\n{..}` or `[..]`), whitespace-separated.
fn json_stream(data: &[u8]) -> Result<Vec<Value>, String> {
    serde_json::Deserializer::from_slice(data)
        .into_iter::<Value>()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

const PATCH_OPS: &[&str] = &["add", "remove", "replace", "move", "copy", "test"];

/// The first JSON document of a response file (`VALIDATING_RESPONSE_PATH`,
/// `CONVERSION_RESPONSE_PATH`), as shell-operator decodes it; `None` when the file is empty.
pub fn parse_first_document(data: &[u8]) -> Result<Option<Value>, OutputError> {
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(data);
    json_stream(data)
        .map(|docs| docs.into_iter().next())
        .map_err(|e| err(format!("bad response data: {e}\n{text}")))
}

/// Parses `VALUES_JSON_PATCH_PATH` / `CONFIG_VALUES_JSON_PATCH_PATH`: a JSON stream of patches
/// (arrays) and single operations, combined into one RFC 6902 patch. Empty means none.
pub fn parse_values_patch(data: &[u8]) -> Result<Vec<Value>, OutputError> {
    let text = String::from_utf8_lossy(data);
    let bad = |e: String| err(format!("bad json-patch data: {e}\n{text}"));
    let mut ops = Vec::new();
    for doc in json_stream(data).map_err(bad)? {
        match doc {
            Value::Array(list) => ops.extend(list),
            Value::Object(_) => ops.push(doc),
            other => return Err(bad(format!("unexpected {other} in a json patch stream"))),
        }
    }
    for op in &ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or_default();
        if !PATCH_OPS.contains(&name) {
            return Err(bad(format!("Unexpected kind: {name}")));
        }
        if op.get("path").and_then(Value::as_str).is_none() {
            return Err(bad("missing path".to_owned()));
        }
        if matches!(name, "add" | "replace" | "test") && op.get("value").is_none() {
            return Err(bad(format!("missing value for {name}")));
        }
    }
    Ok(ops)
}

/// How a create behaves when the object exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateMode {
    /// `Create`: an existing object is an error.
    Create,
    /// `CreateOrUpdate`: an existing object is updated.
    CreateOrUpdate,
    /// `CreateIfNotExists`: an existing object is left alone.
    CreateIfNotExists,
}

/// The deletion propagation of `Delete*` operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// `Delete`.
    Foreground,
    /// `DeleteInBackground`.
    Background,
    /// `DeleteNonCascading`.
    Orphan,
}

impl Propagation {
    /// As in `DeleteOptions.propagationPolicy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Foreground => "Foreground",
            Self::Background => "Background",
            Self::Orphan => "Orphan",
        }
    }
}

/// The payload of a patch operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// `JQPatch`: the object is replaced by the filter's output.
    Jq(String),
    /// `MergePatch`: an RFC 7386 merge patch.
    Merge(Value),
    /// `JSONPatch`: an RFC 6902 patch.
    Json(Value),
}

/// Coordinates of an existing object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// Empty: the preferred version of the kind.
    pub api_version: String,
    pub kind: String,
    /// Empty: a cluster-scoped object.
    pub namespace: String,
    pub name: String,
}

/// One operation from `KUBERNETES_PATCH_PATH`.
#[derive(Debug, Clone, PartialEq)]
pub enum KubeOperation {
    Create {
        mode: CreateMode,
        object: Value,
        subresource: Option<String>,
    },
    Delete {
        target: ObjectRef,
        propagation: Propagation,
        subresource: Option<String>,
    },
    Patch {
        target: ObjectRef,
        patch: Patch,
        subresource: Option<String>,
        ignore_missing_object: bool,
        /// Only a `/status` patch with this flag is applied when the hook failed.
        ignore_hook_error: bool,
    },
}

const KUBE_KEYS: &[&str] = &[
    "operation",
    "namespace",
    "subresource",
    "apiVersion",
    "kind",
    "name",
    "object",
    "jsonPatch",
    "jqFilter",
    "mergePatch",
    "ignoreMissingObject",
    "ignoreHookError",
];

/// A JSON or YAML value that may have been written as a string holding JSON or YAML.
fn unstring(v: &Value) -> Result<Value, String> {
    match v {
        Value::String(s) => serde_json::from_str(s)
            .or_else(|_| serde_saphyr::from_str(s))
            .map_err(|e| e.to_string()),
        other => Ok(other.clone()),
    }
}

/// Parses `KUBERNETES_PATCH_PATH`: a JSON stream of operations, or YAML documents.
pub fn parse_kube_operations(data: &[u8]) -> Result<Vec<KubeOperation>, OutputError> {
    let text = String::from_utf8_lossy(data);
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let docs = match json_stream(data) {
        Ok(d) => d,
        Err(_) => serde_saphyr::from_multiple::<Value>(&text).map_err(|e| err(e.to_string()))?,
    };
    docs.into_iter()
        .filter(|d| !d.is_null())
        .map(|d| kube_operation(&d))
        .collect()
}

fn kube_operation(doc: &Value) -> Result<KubeOperation, OutputError> {
    let invalid = |reason: String| {
        let shown = serde_json::to_string_pretty(doc).unwrap_or_default();
        err(format!("can't validate document:\n{shown}\n{reason}"))
    };
    let Some(m) = doc.as_object() else {
        return Err(invalid("kubernetes patch spec is not valid".to_owned()));
    };
    for k in m.keys() {
        if !KUBE_KEYS.contains(&k.as_str()) {
            return Err(invalid(format!("{k} in body is a forbidden property")));
        }
    }
    let s = |k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let subresource = m
        .get("subresource")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let target = || -> Result<ObjectRef, OutputError> {
        for req in ["kind", "name"] {
            if s(req).is_empty() {
                return Err(invalid(format!("{req} in body is required")));
            }
        }
        Ok(ObjectRef {
            api_version: s("apiVersion"),
            kind: s("kind"),
            namespace: s("namespace"),
            name: s("name"),
        })
    };
    let flag = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
    let operation = s("operation");
    let create = |mode| -> Result<KubeOperation, OutputError> {
        let object = m
            .get("object")
            .map(unstring)
            .transpose()
            .map_err(invalid)?
            .filter(|o| o.as_object().is_some_and(|o| !o.is_empty()))
            .ok_or_else(|| invalid("object in body is required".to_owned()))?;
        Ok(KubeOperation::Create {
            mode,
            object,
            subresource: subresource.clone(),
        })
    };
    let delete = |propagation| -> Result<KubeOperation, OutputError> {
        Ok(KubeOperation::Delete {
            target: target()?,
            propagation,
            subresource: subresource.clone(),
        })
    };
    let patch = |patch: Patch| -> Result<KubeOperation, OutputError> {
        Ok(KubeOperation::Patch {
            target: target()?,
            patch,
            subresource: subresource.clone(),
            ignore_missing_object: flag("ignoreMissingObject"),
            ignore_hook_error: flag("ignoreHookError"),
        })
    };
    match operation.as_str() {
        "Create" => create(CreateMode::Create),
        "CreateOrUpdate" => create(CreateMode::CreateOrUpdate),
        "CreateIfNotExists" => create(CreateMode::CreateIfNotExists),
        "Delete" => delete(Propagation::Foreground),
        "DeleteInBackground" => delete(Propagation::Background),
        "DeleteNonCascading" => delete(Propagation::Orphan),
        "JQPatch" => {
            let f = s("jqFilter");
            if f.is_empty() {
                return Err(invalid("jqFilter in body is required".to_owned()));
            }
            patch(Patch::Jq(f))
        }
        "MergePatch" => {
            let p = m
                .get("mergePatch")
                .map(unstring)
                .transpose()
                .map_err(invalid)?
                .filter(|p| p.as_object().is_some_and(|o| !o.is_empty()))
                .ok_or_else(|| invalid("mergePatch in body is required".to_owned()))?;
            patch(Patch::Merge(p))
        }
        "JSONPatch" => {
            let p = m
                .get("jsonPatch")
                .map(unstring)
                .transpose()
                .map_err(invalid)?
                .filter(|p| p.as_array().is_some_and(|a| !a.is_empty()))
                .ok_or_else(|| invalid("jsonPatch in body is required".to_owned()))?;
            patch(Patch::Json(p))
        }
        other => Err(invalid(format!(
            "operation in body should be one of [Create CreateOrUpdate CreateIfNotExists Delete DeleteInBackground DeleteNonCascading JQPatch MergePatch JSONPatch]: \"{other}\""
        ))),
    }
}

/// What a metric operation does.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricAction {
    /// A gauge value.
    Set(f64),
    /// A counter increment.
    Add(f64),
    /// A histogram observation with its buckets.
    Observe { value: f64, buckets: Vec<f64> },
    /// Drops every metric of the group.
    Expire,
}

/// One operation from `METRICS_PATH`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricOperation {
    /// Empty only for `expire`.
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub group: Option<String>,
    pub action: MetricAction,
}

/// Parses `METRICS_PATH`: a JSON stream of `{name, action|set|add, value, labels, group}`.
/// Operations without a group get `default_group` when given (addon-operator passes none for
/// module hooks; shell-operator passes the hook name).
pub fn parse_metric_operations(
    data: &[u8],
    default_group: Option<&str>,
) -> Result<Vec<MetricOperation>, OutputError> {
    let docs = json_stream(data).map_err(|e| err(format!("got bad metrics: {e}")))?;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for d in docs {
        let m = d.as_object().cloned().unwrap_or_default();
        let num = |k: &str| m.get(k).and_then(Value::as_f64);
        let name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let group = m
            .get("group")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
            .map(str::to_owned)
            .or_else(|| default_group.map(str::to_owned));
        let shown = serde_json::to_string(&d).unwrap_or_default();
        let (set, add) = (num("set"), num("add"));
        let mut action = m
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut value = num("value");
        if set.is_some() && add.is_some() {
            errors.push(format!("'set' and 'add' are mutual exclusive: {shown}"));
            continue;
        }
        if let Some(v) = set {
            action = "set".into();
            value = Some(v);
        }
        if let Some(v) = add {
            action = "add".into();
            value = Some(v);
        }
        let labels: Vec<(String, String)> = m
            .get("labels")
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str()
                                .map(str::to_owned)
                                .unwrap_or_else(|| v.to_string()),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        if name.is_empty() && !(group.is_some() && action == "expire") {
            errors.push(format!("'name' is required: {shown}"));
            continue;
        }
        let action = match (action.as_str(), value) {
            ("set", Some(v)) => MetricAction::Set(v),
            ("add", Some(v)) => MetricAction::Add(v),
            ("observe", Some(v)) if group.is_none() => MetricAction::Observe {
                value: v,
                buckets: m
                    .get("buckets")
                    .and_then(Value::as_array)
                    .map(|b| b.iter().filter_map(Value::as_f64).collect())
                    .unwrap_or_default(),
            },
            ("expire", _) if group.is_some() => MetricAction::Expire,
            ("", _) => {
                errors.push(format!(
                    "one of: 'action', 'set' or 'add' is required: {shown}"
                ));
                continue;
            }
            ("set" | "add" | "observe", None) => {
                errors.push(format!(
                    "'value' is required for action '{action}': {shown}"
                ));
                continue;
            }
            (other, _) => {
                errors.push(format!("unsupported action '{other}': {shown}"));
                continue;
            }
        };
        out.push(MetricOperation {
            name,
            labels,
            group,
            action,
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(err(format!(
            "got bad metrics: {}",
            crate::config::multierror(&errors)
        )))
    }
}
