//! Sprig's date functions over Go's `time.Time`: `now`, `ago`, `date`, `dateInZone`
//! (`date_in_zone`), `dateModify` (`date_modify`), `mustDateModify` (`must_date_modify`),
//! `duration`, `durationRound`, `htmlDate`, `htmlDateInZone`, `toDate`, `mustToDate`,
//! `unixEpoch`.
//!
//! Times are [`GoTime`] objects (`time.Time`, kind struct) with the methods charts call:
//! `.Unix`, `.Year`, `.Format`, `.UTC`… "Local" is the machine's zone, as in Go.

mod civil;
mod duration;
mod layout;

use std::rc::Rc;

use go_template::{CallError, Func, FuncMap, Object, Signature, Ty, Value};

pub(crate) use civil::{GoTime, Loc};

use crate::fargs::{call_err, str_arg};

/// The `time.Time` type name, for signatures.
pub(crate) const TIME: &str = "time.Time";

pub(crate) fn register(m: &mut FuncMap) {
    let f = |sig: Signature, body: fn(&[Value]) -> Result<Value, CallError>| Func::new(sig, body);
    m.insert(
        "now".into(),
        f(Signature::fixed(&[]), |_| Ok(time_value(GoTime::now()))),
    );
    m.insert(
        "ago".into(),
        f(Signature::fixed(&[Ty::Any]), |a| {
            let t = date_arg(&a[0]);
            let since = GoTime::now().sub(&t);
            Ok(Value::string(duration::format(duration::round(
                since,
                1_000_000_000,
            ))))
        }),
    );
    let date_in_zone = f(Signature::fixed(&[Ty::String, Ty::Any, Ty::String]), |a| {
        Ok(Value::string(in_zone(str_arg(a, 0), &a[1], str_arg(a, 2))))
    });
    m.insert("dateInZone".into(), date_in_zone.clone());
    m.insert("date_in_zone".into(), date_in_zone);
    m.insert(
        "date".into(),
        f(Signature::fixed(&[Ty::String, Ty::Any]), |a| {
            Ok(Value::string(in_zone(str_arg(a, 0), &a[1], "Local")))
        }),
    );
    m.insert(
        "htmlDate".into(),
        f(Signature::fixed(&[Ty::Any]), |a| {
            Ok(Value::string(in_zone("2006-01-02", &a[0], "Local")))
        }),
    );
    m.insert(
        "htmlDateInZone".into(),
        f(Signature::fixed(&[Ty::Any, Ty::String]), |a| {
            Ok(Value::string(in_zone("2006-01-02", &a[0], str_arg(a, 1))))
        }),
    );
    let modify = f(Signature::fixed(&[Ty::String, Ty::Object(TIME)]), |a| {
        let t = time_arg(&a[1]);
        Ok(time_value(match duration::parse(str_arg(a, 0)) {
            Ok(d) => t.add(d),
            Err(_) => t,
        }))
    });
    m.insert("dateModify".into(), modify.clone());
    m.insert("date_modify".into(), modify);
    let must_modify = f(Signature::fixed(&[Ty::String, Ty::Object(TIME)]), |a| {
        let d = duration::parse(str_arg(a, 0)).map_err(call_err)?;
        Ok(time_value(time_arg(&a[1]).add(d)))
    });
    m.insert("mustDateModify".into(), must_modify.clone());
    m.insert("must_date_modify".into(), must_modify);
    m.insert(
        "duration".into(),
        f(Signature::fixed(&[Ty::Any]), |a| {
            let secs = match &a[0] {
                Value::String(s) => s.parse::<i64>().unwrap_or(0),
                Value::Int64(n) => *n,
                _ => 0,
            };
            Ok(Value::string(duration::format(
                secs.wrapping_mul(1_000_000_000),
            )))
        }),
    );
    m.insert(
        "durationRound".into(),
        f(Signature::fixed(&[Ty::Any]), |a| {
            let d = match &a[0] {
                Value::String(s) => duration::parse(s).unwrap_or(0),
                Value::Int64(n) => *n,
                Value::Object(o) if o.type_name() == TIME => GoTime::now().sub(&time_arg(&a[0])),
                _ => 0,
            };
            Ok(Value::string(round_coarse(d)))
        }),
    );
    m.insert(
        "toDate".into(),
        f(Signature::fixed(&[Ty::String, Ty::String]), |a| {
            let t = layout::parse(str_arg(a, 0), str_arg(a, 1), &Loc::Local);
            Ok(time_value(t.unwrap_or_else(|_| GoTime::zero())))
        }),
    );
    m.insert(
        "mustToDate".into(),
        f(Signature::fixed(&[Ty::String, Ty::String]), |a| {
            let t = layout::parse(str_arg(a, 0), str_arg(a, 1), &Loc::Local).map_err(call_err)?;
            Ok(time_value(t))
        }),
    );
    m.insert(
        "unixEpoch".into(),
        f(Signature::fixed(&[Ty::Object(TIME)]), |a| {
            Ok(Value::string(time_arg(&a[0]).unix.to_string()))
        }),
    );
}

