//! The release notification webhook: a JSON POST of
//! [`WebhookBody`] with Basic or bearer auth, a 10 s timeout
//! per try, and at most [`TRIES`] tries waiting `retryMinTime` doubled after each failure. Any
//! 2xx answer succeeds (Deckhouse's code does not read the body of a success, whatever its docs
//! say about `{"success": false}`); any other fails, explained as Deckhouse explains it, from
//! the answer's `{"code", "message"}` JSON when it has one.

use std::sync::Arc;
use std::time::Duration;

use release_plan::deploy::WebhookBody;

use crate::Clock;
use crate::settings::{Notification, NotificationAuth};

/// Tries per notification.
pub const TRIES: u32 = 5;
/// Timeout of one try.
pub const TRY_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends release notifications.
#[derive(Clone, Debug)]
pub struct Notifier {
    clock: Arc<dyn Clock>,
}

impl Notifier {
    /// A notifier waiting between tries through `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self { clock }
    }

    /// POSTs `body` to the configured webhook. `Err` carries the reason shown in the release
    /// status (`Release is blocked, failed to send release notification: <reason>`); it never
    /// holds credentials.
    pub async fn send(&self, config: &Notification, body: &WebhookBody) -> Result<(), String> {
        let Some(url) = &config.webhook else {
            return Ok(());
        };
        let http = reqwest::Client::builder()
            .timeout(TRY_TIMEOUT)
            .connect_timeout(TRY_TIMEOUT)
            .tls_danger_accept_invalid_certs(config.tls_skip_verify)
            .build()
            .map_err(|e| format!("building the HTTP client: {}", e.without_url()))?;
        let mut delay = config.retry_min_time;
        let mut last = String::new();
        for attempt in 1..=TRIES {
            match try_once(&http, url, config.auth.as_ref(), body).await {
                Ok(()) => return Ok(()),
                Err(reason) => {
                    tracing::warn!(attempt, %reason, "release notification failed");
                    last = reason;
                }
            }
            if attempt < TRIES {
                self.clock.sleep(delay).await;
                delay = delay.saturating_mul(2);
            }
        }
        Err(format!(
            "send release notification: send webhook notification: after {TRIES} attempts, last error: {last}"
        ))
    }
}

async fn try_once(
    http: &reqwest::Client,
    url: &str,
    auth: Option<&NotificationAuth>,
    body: &WebhookBody,
) -> Result<(), String> {
    let mut request = http.post(url).json(body);
    match auth {
        Some(NotificationAuth::Basic { username, password }) => {
            request = request.basic_auth(username, Some(password));
        }
        Some(NotificationAuth::Bearer(token)) => request = request.bearer_auth(token),
        None => {}
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("sending the webhook request: {}", e.without_url()))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    Err(failure_reason(
        status.as_u16(),
        response.content_length(),
        &response.bytes().await.unwrap_or_default(),
    ))
}

/// The longest error answer Deckhouse reads.
pub const MAX_ERROR_BODY: u64 = 4096;

/// Why a non-2xx answer failed, in Deckhouse's words: `webhook response with status code <n>`
/// and the answer's `service code` and `msg`, or what kept it from being read.
pub fn failure_reason(status: u16, content_length: Option<u64>, body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct ResponseError {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    match content_length {
        Some(0) => return format!("webhook response with status code {status}, with empty body"),
        Some(n) if n <= MAX_ERROR_BODY => {}
        _ => {
            return format!(
                "webhook response with status code {status}: body is too large to read"
            );
        }
    }
    let Ok(answer) = serde_json::from_slice::<ResponseError>(body) else {
        return format!("webhook response with status code {status}: bad json");
    };
    let mut parts = vec![format!("webhook response with status code {status}")];
    if !answer.code.is_empty() {
        parts.push(format!("service code: {}", answer.code));
    }
    if !answer.message.is_empty() {
        parts.push(format!("msg: {}", answer.message));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deckhouse's notifier table (`release_notifier_test.go`) and the cases its code handles.
    #[test]
    fn failures_are_explained_as_deckhouse_does() {
        let cases: &[(u16, Option<u64>, &str, &str)] = &[
            (
                400,
                Some(60),
                r#"{"code": "INVALID_DATA", "message": "Invalid request data"}"#,
                "webhook response with status code 400, service code: INVALID_DATA, msg: Invalid request data",
            ),
            (
                400,
                Some(35),
                r#"{"message": "Invalid request data"}"#,
                "webhook response with status code 400, msg: Invalid request data",
            ),
            (
                404,
                Some(0),
                "",
                "webhook response with status code 404, with empty body",
            ),
            (
                500,
                Some(17),
                r#"{"invalid": json}"#,
                "webhook response with status code 500: bad json",
            ),
            (
                300,
                None,
                "Multiple Choices",
                "webhook response with status code 300: body is too large to read",
            ),
            (
                503,
                Some(MAX_ERROR_BODY + 1),
                "",
                "webhook response with status code 503: body is too large to read",
            ),
            (502, Some(2), "{}", "webhook response with status code 502"),
        ];
        for (status, length, body, want) in cases {
            assert_eq!(
                failure_reason(*status, *length, body.as_bytes()),
                *want,
                "{status} {body}"
            );
        }
    }
}
