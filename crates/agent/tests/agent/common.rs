//! Shared setup: an agent on a free loopback port with a given layout, writing its drop-in
//! into a real containerd's hosts dir.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent::run::{Config, NoApi, Running, start};
use registry_client::MinThroughput;
use registry_plan::{Backend, BackendName, Credentials, Endpoint, Layout, Route, Scheme};

/// An endpoint for a testkit upstream, with its CA and optional credentials.
pub fn endpoint(
    upstream: &testkit::Upstream,
    path: &str,
    credentials: Option<(&str, &str)>,
) -> Endpoint {
    Endpoint {
        scheme: if upstream.is_tls() {
            Scheme::Https
        } else {
            Scheme::Http
        },
        host: upstream.host(),
        path: path.to_owned(),
        ca: upstream.ca_pem().map(str::to_owned),
        auth: credentials.map(|(u, p)| Credentials {
            username: u.into(),
            password: p.into(),
        }),
    }
}

/// An endpoint nothing listens on.
pub fn dead_endpoint(path: &str) -> Endpoint {
    Endpoint {
        scheme: Scheme::Http,
        host: format!("127.0.0.1:{}", testkit::process::free_port()),
        path: path.to_owned(),
        ca: None,
        auth: None,
    }
}

pub fn backend(name: BackendName, endpoint: Endpoint) -> Backend {
    Backend {
        name,
        endpoint,
        mirrors: vec![],
    }
}

pub fn route(match_host: &str, endpoint: Endpoint) -> Route {
    Route {
        match_host: match_host.to_owned(),
        endpoint,
        mirrors: vec![],
    }
}

pub fn layout(backends: Vec<Backend>, routes: Vec<Route>) -> Layout {
    Layout {
        cache: backends.iter().any(|b| b.name == BackendName::Storage),
        backends,
        additional_routes: routes,
    }
}

/// An agent started on the bootstrap layout `layout`, its drop-in in `dropin_dir`.
#[derive(Debug)]
pub struct AgentUnderTest {
    pub running: Running,
    pub dir: tempfile::TempDir,
    pub dropin_dir: PathBuf,
}

impl AgentUnderTest {
    pub async fn start(layout: &Layout, dropin_dir: &Path) -> Self {
        Self::start_with_trust(layout, dropin_dir, None).await
    }

    /// With `trust_pem` in the agent's trust directory.
    pub async fn start_with_trust(
        layout: &Layout,
        dropin_dir: &Path,
        trust_pem: Option<&str>,
    ) -> Self {
        let timeouts = registry_client::Timeouts {
            connect: Duration::from_secs(2),
            response_headers: Duration::from_secs(10),
            stall: Duration::from_secs(5),
            total: Some(Duration::from_secs(60)),
        };
        Self::start_configured(
            layout,
            dropin_dir,
            trust_pem,
            timeouts,
            MinThroughput::DEFAULT,
        )
        .await
    }

    /// With these timeouts towards registries.
    pub async fn start_with_timeouts(
        layout: &Layout,
        dropin_dir: &Path,
        timeouts: registry_client::Timeouts,
    ) -> Self {
        Self::start_configured(layout, dropin_dir, None, timeouts, MinThroughput::DEFAULT).await
    }

    /// With these timeouts and this throughput floor towards registries.
    pub async fn start_with_watchdogs(
        layout: &Layout,
        dropin_dir: &Path,
        timeouts: registry_client::Timeouts,
        min_throughput: MinThroughput,
    ) -> Self {
        Self::start_configured(layout, dropin_dir, None, timeouts, min_throughput).await
    }

    async fn start_configured(
        layout: &Layout,
        dropin_dir: &Path,
        trust_pem: Option<&str>,
        timeouts: registry_client::Timeouts,
        min_throughput: MinThroughput,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let trust_dir = dir.path().join("trust");
        std::fs::create_dir_all(&trust_dir).unwrap();
        if let Some(pem) = trust_pem {
            std::fs::write(trust_dir.join("extra.crt"), pem).unwrap();
        }
        let bootstrap = dir.path().join("bootstrap-layout.json");
        std::fs::write(&bootstrap, serde_json::to_vec(layout).unwrap()).unwrap();
        let config = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            advertise: None,
            plain_http: false,
            metrics: Some("127.0.0.1:0".parse().unwrap()),
            containerd_registry_dir: dropin_dir.to_owned(),
            pki_dir: dir.path().join("pki"),
            trust_dir: Some(trust_dir),
            bootstrap_layout: Some(bootstrap),
            layout_cache: dir.path().join("cache/layout.json"),
            interval: Duration::from_secs(30),
            timeouts,
            min_throughput: Some(min_throughput),
        };
        let running = start(config, NoApi).await.expect("agent starts");
        Self {
            running,
            dir,
            dropin_dir: dropin_dir.to_owned(),
        }
    }

    pub fn address(&self) -> String {
        self.running.address.to_string()
    }

    pub fn metrics(&self) -> String {
        self.running.metrics.encode()
    }

    /// The value of one sample line, e.g. `d8_registry_agent_requests_total{kind="Primary",result="served"}`.
    pub fn sample(&self, series: &str) -> u64 {
        self.metrics()
            .lines()
            .find_map(|line| {
                line.strip_prefix(series)
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0)
    }
}
