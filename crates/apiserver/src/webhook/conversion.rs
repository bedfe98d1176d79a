//! ConversionReview requests of a CRD's `spec.conversion.strategy: Webhook`, and the reading
//! of their responses, in kube-apiserver's (apiextensions') words.
//!
//! Pure: no I/O.

use super::config::ClientConfig;
use serde_json::{Value, json};

/// A CRD's conversion webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConversionWebhook {
    pub(crate) client: ClientConfig,
    pub(crate) review_versions: Vec<String>,
}

/// The conversion webhook of a CRD, when its strategy is `Webhook`.
pub(crate) fn of_crd(crd: &Value) -> Option<ConversionWebhook> {
    let c = crd.pointer("/spec/conversion")?;
    if c.get("strategy").and_then(Value::as_str) != Some("Webhook") {
        return None;
    }
    let w = c.get("webhook");
    Some(ConversionWebhook {
        client: ClientConfig::parse(w.and_then(|w| w.get("clientConfig"))),
        review_versions: w
            .and_then(|w| w.get("conversionReviewVersions"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// The `apiextensions.k8s.io/v1` ConversionReview body.
pub(crate) fn request(uid: &str, desired: &str, objects: &[Value]) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    })
}

/// The converted objects of a response, checked as kube-apiserver checks them; the error is the
/// cause (the caller adds `conversion webhook for <gvk> failed: `).
pub(crate) fn response(uid: &str, expected: usize, body: &[u8]) -> Result<Vec<Value>, String> {
    let review: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let av = review
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = review
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if av != "apiextensions.k8s.io/v1" || kind != "ConversionReview" {
        let (g, v) = av.split_once('/').unwrap_or(("", av));
        return Err(format!(
            "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {g}/{v}, Kind={kind}"
        ));
    }
    let r = review
        .get("response")
        .filter(|r| !r.is_null())
        .ok_or("no response provided")?;
    let got = r.get("uid").and_then(Value::as_str).unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let status = r
        .pointer("/result/status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if status != "Success" {
        let message = r
            .pointer("/result/message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(if message.is_empty() {
            format!("response.result.status was '{status}', not 'Success'")
        } else {
            message.to_string()
        });
    }
    let objects = r
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if objects.len() != expected {
        return Err(format!(
            "returned {} objects, expected {expected}",
            objects.len()
        ));
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(r: Value) -> Vec<u8> {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": r})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn responses_are_checked_as_kube_apiserver_checks_them() {
        let ok = body(
            json!({"uid": "u", "result": {"status": "Success"}, "convertedObjects": [{"a": 1}]}),
        );
        assert_eq!(response("u", 1, &ok).unwrap(), [json!({"a": 1})]);
        let table = [
            (
                body(json!({"uid": "x", "result": {"status": "Success"}})),
                "expected response.uid=\"u\", got \"x\"",
            ),
            (
                body(json!({"uid": "u", "result": {"status": "Failure", "message": "cannot"}})),
                "cannot",
            ),
            (
                body(json!({"uid": "u", "result": {"status": "Failure"}})),
                "response.result.status was 'Failure', not 'Success'",
            ),
            (
                body(json!({"uid": "u", "result": {"status": "Success"}, "convertedObjects": []})),
                "returned 0 objects, expected 1",
            ),
            (
                br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}"#.to_vec(),
                "no response provided",
            ),
        ];
        for (b, want) in table {
            assert_eq!(response("u", 1, &b).unwrap_err(), want);
        }
    }

    #[test]
    fn only_the_webhook_strategy_has_a_webhook() {
        let crd = |c: Value| json!({"spec": {"conversion": c}});
        assert_eq!(of_crd(&crd(json!({"strategy": "None"}))), None);
        let w = of_crd(&crd(json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://127.0.0.1:1/c"}}}))).unwrap();
        assert_eq!(w.review_versions, ["v1"]);
    }
}
