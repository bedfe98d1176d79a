//! The registry agent's view of Kubernetes: it reads `RegistryNode/<node>`, resolves the
//! `secretRef`s it names in Secret `d8-system/registry-resolved-auth`, and writes the node's
//! status. Everything else about the agent builds and runs without Kubernetes crates.
//!
//! The agent's credentials allow exactly this: get its own RegistryNode, patch its status, and
//! get that one Secret.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent::run::{NodeApi, NodeStatus};
use agent::source::{Fetched, Origin, Stored};
use api::registry::{
    Backend as ApiBackend, Mirror as ApiMirror, NAMESPACE, RegistryNode, RegistryNodeSpec,
    Route as ApiRoute, SecretRefAuth,
};
use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use registry_plan::{Backend, BackendName, Credentials, Endpoint, Layout, Route, Scheme};

/// The condition the agent writes.
pub const CONDITION_RECONCILED: &str = "Reconciled";
/// Reason when the layout came from the API.
pub const REASON_APPLIED: &str = "Applied";
/// Reason when the layout came from the agent's disk (cache or bootstrap).
pub const REASON_APPLIED_FROM_CACHE: &str = "AppliedFromCache";
/// Reason when applying failed.
pub const REASON_FAILED: &str = "ApplyFailed";

/// How the agent reaches the API: a kubeconfig that may appear only later (a node joining),
/// or a client given outright.
#[derive(Clone)]
pub enum Connection {
    /// Read this kubeconfig on first use, retrying every pass until it exists.
    Kubeconfig(PathBuf),
    /// Use this client.
    Client(Client),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Kubeconfig(path) => f.debug_tuple("Kubeconfig").field(path).finish(),
            Self::Client(_) => f.write_str("Client"),
        }
    }
}

/// [`NodeApi`] over kube-rs.
pub struct KubeNodeApi {
    node: String,
    connection: Connection,
    client: tokio::sync::Mutex<Option<Client>>,
}

impl std::fmt::Debug for KubeNodeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeNodeApi")
            .field("node", &self.node)
            .field("connection", &self.connection)
            .finish_non_exhaustive()
    }
}

impl KubeNodeApi {
    /// The API view of node `node`.
    pub fn new(node: &str, connection: Connection) -> Self {
        let client = match &connection {
            Connection::Client(client) => Some(client.clone()),
            Connection::Kubeconfig(_) => None,
        };
        Self {
            node: node.to_owned(),
            connection,
            client: tokio::sync::Mutex::new(client),
        }
    }

    async fn client(&self) -> Result<Client, String> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref() {
            return Ok(client.clone());
        }
        let Connection::Kubeconfig(path) = &self.connection else {
            unreachable!("a given client is stored at construction");
        };
        let kubeconfig = kube::config::Kubeconfig::read_from(path)
            .map_err(|e| format!("no usable kubeconfig at {}: {e}", path.display()))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
        let client = Client::try_from(config).map_err(|e| format!("API client: {e}"))?;
        *slot = Some(client.clone());
        Ok(client)
    }

    async fn read(&self) -> Result<Option<Stored>, String> {
        let client = self.client().await?;
        let nodes: Api<RegistryNode> = Api::all(client.clone());
        let Some(node) = nodes
            .get_opt(&self.node)
            .await
            .map_err(|e| format!("reading RegistryNode {}: {e}", self.node))?
        else {
            return Ok(None);
        };
        let names = secret_names(&node.spec);
        let secrets: Api<Secret> = Api::namespaced(client, NAMESPACE);
        let mut contents = BTreeMap::new();
        for name in names {
            let secret = secrets
                .get(&name)
                .await
                .map_err(|e| format!("reading Secret {NAMESPACE}/{name}: {e}"))?;
            let data = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect::<BTreeMap<_, _>>();
            contents.insert(name, data);
        }
        let layout = resolve(&node.spec, &contents)?;
        Ok(Some(Stored {
            generation: node.metadata.generation.unwrap_or(0),
            spec: Some(layout),
        }))
    }
}

impl NodeApi for KubeNodeApi {
    async fn fetch(&self) -> Fetched {
        match self.read().await {
            Ok(Some(stored)) => Fetched::Found(stored),
            Ok(None) => Fetched::NotFound,
            Err(reason) => Fetched::Failed(reason),
        }
    }

    async fn report(&self, status: &NodeStatus) -> Result<(), String> {
        let client = self.client().await?;
        let nodes: Api<RegistryNode> = Api::all(client);
        let patch = status_patch(status, jiff::Timestamp::now());
        match nodes
            .patch_status(&self.node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            // No object (deleted, or running on bootstrap before it exists): nothing to report on.
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(format!(
                "writing the status of RegistryNode {}: {e}",
                self.node
            )),
        }
    }
}

