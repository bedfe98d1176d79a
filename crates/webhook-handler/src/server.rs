//! The HTTPS endpoint kube-apiserver calls: `POST /<object>/<webhook>` (AdmissionReview of a
//! ValidationWebhook), `POST /<crd>` (ConversionReview of a ConversionWebhook), `GET /healthz`.

use crate::answer;
use crate::handlers::{Converter, Validator};
use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// The largest review accepted.
const MAX_BODY: usize = 3 << 20;

/// What is being served, by URL path.
#[derive(Default)]
pub(crate) struct Served {
    pub(crate) validators: RwLock<BTreeMap<String, Arc<Validator>>>,
    pub(crate) converters: RwLock<BTreeMap<String, Arc<Converter>>>,
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
            Some(v) => v.decide(&review).await,
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
        Some(c) => c.convert(request).await,
        None => Err(format!(
            "no hook found for 'kubernetesCustomResourceConversion' event for crd/{crd}"
        )),
    };
    json(StatusCode::OK, &answer::conversion_review(&uid, result))
}

/// TLS from PEM texts.
pub(crate) fn acceptor(cert_pem: &str, key_pem: &str) -> Result<tokio_rustls::TlsAcceptor, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("certificate: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| format!("key: {e}"))?;
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| e.to_string())?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(cfg)))
}

/// Serves until the listener fails.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    served: Arc<Served>,
) {
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
        let served = served.clone();
        async move { handle(served, method, uri, body).await }
    });
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let svc =
                hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    use tower::ServiceExt as _;
                    app.clone().oneshot(req)
                });
            let _ =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
        });
    }
}
