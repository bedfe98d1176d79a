//! The float functions' arithmetic: shopspring/decimal, as sprig runs it. Each operand is
//! the shortest decimal that reads back as its float64, sums, differences and products are
//! exact, quotients are rounded (half away from zero) to 16 decimal places, and the result
//! is the float64 nearest to the decimal.

use num_bigint::{BigInt, Sign};

use go_template::{CallError, Value};

use crate::cast::to_float64;
use crate::support::fail;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

/// `value × 10^exp`.
#[derive(Clone, Debug)]
struct Decimal {
    value: BigInt,
    exp: i64,
}

/// Digits after the point a quotient keeps (`decimal.DivisionPrecision`).
const DIVISION_PRECISION: i64 = 16;

/// Sprig's `execDecimalOp`: `first op x` for each x in `rest`, as a float64.
pub(crate) fn fold(first: &Value, rest: &[Value], op: Op) -> Result<Value, CallError> {
    let mut acc = from_float(to_float64(first))?;
    for x in rest {
        let d = from_float(to_float64(x))?;
        acc = match op {
            Op::Add => add(&acc, &d),
            Op::Sub => add(
                &acc,
                &Decimal {
                    value: -d.value,
                    exp: d.exp,
                },
            ),
            Op::Mul => Decimal {
                value: acc.value * d.value,
                exp: acc.exp + d.exp,
            },
            Op::Div => div(&acc, &d)?,
        };
    }
    Ok(Value::Float(to_float(&acc)))
}

/// `decimal.NewFromFloat`: the shortest round-tripping digits.
fn from_float(f: f64) -> Result<Decimal, CallError> {
    if f.is_nan() || f.is_infinite() {
        let shown = if f.is_nan() {
            "NaN"
        } else if f > 0.0 {
            "+Inf"
        } else {
            "-Inf"
        };
        return Err(fail(format!("Cannot create a Decimal from {shown}")));
    }
    if f == 0.0 {
        return Ok(Decimal {
            value: BigInt::from(0),
            exp: 0,
        });
    }
    // `{:e}` prints the shortest round-tripping digits: "-1.2345e-7".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int_part}{frac}");
    let value: BigInt = digits.parse().unwrap_or_default();
    Ok(Decimal {
        value,
        exp: exp - frac.len() as i64,
    })
}

fn rescale(d: &Decimal, exp: i64) -> BigInt {
    &d.value * BigInt::from(10).pow((d.exp - exp) as u32)
}

fn add(a: &Decimal, b: &Decimal) -> Decimal {
    let exp = a.exp.min(b.exp);
    Decimal {
        value: rescale(a, exp) + rescale(b, exp),
        exp,
    }
}

/// `Decimal.Div`: `DivRound(b, 16)`.
fn div(a: &Decimal, b: &Decimal) -> Result<Decimal, CallError> {
    if b.value.sign() == Sign::NoSign {
        return Err(fail("decimal division by 0"));
    }
    // a/b × 10^16 = (a.value / b.value) × 10^(a.exp - b.exp + 16)
    let shift = a.exp - b.exp + DIVISION_PRECISION;
    let (num, den) = if shift >= 0 {
        (
            &a.value * BigInt::from(10).pow(shift as u32),
            b.value.clone(),
        )
    } else {
        (
            a.value.clone(),
            &b.value * BigInt::from(10).pow((-shift) as u32),
        )
    };
    let mut q = &num / &den;
    let r = &num % &den;
    let twice: BigInt = r.magnitude().clone().into();
    let twice = twice * 2;
    let den_abs: BigInt = den.magnitude().clone().into();
    if twice >= den_abs {
        if (num.sign() == Sign::Minus) != (den.sign() == Sign::Minus) {
            q -= 1;
        } else {
            q += 1;
        }
    }
    Ok(Decimal {
        value: q,
        exp: -DIVISION_PRECISION,
    })
}

/// The float64 nearest to the decimal.
fn to_float(d: &Decimal) -> f64 {
    format!("{}e{}", d.value, d.exp).parse().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: Op, a: f64, b: &[f64]) -> Value {
        let rest: Vec<Value> = b.iter().map(|&x| Value::Float(x)).collect();
        fold(&Value::Float(a), &rest, op).unwrap_or(Value::Nil)
    }

    #[test]
    fn decimal_arithmetic() {
        assert!(matches!(run(Op::Add, 1.1, &[2.2]), Value::Float(x) if x == 3.3));
        assert!(matches!(run(Op::Sub, 0.3, &[0.1]), Value::Float(x) if x == 0.2));
        assert!(matches!(run(Op::Mul, 1.1, &[3.0]), Value::Float(x) if x == 3.3));
        assert!(matches!(run(Op::Div, 1.0, &[3.0]), Value::Float(x) if x == 0.3333333333333333));
        assert!(matches!(run(Op::Div, 2.0, &[3.0]), Value::Float(x) if x == 0.6666666666666667));
        assert!(matches!(run(Op::Div, -2.0, &[3.0]), Value::Float(x) if x == -0.6666666666666667));
        assert_eq!(
            fold(&Value::Float(1.0), &[Value::Float(0.0)], Op::Div).err(),
            Some(fail("decimal division by 0"))
        );
    }
}
