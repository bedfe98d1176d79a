//! Integer math on int64 (`add`, `sub`, `mul`, `div`, `mod`, `max`, `min`…, wrapping on
//! overflow as Go does), float math through shopspring/decimal (`addf 1.1 2.2` is 3.3),
//! `ceil`, `floor`, `round`, and the integer sequences `until`, `untilStep`, `seq`.

mod decimal;

use go_template::{FuncMap, Signature, Ty, Value};

use crate::cast::{to_float64, to_int64};
use crate::support::{add, arg, check_count, fail, float_arg, int_arg};

const ANY: Ty = Ty::Any;

pub(crate) fn register(m: &mut FuncMap) {
    add(m, "add1", Signature::fixed(&[ANY]), |a| {
        Ok(Value::Int64(to_int64(arg(a, 0)).wrapping_add(1)))
    });
    add(m, "add", Signature::variadic(&[], ANY), |a| {
        Ok(Value::Int64(
            a.iter().fold(0i64, |s, v| s.wrapping_add(to_int64(v))),
        ))
    });
    add(m, "sub", Signature::fixed(&[ANY, ANY]), |a| {
        Ok(Value::Int64(
            to_int64(arg(a, 0)).wrapping_sub(to_int64(arg(a, 1))),
        ))
    });
    add(m, "div", Signature::fixed(&[ANY, ANY]), |a| {
        let d = nonzero(to_int64(arg(a, 1)))?;
        Ok(Value::Int64(to_int64(arg(a, 0)).wrapping_div(d)))
    });
    add(m, "mod", Signature::fixed(&[ANY, ANY]), |a| {
        let d = nonzero(to_int64(arg(a, 1)))?;
        Ok(Value::Int64(to_int64(arg(a, 0)).wrapping_rem(d)))
    });
    add(m, "mul", Signature::variadic(&[ANY], ANY), |a| {
        Ok(Value::Int64(
            a.iter()
                .skip(1)
                .fold(to_int64(arg(a, 0)), |p, v| p.wrapping_mul(to_int64(v))),
        ))
    });
    for name in ["max", "biggest"] {
        add(m, name, Signature::variadic(&[ANY], ANY), |a| {
            Ok(Value::Int64(a.iter().map(to_int64).max().unwrap_or(0)))
        });
    }
    add(m, "min", Signature::variadic(&[ANY], ANY), |a| {
        Ok(Value::Int64(a.iter().map(to_int64).min().unwrap_or(0)))
    });
    add(m, "maxf", Signature::variadic(&[ANY], ANY), |a| {
        Ok(Value::Float(
            a.iter()
                .skip(1)
                .fold(to_float64(arg(a, 0)), |x, v| go_max(x, to_float64(v))),
        ))
    });
    add(m, "minf", Signature::variadic(&[ANY], ANY), |a| {
        Ok(Value::Float(
            a.iter()
                .skip(1)
                .fold(to_float64(arg(a, 0)), |x, v| go_min(x, to_float64(v))),
        ))
    });
    add(m, "add1f", Signature::fixed(&[ANY]), |a| {
        decimal::fold(arg(a, 0), &[Value::Int(1)], decimal::Op::Add)
    });
    add(m, "addf", Signature::variadic(&[], ANY), |a| {
        decimal::fold(&Value::Float(0.0), a, decimal::Op::Add)
    });
    for (name, op) in [
        ("subf", decimal::Op::Sub),
        ("mulf", decimal::Op::Mul),
        ("divf", decimal::Op::Div),
    ] {
        add(m, name, Signature::variadic(&[ANY], ANY), move |a| {
            decimal::fold(arg(a, 0), a.get(1..).unwrap_or(&[]), op)
        });
    }
    add(m, "ceil", Signature::fixed(&[ANY]), |a| {
        Ok(Value::Float(to_float64(arg(a, 0)).ceil()))
    });
    add(m, "floor", Signature::fixed(&[ANY]), |a| {
        Ok(Value::Float(to_float64(arg(a, 0)).floor()))
    });
    add(
        m,
        "round",
        Signature::variadic(&[ANY, Ty::Int], Ty::Float64),
        |a| {
            let round_on = if a.len() > 2 { float_arg(a, 2)? } else { 0.5 };
            Ok(Value::Float(round(
                to_float64(arg(a, 0)),
                int_arg(a, 1)?,
                round_on,
            )))
        },
    );
    add(m, "until", Signature::fixed(&[Ty::Int]), |a| {
        let count = int_arg(a, 0)?;
        ints(0, count, if count < 0 { -1 } else { 1 })
    });
    add(
        m,
        "untilStep",
        Signature::fixed(&[Ty::Int, Ty::Int, Ty::Int]),
        |a| ints(int_arg(a, 0)?, int_arg(a, 1)?, int_arg(a, 2)?),
    );
    add(m, "seq", Signature::variadic(&[], Ty::Int), |a| {
        let p: Vec<i64> = a
            .iter()
            .map(|v| int_arg(std::slice::from_ref(v), 0))
            .collect::<Result<_, _>>()?;
        let (start, end, step) = match *p.as_slice() {
            [end] => (1, end, if end < 1 { -1 } else { 1 }),
            [start, end] => (start, end, if end < start { -1 } else { 1 }),
            [start, step, end] => {
                if end < start && step > 0 {
                    return Ok(Value::from(""));
                }
                (start, end, step)
            }
            _ => return Ok(Value::from("")),
        };
        let increment = if end < start { -1 } else { 1 };
        let items = until_step(start, end.wrapping_add(increment), step)?;
        let words: Vec<String> = items.iter().map(i64::to_string).collect();
        Ok(Value::from(words.join(" ")))
    });
}

