//! The layout an agent applies: `RegistryNode.spec` with every `secretRef` already resolved to
//! credentials. It is what the agent keeps in memory and in its on-disk cache.

use serde::{Deserialize, Serialize};

/// How an endpoint is reached (`scheme` in the CRDs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scheme {
    /// Plain HTTP: only for an insecure, trusted registry.
    #[serde(rename = "HTTP")]
    Http,
    /// HTTPS (the default).
    #[default]
    #[serde(rename = "HTTPS")]
    Https,
}

impl Scheme {
    /// `http` or `https`, as in a URL.
    pub fn as_url_scheme(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// Credentials for one endpoint. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// User name.
    pub username: String,
    /// Password or license key.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// A registry endpoint: where to send requests and how to authenticate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// `HTTP` or `HTTPS`.
    #[serde(default)]
    pub scheme: Scheme,
    /// `host[:port]`.
    pub host: String,
    /// Repository prefix on that host, e.g. `/deckhouse/ee` (may be empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// PEM CA to trust in addition to the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Resolved credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Credentials>,
}

/// A mirror: same content as its endpoint, tried after it.
pub type Mirror = Endpoint;

/// Which backend (`backends[].name`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BackendName {
    /// The in-cluster cache.
    Storage,
    /// The primary upstream registry.
    Upstream,
}

/// One backend of the primary registry, with its mirrors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Backend {
    /// `Storage` or `Upstream`.
    pub name: BackendName,
    /// The backend itself.
    #[serde(flatten)]
    pub endpoint: Endpoint,
    /// Its mirrors, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
}

/// An accepted RegistryUpstream: requests whose `ns` is `match` go here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    /// The registry host this route claims (`host[:port]`, case-insensitive).
    #[serde(rename = "match")]
    pub match_host: String,
    /// Where it goes.
    #[serde(flatten)]
    pub endpoint: Endpoint,
    /// Its mirrors, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
}

/// The node's layout: backends of the primary registry in priority order, and extra routes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layout {
    /// Whether the cache is on (informational for the agent).
    #[serde(default)]
    pub cache: bool,
    /// `[Storage, Upstream]`, `[Upstream]` or `[Storage]`.
    #[serde(default)]
    pub backends: Vec<Backend>,
    /// Accepted RegistryUpstreams.
    #[serde(default)]
    pub additional_routes: Vec<Route>,
}

impl Layout {
    /// An empty layout configures nothing: the agent withdraws its containerd drop-in.
    pub fn is_empty(&self) -> bool {
        self.backends.is_empty() && self.additional_routes.is_empty()
    }

    /// The Upstream backend, if any.
    pub fn upstream(&self) -> Option<&Backend> {
        self.backends
            .iter()
            .find(|b| b.name == BackendName::Upstream)
    }

    /// Every endpoint of the layout: backends, their mirrors, routes and their mirrors.
    pub fn endpoints(&self) -> impl Iterator<Item = &Endpoint> {
        let backends = self
            .backends
            .iter()
            .flat_map(|b| std::iter::once(&b.endpoint).chain(&b.mirrors));
        let routes = self
            .additional_routes
            .iter()
            .flat_map(|r| std::iter::once(&r.endpoint).chain(&r.mirrors));
        backends.chain(routes)
    }
}
