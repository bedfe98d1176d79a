//! Update windows: the CRD pattern of `from`/`to` and the admission policies that require
//! `from < to` in every ModuleUpdatePolicy and in the `deckhouse` ModuleConfig; and the DELETE
//! webhook that keeps a policy in use.

use serde_json::Value;

use super::{Cause, Context, Denial, Operation, Request, Warnings, at, name_of};
use crate::update::{WINDOW_TIME_PATTERN, parse_window_time};

/// The message of both window policies.
pub(crate) const MSG_INVALID_WINDOWS: &str = "Invalid update windows. Start time (windows.from) should be less than the end time of the update window (windows.to)";
const MUP_POLICY: &str = "mup-update-windows.deckhouse.io";
const MC_POLICY: &str = "mc-update-windows.deckhouse.io";
/// Name of the webhook guarding ModuleUpdatePolicy deletion (path
/// `/validate/v1alpha1/update-policies`; the registered name is not public).
pub(crate) const UPDATE_POLICY_WEBHOOK: &str = "update-policies.deckhouse-webhook.deckhouse.io";

pub(super) fn validate_policy(
    request: &Request<'_>,
    context: &Context,
) -> Result<Warnings, Denial> {
    match request.operation {
        Operation::Delete => validate_policy_delete(request, context),
        Operation::Create | Operation::Update => {
            let Some(new) = request.new else {
                return Ok(Vec::new());
            };
            let Some(windows) = at(new, &["spec", "update", "windows"]) else {
                return Ok(Vec::new());
            };
            check_format(windows, "spec.update.windows")?;
            check_order(windows, MUP_POLICY)
        }
    }
}

/// The `deckhouse` ModuleConfig's `spec.settings.update.windows`.
pub(super) fn validate_deckhouse_settings(new: &Value) -> Result<Warnings, Denial> {
    if name_of(new) != "deckhouse" {
        return Ok(Vec::new());
    }
    match at(new, &["spec", "settings", "update", "windows"]) {
        Some(windows) => check_order(windows, MC_POLICY),
        None => Ok(Vec::new()),
    }
}

/// The CRD pattern of `from` and `to`, worded as the API server words a pattern mismatch.
fn check_format(windows: &Value, base: &str) -> Result<(), Denial> {
    let mut causes = Vec::new();
    for (i, window) in windows.as_array().into_iter().flatten().enumerate() {
        for bound in ["from", "to"] {
            let Some(value) = window.get(bound).and_then(Value::as_str) else {
                continue;
            };
            if parse_window_time(value).is_none() {
                let field = format!("{base}[{i}].{bound}");
                causes.push(Cause {
                    message: format!("{field} in body should match '{WINDOW_TIME_PATTERN}'"),
                    field,
                    value: Some(value.to_string()),
                });
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Denial::schema_all(causes))
    }
}

/// `windows.all(w, int(w.from without ':') < int(w.to without ':'))`, applied only when the
/// list is non-empty. A bound that is not a time is left to the schema.
fn check_order(windows: &Value, policy: &'static str) -> Result<Warnings, Denial> {
    let Some(list) = windows.as_array() else {
        return Ok(Vec::new());
    };
    let bound = |w: &Value, k: &str| w.get(k).and_then(Value::as_str).and_then(parse_window_time);
    let unordered = list
        .iter()
        .any(|w| match (bound(w, "from"), bound(w, "to")) {
            (Some(from), Some(to)) => from >= to,
            _ => false,
        });
    if unordered {
        Err(Denial::policy(policy, policy, MSG_INVALID_WINDOWS))
    } else {
        Ok(Vec::new())
    }
}

fn validate_policy_delete(request: &Request<'_>, context: &Context) -> Result<Warnings, Denial> {
    let (Some(old), Some(configs)) = (request.old, &context.module_config_update_policies) else {
        return Ok(Vec::new());
    };
    let policy = name_of(old);
    match configs.iter().find(|(_, p)| p.as_str() == policy) {
        Some((config, _)) => Err(Denial::webhook(
            UPDATE_POLICY_WEBHOOK,
            format!("the '{policy}' update policy is used by the '{config}' module config"),
        )),
        None => Ok(Vec::new()),
    }
}
