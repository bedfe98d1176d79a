//! The OCI Distribution model shared by the agent, the storage replicas and `d8 mirror`.
//!
//! Pure: no tokio, no sockets, no filesystem. Everything here is a function of its inputs, so it
//! is unit-, property- and fuzz-tested in isolation.

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

pub use digest::{Algorithm, Digest, DigestError, DigestMismatch, Hasher, Verifier};
pub use error::{ErrorBody, ErrorCode, ErrorInfo};
pub use manifest::{Descriptor, Manifest, ManifestError};
pub use media_type::{AcceptList, ManifestMediaType, Negotiation};
pub use path::{PathError, Request, Route};
pub use reference::{Reference, ReferenceError, RegistryHost, Repository, RepositoryError, Tag};
