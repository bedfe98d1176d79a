//! The agent's request routing: a pure function of the request's `ns`, its repository, the
//! node's layout and the agent's own address. First match wins:
//!
//! 1. `ns` is the agent itself → refused (a loop); no layout → refused.
//! 2. `ns` empty or the in-cluster primary name → primary. Repository `system/deckhouse[/…]` is
//!    rewritten onto every backend's path, backends in order with their mirrors (`Primary`);
//!    any other repository goes to the Upstream backend untouched (`UpstreamSibling`).
//! 3. `ns` is an accepted route's `match` → the route endpoint, then its mirrors (`Route`).
//! 4. `ns` is the host of a primary backend or mirror and the repository lies under that
//!    endpoint's non-empty path → primary again (`Primary`), so the cache still serves images
//!    named by the upstream's own address.
//! 5. `ns` is the host of any configured endpoint with credentials → that host, path untouched,
//!    with those credentials (`Known`).
//! 6. Anything else → `https://<ns>` untouched, without our credentials (`PassThrough`).

use std::borrow::Cow;

use crate::layout::{Backend, Credentials, Endpoint, Layout, Scheme};

/// The name images of the platform are referenced by; it is never dialled.
pub const PRIMARY_HOST: &str = "registry.d8-system.svc:5001";
/// The repository prefix of platform images under [`PRIMARY_HOST`].
pub const PRIMARY_REPOSITORY: &str = "system/deckhouse";

/// What the agent was asked, as parsed from the request.
#[derive(Clone, Copy, Debug)]
pub struct Request<'r> {
    /// The decoded `ns` query parameter: the registry the client meant. `None` or empty when the
    /// client talked to the agent directly.
    pub ns: Option<&'r str>,
    /// The repository name, e.g. `system/deckhouse/install`.
    pub repository: &'r str,
    /// What follows the repository in the path, e.g. `/manifests/v1.2.3` or `/blobs/sha256:…`.
    pub remainder: &'r str,
}

/// Which routing rule matched; a metric label (`kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Platform images, served by the backends in order.
    Primary,
    /// Another repository of the primary registry, served by the Upstream backend.
    UpstreamSibling,
    /// An accepted RegistryUpstream.
    Route,
    /// A configured host with credentials, addressed directly.
    Known,
    /// Anything else: forwarded untouched with the client's own credentials.
    PassThrough,
}

impl Kind {
    /// The label value used in metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Primary => "Primary",
            Kind::UpstreamSibling => "UpstreamSibling",
            Kind::Route => "Route",
            Kind::Known => "Known",
            Kind::PassThrough => "PassThrough",
        }
    }
}

/// Why a request cannot be routed; the agent answers 502.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unroutable {
    /// `ns` names the agent itself: forwarding would loop.
    #[error("the request names this agent ({0}) as its registry; forwarding it would loop")]
    Loop(String),
    /// The agent has no layout yet.
    #[error("no registry layout is configured on this node")]
    NoLayout,
    /// A repository of the primary registry other than the platform's, with no upstream (air gap).
    #[error("repository {0} is not held by the cluster registry and no upstream is configured")]
    NoUpstream(String),
    /// The layout routes the request to no target.
    #[error("no registry is configured for repository {0}")]
    NoTarget(String),
}

/// One place to try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// `host[:port]`.
    pub host: Cow<'a, str>,
    /// The full request path, `/v2/<repository><remainder>`.
    pub path: String,
    /// A CA to trust besides the system roots.
    pub ca: Option<&'a str>,
    /// Our credentials for this target; `None` for PassThrough and anonymous endpoints.
    pub credentials: Option<&'a Credentials>,
    /// The repository on the target, for the token scope (`repository:<name>:pull`).
    pub repository: String,
}

impl Target<'_> {
    /// `scheme://host/v2/…`.
    pub fn url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme.as_url_scheme(),
            self.host,
            self.path
        )
    }
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution<'a> {
    /// The rule that matched.
    pub kind: Kind,
    /// Targets, tried in order.
    pub targets: Vec<Target<'a>>,
}

impl Resolution<'_> {
    /// Whether the client's own `Authorization` is forwarded (PassThrough only).
    pub fn forwards_client_authorization(&self) -> bool {
        self.kind == Kind::PassThrough
    }
}

