//! Percent-encoding helpers shared by the path, query and token-URL code.

/// A `%` not followed by two hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadEscape {
    /// Byte offset of the `%`.
    pub(crate) at: usize,
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `%XX` escapes (and `+` as space when `plus_is_space`, as in query strings).
pub(crate) fn percent_decode(s: &str, plus_is_space: bool) -> Result<Vec<u8>, BadEscape> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hi = b.get(i + 1).copied().and_then(hex_val);
                let lo = b.get(i + 2).copied().and_then(hex_val);
                let (Some(hi), Some(lo)) = (hi, lo) else {
                    return Err(BadEscape { at: i });
                };
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Encodes for a query component like Go's `url.QueryEscape`: unreserved characters stay,
/// space becomes `+`, everything else `%XX`.
pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char);
            }
            b' ' => out.push('+'),
            _ => {
                out.push('%');
                out.push_str(&format!("{b:02X}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_reports_bad_escapes() {
        assert_eq!(percent_decode("a%3A8443", false).unwrap(), b"a:8443");
        assert_eq!(percent_decode("a%3a+b", true).unwrap(), b"a: b");
        assert_eq!(percent_decode("a+b", false).unwrap(), b"a+b");
        assert_eq!(percent_decode("%zz", false), Err(BadEscape { at: 0 }));
        assert_eq!(percent_decode("ab%4", false), Err(BadEscape { at: 2 }));
        assert_eq!(percent_decode("%", false), Err(BadEscape { at: 0 }));
    }

    #[test]
    fn escapes_like_go_query_escape() {
        assert_eq!(
            query_escape("repository:test/img:pull"),
            "repository%3Atest%2Fimg%3Apull"
        );
        assert_eq!(query_escape("a b~c"), "a+b~c");
        assert_eq!(query_escape("é"), "%C3%A9");
        let s = "any thing/ü:+%&=";
        assert_eq!(
            percent_decode(&query_escape(s), true).unwrap(),
            s.as_bytes()
        );
    }
}
