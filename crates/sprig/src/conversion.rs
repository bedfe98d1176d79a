//! Conversions and reflection: `atoi`, `int`, `int64`, `float64`, `toDecimal`, `typeOf`,
//! `typeIs`, `typeIsLike`, `kindOf`, `kindIs`, `deepEqual`.

use std::rc::Rc;

use go_template::{FuncMap, Signature, Ty, Value};

use crate::cast::{atoi, parse_int, to_float64, to_int64};
use crate::support::{add, arg, str_arg, strval};

const ANY: Ty = Ty::Any;

pub(crate) fn register(m: &mut FuncMap) {
    add(m, "atoi", Signature::fixed(&[Ty::String]), |a| {
        Ok(Value::Int(atoi(str_arg(a, 0)?)))
    });
    add(m, "int", Signature::fixed(&[ANY]), |a| {
        Ok(Value::Int(to_int64(arg(a, 0))))
    });
    add(m, "int64", Signature::fixed(&[ANY]), |a| {
        Ok(Value::Int64(to_int64(arg(a, 0))))
    });
    add(m, "float64", Signature::fixed(&[ANY]), |a| {
        Ok(Value::Float(to_float64(arg(a, 0))))
    });
    add(m, "toDecimal", Signature::fixed(&[ANY]), |a| {
        Ok(Value::Int64(parse_int(&strval(arg(a, 0)), 8).unwrap_or(0)))
    });
    add(m, "typeOf", Signature::fixed(&[ANY]), |a| {
        Ok(Value::from(arg(a, 0).type_name()))
    });
    add(m, "typeIs", Signature::fixed(&[Ty::String, ANY]), |a| {
        Ok(Value::Bool(str_arg(a, 0)? == arg(a, 1).type_name()))
    });
    add(m, "typeIsLike", Signature::fixed(&[Ty::String, ANY]), |a| {
        let (target, t) = (str_arg(a, 0)?, arg(a, 1).type_name());
        Ok(Value::Bool(target == t || format!("*{target}") == t))
    });
    add(m, "kindOf", Signature::fixed(&[ANY]), |a| {
        Ok(Value::from(arg(a, 0).kind_name()))
    });
    add(m, "kindIs", Signature::fixed(&[Ty::String, ANY]), |a| {
        Ok(Value::Bool(str_arg(a, 0)? == arg(a, 1).kind_name()))
    });
    add(m, "deepEqual", Signature::fixed(&[ANY, ANY]), |a| {
        Ok(Value::Bool(deep_equal(arg(a, 0), arg(a, 1))))
    });
}

/// `reflect.DeepEqual` on template values: same Go type and equal contents (NaN is unequal
/// to itself unless it is the very same list or map).
pub(crate) fn deep_equal(a: &Value, b: &Value) -> bool {
    deep_equal_at(a, b, 0)
}

fn deep_equal_at(a: &Value, b: &Value, depth: usize) -> bool {
    if depth > go_template::value::MAX_DEPTH {
        return false;
    }
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) | (Value::Int64(x), Value::Int64(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            Rc::ptr_eq(x, y)
                || x.len() == y.len()
                    && x.iter()
                        .zip(y.iter())
                        .all(|(p, q)| deep_equal_at(p, q, depth + 1))
        }
        (Value::Map(x), Value::Map(y)) => {
            if Rc::ptr_eq(x, y) {
                return true;
            }
            let (x, y) = (x.borrow(), y.borrow());
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| deep_equal_at(v, w, depth + 1)))
        }
        (Value::Object(x), Value::Object(y)) => {
            Rc::ptr_eq(x, y) || x.type_name() == y.type_name() && x.equals(y.as_ref()) == Some(true)
        }
        _ => false,
    }
}