/// Routes one request. `own_address` is the agent's advertised `host:port`.
pub fn resolve<'a>(
    request: &Request<'_>,
    layout: Option<&'a Layout>,
    own_address: &str,
) -> Result<Resolution<'a>, Unroutable> {
    let ns = request.ns.unwrap_or("").trim();
    if !ns.is_empty() && ns.eq_ignore_ascii_case(own_address) {
        return Err(Unroutable::Loop(own_address.to_owned()));
    }
    let layout = layout.ok_or(Unroutable::NoLayout)?;
    let repository = request.repository;

    if ns.is_empty() || ns.eq_ignore_ascii_case(PRIMARY_HOST) {
        if let Some(rest) = strip_path_prefix(repository, PRIMARY_REPOSITORY) {
            return primary(layout, rest, request);
        }
        let upstream = layout
            .upstream()
            .ok_or_else(|| Unroutable::NoUpstream(repository.to_owned()))?;
        let target = target(&upstream.endpoint, repository, request.remainder);
        return Ok(Resolution {
            kind: Kind::UpstreamSibling,
            targets: vec![target],
        });
    }

    if let Some(route) = layout
        .additional_routes
        .iter()
        .find(|r| r.match_host.eq_ignore_ascii_case(ns))
    {
        let targets = std::iter::once(&route.endpoint)
            .chain(&route.mirrors)
            .filter_map(|e| prefixed_target(e, repository, request.remainder))
            .collect();
        return non_empty(Kind::Route, targets, repository);
    }

    let claimed = layout
        .backends
        .iter()
        .flat_map(|b| std::iter::once(&b.endpoint).chain(&b.mirrors))
        .filter(|e| e.host.eq_ignore_ascii_case(ns))
        .find_map(|e| {
            let prefix = trim_slashes(&e.path);
            (!prefix.is_empty())
                .then(|| strip_path_prefix(repository, prefix))
                .flatten()
        });
    if let Some(rest) = claimed {
        return primary(layout, rest, request);
    }

    if let Some(known) = layout
        .endpoints()
        .find(|e| e.host.eq_ignore_ascii_case(ns) && e.auth.is_some())
    {
        let target = target(known, repository, request.remainder);
        return Ok(Resolution {
            kind: Kind::Known,
            targets: vec![target],
        });
    }

    Ok(Resolution {
        kind: Kind::PassThrough,
        targets: vec![Target {
            scheme: Scheme::Https,
            host: Cow::Owned(ns.to_owned()),
            path: format!("/v2/{repository}{}", request.remainder),
            ca: None,
            credentials: None,
            repository: repository.to_owned(),
        }],
    })
}

/// Platform images: `rest` (the repository below the platform prefix) on every backend, in
/// order, each backend followed by its mirrors.
fn primary<'a>(
    layout: &'a Layout,
    rest: &str,
    request: &Request<'_>,
) -> Result<Resolution<'a>, Unroutable> {
    let targets = layout
        .backends
        .iter()
        .flat_map(|b: &'a Backend| std::iter::once(&b.endpoint).chain(&b.mirrors))
        .filter_map(|e| prefixed_target(e, rest, request.remainder))
        .collect();
    non_empty(Kind::Primary, targets, request.repository)
}

fn non_empty<'a>(
    kind: Kind,
    targets: Vec<Target<'a>>,
    repository: &str,
) -> Result<Resolution<'a>, Unroutable> {
    if targets.is_empty() {
        return Err(Unroutable::NoTarget(repository.to_owned()));
    }
    Ok(Resolution { kind, targets })
}

/// `endpoint.path` joined with `repository`; `None` when both are empty (no repository name).
fn prefixed_target<'a>(
    endpoint: &'a Endpoint,
    repository: &str,
    remainder: &str,
) -> Option<Target<'a>> {
    let joined = join_repository(&endpoint.path, repository)?;
    Some(target(endpoint, &joined, remainder))
}

fn target<'a>(endpoint: &'a Endpoint, repository: &str, remainder: &str) -> Target<'a> {
    Target {
        scheme: endpoint.scheme,
        host: Cow::Borrowed(endpoint.host.as_str()),
        path: format!("/v2/{repository}{remainder}"),
        ca: endpoint.ca.as_deref(),
        credentials: endpoint.auth.as_ref(),
        repository: repository.to_owned(),
    }
}

fn trim_slashes(path: &str) -> &str {
    path.trim_matches('/')
}

/// `prefix` + `/` + `repository`, either side possibly empty.
fn join_repository(prefix: &str, repository: &str) -> Option<String> {
    match (trim_slashes(prefix), trim_slashes(repository)) {
        ("", "") => None,
        ("", repo) => Some(repo.to_owned()),
        (prefix, "") => Some(prefix.to_owned()),
        (prefix, repo) => Some(format!("{prefix}/{repo}")),
    }
}

/// The part of `repository` below `prefix`, segment-aware: `a/b` claims `a/b` and `a/b/c`,
/// never `a/bc`.
fn strip_path_prefix<'r>(repository: &'r str, prefix: &str) -> Option<&'r str> {
    let prefix = trim_slashes(prefix);
    let rest = repository.strip_prefix(prefix)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix('/')
    }
}

#[cfg(test)]
mod tests;
