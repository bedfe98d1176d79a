//! Deploy-time rules: once the task calculator says Process, when may the release be applied,
//! and what does its status say meanwhile.
//!
//! The order is Deckhouse's:
//! 1. the `force` annotation applies at once, skipping every check below;
//! 2. a minor platform release waits for the running Deckhouse pod to be ready;
//! 3. requirements are a hard block (their messages joined by `;`);
//! 4. minor releases with disruptions wait for `disruption-approved` when
//!    `disruptionApprovalMode` is `Manual`;
//! 5. the apply time: `apply-now` skips it; otherwise
//!    - patch: canary (`applyAfter`) → notification delay → update window unless mode is
//!      Manual → manual approval when mode is Manual;
//!    - minor: canary unless mode is Manual → notification delay → update window only in Auto
//!      → manual approval unless mode is Auto;
//! 6. the notification webhook is sent at most once per release (minors always when configured,
//!    patches only with `releaseType: All`); a failure blocks the release.
//!
//! The notification delay, when it applies, replaces every other reason in the message (the
//! release says "postponed by notification" until it has been notified once).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::Error;
use crate::task::Task;
use crate::version::{ReleaseKind, ReleaseVersion};
use crate::window::Windows;

/// The status message prefix of a release whose notification could not be sent.
pub const MSG_BLOCKED_BY_NOTIFICATION: &str =
    "Release is blocked, failed to send release notification";

/// How releases are applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateMode {
    /// Patches and minors apply automatically (minors only inside the windows).
    Auto,
    /// Patches apply automatically; minors need manual approval.
    AutoPatch,
    /// Everything needs manual approval.
    Manual,
}

impl UpdateMode {
    /// Reads a mode; anything else (including empty) is `default`. The `deckhouse` ModuleConfig
    /// falls back to AutoPatch, module update policies to Auto.
    pub fn parse_or(text: &str, default: UpdateMode) -> Self {
        match text {
            "Auto" => Self::Auto,
            "AutoPatch" => Self::AutoPatch,
            "Manual" => Self::Manual,
            _ => default,
        }
    }
}

/// Which releases the notification webhook announces (`update.notification.releaseType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NotifyReleaseType {
    /// Minor releases only (the default).
    #[default]
    Minor,
    /// Minor and patch releases.
    All,
}

/// The update settings that matter for deploy time.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Platform or module releases (chooses the approval annotation in messages).
    pub kind: ReleaseKind,
    /// The update mode.
    pub mode: UpdateMode,
    /// The update windows.
    pub windows: Windows,
    /// `update.notification.minimalNotificationTime` (zero = none).
    pub minimal_notification_time: SignedDuration,
    /// Whether `update.notification.webhook` is set.
    pub webhook_configured: bool,
    /// `update.notification.releaseType`.
    pub notify_release_type: NotifyReleaseType,
    /// `update.disruptionApprovalMode` is `Manual`.
    pub disruption_approval_manual: bool,
}

impl Settings {
    /// Settings with no windows, no notification and automatic disruption approval.
    pub fn new(kind: ReleaseKind, mode: UpdateMode) -> Self {
        Self {
            kind,
            mode,
            windows: Windows::always(),
            minimal_notification_time: SignedDuration::ZERO,
            webhook_configured: false,
            notify_release_type: NotifyReleaseType::Minor,
            disruption_approval_manual: false,
        }
    }
}

/// What the rules need to know about the release.
#[derive(Clone, Debug, Default)]
pub struct ReleaseState {
    /// `metadata.name` (quoted in the disruption message).
    pub name: String,
    /// `spec.applyAfter` (canary, or an inherited notification shift).
    pub apply_after: Option<Timestamp>,
    /// The `apply-now` annotation.
    pub apply_now: bool,
    /// The `force` annotation.
    pub forced: bool,
    /// The `notified` annotation.
    pub notified: bool,
    /// Manually approved (see [`ReleaseKind::manually_approved`]).
    pub manually_approved: bool,
    /// The `release.deckhouse.io/disruption-approved: "true"` annotation.
    pub disruption_approved: bool,
}

/// Why a release is not applied yet; several may hold at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DelayReasons(u8);

