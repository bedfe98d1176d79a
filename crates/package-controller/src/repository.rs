//! When a PackageRepository is scanned: every `max(scanInterval, 3m)` (default `6h`), a new
//! operation `<repo>-scan-<unix seconds>` (labels `packages.deckhouse.io/repository`,
//! `operation-trigger: auto`, `operation-type: Update`; `fullScan` until one has completed
//! successfully, then incremental scans, as Deckhouse's; timeout `5m`) — unless one of its operations has not completed yet. A scan on demand is an
//! operation the user creates (`trigger: manual`).

use std::time::Duration;

/// Deckhouse's default `scanInterval`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(6 * 3600);
/// The shortest interval honoured.
pub const MIN_INTERVAL: Duration = Duration::from_secs(180);

/// The interval of a repository's `spec.scanInterval`.
pub fn interval(scan_interval: Option<&str>) -> Duration {
    scan_interval
        .and_then(module_controller::controller::parse_scan_interval)
        .unwrap_or(DEFAULT_INTERVAL)
        .max(MIN_INTERVAL)
}

/// What the repository's operations say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Operations {
    /// Whether one has completed successfully (`Completed=True`).
    pub succeeded: bool,
    /// Whether one has not completed.
    pub unfinished: bool,
    /// Seconds since the newest one was created.
    pub newest_age: Option<Duration>,
}

/// What to do about a repository now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Create an operation (`full_scan` until one has succeeded).
    Create {
        /// Whether it scans every version.
        full_scan: bool,
    },
    /// Look again after this long.
    Wait(Duration),
}

/// Decides whether a repository is due a scan.
pub fn schedule(interval: Duration, ops: Operations) -> Schedule {
    if ops.unfinished {
        return Schedule::Wait(interval);
    }
    let full_scan = !ops.succeeded;
    match ops.newest_age {
        None => Schedule::Create { full_scan },
        Some(age) if age >= interval => Schedule::Create { full_scan },
        Some(age) => Schedule::Wait(interval - age),
    }
}

/// The name of an automatic operation.
pub fn operation_name(repository: &str, unix_seconds: i64) -> String {
    format!("{repository}-scan-{unix_seconds}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        let table = [
            (None, DEFAULT_INTERVAL),
            (Some("1h"), Duration::from_secs(3600)),
            (Some("1m"), MIN_INTERVAL),
            (Some("garbage"), DEFAULT_INTERVAL),
            (Some("0s"), DEFAULT_INTERVAL),
        ];
        for (text, want) in table {
            assert_eq!(interval(text), want, "{text:?}");
        }
    }

    #[test]
    fn schedules() {
        let hour = Duration::from_secs(3600);
        let ops = |succeeded, unfinished, age: Option<u64>| Operations {
            succeeded,
            unfinished,
            newest_age: age.map(Duration::from_secs),
        };
        let table = [
            (
                ops(false, false, None),
                Schedule::Create { full_scan: true },
            ),
            (ops(true, true, Some(10)), Schedule::Wait(hour)),
            (ops(false, true, Some(7200)), Schedule::Wait(hour)),
            (
                ops(true, false, Some(600)),
                Schedule::Wait(Duration::from_secs(3000)),
            ),
            (
                ops(true, false, Some(3600)),
                Schedule::Create { full_scan: false },
            ),
            // Every earlier scan failed: the next one is still a full scan.
            (
                ops(false, false, Some(3600)),
                Schedule::Create { full_scan: true },
            ),
        ];
        for (o, want) in table {
            assert_eq!(schedule(hour, o), want, "{o:?}");
        }
        assert_eq!(operation_name("main", 1700000000), "main-scan-1700000000");
    }
}
