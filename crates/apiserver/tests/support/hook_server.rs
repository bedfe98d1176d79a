//! A small HTTPS webhook server for the tests: its own CA (rcgen), a serving certificate for
//! `127.0.0.1` and the given DNS names, and a handler answering each POSTed review.
#![allow(dead_code, unreachable_pub)]

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the handler answers: after `delay`, `status` with `body`.
pub struct Reply {
    pub delay: Duration,
    pub status: u16,
    pub body: Value,
}

impl Reply {
    pub fn ok(body: Value) -> Self {
        Self {
            delay: Duration::ZERO,
            status: 200,
            body,
        }
    }
}

type Handler = dyn Fn(&str, &Value) -> Reply + Send + Sync;

/// A running webhook server.
pub struct HookServer {
    pub addr: SocketAddr,
    /// The CA that signed the serving certificate (PEM).
    pub ca_pem: String,
    /// Every request received: (path and query, body).
    pub seen: Arc<Mutex<Vec<(String, Value)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HookServer {
    /// The CA bundle as a webhook configuration carries it (base64 of the PEM).
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// `https://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// Starts on a free loopback port; the certificate also names `dns_names`.
    pub async fn start(
        dns_names: &[&str],
        handler: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let mut names = vec!["127.0.0.1".to_string()];
        names.extend(dns_names.iter().map(|s| s.to_string()));
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let chain = vec![CertificateDer::from_pem_slice(cert.pem().as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
        let cfg = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler: Arc<Handler> = Arc::new(handler);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let handler = handler.clone();
                let seen = seen2.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            let handler = handler.clone();
                            let seen = seen.clone();
                            async move {
                                let path = req
                                    .uri()
                                    .path_and_query()
                                    .map(|p| p.to_string())
                                    .unwrap_or_default();
                                let body = req.into_body().collect().await.unwrap().to_bytes();
                                let review: Value =
                                    serde_json::from_slice(&body).unwrap_or(Value::Null);
                                seen.lock().unwrap().push((path.clone(), review.clone()));
                                let reply = handler(&path, &review);
                                tokio::time::sleep(reply.delay).await;
                                Ok::<_, std::convert::Infallible>(
                                    http::Response::builder()
                                        .status(reply.status)
                                        .header("content-type", "application/json")
                                        .body(Full::new(Bytes::from(reply.body.to_string())))
                                        .unwrap(),
                                )
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        Self {
            addr,
            ca_pem: ca_cert.pem(),
            seen,
            task,
        }
    }
}

/// The allowing answer to an AdmissionReview, with warnings.
pub fn allow(review: &Value, warnings: &[&str]) -> Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": true, "warnings": warnings},
    })
}

/// The denying answer to an AdmissionReview.
pub fn deny(review: &Value, code: u16, reason: &str, message: &str) -> Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": false,
            "status": {"code": code, "reason": reason, "message": message}},
    })
}

/// The answer of a mutating webhook applying `patch` (a JSON patch).
pub fn patch(review: &Value, patch: &Value) -> Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": true, "patchType": "JSONPatch",
            "patch": base64::engine::general_purpose::STANDARD.encode(patch.to_string())},
    })
}
