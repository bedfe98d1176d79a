//! Go's `text/template`, as Helm 3 runs it: the lexer, the parser, the executor, the builtin
//! functions and Go's `fmt` formatting, over [`Value`]s modelled on the Go values Helm passes
//! to templates.
//!
//! Behaviour, output and error messages follow Go's: a chart that renders with Helm renders
//! the same here, byte for byte, and a chart that fails fails with Go's message (template
//! name, line and column included).
//!
//! Pure: no I/O, no threads, no clock. Sprig's functions live in the `sprig` crate and Helm's
//! (`include`, `tpl`, `toYaml`…) in `helm-render`; both plug in through [`FuncMap`].

pub mod escape;
pub mod fmt;
pub mod value;

pub use value::{CallError, Env, Func, FuncBody, FuncMap, Map, Object, Signature, Ty, Value};
