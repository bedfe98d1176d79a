//! The `deckhouse` ModuleConfig settings the release engine reads: `releaseChannel`,
//! `update.mode`, `update.windows`, `update.notification`, `update.disruptionApprovalMode` and
//! `update.blockOnAlerts`, validated against Deckhouse's schema (`openapi/config-values.yaml`)
//! with go-openapi's wording (`<path> in body should be one of [...]`), and turned into the
//! planners' [`release_plan::deploy::Settings`].

use std::fmt;
use std::time::Duration;

use jiff::SignedDuration;
use release_plan::ReleaseKind;
use release_plan::deploy::{NotifyReleaseType, Settings, UpdateMode};
use release_plan::window::{Window, Windows};
use serde_json::Value;

use crate::Error;
use crate::duration::parse_go_duration;

/// The name of the ModuleConfig holding these settings.
pub const MODULE_CONFIG_NAME: &str = "deckhouse";

/// A release channel of the `deckhouse` module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// `Alpha`.
    Alpha,
    /// `Beta`.
    Beta,
    /// `EarlyAccess`.
    EarlyAccess,
    /// `Stable`.
    Stable,
    /// `RockSolid`.
    RockSolid,
    /// `LTS`.
    Lts,
}

impl Channel {
    const ALL: [(&'static str, Channel); 6] = [
        ("Alpha", Channel::Alpha),
        ("Beta", Channel::Beta),
        ("EarlyAccess", Channel::EarlyAccess),
        ("Stable", Channel::Stable),
        ("RockSolid", Channel::RockSolid),
        ("LTS", Channel::Lts),
    ];

    /// The value as the settings write it (`EarlyAccess`, `LTS`).
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, c)| *c == self)
            .map_or("", |(s, _)| s)
    }

    /// The tag of the channel's image: `alpha`, `beta`, `early-access`, `stable`, `rock-solid`,
    /// `lts`.
    pub fn image_tag(self) -> &'static str {
        match self {
            Self::Alpha => "alpha",
            Self::Beta => "beta",
            Self::EarlyAccess => "early-access",
            Self::Stable => "stable",
            Self::RockSolid => "rock-solid",
            Self::Lts => "lts",
        }
    }

    /// The key of `version.json`'s `canary` map for this channel (`alpha`, `earlyAccess`…).
    pub fn canary_key(self) -> &'static str {
        match self {
            Self::Alpha => "alpha",
            Self::Beta => "beta",
            Self::EarlyAccess => "earlyAccess",
            Self::Stable => "stable",
            Self::RockSolid => "rockSolid",
            Self::Lts => "lts",
        }
    }

    /// Whether this is the LTS channel (no step-by-step chain, a wider minor limit).
    pub fn is_lts(self) -> bool {
        self == Self::Lts
    }
}

/// `update.notification.auth`.
#[derive(Clone, PartialEq, Eq)]
pub enum NotificationAuth {
    /// `basic: {username, password}`.
    Basic {
        /// The user.
        username: String,
        /// The password.
        password: String,
    },
    /// `bearerToken`.
    Bearer(String),
}

impl fmt::Debug for NotificationAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            Self::Bearer(_) => f.write_str("Bearer(<redacted>)"),
        }
    }
}

/// `update.notification`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    /// `webhook`: where the release notification is POSTed (`None` = no webhook).
    pub webhook: Option<String>,
    /// `tlsSkipVerify`.
    pub tls_skip_verify: bool,
    /// `minimalNotificationTime` (zero when unset).
    pub minimal_notification_time: SignedDuration,
    /// `retryMinTime` (default 2 s): the first retry delay, doubled on every try.
    pub retry_min_time: Duration,
    /// `auth`.
    pub auth: Option<NotificationAuth>,
    /// `releaseType` (default Minor).
    pub release_type: NotifyReleaseType,
}

impl Default for Notification {
    fn default() -> Self {
        Self {
            webhook: None,
            tls_skip_verify: false,
            minimal_notification_time: SignedDuration::ZERO,
            retry_min_time: Duration::from_secs(2),
            auth: None,
            release_type: NotifyReleaseType::Minor,
        }
    }
}

/// `update.blockOnAlerts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockOnAlerts {
    /// `enabled` (default false).
    pub enabled: bool,
    /// `severity` (default 4, 0..9): alerts with a `severity_level` at or below it (1 is the
    /// most critical) block updates.
    pub severity: u8,
}

