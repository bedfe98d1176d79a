//! The token endpoint (`/auth/token`) of the read listener and the `Bearer` challenge that
//! sends clients to it.
//!
//! GET with Basic credentials (the Docker token protocol) and POST with an OAuth2 password
//! grant (what containerd tries first) both answer `{"token", "access_token", "expires_in"}`.
//! Unknown credentials get 401; a scope an account may not have is left out of the token, and
//! the registry then refuses the request with 403.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use oci::ErrorCode;

use super::REALM;
use super::push::read_limited;
use super::respond::{error_response, respond, value};
use crate::auth::token::{Scope, form_pairs};
use crate::auth::{Access, Accounts};
use crate::body::{self, ResponseBody};

/// The token endpoint's path.
pub const TOKEN_PATH: &str = "/auth/token";

/// Unix seconds now.
pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The `WWW-Authenticate` value sending a client to our token endpoint for `scope`.
pub(super) fn bearer_challenge(
    request_headers: &HeaderMap,
    authority: Option<&str>,
    tls: bool,
    scope: Option<&Scope>,
    error: Option<&str>,
) -> HeaderValue {
    let host = request_headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or(authority)
        .unwrap_or("localhost");
    let scheme = if tls { "https" } else { "http" };
    let mut challenge =
        format!("Bearer realm=\"{scheme}://{host}{TOKEN_PATH}\",service=\"{REALM}\"");
    if let Some(scope) = scope {
        challenge.push_str(&format!(",scope=\"{}\"", scope.to_challenge()));
    }
    if let Some(error) = error {
        challenge.push_str(&format!(",error=\"{error}\""));
    }
    value(&challenge)
}

fn token_refused(message: &str) -> Response<ResponseBody> {
    let mut response = error_response(401, ErrorCode::Unauthorized, message);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        value(&format!("Basic realm=\"{REALM}\"")),
    );
    response
}

/// Answers a token request.
pub(super) async fn issue<B>(accounts: &Accounts, request: Request<B>) -> Response<ResponseBody>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display + Send,
{
    let Some(key) = accounts.tokens() else {
        return error_response(404, ErrorCode::Unsupported, "no token service here");
    };
    let mut scopes: Vec<Scope> = Vec::new();
    let mut add_scopes = |value: &str| {
        scopes.extend(value.split(' ').filter_map(Scope::parse));
    };
    let query = request.uri().query().unwrap_or("").to_owned();
    for (k, v) in form_pairs(&query) {
        if k == "scope" {
            add_scopes(&v);
        }
    }
    let (account, access): (String, Access) = match *request.method() {
        Method::GET => {
            let authorization = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            match accounts.authenticate_basic(authorization) {
                Ok(found) => found,
                Err(_) if authorization.is_none() => {
                    return token_refused(
                        "authentication required: the token endpoint takes Basic credentials",
                    );
                }
                Err(_) => return token_refused("invalid credentials"),
            }
        }
        Method::POST => {
            let form = match read_limited(request.into_body(), 64 << 10).await {
                Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                Ok(None) => {
                    return error_response(400, ErrorCode::Unsupported, "token request too large");
                }
                Err(e) => {
                    return error_response(
                        400,
                        ErrorCode::Unsupported,
                        &format!("reading the token request: {e}"),
                    );
                }
            };
            let pairs = form_pairs(&form);
            let field = |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.as_str())
            };
            if field("grant_type") != Some("password") {
                return error_response(
                    400,
                    ErrorCode::Unsupported,
                    "unsupported grant_type: only the password grant is offered",
                );
            }
            for (k, v) in &pairs {
                if k == "scope" {
                    add_scopes(v);
                }
            }
            let user = field("username").unwrap_or_default().to_owned();
            match accounts.authenticate_password(&user, field("password").unwrap_or_default()) {
                Ok(access) => (user, access),
                Err(_) => return token_refused("invalid credentials"),
            }
        }
        _ => {
            return error_response(
                405,
                ErrorCode::Unsupported,
                "the token endpoint takes GET (Basic) or POST (password grant)",
            );
        }
    };
    let token = key.issue(&account, access, &scopes, unix_now());
    tracing::debug!(account, scopes = scopes.len(), "token issued");
    let body = serde_json::json!({
        "token": token,
        "access_token": token,
        "expires_in": key.lifetime().as_secs(),
    })
    .to_string();
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONTENT_LENGTH, value(&body.len().to_string()));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    respond(StatusCode::OK, headers, body::full(body))
}