impl DelayReasons {
    /// No delay.
    pub const NONE: Self = Self(0);
    /// Legacy cooldown ("in cooldown").
    pub const COOLDOWN: Self = Self(1 << 1);
    /// Canary `applyAfter` in the future ("postponed").
    pub const CANARY: Self = Self(1 << 2);
    /// Minimal notification time ("postponed by notification").
    pub const NOTIFICATION: Self = Self(1 << 3);
    /// Outside the update windows ("waiting for the update window").
    pub const OUT_OF_WINDOW: Self = Self(1 << 4);
    /// Manual approval needed.
    pub const MANUAL_APPROVAL: Self = Self(1 << 5);

    /// Whether there is no delay.
    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    /// Whether `flag` is among the reasons.
    pub fn contains(self, flag: Self) -> bool {
        self.0 & flag.0 != 0
    }

    /// The reasons plus `flag`.
    pub fn with(self, flag: Self) -> Self {
        Self(self.0 | flag.0)
    }

    /// Deckhouse's status message: `Release is <r1, r2…>[. After approval the release will be
    /// delayed][ until 02 Jan 06 15:04 UTC]`. `apply_time` `None` leaves the time out.
    pub fn message(self, kind: ReleaseKind, apply_time: Option<Timestamp>) -> String {
        let mut reasons: Vec<String> = Vec::new();
        if self.contains(Self::COOLDOWN) {
            reasons.push("in cooldown".into());
        }
        if self.contains(Self::CANARY) {
            reasons.push("postponed".into());
        }
        if self.contains(Self::NOTIFICATION) {
            reasons.push("postponed by notification".into());
        }
        if self.contains(Self::OUT_OF_WINDOW) {
            reasons.push("waiting for the update window".into());
        }
        if self.contains(Self::MANUAL_APPROVAL) {
            reasons.push(format!(
                "waiting for the '{}: \"true\"' annotation",
                kind.approval_annotation()
            ));
        }
        if reasons.is_empty() {
            return "noDelay".into();
        }
        let mut message = format!("Release is {}", reasons.join(", "));
        if let Some(at) = apply_time {
            if self.contains(Self::MANUAL_APPROVAL) {
                message.push_str(". After approval the release will be delayed");
            }
            message.push_str(" until ");
            message.push_str(&format_until(at));
        }
        message
    }
}

/// `02 Jan 06 15:04 UTC`: the time in delay messages, as Go's `time.RFC822` layout prints it
/// (a two-digit year; the time is always UTC).
pub fn format_until(at: Timestamp) -> String {
    at.strftime("%d %b %y %H:%M UTC").to_string()
}

/// The apply time computed by the patch or minor rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeployTime {
    /// When the release may be applied (`now` when nothing delays it).
    pub apply_time: Timestamp,
    /// The `spec.applyAfter` to record (set by the notification delay).
    pub apply_after: Option<Timestamp>,
    /// Why it waits.
    pub reasons: DelayReasons,
}

fn check_canary(time: &mut DeployTime, release: &ReleaseState, now: Timestamp) {
    if let Some(after) = release.apply_after
        && now < after
    {
        time.apply_time = after;
        time.reasons = time.reasons.with(DelayReasons::CANARY);
    }
}

fn check_notify(
    time: &mut DeployTime,
    settings: &Settings,
    release: &ReleaseState,
    now: Timestamp,
) -> Result<(), Error> {
    if release.notified || settings.minimal_notification_time <= SignedDuration::ZERO {
        return Ok(());
    }
    let min_apply = now
        .checked_add(settings.minimal_notification_time)
        .map_err(|_| Error::TimeOutOfRange {
            what: "the notification delay",
        })?;
    time.apply_after = Some(time.apply_time);
    if min_apply >= time.apply_time {
        time.apply_time = min_apply;
        time.apply_after = Some(min_apply);
        time.reasons = time.reasons.with(DelayReasons::NOTIFICATION);
    }
    Ok(())
}

fn check_window(time: &mut DeployTime, settings: &Settings) -> Result<(), Error> {
    if !settings.windows.is_allowed(time.apply_time) {
        time.apply_time = settings.windows.next_allowed(time.apply_time)?;
        time.reasons = time.reasons.with(DelayReasons::OUT_OF_WINDOW);
    }
    Ok(())
}

fn finish(
    mut time: DeployTime,
    release: &ReleaseState,
    now: Timestamp,
    approval_needed: bool,
) -> DeployTime {
    if approval_needed && !release.manually_approved {
        // Manual approval replaces the other reasons and the time.
        time.apply_time = now;
        time.reasons = DelayReasons::MANUAL_APPROVAL;
    }
    if time.apply_after.is_some() {
        // The notification delay overrides every other reason.
        time.reasons = DelayReasons::NOTIFICATION;
    }
    time
}

