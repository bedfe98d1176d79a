//! Listing: pages read from one snapshot, continue tokens in kube-apiserver's format, and the
//! stored JSON of each object sent as it is when it is already what the client asked for.

use crate::error::ApiError;
use crate::watch::Event;
use base64::Engine as _;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The version field of a continue token.
const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// What kube-apiserver answers (410) for a continue token older than the retained history.
pub(crate) const TOO_OLD: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A decoded continue token: where the next page starts, and the revision of the snapshot the
/// list is read from (`None`: the latest, for a list continued inconsistently after a 410).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Continue {
    /// The first key of the next page (inclusive), a full storage key.
    pub(crate) from: String,
    pub(crate) rv: Option<u64>,
    /// How many objects the list had after the previous page, when the token carries it.
    pub(crate) remaining: Option<u64>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Token {
    v: String,
    rv: i64,
    start: String,
    /// The objects after the previous page in the snapshot, so that later pages of a
    /// consistent list need not count them again (kube-apiserver's decoder ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n: Option<u64>,
}

/// The token of the page from key `from` on in a list under `prefix` read at `rv` (`None`: at
/// the latest revision). Like kube-apiserver's: base64url of `{"v","rv","start"}`, `start` being
/// the key after the last one returned (that key and a NUL), relative to the list's prefix.
pub(crate) fn encode_continue(
    prefix: &str,
    from: &str,
    rv: Option<u64>,
    remaining: Option<u64>,
) -> String {
    let start = from.strip_prefix(prefix).unwrap_or(from).to_string();
    let token = Token {
        v: TOKEN_VERSION.into(),
        rv: rv.map_or(-1, |v| i64::try_from(v).unwrap_or(i64::MAX)),
        start,
        n: remaining.filter(|_| rv.is_some()),
    };
    let json = serde_json::to_vec(&token).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// Decodes a continue token of a list under `prefix`; errors are kube-apiserver's 400s.
pub(crate) fn decode_continue(prefix: &str, token: &str) -> Result<Continue, ApiError> {
    let invalid = |why: String| ApiError::bad_request(format!("invalid continue token: {why}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|e| invalid(format!("continue key is not valid: {e}")))?;
    let t: Token = serde_json::from_slice(&raw)
        .map_err(|e| invalid(format!("continue key is not valid: {e}")))?;
    if t.v != TOKEN_VERSION {
        return Err(invalid(format!(
            "continue key is not valid: server does not recognize this encoded version {}",
            t.v
        )));
    }
    if t.rv == 0 {
        return Err(invalid(format!(
            "continue key is not valid: incorrect encoded start resourceVersion (version {TOKEN_VERSION})"
        )));
    }
    if t.start.is_empty() {
        return Err(invalid(format!(
            "continue key is not valid: encoded start key empty (version {TOKEN_VERSION})"
        )));
    }
    let start = t.start.trim_start_matches('/');
    if start.split('/').any(|s| s == ".." || s == ".") {
        return Err(invalid(format!("continue key is not valid: {}", t.start)));
    }
    Ok(Continue {
        from: format!("{prefix}{start}"),
        rv: u64::try_from(t.rv).ok(),
        remaining: t.n,
    })
}

/// The objects under `prefix`, from `from` on, as they were at the revision before `events`
/// (the changes committed after it, oldest first): for every key they touched, the object
/// before the first of them (`None`: it did not exist then).
pub(crate) fn undo(
    prefix: &str,
    from: &str,
    events: &[Arc<Event>],
) -> BTreeMap<String, Option<Value>> {
    let mut before = BTreeMap::new();
    for ev in events {
        let name = ev
            .object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let key = format!("{}/{}/{}", ev.resource, ev.namespace, name);
        if key.starts_with(prefix) && key.as_str() >= from {
            before.entry(key).or_insert_with(|| ev.old.clone());
        }
    }
    before
}
/// One listed object: the stored JSON when it is already in the form the client asked for,
/// else the decoded object (to convert, or restored from the history).
#[derive(Debug)]
pub(crate) enum Item {
    Raw(Vec<u8>),
    Value(Value),
}

/// The fields of a stored object that say whether it can be served as it is.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
}

/// Whether the stored JSON `b` has this `apiVersion` and `kind`.
fn is_served_as(b: &[u8], api_version: &str, kind: &str) -> bool {
    serde_json::from_slice::<Head>(b).is_ok_and(|h| {
        h.api_version.as_deref() == Some(api_version) && h.kind.as_deref() == Some(kind)
    })
}

impl Item {
    /// The decoded object.
    pub(crate) fn value(self) -> Result<Value, ApiError> {
        match self {
            Self::Raw(b) => serde_json::from_slice(&b)
                .map_err(|e| ApiError::internal(format!("stored object is not valid JSON: {e}"))),
            Self::Value(v) => Ok(v),
        }
    }

    /// Stored JSON stays as it is when its `apiVersion` and `kind` are the served ones; other
    /// objects are decoded for conversion.
    pub(crate) fn servable(self, api_version: &str, kind: &str) -> Result<Self, ApiError> {
        if matches!(&self, Self::Raw(b) if is_served_as(b, api_version, kind)) {
            return Ok(self);
        }
        self.value().map(Self::Value)
    }

    /// Appends the object's JSON.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) -> Result<(), ApiError> {
        match self {
            Self::Raw(b) => {
                out.extend_from_slice(b);
                Ok(())
            }
            Self::Value(v) => {
                serde_json::to_writer(out, v).map_err(|e| ApiError::internal(e.to_string()))
            }
        }
    }
}
