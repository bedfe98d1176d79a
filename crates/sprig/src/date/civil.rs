//! Go's `time.Time` as a value: an instant (Unix seconds and nanoseconds), a location, and an
//! optional monotonic clock reading (`now` has one; Go prints it as `m=+0.001234567`).

use jiff::tz::TimeZone;

/// A Go `*time.Location`.
#[derive(Clone, Debug)]
pub(crate) enum Loc {
    /// `time.UTC` (also the zero Time's location).
    Utc,
    /// `time.Local`: the machine's zone, as Go reads it (TZ, /etc/localtime).
    Local,
    /// A zone loaded by name (`time.LoadLocation`).
    Zone(String, TimeZone),
    /// `time.FixedZone(name, offset)`, which parsing makes for offsets it cannot place.
    Fixed(String, i32),
}

fn local_zone() -> TimeZone {
    thread_local! {
        static LOCAL: TimeZone = TimeZone::try_system().unwrap_or(TimeZone::UTC);
    }
    LOCAL.with(Clone::clone)
}

impl Loc {
    /// `time.LoadLocation(name)`: "" and "UTC" are UTC, "Local" is Local, anything else a zone
    /// from the time zone database.
    pub(crate) fn load(name: &str) -> Option<Loc> {
        match name {
            "" | "UTC" => Some(Loc::Utc),
            "Local" => Some(Loc::Local),
            _ => jiff::tz::db()
                .get(name)
                .ok()
                .map(|tz| Loc::Zone(name.to_owned(), tz)),
        }
    }

    /// The zone's abbreviation and offset (seconds east of UTC) at a Unix second.
    pub(crate) fn lookup(&self, unix: i64) -> (String, i32) {
        let tz = match self {
            Loc::Utc => return ("UTC".into(), 0),
            Loc::Fixed(name, off) => return (name.clone(), *off),
            Loc::Local => local_zone(),
            Loc::Zone(_, tz) => tz.clone(),
        };
        let ts = clamp_timestamp(unix);
        let info = tz.to_offset_info(ts);
        (info.abbreviation().to_owned(), info.offset().seconds())
    }

    /// Go's `String()` of the location.
    pub(crate) fn name(&self) -> &str {
        match self {
            Loc::Utc => "UTC",
            Loc::Local => "Local",
            Loc::Zone(n, _) | Loc::Fixed(n, _) => n,
        }
    }

    /// Unix seconds of a wall clock reading in this zone (Go's `time.Date`).
    pub(crate) fn wall_to_unix(&self, wall_unix: i64) -> i64 {
        match self {
            Loc::Utc => wall_unix,
            Loc::Fixed(_, off) => wall_unix - i64::from(*off),
            Loc::Local | Loc::Zone(..) => {
                // Go: guess with the offset in force at the wall time read as UTC, then
                // correct once if the offset there differs.
                let (_, off) = self.lookup(wall_unix);
                let unix = wall_unix - i64::from(off);
                let (_, off2) = self.lookup(unix);
                if off2 == off {
                    unix
                } else {
                    let unix2 = wall_unix - i64::from(off2);
                    if self.lookup(unix2).1 == off2 {
                        unix2
                    } else {
                        unix
                    }
                }
            }
        }
    }
}

