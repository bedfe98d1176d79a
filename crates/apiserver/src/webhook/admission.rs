//! AdmissionReview requests and the reading of their responses, with kube-apiserver's words.
//!
//! Pure: no I/O.

use crate::error::ApiError;
use serde_json::{Value, json};

/// Who is writing (`userInfo` of the review).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UserInfo {
    pub(crate) username: String,
    pub(crate) groups: Vec<String>,
}

/// One admission request as the webhook sees it.
#[derive(Debug, Clone)]
pub(crate) struct Review<'a> {
    pub(crate) uid: &'a str,
    /// Group, version, kind and resource of the objects sent (after `Equivalent` matching).
    pub(crate) gvk: (&'a str, &'a str, &'a str),
    pub(crate) resource: &'a str,
    /// Version of the request as the client sent it.
    pub(crate) request_version: &'a str,
    pub(crate) subresource: &'a str,
    pub(crate) name: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) operation: &'a str,
    pub(crate) user: &'a UserInfo,
    pub(crate) object: Option<&'a Value>,
    pub(crate) old_object: Option<&'a Value>,
    pub(crate) dry_run: bool,
}

impl Review<'_> {
    /// The `admission.k8s.io/v1` AdmissionReview body.
    pub(crate) fn body(&self) -> Value {
        let (g, v, k) = self.gvk;
        let options = match self.operation {
            "CREATE" => json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
            "UPDATE" => json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}),
            _ => json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}),
        };
        let mut req = json!({
            "uid": self.uid,
            "kind": {"group": g, "version": v, "kind": k},
            "resource": {"group": g, "version": v, "resource": self.resource},
            "requestKind": {"group": g, "version": self.request_version, "kind": k},
            "requestResource": {"group": g, "version": self.request_version, "resource": self.resource},
            "name": self.name,
            "operation": self.operation,
            "userInfo": {"username": self.user.username, "groups": self.user.groups},
            "object": self.object.cloned().unwrap_or(Value::Null),
            "oldObject": self.old_object.cloned().unwrap_or(Value::Null),
            "dryRun": self.dry_run,
            "options": options,
        });
        if !self.namespace.is_empty() {
            req["namespace"] = json!(self.namespace);
        }
        if !self.subresource.is_empty() {
            req["subResource"] = json!(self.subresource);
            req["requestSubResource"] = json!(self.subresource);
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
    }
}

/// A verified answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) allowed: bool,
    /// The JSON patch of a mutating webhook.
    pub(crate) patch: Option<Value>,
    pub(crate) result: Option<Value>,
    pub(crate) warnings: Vec<String>,
}

