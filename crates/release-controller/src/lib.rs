//! Platform updates: the release channel source and the DeckhouseRelease controller.
//!
//! - [`source`]: reads `<registry>/release-channel:<channel>` (through the node agent at
//!   `127.0.0.1:5001` in production) and its `version.json` ([`version_json`]).
//! - [`channel`]: every 3 minutes and on settings changes, turns the channel into
//!   DeckhouseRelease objects (restore of the running version, the step-by-step chain, canary
//!   `applyAfter`, requirements and disruptions, suspend, rollback).
//! - [`reconcile`]: one DeckhouseRelease at a time, observe → plan with [`release_plan`] → act
//!   (phases, annotations, requirement checks, disruptions, alerts, the notification webhook,
//!   apply).
//! - [`controller`]: the long-running loops and the one place that decides backoff.
//! - [`settings`]: the `deckhouse` ModuleConfig settings, validated.
//! - [`view`]: the operator's listing (`d8 release list`): why each release waits.
//! - [`metrics`]: `d8_release_info`, `d8_is_updating`, `d8_migrated_module_not_found`.
//!
//! Every decision is made by `release-plan`; this crate only observes and acts. Time comes from
//! a [`Clock`], so tests move time instead of waiting. It must not depend on the API server
//! implementation or on `d8`: it is a kube-rs client like any other.

pub mod alerts;
pub mod apply;
pub mod channel;
mod clock;
pub mod controller;
pub mod duration;
mod error;
pub mod metrics;
pub mod notify;
pub mod reconcile;
pub mod requirements;
pub mod settings;
pub mod source;
pub mod version_json;
pub mod view;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::Error;
