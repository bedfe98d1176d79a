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
//!
//! # Bounds
//!
//! Charts come from registries, so no template may crash the process: parsing bounds the
//! nesting of parentheses and control structures ([`MAX_NESTING`]), execution bounds
//! nested template calls ([`Limits::max_depth`]), output ([`Limits::max_output`]) and the
//! stack it uses ([`Limits::max_stack`], measured from where [`Templates::execute`] was
//! entered). The thread that executes must have a stack larger than `max_stack` plus what the
//! caller itself uses.
//!
//! Measured (test `stack_per_include_level_is_measured`): one level of `include` recursion
//! with an `if` and a `with` in the body costs about 11.5 KiB of stack in a debug build and
//! 4 KiB in release. For Helm's own recursion error to win (Helm refuses the 1 002nd nested
//! `include` of one name; [`Limits::max_depth`] defaults to 1 500), run rendering on a thread
//! of 64 MiB and set `max_stack` to 56 MiB: about 5 000 such levels in debug builds. The
//! default `max_stack` (1 MiB) suits the 2 MiB threads Rust spawns by default (tests), where
//! runaway recursion then ends in the stack-limit error after ~90 debug levels.

mod builtins;
mod error;
pub mod escape;
mod exec;
pub mod fmt;
mod lex;
mod parse;
mod template;
pub mod typed;
pub mod value;

pub use error::{Error, ErrorKind};
pub use parse::MAX_NESTING;
pub use template::{DEFAULT_MAX_STEPS, Limits, MissingKey, Templates};
pub use value::{CallError, Env, Func, FuncBody, FuncMap, Map, Object, Signature, Ty, Value};
