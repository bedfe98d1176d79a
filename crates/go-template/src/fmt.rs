//! Go's `fmt` package, for the values templates hold: `print`, `println`, `printf` and the way
//! a pipeline's result is written into the output (`fmt.Fprint`).
//!
//! The printer follows Go's `fmt` verb by verb: which verbs each kind of value accepts, the
//! `%!verb(type=value)` report for the others, lists and maps printed element by element with
//! the same verb, flags, width and precision as Go applies them.

mod printer;
mod printf;
pub(crate) mod strconv;
#[cfg(test)]
mod tests;

use crate::Value;
use printer::Printer;

/// `fmt.Sprint(args...)`: operands formatted with `%v`, a space between two operands when
/// neither is a string.
pub fn sprint(args: &[Value]) -> String {
    let mut p = Printer::default();
    let mut prev_string = false;
    for (i, arg) in args.iter().enumerate() {
        let is_string = matches!(arg, Value::String(_));
        if i > 0 && !is_string && !prev_string {
            p.write_str(" ");
        }
        p.print_arg(arg, 'v');
        prev_string = is_string;
    }
    p.into_string()
}

/// `fmt.Sprintln(args...)`: operands formatted with `%v`, always a space between them, and a
/// newline at the end.
pub fn sprintln(args: &[Value]) -> String {
    let mut p = Printer::default();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            p.write_str(" ");
        }
        p.print_arg(arg, 'v');
    }
    p.write_str("\n");
    p.into_string()
}

/// `fmt.Sprintf(format, args...)`, verbs, flags, width, precision, argument indexes and the
/// `%!verb(type=value)` / `%!(EXTRA …)` / `%!d(MISSING)` reports included.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut p = Printer::default();
    p.do_printf(format, args);
    p.into_string()
}

/// `%v` of one value: how the executor prints a pipeline's result (`fmt.Fprint` of it).
pub fn format_v(value: &Value) -> String {
    let mut p = Printer::default();
    p.print_arg(value, 'v');
    p.into_string()
}
