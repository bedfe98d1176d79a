//! Pure decisions of the release engine, shared by platform releases (DeckhouseRelease) and
//! module releases (ModuleRelease):
//!
//! - [`window`]: update windows (UTC, day sets, strict bounds, OR-ed) and the next instant one
//!   opens;
//! - [`channel`]: which releases to create when a release channel moves, including the
//!   step-by-step chain through the registry's tags, and what to do with releases a channel no
//!   longer names (rollback, suspend);
//! - [`task`]: the task calculator (Skip / Await / Process) with Deckhouse's messages;
//! - [`deploy`]: deploy-time rules per update mode (canary, notification delay, window, manual
//!   approval, `apply-now`, disruptions, requirements) and their status messages, plus the
//!   release notification webhook body;
//! - [`canary`]: canary waves, bit-compatible with Deckhouse's Go murmur3;
//! - [`cleanup`]: which outdated releases to supersede, skip or delete;
//! - [`disruption`]: the disruption checks Deckhouse registers (`ingressNginx`);
//! - [`requirements`]: the requirement checks of a platform release (Deckhouse version of the
//!   enabled modules, `autoK8sVersion`, `migratedModules`, registered keys), with Deckhouse's
//!   messages and Masterminds-compatible version constraints.
//!
//! Every status message and error text built here is Deckhouse's own, checked against its public
//! sources (`pkg/releaseupdater/{task_calculator,deploy_delay_reason,requirements_checker}.go`,
//! `go_lib/dependency/{requirements,extenders,versionmatcher}`, Masterminds semver's constraint
//! errors); the few texts still worded by this project are listed in `release-controller`'s
//! crate docs.
//!
//! Pure: no tokio, no sockets, no filesystem, no Kubernetes types, no clock. Time is always an
//! input ([`jiff::Timestamp`]). The DeckhouseRelease and ModuleRelease controllers observe the
//! cluster, call these functions and act on the answer; they must not re-derive any of these
//! decisions themselves.

pub mod canary;
pub mod channel;
pub mod cleanup;
pub mod deploy;
pub mod disruption;
mod error;
pub mod requirements;
pub mod task;
pub mod version;
pub mod window;

pub use error::Error;
pub use version::{Phase, ReleaseKind, ReleaseVersion};
pub use window::{Window, Windows};