/// The apply time of a patch release: canary → notification delay → window (not in Manual) →
/// manual approval (only in Manual).
pub fn patch_deploy_time(
    settings: &Settings,
    release: &ReleaseState,
    now: Timestamp,
) -> Result<DeployTime, Error> {
    let mut time = DeployTime {
        apply_time: now,
        apply_after: None,
        reasons: DelayReasons::NONE,
    };
    if release.apply_now {
        return Ok(time);
    }
    check_canary(&mut time, release, now);
    check_notify(&mut time, settings, release, now)?;
    if settings.mode != UpdateMode::Manual {
        check_window(&mut time, settings)?;
    }
    Ok(finish(
        time,
        release,
        now,
        settings.mode == UpdateMode::Manual,
    ))
}

/// The apply time of a minor release: canary (not in Manual) → notification delay → window
/// (only in Auto) → manual approval (not in Auto).
pub fn minor_deploy_time(
    settings: &Settings,
    release: &ReleaseState,
    now: Timestamp,
) -> Result<DeployTime, Error> {
    let mut time = DeployTime {
        apply_time: now,
        apply_after: None,
        reasons: DelayReasons::NONE,
    };
    if release.apply_now {
        return Ok(time);
    }
    if settings.mode != UpdateMode::Manual {
        check_canary(&mut time, release, now);
    }
    check_notify(&mut time, settings, release, now)?;
    if settings.mode == UpdateMode::Auto {
        check_window(&mut time, settings)?;
    }
    Ok(finish(
        time,
        release,
        now,
        settings.mode != UpdateMode::Auto,
    ))
}

/// A release that stays Pending for now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delay {
    /// `status.message`.
    pub message: String,
    /// Why it waits (empty when the notification failed).
    pub reasons: DelayReasons,
    /// `spec.applyAfter` to record, with the `notification-time-shift: "true"` annotation.
    pub apply_after: Option<Timestamp>,
    /// The value of the `notified` annotation to record (`isUpdating` becomes `"false"`).
    pub notified: bool,
}

/// The delay of a computed deploy time, or `None` when the release may be applied now.
pub fn delay_of(
    time: &DeployTime,
    settings: &Settings,
    release: &ReleaseState,
    now: Timestamp,
) -> Option<Delay> {
    if release.apply_now || time.reasons.is_none() {
        return None;
    }
    let shown = (time.apply_time != now).then_some(time.apply_time);
    Some(Delay {
        message: time.reasons.message(settings.kind, shown),
        reasons: time.reasons,
        apply_after: time.apply_after,
        notified: true,
    })
}

/// A notification the controller must send before going on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotifyRequest {
    /// The announced apply time (`None` reproduces Deckhouse announcing Go's zero time, which it
    /// does for patch releases that nothing delays).
    pub apply_time: Option<Timestamp>,
}

/// What the controller does with a release the task calculator said to process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The `force` annotation: apply now, without any check.
    ApplyForced,
    /// Stay Pending with this message and look again later.
    Blocked {
        /// `status.message`.
        message: String,
    },
    /// Nothing to write; look again later (a minor release while the pod is not ready and no
    /// Deployed release is known).
    Requeue,
    /// Send the notification when asked, then apply unless delayed.
    DeployTime {
        /// Send this notification first; on failure use [`notification_failed`] instead.
        notify: Option<NotifyRequest>,
        /// Stay Pending with this delay; `None` = apply now.
        delay: Option<Delay>,
    },
}

/// What holds a [`Plan::Blocked`] release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockCause {
    /// A minor release waits for the running Deckhouse pod to be ready.
    PodNotReady,
    /// Requirement checks failed.
    Requirements,
    /// The release disrupts the cluster and `disruption-approved` is missing.
    Disruption,
}

impl BlockCause {
    /// What blocks a release [`plan`] answered [`Plan::Blocked`] for (the same order of
    /// checks).
    pub fn of(input: &Input<'_>) -> Self {
        if !input.pod_ready && !input.task.is_patch {
            Self::PodNotReady
        } else if !input.requirement_failures.is_empty() {
            Self::Requirements
        } else {
            Self::Disruption
        }
    }
}

