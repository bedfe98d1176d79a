//! The answer stage: the OCI headers every answer carries and the error bodies.

use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use oci::{ErrorBody, ErrorCode};

use super::REALM;
use crate::body::{self, ResponseBody};
use crate::error::Error;

pub(super) fn api(mut response: Response<ResponseBody>) -> Response<ResponseBody> {
    response.headers_mut().insert(
        oci::header::API_VERSION,
        HeaderValue::from_static(oci::header::API_VERSION_VALUE),
    );
    response
}

pub(super) fn respond(
    status: StatusCode,
    headers: HeaderMap,
    body: ResponseBody,
) -> Response<ResponseBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    api(response)
}

pub(super) fn value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// An OCI error answer.
pub fn error_response(status: u16, code: ErrorCode, message: &str) -> Response<ResponseBody> {
    let bytes = ErrorBody::with_message(code, message).to_json();
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(oci::error::ERROR_CONTENT_TYPE),
    );
    headers.insert(header::CONTENT_LENGTH, value(&bytes.len().to_string()));
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    respond(status, headers, body::full(bytes))
}

pub(super) fn from_error(error: &Error) -> Response<ResponseBody> {
    if error.status() >= 500 && !matches!(error, Error::Refused { .. }) {
        tracing::warn!(%error, "request failed");
    }
    error_response(error.status(), error.error_code(), &error.to_string())
}

pub(super) fn unauthorized(message: &str) -> Response<ResponseBody> {
    let mut response = error_response(401, ErrorCode::Unauthorized, message);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        value(&format!("Basic realm=\"{REALM}\"")),
    );
    response
}
