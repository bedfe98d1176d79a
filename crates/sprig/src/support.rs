//! What every function module shares: registration, argument access, the errors Go's runtime
//! raises inside a sprig function (the executor reports them as `error calling NAME: …`), the
//! bounds that keep an untrusted chart from exhausting memory, and `strval`, sprig's
//! conversion of any value to a string.

use go_template::{CallError, Func, FuncMap, Signature, Value};

/// The largest string a function builds (`repeat`, `indent`, `wrapWith`…): far above anything
/// a real chart renders, small enough that a hostile one cannot take the machine's memory.
pub(crate) const MAX_STRING_BYTES: usize = 64 << 20;

/// The longest list a function builds (`until`, `untilStep`, `seq`…).
pub(crate) const MAX_ELEMENTS: usize = 10_000_000;

/// Go's panic on a method call through a nil interface (`reflect.TypeOf(nil).Kind()`).
pub(crate) const NIL_DEREF: &str =
    "runtime error: invalid memory address or nil pointer dereference";

/// Registers `name` with its Go signature.
pub(crate) fn add(
    m: &mut FuncMap,
    name: &str,
    signature: Signature,
    body: impl Fn(&[Value]) -> Result<Value, CallError> + 'static,
) {
    m.insert(name.to_owned(), Func::new(signature, body));
}

/// An error returned (or a panic raised) by the function itself.
pub(crate) fn fail(msg: impl Into<String>) -> CallError {
    CallError::Call(msg.into())
}

/// The refusal of a result above [`MAX_STRING_BYTES`].
pub(crate) fn check_len(bytes: usize) -> Result<(), CallError> {
    if bytes > MAX_STRING_BYTES {
        return Err(fail(format!(
            "the result would be {bytes} bytes, above the limit of {MAX_STRING_BYTES}"
        )));
    }
    Ok(())
}

/// The refusal of a list above [`MAX_ELEMENTS`].
pub(crate) fn check_count(count: u128) -> Result<(), CallError> {
    if count > MAX_ELEMENTS as u128 {
        return Err(fail(format!(
            "the result would have {count} elements, above the limit of {MAX_ELEMENTS}"
        )));
    }
    Ok(())
}

/// The argument at `i`, or nil when the executor passed fewer (it never does: the signature
/// was checked).
pub(crate) fn arg(args: &[Value], i: usize) -> &Value {
    const NIL: &Value = &Value::Nil;
    args.get(i).unwrap_or(NIL)
}

/// A `string` parameter.
pub(crate) fn str_arg(args: &[Value], i: usize) -> Result<&str, CallError> {
    match arg(args, i) {
        Value::String(s) => Ok(s),
        other => Err(mistyped("string", other)),
    }
}

/// An `int` parameter.
pub(crate) fn int_arg(args: &[Value], i: usize) -> Result<i64, CallError> {
    match arg(args, i) {
        Value::Int(n) | Value::Int64(n) => Ok(*n),
        other => Err(mistyped("int", other)),
    }
}

/// A `bool` parameter.
pub(crate) fn bool_arg(args: &[Value], i: usize) -> Result<bool, CallError> {
    match arg(args, i) {
        Value::Bool(b) => Ok(*b),
        other => Err(mistyped("bool", other)),
    }
}

/// A `float64` parameter.
pub(crate) fn float_arg(args: &[Value], i: usize) -> Result<f64, CallError> {
    match arg(args, i) {
        Value::Float(f) => Ok(*f),
        other => Err(mistyped("float64", other)),
    }
}

/// What the executor's conversion should have prevented: a body called with an argument its
/// signature does not allow (only reachable by calling the body directly).
fn mistyped(want: &str, got: &Value) -> CallError {
    CallError::Exec(format!(
        "wrong type for value; expected {want}; got {}",
        got.type_name()
    ))
}

/// A `[]string` result.
pub(crate) fn string_list(items: impl IntoIterator<Item = String>) -> Value {
    go_template::typed::string_list(items)
}

/// Sprig's `strval`: strings as they are, `[]byte` as text, everything else as `fmt`'s `%v`
/// (which also covers `error` and `Stringer` values, whose `%v` is their text).
pub(crate) fn strval(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => go_template::fmt::format_v(other),
    }
}

/// Go's `%v` of a value (for `fmt.Sprint`-style joins).
pub(crate) fn format_v(v: &Value) -> String {
    go_template::fmt::format_v(v)
}

/// The elements of a value whose `reflect.Kind` is slice or array (`[]byte` gives its bytes as
/// integers), or the kind's name for the "Cannot … on type KIND" errors; nil is `None` with
/// Go's nil-dereference panic.
pub(crate) fn slice_items(v: &Value) -> Result<Result<Vec<Value>, &'static str>, CallError> {
    match v {
        Value::Nil => Err(fail(NIL_DEREF)),
        Value::List(l) => Ok(Ok(l.as_ref().clone())),
        Value::Bytes(b) => Ok(Ok(b.iter().map(|&x| Value::Int(i64::from(x))).collect())),
        // A slice type with methods (`.Capabilities.APIVersions`): reflection sees the slice.
        Value::Object(o) => match o.as_value() {
            Some(plain @ (Value::List(_) | Value::Bytes(_))) => slice_items(&plain),
            _ => Ok(Err(o.kind_name())),
        },
        other => Ok(Err(other.kind_name())),
    }
}

/// The text of Go's failed type assertion `x.(T)` on an `interface{}`.
pub(crate) fn conversion_panic(got: &Value, want: &str) -> CallError {
    let got = match got {
        Value::Nil => "nil".to_owned(),
        other => other.type_name(),
    };
    fail(format!(
        "interface conversion: interface {{}} is {got}, not {want}"
    ))
}
