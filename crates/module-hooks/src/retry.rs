//! What to do after a hook failed (pure): shell-operator's exponential delay for a task that
//! is retried, and `allowFailure`.

use std::time::Duration;

use crate::config::HookConfig;
use crate::context::{BindingContext, ContextKind};

/// A failed task is first retried after this delay (addon-operator's queues).
pub const INITIAL_RETRY_DELAY: Duration = Duration::from_secs(5);
/// The delay never grows beyond this.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(32);

/// The delay before retry number `retry_count` (0 for the first retry): 5s, then
/// 5s + 2^(n-1)s + jitter, truncated to 100ms, capped at 32s. `jitter_ms` is the random
/// addition shell-operator draws from 0..1000 ms.
pub fn retry_delay(retry_count: u32, jitter_ms: u64) -> Duration {
    // log2(32s / 1s): after that many rounds the maximum is returned.
    const EXPONENTIAL_ROUNDS: u32 = 5;
    if retry_count == 0 {
        return INITIAL_RETRY_DELAY;
    }
    let delta = if retry_count <= EXPONENTIAL_ROUNDS {
        Duration::from_secs(1u64 << (retry_count - 1))
    } else {
        MAX_RETRY_DELAY
    };
    let delay = INITIAL_RETRY_DELAY + delta + Duration::from_millis(jitter_ms.min(999));
    let truncated = Duration::from_millis(delay.as_millis() as u64 / 100 * 100);
    truncated.min(MAX_RETRY_DELAY)
}

/// The decision after a failed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Keep the task at the head of its queue and run it again after the delay.
    Retry(Duration),
    /// `allowFailure: true`: log the error and go on as if the hook succeeded.
    Skip,
}

/// Whether the binding of a run allows failure: only `schedule` and `kubernetes` bindings can
/// (onStartup and the helm bindings never do). A run with several contexts takes the first.
pub fn allow_failure(config: &HookConfig, contexts: &[BindingContext]) -> bool {
    let Some(first) = contexts.first() else {
        return false;
    };
    match &first.kind {
        ContextKind::Schedule => config
            .schedules
            .iter()
            .any(|s| s.name == first.binding && s.allow_failure),
        ContextKind::Synchronization { .. } | ContextKind::Event { .. } => config
            .kubernetes
            .iter()
            .any(|k| k.name == first.binding && k.allow_failure),
        ContextKind::OnStartup
        | ContextKind::Helm
        | ContextKind::Validating { .. }
        | ContextKind::Conversion { .. } => false,
    }
}

/// What to do after the `retry_count`-th failure of a run.
pub fn after_failure(allow_failure: bool, retry_count: u32, jitter_ms: u64) -> AfterFailure {
    if allow_failure {
        AfterFailure::Skip
    } else {
        AfterFailure::Retry(retry_delay(retry_count, jitter_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_follow_shell_operator() {
        let rows = [
            (0, 0, 5_000),
            (0, 999, 5_000),
            (1, 0, 6_000),
            (1, 850, 6_800),
            (2, 0, 7_000),
            (3, 0, 9_000),
            (4, 0, 13_000),
            (5, 0, 21_000),
            (5, 999, 21_900),
            (6, 0, 32_000),
            (60, 500, 32_000),
        ];
        for (retry, jitter, want_ms) in rows {
            assert_eq!(
                retry_delay(retry, jitter),
                Duration::from_millis(want_ms),
                "retry {retry} jitter {jitter}"
            );
        }
    }

    #[test]
    fn allow_failure_skips() {
        assert_eq!(after_failure(true, 3, 0), AfterFailure::Skip);
        assert_eq!(
            after_failure(false, 1, 0),
            AfterFailure::Retry(Duration::from_secs(6))
        );
    }
}
