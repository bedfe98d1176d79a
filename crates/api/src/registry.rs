//! The registry module's kinds — `RegistryConfig` (`rcfg`), `RegistryUpstream` (`rup`),
//! `RegistryNode` (`rnode`), `RegistryStorage` (`rstor`) — and the typed settings of the
//! `registry` ModuleConfig ([`RegistrySettings`]).
//!
//! RegistryNode and RegistryStorage never carry credentials: every `auth` there is a
//! `secretRef` into `d8-system/registry-resolved-auth`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use crate::conditions::RegistryCondition;

pub mod schedule;
use crate::macros::string_enum;
use crate::module_source::Scheme;
pub use schedule::{GcSchedule, ScheduleError};

/// Pattern of `storage.size`.
pub const SIZE_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?(E|P|T|G|M|k|Ei|Pi|Ti|Gi|Mi|Ki)?$";
/// Pattern of `RegistryUpstream.spec.match`: DNS labels and an optional port.
pub const MATCH_PATTERN: &str = r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]{1,5})?$";
/// Pattern of the garbage collection schedule: five whitespace-separated fields.
pub const SCHEDULE_PATTERN: &str = r"^\s*\S+\s+\S+\s+\S+\s+\S+\s+\S+\s*$";
/// Name of the singleton RegistryConfig and RegistryStorage.
pub const SINGLETON: &str = "registry";
/// The Secret (in `d8-system`) every `secretRef` points into.
pub const RESOLVED_AUTH_SECRET: &str = "registry-resolved-auth";
/// Namespace of the registry's Secrets.
pub const NAMESPACE: &str = "d8-system";

/// RegistryConfig rule: a Managed registry needs an upstream or the cache.
pub const MSG_RCFG_NEEDS_SOURCE: &str = "A Managed registry needs a source of images: set primary.upstream, or enable storage.cache for an air-gapped cluster.";
/// RegistryConfig rule: air-gap needs `storage.source`.
pub const MSG_RCFG_NEEDS_STORAGE_SOURCE: &str = "storage.source is required when primary.upstream is not set: in air-gap there is no upstream to fall back on, so cache completeness must be decidable.";

// ----------------------------------------------------------------------------------------------
// Shared shapes

string_enum! {
    /// Whether the registry module manages the pull path.
    #[derive(Default)]
    pub enum RegistryMode {
        /// The module owns the pull path: the agent on every node, the cache optionally.
        Managed = "Managed",
        /// The module creates and writes nothing.
        #[default]
        Unmanaged = "Unmanaged",
    }
}

/// Inline credentials (RegistryConfig, RegistryUpstream). **Sensitive.**
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InlineAuth {
    /// Username for basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Password for basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Pre-encoded `base64("username:password")`; wins over `username` and `password`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
}

impl std::fmt::Debug for InlineAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Credentials never reach a log line.
        f.debug_struct("InlineAuth")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("auth", &self.auth.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Credentials named rather than carried: a key of a Secret in `d8-system`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRefAuth {
    /// The Secret and key holding the credentials. Deckhouse's schema does not require it: an
    /// `auth` without one names no credentials (anonymous access).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyRef>,
}

impl SecretRefAuth {
    /// A reference to `key` of Secret `name`.
    pub fn to(name: &str, key: &str) -> Self {
        Self {
            secret_ref: Some(SecretKeyRef {
                name: name.to_owned(),
                key: key.to_owned(),
            }),
        }
    }
}

/// A key of a Secret in `d8-system`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretKeyRef {
    /// Secret name (normally `registry-resolved-auth`).
    pub name: String,
    /// Key inside the Secret, e.g. `upstream`, `storage`, `route-<match>`.
    pub key: String,
}

/// A mirror: another address serving the same content.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Mirror<A> {
    /// Protocol used to reach the mirror.
    #[serde(default = "Scheme::https")]
    pub scheme: Scheme,
    /// Host, optionally with a port.
    #[schemars(length(min = 1))]
    pub host: String,
    /// Repository prefix inside the mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// PEM certificate authority bundle verifying the mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Credentials of the mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<A>,
}

