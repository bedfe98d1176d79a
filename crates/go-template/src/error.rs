//! The error a parse or an execution gives: Go's own message, so that whoever wraps it (Helm's
//! `parse error at (…)`) sees what Helm sees.

use std::fmt;

/// Which stage failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The template text is not a valid template (`template: NAME:LINE: …`).
    Parse,
    /// Execution failed (`template: NAME:LINE:COL: executing "NAME" at <NODE>: …`), or a
    /// named template does not exist.
    Exec,
}

/// A template error. `Display` is exactly Go's `err.Error()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// Parse or exec.
    pub kind: ErrorKind,
    /// Go's message.
    pub message: String,
}

impl Error {
    pub(crate) fn parse(message: String) -> Error {
        Error {
            kind: ErrorKind::Parse,
            message,
        }
    }

    pub(crate) fn exec(message: String) -> Error {
        Error {
            kind: ErrorKind::Exec,
            message,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
