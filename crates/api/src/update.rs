//! Types shared by the update settings of ModuleUpdatePolicy and the `deckhouse` ModuleConfig:
//! release channels, update modes and update windows.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::macros::string_enum;

/// The `HH:MM` pattern of update window bounds, exactly as in Deckhouse's CRDs.
pub const WINDOW_TIME_PATTERN: &str = r"^(?:\d|[01]\d|2[0-3]):[0-5]\d$";

string_enum! {
    /// A release channel of a ModuleUpdatePolicy, from least to most stable.
    #[derive(Default)]
    pub enum ReleaseChannel {
        /// Newest releases first.
        Alpha = "Alpha",
        /// After Alpha.
        Beta = "Beta",
        /// After Beta.
        EarlyAccess = "EarlyAccess",
        /// The default.
        #[default]
        Stable = "Stable",
        /// After Stable.
        RockSolid = "RockSolid",
        /// Long-term support.
        Lts = "Lts",
    }
}

impl ReleaseChannel {
    /// The tag of the channel's metadata image: `alpha`, `beta`, `early-access`, `stable`,
    /// `rock-solid`, `lts`.
    pub const fn image_tag(self) -> &'static str {
        match self {
            Self::Alpha => "alpha",
            Self::Beta => "beta",
            Self::EarlyAccess => "early-access",
            Self::Stable => "stable",
            Self::RockSolid => "rock-solid",
            Self::Lts => "lts",
        }
    }
}

string_enum! {
    /// How releases of a module are applied (ModuleUpdatePolicy v1alpha2).
    #[derive(Default)]
    pub enum UpdateMode {
        /// Minor and patch releases apply automatically, within the update windows.
        #[default]
        Auto = "Auto",
        /// Every release needs the `modules.deckhouse.io/approved: "true"` annotation.
        Manual = "Manual",
        /// Patch releases apply automatically; minor releases need approval.
        AutoPatch = "AutoPatch",
        /// Releases are not applied. Only a `v1alpha1` ModuleUpdatePolicy can be written with
        /// it; it reads back unchanged through `v1alpha2` (as Deckhouse keeps it), so the
        /// schema of `v1alpha2` does not offer it.
        #[schemars(skip)]
        Ignore = "Ignore",
    }
}

string_enum! {
    /// A day of the week in an update window.
    pub enum Day {
        /// Monday.
        Mon = "Mon",
        /// Tuesday.
        Tue = "Tue",
        /// Wednesday.
        Wed = "Wed",
        /// Thursday.
        Thu = "Thu",
        /// Friday.
        Fri = "Fri",
        /// Saturday.
        Sat = "Sat",
        /// Sunday.
        Sun = "Sun",
    }
}

/// A time range in which releases may be applied. Times are UTC; `from` must be before `to`
/// (a window never crosses midnight).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UpdateWindow {
    /// Start of the window, `HH:MM` in UTC. Must be earlier than `to`.
    #[schemars(regex(pattern = r"^(?:\d|[01]\d|2[0-3]):[0-5]\d$"))]
    pub from: String,
    /// End of the window, `HH:MM` in UTC. Must be later than `from`.
    #[schemars(regex(pattern = r"^(?:\d|[01]\d|2[0-3]):[0-5]\d$"))]
    pub to: String,
    /// Days of the week the window applies to; empty means every day.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<Day>,
}

/// Minutes since midnight of a window bound matching [`WINDOW_TIME_PATTERN`]; `None` otherwise.
pub fn parse_window_time(value: &str) -> Option<u16> {
    let (hours, minutes) = value.split_once(':')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(hours) || hours.len() > 2 || minutes.len() != 2 || !digits(minutes) {
        return None;
    }
    let h: u16 = hours.parse().ok()?;
    let m: u16 = minutes.parse().ok()?;
    (h <= 23 && m <= 59).then_some(h * 60 + m)
}

impl UpdateWindow {
    /// Whether `from < to`, comparing as Deckhouse's admission policy does (`HHMM` as integers,
    /// which orders like minutes since midnight). `None` when a bound is not a valid time.
    pub fn is_ordered(&self) -> Option<bool> {
        Some(parse_window_time(&self.from)? < parse_window_time(&self.to)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_times_follow_the_crd_pattern() {
        assert_eq!(parse_window_time("0:00"), Some(0));
        assert_eq!(parse_window_time("9:05"), Some(545));
        assert_eq!(parse_window_time("09:05"), Some(545));
        assert_eq!(parse_window_time("23:59"), Some(23 * 60 + 59));
        for bad in [
            "24:00", "9:5", "009:00", "12:60", "", ":", "ab:cd", "1:000", "-1:00", "12",
        ] {
            assert_eq!(parse_window_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn ordering_compares_minutes() {
        let w = |from: &str, to: &str| UpdateWindow {
            from: from.into(),
            to: to.into(),
            days: vec![],
        };
        assert_eq!(w("9:00", "18:30").is_ordered(), Some(true));
        assert_eq!(w("18:30", "9:00").is_ordered(), Some(false));
        assert_eq!(w("10:00", "10:00").is_ordered(), Some(false));
        assert_eq!(w("x", "10:00").is_ordered(), None);
    }

    #[test]
    fn channel_tags_are_kebab_case() {
        assert_eq!(ReleaseChannel::EarlyAccess.image_tag(), "early-access");
        assert_eq!(ReleaseChannel::RockSolid.image_tag(), "rock-solid");
        assert_eq!(
            "Lts".parse::<ReleaseChannel>().unwrap(),
            ReleaseChannel::Lts
        );
        let err = "LTS".parse::<ReleaseChannel>().unwrap_err().to_string();
        assert!(
            err.contains("\"LTS\" is not a valid ReleaseChannel"),
            "{err}"
        );
    }
}
