//! ObjectKeeper: the CEL rules on `spec` (mode against `followObjectRef` and `ttl`).

use serde_json::Value;

use super::{Cause, Denial, Operation, Request, Warnings, at};
use crate::object_keeper::{
    MSG_FOLLOW_REF_FORBIDDEN, MSG_FOLLOW_REF_REQUIRED, MSG_TTL_FORBIDDEN, MSG_TTL_REQUIRED,
};

pub(super) fn validate(request: &Request<'_>) -> Result<Warnings, Denial> {
    if request.operation == Operation::Delete {
        return Ok(Vec::new());
    }
    let Some(spec) = request.new.and_then(|o| at(o, &["spec"])) else {
        return Ok(Vec::new());
    };
    let causes = spec_rules(spec);
    if causes.is_empty() {
        Ok(Vec::new())
    } else {
        Err(Denial::schema_all(causes))
    }
}

/// Every failing rule, in the CRD's order (the API server reports all of them).
fn spec_rules(spec: &Value) -> Vec<Cause> {
    // Without a mode the schema's `required` fails first; CEL rules do not run.
    let Some(mode) = spec.get("mode").and_then(Value::as_str) else {
        return Vec::new();
    };
    let has_ref = spec.get("followObjectRef").is_some();
    let has_ttl = spec.get("ttl").is_some();
    let rules = [
        (
            matches!(mode, "FollowObject" | "FollowObjectWithTTL") && !has_ref,
            MSG_FOLLOW_REF_REQUIRED,
        ),
        (
            matches!(mode, "TTL" | "FollowObjectWithTTL") && !has_ttl,
            MSG_TTL_REQUIRED,
        ),
        (mode == "TTL" && has_ref, MSG_FOLLOW_REF_FORBIDDEN),
        (mode == "FollowObject" && has_ttl, MSG_TTL_FORBIDDEN),
    ];
    rules
        .into_iter()
        .filter(|(failed, _)| *failed)
        .map(|(_, message)| Cause {
            field: "spec".into(),
            value: Some("object".into()),
            message: message.into(),
        })
        .collect()
}
