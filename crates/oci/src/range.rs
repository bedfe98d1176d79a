//! HTTP `Range` requests for blobs: parsing, resolution against a known length, and the
//! `Content-Range` values of 206 and 416 answers; plus the two `Content-Range` forms a client
//! reads (`bytes a-b/len`) and an upload chunk carries (`a-b`).
//!
//! Policy, in [`evaluate`]: a single satisfiable `bytes` range → 206; a single unsatisfiable one
//! (first byte at or past the end, a zero suffix, any range of an empty blob) → 416 with
//! `Content-Range: bytes */len`; everything else → 200 with the whole blob: no header, another
//! unit, malformed syntax, `last < first`, and **multiple ranges**. RFC 9110 §14.2 lets a server
//! ignore `Range`, and a whole blob is always a correct answer; multipart/byteranges would need
//! buffering decisions no registry client relies on (containerd and skopeo resume with a single
//! `bytes=N-`).

use std::fmt;

use crate::error::ErrorCode;

/// Why a range header could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// The unit is not `bytes`.
    #[error("range unit is not 'bytes'")]
    NotBytes,
    /// The range set is malformed.
    #[error("range {value:?} is malformed")]
    Malformed {
        /// The value (truncated).
        value: String,
    },
    /// A `Content-Range` answer is malformed.
    #[error("Content-Range {value:?} is malformed")]
    MalformedContentRange {
        /// The value (truncated).
        value: String,
    },
}

impl RangeError {
    /// The OCI error code for an upload chunk with a bad `Content-Range`.
    pub fn error_code(&self) -> ErrorCode {
        ErrorCode::RangeInvalid
    }
}

/// One `byte-range-spec` of a `Range` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeSpec {
    /// `first-last` (inclusive; `last` may exceed the length and is clamped).
    FromTo {
        /// First byte.
        first: u64,
        /// Last byte, inclusive.
        last: u64,
    },
    /// `first-`.
    From {
        /// First byte.
        first: u64,
    },
    /// `-len`: the last `len` bytes.
    Suffix {
        /// Number of bytes.
        len: u64,
    },
}

/// A resolved, non-empty, inclusive byte range within a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// Last byte, inclusive.
    pub end: u64,
}

impl ByteRange {
    /// Number of bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    /// Always false: a resolved range holds at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `bytes start-end/complete_length`.
    pub fn content_range(&self, complete_length: u64) -> String {
        format!("bytes {}-{}/{complete_length}", self.start, self.end)
    }
}

/// What to answer a blob GET with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeOutcome {
    /// 200 with the whole blob.
    Full,
    /// 206 with this range.
    Partial(ByteRange),
    /// 416 with `Content-Range: bytes */complete_length`.
    Unsatisfiable {
        /// The blob's length.
        complete_length: u64,
    },
}

impl RangeOutcome {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            Self::Full => 200,
            Self::Partial(_) => 206,
            Self::Unsatisfiable { .. } => 416,
        }
    }

    /// The `Content-Range` header value, if the answer carries one.
    pub fn content_range(&self, complete_length: u64) -> Option<String> {
        match self {
            Self::Full => None,
            Self::Partial(r) => Some(r.content_range(complete_length)),
            Self::Unsatisfiable { complete_length } => Some(format!("bytes */{complete_length}")),
        }
    }
}

fn truncated(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Digits to u64, saturating (a first byte beyond `u64::MAX` is simply unsatisfiable).
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |acc, b| {
        acc.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

fn spec(s: &str) -> Option<RangeSpec> {
    let (a, b) = s.trim().split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    match (a.is_empty(), b.is_empty()) {
        (true, true) => None,
        (true, false) => Some(RangeSpec::Suffix { len: number(b)? }),
        (false, true) => Some(RangeSpec::From { first: number(a)? }),
        (false, false) => {
            let (first, last) = (number(a)?, number(b)?);
            (first <= last).then_some(RangeSpec::FromTo { first, last })
        }
    }
}

/// Parses a `Range` header: `bytes=` followed by one or more comma-separated specs.
pub fn parse_range(header: &str) -> Result<Vec<RangeSpec>, RangeError> {
    let (unit, set) = header.trim().split_once('=').ok_or(RangeError::NotBytes)?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return Err(RangeError::NotBytes);
    }
    let malformed = || RangeError::Malformed {
        value: truncated(header),
    };
    let specs: Vec<RangeSpec> = set
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| spec(s).ok_or_else(malformed))
        .collect::<Result<_, _>>()?;
    if specs.is_empty() {
        return Err(malformed());
    }
    Ok(specs)
}

