//! `admission.k8s.io/v1` AdmissionReview and `apiextensions.k8s.io/v1` ConversionReview: the
//! bodies kube-apiserver sends, parsed strictly (a malformed review is a [`BadReview`], which
//! the transport answers with 400), and the responses it expects (`uid` echoed, `allowed`,
//! `status`, `warnings`; `convertedObjects` in the order of `objects`).

use api::validation::{Context, Denial, Operation, Request, UserInfo, validate_request};
use serde_json::{Value, json};

use crate::Verdicts;
use crate::convert::convert;

/// The largest review body accepted (kube-apiserver's objects are at most 3 MiB; an UPDATE
/// carries two of them).
pub const MAX_REVIEW_BYTES: usize = 8 << 20;

const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";
const CONVERSION_API_VERSION: &str = "apiextensions.k8s.io/v1";

/// A review that cannot be answered: not JSON, the wrong kind or version, fields missing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct BadReview(String);

fn bad(message: impl Into<String>) -> BadReview {
    BadReview(message.into())
}

/// The review object, checked for its `apiVersion` and `kind`; its `request`.
fn envelope(body: &[u8], api_version: &str, kind: &str) -> Result<Value, BadReview> {
    if body.len() > MAX_REVIEW_BYTES {
        return Err(bad(format!(
            "the {kind} is {} bytes, more than the {MAX_REVIEW_BYTES} accepted",
            body.len()
        )));
    }
    let mut review: Value = serde_json::from_slice(body)
        .map_err(|e| bad(format!("the body is not a JSON {kind}: {e}")))?;
    let got_kind = review
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let got_version = review
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if got_kind != kind || got_version != api_version {
        return Err(bad(format!(
            "expected a {api_version} {kind}, got {:?} {:?}",
            got_version, got_kind
        )));
    }
    match review.get_mut("request").map(Value::take) {
        Some(request @ Value::Object(_)) => Ok(request),
        _ => Err(bad(format!("the {kind} has no request"))),
    }
}

fn required_str(request: &Value, field: &str) -> Result<String, BadReview> {
    request
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| bad(format!("request.{field} is missing")))
}

/// An object field of the request: absent or null is `None`, anything but an object is bad.
fn object(request: &Value, field: &str) -> Result<Option<Value>, BadReview> {
    match request.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(o @ Value::Object(_)) => Ok(Some(o.clone())),
        Some(_) => Err(bad(format!("request.{field} is not an object"))),
    }
}

/// One AdmissionReview request, parsed.
#[derive(Clone, Debug)]
pub struct AdmissionRequest {
    uid: String,
    kind: String,
    operation: Option<Operation>,
    user: UserInfo,
    old: Option<Value>,
    new: Option<Value>,
}

impl AdmissionRequest {
    /// Parses a review body as kube-apiserver sends it.
    pub fn parse(body: &[u8]) -> Result<Self, BadReview> {
        let request = envelope(body, ADMISSION_API_VERSION, "AdmissionReview")?;
        let uid = required_str(&request, "uid")?;
        let kind = request
            .pointer("/kind/kind")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| bad("request.kind.kind is missing"))?
            .to_string();
        let operation = match required_str(&request, "operation")?.as_str() {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            "CONNECT" => None,
            other => {
                return Err(bad(format!(
                    "request.operation {other:?} is not one of CREATE, UPDATE, DELETE, CONNECT"
                )));
            }
        };
        let user = request.get("userInfo").cloned().unwrap_or(Value::Null);
        let user = UserInfo {
            username: user
                .get("username")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            groups: user
                .get("groups")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        };
        let old = object(&request, "oldObject")?;
        let new = object(&request, "object")?;
        match operation {
            Some(Operation::Create) if new.is_none() => {
                return Err(bad("request.object is missing for CREATE"));
            }
            Some(Operation::Update) if new.is_none() || old.is_none() => {
                return Err(bad(
                    "request.object and request.oldObject are required for UPDATE",
                ));
            }
            Some(Operation::Delete) if old.is_none() => {
                return Err(bad("request.oldObject is missing for DELETE"));
            }
            _ => {}
        }
        Ok(Self {
            uid,
            kind,
            operation,
            user,
            old,
            new,
        })
    }

    /// The kind of the object.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Whether answering needs the cluster's facts ([`crate::context`]).
    pub fn needs_context(&self) -> bool {
        self.operation.is_some() && crate::context::needs_context(&self.kind)
    }

    /// The verdict of the rules, with `context` (an empty one when not [`Self::needs_context`]).
    pub fn verdict(&self, context: &Context) -> Result<Vec<String>, Denial> {
        let Some(operation) = self.operation else {
            return Ok(Vec::new());
        };
        validate_request(
            &Request {
                kind: &self.kind,
                operation,
                user: (!self.user.username.is_empty()).then_some(&self.user),
                old: self.old.as_ref(),
                new: self.new.as_ref(),
            },
            context,
        )
    }

    /// The AdmissionReview response body with the verdict of the rules this transport gives
    /// ([`Verdicts`]).
    pub fn respond(&self, context: &Context, verdicts: Verdicts) -> Value {
        let response = match verdicts.keep(self.verdict(context)) {
            Ok(warnings) => {
                let mut r = json!({"uid": self.uid, "allowed": true});
                if !warnings.is_empty() {
                    r["warnings"] = json!(warnings);
                }
                r
            }
            Err(denial) => json!({
                "uid": self.uid,
                "allowed": false,
                "status": {
                    "code": denial.code(),
                    "reason": denial.reason(),
                    "message": denial.message(),
                },
            }),
        };
        json!({"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response})
    }
}

/// Answers a ConversionReview body: every object converted to `desiredAPIVersion`, in order; a
/// failure of any converts none and says why (`result.status: Failure`).
pub fn conversion_review(body: &[u8]) -> Result<Value, BadReview> {
    let request = envelope(body, CONVERSION_API_VERSION, "ConversionReview")?;
    let uid = required_str(&request, "uid")?;
    let desired = required_str(&request, "desiredAPIVersion")?;
    let objects = request
        .get("objects")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("request.objects is missing"))?;
    let converted: Result<Vec<Value>, String> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            if !o.is_object() {
                return Err(format!("objects[{i}] is not an object"));
            }
            convert(o.clone(), &desired).map_err(|e| format!("objects[{i}]: {e}"))
        })
        .collect();
    let response = match converted {
        Ok(objects) => json!({
            "uid": uid,
            "convertedObjects": objects,
            "result": {"status": "Success"},
        }),
        Err(message) => json!({
            "uid": uid,
            "convertedObjects": [],
            "result": {"status": "Failure", "message": message},
        }),
    };
    Ok(
        json!({"apiVersion": CONVERSION_API_VERSION, "kind": "ConversionReview", "response": response}),
    )
}

#[cfg(test)]
mod tests;