impl Default for BlockOnAlerts {
    fn default() -> Self {
        Self {
            enabled: false,
            severity: 4,
        }
    }
}

/// The release engine's view of the `deckhouse` ModuleConfig.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeckhouseSettings {
    /// `releaseChannel`; `None` is "dev mode" (no release channel is followed).
    pub release_channel: Option<Channel>,
    /// `update.mode` (default AutoPatch).
    pub mode: UpdateMode,
    /// `update.windows`.
    pub windows: Windows,
    /// `update.notification`.
    pub notification: Notification,
    /// `update.disruptionApprovalMode` is `Manual` (default Auto).
    pub disruption_approval_manual: bool,
    /// `update.blockOnAlerts`.
    pub block_on_alerts: BlockOnAlerts,
}

impl Default for DeckhouseSettings {
    fn default() -> Self {
        Self {
            release_channel: None,
            mode: UpdateMode::AutoPatch,
            windows: Windows::always(),
            notification: Notification::default(),
            disruption_approval_manual: false,
            block_on_alerts: BlockOnAlerts::default(),
        }
    }
}

/// Collects every schema violation before refusing.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn one_of(&mut self, path: &str, allowed: &[&str]) {
        self.0.push(format!(
            "{path} in body should be one of [{}]",
            allowed.join(" ")
        ));
    }
    fn must_be(&mut self, path: &str, kind: &str, value: &Value) {
        let got = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        self.0
            .push(format!("{path} in body must be of type {kind}: \"{got}\""));
    }
    fn pattern(&mut self, path: &str, pattern: &str) {
        self.0
            .push(format!("{path} in body should match '{pattern}'"));
    }
    fn push(&mut self, message: String) {
        self.0.push(message);
    }
}

fn string<'a>(problems: &mut Problems, value: Option<&'a Value>, path: &str) -> Option<&'a str> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            problems.must_be(path, "string", other);
            None
        }
    }
}

fn boolean(problems: &mut Problems, value: Option<&Value>, path: &str) -> Option<bool> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            problems.must_be(path, "boolean", other);
            None
        }
    }
}

fn object<'a>(
    problems: &mut Problems,
    value: Option<&'a Value>,
    path: &str,
) -> Option<&'a serde_json::Map<String, Value>> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(other) => {
            problems.must_be(path, "object", other);
            None
        }
    }
}

const MINIMAL_NOTIFICATION_TIME_PATTERN: &str = "^([0-9]+h([0-9]+m)?|[0-9]+m)$";
const RETRY_MIN_TIME_PATTERN: &str = "^([0-9]+h)?([0-9]+m)?([0-9]+s)?$";
const WEBHOOK_PATTERN: &str = "^https?://[^\\s/$.?#].[^\\s]*$";

/// `^([0-9]+h([0-9]+m)?|[0-9]+m)$`.
fn matches_minimal_notification_time(text: &str) -> bool {
    let digits_then = |s: &str, unit: char| -> Option<usize> {
        let n = s.bytes().take_while(u8::is_ascii_digit).count();
        (n > 0 && s[n..].starts_with(unit)).then_some(n + 1)
    };
    if let Some(n) = digits_then(text, 'h') {
        let rest = &text[n..];
        return rest.is_empty() || digits_then(rest, 'm').is_some_and(|m| m == rest.len());
    }
    digits_then(text, 'm').is_some_and(|m| m == text.len())
}

/// `^([0-9]+h)?([0-9]+m)?([0-9]+s)?$`, non-empty.
fn matches_retry_min_time(text: &str) -> bool {
    let mut rest = text;
    for unit in ['h', 'm', 's'] {
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        if n > 0 && rest[n..].starts_with(unit) {
            rest = &rest[n + 1..];
        }
    }
    !text.is_empty() && rest.is_empty()
}

/// `^https?://[^\s/$.?#].[^\s]*$`.
fn matches_webhook(text: &str) -> bool {
    let Some(rest) = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
    else {
        return false;
    };
    let mut chars = rest.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| !c.is_whitespace() && !"/$.?#".contains(c));
    first_ok && chars.next().is_some() && !rest.chars().any(char::is_whitespace)
}

