//! A cache replica of the in-cluster registry (`d8 registry storage`): the content-addressed
//! store, the pull API with pull-through fills, the push API behind the publish endpoint, and
//! the store limits.
//!
//! - [`store`]: blobs by digest, manifests as their original bytes, tags per repository; every
//!   write is a temporary file hashed while written, `fsync`ed and renamed — nothing partial is
//!   ever visible, and a `kill -9` leaves only temporary files that the next start removes.
//! - [`fill`]: one upstream request per missing digest however many clients ask; every reader
//!   follows the growing file, Range requests included; the fill outlives its first client.
//! - [`service`]: the request pipeline of the read ("5001") and write ("5003") listeners;
//!   [`auth`]: accounts; [`server`]: TLS and client certificates; [`run`]: a replica's process;
//!   [`metrics`]: the store's gauges; [`status`]: the replica's report; [`replicate`]: copying
//!   images from the leader (or the upstream) ahead of time.
//! - [`gc`]: garbage collection under the keep rules, never removing a blob in use; dry run.
//! - [`body`]: file-backed response bodies with large positional reads.
//!
//! The data path must not depend on Kubernetes crates: what the replica reads from and writes
//! to the cluster goes through small traits implemented elsewhere.

pub mod auth;
pub mod body;
mod error;
pub mod fill;
pub mod gc;
pub mod metrics;
pub mod realip;
pub mod replicate;
pub mod run;
pub mod server;
pub mod service;
pub mod status;
pub mod store;

pub use auth::{Access, Accounts};
pub use error::Error;
pub use server::Tls;
pub use service::{Listener, Peer, Registry, Role, Settings, Upstream};
pub use store::{Limits, Store, Usage};
