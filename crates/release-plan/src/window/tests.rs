use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn w(from: &str, to: &str, days: &[&str]) -> Window {
    Window::new(from, to, days).unwrap()
}

#[test]
fn is_allowed_table() {
    // 2021-10-13 is a Wednesday, 2021-10-17 a Sunday, 2021-10-18 a Monday.
    let cases: &[(&str, Vec<Window>, &str, bool)] = &[
        ("no windows: always", vec![], "2021-10-13T03:00:00Z", true),
        (
            "inside, no days",
            vec![w("16:00", "18:00", &[])],
            "2021-10-13T16:35:00Z",
            true,
        ),
        (
            "exactly from is closed",
            vec![w("16:00", "18:00", &[])],
            "2021-10-13T16:00:00Z",
            false,
        ),
        (
            "one ns after from is open",
            vec![w("16:00", "18:00", &[])],
            "2021-10-13T16:00:00.000000001Z",
            true,
        ),
        (
            "exactly to is closed",
            vec![w("16:00", "18:00", &[])],
            "2021-10-13T18:00:00Z",
            false,
        ),
        (
            "one ns before to is open",
            vec![w("16:00", "18:00", &[])],
            "2021-10-13T17:59:59.999999999Z",
            true,
        ),
        (
            "before window",
            vec![w("16:00", "18:00", &[])],
            "2021-10-13T15:59:00Z",
            false,
        ),
        (
            "listed day",
            vec![w("16:00", "18:00", &["wed"])],
            "2021-10-13T17:00:00Z",
            true,
        ),
        (
            "day in other case",
            vec![w("16:00", "18:00", &["WED"])],
            "2021-10-13T17:00:00Z",
            true,
        ),
        (
            "unlisted day",
            vec![w("16:00", "18:00", &["Tue", "Thu"])],
            "2021-10-13T17:00:00Z",
            false,
        ),
        (
            "sunday late",
            vec![w("0:00", "23:59", &["Sun"])],
            "2021-10-17T23:58:59Z",
            true,
        ),
        (
            "monday just after midnight is not sunday",
            vec![w("0:00", "23:59", &["Sun"])],
            "2021-10-18T00:00:30Z",
            false,
        ),
        (
            "midnight exactly is closed even for 00:00",
            vec![w("00:00", "01:00", &[])],
            "2021-10-18T00:00:00Z",
            false,
        ),
        (
            "last minute of the day never open",
            vec![w("00:00", "23:59", &[])],
            "2021-10-18T23:59:30Z",
            false,
        ),
        (
            "OR of windows: second matches",
            vec![w("08:00", "10:00", &["Mon"]), w("20:00", "22:00", &["Wed"])],
            "2021-10-13T21:00:00Z",
            true,
        ),
        (
            "OR of windows: none matches",
            vec![w("08:00", "10:00", &["Mon"]), w("20:00", "22:00", &["Wed"])],
            "2021-10-13T09:00:00Z",
            false,
        ),
        (
            "single-digit hour",
            vec![w("8:00", "10:00", &[])],
            "2021-10-13T08:30:00Z",
            true,
        ),
        (
            "before 1970 still by UTC day",
            vec![w("23:00", "23:30", &["Wed"])],
            "1969-12-31T23:10:00Z",
            true,
        ),
    ];
    for (name, windows, at, expected) in cases {
        let windows = Windows::new(windows.clone());
        assert_eq!(windows.is_allowed(ts(at)), *expected, "{name}");
    }
}

/// Deckhouse's `TestNextAllowedWindow` cases (go_lib/hooks/update/window_test.go), plus day
/// boundaries.
#[test]
fn next_allowed_table() {
    let wed = || w("16:00", "18:00", &["wed"]);
    let sat = || w("20:00", "22:00", &["sat"]);
    let daily = || w("20:00", "22:00", &[]);
    let cases: &[(&str, Vec<Window>, &str, &str)] = &[
        (
            "min time is inside the window",
            vec![wed()],
            "2021-10-13T16:35:00Z",
            "2021-10-13T16:35:00Z",
        ),
        (
            "min time is before the window",
            vec![wed()],
            "2021-10-12T16:35:00Z",
            "2021-10-13T16:00:00Z",
        ),
        (
            "min time between two windows",
            vec![wed(), sat()],
            "2021-10-13T19:35:00Z",
            "2021-10-16T20:00:00Z",
        ),
        (
            "min time after single window",
            vec![wed()],
            "2021-10-13T18:01:00Z",
            "2021-10-20T16:00:00Z",
        ),
        (
            "min time after all windows",
            vec![sat(), wed()],
            "2021-10-17T19:35:00Z",
            "2021-10-20T16:00:00Z",
        ),
        (
            "without days: before the current day window",
            vec![daily()],
            "2021-10-17T19:35:00Z",
            "2021-10-17T20:00:00Z",
        ),
        (
            "without days: after current day",
            vec![daily()],
            "2021-10-17T22:35:00Z",
            "2021-10-18T20:00:00Z",
        ),
        (
            "without days: inside the day",
            vec![daily()],
            "2021-10-17T21:35:00Z",
            "2021-10-17T21:35:00Z",
        ),
        (
            "without days: equal to start",
            vec![daily()],
            "2021-10-17T20:00:00Z",
            "2021-10-17T20:00:00Z",
        ),
        (
            "equal to end moves to the next day",
            vec![daily()],
            "2021-10-17T22:00:00Z",
            "2021-10-18T20:00:00Z",
        ),
        (
            "no windows: now",
            vec![],
            "2021-10-17T22:00:00Z",
            "2021-10-17T22:00:00Z",
        ),
        (
            "same weekday next week when just missed",
            vec![w("16:00", "18:00", &["Wed"])],
            "2021-10-13T18:00:00Z",
            "2021-10-20T16:00:00Z",
        ),
        (
            "sunday window from saturday night",
            vec![w("00:00", "02:00", &["Sun"])],
            "2021-10-16T23:59:59Z",
            "2021-10-17T00:00:00Z",
        ),
        (
            "earliest of two windows wins",
            vec![w("10:00", "11:00", &["Fri"]), w("09:00", "10:00", &["Thu"])],
            "2021-10-13T12:00:00Z",
            "2021-10-14T09:00:00Z",
        ),
        (
            "keeps sub-second precision inside",
            vec![daily()],
            "2021-10-17T21:00:00.123456789Z",
            "2021-10-17T21:00:00.123456789Z",
        ),
    ];
    for (name, windows, at, expected) in cases {
        let windows = Windows::new(windows.clone());
        assert_eq!(
            windows.next_allowed(ts(at)).unwrap(),
            ts(expected),
            "{name}"
        );
    }
}