impl DeckhouseSettings {
    /// Reads `spec.settings` of the `deckhouse` ModuleConfig (`None` = no settings: defaults).
    pub fn from_settings(settings: Option<&Value>) -> Result<Self, Error> {
        let mut problems = Problems::default();
        let mut out = Self::default();
        let Some(root) = object(&mut problems, settings, "settings") else {
            return finish(out, problems);
        };
        if let Some(channel) = string(&mut problems, root.get("releaseChannel"), "releaseChannel")
            && !channel.is_empty()
        {
            match Channel::ALL.iter().find(|(s, _)| *s == channel) {
                Some((_, c)) => out.release_channel = Some(*c),
                None => problems.one_of(
                    "releaseChannel",
                    &Channel::ALL.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
                ),
            }
        }
        let Some(update) = object(&mut problems, root.get("update"), "update") else {
            return finish(out, problems);
        };
        if let Some(mode) = string(&mut problems, update.get("mode"), "update.mode") {
            out.mode = match mode {
                "AutoPatch" => UpdateMode::AutoPatch,
                "Auto" => UpdateMode::Auto,
                "Manual" => UpdateMode::Manual,
                _ => {
                    problems.one_of("update.mode", &["AutoPatch", "Auto", "Manual"]);
                    UpdateMode::AutoPatch
                }
            };
        }
        if let Some(mode) = string(
            &mut problems,
            update.get("disruptionApprovalMode"),
            "update.disruptionApprovalMode",
        ) {
            match mode {
                "Auto" => {}
                "Manual" => out.disruption_approval_manual = true,
                _ => problems.one_of("update.disruptionApprovalMode", &["Auto", "Manual"]),
            }
        }
        out.windows = windows(&mut problems, update.get("windows"));
        if let Some(notification) = object(
            &mut problems,
            update.get("notification"),
            "update.notification",
        ) {
            out.notification = parse_notification(&mut problems, notification);
        }
        if let Some(block) = object(
            &mut problems,
            update.get("blockOnAlerts"),
            "update.blockOnAlerts",
        ) {
            if let Some(enabled) = boolean(
                &mut problems,
                block.get("enabled"),
                "update.blockOnAlerts.enabled",
            ) {
                out.block_on_alerts.enabled = enabled;
            }
            match block.get("severity") {
                None | Some(Value::Null) => {}
                Some(Value::Number(n)) => match n.as_u64() {
                    Some(s) if s <= 9 => out.block_on_alerts.severity = s as u8,
                    _ => problems.push(
                        "update.blockOnAlerts.severity in body should be between 0 and 9".into(),
                    ),
                },
                Some(other) => problems.must_be("update.blockOnAlerts.severity", "integer", other),
            }
        }
        finish(out, problems)
    }

    /// The planners' deploy-time settings.
    pub fn deploy_settings(&self) -> Settings {
        Settings {
            kind: ReleaseKind::Deckhouse,
            mode: self.mode,
            windows: self.windows.clone(),
            minimal_notification_time: self.notification.minimal_notification_time,
            webhook_configured: self.notification.webhook.is_some(),
            notify_release_type: self.notification.release_type,
            disruption_approval_manual: self.disruption_approval_manual,
        }
    }
}

fn finish(out: DeckhouseSettings, problems: Problems) -> Result<DeckhouseSettings, Error> {
    if problems.0.is_empty() {
        Ok(out)
    } else {
        Err(Error::Settings(problems.0.join("; ")))
    }
}

fn windows(problems: &mut Problems, value: Option<&Value>) -> Windows {
    let list = match value {
        None | Some(Value::Null) => return Windows::always(),
        Some(Value::Array(list)) => list,
        Some(other) => {
            problems.must_be("update.windows", "array", other);
            return Windows::always();
        }
    };
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let path = format!("update.windows[{i}]");
        let Some(window) = object(problems, Some(item), &path) else {
            continue;
        };
        let from = string(problems, window.get("from"), &format!("{path}.from"));
        let to = string(problems, window.get("to"), &format!("{path}.to"));
        let mut days = Vec::new();
        if let Some(list) = window.get("days") {
            match list {
                Value::Array(items) => {
                    for (j, day) in items.iter().enumerate() {
                        if let Some(d) = string(problems, Some(day), &format!("{path}.days[{j}]")) {
                            days.push(d.to_owned());
                        }
                    }
                }
                Value::Null => {}
                other => problems.must_be(&format!("{path}.days"), "array", other),
            }
        }
        let (Some(from), Some(to)) = (from, to) else {
            for (bound, v) in [("from", from), ("to", to)] {
                if v.is_none() && window.get(bound).is_none() {
                    problems.push(format!("{path}.{bound} in body is required"));
                }
            }
            continue;
        };
        for (bound, v) in [("from", from), ("to", to)] {
            if api::update::parse_window_time(v).is_none() {
                problems.pattern(&format!("{path}.{bound}"), api::update::WINDOW_TIME_PATTERN);
            }
        }
        for (j, day) in days.iter().enumerate() {
            if day.parse::<api::update::Day>().is_err() {
                problems.one_of(
                    &format!("{path}.days[{j}]"),
                    &["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
                );
            }
        }
        let ordered = api::update::UpdateWindow {
            from: from.to_owned(),
            to: to.to_owned(),
            days: Vec::new(),
        }
        .is_ordered();
        match (ordered, Window::new(from, to, &days)) {
            (Some(false), _) => problems.push(
                "Invalid update windows. Start time (windows.from) should be less than the end time of the update window (windows.to)".into(),
            ),
            (Some(true), Ok(w)) => out.push(w),
            // Bounds or days that do not parse are reported above.
            _ => {}
        }
    }
    Windows::new(out)
}

