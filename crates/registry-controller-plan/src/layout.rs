//! The layout compute: from the resolved configuration and what was observed, the spec of every
//! RegistryNode and of RegistryStorage, and the credentials they reference.
//!
//! There is no mode state machine: two axes (an upstream is configured; the cache is on) give
//! three valid layouts, and every change is an idempotent reconfiguration, except going
//! air-gap. That one transition is gated here: the upstream is dropped from the storage and
//! from every node in one compute, and only once the lease holder reports itself full. Until
//! then the previous upstream is *held* — addresses from `status.effectiveUpstream`, credentials
//! read back from `registry-resolved-auth` — because it is what keeps nodes served.
//!
//! | mode | upstream | cache | nodes | RegistryStorage |
//! |---|---|---|---|---|
//! | Unmanaged | – | – | none | none |
//! | Managed | set | off | `[Upstream]` | none |
//! | Managed | set | on | `[Storage(leader, others as mirrors), Upstream]` | upstream set |
//! | Managed | none | on, leader not full | `[Storage, Upstream(held)]` | upstream held |
//! | Managed | none | on, leader full | `[Storage]` | no upstream (authoritative) |
//!
//! A failed preflight probe keeps the previous upstream in every row. Every credential leaves
//! the resources: [`Desired::credentials`] is persisted first, the resources carry `secretRef`s.

use std::collections::BTreeMap;

use api::module_source::Scheme;
use api::registry::{
    Backend, BackendName, EffectiveMirror, EffectiveUpstream, GarbageCollection, InlineAuth,
    Mirror, RESOLVED_AUTH_SECRET, RegistryConfigSpec, RegistryMode, RegistryNodeSpec,
    RegistryStorageSpec, Route, SecretRefAuth, Store, Upstream,
};
use registry_plan::Credentials;

use crate::arbitration::CompiledRoute;
use crate::settings::credentials;
use crate::{
    AUTH_KEY_STORAGE, AUTH_KEY_UPSTREAM, DEFAULT_GC_SCHEDULE, Error, STORE_PATH, SYSTEM_PATH,
};

/// How agents reach the cache replicas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageAccess {
    /// `(node, host:port)` of every replica that can be reached.
    pub replicas: Vec<(String, String)>,
    /// Node of the storage lease holder, when it has reported.
    pub leader: Option<String>,
    /// How the replicas are reached.
    pub scheme: Scheme,
    /// CA of the replicas' serving certificate.
    pub ca: Option<String>,
    /// The node (pull-only) account of the replicas.
    pub credentials: Option<Credentials>,
}

/// Everything the layout depends on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inputs {
    /// The resolved configuration (already validated).
    pub config: RegistryConfigSpec,
    /// `RegistryConfig.status.effectiveUpstream`: the last upstream that passed the probe, or
    /// the one held while air-gap waits. Addresses only.
    pub effective: Option<EffectiveUpstream>,
    /// Credentials read back from `registry-resolved-auth`, by key.
    pub persisted: BTreeMap<String, Credentials>,
    /// The configured upstream did not pass its preflight probe.
    pub probe_failed: bool,
    /// The lease holder reports itself full.
    pub leader_full: bool,
    /// Nodes that get a RegistryNode.
    pub nodes: Vec<String>,
    /// Accepted RegistryUpstreams, in arbitration order.
    pub routes: Vec<CompiledRoute>,
    /// The cache replicas.
    pub storage: StorageAccess,
    /// Garbage collection schedule derived from the masters' maintenance windows, if any.
    pub gc_schedule_fallback: Option<String>,
}

