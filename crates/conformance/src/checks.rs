//! The checks, one module per profile, and the small helpers they share.

pub(crate) mod discovery;
pub(crate) mod hostile;
pub(crate) mod management;
pub(crate) mod pull;
pub(crate) mod push;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method, StatusCode};
use registry_client::{RequestBody, Scope};

use crate::Ctx;

/// Fails a check with a formatted observation unless the condition holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(format!($($arg)+));
        }
    };
}
pub(crate) use ensure;

/// A whole answer, body read (bounded).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// Why the body could not be read whole (a body shorter than its `Content-Length`, a
    /// reset): broken HTTP framing, which fails every check on this answer.
    pub(crate) body_error: Option<String>,
    pub(crate) method: Method,
    pub(crate) path: String,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `METHOD path → status`, for observations.
    pub(crate) fn line(&self) -> String {
        format!("{} {} → {}", self.method, self.path, self.status)
    }

    pub(crate) fn expect(&self, statuses: &[u16]) -> Result<(), String> {
        ensure!(
            statuses.contains(&self.status.as_u16()),
            "{} (expected {})",
            self.line(),
            statuses
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(" or ")
        );
        self.well_formed()
    }

    /// The body arrived whole, as its framing announced.
    pub(crate) fn well_formed(&self) -> Result<(), String> {
        match &self.body_error {
            None => Ok(()),
            Some(e) => Err(format!("{}: malformed answer: {e}", self.line())),
        }
    }

    /// The body is an OCI error document whose codes include `code`.
    pub(crate) fn expect_code(&self, code: oci::ErrorCode) -> Result<(), String> {
        let body = oci::ErrorBody::parse(&self.body).map_err(|e| {
            format!(
                "{}: body is not an OCI error document ({e}): {:?}",
                self.line(),
                String::from_utf8_lossy(&self.body[..self.body.len().min(120)])
            )
        })?;
        ensure!(
            body.errors.iter().any(|e| e.code == code.as_str()),
            "{}: error codes {:?}, expected {code}",
            self.line(),
            body.errors
                .iter()
                .map(|e| e.code.as_str())
                .collect::<Vec<_>>()
        );
        Ok(())
    }

    pub(crate) fn content_length(&self) -> Option<u64> {
        self.header("content-length").and_then(|v| v.parse().ok())
    }

    pub(crate) fn digest(&self) -> Option<&str> {
        self.header(oci::header::CONTENT_DIGEST)
    }

    pub(crate) fn media_type(&self) -> Option<String> {
        self.header("content-type").map(oci::media_type::essence)
    }
}

/// The default token scope for `method` on `repo`.
pub(crate) fn scope_for(method: &Method, repo: &str) -> Scope {
    if method == Method::GET || method == Method::HEAD {
        Scope::pull(repo)
    } else if method == Method::DELETE {
        Scope::delete(repo)
    } else {
        Scope::push(repo)
    }
}

/// Sends a raw request and reads the whole answer.
pub(crate) async fn call(
    ctx: &Ctx,
    method: Method,
    path: &str,
    headers: &[(HeaderName, &str)],
    body: Option<Bytes>,
    scope: Scope,
) -> Result<Answer, String> {
    let mut request = ctx.remote.raw_request(method.clone(), path, Some(scope));
    for (name, value) in headers {
        request = request.header(name.clone(), value);
    }
    if let Some(body) = body {
        request = request.body(RequestBody::Bytes(body));
    }
    finish(request, method, path).await
}

/// Sends a request to an upload `Location` and reads the whole answer.
pub(crate) async fn call_location(
    ctx: &Ctx,
    method: Method,
    location: &str,
    headers: &[(HeaderName, &str)],
    body: Option<Bytes>,
) -> Result<Answer, String> {
    let scope = scope_for(&method, &ctx.repo).and(Scope::push(&ctx.repo));
    let mut request = ctx
        .remote
        .location_request(method.clone(), location, Some(scope));
    for (name, value) in headers {
        request = request.header(name.clone(), value);
    }
    if let Some(body) = body {
        request = request.body(RequestBody::Bytes(body));
    }
    let shown = location.split('?').next().unwrap_or_default().to_owned();
    finish(request, method, &shown).await
}

async fn finish(
    request: registry_client::RequestBuilder,
    method: Method,
    path: &str,
) -> Result<Answer, String> {
    let response = request
        .send()
        .await
        .map_err(|e| format!("{method} {path}: {e}"))?;
    let (status, headers, body) = response.into_parts();
    let (body, body_error) = match body.collect(16 << 20).await {
        Ok(body) => (body, None),
        Err(e) => (Bytes::new(), Some(e.to_string())),
    };
    Ok(Answer {
        status,
        headers,
        body,
        body_error,
        method,
        path: path.to_owned(),
    })
}

/// `GET`/`HEAD` on `/v2/<repo>/<rest>` with the given headers.
pub(crate) async fn read(
    ctx: &Ctx,
    method: Method,
    repo: &str,
    rest: &str,
    headers: &[(HeaderName, &str)],
) -> Result<Answer, String> {
    let scope = scope_for(&method, repo);
    call(
        ctx,
        method,
        &format!("/v2/{repo}/{rest}"),
        headers,
        None,
        scope,
    )
    .await
}