/// An upstream registry and its mirrors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Upstream<A> {
    /// Protocol used to reach the registry; `HTTP` only for trusted, insecure registries.
    #[serde(default = "Scheme::https")]
    pub scheme: Scheme,
    /// Registry host, optionally with a port, e.g. `registry.deckhouse.io`.
    #[schemars(length(min = 1))]
    pub host: String,
    /// Repository prefix inside the registry, e.g. `/deckhouse/ee`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// PEM certificate authority bundle; the system trust store when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Credentials of the registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<A>,
    /// Addresses serving the same content, for failover.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror<A>>,
}

impl<A> Upstream<A> {
    /// `path` as a prefix to put after the host: `/deckhouse/ee` for `deckhouse/ee/`, empty
    /// when unset or `/`.
    pub fn path_prefix(&self) -> String {
        self.path
            .as_deref()
            .map(|p| format!("/{}", p.trim_matches('/')))
            .filter(|p| p != "/")
            .unwrap_or_default()
    }
}

/// The image set the cache must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageSource {
    /// Name of the image set, e.g. the bundle pushed with `d8 mirror push`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_ref: Option<String>,
    /// Number of distinct digests in the set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub expected_digests: Option<i32>,
}

/// When the cache reclaims disk.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GarbageCollection {
    /// Whether the cache reclaims its disk at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Five-field cron expression in the replicas' time zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

fn conditions_by_type(generator: &mut SchemaGenerator) -> Schema {
    crate::schema::map_by_type::<RegistryCondition>(generator)
}

fn list_map<T: JsonSchema>(generator: &mut SchemaGenerator, key: &str) -> Schema {
    let items = generator.subschema_for::<T>();
    schemars::json_schema!({
        "type": "array",
        "items": items,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key],
    })
}

// ----------------------------------------------------------------------------------------------
// RegistryConfig

/// The resolved registry configuration of the cluster (singleton `registry`).
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "RegistryConfig",
    shortname = "rcfg",
    status = "RegistryConfigStatus",
    doc = "The resolved registry configuration of the cluster, rendered from ModuleConfig/registry. An administrator may edit it while Deckhouse is down; the controller and the storage syncer apply it live. Only the object named `registry` is used.",
    printcolumn(
        name = "Mode",
        type_ = "string",
        json_path = ".spec.mode",
        description = "Whether the module manages the image pull path."
    ),
    printcolumn(
        name = "Cache",
        type_ = "boolean",
        json_path = ".spec.storage.cache",
        description = "Whether pulls go through the in-cluster cache."
    ),
    printcolumn(
        name = "Upstream",
        type_ = "string",
        json_path = ".spec.primary.upstream.host",
        description = "Primary upstream host. Empty means air-gap."
    ),
    printcolumn(
        name = "UpstreamValid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"UpstreamValid\")].status",
        description = "Result of the preflight probe of the primary upstream."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation."
    )
)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.mode) && self.mode == 'Unmanaged' || (has(self.primary) && has(self.primary.upstream)) || (has(self.storage) && has(self.storage.cache) && self.storage.cache)", "message": MSG_RCFG_NEEDS_SOURCE},
    {"rule": "has(self.mode) && self.mode == 'Unmanaged' || (has(self.primary) && has(self.primary.upstream)) || (has(self.storage) && has(self.storage.source))", "message": MSG_RCFG_NEEDS_STORAGE_SOURCE},
]))]
pub struct RegistryConfigSpec {
    /// `Managed`: the module owns the pull path. `Unmanaged`: nothing is created.
    #[serde(default = "RegistryConfigSpec::default_mode")]
    pub mode: RegistryMode,
    /// The single authoritative source of Deckhouse images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<Primary<InlineAuth>>,
    /// The in-cluster cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageConfig>,
}

