//! HTTP building blocks for the registries we serve (the node agent, the storage replicas): the
//! OCI error answer, `Docker-Distribution-Api-Version`, exact `Content-Length` and
//! `Docker-Content-Digest` on HEAD and GET, `Range` → 200/206/416 with `Content-Range`, and tag
//! lists with `n`/`last` pagination and `Link`.
//!
//! Pure: functions from inputs to [`http::Response`] heads; the caller streams the bytes the
//! returned [`BodyPlan`] names. The decisions themselves (range policy, pagination, error codes)
//! live in `oci`; this crate only puts them into `http` types so every server answers alike. It
//! must not depend on a runtime, a server framework or Kubernetes crates.
//!
//! Deliberately unlike Go's `http.ServeContent` (which distribution 2.8 uses): a 416 carries
//! `Content-Length: 0` and no body, so its framing is always correct; a `Range` with an unknown
//! unit or malformed syntax is ignored (200 with the whole blob), as RFC 9110 asks.

use bytes::Bytes;
use http::header::{
    ACCEPT_RANGES, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, HeaderValue, LINK, RANGE,
};
use http::{HeaderMap, Method, Response, StatusCode};
use oci::{Digest, ErrorBody, ErrorCode};

/// `Docker-Distribution-Api-Version: registry/2.0` on every `/v2/` answer.
pub fn set_api_version(headers: &mut HeaderMap) {
    headers.insert(
        oci::header::API_VERSION,
        HeaderValue::from_static(oci::header::API_VERSION_VALUE),
    );
}

/// The answer to `GET /v2/`: 200, `{}`, the API version header.
pub fn ping() -> Response<Bytes> {
    json(StatusCode::OK, Bytes::from_static(b"{}"))
}

fn json(status: StatusCode, body: Bytes) -> Response<Bytes> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let len = response.body().len() as u64;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(oci::error::ERROR_CONTENT_TYPE),
    );
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    set_api_version(headers);
    response
}

/// An OCI error answer: the status of the body's first known code (500 for none), the JSON
/// body, `Content-Type`, exact `Content-Length`, the API version header.
pub fn error_response(body: &ErrorBody) -> Response<Bytes> {
    let status = StatusCode::from_u16(body.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json(status, Bytes::from(body.to_json()))
}

/// [`error_response`] with one error of `code` and `message`.
pub fn error(code: ErrorCode, message: &str) -> Response<Bytes> {
    error_response(&ErrorBody::with_message(code, message))
}

/// The error answer for a request path that did not parse (status and code from the parser).
pub fn path_error(e: &oci::PathError) -> Response<Bytes> {
    let mut response = error(e.error_code(), &e.to_string());
    if let Ok(status) = StatusCode::from_u16(e.status()) {
        *response.status_mut() = status;
    }
    response
}

/// What the caller must stream after the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyPlan {
    /// Nothing (HEAD, 416).
    Empty,
    /// The whole object.
    Whole,
    /// Bytes `start..=end` of the object.
    Range(oci::ByteRange),
}

/// What is being served.
#[derive(Debug, Clone, Copy)]
pub struct Content<'a> {
    /// Its size in bytes.
    pub size: u64,
    /// Its digest.
    pub digest: &'a Digest,
    /// Its media type (`application/octet-stream` for blobs of unknown type).
    pub media_type: &'a str,
}

fn content_headers(headers: &mut HeaderMap, content: &Content<'_>) {
    set_api_version(headers);
    let digest = content.digest.to_string();
    if let Ok(v) = HeaderValue::from_str(&digest) {
        headers.insert(oci::header::CONTENT_DIGEST, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("\"{digest}\"")) {
        headers.insert(ETAG, v);
    }
    let media_type = HeaderValue::from_str(content.media_type)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    headers.insert(CONTENT_TYPE, media_type);
}

/// The head of a manifest answer (no ranges): 200 with the exact `Content-Length`,
/// `Docker-Content-Digest`, `Content-Type` and `ETag`; HEAD gets the same headers and no body.
pub fn manifest(method: &Method, content: &Content<'_>) -> Response<BodyPlan> {
    let plan = if method == Method::HEAD {
        BodyPlan::Empty
    } else {
        BodyPlan::Whole
    };
    let mut response = Response::new(plan);
    content_headers(response.headers_mut(), content);
    response
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(content.size));
    response
}

/// The head of a blob answer, honouring the request's `Range` as [`oci::range::evaluate`]
/// decides: 200 (whole), 206 with `Content-Range: bytes a-b/len` and the range's length, or 416
/// with `Content-Range: bytes */len` and an empty body. HEAD answers as GET would, without a
/// body, and always with the whole object's length (ranges apply to GET only).
pub fn blob(method: &Method, request: &HeaderMap, content: &Content<'_>) -> Response<BodyPlan> {
    let head = method == Method::HEAD;
    let outcome = if head {
        oci::RangeOutcome::Full
    } else {
        let range = request.get(RANGE).and_then(|v| v.to_str().ok());
        oci::range::evaluate(range, content.size)
    };
    let (status, plan, length) = match outcome {
        oci::RangeOutcome::Full => (StatusCode::OK, BodyPlan::Whole, content.size),
        oci::RangeOutcome::Partial(r) => (StatusCode::PARTIAL_CONTENT, BodyPlan::Range(r), r.len()),
        oci::RangeOutcome::Unsatisfiable { .. } => {
            (StatusCode::RANGE_NOT_SATISFIABLE, BodyPlan::Empty, 0)
        }
    };
    let plan = if head { BodyPlan::Empty } else { plan };
    let mut response = Response::new(plan);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    content_headers(headers, content);
    headers.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    if let Some(value) = outcome.content_range(content.size)
        && let Ok(v) = HeaderValue::from_str(&value)
    {
        headers.insert(CONTENT_RANGE, v);
    }
    if status == StatusCode::RANGE_NOT_SATISFIABLE {
        headers.remove(CONTENT_TYPE);
    }
    response
}

/// A tag list answer for `repository` at `path` (`/v2/<name>/tags/list`): the tags sorted and
/// cut by `n`/`last`, with `Link: <path?n=N&last=L>; rel="next"` when more remain.
pub fn tag_list(
    repository: &str,
    path: &str,
    tags: impl IntoIterator<Item = String>,
    n: Option<u32>,
    last: Option<&str>,
) -> Response<Bytes> {
    let page = oci::pagination::paginate(tags, n, last);
    let link = n.and_then(|n| page.link(path, n));
    let body = serde_json::to_vec(&oci::pagination::TagList {
        name: repository.to_owned(),
        tags: page.items,
    })
    .unwrap_or_default();
    let mut response = json(StatusCode::OK, Bytes::from(body));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(link) = link
        && let Ok(v) = HeaderValue::from_str(&link)
    {
        response.headers_mut().insert(LINK, v);
    }
    response
}

#[cfg(test)]
mod tests;