/// The labels of `d8_release_info` (Deckhouse's `NewReleaseMetricLabels`): one series per
/// Pending release the controller got past the pod-readiness check for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReleaseInfo {
    /// `manualApproval`: the release waits for manual approval.
    pub manual_approval: bool,
    /// `disruptionApproval`: the release waits for `disruption-approved`.
    pub disruption_approval: bool,
    /// `requirementsNotMet`: a requirement check failed.
    pub requirements_not_met: bool,
    /// `notificationNotSent`: the notification webhook failed.
    pub notification_not_sent: bool,
    /// `releaseQueueDepth`: only set while manual approval is required.
    pub release_queue_depth: Option<u64>,
    /// `majorReleaseDepth`.
    pub major_release_depth: u64,
    /// `majorReleaseName` is the release's name (else `nil`): a module release the task
    /// calculator found major (Deckhouse's module release controller; its DeckhouseRelease
    /// controller never sets it).
    pub major_release: bool,
    /// `fromToName` is the release's name (else `nil`): a module release processed as the
    /// endpoint of update constraints.
    pub from_to: bool,
}

impl ReleaseInfo {
    /// The labels for a release planned as `plan` (`notification_failed`: its webhook was
    /// attempted and failed). `None` when Deckhouse writes no series: the pod-readiness wait
    /// comes before the checks, and a forced release skips them.
    pub fn of(input: &Input<'_>, plan: &Plan, notification_failed: bool) -> Option<Self> {
        let depth = input.task.queue_depth.unwrap_or_default();
        let module = input.settings.kind == ReleaseKind::Module;
        let mut info = Self {
            major_release_depth: depth.major_release_depth(),
            major_release: module && input.task.is_major,
            from_to: module && input.task.is_from_to,
            ..Self::default()
        };
        match plan {
            Plan::ApplyForced | Plan::Requeue => return None,
            Plan::Blocked { .. } => match BlockCause::of(input) {
                BlockCause::PodNotReady => return None,
                BlockCause::Requirements => info.requirements_not_met = true,
                BlockCause::Disruption => info.disruption_approval = true,
            },
            Plan::DeployTime { delay, .. } => {
                info.notification_not_sent = notification_failed;
                info.manual_approval = delay
                    .as_ref()
                    .is_some_and(|d| d.reasons.contains(DelayReasons::MANUAL_APPROVAL));
            }
        }
        if info.manual_approval {
            info.release_queue_depth = Some(depth.release_queue_depth());
        }
        Some(info)
    }

    /// The label pairs, in Deckhouse's names (`nil` for an unset depth or name).
    pub fn labels(&self, name: &str) -> Vec<(&'static str, String)> {
        vec![
            ("name", name.to_owned()),
            ("manualApproval", self.manual_approval.to_string()),
            ("disruptionApproval", self.disruption_approval.to_string()),
            ("requirementsNotMet", self.requirements_not_met.to_string()),
            (
                "notificationNotSent",
                self.notification_not_sent.to_string(),
            ),
            (
                "releaseQueueDepth",
                self.release_queue_depth
                    .map_or_else(|| "nil".to_owned(), |d| d.to_string()),
            ),
            ("majorReleaseDepth", self.major_release_depth.to_string()),
            ("majorReleaseName", name_or_nil(self.major_release, name)),
            ("fromToName", name_or_nil(self.from_to, name)),
        ]
    }
}

fn name_or_nil(set: bool, name: &str) -> String {
    if set { name } else { "nil" }.to_owned()
}

/// Everything the deploy-time decision depends on.
#[derive(Clone, Debug)]
pub struct Input<'a> {
    /// The update settings.
    pub settings: &'a Settings,
    /// The release.
    pub release: &'a ReleaseState,
    /// The task calculator's answer (Process).
    pub task: &'a Task,
    /// The current time.
    pub now: Timestamp,
    /// The running Deckhouse pod is ready (always `true` for modules).
    pub pod_ready: bool,
    /// Messages of the requirement checks that failed, in check order.
    pub requirement_failures: &'a [String],
    /// Reasons of the registered disruption checks that hold for the release's
    /// `spec.disruptions`, in order.
    pub disruption_reasons: &'a [String],
}

