//! Upstream client for OCI registries, used by the node agent (forwarding), the storage
//! replicas (fill) and `d8 mirror` (push).
//!
//! What it guarantees:
//! - **Credentials never leak**: they live in [`Secret`]s whose `Debug` is redacted, never appear
//!   in errors or logs, and `Authorization` is dropped when a redirect changes origin (scheme,
//!   host or port). Error messages show URLs without their query (signed redirect URLs).
//! - **Token flow** as Docker's: probe `/v2/`, Basic or Bearer (realm/service/scope, `token` or
//!   `access_token`, `expires_in`), one cache per client keyed by (registry, credentials,
//!   scope), one fetch at a time per key, refresh before expiry ([`auth`]).
//! - **Every wait is bounded**: connect, response headers, a stall watchdog on bodies, and an
//!   optional total deadline ([`Timeouts`]).
//! - **Nothing partial looks complete**: a [`Body`] ends with `None` only when it is whole and,
//!   for blobs, verified; see [`body`].
//! - **Errors say what to do**: [`Error::retry_elsewhere`] and [`Error::origin`].
//!
//! Built on reqwest (rustls with ring, redirects disabled so we follow them ourselves). It must
//! not depend on Kubernetes crates or on the agent/storage crates that use it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), registry_client::Error> {
//! use registry_client::{Client, Config, Credentials, Endpoint};
//! let client = Client::new(Config::default());
//! let upstream = client.remote(
//!     Endpoint::https("registry.example.com")
//!         .path_prefix("deckhouse/ee")
//!         .credentials(Credentials::new("license-token", "…")),
//! )?;
//! let manifest = upstream
//!     .get_manifest("install", "v1.60.0", &[oci::media_type::OCI_MANIFEST])
//!     .await?;
//! println!("{}", manifest.digest);
//! # Ok(()) }
//! ```

pub mod auth;
pub mod body;
mod client;
mod config;
mod endpoint;
mod error;
mod ops;

pub use auth::{Scope, TokenStats};
pub use body::{Body, RawStream};
pub use client::{Client, Remote, RequestBody, RequestBuilder, Response};
pub use config::{Config, MinThroughput, Timeouts};
pub use endpoint::{ClientIdentity, Credentials, Endpoint, Scheme, Secret};
pub use error::{AuthFailure, BoxError, Error, Origin, TimeoutPhase};
pub use ops::{Head, Manifest, Mount, TagPage, Upload};