impl RegistryConfigSpec {
    fn default_mode() -> RegistryMode {
        RegistryMode::Managed
    }
}

/// The primary source of images.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Primary<A> {
    /// The registry to pull from; absent means an air-gapped cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Upstream<A>>,
}

/// The in-cluster cache of a RegistryConfig.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageConfig {
    /// Whether pulls go through the cache on the masters. With an upstream it is a pass-through
    /// cache; without one, the cluster is air-gapped and the cache is filled by `d8 mirror push`.
    #[serde(default)]
    pub cache: bool,
    /// When the cache reclaims the disk of releases the cluster moved past.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garbage_collection: Option<GarbageCollection>,
    /// Budget of each master's store, e.g. `50Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?(E|P|T|G|M|k|Ei|Pi|Ti|Gi|Mi|Ki)?$"))]
    pub size: Option<String>,
    /// The image set the cache must hold; required in air-gap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<StorageSource>,
}

/// Observed state of a RegistryConfig.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryConfigStatus {
    /// Generation of the spec the controller last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The upstream in effect: the last one that passed the preflight probe, or the one held
    /// while air-gap waits for the cache. Addresses only, never credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_upstream: Option<EffectiveUpstream>,
    /// `Valid`, `UpstreamValid`, `StorageConverged`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_by_type")]
    pub conditions: Vec<RegistryCondition>,
}

/// The address of the upstream in effect.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EffectiveUpstream {
    /// Protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<Scheme>,
    /// Host, optionally with a port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Repository prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// PEM certificate authority bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Mirrors of the upstream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<EffectiveMirror>,
}

/// The address of a mirror in effect.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EffectiveMirror {
    /// Protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<Scheme>,
    /// Host, optionally with a port.
    pub host: String,
    /// Repository prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// PEM certificate authority bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
}

string_enum! {
    /// Condition types of a RegistryConfig.
    pub enum RegistryConfigCondition {
        /// The resolved configuration is coherent.
        Valid = "Valid",
        /// The preflight probe of the primary upstream passed.
        UpstreamValid = "UpstreamValid",
        /// The storage reached the configured state.
        StorageConverged = "StorageConverged",
    }
}

string_enum! {
    /// Reasons of `UpstreamValid=False`.
    pub enum UpstreamProbeReason {
        /// The upstream could not be reached.
        Unreachable = "Unreachable",
        /// The credentials were refused.
        AuthFailed = "AuthFailed",
        /// The sentinel content is missing.
        SentinelMissing = "SentinelMissing",
        /// The probe failed otherwise.
        ProbeFailed = "ProbeFailed",
    }
}

// ----------------------------------------------------------------------------------------------
// RegistryUpstream

/// An additional registry routed on every node.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "RegistryUpstream",
    shortname = "rup",
    status = "RegistryUpstreamStatus",
    doc = "An additional registry the nodes route to, on top of the primary one. Pulls through it are always transit, never cached. A `match` already claimed, or one shadowing the primary path, is rejected (see status.conflict).",
    printcolumn(
        name = "Match",
        type_ = "string",
        json_path = ".spec.match",
        description = "The registry host intercepted on the nodes."
    ),
    printcolumn(
        name = "Upstream",
        type_ = "string",
        json_path = ".spec.upstream.host",
        description = "Where the intercepted pulls are sent."
    ),
    printcolumn(
        name = "Accepted",
        type_ = "boolean",
        json_path = ".status.accepted",
        description = "Whether the controller compiled this upstream into the per-node layout."
    ),
    printcolumn(
        name = "Conflict",
        type_ = "string",
        json_path = ".status.conflict",
        priority = 1,
        description = "Why the object was rejected."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation."
    )
)]
pub struct RegistryUpstreamSpec {
    /// The registry host intercepted on the nodes (matched case-insensitively).
    #[serde(rename = "match")]
    #[schemars(
        length(min = 1),
        regex(
            pattern = r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]{1,5})?$"
        )
    )]
    pub match_: String,
    /// Where the intercepted pulls are sent.
    pub upstream: Upstream<InlineAuth>,
}