/// Checks a response body as kube-apiserver's `VerifyAdmissionResponse` does; the error is the
/// reason of a failed call.
pub(crate) fn verify(
    uid: &str,
    mutating: bool,
    status: u16,
    body: &[u8],
) -> Result<Answer, String> {
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(body);
        let message = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| text.trim().to_string());
        // client-go's words for an answer that is not a Status.
        let why = match status {
            400 => "the server rejected our request for an unknown reason".to_string(),
            404 => "the server could not find the requested resource".to_string(),
            503 => "the server is currently unable to handle the request".to_string(),
            _ if !message.is_empty() => format!(
                "an error on the server ({message:?}) has prevented the request from succeeding"
            ),
            _ => format!(
                "the server responded with the status code {status} but did not return more information"
            ),
        };
        return Err(format!("failed to call webhook: {why}"));
    }
    let review: Value = serde_json::from_slice(body)
        .map_err(|e| format!("received invalid webhook response: {e}"))?;
    let invalid = |m: String| format!("received invalid webhook response: {m}");
    let Some(r) = review.get("response").filter(|r| !r.is_null()) else {
        return Err(invalid("webhook response was absent".into()));
    };
    let got = r.get("uid").and_then(Value::as_str).unwrap_or_default();
    if got != uid {
        return Err(invalid(format!(
            "expected response.uid={uid:?}, got {got:?}"
        )));
    }
    let av = review
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = review
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if av != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        let (g, v) = av.split_once('/').unwrap_or(("", av));
        return Err(invalid(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {g}/{v}, Kind={kind}"
        )));
    }
    let patch = r
        .get("patch")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty());
    let patch_type = r.get("patchType").and_then(Value::as_str);
    let patch = if mutating {
        match (patch, patch_type) {
            (Some(_), None) => {
                return Err(invalid(
                    "webhook returned response.patch but not response.patchType".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "webhook returned response.patchType but not response.patch".into(),
                ));
            }
            (Some(p), Some("JSONPatch")) => {
                use base64::Engine as _;
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(p)
                    .map_err(|e| invalid(e.to_string()))?;
                Some(serde_json::from_slice(&raw).map_err(|e| invalid(e.to_string()))?)
            }
            (Some(_), Some(t)) => return Err(format!("unsupported patch type {t:?}")),
            (None, None) => None,
        }
    } else {
        if patch.is_some() {
            return Err(invalid(
                "validating webhook may not return response.patch".into(),
            ));
        }
        if patch_type.is_some() {
            return Err(invalid(
                "validating webhook may not return response.patchType".into(),
            ));
        }
        None
    };
    Ok(Answer {
        allowed: r.get("allowed").and_then(Value::as_bool).unwrap_or(false),
        patch,
        result: r.get("status").filter(|s| !s.is_null()).cloned(),
        warnings: r
            .get("warnings")
            .and_then(Value::as_array)
            .map(|w| {
                w.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// The `StatusReason`s a webhook may give, kept as they are.
const REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// A denial, as kube-apiserver's `ToStatusErr` words it.
pub(crate) fn denied(webhook: &str, result: Option<&Value>) -> ApiError {
    let s = |k: &str| {
        result
            .and_then(|r| r.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let code = result
        .and_then(|r| r.get("code"))
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let by = format!("admission webhook {webhook:?} denied the request");
    let message = match (s("message"), s("reason")) {
        (m, _) if !m.is_empty() => format!("{by}: {m}"),
        (_, r) if !r.is_empty() => format!("{by}: {r}"),
        _ => format!("{by} without explanation"),
    };
    let reason = REASONS
        .iter()
        .find(|r| **r == s("reason"))
        .copied()
        .unwrap_or("");
    let mut e = ApiError::with_reason(code, reason, message);
    e.details = result.and_then(|r| r.get("details")).cloned();
    e
}

/// A failed call under `failurePolicy: Fail`: an internal error naming the webhook.
pub(crate) fn call_failed(webhook: &str, reason: &str) -> ApiError {
    ApiError::internal_error(format!("failed calling webhook {webhook:?}: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(r: Value) -> Vec<u8> {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": r})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn responses_are_checked_as_kube_apiserver_checks_them() {
        let ok = verify(
            "u",
            false,
            200,
            &resp(json!({"uid": "u", "allowed": true, "warnings": ["w"]})),
        )
        .unwrap();
        assert!(ok.allowed);
        assert_eq!(ok.warnings, ["w"]);
        let table: &[(bool, Vec<u8>, &str)] = &[
            (false, resp(json!({"uid": "x", "allowed": true})), "received invalid webhook response: expected response.uid=\"u\", got \"x\""),
            (false, br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(), "received invalid webhook response: webhook response was absent"),
            (false, resp(json!({"uid": "u", "allowed": true, "patch": "W10=", "patchType": "JSONPatch"})), "received invalid webhook response: validating webhook may not return response.patch"),
            (true, resp(json!({"uid": "u", "allowed": true, "patch": "W10="})), "received invalid webhook response: webhook returned response.patch but not response.patchType"),
            (
                false,
                json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "response": {"uid": "u"}}).to_string().into_bytes(),
                "received invalid webhook response: expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview",
            ),
        ];
        for (mutating, body, want) in table {
            assert_eq!(verify("u", *mutating, 200, body).unwrap_err(), *want);
        }
        let p = verify("u", true, 200, &resp(json!({"uid": "u", "allowed": true, "patch": "W3sib3AiOiJhZGQiLCJwYXRoIjoiL2EiLCJ2YWx1ZSI6MX1d", "patchType": "JSONPatch"}))).unwrap();
        assert_eq!(
            p.patch,
            Some(json!([{"op": "add", "path": "/a", "value": 1}]))
        );
    }

    #[test]
    fn denials_read_as_kube_apiserver_words_them() {
        let e = denied(
            "v.example.io",
            Some(&json!({"message": "no", "code": 403, "reason": "Forbidden"})),
        );
        assert_eq!(
            e.message,
            "admission webhook \"v.example.io\" denied the request: no"
        );
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
        let e = denied("v", Some(&json!({"reason": "Because"})));
        assert_eq!(
            e.message,
            "admission webhook \"v\" denied the request: Because"
        );
        assert_eq!((e.code, e.reason), (400, ""));
        let e = denied("v", None);
        assert_eq!(
            e.message,
            "admission webhook \"v\" denied the request without explanation"
        );
        let e = call_failed(
            "v",
            "failed to call webhook: Post \"https://x/?timeout=1s\": context deadline exceeded",
        );
        assert_eq!(e.code, 500);
        assert_eq!(
            e.message,
            "Internal error occurred: failed calling webhook \"v\": failed to call webhook: Post \"https://x/?timeout=1s\": context deadline exceeded"
        );
    }
}
