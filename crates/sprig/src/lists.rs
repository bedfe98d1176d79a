//! List functions: `list`, `tuple`, `push`/`append`, `prepend`, `first`, `rest`, `last`,
//! `initial`, `reverse`, `uniq`, `without`, `has`, `slice`, `concat`, `chunk`, each with its
//! `must…` twin (the same here: a panic and an error both end the template). Any slice is
//! accepted (`[]byte` too); other kinds fail with sprig's "Cannot … on type KIND".

use go_template::{CallError, FuncMap, Signature, Ty, Value};

use crate::cast::to_int64;
use crate::conversion::deep_equal;
use crate::support::{add, arg, check_count, fail, int_arg, slice_items};

const ANY: Ty = Ty::Any;

/// The list's items, or `Cannot {what} on type KIND`.
fn items(v: &Value, what: &str) -> Result<Vec<Value>, CallError> {
    slice_items(v)?.map_err(|kind| fail(format!("Cannot {what} on type {kind}")))
}

/// Registers a function and its `must` twin.
fn both(
    m: &mut FuncMap,
    name: &str,
    signature: Signature,
    body: impl Fn(&[Value]) -> Result<Value, CallError> + Clone + 'static,
) {
    let must = format!("must{}{}", name[..1].to_uppercase(), &name[1..]);
    add(m, name, signature, body.clone());
    add(m, &must, signature, body);
}

pub(crate) fn register(m: &mut FuncMap) {
    for name in ["list", "tuple"] {
        add(m, name, Signature::variadic(&[], ANY), |a| {
            Ok(Value::list(a.to_vec()))
        });
    }
    for name in ["push", "append"] {
        both(m, name, Signature::fixed(&[ANY, ANY]), |a| {
            let mut l = items(arg(a, 0), "push")?;
            l.push(arg(a, 1).clone());
            Ok(Value::list(l))
        });
    }
    both(m, "prepend", Signature::fixed(&[ANY, ANY]), |a| {
        let mut l = items(arg(a, 0), "prepend")?;
        l.insert(0, arg(a, 1).clone());
        Ok(Value::list(l))
    });
    both(m, "first", Signature::fixed(&[ANY]), |a| {
        Ok(items(arg(a, 0), "find first")?
            .into_iter()
            .next()
            .unwrap_or(Value::Nil))
    });
    both(m, "last", Signature::fixed(&[ANY]), |a| {
        Ok(items(arg(a, 0), "find last")?.pop().unwrap_or(Value::Nil))
    });
    both(m, "rest", Signature::fixed(&[ANY]), |a| {
        let l = items(arg(a, 0), "find rest")?;
        Ok(Value::list(l.into_iter().skip(1).collect()))
    });
    both(m, "initial", Signature::fixed(&[ANY]), |a| {
        let mut l = items(arg(a, 0), "find initial")?;
        l.pop();
        Ok(Value::list(l))
    });
    both(m, "reverse", Signature::fixed(&[ANY]), |a| {
        let mut l = items(arg(a, 0), "find reverse")?;
        l.reverse();
        Ok(Value::list(l))
    });
    both(m, "uniq", Signature::fixed(&[ANY]), |a| {
        let mut out: Vec<Value> = Vec::new();
        for v in items(arg(a, 0), "find uniq")? {
            if !out.iter().any(|o| deep_equal(&v, o)) {
                out.push(v);
            }
        }
        Ok(Value::list(out))
    });
    both(m, "without", Signature::variadic(&[ANY], ANY), |a| {
        let omit = a.get(1..).unwrap_or(&[]);
        let l = items(arg(a, 0), "find without")?;
        Ok(Value::list(
            l.into_iter()
                .filter(|v| !omit.iter().any(|o| deep_equal(v, o)))
                .collect(),
        ))
    });
    both(m, "has", Signature::fixed(&[ANY, ANY]), |a| {
        let haystack = arg(a, 1);
        if matches!(haystack, Value::Nil) {
            return Ok(Value::Bool(false));
        }
        let needle = arg(a, 0);
        Ok(Value::Bool(
            items(haystack, "find has")?
                .iter()
                .any(|v| deep_equal(needle, v)),
        ))
    });
    both(m, "slice", Signature::variadic(&[ANY], ANY), |a| {
        let list = arg(a, 0);
        let l = match slice_items(list)? {
            Ok(l) => l,
            Err(kind) => {
                return Err(fail(format!(
                    "list should be type of slice or array but {kind}"
                )));
            }
        };
        if l.is_empty() {
            return Ok(Value::Nil);
        }
        let start = a.get(1).map_or(0, to_int64);
        let end = a.get(2).map_or(l.len() as i64, to_int64);
        if start < 0 || end < start || end > l.len() as i64 {
            return Err(fail("reflect.Value.Slice: slice index out of bounds"));
        }
        let (start, end) = (start as usize, end as usize);
        Ok(match list {
            Value::Bytes(b) => Value::Bytes(b[start..end].into()),
            // Reflection keeps the slice's type (`[]string` stays `[]string`).
            _ => go_template::typed::same_type_list(list, l[start..end].to_vec()),
        })
    });
    add(m, "concat", Signature::variadic(&[], ANY), |a| {
        let mut out = Vec::new();
        for v in a {
            match slice_items(v)? {
                Ok(l) => {
                    check_count((out.len() + l.len()) as u128)?;
                    out.extend(l);
                }
                Err(kind) => return Err(fail(format!("Cannot concat type {kind} as list"))),
            }
        }
        Ok(Value::list(out))
    });
    both(m, "chunk", Signature::fixed(&[Ty::Int, ANY]), |a| {
        let size = int_arg(a, 0)?;
        let l =
            slice_items(arg(a, 1))?.map_err(|kind| fail(format!("Cannot chunk type {kind}")))?;
        chunk(size, l)
    });
}