#[test]
fn rejects_bad_windows() {
    let cases: &[(&str, &str, &[&str], Error)] = &[
        (
            "10:00",
            "10:00",
            &[],
            Error::WindowNotOrdered {
                from: "10:00".into(),
                to: "10:00".into(),
            },
        ),
        (
            "22:00",
            "02:00",
            &[],
            Error::WindowNotOrdered {
                from: "22:00".into(),
                to: "02:00".into(),
            },
        ),
        (
            "24:00",
            "23:00",
            &[],
            Error::InvalidWindowTime {
                value: "24:00".into(),
            },
        ),
        (
            "10:60",
            "11:00",
            &[],
            Error::InvalidWindowTime {
                value: "10:60".into(),
            },
        ),
        (
            "10:0",
            "11:00",
            &[],
            Error::InvalidWindowTime {
                value: "10:0".into(),
            },
        ),
        (
            "010:00",
            "11:00",
            &[],
            Error::InvalidWindowTime {
                value: "010:00".into(),
            },
        ),
        (
            "10-00",
            "11:00",
            &[],
            Error::InvalidWindowTime {
                value: "10-00".into(),
            },
        ),
        (
            "",
            "11:00",
            &[],
            Error::InvalidWindowTime { value: "".into() },
        ),
        (
            "10:00",
            "11:00",
            &["Funday"],
            Error::UnknownDay {
                value: "Funday".into(),
            },
        ),
        (
            "10:00",
            "11:00",
            &["monday"],
            Error::UnknownDay {
                value: "monday".into(),
            },
        ),
    ];
    for (from, to, days, expected) in cases {
        assert_eq!(
            &Window::new(from, to, days).unwrap_err(),
            expected,
            "{from}-{to} {days:?}"
        );
    }
    let message = Window::new("22:00", "02:00", &[] as &[&str])
        .unwrap_err()
        .to_string();
    assert!(message.starts_with(
        "Invalid update windows. Start time (windows.from) should be less than the end time of the update window (windows.to)"
    ));
}

fn arb_window() -> impl Strategy<Value = Window> {
    (
        0u32..1439,
        1u32..1440,
        proptest::collection::vec(0usize..7, 0..4),
    )
        .prop_filter_map("from < to", |(from, len, days)| {
            let to = from + len;
            if to > 1439 {
                return None;
            }
            let f = format!("{:02}:{:02}", from / 60, from % 60);
            let t = format!("{:02}:{:02}", to / 60, to % 60);
            let names: Vec<&str> = days.iter().map(|d| DAY_NAMES[*d]).collect();
            Some(Window::new(&f, &t, &names).unwrap())
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// `next_allowed(now)` is allowed (or is the instant a window opens, open right after it),
    /// and no allowed instant lies in `[now, next_allowed(now))` at minute granularity.
    #[test]
    fn next_allowed_is_earliest_allowed(
        windows in proptest::collection::vec(arb_window(), 0..4),
        // 2000-01-01 .. 2100-01-01, any nanosecond
        secs in 946_684_800i64..4_102_444_800i64,
        nanos in 0i32..1_000_000_000,
    ) {
        let windows = Windows::new(windows);
        let now = Timestamp::new(secs, nanos).unwrap();
        let next = windows.next_allowed(now).unwrap();
        prop_assert!(next >= now);
        prop_assert!(
            windows.is_allowed(next) || windows.is_allowed(next + SignedDuration::from_secs(1)),
            "next {next} neither allowed nor an opening"
        );
        if next > now {
            // Window bounds are whole minutes and open intervals, so every open stretch contains
            // a `:30` second; check `now` and every `HH:MM:30` before `next`.
            prop_assert!(!windows.is_allowed(now));
            let first = now.as_second().div_euclid(60) * 60 + 30;
            let mut probe = Timestamp::from_second(first).unwrap();
            while probe < next {
                if probe >= now {
                    prop_assert!(!windows.is_allowed(probe), "{probe} allowed before {next}");
                }
                probe += SignedDuration::from_secs(60);
            }
        }
        // Asking again from the answer gives the answer.
        prop_assert_eq!(windows.next_allowed(next).unwrap(), next);
    }
}
