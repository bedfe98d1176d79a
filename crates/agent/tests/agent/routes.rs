//! RegistryUpstream routes, known hosts, skopeo through the agent, and secrecy of credentials.

use registry_plan::BackendName;
use testkit::image::Layout as ImageLayout;
use testkit::push::Registry;
use testkit::skopeo::{Access, Copy};
use testkit::{Containerd, ImageBuilder, Upstream, UpstreamOptions};

use crate::common::*;

#[tokio::test]
async fn a_registry_upstream_match_routes_under_its_path_and_known_hosts_get_credentials() {
    let primary =
        Upstream::start(UpstreamOptions::default().basic_auth("license", "primary-secret")).await;
    let mirror =
        Upstream::start(UpstreamOptions::default().token_auth("route-user", "route-secret")).await;
    let images = ImageLayout::new(&mirror.scratch_dir().join("images")).unwrap();
    let app = ImageBuilder::new("routed-app").layer(10_000).build(&images);
    Registry::of(&mirror)
        .push_image("cache/ghcr/org/app", Some("v1"), &app)
        .await
        .unwrap();
    let images = ImageLayout::new(&primary.scratch_dir().join("images")).unwrap();
    let etcd = ImageBuilder::new("etcd").layer(10_000).build(&images);
    Registry::of(&primary)
        .push_image("control-plane/etcd", Some("v3"), &etcd)
        .await
        .unwrap();

    let containerd = Containerd::start().await;
    let layout = layout(
        vec![backend(
            BackendName::Upstream,
            endpoint(
                &primary,
                "/deckhouse/ee",
                Some(("license", "primary-secret")),
            ),
        )],
        vec![route(
            "ghcr.example.invalid",
            endpoint(&mirror, "/cache/ghcr", Some(("route-user", "route-secret"))),
        )],
    );
    let agent = AgentUnderTest::start(&layout, &containerd.hosts_dir()).await;

    containerd
        .pull("GHCR.example.invalid/org/app:v1")
        .await
        .expect_success("pull through a RegistryUpstream route");
    assert!(
        agent.sample("d8_registry_agent_requests_total{kind=\"Route\",result=\"served\"}") >= 3
    );

    // The primary upstream named directly, outside its image path: Known, with its credentials.
    containerd
        .pull(&format!("{}/control-plane/etcd:v3", primary.host()))
        .await
        .expect_success("pull of a known host");
    assert!(
        agent.sample("d8_registry_agent_requests_total{kind=\"Known\",result=\"served\"}") >= 3
    );

    // No credential appears in the agent's metrics, the drop-in, or its error bodies.
    let mut exposed = agent.metrics();
    for entry in walk(&containerd.hosts_dir()) {
        exposed.push_str(&std::fs::read_to_string(entry).unwrap_or_default());
    }
    let error = testkit::http_client(Some(&agent.running.ca_pem))
        .get(format!(
            "https://{}/v2/nope/manifests/v1?ns=ghcr.example.invalid",
            agent.address()
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    exposed.push_str(&error);
    for secret in ["primary-secret", "route-secret"] {
        assert!(!exposed.contains(secret), "{secret} leaked:\n{exposed}");
    }
    agent.running.stop().await;
}

#[tokio::test]
async fn skopeo_pulls_through_the_agent_without_ns() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("u", "p")).await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let install = ImageBuilder::new("install")
        .layers(&[5_000, 300_000])
        .docker()
        .build(&images);
    Registry::of(&upstream)
        .push_image("dkp/install", Some("v1"), &install)
        .await
        .unwrap();

    let dropin = tempfile::tempdir().unwrap();
    let layout = layout(
        vec![backend(
            BackendName::Upstream,
            endpoint(&upstream, "/dkp", Some(("u", "p"))),
        )],
        vec![],
    );
    let agent = AgentUnderTest::start(&layout, dropin.path()).await;
    // skopeo talks to the agent directly (as node processes do): no `ns`, so primary.
    let certs = dropin.path().join("skopeo-certs");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::write(certs.join("ca.crt"), &agent.running.ca_pem).unwrap();
    let out = tempfile::tempdir().unwrap();
    let destination = format!("oci:{}:v1", out.path().display());
    Copy::new(
        &format!("docker://{}/system/deckhouse/install:v1", agent.address()),
        &destination,
    )
    .source_access(Access {
        credentials: None,
        cert_dir: Some(certs),
    })
    .run()
    .await
    .expect_success("skopeo copy through the agent");
    let copied = ImageLayout::new(out.path()).unwrap();
    for blob in install.blobs() {
        let path = copied
            .dir()
            .join("blobs/sha256")
            .join(blob.digest.trim_start_matches("sha256:"));
        assert_eq!(
            std::fs::read(path).unwrap(),
            blob.read(),
            "{} differs",
            blob.digest
        );
    }
    agent.running.stop().await;
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