/// The status merge patch for `status`.
pub fn status_patch(status: &NodeStatus, now: jiff::Timestamp) -> serde_json::Value {
    let from_disk = matches!(status.origin, Some(Origin::Cache | Origin::Bootstrap));
    let reason = match (status.reconciled, from_disk) {
        (false, _) => REASON_FAILED,
        (true, true) => REASON_APPLIED_FROM_CACHE,
        (true, false) => REASON_APPLIED,
    };
    serde_json::json!({
        "status": {
            "observedGeneration": status.observed_generation,
            "reconciled": status.reconciled,
            "proxyListening": status.proxy_listening,
            "activeBackends": status.active_backends,
            "conditions": [{
                "type": CONDITION_RECONCILED,
                "status": if status.reconciled { "True" } else { "False" },
                "observedGeneration": status.observed_generation,
                "lastTransitionTime": now.to_string(),
                "reason": reason,
                "message": status.message,
            }],
        }
    })
}

/// Every Secret the spec references, each once.
pub fn secret_names(spec: &RegistryNodeSpec) -> Vec<String> {
    let mut names: Vec<String> = references(spec)
        .filter_map(|r| r.secret_ref.as_ref().map(|r| r.name.clone()))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn references(spec: &RegistryNodeSpec) -> impl Iterator<Item = &SecretRefAuth> {
    let backends = spec.backends.iter().flat_map(|b| {
        b.auth
            .iter()
            .chain(b.mirrors.iter().flat_map(|m| m.auth.iter()))
    });
    let routes = spec.additional_routes.iter().flat_map(|r| {
        r.auth
            .iter()
            .chain(r.mirrors.iter().flat_map(|m| m.auth.iter()))
    });
    backends.chain(routes)
}

/// The spec with every reference replaced by its credentials. A missing Secret, key or an
/// unreadable value is an error naming it (never its value): an endpoint silently left without
/// credentials would fail later with a 401 nobody can explain.
pub fn resolve(
    spec: &RegistryNodeSpec,
    secrets: &BTreeMap<String, BTreeMap<String, Vec<u8>>>,
) -> Result<Layout, String> {
    let credentials = |auth: &Option<SecretRefAuth>| -> Result<Option<Credentials>, String> {
        // An `auth` without a reference names no credentials.
        let Some(reference) = auth.as_ref().and_then(|a| a.secret_ref.as_ref()) else {
            return Ok(None);
        };
        let (name, key) = (&reference.name, &reference.key);
        let value = secrets
            .get(name)
            .ok_or_else(|| format!("Secret {name} was not read"))?
            .get(key)
            .ok_or_else(|| format!("Secret {name} has no key {key}"))?;
        decode_auth(value)
            .map(Some)
            .map_err(|why| format!("Secret {name} key {key}: {why}"))
    };
    let mirror = |m: &ApiMirror<SecretRefAuth>| -> Result<Endpoint, String> {
        Ok(Endpoint {
            scheme: scheme(&m.scheme),
            host: m.host.clone(),
            path: m.path.clone().unwrap_or_default(),
            ca: m.ca.clone(),
            auth: credentials(&m.auth)?,
        })
    };
    let backends = spec
        .backends
        .iter()
        .map(|b: &ApiBackend| {
            Ok(Backend {
                name: match b.name {
                    api::registry::BackendName::Storage => BackendName::Storage,
                    api::registry::BackendName::Upstream => BackendName::Upstream,
                },
                endpoint: Endpoint {
                    scheme: scheme(&b.scheme),
                    host: b.host.clone(),
                    path: b.path.clone().unwrap_or_default(),
                    ca: b.ca.clone(),
                    auth: credentials(&b.auth)?,
                },
                mirrors: b
                    .mirrors
                    .iter()
                    .map(mirror)
                    .collect::<Result<_, String>>()?,
            })
        })
        .collect::<Result<_, String>>()?;
    let additional_routes = spec
        .additional_routes
        .iter()
        .map(|r: &ApiRoute| {
            Ok(Route {
                match_host: r.match_.clone(),
                endpoint: Endpoint {
                    scheme: scheme(&r.scheme),
                    host: r.host.clone(),
                    path: r.path.clone().unwrap_or_default(),
                    ca: r.ca.clone(),
                    auth: credentials(&r.auth)?,
                },
                mirrors: r
                    .mirrors
                    .iter()
                    .map(mirror)
                    .collect::<Result<_, String>>()?,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Layout {
        cache: spec.cache.unwrap_or(false),
        backends,
        additional_routes,
    })
}

fn scheme(scheme: &api::module_source::Scheme) -> Scheme {
    match scheme {
        api::module_source::Scheme::Http => Scheme::Http,
        api::module_source::Scheme::Https => Scheme::Https,
    }
}

/// A stored credential is base64 of `username:password` (the dockercfg `auth` form).
fn decode_auth(value: &[u8]) -> Result<Credentials, &'static str> {
    let text = std::str::from_utf8(value).map_err(|_| "not text")?.trim();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| "not base64 of username:password")?;
    let decoded = String::from_utf8(decoded).map_err(|_| "not text")?;
    let (username, password) = decoded
        .split_once(':')
        .ok_or("not of the form username:password")?;
    if username.is_empty() {
        return Err("empty username");
    }
    Ok(Credentials {
        username: username.to_owned(),
        password: password.to_owned(),
    })
}

#[cfg(test)]
mod tests;
