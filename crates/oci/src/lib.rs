//! The OCI Distribution model shared by the agent, the storage replicas, the upstream client
//! and `d8 mirror`.
//!
//! Pure: no tokio, no sockets, no filesystem, no HTTP types — strings and bytes in, typed values
//! out. Everything here is a function of its inputs, so it is unit-, property- and fuzz-tested
//! in isolation (`fuzz/` at the workspace root). It must not depend on a runtime, an HTTP stack
//! or Kubernetes crates.
//!
//! - [`reference`](mod@reference): image references with Docker's normalisation; [`RegistryHost`],
//!   [`Repository`], [`Tag`].
//! - [`digest`]: [`Digest`] (sha256, sha512) and the streaming [`Verifier`].
//! - [`media_type`]: manifest, config and layer media types; `Accept` negotiation.
//! - [`manifest`]: manifests and indexes parsed for their descriptors, bytes untouched.
//! - [`error`]: OCI error codes, statuses and the error body.
//! - [`challenge`]: `WWW-Authenticate` parsing, token request URLs, token responses.
//! - [`path`]: the `/v2/…` request-path parser.
//! - [`range`], [`pagination`]: blob `Range` answers and tag-list pages.
//! - [`header`]: header names the protocol uses.
//!
//! Each module has its own error enum whose variants say what failed; those that reach a client
//! map to an [`ErrorCode`] with `error_code()`.

pub mod challenge;
pub mod digest;
mod encoding;
pub mod error;
pub mod header;
pub mod manifest;
pub mod media_type;
pub mod pagination;
pub mod path;
pub mod range;
pub mod reference;

pub use challenge::{AuthScheme, Challenge, ChallengeError};
pub use digest::{Algorithm, Digest, DigestError, DigestMismatch, Hasher, Verifier};
pub use error::{ErrorBody, ErrorCode, ErrorInfo};
pub use manifest::{Descriptor, Manifest, ManifestError};
pub use media_type::{AcceptList, ManifestMediaType, Negotiation};
pub use path::{ManifestReference, PathError, Request, Route, RouteKind};
pub use range::{ByteRange, RangeOutcome};
pub use reference::{Reference, ReferenceError, RegistryHost, Repository, RepositoryError, Tag};
