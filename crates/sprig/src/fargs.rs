//! Reading arguments the executor has already converted to a function's Go signature.

use go_template::{CallError, Func, Signature, Value};

/// The string argument at `i` (the executor guarantees the type; anything else reads as "").
pub(crate) fn str_arg(args: &[Value], i: usize) -> &str {
    args.get(i).and_then(Value::as_str).unwrap_or("")
}

/// The `int` (or `int64`) argument at `i`.
pub(crate) fn int_arg(args: &[Value], i: usize) -> i64 {
    match args.get(i) {
        Some(Value::Int(n) | Value::Int64(n)) => *n,
        _ => 0,
    }
}

/// A `func(string) string`.
pub(crate) fn str_to_str(f: fn(&str) -> String) -> Func {
    Func::new(
        Signature::fixed(&[go_template::Ty::String]),
        move |args: &[Value]| Ok(Value::string(f(str_arg(args, 0)))),
    )
}

/// An error a Go function returned: `error calling NAME: <msg>`.
pub(crate) fn call_err(msg: impl Into<String>) -> CallError {
    CallError::Call(msg.into())
}
