//! Shared test helpers: start a real server on 127.0.0.1:0 and build kube-rs clients for it.
#![allow(dead_code, unreachable_pub)]

use apiserver::{ApiServer, Builder, RunningServer};
use std::path::Path;
use std::time::Duration;

/// The test CRDs (Widget, namespaced with status; Gadget, cluster-scoped, free-form).
pub const WIDGET_CRD: &str = include_str!("widget-crd.yaml");

/// A server and its data directory.
pub struct TestServer {
    pub server: RunningServer,
    pub dir: tempfile::TempDir,
}

pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Starts a TLS server with the test CRDs, customized by `f`.
pub async fn start_with(f: impl FnOnce(Builder) -> Builder) -> TestServer {
    init();
    let dir = tempfile::tempdir().unwrap();
    let b = ApiServer::builder()
        .data_dir(dir.path())
        .crd_yaml(WIDGET_CRD)
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = f(b).serve(listener).await.unwrap();
    TestServer { server, dir }
}

/// Starts a TLS server with the test CRDs.
pub async fn start() -> TestServer {
    start_with(|b| b).await
}

/// A kube-rs client from a kubeconfig file written by the server.
pub async fn client_from(path: &Path) -> kube::Client {
    init();
    let kc = kube::config::Kubeconfig::read_from(path).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

impl TestServer {
    pub async fn admin(&self) -> kube::Client {
        client_from(self.server.admin_kubeconfig()).await
    }

    pub async fn client(&self, user: &str) -> kube::Client {
        client_from(self.server.kubeconfig(user).unwrap()).await
    }
}

/// Polls `f` until it returns `Some`, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached in {secs}s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
