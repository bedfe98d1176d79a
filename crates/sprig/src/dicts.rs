//! Dictionary functions: `dict`, `get`, `set`, `unset`, `hasKey`, `pluck`, `keys`, `values`,
//! `pick`, `omit`, `dig`, and `merge`/`mergeOverwrite` with dario.cat/mergo's rules. Maps are
//! shared: `set` and `merge` change the map they are given, as in Go.

use std::cell::RefCell;
use std::rc::Rc;

use go_template::{CallError, FuncMap, Map, Signature, Ty, Value};

use crate::defaults::empty;
use crate::support::{add, arg, conversion_panic, fail, str_arg, string_list, strval};

const ANY: Ty = Ty::Any;
const MAP: Ty = Ty::Map;
const S: Ty = Ty::String;

/// A `map[string]interface{}` parameter: the shared map, or `None` for a nil map.
fn map_arg(args: &[Value], i: usize) -> Result<Option<&Rc<RefCell<Map>>>, CallError> {
    match arg(args, i) {
        Value::Map(m) => Ok(Some(m)),
        Value::Nil => Ok(None),
        other => Err(CallError::Exec(format!(
            "wrong type for value; expected map[string]interface {{}}; got {}",
            other.type_name()
        ))),
    }
}

/// A value of a map parameter, nil maps as empty ones.
fn map_value(m: Option<&Rc<RefCell<Map>>>) -> Value {
    m.map_or_else(|| Value::map(Map::new()), |m| Value::Map(m.clone()))
}

