//! Admission and conversion of the platform's own kinds — one implementation, two transports.
//! The embedded API server runs it in process on every write, delete and read; `d8 webhook`
//! answers kube-apiserver's `AdmissionReview` and `ConversionReview` with it.
//!
//! - [`context`]: the cluster facts the rules read (modules, their settings validators,
//!   experimental and exclusive-group facts, update policies, pull overrides), built from the
//!   stored objects as the module manager publishes them;
//! - [`convert`]: conversion between the served versions of every kind we own;
//! - [`review`]: review bodies in, response bodies out, with kube-apiserver's shapes;
//! - [`verdicts`]: which rules a transport answers for when both run (`d8 up`);
//! - `embedded` (feature `apiserver`): the same rules and conversions as the embedded API
//!   server's in-process hooks, reading the facts from its store.
//!
//! The rules themselves are `api::validation` (Deckhouse's messages); this crate adds what they
//! need from the cluster. Pure: no tokio, no sockets, no filesystem, no kube client; the
//! transports read the objects and hand them over.

pub mod context;
pub mod convert;
#[cfg(feature = "apiserver")]
pub mod embedded;
pub mod review;
mod settings;
pub mod verdicts;

pub use context::{ClusterObjects, context};
pub use convert::{ConversionError, convert};
pub use review::{BadReview, MAX_REVIEW_BYTES};
pub use verdicts::Verdicts;
