//! Switching the cluster's CNI. The decisions — the manager's phases in order, the agent's
//! steps on a node, which pods restart, what `switch` refuses — are in [`plan`]; the edges are
//! the [`manager`] (one per cluster), the [`agent`] (one per node, cleaning through
//! [`cleanup`]) and [`cli`] (`d8 network cni-migration switch` and `status`).
//!
//! Both loops act only while a CNIMigration exists (the oldest one when there are several,
//! [`plan::active`]) and idle otherwise — the job Deckhouse gives its `detect-cni-migration`
//! hook.

pub mod agent;
pub mod cleanup;
pub mod cli;
pub mod components;
pub mod detect;
pub mod manager;
pub mod plan;

use api::network::CNIMigration;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{Api, Client, ResourceExt};

use crate::Error;

/// The CNIMigration the loops work on, if any ([`plan::active`]).
pub async fn active_migration(client: &Client) -> Result<Option<CNIMigration>, Error> {
    let api: Api<CNIMigration> = Api::all(client.clone());
    let list = api
        .list(&Default::default())
        .await
        .map_err(|e| Error::kube("list CNIMigrations", e))?;
    let keys: Vec<(String, Option<Timestamp>)> = list
        .items
        .iter()
        .map(|m| {
            (
                m.name_any(),
                m.metadata.creation_timestamp.as_ref().map(|t| t.0),
            )
        })
        .collect();
    let borrowed: Vec<(&str, Option<Timestamp>)> =
        keys.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let name = plan::active(&borrowed).map(str::to_owned);
    Ok(name.and_then(|n| list.items.into_iter().find(|m| m.name_any() == n)))
}

/// Sets condition `type_` in `conditions`; the transition time moves only when the status
/// changes. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let status = if status { "True" } else { "False" };
    let fresh = Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: Time(now),
        observed_generation: None,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status && c.reason == reason && c.message == message => false,
        Some(c) => {
            let since = if c.status == status {
                c.last_transition_time.clone()
            } else {
                fresh.last_transition_time.clone()
            };
            *c = Condition {
                last_transition_time: since,
                ..fresh
            };
            true
        }
        None => {
            conditions.push(fresh);
            true
        }
    }
}

/// Whether `type_` is `True` in `conditions`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_keep_their_transition_time_while_the_status_holds() {
        let t0: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2025-01-01T00:01:00Z".parse().unwrap();
        let mut c = Vec::new();
        assert!(set_condition(
            &mut c,
            "CleanupDone",
            false,
            "Error",
            "busy",
            t0
        ));
        assert!(!set_condition(
            &mut c,
            "CleanupDone",
            false,
            "Error",
            "busy",
            t1
        ));
        assert!(set_condition(
            &mut c,
            "CleanupDone",
            false,
            "Error",
            "gone",
            t1
        ));
        assert_eq!(c[0].last_transition_time.0, t0);
        assert!(set_condition(
            &mut c,
            "CleanupDone",
            true,
            "Success",
            "Artifacts removed",
            t1
        ));
        assert_eq!(c[0].last_transition_time.0, t1);
        assert!(is_true(&c, "CleanupDone"));
        assert_eq!(c.len(), 1);
    }
}
