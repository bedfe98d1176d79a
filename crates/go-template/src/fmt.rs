//! Go's `fmt` package, for the values templates hold: `print`, `println`, `printf` and the way
//! a pipeline's result is written into the output (`fmt.Fprint`).

use crate::Value;

/// `fmt.Sprint(args...)`: operands formatted with `%v`, a space between two operands when
/// neither is a string.
pub fn sprint(args: &[Value]) -> String {
    let _ = args;
    todo!("fmt helper")
}

/// `fmt.Sprintln(args...)`: operands formatted with `%v`, always a space between them, and a
/// newline at the end.
pub fn sprintln(args: &[Value]) -> String {
    let _ = args;
    todo!("fmt helper")
}

/// `fmt.Sprintf(format, args...)`, verbs, flags, width, precision, argument indexes and the
/// `%!verb(type=value)` / `%!(EXTRA …)` / `%!d(MISSING)` reports included.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let _ = (format, args);
    todo!("fmt helper")
}

/// `%v` of one value: how the executor prints a pipeline's result (`fmt.Fprint` of it).
pub fn format_v(value: &Value) -> String {
    let _ = value;
    todo!("fmt helper")
}