fn clamp_timestamp(unix: i64) -> jiff::Timestamp {
    let min = jiff::Timestamp::MIN.as_second();
    let max = jiff::Timestamp::MAX.as_second();
    jiff::Timestamp::from_second(unix.clamp(min, max)).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// A Go `time.Time`.
#[derive(Clone, Debug)]
pub(crate) struct GoTime {
    pub(crate) unix: i64,
    pub(crate) nsec: u32,
    pub(crate) loc: Loc,
    /// Nanoseconds since the process started, for times read from the clock.
    pub(crate) mono: Option<i64>,
}

/// The broken-down wall clock of a time in its zone.
#[derive(Clone, Debug)]
pub(crate) struct Civil {
    pub(crate) year: i64,
    pub(crate) month: u32,
    pub(crate) day: u32,
    pub(crate) hour: u32,
    pub(crate) min: u32,
    pub(crate) sec: u32,
    pub(crate) nsec: u32,
    /// 1..=366.
    pub(crate) yday: u32,
    /// 0 = Sunday.
    pub(crate) wday: u32,
    pub(crate) zone: String,
    pub(crate) offset: i32,
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub(crate) fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

pub(crate) fn days_in(month: u32, year: i64) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl GoTime {
    /// Go's zero `time.Time{}`: January 1, year 1, 00:00:00 UTC.
    pub(crate) fn zero() -> GoTime {
        GoTime {
            unix: days_from_civil(1, 1, 1) * 86_400,
            nsec: 0,
            loc: Loc::Utc,
            mono: None,
        }
    }

    /// `time.Now()`, with its monotonic reading.
    pub(crate) fn now() -> GoTime {
        use std::time::{Instant, SystemTime, UNIX_EPOCH};
        thread_local! {
            static START: Instant = Instant::now();
        }
        let mono = START.with(|s| s.elapsed().as_nanos() as i64);
        let (unix, nsec) = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
            Err(_) => (0, 0),
        };
        GoTime {
            unix,
            nsec,
            loc: Loc::Local,
            mono: Some(mono),
        }
    }

    /// `time.Unix(sec, 0)`: in Local.
    pub(crate) fn from_unix(sec: i64) -> GoTime {
        GoTime {
            unix: sec,
            nsec: 0,
            loc: Loc::Local,
            mono: None,
        }
    }

    /// `time.Date(...)` for a validated wall clock.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_civil(
        year: i64,
        month: u32,
        day: u32,
        hour: u32,
        min: u32,
        sec: u32,
        nsec: u32,
        loc: Loc,
    ) -> GoTime {
        let wall = days_from_civil(year, month, day) * 86_400
            + i64::from(hour) * 3600
            + i64::from(min) * 60
            + i64::from(sec);
        GoTime {
            unix: loc.wall_to_unix(wall),
            nsec,
            loc,
            mono: None,
        }
    }

    /// The same instant in another location (monotonic reading dropped, as Go's `In` does).
    pub(crate) fn in_loc(&self, loc: Loc) -> GoTime {
        GoTime {
            loc,
            mono: None,
            ..self.clone()
        }
    }

    pub(crate) fn civil(&self) -> Civil {
        let (zone, offset) = self.loc.lookup(self.unix);
        let wall = self.unix + i64::from(offset);
        let days = wall.div_euclid(86_400);
        let secs = wall.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        let yday = (days - days_from_civil(year, 1, 1) + 1) as u32;
        let wday = (days + 4).rem_euclid(7) as u32;
        Civil {
            year,
            month,
            day,
            hour: secs / 3600,
            min: secs / 60 % 60,
            sec: secs % 60,
            nsec: self.nsec,
            yday,
            wday,
            zone,
            offset,
        }
    }

    /// Whole days later, on the same wall clock (Go's `AddDate` via `time.Date`).
    pub(crate) fn add_days(&self, days: i64) -> GoTime {
        let c = self.civil();
        let wall = (days_from_civil(c.year, c.month, c.day) + days) * 86_400
            + i64::from(c.hour) * 3600
            + i64::from(c.min) * 60
            + i64::from(c.sec);
        GoTime {
            unix: self.loc.wall_to_unix(wall),
            nsec: self.nsec,
            loc: self.loc.clone(),
            mono: None,
        }
    }

    /// Nanoseconds since the Unix epoch, as a wide integer.
    pub(crate) fn unix_nano(&self) -> i128 {
        i128::from(self.unix) * 1_000_000_000 + i128::from(self.nsec)
    }

    /// `t.Add(d)` (the monotonic reading moves along).
    pub(crate) fn add(&self, d: i64) -> GoTime {
        let total = self.unix_nano() + i128::from(d);
        GoTime {
            unix: total.div_euclid(1_000_000_000) as i64,
            nsec: total.rem_euclid(1_000_000_000) as u32,
            loc: self.loc.clone(),
            mono: self.mono.map(|m| m.wrapping_add(d)),
        }
    }

    /// `t.Sub(u)` in nanoseconds, saturating as Go does; monotonic readings win when both
    /// have one.
    pub(crate) fn sub(&self, other: &GoTime) -> i64 {
        if let (Some(a), Some(b)) = (self.mono, other.mono) {
            return a.saturating_sub(b);
        }
        let d = self.unix_nano() - other.unix_nano();
        d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }
}