fn parse_notification(
    problems: &mut Problems,
    map: &serde_json::Map<String, Value>,
) -> Notification {
    let mut n = Notification::default();
    if let Some(webhook) = string(problems, map.get("webhook"), "update.notification.webhook")
        && !webhook.is_empty()
    {
        if matches_webhook(webhook) {
            n.webhook = Some(webhook.to_owned());
        } else {
            problems.pattern("update.notification.webhook", WEBHOOK_PATTERN);
        }
    }
    if let Some(skip) = boolean(
        problems,
        map.get("tlsSkipVerify"),
        "update.notification.tlsSkipVerify",
    ) {
        n.tls_skip_verify = skip;
    }
    if let Some(text) = string(
        problems,
        map.get("minimalNotificationTime"),
        "update.notification.minimalNotificationTime",
    ) {
        if matches_minimal_notification_time(text) {
            if let Ok(d) = parse_go_duration(text) {
                n.minimal_notification_time = d;
            }
        } else {
            problems.pattern(
                "update.notification.minimalNotificationTime",
                MINIMAL_NOTIFICATION_TIME_PATTERN,
            );
        }
    }
    if let Some(text) = string(
        problems,
        map.get("retryMinTime"),
        "update.notification.retryMinTime",
    ) {
        match parse_go_duration(text) {
            Ok(d) if matches_retry_min_time(text) => {
                n.retry_min_time = d.try_into().unwrap_or(Duration::from_secs(2));
            }
            _ => problems.pattern("update.notification.retryMinTime", RETRY_MIN_TIME_PATTERN),
        }
    }
    if let Some(kind) = string(
        problems,
        map.get("releaseType"),
        "update.notification.releaseType",
    ) {
        match kind {
            "All" => n.release_type = NotifyReleaseType::All,
            "Minor" => n.release_type = NotifyReleaseType::Minor,
            _ => problems.one_of("update.notification.releaseType", &["All", "Minor"]),
        }
    }
    if let Some(auth) = object(problems, map.get("auth"), "update.notification.auth") {
        let basic = object(
            problems,
            auth.get("basic"),
            "update.notification.auth.basic",
        );
        let bearer = string(
            problems,
            auth.get("bearerToken"),
            "update.notification.auth.bearerToken",
        );
        match (basic, bearer) {
            (Some(_), Some(_)) => problems.push(
                "update.notification.auth in body must validate one and only one schema (oneOf). Found 2 valid alternatives".into(),
            ),
            (Some(basic), None) => {
                let username = string(
                    problems,
                    basic.get("username"),
                    "update.notification.auth.basic.username",
                );
                let password = string(
                    problems,
                    basic.get("password"),
                    "update.notification.auth.basic.password",
                );
                match (username, password) {
                    (Some(u), Some(p)) => {
                        n.auth = Some(NotificationAuth::Basic {
                            username: u.to_owned(),
                            password: p.to_owned(),
                        })
                    }
                    (u, p) => {
                        for (field, v) in [("username", u), ("password", p)] {
                            if v.is_none() {
                                problems.push(format!(
                                    "update.notification.auth.basic.{field} in body is required"
                                ));
                            }
                        }
                    }
                }
            }
            (None, Some(token)) => n.auth = Some(NotificationAuth::Bearer(token.to_owned())),
            (None, None) => problems.push(
                "update.notification.auth in body must validate one and only one schema (oneOf). Found none valid".into(),
            ),
        }
    }
    n
}

#[cfg(test)]
mod tests;
