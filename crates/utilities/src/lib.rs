//! The platform's utilities, each small next to the module runtime but each something an
//! operator reaches for on a bad day:
//!
//! - [`object_keeper`]: deferred and cascaded deletion through ObjectKeepers;
//! - [`documentation`]: module documentation sent to the documentation builders;
//! - [`cni`]: switching the cluster's CNI (the manager's phases, the node agent's steps).
//!
//! Each keeps its decisions in a pure `plan` module (no I/O, "now" passed in) with table tests;
//! the Kubernetes, HTTP, file and command edges sit next to it. Adapter crate: kube-rs, tokio,
//! reqwest; nothing here depends on the module runtime.

pub mod cni;
pub mod documentation;
mod error;
pub mod object_keeper;

pub use error::Error;