/// Observed state of a RegistryUpstream.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryUpstreamStatus {
    /// Generation of the spec the controller last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Whether the upstream is part of the per-node layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
    /// Why the object was rejected; empty when accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
    /// `Accepted`, with a reason from [`UpstreamArbitrationReason`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_by_type")]
    pub conditions: Vec<RegistryCondition>,
}

/// Condition type of a RegistryUpstream.
pub const CONDITION_ACCEPTED: &str = "Accepted";

string_enum! {
    /// Reasons of the `Accepted` condition of a RegistryUpstream.
    pub enum UpstreamArbitrationReason {
        /// Compiled into every node's routes.
        Accepted = "Accepted",
        /// Empty match or empty host.
        InvalidSpec = "InvalidSpec",
        /// The match is the in-cluster host, the primary host or a primary mirror.
        ShadowsPrimary = "ShadowsPrimary",
        /// An older object already claims the match.
        MatchConflict = "MatchConflict",
    }
}

// ----------------------------------------------------------------------------------------------
// RegistryNode

/// The registry layout of one node, compiled for its agent.
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "RegistryNode",
    shortname = "rnode",
    status = "RegistryNodeStatus",
    doc = "The complete registry layout of one node, compiled by the registry controller for the node's agent; named after the node. Credentials are named (auth.secretRef), never carried. Status is written by the agent only.",
    printcolumn(
        name = "Cache",
        type_ = "boolean",
        json_path = ".spec.cache",
        description = "Whether the agent routes pulls through the in-cluster cache."
    ),
    printcolumn(
        name = "Reconciled",
        type_ = "boolean",
        json_path = ".status.reconciled",
        description = "Whether the agent has applied the spec it currently sees."
    ),
    printcolumn(
        name = "ProxyListening",
        type_ = "boolean",
        json_path = ".status.proxyListening",
        description = "Whether the agent is serving the registry endpoint."
    ),
    printcolumn(
        name = "ActiveBackends",
        type_ = "string",
        json_path = ".status.activeBackends",
        priority = 1,
        description = "The backends the agent is currently able to use."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct RegistryNodeSpec {
    /// `true` sends the agent to the in-cluster storage, `false` straight to the upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<bool>,
    /// Sources of the primary image set, in priority order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "backends_schema")]
    pub backends: Vec<Backend>,
    /// The accepted RegistryUpstreams, compiled by the controller. Always transit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "routes_schema")]
    pub additional_routes: Vec<Route>,
}

fn backends_schema(generator: &mut SchemaGenerator) -> Schema {
    list_map::<Backend>(generator, "name")
}

fn routes_schema(generator: &mut SchemaGenerator) -> Schema {
    list_map::<Route>(generator, "match")
}

string_enum! {
    /// Role of a RegistryNode backend.
    pub enum BackendName {
        /// The in-cluster cache.
        Storage = "Storage",
        /// The primary upstream.
        Upstream = "Upstream",
    }
}

/// A source of the primary image set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Backend {
    /// The backend's role.
    pub name: BackendName,
    /// Protocol used to reach the backend.
    #[serde(default = "Scheme::https")]
    pub scheme: Scheme,
    /// Host, optionally with a port.
    #[schemars(length(min = 1))]
    pub host: String,
    /// Repository prefix inside the backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// PEM certificate authority bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Where the credentials are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<SecretRefAuth>,
    /// Addresses serving the same content, tried on failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror<SecretRefAuth>>,
}

