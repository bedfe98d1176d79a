//! The embedded Kubernetes API server (`d8 apiserver`).
//!
//! Role: serve the Kubernetes REST subset the platform needs — discovery, CRUD, the `status`
//! and `scale` subresources, every built-in kind a module chart holds (stored, not run: no
//! kubelet or controller manager), server-side apply with `managedFields` ownership and
//! conflicts, `resourceVersion` conflicts, `generation`, label and field selectors, watch
//! with "too old" errors, finalizers, `ownerReferences` garbage collection, structural-schema
//! validation and defaulting of custom resources, an injected validation hook, per-component
//! credentials with RBAC-like rules, authorization by the RBAC objects it stores, and the
//! TokenReview and SubjectAccessReview a delegating component asks for — persisted in one
//! redb file, so kube-rs clients and `kubectl` work against it unchanged on a single machine.
//!
//! Objects are stored as JSON (`serde_json::Value`): the server knows no Rust types of the
//! kinds it serves. It must not depend on `kube` or `k8s-openapi` (they are test-only here),
//! nor on the platform's API crate: that crate's validation is injected as a [`Validator`].

mod aggregation;
mod auth;
mod core;
mod discovery;
mod encryption;
mod error;
mod fields;
mod gc;
mod handlers;
mod list;
mod managed;
mod meta;
mod patch;
mod path;
mod pki;
mod rbac;
mod request_log;
mod resources;
mod reviews;
mod scale;
mod schema;
mod selector;
mod server;
mod store;
mod table;
mod validate;
mod watch;
mod watch_http;
mod webhook;

pub use auth::{Credential, Rule, User};
pub use encryption::ensure_config as ensure_encryption_config;
pub use error::{ApiError, Error};
pub use request_log::{LoggedRequest, RequestLog};
pub use schema::Cause;
pub use server::{ApiServer, Builder, RunningServer};
pub use validate::{
    AllowAll, Attributes, Converter, Denial, GroupVersionKind, NoConversion, Objects, Operation,
    Validator,
};
