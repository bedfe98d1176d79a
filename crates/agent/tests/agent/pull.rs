//! containerd and skopeo pull through the agent, against real docker-registry upstreams.

use crate::common::*;
use registry_plan::BackendName;
use testkit::containerd::PullOptions;
use testkit::image::{Format, Index, Layout as ImageLayout};
use testkit::push::Registry;
use testkit::{Certs, Containerd, ImageBuilder, Upstream, UpstreamOptions};

const PLATFORM: &str = "registry.d8-system.svc:5001";

fn served(kind: &str) -> String {
    format!("d8_registry_agent_requests_total{{kind=\"{kind}\",result=\"served\"}}")
}

#[tokio::test]
async fn containerd_pulls_platform_images_by_primary_address_and_by_upstream_host() {
    let upstream =
        Upstream::start(UpstreamOptions::default().token_auth("license-token", "secret-license"))
            .await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let install = ImageBuilder::new("install")
        .layers(&[200_000, 1 << 20])
        .build(&images);
    let amd = ImageBuilder::new("controller-amd64")
        .layer(50_000)
        .build(&images);
    let arm = ImageBuilder::new("controller-arm64")
        .layer(50_000)
        .platform("linux", "arm64")
        .build(&images);
    let index = Index::build(&images, Format::Oci, &[amd.clone(), arm]);
    let registry = Registry::of(&upstream);
    registry
        .push_image("deckhouse/ee/install", Some("v1.70.0"), &install)
        .await
        .unwrap();
    registry
        .push_index("deckhouse/ee/controller", "v1.70.0", &index)
        .await
        .unwrap();

    let containerd = Containerd::start().await;
    let layout = layout(
        vec![backend(
            BackendName::Upstream,
            endpoint(
                &upstream,
                "/deckhouse/ee",
                Some(("license-token", "secret-license")),
            ),
        )],
        vec![],
    );
    let agent = AgentUnderTest::start(&layout, &containerd.hosts_dir()).await;
    let hosts =
        std::fs::read_to_string(containerd.hosts_dir().join("_default/hosts.toml")).unwrap();
    assert!(
        hosts.contains(&format!("https://{}", agent.address())),
        "{hosts}"
    );

    // By the in-cluster primary name: rewritten onto the upstream's path, our credentials.
    containerd
        .pull(&format!("{PLATFORM}/system/deckhouse/install:v1.70.0"))
        .await
        .expect_success("pull by the primary address");
    // A multi-arch index by tag, then the same image by digest.
    containerd
        .pull(&format!("{PLATFORM}/system/deckhouse/controller:v1.70.0"))
        .await
        .expect_success("pull of an index");
    containerd
        .pull(&format!(
            "{PLATFORM}/system/deckhouse/controller@{}",
            index.digest()
        ))
        .await
        .expect_success("pull by digest");
    let content = containerd.content().await;
    for blob in amd.blobs() {
        assert!(content.contains(&blob.digest), "{} missing", blob.digest);
    }
    // By the upstream's own host, under its path: served as primary too. (Layers already
    // unpacked are not fetched again, so count requests rather than content.)
    containerd.clear().await;
    let before = agent.sample(&served("Primary"));
    containerd
        .pull(&format!("{}/deckhouse/ee/install:v1.70.0", upstream.host()))
        .await
        .expect_success("pull by the upstream's host");

    assert!(
        containerd
            .content()
            .await
            .contains(&install.manifest.digest)
    );
    assert!(
        agent.sample(&served("Primary")) >= before + 3,
        "{}",
        agent.metrics()
    );
    // containerd itself holds no credentials: every pull was authenticated by the agent.
    assert!(upstream.token_server().unwrap().issued() >= 1);
    agent.running.stop().await;
}

#[tokio::test]
async fn unknown_registries_pass_through_with_the_clients_own_credentials() {
    let ca = Certs::new("third-party CA");
    let third_party = Upstream::start(
        UpstreamOptions::default()
            .tls(&ca)
            .basic_auth("pull-secret", "s3cr3t"),
    )
    .await;
    let images = ImageLayout::new(&third_party.scratch_dir().join("images")).unwrap();
    let app = ImageBuilder::new("app")
        .layers(&[30_000])
        .docker()
        .build(&images);
    Registry::of(&third_party)
        .push_image("team/app", Some("v2"), &app)
        .await
        .unwrap();

    let containerd = Containerd::start().await;
    // The agent knows nothing of this registry; it trusts its CA through the trust directory.
    let upstream = Upstream::start_plain().await;
    let layout = layout(
        vec![backend(
            BackendName::Upstream,
            endpoint(&upstream, "/dkp", None),
        )],
        vec![],
    );
    let agent =
        AgentUnderTest::start_with_trust(&layout, &containerd.hosts_dir(), Some(&ca.ca_pem()))
            .await;

    let reference = format!("{}/team/app:v2", third_party.host());
    let refused = containerd.pull(&reference).await;
    assert!(!refused.success, "without credentials the registry refuses");
    let options = PullOptions {
        credentials: third_party.credentials().cloned(),
        ..PullOptions::default()
    };
    containerd
        .pull_with(&reference, &options)
        .await
        .expect_success("pass-through pull");
    assert!(
        agent.sample(&served("PassThrough")) >= 4,
        "{}",
        agent.metrics()
    );
    agent.running.stop().await;
}
