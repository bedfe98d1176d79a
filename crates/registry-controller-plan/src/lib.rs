//! Pure decisions of the registry controller (`d8 controller`): what the `registry` ModuleConfig
//! means ([`settings`], [`legacy`]), which RegistryUpstreams take effect ([`arbitration`]), what
//! every node and the cache replicas must be given ([`layout`], including the air-gap gate), the
//! writes that converge the cluster on it ([`plan`]), when the image address is published
//! ([`image_address`]), when a Managed→Unmanaged drain may withdraw ([`drain`]), whether this
//! implementation may take over from the previous one ([`migration`]), how a preflight probe
//! answer is classified ([`probe`]), whether the cluster meets the module's requirements
//! ([`prerequisites`]), what the replicas' reports add up to
//! ([`storage_status`]), what Nodes and NodeGroups say ([`nodes`]), and when the previous
//! implementation's objects go ([`handover`]).
//!
//! Pure: no tokio, no sockets, no filesystem, no Kubernetes client. It depends on the API types
//! (`api`) and the resolved credentials type (`registry-plan`) only; the `registry-controller`
//! crate observes the cluster, calls these functions and acts on the answers.

pub mod arbitration;
pub mod drain;
mod error;
pub mod handover;
pub mod image_address;
pub mod layout;
pub mod legacy;
pub mod migration;
pub mod nodes;
pub mod plan;
pub mod prerequisites;
pub mod probe;
pub mod publish;
pub mod push;
pub mod settings;
pub mod storage_status;

pub use error::Error;

/// The in-cluster registry address every image reference names (never dialled).
pub const IN_CLUSTER_HOST: &str = "registry.d8-system.svc:5001";
/// The repository prefix of the Deckhouse image set, in the cache and in image references.
pub const SYSTEM_PATH: &str = "/system/deckhouse";
/// Where a cache replica keeps its store on the node.
pub const STORE_PATH: &str = "/opt/deckhouse/registry";
/// The image base published in ConfigMap `registry-image-address`.
pub const IMAGE_BASE: &str = "registry.d8-system.svc:5001/system/deckhouse";
/// Key of the storage read credentials in `registry-resolved-auth`.
pub const AUTH_KEY_STORAGE: &str = "storage";
/// Key of the primary upstream's credentials in `registry-resolved-auth`.
pub const AUTH_KEY_UPSTREAM: &str = "upstream";
/// ConfigMap (in `d8-system`) publishing the image address.
pub const IMAGE_ADDRESS_CONFIGMAP: &str = "registry-image-address";
/// Secret (in `d8-system`) holding the drain record (key `record`).
pub const DRAIN_SECRET: &str = "registry-drain";
/// Secret (in `d8-system`) marking that this implementation took over.
pub const SWITCH_SECRET: &str = "registry-v2-switch";
/// Secret (in `d8-system`) where the previous implementation kept its state (key `state`).
pub const LEGACY_STATE_SECRET: &str = "registry-state";
/// Secret (in `d8-system`) with a ready-made `registry` ModuleConfig (key `registry-mc.yaml`).
pub const SUGGESTED_CONFIG_SECRET: &str = "registry-suggested-config";
/// Key of [`SUGGESTED_CONFIG_SECRET`].
pub const SUGGESTED_CONFIG_KEY: &str = "registry-mc.yaml";
/// Username a `license` expands to.
pub const LICENSE_USERNAME: &str = "license-token";
/// Garbage collection schedule when nothing else names one.
pub const DEFAULT_GC_SCHEDULE: &str = "17 3 * * *";
