//! Targets that recently failed to answer are tried after the others for a while.
//!
//! Without this, a dead first target (a cache replica cut off, still first in the RegistryNode
//! until the controller rewrites it) costs every request its connect or response timeout before
//! the failover — containerd pays it per layer (containerd#4861). A target that refused the
//! connection, reset it or timed out before answering is *avoided* for a window: requests put it
//! behind the targets in good standing (it is still tried when every other target fails, so
//! nothing is refused that would have been served). Requests already waiting on it when the
//! window opens give up and go to the next target. When the window lapses, the target is
//! *probed* (`GET /v2/` in the background) and stays behind the others until an answer comes;
//! a failed probe opens the next window, twice as long — 10 s, 20 s, 40 s … at most 5 min — so
//! a target that stays dead costs no request a timeout after the first. An answer to the probe
//! ends the avoidance; an answer to a request also clears the failures in a row. Envoy's outlier
//! detection ejects hosts and lets health checks bring them back in the same spirit; containerd
//! itself remembers nothing between pulls.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

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
    /// When the failure that opened the window happened.
    pub at: Instant,
    /// The window ends then; the target is probed after it.
    pub until: Instant,
    /// The probe after the window.
    pub probe: Probe,
}

/// Where the probe of a target whose window lapsed is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// None started yet.
    NotYet,
    /// Started: the target stays avoided until it answers.
    Running,
    /// Answered: the target is back in its place, but a failure before any request gets an
    /// answer from it still counts as one more in a row (a registry that answers `/v2/` and
    /// hangs on blobs gets ever longer windows).
    Answered,
}

/// How long a target is avoided after `failures` failures in a row.
pub(crate) fn window(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST.saturating_mul(1 << doublings).min(LONGEST)
}

/// The record after a failure at `now`; `None` while the window is open already (requests
/// sent before it opened fail together: one outage, not failures in a row).
pub(crate) fn failed(previous: Option<Record>, now: Instant) -> Option<Record> {
    if previous.is_some_and(|r| now < r.until) {
        return None;
    }
    let failures = previous.map_or(0, |r| r.failures).saturating_add(1);
    Some(Record {
        failures,
        at: now,
        until: now + window(failures),
        probe: Probe::NotYet,
    })
}

/// Where a target with `record` stands at `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Tried in its configured place.
    Good,
    /// Tried after the others.
    Avoided,
    /// Tried after the others, and its window has lapsed with no probe running: one is due.
    Due,
}

/// Where a target with `record` stands at `now`: avoided from its failure until a probe (or
/// any request) gets an answer from it.
pub(crate) fn standing(record: Option<&Record>, now: Instant) -> Standing {
    match record.map(|r| (r.probe, now >= r.until)) {
        None | Some((Probe::Answered, _)) => Standing::Good,
        Some((Probe::NotYet, true)) => Standing::Due,
        Some((Probe::NotYet, false) | (Probe::Running, _)) => Standing::Avoided,
    }
}

/// Whether a request to a target with `record`, sent at `sent`, should stop waiting: the target
/// failed another request since.
pub(crate) fn failed_since(record: Option<&Record>, sent: Instant) -> bool {
    record.is_some_and(|r| r.at > sent)
}

/// The order to try targets in, by index: those in good standing first, then the avoided ones,
/// each group in its configured order.
pub(crate) fn order(avoided: &[bool]) -> Vec<usize> {
    let (good, bad): (Vec<usize>, Vec<usize>) = (0..avoided.len()).partition(|&i| !avoided[i]);
    good.into_iter().chain(bad).collect()
}

/// The agent's memory of failed targets, by name (host).
#[derive(Debug)]
pub(crate) struct Avoided {
    by_target: Mutex<HashMap<String, Record>>,
    /// Bumped whenever a window opens, for the requests waiting on a target.
    opened: watch::Sender<u64>,
}