/// Resolves one spec against a blob of `complete_length` bytes; `None` if unsatisfiable.
pub fn resolve(spec: RangeSpec, complete_length: u64) -> Option<ByteRange> {
    let last_byte = complete_length.checked_sub(1)?;
    match spec {
        RangeSpec::FromTo { first, last } if first <= last_byte => Some(ByteRange {
            start: first,
            end: last.min(last_byte),
        }),
        RangeSpec::From { first } if first <= last_byte => Some(ByteRange {
            start: first,
            end: last_byte,
        }),
        RangeSpec::Suffix { len } if len > 0 => Some(ByteRange {
            start: complete_length.saturating_sub(len),
            end: last_byte,
        }),
        _ => None,
    }
}

/// Decides the answer to a blob GET with an optional `Range` header (see the module docs).
pub fn evaluate(header: Option<&str>, complete_length: u64) -> RangeOutcome {
    let Some(Ok(specs)) = header.map(parse_range) else {
        return RangeOutcome::Full;
    };
    match specs.as_slice() {
        [one] => match resolve(*one, complete_length) {
            Some(r) => RangeOutcome::Partial(r),
            None => RangeOutcome::Unsatisfiable { complete_length },
        },
        _ => RangeOutcome::Full,
    }
}

/// A `Content-Range` answer as a client reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentRange {
    /// The range sent, `None` for `bytes */len` (a 416).
    pub range: Option<ByteRange>,
    /// The complete length, `None` for `/*`.
    pub complete_length: Option<u64>,
}

impl ContentRange {
    /// Parses `bytes a-b/len`, `bytes a-b/*` or `bytes */len`.
    pub fn parse(value: &str) -> Result<Self, RangeError> {
        let bad = || RangeError::MalformedContentRange {
            value: truncated(value),
        };
        let rest = value.trim().strip_prefix("bytes ").ok_or_else(bad)?;
        let (range, len) = rest.split_once('/').ok_or_else(bad)?;
        let complete_length = match len {
            "*" => None,
            l => Some(number(l).ok_or_else(bad)?),
        };
        let range = match range {
            "*" if complete_length.is_some() => None,
            r => {
                let (a, b) = r.split_once('-').ok_or_else(bad)?;
                let (start, end) = (number(a).ok_or_else(bad)?, number(b).ok_or_else(bad)?);
                let fits = complete_length.is_none_or(|l| end < l);
                if start > end || !fits {
                    return Err(bad());
                }
                Some(ByteRange { start, end })
            }
        };
        Ok(Self {
            range,
            complete_length,
        })
    }
}

impl fmt::Display for ContentRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("bytes ")?;
        match self.range {
            Some(r) => write!(f, "{}-{}", r.start, r.end)?,
            None => f.write_str("*")?,
        }
        match self.complete_length {
            Some(l) => write!(f, "/{l}"),
            None => f.write_str("/*"),
        }
    }
}

/// The `Content-Range` of an upload chunk (`PATCH`): `start-end`, inclusive, no unit.
pub fn parse_upload_range(value: &str) -> Result<ByteRange, RangeError> {
    let bad = || RangeError::Malformed {
        value: truncated(value),
    };
    let (a, b) = value.trim().split_once('-').ok_or_else(bad)?;
    let (start, end) = (number(a).ok_or_else(bad)?, number(b).ok_or_else(bad)?);
    if start > end {
        return Err(bad());
    }
    Ok(ByteRange { start, end })
}

#[cfg(test)]
mod tests;