/// A `time.Time` value.
pub(crate) fn time_value(t: GoTime) -> Value {
    Value::Object(Rc::new(TimeObject(t)))
}

/// The time inside a `time.Time` argument (the executor checked the type; anything else
/// reads as the zero time).
fn time_arg(v: &Value) -> GoTime {
    match v {
        Value::Object(o) => o
            .as_any()
            .and_then(|a| a.downcast_ref::<TimeObject>())
            .map(|t| t.0.clone()),
        _ => None,
    }
    .unwrap_or_else(GoTime::zero)
}

/// sprig's reading of a date argument: a `time.Time`, or Unix seconds as `int`/`int64`
/// (`int32` too in `dateInZone`); anything else (a float64 from values!) means now.
fn date_arg(v: &Value) -> GoTime {
    match v {
        Value::Object(o) if o.type_name() == TIME => time_arg(v),
        Value::Int(n) | Value::Int64(n) => GoTime::from_unix(*n),
        _ => GoTime::now(),
    }
}

fn in_zone(fmt: &str, date: &Value, zone: &str) -> String {
    let t = date_arg(date);
    let loc = Loc::load(zone).unwrap_or(Loc::Utc);
    layout::format(&t.in_loc(loc), fmt)
}

/// sprig's `durationRound`: the largest whole unit (y = 365 days, mo = 30 days, d, h, m, s).
fn round_coarse(d: i64) -> String {
    const H: u64 = 3_600_000_000_000;
    let u = d.unsigned_abs();
    let units: [(u64, &str); 6] = [
        (H * 24 * 365, "y"),
        (H * 24 * 30, "mo"),
        (H * 24, "d"),
        (H, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
    ];
    for (size, name) in units {
        if u > size {
            return format!("{}{name}", u / size);
        }
    }
    "0s".into()
}

/// A `time.Time` as templates see it.
#[derive(Debug)]
pub(crate) struct TimeObject(pub(crate) GoTime);

impl Object for TimeObject {
    fn type_name(&self) -> String {
        TIME.into()
    }

    fn kind_name(&self) -> &'static str {
        "struct"
    }

    fn field(&self, name: &str) -> Option<Value> {
        let t = &self.0;
        let c = || t.civil();
        Some(match name {
            "Unix" => Value::Int64(t.unix),
            "UnixMilli" => Value::Int64(t.unix_nano().div_euclid(1_000_000) as i64),
            "UnixMicro" => Value::Int64(t.unix_nano().div_euclid(1_000) as i64),
            "UnixNano" => Value::Int64(t.unix_nano() as i64),
            "Year" => Value::Int(c().year),
            "Month" => Value::object(Named(
                "time.Month",
                c().month.into(),
                layout::month_name(c().month),
            )),
            "Day" => Value::Int(c().day.into()),
            "Hour" => Value::Int(c().hour.into()),
            "Minute" => Value::Int(c().min.into()),
            "Second" => Value::Int(c().sec.into()),
            "Nanosecond" => Value::Int(t.nsec.into()),
            "YearDay" => Value::Int(c().yday.into()),
            "Weekday" => Value::object(Named(
                "time.Weekday",
                c().wday.into(),
                layout::weekday_name(c().wday),
            )),
            "UTC" => time_value(t.in_loc(Loc::Utc)),
            "Local" => time_value(t.in_loc(Loc::Local)),
            "IsZero" => Value::Bool(t.unix == GoTime::zero().unix && t.nsec == 0),
            "String" => Value::string(self.format()),
            _ => return None,
        })
    }

    fn is_method(&self, name: &str) -> bool {
        matches!(
            name,
            "Unix"
                | "UnixMilli"
                | "UnixMicro"
                | "UnixNano"
                | "Year"
                | "Month"
                | "Day"
                | "Hour"
                | "Minute"
                | "Second"
                | "Nanosecond"
                | "YearDay"
                | "Weekday"
                | "UTC"
                | "Local"
                | "IsZero"
                | "String"
                | "Format"
                | "In"
                | "Add"
                | "AddDate"
                | "Before"
                | "After"
                | "Equal"
                | "Sub"
        )
    }

    fn method(&self, name: &str, args: &[Value]) -> Result<Value, CallError> {
        let want = match name {
            "Format" | "Add" | "Before" | "After" | "Equal" | "Sub" | "In" => 1,
            "AddDate" => 3,
            _ => 0,
        };
        if args.len() != want {
            return Err(CallError::Exec(format!(
                "wrong number of args for {name}: want {want} got {}",
                args.len()
            )));
        }
        let t = &self.0;
        let bad = |i: usize, ty: &str| {
            CallError::Exec(format!(
                "wrong type for value; expected {ty}; got {}",
                args[i].type_name()
            ))
        };
        let other = |i: usize| match &args[i] {
            Value::Object(o) => o
                .as_any()
                .and_then(|a| a.downcast_ref::<TimeObject>())
                .map(|t| t.0.clone())
                .ok_or_else(|| bad(i, TIME)),
            _ => Err(bad(i, TIME)),
        };
        match name {
            "Format" => match &args[0] {
                Value::String(l) => Ok(Value::string(layout::format(t, l))),
                _ => Err(bad(0, "string")),
            },
            "Add" => match &args[0] {
                Value::Int(d) | Value::Int64(d) => Ok(time_value(t.add(*d))),
                _ => Err(bad(0, "time.Duration")),
            },
            "Sub" => Ok(Value::Int64(t.sub(&other(0)?))),
            "Before" => Ok(Value::Bool(t.unix_nano() < other(0)?.unix_nano())),
            "After" => Ok(Value::Bool(t.unix_nano() > other(0)?.unix_nano())),
            "Equal" => Ok(Value::Bool(t.unix_nano() == other(0)?.unix_nano())),
            "AddDate" => {
                let n = |i: usize| match &args[i] {
                    Value::Int(n) => Ok(*n),
                    _ => Err(bad(i, "int")),
                };
                let (y, mo, d) = (n(0)?, n(1)?, n(2)?);
                let c = t.civil();
                let months = c.year * 12 + i64::from(c.month) - 1 + y * 12 + mo;
                let base = GoTime::from_civil(
                    months.div_euclid(12),
                    months.rem_euclid(12) as u32 + 1,
                    1,
                    c.hour,
                    c.min,
                    c.sec,
                    c.nsec,
                    t.loc.clone(),
                );
                // Day overflow normalises as Go's time.Date does.
                Ok(time_value(base.add_days(i64::from(c.day) - 1 + d)))
            }
            "In" => Err(CallError::Call(
                "time: missing Location in call to Time.In".into(),
            )),
            _ => self.field(name).ok_or_else(|| {
                CallError::Exec(format!("can't evaluate field {name} in type {TIME}"))
            }),
        }
    }

    fn format(&self) -> String {
        let t = &self.0;
        let mut s = layout::format(t, "2006-01-02 15:04:05.999999999 -0700 MST");
        if let Some(m) = t.mono {
            let sign = if m < 0 { '-' } else { '+' };
            let m = m.unsigned_abs();
            s.push_str(&format!(
                " m={sign}{}.{:09}",
                m / 1_000_000_000,
                m % 1_000_000_000
            ));
        }
        s
    }

    fn to_json(&self) -> Option<serde_json::Value> {
        Some(serde_json::Value::String(layout::format(
            &self.0,
            "2006-01-02T15:04:05.999999999Z07:00",
        )))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn equals(&self, other: &dyn Object) -> Option<bool> {
        let o = other.as_any()?.downcast_ref::<TimeObject>()?;
        Some(
            self.0.unix_nano() == o.0.unix_nano()
                && self.0.loc.name() == o.0.loc.name()
                && self.0.mono == o.0.mono,
        )
    }
}

/// A Go integer type with a `String()` method (`time.Month`, `time.Weekday`).
#[derive(Debug)]
struct Named(&'static str, i64, &'static str);

impl Object for Named {
    fn type_name(&self) -> String {
        self.0.into()
    }

    fn kind_name(&self) -> &'static str {
        "int"
    }

    fn field(&self, name: &str) -> Option<Value> {
        (name == "String").then(|| Value::string(self.2))
    }

    fn is_method(&self, name: &str) -> bool {
        name == "String"
    }

    fn truth(&self) -> bool {
        self.1 != 0
    }

    fn format(&self) -> String {
        self.2.into()
    }

    fn to_json(&self) -> Option<serde_json::Value> {
        Some(self.1.into())
    }
}