impl Default for Avoided {
    fn default() -> Self {
        Self {
            by_target: Mutex::default(),
            opened: watch::Sender::new(0),
        }
    }
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
        drop(map);
        self.opened.send_modify(|n| *n = n.wrapping_add(1));
        Some(record)
    }

    /// Resolves once `target` fails a request other than one sent at `sent` (a window opens
    /// after `sent`): whoever waits on it can stop.
    pub(crate) async fn fails_after(&self, target: &str, sent: Instant) {
        let mut opened = self.opened.subscribe();
        loop {
            let record = self.record(target);
            if failed_since(record.as_ref(), sent) {
                return;
            }
            // The sender lives as long as `self`: `changed` cannot fail while borrowed.
            if opened.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    fn record(&self, target: &str) -> Option<Record> {
        let map = self.by_target.lock().unwrap_or_else(|e| e.into_inner());
        map.get(target).copied()
    }

    /// `target` answered a request: its failures are forgotten. Returns whether it was avoided
    /// until then.
    pub(crate) fn answered(&self, target: &str) -> bool {
        let mut map = self.by_target.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(target)
            .is_some_and(|r| r.probe != Probe::Answered)
    }

    /// `target` answered its probe: back in its place. Returns whether it was avoided until
    /// then.
    pub(crate) fn probe_answered(&self, target: &str) -> bool {
        let mut map = self.by_target.lock().unwrap_or_else(|e| e.into_inner());
        match map.get_mut(target) {
            Some(record) if record.probe == Probe::Running => {
                record.probe = Probe::Answered;
                true
            }
            _ => false,
        }
    }

    /// Where each of `targets` stands now. A target reported [`Standing::Due`] is marked as
    /// probed: the caller starts the probe, and nobody else is told to.
    pub(crate) fn standings<'a>(&self, targets: impl Iterator<Item = &'a str>) -> Vec<Standing> {
        let mut map = self.by_target.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        targets
            .map(|t| {
                let standing = standing(map.get(t), now);
                if standing == Standing::Due
                    && let Some(record) = map.get_mut(t)
                {
                    record.probe = Probe::Running;
                }
                standing
            })
            .collect()
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
    fn a_failure_opens_a_window_and_a_probe_is_due_when_it_lapses() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let first = failed(None, t0).unwrap();
        assert_eq!(
            first,
            Record {
                failures: 1,
                at: t0,
                until: t0 + s(10),
                probe: Probe::NotYet,
            }
        );
        // Requests that were already waiting on it fail inside the window: the same outage.
        assert_eq!(failed(Some(first), t0 + s(3)), None);
        // A failure after the window (the probe's, or a request's when every other target
        // failed too) opens one twice as long.
        let second = failed(Some(first), t0 + s(10)).unwrap();
        assert_eq!((second.failures, second.until), (2, t0 + s(30)));
        let probing = Record {
            probe: Probe::Running,
            ..first
        };
        let probed = Record {
            probe: Probe::Answered,
            ..first
        };
        for (record, at, expected) in [
            (None, t0, Standing::Good),
            (Some(first), t0, Standing::Avoided),
            (Some(first), t0 + s(9), Standing::Avoided),
            (Some(first), t0 + s(10), Standing::Due),
            (Some(probing), t0 + s(10), Standing::Avoided),
            (Some(probing), t0 + s(1000), Standing::Avoided),
            (Some(probed), t0 + s(10), Standing::Good),
            (Some(second), t0 + s(29), Standing::Avoided),
            (Some(second), t0 + s(30), Standing::Due),
        ] {
            assert_eq!(standing(record.as_ref(), at), expected, "{record:?} {at:?}");
        }
    }

    #[test]
    fn a_request_stops_waiting_only_for_a_failure_after_it_was_sent() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let record = failed(None, t0 + s(5)).unwrap();
        assert!(failed_since(Some(&record), t0));
        assert!(!failed_since(Some(&record), t0 + s(5)));
        assert!(!failed_since(Some(&record), t0 + s(6)));
        assert!(!failed_since(None, t0));
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
            avoided.standings(["10.0.0.4:5001", "10.0.0.5:5001"].into_iter()),
            [Standing::Avoided, Standing::Good]
        );
        assert!(avoided.answered("10.0.0.4:5001"));
        assert!(!avoided.answered("10.0.0.4:5001"));
        assert_eq!(
            avoided.standings(["10.0.0.4:5001"].into_iter()),
            [Standing::Good]
        );
        assert_eq!(avoided.fail("10.0.0.4:5001").map(|r| r.failures), Some(1));
    }

    /// The memory of a target that failed once, 11 s ago: its window has lapsed.
    fn lapsed(target: &str) -> Avoided {
        let avoided = Avoided::default();
        let at = Instant::now() - Duration::from_secs(11);
        avoided
            .by_target
            .lock()
            .unwrap()
            .insert(target.into(), failed(None, at).unwrap());
        avoided
    }

    #[test]
    fn a_lapsed_window_is_due_one_probe() {
        let avoided = lapsed("10.0.0.4:5001");
        let targets = ["10.0.0.4:5001", "10.0.0.5:5001"];
        assert_eq!(
            avoided.standings(targets.into_iter()),
            [Standing::Due, Standing::Good]
        );
        // The probe runs: the others see it avoided, and start none.
        assert_eq!(
            avoided.standings(targets.into_iter()),
            [Standing::Avoided, Standing::Good]
        );
        // It fails: the next window, twice as long.
        assert_eq!(avoided.fail("10.0.0.4:5001").map(|r| r.failures), Some(2));
        assert_eq!(
            avoided.standings(targets.into_iter()),
            [Standing::Avoided, Standing::Good]
        );
    }

    #[test]
    fn a_probe_answer_readmits_but_only_a_request_answer_forgets_the_failures() {
        let avoided = lapsed("a:1");
        assert!(!avoided.probe_answered("a:1"), "no probe was running");
        assert_eq!(avoided.standings(["a:1"].into_iter()), [Standing::Due]);
        assert!(avoided.probe_answered("a:1"));
        assert_eq!(avoided.standings(["a:1"].into_iter()), [Standing::Good]);
        // It answers /v2/ but its next request times out: the second failure in a row.
        assert_eq!(avoided.fail("a:1").map(|r| r.failures), Some(2));
        // A request answered after the next probe: everything forgotten.
        avoided
            .by_target
            .lock()
            .unwrap()
            .get_mut("a:1")
            .unwrap()
            .until = Instant::now();
        assert_eq!(avoided.standings(["a:1"].into_iter()), [Standing::Due]);
        assert!(avoided.probe_answered("a:1"));
        assert!(!avoided.answered("a:1"), "it was back in its place already");
        assert_eq!(avoided.fail("a:1").map(|r| r.failures), Some(1));
    }

    #[tokio::test]
    async fn waiting_requests_learn_of_a_failure_after_they_were_sent() {
        let avoided = std::sync::Arc::new(Avoided::default());
        assert!(avoided.fail("a:1").is_some());
        let sent = Instant::now();
        let waiting = tokio::spawn({
            let avoided = avoided.clone();
            async move { avoided.fails_after("b:2", sent).await }
        });
        // Neither a failure of another target nor one from before counts.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(avoided.fail("c:3").is_some());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        assert!(avoided.fail("b:2").is_some());
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiter stops")
            .unwrap();
        // A request sent to `a:1` after its failure (every other target failed) waits on.
        let after = Instant::now();
        let last_resort = avoided.fails_after("a:1", after);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), last_resort)
                .await
                .is_err()
        );
    }
}
