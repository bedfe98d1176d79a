//! The garbage collection schedule (`storage.garbageCollection.schedule` of the `registry`
//! settings, `spec.garbageCollection.schedule` of RegistryStorage): five cron fields, read by one
//! parser — the one the replicas run their collections by — so admission refuses exactly what
//! a replica could not run.

use croner::Cron;

/// A five-field cron schedule that parsed.
#[derive(Clone, Debug)]
pub struct GcSchedule {
    cron: Cron,
    text: String,
}

/// Why a schedule is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("garbage collection schedule {schedule:?}: {reason}")]
pub struct ScheduleError {
    /// The expression.
    pub schedule: String,
    /// What is wrong with it.
    pub reason: String,
}

impl GcSchedule {
    /// Parses five whitespace-separated cron fields (minute hour day-of-month month
    /// day-of-week); anything else — six fields, `@daily`, a minute of 61 — is refused.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let bad = |reason: String| ScheduleError {
            schedule: text.to_owned(),
            reason,
        };
        let fields = text.split_whitespace().count();
        if fields != 5 {
            return Err(bad(format!("{fields} fields, expected 5")));
        }
        let cron: Cron = text
            .trim()
            .parse()
            .map_err(|e: croner::errors::CronError| bad(e.to_string()))?;
        Ok(Self {
            cron,
            text: text.to_owned(),
        })
    }

    /// The next time strictly after `now`.
    pub fn next_after(&self, now: &jiff::Zoned) -> Option<jiff::Zoned> {
        self.cron.find_next_occurrence(now, false).ok()
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_fields_the_cron_parser_accepts() {
        for (text, ok) in [
            ("17 3 * * *", true),
            (" 0 */6 * * 1-5 ", true),
            ("30 1 * * 2,6", true),
            ("0 0 1 jan mon", true),
            ("", false),
            ("@daily", false),
            ("0 3 * *", false),
            ("0 0 3 * * *", false),
            ("61 3 * * *", false),
            ("0 25 * * *", false),
            ("0 3 32 * *", false),
            ("0 3 * 13 *", false),
            ("x y z w v", false),
            ("*/0 * * * *", false),
        ] {
            assert_eq!(GcSchedule::parse(text).is_ok(), ok, "{text:?}");
        }
        let e = GcSchedule::parse("61 3 * * *").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("garbage collection schedule \"61 3 * * *\": "),
            "{e}"
        );
    }

    #[test]
    fn next_run() {
        let now: jiff::Zoned = "2026-11-30T12:00:00+00:00[UTC]".parse().unwrap();
        let s = GcSchedule::parse("30 1 * * 2,6").unwrap();
        assert_eq!(
            s.next_after(&now).unwrap().to_string(),
            "2026-12-01T01:30:00+00:00[UTC]",
            "Tuesday"
        );
    }
}
