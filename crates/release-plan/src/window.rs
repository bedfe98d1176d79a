//! Update windows (Deckhouse's `go_lib/hooks/update`): when releases may be applied.
//!
//! A window is `from`–`to` (`HH:MM`, always UTC) on a set of weekdays (none listed means every
//! day). A window is open strictly between its bounds: at exactly `from` and at exactly `to` it is
//! closed. Windows never cross midnight (`from < to` is required). Several windows are OR-ed, and
//! an empty list means "always allowed".

use jiff::Timestamp;

use crate::Error;

const NS_PER_MINUTE: i128 = 60_000_000_000;
const NS_PER_DAY: i128 = 24 * 60 * NS_PER_MINUTE;
const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// One update window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Minutes since midnight UTC.
    from: u32,
    /// Minutes since midnight UTC, greater than `from`.
    to: u32,
    /// Bit `i` set = weekday `i` (Monday = 0) listed; 0 = every day.
    days: u8,
}

impl Window {
    /// A window from its settings: `from`/`to` as `H:MM` or `HH:MM` (the CRD pattern
    /// `^(?:\d|[01]\d|2[0-3]):[0-5]\d$`), `days` as `Mon`..`Sun` in any case.
    pub fn new<S: AsRef<str>>(from: &str, to: &str, days: &[S]) -> Result<Self, Error> {
        let from_minutes = parse_time(from)?;
        let to_minutes = parse_time(to)?;
        if from_minutes >= to_minutes {
            return Err(Error::WindowNotOrdered {
                from: from.to_owned(),
                to: to.to_owned(),
            });
        }
        let mut mask = 0u8;
        for day in days {
            let day = day.as_ref();
            let lower = day.to_ascii_lowercase();
            let index =
                DAY_NAMES
                    .iter()
                    .position(|d| *d == lower)
                    .ok_or_else(|| Error::UnknownDay {
                        value: day.to_owned(),
                    })?;
            mask |= 1 << index;
        }
        Ok(Self {
            from: from_minutes,
            to: to_minutes,
            days: mask,
        })
    }

    /// Whether this window is open at `t`: `t`'s weekday is listed (or none are) and
    /// `from < t < to` on `t`'s day, both bounds excluded.
    pub fn is_allowed(&self, t: Timestamp) -> bool {
        let ns = t.as_nanosecond();
        let day = ns.div_euclid(NS_PER_DAY);
        let in_day = ns.rem_euclid(NS_PER_DAY);
        self.applies_on(day)
            && in_day > i128::from(self.from) * NS_PER_MINUTE
            && in_day < i128::from(self.to) * NS_PER_MINUTE
    }

    /// The earliest instant `≥ t` at which this window is open, or at which it opens (its `from`
    /// bound; the window is open right after it).
    fn next_allowed(&self, t: Timestamp) -> Result<Timestamp, Error> {
        let ns = t.as_nanosecond();
        let today = ns.div_euclid(NS_PER_DAY);
        // Every window applies at least once a week, and on day `today + 7` its close lies after `t`.
        for day in today..=today + 7 {
            if !self.applies_on(day) {
                continue;
            }
            let open = day * NS_PER_DAY + i128::from(self.from) * NS_PER_MINUTE;
            let close = day * NS_PER_DAY + i128::from(self.to) * NS_PER_MINUTE;
            if ns < close {
                let at = ns.max(open);
                return Timestamp::from_nanosecond(at).map_err(|_| Error::TimeOutOfRange {
                    what: "the next update window",
                });
            }
        }
        Err(Error::TimeOutOfRange {
            what: "the next update window",
        })
    }

    /// Whether the window applies on the day `day` (days since 1970-01-01, a Thursday).
    fn applies_on(&self, day: i128) -> bool {
        if self.days == 0 {
            return true;
        }
        // 1970-01-01 is a Thursday, weekday index 3 with Monday = 0.
        let weekday = (day + 3).rem_euclid(7);
        self.days & (1 << weekday) != 0
    }
}

/// Minutes since midnight of `H:MM` / `HH:MM`.
fn parse_time(value: &str) -> Result<u32, Error> {
    let invalid = || Error::InvalidWindowTime {
        value: value.to_owned(),
    };
    let (hours, minutes) = value.split_once(':').ok_or_else(invalid)?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(hours) || hours.len() > 2 || minutes.len() != 2 || !digits(minutes) {
        return Err(invalid());
    }
    let h: u32 = hours.parse().map_err(|_| invalid())?;
    let m: u32 = minutes.parse().map_err(|_| invalid())?;
    if h > 23 || m > 59 {
        return Err(invalid());
    }
    Ok(h * 60 + m)
}

/// The update windows of a policy, OR-ed. No windows means always allowed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Windows(Vec<Window>);

impl Windows {
    /// Windows from a list.
    pub fn new(windows: Vec<Window>) -> Self {
        Self(windows)
    }

    /// No restriction: every instant is allowed.
    pub fn always() -> Self {
        Self(Vec::new())
    }

    /// The windows.
    pub fn as_slice(&self) -> &[Window] {
        &self.0
    }

    /// Whether a release may be applied at `t`: no windows, or at least one open.
    pub fn is_allowed(&self, t: Timestamp) -> bool {
        self.0.is_empty() || self.0.iter().any(|w| w.is_allowed(t))
    }

    /// The earliest instant `≥ t` at which a release may be applied: `t` itself when allowed (or
    /// when there are no windows), otherwise the next instant a window opens (its `from`; the
    /// window is open right after it, which is what Deckhouse reports as "until …").
    pub fn next_allowed(&self, t: Timestamp) -> Result<Timestamp, Error> {
        let mut best: Option<Timestamp> = None;
        for window in &self.0 {
            let at = window.next_allowed(t)?;
            best = Some(best.map_or(at, |b| b.min(at)));
        }
        Ok(best.unwrap_or(t))
    }
}

#[cfg(test)]
mod tests;