fn nonzero(d: i64) -> Result<i64, go_template::CallError> {
    if d == 0 {
        return Err(fail("runtime error: integer divide by zero"));
    }
    Ok(d)
}

/// Go's `math.Max`.
fn go_max(x: f64, y: f64) -> f64 {
    if x == f64::INFINITY || y == f64::INFINITY {
        f64::INFINITY
    } else if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && x == y {
        if x.is_sign_negative() { y } else { x }
    } else if x > y {
        x
    } else {
        y
    }
}

/// Go's `math.Min`.
fn go_min(x: f64, y: f64) -> f64 {
    if x == f64::NEG_INFINITY || y == f64::NEG_INFINITY {
        f64::NEG_INFINITY
    } else if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && x == y {
        if x.is_sign_negative() { x } else { y }
    } else if x < y {
        x
    } else {
        y
    }
}

/// Sprig's `round`: scale by 10^places, round up when the fraction reaches `round_on`
/// (so -2.5 rounds down to -3, the fraction being -0.5), scale back.
fn round(val: f64, places: i64, round_on: f64) -> f64 {
    let pow = pow10(places as f64);
    let digit = pow * val;
    let frac = digit.fract();
    let r = if frac >= round_on {
        digit.ceil()
    } else {
        digit.floor()
    };
    r / pow
}

/// `math.Pow(10, p)`, exact where 10^p is.
fn pow10(p: f64) -> f64 {
    if (0.0..=22.0).contains(&p) && p.fract() == 0.0 {
        let mut x = 1.0;
        for _ in 0..(p as u32) {
            x *= 10.0;
        }
        x
    } else if (-22.0..0.0).contains(&p) && p.fract() == 0.0 {
        1.0 / pow10(-p)
    } else {
        10f64.powf(p)
    }
}

/// Sprig's `untilStep` as a list of ints.
fn ints(start: i64, stop: i64, step: i64) -> Result<Value, go_template::CallError> {
    Ok(go_template::typed::int_list(until_step(start, stop, step)?))
}

/// Sprig's `untilStep`: from `start` towards `stop` (excluded) by `step`; nothing when the
/// step points away from `stop`.
fn until_step(start: i64, stop: i64, step: i64) -> Result<Vec<i64>, go_template::CallError> {
    let up = stop >= start;
    if (up && step <= 0) || (!up && step >= 0) {
        return Ok(Vec::new());
    }
    let span = (i128::from(stop) - i128::from(start)).unsigned_abs();
    let stride = i128::from(step).unsigned_abs();
    check_count(span.div_ceil(stride))?;
    let mut out = Vec::new();
    let mut i = start;
    while if up { i < stop } else { i > stop } {
        out.push(i);
        match i.checked_add(step) {
            Some(n) => i = n,
            None => break,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_follows_sprig() {
        assert_eq!(round(1.23456, 2, 0.5), 1.23);
        assert_eq!(round(2.5, 0, 0.5), 3.0);
        assert_eq!(round(-2.5, 0, 0.5), -3.0);
        assert_eq!(round(-2.4, 0, 0.5), -3.0);
        assert_eq!(round(1.25, 1, 0.5), 1.3);
    }

    #[test]
    fn sequences_are_bounded() {
        assert_eq!(until_step(0, 10, 3).ok(), Some(vec![0, 3, 6, 9]));
        assert_eq!(until_step(0, -3, -1).ok(), Some(vec![0, -1, -2]));
        assert_eq!(until_step(0, 3, -1).ok(), Some(vec![]));
        assert!(until_step(0, i64::MAX, 1).is_err());
        assert_eq!(
            until_step(i64::MAX - 1, i64::MAX, 5).ok(),
            Some(vec![i64::MAX - 1])
        );
    }
}
