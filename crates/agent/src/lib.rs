//! The registry agent: containerd on every node pulls every image through it.
//!
//! It serves TLS on `127.0.0.1:5001` with a certificate from a CA generated on the node, routes
//! each request by its `ns` parameter with the pure rules of `registry-plan`, forwards to the
//! chosen registries with the cluster's credentials, and points containerd at itself through
//! one `_default/hosts.toml` drop-in. It does not depend on Kubernetes types except at the
//! layout source's edge.

pub mod dropin;
mod fields;
mod http1;
pub mod metrics;
pub mod pki;
pub mod proxy;
pub mod run;
pub mod server;
pub mod source;
mod tls;
pub mod upstream;
