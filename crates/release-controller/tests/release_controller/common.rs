//! A cluster for the release engine: the embedded API server with the platform's CRDs, a real
//! `docker-registry` holding the release channel and release images, and an engine wired to
//! both with a manual clock.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use api::deckhouse_release::DeckhouseRelease;
use api::module_config::ModuleConfig;
use axum::http::{HeaderMap, StatusCode};
use jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use release_controller::ManualClock;
use release_controller::alerts::{AlertSource, StaticAlerts};
use release_controller::apply::{AlwaysReady, Deployer, DeploymentTarget, Readiness};
use release_controller::controller::Engine;
use release_controller::requirements::{Checks, KubernetesVersionSource};
use release_controller::source::ReleaseSource;
use testkit::image::Layout;
use testkit::push::Registry;
use testkit::{ImageBuilder, Upstream};

/// The repository releases are published under.
pub const REPO: &str = "deckhouse/ce";
pub const CLUSTER_UUID: &str = "2bd4f1a0-9c1e-4b8e-8d59-1f7a3c5e0b11";

pub struct Cluster {
    pub server: apiserver::RunningServer,
    pub client: Client,
    pub upstream: Upstream,
    pub registry: Registry,
    pub layout: Layout,
    pub clock: ManualClock,
    pub alerts: StaticAlerts,
    pub deployer: Arc<DeploymentTarget>,
    pub engine: Arc<Engine>,
    _dir: tempfile::TempDir,
}

pub fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

