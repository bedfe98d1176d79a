//! The HTTPS endpoint kube-apiserver calls: `POST /<object>/<webhook>` (AdmissionReview of a
//! ValidationWebhook), `POST /<crd>` (ConversionReview of a ConversionWebhook), `GET /healthz`.

use crate::answer;
use crate::handlers::{Converter, Validator};
use crate::metrics::Metrics;
use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// The largest review accepted.
const MAX_BODY: usize = 3 << 20;

/// What is being served, by URL path, and the metrics its runs count in.
#[derive(Default)]
pub(crate) struct Served {
    pub(crate) validators: RwLock<BTreeMap<String, Arc<Validator>>>,
    pub(crate) converters: RwLock<BTreeMap<String, Arc<Converter>>>,
    pub(crate) metrics: Metrics,
}

fn json(status: StatusCode, v: &Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

async fn handle(served: Arc<Served>, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path().to_string();
    if method == Method::GET && path == "/healthz" {
        return StatusCode::OK.into_response();
    }
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    if body.len() > MAX_BODY {
        return (StatusCode::PAYLOAD_TOO_LARGE, "review too large").into_response();
    }
    let Ok(review) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "the body is not a JSON review").into_response();
    };
    let Some(request) = review.get("request").filter(|r| r.is_object()) else {
        return (StatusCode::BAD_REQUEST, "the review has no request").into_response();
    };
    let uid = request.get("uid").cloned().unwrap_or(Value::Null);
    let segments = path.trim_matches('/').split('/').count();
    if segments >= 2 {
        let v = served
            .validators
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&path)
            .cloned();
        let decision = match v {
            Some(v) => v.decide(&review, &served.metrics).await,
            None => answer::Decision::Deny {
                message: format!("no hook found for {path:?}"),
            },
        };
        return match answer::admission_review(&uid, &decision) {
            Ok(r) => json(StatusCode::OK, &r),
            Err(m) => (StatusCode::INTERNAL_SERVER_ERROR, m).into_response(),
        };
    }
    let crd = path.trim_matches('/').to_string();
    let c = served
        .converters
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(&crd)
        .cloned();
    let result = match c {
        Some(c) => c.convert(request, &served.metrics).await,
        None => Err(format!(
            "no hook found for 'kubernetesCustomResourceConversion' event for crd/{crd}"
        )),
    };
    json(StatusCode::OK, &answer::conversion_review(&uid, result))
}

/// Serves until the task is dropped, over TLS with the certificate of `certificate` (re-read
/// when its files change on disk: `webhook::tls`, the reload `d8 webhook` uses).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    certificate: Arc<webhook::CertificateFiles>,
    served: Arc<Served>,
) {
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
        let served = served.clone();
        async move { handle(served, method, uri, body).await }
    });
    let service = move |_: http_serve::Connection| {
        let app = app.clone();
        hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
            use tower::ServiceExt as _;
            app.clone().oneshot(request)
        })
    };
    http_serve::serve(
        listener,
        Some(webhook::tls::acceptor(certificate)),
        http_serve::Bounds::default(),
        service,
        std::future::pending(),
    )
    .await;
}
