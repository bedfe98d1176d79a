//! Time as an input: every decision reads "now" and every retry waits through a [`Clock`], so
//! tests move time instead of waiting for update windows, canary waves or webhook retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use jiff::{SignedDuration, Timestamp};

/// Where "now" comes from, and how the controller waits between retries.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
    /// Waits `duration` (a retry backoff).
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// The system clock and tokio's timers.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// The system clock moved by a fixed offset: it starts at a chosen instant and runs on at real
/// speed, so a whole process (`d8 controller --clock-start`) lives at a time a test picks while
/// its timers still wait for real.
#[derive(Clone, Copy, Debug)]
pub struct OffsetClock {
    offset: SignedDuration,
}

impl OffsetClock {
    /// A clock reading `start` now.
    pub fn starting_at(start: Timestamp) -> Self {
        Self {
            offset: start.duration_since(Timestamp::now()),
        }
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
            .checked_add(self.offset)
            .unwrap_or(Timestamp::MAX)
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A clock that only moves when told to; [`Clock::sleep`] advances it instead of waiting.
#[derive(Clone, Debug)]
pub struct ManualClock {
    now: Arc<Mutex<Timestamp>>,
}

impl ManualClock {
    /// A clock standing at `now`.
    pub fn new(now: Timestamp) -> Self {
        Self {
            now: Arc::new(Mutex::new(now)),
        }
    }

    /// Moves the clock to `now`.
    pub fn set(&self, now: Timestamp) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: SignedDuration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now = now.checked_add(by).unwrap_or(Timestamp::MAX);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let by = SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX);
        self.advance(by);
        Box::pin(std::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_clock_sleep_advances_instead_of_waiting() {
        let start: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let clock = ManualClock::new(start);
        let began = std::time::Instant::now();
        clock.sleep(Duration::from_secs(3600)).await;
        assert!(began.elapsed() < Duration::from_secs(1));
        assert_eq!(
            clock.now(),
            "2024-01-01T01:00:00Z".parse::<Timestamp>().unwrap()
        );
        clock.set(start);
        assert_eq!(clock.now(), start);
    }

    #[test]
    fn offset_clock_starts_where_told_and_runs_on() {
        let start: Timestamp = "2025-03-03T08:30:00Z".parse().unwrap();
        let clock = OffsetClock::starting_at(start);
        let first = clock.now();
        assert!(first >= start && first < start + SignedDuration::from_secs(5));
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while clock.now() <= first {
            assert!(
                std::time::Instant::now() < deadline,
                "it runs at real speed"
            );
            std::hint::spin_loop();
        }
    }
}
