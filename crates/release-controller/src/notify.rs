//! The release notification webhook: a JSON POST of
//! [`WebhookBody`](release_plan::deploy::WebhookBody) with Basic or bearer auth, a 10 s timeout
//! per try, and at most [`TRIES`] tries waiting `retryMinTime` doubled after each failure. A
//! non-2xx answer fails, and so does a JSON answer `{"success": false}`.

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
        Err(last)
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
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(format!(
            "webhook response with status code {}",
            status.as_u16()
        ));
    }
    let refused = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("success").and_then(serde_json::Value::as_bool))
        == Some(false);
    if refused {
        return Err("webhook response with success: false".into());
    }
    Ok(())
}
