//! ClusterRole aggregation, as kube-controller-manager's `clusterrole-aggregation` controller
//! does it: a ClusterRole with an `aggregationRule` holds the rules of every other ClusterRole
//! one of its `clusterRoleSelectors` matches — selector by selector, the matching roles in name
//! order, each rule once — rewritten whenever a ClusterRole changes. The bootstrap roles
//! `admin`, `edit` and `view` are built this way, and so is whatever a chart labels
//! `rbac.authorization.k8s.io/aggregate-to-view` (Deckhouse's `user-authz` roles).
//!
//! [`plan`] decides (pure); [`run`] watches ClusterRoles and writes what it decides.

use crate::core::{Core, ListQuery};
use crate::selector::LabelSelector;
use crate::store::Key;
use crate::watch::Event;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::broadcast::{self, error::RecvError};

const GROUP: &str = "rbac.authorization.k8s.io";
const PLURAL: &str = "clusterroles";

fn name(role: &Value) -> &str {
    crate::meta::get(role, "name").unwrap_or_default()
}

/// A rule without its empty fields: `resourceNames: []` and no `resourceNames` are one rule,
/// as Kubernetes' semantic equality has it.
fn normalized(rule: &Value) -> Value {
    match rule.as_object() {
        Some(fields) => Value::Object(
            fields
                .iter()
                .filter(|(_, v)| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        None => rule.clone(),
    }
}

fn rules(role: &Value) -> &[Value] {
    role.get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn same_rules(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| normalized(x) == normalized(y))
}

/// The rules `role` aggregates from `roles`, or `None` when it has no `aggregationRule`.
fn aggregated_rules(role: &Value, roles: &[Value]) -> Option<Vec<Value>> {
    let selectors = role.pointer("/aggregationRule/clusterRoleSelectors")?;
    let mut out: Vec<Value> = Vec::new();
    for selector in selectors.as_array().into_iter().flatten() {
        // An empty selector (`{}`) matches every ClusterRole, as `LabelSelectorAsSelector`'s.
        let selector = LabelSelector::from_object(Some(selector));
        let mut matching: Vec<&Value> = roles
            .iter()
            .filter(|r| name(r) != name(role))
            .filter(|r| selector.as_ref().is_none_or(|s| s.matches(r)))
            .collect();
        matching.sort_by_key(|r| name(r));
        for rule in matching.into_iter().flat_map(rules) {
            let rule_n = normalized(rule);
            if !out.iter().any(|r| normalized(r) == rule_n) {
                out.push(rule.clone());
            }
        }
    }
    Some(out)
}

/// The aggregated ClusterRoles among `roles` whose rules are not what aggregation gives, with
/// the rules they must hold. Chains (`view` is aggregated into `edit`, `edit` into `admin`)
/// settle in one plan: it is worked out again on its own result until nothing changes.
pub(crate) fn plan(roles: &[Value]) -> Vec<(String, Vec<Value>)> {
    let mut work = roles.to_vec();
    // Each round settles at least one more link of a chain; a cycle of roles aggregating each
    // other only grows, so the bound is never the answer for a sane policy.
    for _ in 0..=work.len() {
        let mut changed = false;
        for i in 0..work.len() {
            let Some(wanted) = aggregated_rules(&work[i], &work) else {
                continue;
            };
            if !same_rules(rules(&work[i]), &wanted) {
                work[i]["rules"] = Value::Array(wanted);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    roles
        .iter()
        .zip(work)
        .filter(|(before, after)| !same_rules(rules(before), rules(after)))
        .map(|(before, after)| (name(before).to_owned(), rules(&after).to_vec()))
        .collect()
}

/// Reads every ClusterRole, and writes the aggregated ones whose rules must change.
pub(crate) fn pass(core: &Core) -> Result<(), crate::ApiError> {
    let Some(def) = core.registry().get(GROUP, PLURAL) else {
        return Ok(());
    };
    let roles = core.list(&def, "v1", &ListQuery::default())?.values()?;
    for (role, wanted) in plan(&roles) {
        tracing::debug!(object = %role, rules = wanted.len(), "aggregating ClusterRole");
        core.edit(&Key::new(GROUP, PLURAL, "", &role), move |o| {
            o["rules"] = Value::Array(wanted);
            true
        })?;
    }
    Ok(())
}

fn is_cluster_role(ev: &Event) -> bool {
    ev.resource == format!("{GROUP}/{PLURAL}")
}

/// Keeps aggregated ClusterRoles up to date until the server stops, from the changes `rx`
/// (the store's hub) receives.
pub(crate) async fn run(core: Arc<Core>, mut rx: broadcast::Receiver<Arc<Event>>) {
    loop {
        match rx.recv().await {
            Ok(ev) if is_cluster_role(&ev) => {}
            Ok(_) => continue,
            Err(RecvError::Lagged(_)) => {} // something may have been missed: look again
            Err(RecvError::Closed) => return,
        }
        while rx.try_recv().is_ok() {} // one pass for a burst
        let c = core.clone();
        match tokio::task::spawn_blocking(move || pass(&c)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "ClusterRole aggregation failed"),
            Err(e) => {
                tracing::error!(error = %e, "ClusterRole aggregation stopped");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
