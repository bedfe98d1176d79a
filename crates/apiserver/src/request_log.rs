//! The request log (opt-in, for tests): every request as authorization saw it — who, which verb,
//! which resource and subresource, where — so a test can compare what a component calls with
//! what its Role grants, verbs included.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::auth::Attributes;

/// One request, as authorization saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LoggedRequest {
    /// The authenticated user (`system:serviceaccount:d8-system:deckhouse`).
    pub user: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`…).
    pub verb: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The plural resource.
    pub resource: String,
    /// The subresource (`status`), if any.
    pub subresource: Option<String>,
    /// The namespace, if any.
    pub namespace: Option<String>,
    /// The object's name, if the request names one.
    pub name: Option<String>,
    /// Whether it was allowed.
    pub allowed: bool,
}

/// A shared log the server appends to; clone it to read while the server runs.
#[derive(Clone, Debug, Default)]
pub struct RequestLog(Arc<Mutex<Vec<LoggedRequest>>>);

impl RequestLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every request so far, in order.
    pub fn entries(&self) -> Vec<LoggedRequest> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn record(&self, user: &str, attrs: &Attributes<'_>, allowed: bool) {
        let entry = LoggedRequest {
            user: user.to_owned(),
            verb: attrs.verb.to_owned(),
            group: attrs.group.to_owned(),
            resource: attrs.resource.to_owned(),
            subresource: attrs.subresource.map(str::to_owned),
            namespace: attrs.namespace.map(str::to_owned),
            name: attrs.name.map(str::to_owned),
            allowed,
        };
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(entry);
    }
}
