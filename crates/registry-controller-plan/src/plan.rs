//! The writes that converge the cluster on a [`Desired`] layout, in the order they must happen:
//! the credentials Secret first (so no reference ever points at nothing), then the RegistryNodes
//! and RegistryStorage, then the Secret pruned of keys nothing references any more. Withdrawal
//! (Unmanaged, after the drain) deletes every object the controller wrote.

use std::collections::{BTreeMap, BTreeSet};

use api::registry::{RegistryNodeSpec, RegistryStorageSpec, SecretRefAuth, Upstream};

use crate::layout::Desired;
use crate::settings::encode;

/// Secret data: key → value bytes.
pub type SecretData = BTreeMap<String, Vec<u8>>;

/// What the controller's own objects look like now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Data of Secret `registry-resolved-auth`, if it exists.
    pub secret: Option<SecretData>,
    /// Spec of every existing RegistryNode, by name.
    pub nodes: BTreeMap<String, RegistryNodeSpec>,
    /// Spec of RegistryStorage `registry`, if it exists.
    pub storage: Option<RegistryStorageSpec>,
}

/// One write.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Create or replace the data of `registry-resolved-auth`.
    WriteSecret(SecretData),
    /// Delete `registry-resolved-auth`.
    DeleteSecret,
    /// Create or update a RegistryNode's spec.
    ApplyNode {
        /// Node name.
        name: String,
        /// The spec.
        spec: Box<RegistryNodeSpec>,
    },
    /// Delete a RegistryNode.
    DeleteNode(String),
    /// Create or update RegistryStorage `registry`.
    ApplyStorage(Box<RegistryStorageSpec>),
    /// Delete RegistryStorage `registry`.
    DeleteStorage,
}

fn keys_of_upstream(upstream: &Upstream<SecretRefAuth>) -> impl Iterator<Item = &SecretRefAuth> {
    upstream
        .auth
        .iter()
        .chain(upstream.mirrors.iter().flat_map(|m| m.auth.iter()))
}

/// Every key the given resources reference.
pub fn referenced_keys<'a>(
    nodes: impl IntoIterator<Item = &'a RegistryNodeSpec>,
    storage: Option<&'a RegistryStorageSpec>,
) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for spec in nodes {
        for backend in &spec.backends {
            for auth in backend
                .auth
                .iter()
                .chain(backend.mirrors.iter().flat_map(|m| m.auth.iter()))
            {
                keys.extend(auth.secret_ref.as_ref().map(|r| r.key.clone()));
            }
        }
        for route in &spec.additional_routes {
            for auth in route
                .auth
                .iter()
                .chain(route.mirrors.iter().flat_map(|m| m.auth.iter()))
            {
                keys.extend(auth.secret_ref.as_ref().map(|r| r.key.clone()));
            }
        }
    }
    if let Some(upstream) = storage.and_then(|s| s.upstream.as_ref()) {
        keys.extend(
            keys_of_upstream(upstream).filter_map(|a| a.secret_ref.as_ref().map(|r| r.key.clone())),
        );
    }
    keys
}

/// The writes taking `observed` to `target`; `None` withdraws everything. Empty when converged.
pub fn plan(target: Option<&Desired>, observed: &Observed) -> Vec<Action> {
    let mut actions = Vec::new();
    let Some(desired) = target else {
        actions.extend(observed.nodes.keys().cloned().map(Action::DeleteNode));
        if observed.storage.is_some() {
            actions.push(Action::DeleteStorage);
        }
        if observed.secret.is_some() {
            actions.push(Action::DeleteSecret);
        }
        return actions;
    };

    let wanted: SecretData = desired
        .credentials
        .iter()
        .map(|(k, v)| (k.clone(), encode(v)))
        .collect();
    let current = observed.secret.clone().unwrap_or_default();
    // Keys still referenced by what exists keep their old values until the resources move on.
    let mut transitional = wanted.clone();
    for key in referenced_keys(observed.nodes.values(), observed.storage.as_ref()) {
        if let Some(value) = current.get(&key) {
            transitional.entry(key).or_insert_with(|| value.clone());
        }
    }
    let secret_needed = observed.secret.is_some() || !wanted.is_empty();
    if secret_needed && (observed.secret.is_none() || transitional != current) {
        actions.push(Action::WriteSecret(transitional.clone()));
    }

    for (name, spec) in &desired.nodes {
        if observed.nodes.get(name) != Some(spec) {
            actions.push(Action::ApplyNode {
                name: name.clone(),
                spec: Box::new(spec.clone()),
            });
        }
    }
    for name in observed.nodes.keys() {
        if !desired.nodes.contains_key(name) {
            actions.push(Action::DeleteNode(name.clone()));
        }
    }
    match (&desired.storage, &observed.storage) {
        (Some(want), Some(have)) if want == have => {}
        (Some(want), _) => actions.push(Action::ApplyStorage(Box::new(want.clone()))),
        (None, Some(_)) => actions.push(Action::DeleteStorage),
        (None, None) => {}
    }
    if secret_needed && transitional != wanted {
        actions.push(Action::WriteSecret(wanted));
    }
    actions
}

/// What `actions` do to `observed`: the model of the writes, used to check that planning again
/// after acting finds nothing to do.
pub fn apply(observed: &mut Observed, actions: &[Action]) {
    for action in actions {
        match action {
            Action::WriteSecret(data) => observed.secret = Some(data.clone()),
            Action::DeleteSecret => observed.secret = None,
            Action::ApplyNode { name, spec } => {
                observed.nodes.insert(name.clone(), (**spec).clone());
            }
            Action::DeleteNode(name) => {
                observed.nodes.remove(name);
            }
            Action::ApplyStorage(spec) => observed.storage = Some((**spec).clone()),
            Action::DeleteStorage => observed.storage = None,
        }
    }
}

#[cfg(test)]
mod tests;