/// The layout to converge on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Desired {
    /// RegistryStorage spec; `None` means the object must not exist.
    pub storage: Option<RegistryStorageSpec>,
    /// RegistryNode spec of every node.
    pub nodes: BTreeMap<String, RegistryNodeSpec>,
    /// This compute is the moment the upstream is dropped (air gap reached).
    pub drop_upstream: bool,
    /// Air gap is asked for and the upstream is still held (`d8_registry_air_gap_transition_held`).
    pub air_gap_held: bool,
    /// The upstream in effect, to record in `status.effectiveUpstream` (addresses only).
    pub effective: Option<EffectiveUpstream>,
    /// What the references point at, keyed as referenced; persisted before anything else.
    pub credentials: BTreeMap<String, Credentials>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Ep {
    scheme: Scheme,
    host: String,
    path: Option<String>,
    ca: Option<String>,
    auth: Option<Credentials>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Up {
    endpoint: Ep,
    mirrors: Vec<Ep>,
}

fn resolve_upstream(upstream: &Upstream<InlineAuth>, field: &str) -> Result<Up, Error> {
    let endpoint = Ep {
        scheme: upstream.scheme,
        host: upstream.host.clone(),
        path: upstream.path.clone(),
        ca: upstream.ca.clone(),
        auth: credentials(upstream.auth.as_ref(), &format!("{field}.auth"))?,
    };
    let mirrors = upstream
        .mirrors
        .iter()
        .enumerate()
        .map(|(j, m)| {
            Ok(Ep {
                scheme: m.scheme,
                host: m.host.clone(),
                path: m.path.clone(),
                ca: m.ca.clone(),
                auth: credentials(m.auth.as_ref(), &format!("{field}.mirrors[{j}].auth"))?,
            })
        })
        .collect::<Result<_, Error>>()?;
    Ok(Up { endpoint, mirrors })
}

/// The key of mirror `index` of the endpoint keyed `base`.
pub fn mirror_key(base: &str, index: usize) -> String {
    format!("{base}-mirror-{index}")
}

/// The key of a route's credentials: `route-<match>`, lowercased, `:` spelled `_` (a Secret key
/// allows neither upper case collisions nor colons; `_` never occurs in a host).
pub fn route_key(match_host: &str) -> String {
    format!(
        "route-{}",
        match_host.trim().to_ascii_lowercase().replace(':', "_")
    )
}

fn held(effective: &EffectiveUpstream, persisted: &BTreeMap<String, Credentials>) -> Option<Up> {
    let host = effective.host.clone().filter(|h| !h.is_empty())?;
    Some(Up {
        endpoint: Ep {
            scheme: effective.scheme.unwrap_or_default(),
            host,
            path: effective.path.clone(),
            ca: effective.ca.clone(),
            auth: persisted.get(AUTH_KEY_UPSTREAM).cloned(),
        },
        mirrors: effective
            .mirrors
            .iter()
            .enumerate()
            .map(|(j, m)| Ep {
                scheme: m.scheme.unwrap_or_default(),
                host: m.host.clone(),
                path: m.path.clone(),
                ca: m.ca.clone(),
                auth: persisted.get(&mirror_key(AUTH_KEY_UPSTREAM, j)).cloned(),
            })
            .collect(),
    })
}

/// The addresses of an upstream, as recorded in `status.effectiveUpstream`.
fn addresses(up: &Up) -> EffectiveUpstream {
    EffectiveUpstream {
        scheme: Some(up.endpoint.scheme),
        host: Some(up.endpoint.host.clone()),
        path: up.endpoint.path.clone(),
        ca: up.endpoint.ca.clone(),
        mirrors: up
            .mirrors
            .iter()
            .map(|m| EffectiveMirror {
                scheme: Some(m.scheme),
                host: m.host.clone(),
                path: m.path.clone(),
                ca: m.ca.clone(),
            })
            .collect(),
    }
}

/// The addresses of the configured primary upstream (what a probe or a comparison looks at).
pub fn effective_of(upstream: &Upstream<InlineAuth>) -> EffectiveUpstream {
    EffectiveUpstream {
        scheme: Some(upstream.scheme),
        host: Some(upstream.host.clone()),
        path: upstream.path.clone(),
        ca: upstream.ca.clone(),
        mirrors: upstream
            .mirrors
            .iter()
            .map(|m| EffectiveMirror {
                scheme: Some(m.scheme),
                host: m.host.clone(),
                path: m.path.clone(),
                ca: m.ca.clone(),
            })
            .collect(),
    }
}

/// Collects credentials under keys and hands out references.
#[derive(Default)]
struct Refs {
    credentials: BTreeMap<String, Credentials>,
}

impl Refs {
    fn reference(&mut self, auth: &Option<Credentials>, key: &str) -> Option<SecretRefAuth> {
        let auth = auth.as_ref()?;
        self.credentials.insert(key.to_owned(), auth.clone());
        Some(SecretRefAuth::to(RESOLVED_AUTH_SECRET, key))
    }

    /// Mirrors keyed on their own; with `share`, a mirror with its endpoint's credentials
    /// reuses its key (the replicas of one store).
    fn mirrors(&mut self, up: &Up, key: &str, share: bool) -> Vec<Mirror<SecretRefAuth>> {
        up.mirrors
            .iter()
            .enumerate()
            .map(|(j, m)| {
                let mirror_key = if share && m.auth == up.endpoint.auth {
                    key.to_owned()
                } else {
                    mirror_key(key, j)
                };
                Mirror {
                    scheme: m.scheme,
                    host: m.host.clone(),
                    path: m.path.clone(),
                    ca: m.ca.clone(),
                    auth: self.reference(&m.auth, &mirror_key),
                }
            })
            .collect()
    }

    fn backend(&mut self, name: BackendName, up: &Up, key: &str, share: bool) -> Backend {
        Backend {
            name,
            scheme: up.endpoint.scheme,
            host: up.endpoint.host.clone(),
            path: up.endpoint.path.clone(),
            ca: up.endpoint.ca.clone(),
            auth: self.reference(&up.endpoint.auth, key),
            mirrors: self.mirrors(up, key, share),
        }
    }

    fn upstream(&mut self, up: &Up) -> Upstream<SecretRefAuth> {
        Upstream {
            scheme: up.endpoint.scheme,
            host: up.endpoint.host.clone(),
            path: up.endpoint.path.clone(),
            ca: up.endpoint.ca.clone(),
            auth: self.reference(&up.endpoint.auth, AUTH_KEY_UPSTREAM),
            mirrors: self.mirrors(up, AUTH_KEY_UPSTREAM, false),
        }
    }

    fn route(&mut self, match_host: &str, up: &Up) -> Route {
        let key = route_key(match_host);
        Route {
            match_: match_host.to_owned(),
            scheme: up.endpoint.scheme,
            host: up.endpoint.host.clone(),
            path: up.endpoint.path.clone(),
            ca: up.endpoint.ca.clone(),
            auth: self.reference(&up.endpoint.auth, &key),
            mirrors: self.mirrors(up, &key, false),
        }
    }
}

fn storage_backend(access: &StorageAccess) -> Option<Up> {
    let mut replicas = access.replicas.clone();
    replicas.sort();
    replicas.dedup();
    let first = access
        .leader
        .as_ref()
        .and_then(|leader| replicas.iter().position(|(node, _)| node == leader))
        .unwrap_or(0);
    if replicas.is_empty() {
        return None;
    }
    let endpoint = |address: &str| Ep {
        scheme: access.scheme,
        host: address.to_owned(),
        path: Some(SYSTEM_PATH.to_owned()),
        ca: access.ca.clone(),
        auth: access.credentials.clone(),
    };
    let leader = replicas.remove(first);
    Some(Up {
        endpoint: endpoint(&leader.1),
        mirrors: replicas.iter().map(|(_, a)| endpoint(a)).collect(),
    })
}

/// Computes the desired layout. An error means the configuration cannot be laid out (an
/// unreadable credential); the caller reports it in `Valid` and keeps what exists.
pub fn compute(inputs: &Inputs) -> Result<Desired, Error> {
    let config = &inputs.config;
    if config.mode == RegistryMode::Unmanaged {
        return Ok(Desired::default());
    }
    let configured = config
        .primary
        .as_ref()
        .and_then(|p| p.upstream.as_ref())
        .map(|u| resolve_upstream(u, "spec.primary.upstream"))
        .transpose()?;
    let routes = inputs
        .routes
        .iter()
        .map(|r| {
            Ok((
                r.match_host.clone(),
                resolve_upstream(&r.upstream, &format!("route {}", r.match_host))?,
            ))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let previous = inputs
        .effective
        .as_ref()
        .and_then(|e| held(e, &inputs.persisted));
    let effective = match (&configured, inputs.probe_failed) {
        (Some(configured), false) => Some(configured.clone()),
        _ => previous,
    };
    let cache = config.storage.as_ref().is_some_and(|s| s.cache);
    let mut refs = Refs::default();
    let node_routes: Vec<Route> = routes
        .iter()
        .map(|(matched, up)| refs.route(matched, up))
        .collect();
    let nodes = |backends: Vec<Backend>, cache: bool| -> BTreeMap<String, RegistryNodeSpec> {
        inputs
            .nodes
            .iter()
            .map(|node| {
                let spec = RegistryNodeSpec {
                    cache: Some(cache),
                    backends: backends.clone(),
                    additional_routes: node_routes.clone(),
                };
                (node.clone(), spec)
            })
            .collect()
    };

    if !cache {
        let backends = effective
            .iter()
            .map(|up| refs.backend(BackendName::Upstream, up, AUTH_KEY_UPSTREAM, false))
            .collect();
        let nodes = nodes(backends, false);
        return Ok(Desired {
            storage: None,
            nodes,
            drop_upstream: false,
            air_gap_held: false,
            effective: effective.as_ref().map(addresses),
            credentials: refs.credentials,
        });
    }

    let want_air_gap = configured.is_none();
    let drop_upstream = want_air_gap && inputs.leader_full && effective.is_some();
    let held = if want_air_gap && inputs.leader_full {
        None
    } else {
        effective
    };
    let storage_config = config.storage.clone().unwrap_or_default();
    let gc = storage_config
        .garbage_collection
        .clone()
        .unwrap_or_default();
    let storage = RegistryStorageSpec {
        upstream: held.as_ref().map(|up| refs.upstream(up)),
        source: storage_config.source.clone(),
        store: Some(Store {
            path: Some(STORE_PATH.to_owned()),
            size: storage_config.size.clone(),
        }),
        publish: Some(true),
        air_gap_requested: Some(want_air_gap),
        auth: None,
        garbage_collection: Some(GarbageCollection {
            enabled: Some(gc.enabled.unwrap_or(true)),
            schedule: Some(
                gc.schedule
                    .or_else(|| inputs.gc_schedule_fallback.clone())
                    .unwrap_or_else(|| DEFAULT_GC_SCHEDULE.to_owned()),
            ),
        }),
        need_sync: Some(held.is_some() && !inputs.leader_full),
    };
    let mut backends = Vec::new();
    let storage_up = storage_backend(&inputs.storage);
    if let Some(up) = &storage_up {
        backends.push(refs.backend(BackendName::Storage, up, AUTH_KEY_STORAGE, true));
    }
    if let Some(up) = &held {
        backends.push(refs.backend(BackendName::Upstream, up, AUTH_KEY_UPSTREAM, false));
    }
    let nodes = nodes(backends, storage_up.is_some());
    Ok(Desired {
        storage: Some(storage),
        nodes,
        drop_upstream,
        air_gap_held: want_air_gap && !inputs.leader_full && held.is_some(),
        effective: held.as_ref().map(addresses),
        credentials: refs.credentials,
    })
}

#[cfg(test)]
mod tests;