/// Sprig's `chunk`, float arithmetic and all: a size of 0 or one below zero that leaves a
/// negative chunk count or length panics as Go's `make` does.
fn chunk(size: i64, l: Vec<Value>) -> Result<Value, CallError> {
    const MAKESLICE: &str = "runtime error: makeslice: len out of range";
    let len = l.len() as i64;
    let count = crate::cast::float_to_int(((len - 1) as f64 / size as f64).floor() + 1.0);
    if count < 0 {
        return Err(fail(MAKESLICE));
    }
    let mut out = Vec::new();
    for i in 0..count {
        let mut clen = size;
        if i == count - 1 {
            clen = crate::cast::float_to_int((len as f64 % size as f64).floor());
            if clen == 0 {
                clen = size;
            }
        }
        if clen < 0 {
            return Err(fail(MAKESLICE));
        }
        let mut c = Vec::new();
        for j in 0..clen {
            let ix = i * size + j;
            match usize::try_from(ix).ok().and_then(|ix| l.get(ix)) {
                Some(v) => c.push(v.clone()),
                None => {
                    return Err(fail(format!(
                        "runtime error: index out of range [{ix}] with length {len}"
                    )));
                }
            }
        }
        out.push(Value::list(c));
    }
    Ok(go_template::typed::list_of_lists(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::NIL_DEREF;

    fn ints(v: &[i64]) -> Vec<Value> {
        v.iter().map(|&i| Value::Int(i)).collect()
    }

    #[test]
    fn chunk_matches_sprig() {
        let got = chunk(2, ints(&[1, 2, 3]))
            .map(|v| format!("{} {}", v.type_name(), go_template::fmt::format_v(&v)));
        assert_eq!(got.ok().as_deref(), Some("[][]interface {} [[1 2] [3]]"));
        assert_eq!(
            chunk(0, ints(&[1])).err(),
            Some(fail("runtime error: makeslice: len out of range"))
        );
        assert_eq!(
            chunk(-1, ints(&[1, 2]))
                .map(|v| format!("{} {}", v.type_name(), go_template::fmt::format_v(&v)))
                .ok()
                .as_deref(),
            Some("[][]interface {} []")
        );
        assert_eq!(
            chunk(3, Vec::new())
                .map(|v| format!("{} {}", v.type_name(), go_template::fmt::format_v(&v)))
                .ok()
                .as_deref(),
            Some("[][]interface {} []")
        );
    }

    #[test]
    fn nil_lists_panic_like_go() {
        assert_eq!(items(&Value::Nil, "push").err(), Some(fail(NIL_DEREF)));
        assert_eq!(
            items(&Value::from("abc"), "find first").err(),
            Some(fail("Cannot find first on type string"))
        );
    }
}
