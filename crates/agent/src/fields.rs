//! Header fields that both of the agent's HTTP/1.1 ends ([`crate::http1`] towards containerd,
//! `upstream::wire` towards registries) read the same way.

use http::{HeaderMap, HeaderName, HeaderValue, header};

/// The fields httparse read, as a header map; an invalid name or value is an error naming it.
pub(crate) fn header_map(fields: &[httparse::Header<'_>]) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::with_capacity(fields.len());
    for field in fields {
        let name = HeaderName::from_bytes(field.name.as_bytes())
            .map_err(|_| format!("an invalid header name {:?}", field.name))?;
        let value = HeaderValue::from_bytes(field.value)
            .map_err(|_| format!("an invalid value of {}", field.name))?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// The `Content-Length` of `headers`, when they have one. An unparsable value, or values that
/// disagree, are an error saying which.
pub(crate) fn content_length(headers: &HeaderMap) -> Result<Option<u64>, &'static str> {
    let mut length = None;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        let parsed = value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or("an invalid Content-Length")?;
        if length.is_some_and(|l| l != parsed) {
            return Err("conflicting Content-Length values");
        }
        length = Some(parsed);
    }
    Ok(length)
}

/// The comma-separated tokens of every `name` header.
pub(crate) fn tokens<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .into_iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}
