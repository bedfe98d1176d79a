//! Targets that recently failed to answer are tried after the others for a while.
//!
//! Without this, a dead first target (a cache replica cut off, still first in the RegistryNode
//! until the controller rewrites it) costs every request its connect or response timeout before
//! the failover — containerd pays it per layer (containerd#4861). A target that refused the
//! connection, reset it or timed out before answering is *avoided* for a window: requests put it
//! behind the targets in good standing (it is still tried when every other target fails, so
//! nothing is refused that would have been served). The window doubles with each failure in a
//! row — 10 s, 20 s, 40 s … at most 5 min — so a target that stays dead costs one request a
//! timeout per window; any answer from it ends the avoidance. Dragonfly's scheduler keeps failed
//! parents on a blocklist in the same spirit; containerd itself remembers nothing between pulls.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The first window.
const FIRST: Duration = Duration::from_secs(10);
/// The longest window.
const LONGEST: Duration = Duration::from_secs(300);
/// Targets remembered at most (only configured hosts are targets; this bounds a layout churn).
const CAPACITY: usize = 256;

/// One target's recent failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// Failures in a row.
    pub failures: u32,
    /// Avoided until then.
    pub until: Instant,
}

/// How long a target is avoided after `failures` failures in a row.
pub(crate) fn window(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST.saturating_mul(1 << doublings).min(LONGEST)
}

/// The record after a failure at `now`; `None` while the target is avoided already (requests
/// sent before the window opened fail together: one outage, not failures in a row).
pub(crate) fn failed(previous: Option<Record>, now: Instant) -> Option<Record> {
    if avoided(previous.as_ref(), now) {
        return None;
    }
    let failures = previous.map_or(0, |r| r.failures).saturating_add(1);
    Some(Record {
        failures,
        until: now + window(failures),
    })
}

/// Whether a target with `record` is avoided at `now`.
pub(crate) fn avoided(record: Option<&Record>, now: Instant) -> bool {
    record.is_some_and(|r| now < r.until)
}

/// The order to try targets in, by index: those in good standing first, then the avoided ones,
/// each group in its configured order.
pub(crate) fn order(avoided: &[bool]) -> Vec<usize> {
    let (good, bad): (Vec<usize>, Vec<usize>) = (0..avoided.len()).partition(|&i| !avoided[i]);
    good.into_iter().chain(bad).collect()
}

/// The agent's memory of failed targets, by name (host).
#[derive(Debug, Default)]
pub(crate) struct Avoided {
    by_target: Mutex<HashMap<String, Record>>,
}

impl Avoided {
    /// Records a failure of `target`; returns the new record, `None` when it was avoided
    /// already.
    pub(crate) fn fail(&self, target: &str) -> Option<Record> {
        let mut map = self.by_target.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if map.len() >= CAPACITY && !map.contains_key(target) {
            map.retain(|_, r| now < r.until);
            if map.len() >= CAPACITY
                && let Some(oldest) = map
                    .iter()
                    .min_by_key(|(_, r)| r.until)
                    .map(|(t, _)| t.clone())
            {
                map.remove(&oldest);
            }
        }
        let record = failed(map.get(target).copied(), now)?;
        map.insert(target.to_owned(), record);
        Some(record)
    }

    /// `target` answered: it is in good standing again. Returns whether it was avoided.
    pub(crate) fn answered(&self, target: &str) -> bool {
        let mut map = self.by_target.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(target).is_some()
    }

    /// Whether each of `targets` is avoided now.
    pub(crate) fn flags<'a>(&self, targets: impl Iterator<Item = &'a str>) -> Vec<bool> {
        let map = self.by_target.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        targets.map(|t| avoided(map.get(t), now)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_doubles_with_failures_in_a_row_up_to_five_minutes() {
        for (failures, seconds) in [
            (1, 10),
            (2, 20),
            (3, 40),
            (4, 80),
            (5, 160),
            (6, 300),
            (7, 300),
            (u32::MAX, 300),
        ] {
            assert_eq!(window(failures), Duration::from_secs(seconds), "{failures}");
        }
    }

    #[test]
    fn a_failure_opens_or_extends_the_window_and_it_lapses() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let first = failed(None, t0).unwrap();
        assert_eq!(
            first,
            Record {
                failures: 1,
                until: t0 + s(10)
            }
        );
        // Requests that were already waiting on it fail inside the window: the same outage.
        assert_eq!(failed(Some(first), t0 + s(3)), None);
        // The first request after the window fails again: twice as long.
        let second = failed(Some(first), t0 + s(10)).unwrap();
        assert_eq!(
            second,
            Record {
                failures: 2,
                until: t0 + s(30)
            }
        );
        for (record, at, expected) in [
            (None, t0, false),
            (Some(first), t0, true),
            (Some(first), t0 + s(9), true),
            (Some(first), t0 + s(10), false),
            (Some(second), t0 + s(29), true),
            (Some(second), t0 + s(30), false),
        ] {
            assert_eq!(avoided(record.as_ref(), at), expected, "{record:?} {at:?}");
        }
    }

    #[test]
    fn avoided_targets_go_last_keeping_the_configured_order() {
        for (flags, expected) in [
            (vec![], vec![]),
            (vec![false, false, false], vec![0, 1, 2]),
            (vec![true, false, false], vec![1, 2, 0]),
            (vec![true, false, true, false], vec![1, 3, 0, 2]),
            (vec![true, true], vec![0, 1]),
        ] {
            assert_eq!(order(&flags), expected, "{flags:?}");
        }
    }

    #[test]
    fn an_answer_ends_the_avoidance() {
        let avoided = Avoided::default();
        assert_eq!(avoided.fail("10.0.0.4:5001").map(|r| r.failures), Some(1));
        assert_eq!(avoided.fail("10.0.0.4:5001"), None, "avoided already");
        assert_eq!(
            avoided.flags(["10.0.0.4:5001", "10.0.0.5:5001"].into_iter()),
            [true, false]
        );
        assert!(avoided.answered("10.0.0.4:5001"));
        assert!(!avoided.answered("10.0.0.4:5001"));
        assert_eq!(avoided.flags(["10.0.0.4:5001"].into_iter()), [false]);
        assert_eq!(avoided.fail("10.0.0.4:5001").map(|r| r.failures), Some(1));
    }
}
