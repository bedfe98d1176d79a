//! Failover across targets, as containerd and a plain HTTPS client see it.

use registry_plan::BackendName;
use testkit::image::Layout as ImageLayout;
use testkit::push::Registry;
use testkit::{Containerd, ImageBuilder, Upstream, UpstreamOptions};

use crate::common::*;

const INSTALL: &str = "registry.d8-system.svc:5001/system/deckhouse/install:v1";

fn failovers(target: &str, reason: &str) -> String {
    format!("d8_registry_agent_failovers_total{{target=\"{target}\",reason=\"{reason}\"}}")
}

/// A registry holding `deckhouse/install:v1`, with optional Basic auth.
async fn upstream_with_install(auth: Option<(&str, &str)>) -> (Upstream, testkit::Image) {
    let options = match auth {
        Some((user, password)) => UpstreamOptions::default().basic_auth(user, password),
        None => UpstreamOptions::default(),
    };
    let upstream = Upstream::start(options).await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("install").layer(20_000).build(&images);
    Registry::of(&upstream)
        .push_image("deckhouse/install", Some("v1"), &image)
        .await
        .unwrap();
    (upstream, image)
}

/// A client of the agent that trusts its CA.
fn client(agent: &AgentUnderTest) -> reqwest::Client {
    testkit::http_client(Some(&agent.running.ca_pem))
}

#[tokio::test]
async fn storage_down_means_upstream_serves() {
    let (upstream, _) = upstream_with_install(Some(("u", "p"))).await;
    let containerd = Containerd::start().await;
    let dead = dead_endpoint("/system/deckhouse");
    let dead_host = dead.host.clone();
    let layout = layout(
        vec![
            backend(BackendName::Storage, dead),
            backend(
                BackendName::Upstream,
                endpoint(&upstream, "/deckhouse", Some(("u", "p"))),
            ),
        ],
        vec![],
    );
    let agent = AgentUnderTest::start(&layout, &containerd.hosts_dir()).await;
    containerd
        .pull(INSTALL)
        .await
        .expect_success("pull with storage down");
    assert!(
        agent.sample(&failovers(&dead_host, "unreachable")) >= 1,
        "{}",
        agent.metrics()
    );
    agent.running.stop().await;
}

#[tokio::test]
async fn rejected_credentials_fail_over_without_relaying_the_challenge() {
    let (wrong, _) = upstream_with_install(Some(("node", "right-password"))).await;
    let (good, _) = upstream_with_install(Some(("u", "p"))).await;
    let containerd = Containerd::start().await;
    let layout = layout(
        vec![
            backend(
                BackendName::Storage,
                endpoint(&wrong, "/deckhouse", Some(("node", "stale-password"))),
            ),
            backend(
                BackendName::Upstream,
                endpoint(&good, "/deckhouse", Some(("u", "p"))),
            ),
        ],
        vec![],
    );
    let agent = AgentUnderTest::start(&layout, &containerd.hosts_dir()).await;
    containerd
        .pull(INSTALL)
        .await
        .expect_success("pull past a 401");
    assert!(
        agent.sample(&failovers(&wrong.host(), "unauthorized")) >= 1,
        "{}",
        agent.metrics()
    );

    // With only the rejecting target, the client gets a 502, not the backend's challenge.
    agent.running.layout.set(Some(registry_plan::Layout {
        backends: vec![backend(
            BackendName::Storage,
            endpoint(&wrong, "/deckhouse", Some(("node", "stale-password"))),
        )],
        ..Default::default()
    }));
    let response = client(&agent)
        .get(format!(
            "https://{}/v2/system/deckhouse/install/manifests/v1",
            agent.address()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    assert!(response.headers().get("www-authenticate").is_none());
    let body = response.text().await.unwrap();
    assert!(
        body.contains("every registry failed, the last with"),
        "{body}"
    );
    assert!(
        !body.contains("stale-password") && !body.contains("right-password"),
        "{body}"
    );
    agent.running.stop().await;
}

#[tokio::test]
async fn not_found_is_relayed_and_never_retried_elsewhere() {
    let empty = Upstream::start_plain().await;
    let (full, _) = upstream_with_install(None).await;
    let layout = layout(
        vec![
            backend(BackendName::Storage, endpoint(&empty, "/deckhouse", None)),
            backend(BackendName::Upstream, endpoint(&full, "/deckhouse", None)),
        ],
        vec![],
    );
    let dropin = tempfile::tempdir().unwrap();
    let agent = AgentUnderTest::start(&layout, dropin.path()).await;
    let response = client(&agent)
        .get(format!(
            "https://{}/v2/system/deckhouse/install/manifests/v1",
            agent.address()
        ))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body = response.text().await.unwrap();
    assert!(
        body.contains("MANIFEST_UNKNOWN") || body.contains("NAME_UNKNOWN"),
        "{body}"
    );
    assert!(
        !full
            .log()
            .contains("\"GET /v2/deckhouse/install/manifests/v1"),
        "the second backend was asked:\n{}",
        full.log()
    );
    assert_eq!(
        agent.sample("d8_registry_agent_requests_total{kind=\"Primary\",result=\"not_found\"}"),
        1
    );
    agent.running.stop().await;
}

#[tokio::test]
async fn server_errors_fail_over_and_all_down_is_502() {
    let (full, image) = upstream_with_install(None).await;
    let failing = failing_registry().await;
    let layout = layout(
        vec![
            backend(BackendName::Storage, failing.clone()),
            backend(BackendName::Upstream, endpoint(&full, "/deckhouse", None)),
        ],
        vec![],
    );
    let dropin = tempfile::tempdir().unwrap();
    let agent = AgentUnderTest::start(&layout, dropin.path()).await;
    let url = format!(
        "https://{}/v2/system/deckhouse/install/manifests/v1",
        agent.address()
    );
    let response = client(&agent)
        .head(&url)
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["docker-content-digest"], image.digest());
    assert_eq!(
        response.headers()["content-length"].to_str().unwrap(),
        image.manifest.size.to_string()
    );
    assert!(
        agent.sample(&failovers(&failing.host, "server_error")) >= 1,
        "{}",
        agent.metrics()
    );

    // Everything down: 502 naming the reason.
    agent.running.layout.set(Some(registry_plan::Layout {
        backends: vec![
            backend(BackendName::Storage, dead_endpoint("/a")),
            backend(BackendName::Upstream, dead_endpoint("/b")),
        ],
        ..Default::default()
    }));
    let response = client(&agent).get(&url).send().await.unwrap();
    assert_eq!(response.status(), 502);
    let body = response.text().await.unwrap();
    assert!(body.contains("no registry could be reached"), "{body}");
    assert_eq!(
        agent.sample("d8_registry_agent_requests_total{kind=\"Primary\",result=\"all_failed\"}"),
        1
    );
    agent.running.stop().await;
}

/// A registry that answers 500 to everything.
async fn failing_registry() -> registry_plan::Endpoint {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = axum::Router::new()
        .fallback(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "boom") });
    tokio::spawn(async move { axum::serve(listener, app).await });
    registry_plan::Endpoint {
        scheme: registry_plan::Scheme::Http,
        host: address.to_string(),
        path: "/deckhouse".into(),
        ca: None,
        auth: None,
    }
}