async fn admin_client(server: &apiserver::RunningServer) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(server.admin_kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

impl Cluster {
    /// Starts everything with Deckhouse `running` (e.g. `v1.66.3`) and the clock at `now`.
    pub async fn start(running: &str, now: &str) -> Self {
        Self::start_with(running, now, Checks::with_defaults()).await
    }

    pub async fn start_with(running: &str, now: &str, checks: Checks) -> Self {
        Self::start_full(
            running,
            now,
            checks,
            KubernetesVersionSource::Fixed("1.29.3".into()),
        )
        .await
    }

    pub async fn start_full(
        running: &str,
        now: &str,
        checks: Checks,
        kubernetes: KubernetesVersionSource,
    ) -> Self {
        Self::start_ready(running, now, checks, kubernetes, Arc::new(AlwaysReady)).await
    }

    pub async fn start_ready(
        running: &str,
        now: &str,
        checks: Checks,
        kubernetes: KubernetesVersionSource,
        readiness: Arc<dyn Readiness>,
    ) -> Self {
        testkit::install_crypto();
        let dir = tempfile::tempdir().unwrap();
        let crds = api::crds::all()
            .into_iter()
            .map(|crd| serde_json::to_value(crd).unwrap())
            .chain([cluster_alert_crd()]);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = apiserver::ApiServer::builder()
            .data_dir(dir.path().join("apiserver"))
            .crds(crds)
            .namespace("d8-system")
            .namespace("kube-system")
            .namespace("default")
            .serve(listener)
            .await
            .unwrap();
        let client = admin_client(&server).await;
        let upstream = Upstream::start_plain().await;
        let registry = Registry::of(&upstream);
        let layout = Layout::new(&dir.path().join("layout")).unwrap();
        let remote = registry_client::Client::new(registry_client::Config::default())
            .remote(registry_client::Endpoint::http(&upstream.host()))
            .unwrap();
        let source = ReleaseSource::new(remote, REPO);
        let deployer = Arc::new(DeploymentTarget::embedded(
            client.clone(),
            format!("{}/{REPO}", upstream.host()),
        ));
        deployer.deploy(running).await.unwrap();
        let clock = ManualClock::new(at(now));
        let alerts = StaticAlerts::new();
        let engine = Arc::new(
            Engine::builder(client.clone(), source, deployer.clone())
                .clock(Arc::new(clock.clone()))
                .alerts(Arc::new(alerts.clone()))
                .checks(checks)
                .cluster_uuid(CLUSTER_UUID)
                .kubernetes_version(kubernetes)
                .readiness(readiness)
                .build(),
        );
        Self {
            server,
            client,
            upstream,
            registry,
            layout,
            clock,
            alerts,
            deployer,
            engine,
            _dir: dir,
        }
    }

    /// Another engine on this cluster (same registry, deployer and clock) reading firing alerts
    /// from `alerts`.
    pub fn engine_with_alerts(&self, alerts: Arc<dyn AlertSource>) -> Engine {
        let remote = registry_client::Client::new(registry_client::Config::default())
            .remote(registry_client::Endpoint::http(&self.upstream.host()))
            .unwrap();
        Engine::builder(
            self.client.clone(),
            ReleaseSource::new(remote, REPO),
            self.deployer.clone(),
        )
        .clock(Arc::new(self.clock.clone()))
        .alerts(alerts)
        .cluster_uuid(CLUSTER_UUID)
        .kubernetes_version(KubernetesVersionSource::Fixed("1.29.3".into()))
        .build()
    }

    /// Pushes `release-channel:<tag>` holding `version_json`.
    pub async fn publish_channel(&self, tag: &str, version_json: serde_json::Value) {
        let bytes = serde_json::to_vec(&version_json).unwrap();
        let image = ImageBuilder::new(&format!("channel-{tag}"))
            .files(&[
                ("version.json", bytes.as_slice()),
                ("changelog.yaml", b"deckhouse: {}\n".as_slice()),
            ])
            .build(&self.layout);
        self.registry
            .push_image(&format!("{REPO}/release-channel"), Some(tag), &image)
            .await
            .unwrap();
    }

    /// Publishes a version: `release-channel:<version>` with a plain version.json, and the
    /// release image `<REPO>:<version>`.
    pub async fn publish_version(&self, version: &str) {
        self.publish_channel(version, serde_json::json!({"version": version}))
            .await;
        let image = ImageBuilder::new(&format!("deckhouse-{version}"))
            .layer(64)
            .build(&self.layout);
        self.registry
            .push_image(REPO, Some(version), &image)
            .await
            .unwrap();
    }

    /// Creates or replaces the `deckhouse` ModuleConfig settings.
    pub async fn settings(&self, settings: serde_json::Value) {
        let configs: Api<ModuleConfig> = Api::all(self.client.clone());
        let patch = serde_json::json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
            "metadata": {"name": "deckhouse"},
            "spec": {"version": 1, "settings": settings},
        });
        if configs.get_opt("deckhouse").await.unwrap().is_some() {
            configs
                .patch(
                    "deckhouse",
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"spec": {"settings": null}})),
                )
                .await
                .unwrap();
            configs
                .patch("deckhouse", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        } else {
            let config: ModuleConfig = serde_json::from_value(patch).unwrap();
            configs
                .create(&PostParams::default(), &config)
                .await
                .unwrap();
        }
    }

    pub fn releases(&self) -> Api<DeckhouseRelease> {
        Api::all(self.client.clone())
    }

    pub async fn release(&self, name: &str) -> DeckhouseRelease {
        self.releases().get(name).await.unwrap()
    }

    /// `(name, phase, message)` of every release, sorted by name.
    pub async fn summary(&self) -> Vec<(String, String, String)> {
        let mut out: Vec<_> = self
            .releases()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|r| {
                let status = r.status.clone().unwrap_or_default();
                (
                    r.metadata.name.clone().unwrap(),
                    status
                        .phase
                        .map(|p| p.as_str().to_owned())
                        .unwrap_or_default(),
                    status.message,
                )
            })
            .collect();
        out.sort();
        out
    }

    pub async fn phase(&self, name: &str) -> (String, String) {
        let r = self.release(name).await;
        let status = r.status.unwrap_or_default();
        (
            status
                .phase
                .map(|p| p.as_str().to_owned())
                .unwrap_or_default(),
            status.message,
        )
    }

    /// The engine's clock.
    pub fn clock_now(&self) -> Timestamp {
        use release_controller::Clock;
        self.clock.now()
    }

    /// The version the Deployment runs.
    pub async fn running(&self) -> String {
        self.deployer.running_version().await.unwrap().unwrap()
    }

    pub async fn annotate(&self, name: &str, key: &str, value: &str) {
        self.releases()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"annotations": {key: value}}})),
            )
            .await
            .unwrap();
    }

    pub fn annotations(release: &DeckhouseRelease) -> BTreeMap<String, String> {
        release.metadata.annotations.clone().unwrap_or_default()
    }
}

/// One request the webhook receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    pub body: serde_json::Value,
}

/// A real HTTP server receiving release notifications, answering with `status`.
#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub async fn start(status: StatusCode) -> Self {
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let store = received.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let store = store.clone();
                async move {
                    let header = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned)
                    };
                    store.lock().unwrap().push(Received {
                        authorization: header("authorization"),
                        content_type: header("content-type"),
                        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
                    });
                    status
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, received }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// The ClusterAlert kind of Deckhouse's monitoring (not part of this platform's CRDs).
pub fn cluster_alert_crd() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusteralerts.deckhouse.io"},
        "spec": {
            "group": "deckhouse.io",
            "scope": "Cluster",
            "names": {"plural": "clusteralerts", "singular": "clusteralert", "kind": "ClusterAlert", "listKind": "ClusterAlertList"},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}
