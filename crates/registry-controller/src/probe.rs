//! The preflight probe over HTTP: three requests against the primary endpoint, each answer
//! classified by [`registry_controller_plan::probe`]. Bounded by one overall timeout (20 s by
//! default); a transport error is `Unreachable`. Credentials go on the wire only.

use std::time::Duration;

use api::module_source::Scheme;
use registry_controller_plan::probe::{self, Challenge, Outcome};
use registry_plan::Credentials;

/// What is probed: the primary endpoint only, never its mirrors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `HTTP` or `HTTPS`.
    pub scheme: Scheme,
    /// `host[:port]`.
    pub host: String,
    /// Repository prefix.
    pub path: Option<String>,
    /// PEM CA to trust in addition to the system roots.
    pub ca: Option<String>,
    /// Credentials.
    pub credentials: Option<Credentials>,
}

/// Runs the probe within `timeout`.
pub async fn run(target: &Target, timeout: Duration) -> Outcome {
    match tokio::time::timeout(timeout, steps(target)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Unreachable(format!("no answer within {}s", timeout.as_secs())),
    }
}

fn unreachable(what: &str, error: reqwest::Error) -> Outcome {
    // reqwest's error text never holds credentials (they are headers, not URL parts).
    let mut message = format!("{what}: {error}");
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    Outcome::Unreachable(message)
}

async fn steps(target: &Target) -> Outcome {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(5))
        .connect_timeout(Duration::from_secs(10));
    if let Some(pem) = &target.ca {
        match reqwest::Certificate::from_pem_bundle(pem.as_bytes()) {
            Ok(certs) if !certs.is_empty() => builder = builder.tls_certs_merge(certs),
            _ => return Outcome::Unreachable("the upstream CA is not a PEM certificate".into()),
        }
    }
    let client = match builder.build() {
        Ok(client) => client,
        Err(e) => return unreachable("TLS setup", e),
    };
    let scheme = match target.scheme {
        Scheme::Http => "http",
        Scheme::Https => "https",
    };
    let base = format!("{scheme}://{}", target.host);

    // 1. /v2/
    let answer = match client.get(format!("{base}/v2/")).send().await {
        Ok(answer) => answer,
        Err(e) => return unreachable("GET /v2/", e),
    };
    let challenge = answer
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let challenge = match probe::base(answer.status().as_u16(), challenge.as_deref()) {
        Ok(challenge) => challenge,
        Err(outcome) => return outcome,
    };

    // 2. token, when asked for one.
    let repository = probe::sentinel_repository(target.path.as_deref());
    let mut sentinel = client.get(format!("{base}/v2/{repository}/tags/list"));
    match challenge {
        Challenge::Anonymous => {}
        Challenge::Basic => {
            if let Some(c) = &target.credentials {
                sentinel = sentinel.basic_auth(&c.username, Some(&c.password));
            }
        }
        Challenge::Bearer { realm, service } => {
            let mut query = vec![("scope", probe::sentinel_scope(target.path.as_deref()))];
            if let Some(service) = service {
                query.push(("service", service));
            }
            let mut request = client.get(&realm).query(&query);
            if let Some(c) = &target.credentials {
                request = request.basic_auth(&c.username, Some(&c.password));
            }
            let answer = match request.send().await {
                Ok(answer) => answer,
                Err(e) => return unreachable("the token endpoint", e),
            };
            if let Err(outcome) = probe::token(answer.status().as_u16()) {
                return outcome;
            }
            let body: serde_json::Value = match answer.json().await {
                Ok(body) => body,
                Err(_) => {
                    return Outcome::AuthFailed("the token endpoint answered no token".into());
                }
            };
            let Some(token) = body
                .get("token")
                .or_else(|| body.get("access_token"))
                .and_then(|t| t.as_str())
            else {
                return Outcome::AuthFailed("the token endpoint answered no token".into());
            };
            sentinel = sentinel.bearer_auth(token);
        }
    }

    // 3. the sentinel.
    let answer = match sentinel.send().await {
        Ok(answer) => answer,
        Err(e) => return unreachable("listing release-channel tags", e),
    };
    let status = answer.status().as_u16();
    let body = answer.bytes().await.unwrap_or_default();
    let repository = format!(
        "{}/{}",
        target.host,
        probe::sentinel_repository(target.path.as_deref())
    );
    probe::sentinel(status, &body, &repository)
}