/// An additional route of a node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Route {
    /// The registry host intercepted on this node.
    #[serde(rename = "match")]
    #[schemars(length(min = 1))]
    pub match_: String,
    /// Protocol used to reach the upstream.
    #[serde(default = "Scheme::https")]
    pub scheme: Scheme,
    /// Host, optionally with a port.
    #[schemars(length(min = 1))]
    pub host: String,
    /// Repository prefix inside the upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// PEM certificate authority bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Where the credentials are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<SecretRefAuth>,
    /// Addresses serving the same content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror<SecretRefAuth>>,
}

/// Observed state of a RegistryNode, written by the agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryNodeStatus {
    /// Generation of the spec the agent last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Whether the agent applied the spec it sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciled: Option<bool>,
    /// Whether the agent serves the registry endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_listening: Option<bool>,
    /// Backends the agent can currently use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_backends: Vec<String>,
    /// Cache data left on this node while no cache is configured (re-measured every 30 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_storage_data_bytes: Option<i64>,
    /// `Reconciled`; reason `AppliedFromCache` when the layout came from the on-disk copy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_by_type")]
    pub conditions: Vec<RegistryCondition>,
}

/// Condition type of a RegistryNode.
pub const CONDITION_RECONCILED: &str = "Reconciled";
/// Reason of `Reconciled` when the layout came from the agent's on-disk copy.
pub const REASON_APPLIED_FROM_CACHE: &str = "AppliedFromCache";

// ----------------------------------------------------------------------------------------------
// RegistryStorage

/// How the in-cluster registry storage operates (singleton `registry`).
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "RegistryStorage",
    shortname = "rstor",
    status = "RegistryStorageStatus",
    doc = "How the in-cluster registry storage operates, written by the registry controller and applied live by the syncers; and the state it is in. Only the object named `registry` is used.",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Fill state of the storage."
    ),
    printcolumn(
        name = "Leader",
        type_ = "string",
        json_path = ".status.leader",
        description = "The node holding the storage leader lease."
    ),
    printcolumn(
        name = "Authoritative",
        type_ = "boolean",
        json_path = ".status.authoritative",
        description = "Whether the cache is the only source of images."
    ),
    printcolumn(
        name = "SafeToDropUpstream",
        type_ = "boolean",
        json_path = ".status.safeToDropUpstream",
        description = "Whether the leader holds the expected set, which gates going air-gap."
    ),
    printcolumn(
        name = "AllReplicasFull",
        type_ = "boolean",
        json_path = ".status.allReplicasFull",
        priority = 1,
        description = "Whether every replica holds the expected set."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct RegistryStorageSpec {
    /// The primary upstream: set means a pass-through cache, absent means authoritative
    /// (air-gap). Removed only once the leader is full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Upstream<SecretRefAuth>>,
    /// The image set that must end up in the storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<StorageSource>,
    /// Where `distribution` keeps its blobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<Store>,
    /// Expose the authenticated write endpoint for `d8 mirror push`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<bool>,
    /// The configuration asks for air-gap, whether or not the upstream is dropped yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub air_gap_requested: Option<bool>,
    /// Bearer token guarding the storage. **Sensitive.**
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    /// When and whether replicas reclaim disk (resolved schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garbage_collection: Option<GarbageCollection>,
    /// A fill or replication task is requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub need_sync: Option<bool>,
}

/// Where `distribution` keeps its blobs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Store {
    /// Path on the node (a module constant, `/opt/deckhouse/registry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Budget of each replica's store; unset means only the node reserve applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?(E|P|T|G|M|k|Ei|Pi|Ti|Gi|Mi|Ki)?$"))]
    pub size: Option<String>,
}

/// Observed state of a RegistryStorage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryStorageStatus {
    /// Generation of the spec the controller last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The upstream is dropped and the cache is the only source of images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authoritative: Option<bool>,
    /// Summary of the fill state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<StoragePhase>,
    /// Progress of the current fill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<Fill>,
    /// The leader holds the expected set: the gate for going air-gap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_to_drop_upstream: Option<bool>,
    /// Every replica holds the expected set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_replicas_full: Option<bool>,
    /// Node holding the storage leader lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// Per-replica state, each written by its own syncer (the only place completeness is
    /// reported).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "replicas_schema")]
    pub replicas: Vec<Replica>,
    /// Detailed state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_by_type")]
    pub conditions: Vec<RegistryCondition>,
}

