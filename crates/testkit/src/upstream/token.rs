//! A small Docker token server (the `auth.token` protocol of distribution), so that tests see
//! the real Bearer flow: challenge, token request with Basic credentials, signed JWT.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};

/// The `service` the registry expects in tokens (the JWT audience).
pub const SERVICE: &str = "testkit-registry";
/// The issuer the registry trusts.
pub const ISSUER: &str = "testkit-token-issuer";

/// A running token server; stops when dropped.
#[derive(Debug)]
pub struct TokenServer {
    addr: SocketAddr,
    state: Arc<TokenState>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct TokenState {
    user: String,
    password: String,
    expires_in: u64,
    signing_cert_der: Vec<u8>,
    key: EcdsaKeyPair,
    issued: AtomicUsize,
    refused: AtomicUsize,
}

impl std::fmt::Debug for TokenState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenState")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl TokenServer {
    /// Starts a token server on its own thread and runtime, so that it answers even while a
    /// test blocks its own runtime. Returns the server and the PEM certificate the registry
    /// must trust (`rootcertbundle`).
    pub fn start(user: &str, password: &str, expires_in: u64) -> (Self, String) {
        let key_pair = rcgen::KeyPair::generate().expect("token signing key");
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "testkit token signer");
        let cert = params
            .self_signed(&key_pair)
            .expect("token signing certificate");
        let key = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            key_pair.serialized_der(),
            &SystemRandom::new(),
        )
        .expect("ring accepts the rcgen key");
        let state = Arc::new(TokenState {
            user: user.to_owned(),
            password: password.to_owned(),
            expires_in,
            signing_cert_der: cert.der().to_vec(),
            key,
            issued: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind token server");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("token server address");
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = axum::Router::new()
            .route("/token", get(token_get).post(token_post))
            .with_state(state.clone());
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("token server runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        let server = Self {
            addr,
            state,
            shutdown: Some(shutdown),
            thread: Some(thread),
        };
        (server, cert.pem())
    }

    /// The realm URL to put in the registry's challenge.
    pub fn realm(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// How many tokens were issued.
    pub fn issued(&self) -> usize {
        self.state.issued.load(Ordering::SeqCst)
    }

    /// How many token requests were refused (missing or wrong credentials).
    pub fn refused(&self) -> usize {
        self.state.refused.load(Ordering::SeqCst)
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `GET /token?service=…&scope=…` with Basic credentials (the classic Docker flow).
async fn token_get(
    State(state): State<Arc<TokenState>>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let credentials = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(parse_basic);
    let scopes = values(&query, "scope");
    issue(
        &state,
        credentials,
        values(&query, "service").first().copied(),
        &scopes,
    )
}

/// `POST /token` with an OAuth2 password grant (what containerd tries first).
async fn token_post(
    State(state): State<Arc<TokenState>>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    if values(&form, "grant_type").first() != Some(&"password") {
        return (StatusCode::BAD_REQUEST, "unsupported grant_type").into_response();
    }
    let credentials = match (
        values(&form, "username").first(),
        values(&form, "password").first(),
    ) {
        (Some(user), Some(password)) => Some(((*user).to_owned(), (*password).to_owned())),
        _ => None,
    };
    let scopes = values(&form, "scope");
    issue(
        &state,
        credentials,
        values(&form, "service").first().copied(),
        &scopes,
    )
}

fn values<'a>(pairs: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    pairs
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

fn parse_basic(value: &str) -> Option<(String, String)> {
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

fn issue(
    state: &TokenState,
    credentials: Option<(String, String)>,
    service: Option<&str>,
    scopes: &[&str],
) -> Response {
    let user = match credentials {
        Some((user, password)) if user == state.user && password == state.password => user,
        _ => {
            state.refused.fetch_add(1, Ordering::SeqCst);
            let body = serde_json::json!({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]});
            return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
        }
    };
    if service.is_some_and(|s| s != SERVICE) {
        return (StatusCode::BAD_REQUEST, "unknown service").into_response();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    let access: Vec<serde_json::Value> = scopes
        .iter()
        .flat_map(|scope| scope.split(' '))
        .filter_map(parse_scope)
        .collect();
    let n = state.issued.fetch_add(1, Ordering::SeqCst);
    let claims = serde_json::json!({
        "iss": ISSUER, "sub": user, "aud": SERVICE,
        "exp": now + state.expires_in, "nbf": now.saturating_sub(1), "iat": now,
        "jti": format!("testkit-{now}-{n}"), "access": access,
    });
    let header = serde_json::json!({
        "typ": "JWT", "alg": "ES256", "x5c": [STANDARD.encode(&state.signing_cert_der)],
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = state
        .key
        .sign(&SystemRandom::new(), signing_input.as_bytes())
        .expect("ECDSA signing");
    let token = format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    );
    let body: HashMap<&str, serde_json::Value> = HashMap::from([
        ("token", token.clone().into()),
        ("access_token", token.into()),
        ("expires_in", state.expires_in.into()),
    ]);
    axum::Json(body).into_response()
}

/// `repository:name:pull,push` → the access claim granting exactly those actions.
fn parse_scope(scope: &str) -> Option<serde_json::Value> {
    let (kind, rest) = scope.split_once(':')?;
    let (name, actions) = rest.rsplit_once(':')?;
    let actions: Vec<&str> = actions.split(',').filter(|a| !a.is_empty()).collect();
    Some(serde_json::json!({"type": kind, "name": name, "actions": actions}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_become_access_claims() {
        assert_eq!(
            parse_scope("repository:test/img:pull,push").unwrap(),
            serde_json::json!({"type": "repository", "name": "test/img", "actions": ["pull", "push"]})
        );
        assert_eq!(
            parse_scope("repository:host:5000/img:pull").unwrap()["name"],
            "host:5000/img"
        );
        assert!(parse_scope("garbage").is_none());
    }

    #[test]
    fn basic_credentials() {
        assert_eq!(
            parse_basic("Basic dXNlcjpwYTpzcw=="),
            Some(("user".into(), "pa:ss".into()))
        );
        assert_eq!(parse_basic("Bearer x"), None);
    }
}
