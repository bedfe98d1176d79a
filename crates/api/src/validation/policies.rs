//! Rules about who may write what: the Module webhook, and Deckhouse's admission policies on the
//! `heritage: deckhouse` label, the ModuleRelease update-policy label and system namespaces.
//! Each applies only when the request's user is known.

use serde_json::Value;

use super::{Denial, Operation, Request, UserInfo, Warnings, at};
use crate::keys;

/// Name of the webhook guarding Modules (path `/validate/v1alpha1/modules`; the registered
/// name is not public).
pub(crate) const MODULE_WEBHOOK: &str = "modules.deckhouse-webhook.deckhouse.io";
pub(crate) const MSG_MANUAL_MODULE_CHANGE: &str = "manual Module change is forbidden";
pub(crate) const MSG_HERITAGE: &str =
    "Creating, updating and deleting an objects with the `heritage: deckhouse` label is forbidden";
pub(crate) const MSG_SYSTEM_NAMESPACE: &str = "Creation of system namespaces is forbidden";

const EXEMPT_GROUPS: [&str; 3] = [
    "system:nodes",
    "system:serviceaccounts:kube-system",
    "system:serviceaccounts:d8-system",
];
const EXEMPT_USERS: [&str; 7] = [
    "system:sudouser",
    "system:apiserver",
    "system:kube-controller-manager",
    "system:kube-scheduler",
    "system:volume-scheduler",
    "dhctl",
    "observability",
];

pub(super) fn validate(request: &Request<'_>) -> Result<Warnings, Denial> {
    let Some(user) = request.user else {
        return Ok(Vec::new());
    };
    module_changes(request, user)?;
    update_policy_label(request, user)?;
    heritage(request, user)?;
    system_namespaces(request, user)?;
    Ok(Vec::new())
}

/// Only Deckhouse itself changes Module objects.
fn module_changes(request: &Request<'_>, user: &UserInfo) -> Result<(), Denial> {
    if request.kind == "Module" && user.username != keys::DECKHOUSE_SERVICE_ACCOUNT {
        return Err(Denial::webhook(MODULE_WEBHOOK, MSG_MANUAL_MODULE_CHANGE));
    }
    Ok(())
}

fn label<'a>(object: Option<&'a Value>, key: &str) -> Option<&'a str> {
    object
        .and_then(|o| at(o, &["metadata", "labels", key]))
        .and_then(Value::as_str)
}

/// Users may remove the update-policy label of a ModuleRelease, not change it.
fn update_policy_label(request: &Request<'_>, user: &UserInfo) -> Result<(), Denial> {
    if request.kind != "ModuleRelease" || request.operation != Operation::Update {
        return Ok(());
    }
    if user.username.starts_with(keys::D8_SERVICE_ACCOUNT_PREFIX) {
        return Ok(());
    }
    match (
        label(request.new, keys::LABEL_UPDATE_POLICY),
        label(request.old, keys::LABEL_UPDATE_POLICY),
    ) {
        (Some(new), Some(old)) if new != old => Err(Denial::policy(
            "update-policy-label-objects.deckhouse.io",
            "update-policy-label-objects.deckhouse.io",
            crate::module_release::MESSAGE_MANUAL_UPDATE_POLICY_CHANGE,
        )),
        _ => Ok(()),
    }
}

/// Objects labelled `heritage: deckhouse` belong to the platform: only its service accounts
/// (and the exempt system users) may touch them. Release kinds are exempt, and so are objects
/// in maintenance mode.
fn heritage(request: &Request<'_>, user: &UserInfo) -> Result<(), Denial> {
    if matches!(
        request.kind,
        "StorageClass" | "DeckhouseRelease" | "ModuleRelease"
    ) {
        return Ok(());
    }
    if user
        .groups
        .iter()
        .any(|g| EXEMPT_GROUPS.contains(&g.as_str()))
        || EXEMPT_USERS.contains(&user.username.as_str())
        || user.username.starts_with(keys::D8_SERVICE_ACCOUNT_PREFIX)
        || user.username.starts_with("system:serviceaccount:kube-")
    {
        return Ok(());
    }
    // The binding selects on the object being written (the old one for DELETE).
    let object = match request.operation {
        Operation::Delete => request.old,
        _ => request.new,
    };
    if label(object, keys::LABEL_HERITAGE) != Some(keys::HERITAGE_DECKHOUSE) {
        return Ok(());
    }
    if matches!(
        label(object, keys::LABEL_MAINTENANCE_NO_RESOURCE_RECONCILIATION),
        Some("" | "true")
    ) {
        return Ok(());
    }
    if request.operation == Operation::Delete
        && label(request.old, "security.deckhouse.io/heritage-bypass") == Some("delete")
    {
        return Ok(());
    }
    Err(Denial::policy(
        "label-objects.deckhouse.io",
        "heritage-label-objects.deckhouse.io",
        MSG_HERITAGE,
    ))
}

/// Only Deckhouse and dhctl create `d8-*` and `kube-*` namespaces.
fn system_namespaces(request: &Request<'_>, user: &UserInfo) -> Result<(), Denial> {
    if request.kind != "Namespace" || request.operation != Operation::Create {
        return Ok(());
    }
    let name = request.new.map(super::name_of).unwrap_or_default();
    let system = name.starts_with("d8-") || name.starts_with("kube-");
    if system && user.username != keys::DECKHOUSE_SERVICE_ACCOUNT && user.username != "dhctl" {
        return Err(Denial::policy(
            "system-ns.deckhouse.io",
            "system-ns.deckhouse.io",
            MSG_SYSTEM_NAMESPACE,
        ));
    }
    Ok(())
}
