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
//! ## Messages
//!
//! Status messages, requirement errors, webhook errors and metric names are Deckhouse's own,
//! checked against the public sources (`deckhouse-controller/internal/controller/deckhouse-release`,
//! `pkg/releaseupdater`, `go_lib/dependency/{requirements,extenders,versionmatcher}`). Still
//! worded by us, because the stored sources do not hold the text:
//! - the `blockOnAlerts` hold: `Release is blocked by the firing alert <name> with severity level
//!   <n> (update.blockOnAlerts.severity is <t>)` (Deckhouse's tests only show that its message
//!   names the alert and its level);
//! - a webhook that cannot be reached: `sending the webhook request: <cause>` after Deckhouse's
//!   `send release notification: send webhook notification: after 5 attempts, last error:`
//!   prefix (Go prints `Post "<url>": <cause>`; the URL is left out because it may carry
//!   credentials);
//! - the invalid-settings messages of [`settings`] follow the OpenAPI validator's phrasing but are
//!   produced here;
//! - `d8 release list`'s hints (`→ approve: d8 release approve <name>`, …), which are this
//!   project's.
//!
//! Requirement keys registered by Deckhouse modules this platform does not run are listed in
//! [`release_plan::requirements::FOREIGN_KEYS`]; `disabledModules` is among them although its
//! check function was not found in the stored sources.
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

pub use clock::{Clock, ManualClock, OffsetClock, SystemClock};
pub use error::Error;
