//! Defaults and flow: `default`, `empty`, `coalesce`, `all`, `any`, `compact`, `ternary`,
//! `fail`, `deepCopy`.

use go_template::{FuncMap, Signature, Ty, Value};

use crate::support::{add, arg, bool_arg, fail, slice_items, str_arg};

const ANY: Ty = Ty::Any;

pub(crate) fn register(m: &mut FuncMap) {
    add(m, "default", Signature::variadic(&[ANY], ANY), |a| {
        Ok(match a.get(1) {
            Some(given) if !empty(given) => given.clone(),
            _ => arg(a, 0).clone(),
        })
    });
    add(m, "empty", Signature::fixed(&[ANY]), |a| {
        Ok(Value::Bool(empty(arg(a, 0))))
    });
    add(m, "coalesce", Signature::variadic(&[], ANY), |a| {
        Ok(a.iter().find(|v| !empty(v)).cloned().unwrap_or(Value::Nil))
    });
    add(m, "all", Signature::variadic(&[], ANY), |a| {
        Ok(Value::Bool(a.iter().all(|v| !empty(v))))
    });
    add(m, "any", Signature::variadic(&[], ANY), |a| {
        Ok(Value::Bool(a.iter().any(|v| !empty(v))))
    });
    for name in ["compact", "mustCompact"] {
        add(m, name, Signature::fixed(&[ANY]), |a| {
            match slice_items(arg(a, 0))? {
                Ok(items) => Ok(Value::list(
                    items.into_iter().filter(|v| !empty(v)).collect(),
                )),
                Err(kind) => Err(fail(format!("Cannot compact on type {kind}"))),
            }
        });
    }
    add(m, "ternary", Signature::fixed(&[ANY, ANY, Ty::Bool]), |a| {
        Ok(if bool_arg(a, 2)? {
            arg(a, 0)
        } else {
            arg(a, 1)
        }
        .clone())
    });
    add(m, "fail", Signature::fixed(&[Ty::String]), |a| {
        Err(fail(str_arg(a, 0)?))
    });
    for name in ["deepCopy", "mustDeepCopy"] {
        add(m, name, Signature::fixed(&[ANY]), |a| {
            if matches!(arg(a, 0), Value::Nil) {
                return Err(fail("reflect: call of reflect.Value.Type on zero Value"));
            }
            deep_copy(arg(a, 0), 0).ok_or_else(|| fail("deepCopy: the value nests too deeply"))
        });
    }
}

/// Sprig's `empty`: nil, false, zero numbers and empty strings, lists and maps; structs and
/// other objects never.
pub(crate) fn empty(v: &Value) -> bool {
    match v {
        Value::Nil => true,
        Value::Bool(b) => !b,
        Value::Int(i) | Value::Int64(i) => *i == 0,
        Value::Float(f) => *f == 0.0,
        Value::String(s) => s.is_empty(),
        Value::Bytes(b) => b.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Map(m) => m.borrow().is_empty(),
        // A map or slice type with methods (`.Files`) is empty as the map or slice it is.
        Value::Object(o) => o.as_value().is_some_and(|plain| empty(&plain)),
    }
}

/// `copystructure.Copy`: new maps and lists all the way down; objects are shared (they are
/// immutable here).
pub(crate) fn deep_copy(v: &Value, depth: usize) -> Option<Value> {
    if depth > go_template::value::MAX_DEPTH {
        return None;
    }
    Some(match v {
        Value::List(l) => Value::list(
            l.iter()
                .map(|x| deep_copy(x, depth + 1))
                .collect::<Option<_>>()?,
        ),
        Value::Map(m) => Value::map(
            m.borrow()
                .iter()
                .map(|(k, x)| Some((k.clone(), deep_copy(x, depth + 1)?)))
                .collect::<Option<_>>()?,
        ),
        other => other.clone(),
    })
}