pub(crate) fn register(m: &mut FuncMap) {
    add(m, "dict", Signature::variadic(&[], ANY), |a| {
        let mut d = Map::new();
        for pair in a.chunks(2) {
            let key = strval(&pair[0]);
            d.insert(key, pair.get(1).cloned().unwrap_or_else(|| Value::from("")));
        }
        Ok(Value::map(d))
    });
    add(m, "get", Signature::fixed(&[MAP, S]), |a| {
        let key = str_arg(a, 1)?;
        Ok(map_arg(a, 0)?
            .and_then(|d| d.borrow().get(key).cloned())
            .unwrap_or_else(|| Value::from("")))
    });
    add(m, "set", Signature::fixed(&[MAP, S, ANY]), |a| {
        let d = map_arg(a, 0)?.ok_or_else(|| fail("assignment to entry in nil map"))?;
        d.borrow_mut()
            .insert(str_arg(a, 1)?.to_owned(), arg(a, 2).clone());
        Ok(Value::Map(d.clone()))
    });
    add(m, "unset", Signature::fixed(&[MAP, S]), |a| {
        let d = map_arg(a, 0)?;
        if let Some(d) = d {
            d.borrow_mut().remove(str_arg(a, 1)?);
        }
        Ok(map_value(d))
    });
    add(m, "hasKey", Signature::fixed(&[MAP, S]), |a| {
        let key = str_arg(a, 1)?;
        Ok(Value::Bool(
            map_arg(a, 0)?.is_some_and(|d| d.borrow().contains_key(key)),
        ))
    });
    add(m, "pluck", Signature::variadic(&[S], MAP), |a| {
        let key = str_arg(a, 0)?;
        let mut out = Vec::new();
        for i in 1..a.len() {
            if let Some(v) = map_arg(a, i)?.and_then(|d| d.borrow().get(key).cloned()) {
                out.push(v);
            }
        }
        Ok(Value::list(out))
    });
    add(m, "keys", Signature::variadic(&[], MAP), |a| {
        let mut out = Vec::new();
        for i in 0..a.len() {
            if let Some(d) = map_arg(a, i)? {
                out.extend(d.borrow().keys().cloned());
            }
        }
        Ok(string_list(out))
    });
    add(m, "values", Signature::fixed(&[MAP]), |a| {
        Ok(Value::list(map_arg(a, 0)?.map_or_else(Vec::new, |d| {
            d.borrow().values().cloned().collect()
        })))
    });
    add(m, "pick", Signature::variadic(&[MAP], S), |a| {
        let d = map_arg(a, 0)?;
        let mut out = Map::new();
        for i in 1..a.len() {
            let k = str_arg(a, i)?;
            if let Some(v) = d.and_then(|d| d.borrow().get(k).cloned()) {
                out.insert(k.to_owned(), v);
            }
        }
        Ok(Value::map(out))
    });
    add(m, "omit", Signature::variadic(&[MAP], S), |a| {
        let omit: Vec<&str> = (1..a.len())
            .map(|i| str_arg(a, i))
            .collect::<Result<_, _>>()?;
        let out = map_arg(a, 0)?.map_or_else(Map::new, |d| {
            d.borrow()
                .iter()
                .filter(|(k, _)| !omit.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        });
        Ok(Value::map(out))
    });
    add(m, "dig", Signature::variadic(&[], ANY), dig);
    for (name, overwrite) in [
        ("merge", false),
        ("mustMerge", false),
        ("mergeOverwrite", true),
        ("mustMergeOverwrite", true),
    ] {
        add(m, name, Signature::variadic(&[MAP], MAP), move |a| {
            let dst = map_value(map_arg(a, 0)?);
            let Value::Map(dst_map) = &dst else {
                return Ok(dst);
            };
            for i in 1..a.len() {
                if let Some(src) = map_arg(a, i)? {
                    if Rc::ptr_eq(src, dst_map) {
                        continue;
                    }
                    merge_into(dst_map, &src.borrow(), overwrite, 0)?;
                }
            }
            Ok(dst)
        });
    }
}

/// Sprig's `dig KEY... DEFAULT DICT`: the value at the key path, the default when a key is
/// missing, Go's interface-conversion panic when a step is not a map.
fn dig(a: &[Value]) -> Result<Value, CallError> {
    const MAP_T: &str = "map[string]interface {}";
    if a.len() < 3 {
        return Err(fail("dig needs at least three arguments"));
    }
    let dict = &a[a.len() - 1];
    let default = &a[a.len() - 2];
    let Value::Map(mut current) = dict.clone() else {
        return Err(conversion_panic(dict, MAP_T));
    };
    let keys: Vec<&str> = a[..a.len() - 2]
        .iter()
        .map(|k| k.as_str().ok_or_else(|| conversion_panic(k, "string")))
        .collect::<Result<_, _>>()?;
    for (i, key) in keys.iter().enumerate() {
        let step = current.borrow().get(*key).cloned();
        let Some(step) = step else {
            return Ok(default.clone());
        };
        if i == keys.len() - 1 {
            return Ok(step);
        }
        match step {
            Value::Map(m) => current = m,
            other => return Err(conversion_panic(&other, MAP_T)),
        }
    }
    Ok(default.clone())
}

/// mergo's map merge of `src` into `dst`. Without `overwrite` a key is set only when `dst`
/// lacks it or holds an empty value, and nested maps merge key by key; with `overwrite`
/// every key of `src` is set (nil included) except that nested maps still merge.
fn merge_into(
    dst: &RefCell<Map>,
    src: &Map,
    overwrite: bool,
    depth: usize,
) -> Result<(), CallError> {
    if depth > go_template::value::MAX_DEPTH {
        return Err(fail("merge: the maps nest too deeply"));
    }
    for (key, s) in src {
        if matches!(s, Value::Nil) {
            if overwrite {
                dst.borrow_mut().insert(key.clone(), Value::Nil);
            }
            continue;
        }
        let d = dst.borrow().get(key).cloned();
        if let (Value::Map(sm), Some(Value::Map(dm))) = (s, &d) {
            if !Rc::ptr_eq(sm, dm) {
                merge_into(dm, &sm.borrow(), overwrite, depth + 1)?;
            }
            if !dm.borrow().is_empty() {
                continue;
            }
        }
        if let Some(d) = &d
            && !empty(d)
            && matches!(s, Value::List(_) | Value::Bytes(_))
        {
            if overwrite {
                dst.borrow_mut().insert(key.clone(), s.clone());
            }
            continue;
        }
        if overwrite || d.as_ref().is_none_or(empty) {
            dst.borrow_mut().insert(key.clone(), s.clone());
        }
    }
    Ok(())
}