fn replicas_schema(generator: &mut SchemaGenerator) -> Schema {
    list_map::<Replica>(generator, "node")
}

string_enum! {
    /// Fill phase of the storage.
    pub enum StoragePhase {
        /// No task runs.
        Idle = "Idle",
        /// The leader is being filled.
        Filling = "Filling",
        /// The contents are being verified.
        Verifying = "Verifying",
        /// The leader holds the expected set.
        Ready = "Ready",
        /// A task failed; the upstream is not dropped.
        Failed = "Failed",
    }
}

/// Progress of a fill.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Fill {
    /// Digests written so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filled: Option<i32>,
    /// Digests expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i32>,
}

string_enum! {
    /// Role of a storage replica.
    pub enum ReplicaRole {
        /// Filled from the upstream or by push; hands out replication.
        Leader = "Leader",
        /// Filled from the leader.
        Follower = "Follower",
    }
}

/// State of one storage replica.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Replica {
    /// Node the replica runs on.
    pub node: String,
    /// Role in replication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<ReplicaRole>,
    /// Holds the expected set (from what the syncer wrote, never from probing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full: Option<bool>,
    /// Digests of the set confirmed present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_digests: Option<i32>,
    /// Distinct digests held altogether.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_digests: Option<i32>,
    /// Size of the set, as computed by the replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_digests: Option<i32>,
    /// Where the replica answers, `host:port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Replica this one is filled from; empty for the leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When the replica last reclaimed disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collected_at: Option<Time>,
    /// Why the last reclaim did not finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection_error: Option<String>,
    /// Why the last fill or verification failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Fingerprint of the set the replica was last found full against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_set: Option<String>,
    /// Disk use of the replica's store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreUsage>,
}

/// Disk use of a replica's store (rounded to 16 MiB).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreUsage {
    /// Bytes taken by blobs and uploads in progress.
    pub used_bytes: i64,
    /// `storage.size`; absent when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_bytes: Option<i64>,
    /// Bytes left free for the node.
    pub reserve_bytes: i64,
    /// Free bytes on the filesystem.
    pub filesystem_free_bytes: i64,
    /// Size of the filesystem.
    pub filesystem_capacity_bytes: i64,
    /// False while writes are refused (reads never are).
    pub writable: bool,
    /// The limit writes are refused on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<StoreLimit>,
}

string_enum! {
    /// Why a store refuses writes.
    pub enum StoreLimit {
        /// At `storage.size`.
        BudgetExhausted = "BudgetExhausted",
        /// The filesystem is down to the node reserve.
        ReserveExhausted = "ReserveExhausted",
    }
}

// ----------------------------------------------------------------------------------------------
// ModuleConfig `registry` settings

/// Settings of the `registry` ModuleConfig (`spec.settings`), version 1.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrySettings {
    /// `Unmanaged` (default): nothing is created. `Managed`: the agent on every node, the cache
    /// optionally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<RegistryMode>,
    /// The single authoritative source of Deckhouse images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<Primary<SettingsAuth>>,
    /// The in-cluster cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageConfig>,
    /// CIDRs allowed to reach the push endpoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub whitelist_source_ranges: Vec<String>,
    /// Ingress class of the push endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_class: Option<String>,
    /// Certificate of the push endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https: Option<serde_json::Value>,
}

/// Credentials in the `registry` settings: `license` xor `username`/`password`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SettingsAuth {
    /// The Deckhouse license key (username `license-token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// Username for basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Password for basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

impl std::fmt::Debug for SettingsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettingsAuth")
            .field("license", &self.license.as_ref().map(|_| "<redacted>"))
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}