/// The deploy-time decision for a release the task calculator said to process.
pub fn plan(input: &Input<'_>) -> Result<Plan, Error> {
    let Input {
        settings,
        release,
        task,
        now,
        ..
    } = *input;
    if release.forced {
        return Ok(Plan::ApplyForced);
    }
    if !input.pod_ready && !task.is_patch {
        return Ok(match &task.deployed {
            None => Plan::Requeue,
            Some(deployed) => Plan::Blocked {
                message: awaiting_pod_message(&deployed.version),
            },
        });
    }
    if !input.requirement_failures.is_empty() {
        return Ok(Plan::Blocked {
            message: input.requirement_failures.join(";"),
        });
    }
    if task.is_patch {
        let time = patch_deploy_time(settings, release, now)?;
        let notify = (!release.notified
            && settings.webhook_configured
            && settings.notify_release_type == NotifyReleaseType::All)
            .then_some(NotifyRequest {
                apply_time: time.apply_after,
            });
        return Ok(Plan::DeployTime {
            notify,
            delay: delay_of(&time, settings, release, now),
        });
    }
    if settings.disruption_approval_manual
        && !release.disruption_approved
        && let Some(reason) = input.disruption_reasons.first()
    {
        return Ok(Plan::Blocked {
            message: format!(
                "release blocked, disruption approval required: (`kubectl annotate DeckhouseRelease {} release.deckhouse.io/disruption-approved=true`): {reason}",
                release.name
            ),
        });
    }
    let time = minor_deploy_time(settings, release, now)?;
    let notify = (!release.notified && settings.webhook_configured).then_some(NotifyRequest {
        apply_time: Some(time.apply_time),
    });
    Ok(Plan::DeployTime {
        notify,
        delay: delay_of(&time, settings, release, now),
    })
}

/// The delay to record when the notification of `plan` could not be sent.
pub fn notification_failed(delay: Option<&Delay>, error: &str) -> Delay {
    Delay {
        message: format!("{MSG_BLOCKED_BY_NOTIFICATION}: {error}"),
        reasons: DelayReasons::NONE,
        apply_after: delay.and_then(|d| d.apply_after),
        notified: false,
    }
}

/// `awaiting for Deckhouse v<deployed> pod to be ready`.
pub fn awaiting_pod_message(deployed: &ReleaseVersion) -> String {
    format!("awaiting for Deckhouse v{deployed} pod to be ready")
}

/// `"<key>" requirement for DeckhouseRelease "<version>" not met: <error>`, the message of a
/// registered requirement check that failed.
pub fn requirement_not_met_message(key: &str, version: &ReleaseVersion, error: &str) -> String {
    format!("{key:?} requirement for DeckhouseRelease \"{version}\" not met: {error}")
}

/// `migrated module '<module>' not found in any ModuleSource registry`.
pub fn migrated_module_not_found_message(module: &str) -> String {
    format!("migrated module '{module}' not found in any ModuleSource registry")
}

/// `migrated module '<module>' is not pre-downloaded yet`: a ModuleSource offers the module but
/// it has no Deployed ModuleRelease, so the release waits until it is downloaded (Deckhouse's
/// migrated modules check; `DeckhouseMigratedModuleNotDownloaded`).
pub fn migrated_module_not_downloaded_message(module: &str) -> String {
    format!("migrated module '{module}' is not pre-downloaded yet")
}

/// The JSON body of the release notification webhook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WebhookBody {
    /// `Deckhouse` or `Module`.
    pub subject: String,
    /// The version without `v`.
    pub version: String,
    /// `spec.requirements`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub requirements: BTreeMap<String, String>,
    /// `spec.changelogLink`.
    #[serde(rename = "changelogLink", skip_serializing_if = "String::is_empty")]
    pub changelog_link: String,
    /// RFC 3339.
    #[serde(rename = "applyTime")]
    pub apply_time: String,
    /// `New Deckhouse Release <version> is available. Release will be applied at: <RFC 850>`.
    pub message: String,
}

impl WebhookBody {
    /// The body announcing `version` to be applied at `apply_time` (Go's zero time when `None`).
    pub fn new(
        kind: ReleaseKind,
        version: &ReleaseVersion,
        requirements: BTreeMap<String, String>,
        changelog_link: &str,
        apply_time: Option<Timestamp>,
    ) -> Self {
        let (rfc3339, rfc850) = match apply_time {
            Some(t) => (
                t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                t.strftime("%A, %d-%b-%y %H:%M:%S UTC").to_string(),
            ),
            None => (
                "0001-01-01T00:00:00Z".to_owned(),
                "Monday, 01-Jan-01 00:00:00 UTC".to_owned(),
            ),
        };
        Self {
            subject: match kind {
                ReleaseKind::Deckhouse => "Deckhouse",
                ReleaseKind::Module => "Module",
            }
            .to_owned(),
            version: version.to_string(),
            requirements,
            changelog_link: changelog_link.to_owned(),
            apply_time: rfc3339,
            message: format!(
                "New Deckhouse Release {version} is available. Release will be applied at: {rfc850}"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
