//! DeckhouseRelease: approving a release whose requirements are not met is refused.

use super::{Context, Denial, Operation, Request, Warnings, name_of};

/// Name of the webhook guarding DeckhouseRelease approval (path
/// `/validate/v1alpha1/deckhouse-releases`; the registered name is not public).
pub(crate) const RELEASE_WEBHOOK: &str = "deckhouse-releases.deckhouse-webhook.deckhouse.io";

/// The refusal of approving release `name` with `unmet` requirement messages, worded exactly
/// as Deckhouse words it (including the leading newline).
pub fn approval_denial_message(name: &str, unmet: &[String]) -> String {
    format!(
        "\n cannot approve DeckhouseRelease {name:?}: requirements not met: \n- {}",
        unmet.join("\n- ")
    )
}

fn approved(object: &serde_json::Value) -> bool {
    object.get("approved").and_then(serde_json::Value::as_bool) == Some(true)
        || super::at(
            object,
            &["metadata", "annotations", crate::keys::RELEASE_APPROVED],
        )
        .and_then(serde_json::Value::as_str)
        .is_some_and(crate::keys::parse_bool)
}

pub(super) fn validate(request: &Request<'_>, context: &Context) -> Result<Warnings, Denial> {
    if request.operation == Operation::Delete {
        return Ok(Vec::new());
    }
    let Some(new) = request.new else {
        return Ok(Vec::new());
    };
    // Only the act of approving is checked: an unapproved release, or one approved before,
    // may change freely.
    if !approved(new) {
        return Ok(Vec::new());
    }
    if request.operation == Operation::Update
        && request
            .old
            .and_then(|o| o.get("approved"))
            .and_then(serde_json::Value::as_bool)
            == Some(true)
    {
        return Ok(Vec::new());
    }
    let name = name_of(new);
    match context.unmet_release_requirements.get(name) {
        Some(unmet) if !unmet.is_empty() => Err(Denial::webhook(
            RELEASE_WEBHOOK,
            approval_denial_message(name, unmet),
        )),
        _ => Ok(Vec::new()),
    }
}
