//! Two replicas with their sync loops on the embedded API server and a docker-registry
//! upstream: the elected leader fills from the upstream, the follower copies from the leader's
//! reported address (the upstream serves each blob once), both report full; when the leader
//! dies, the full follower takes over.

use std::time::Duration;

use api::registry::{RegistryStorage, RegistryStorageSpec};
use kube::api::{Api, PostParams};
use oci::{Digest, Repository};
use storage::{Access, Accounts, Limits, Settings};
use storage_kube::sync::{self, LeaderAccess, Sync};
use testkit::{ImageBuilder, UpstreamOptions};
use tokio::time::Instant;

const LEASE: Duration = Duration::from_secs(2);

fn upstream_of(upstream: &testkit::Upstream) -> storage::Upstream {
    let endpoint = registry_client::Endpoint::from_url(&format!("{}/deckhouse/ee", upstream.url()))
        .unwrap()
        .credentials(registry_client::Credentials::new("up", "up-pw"));
    storage::Upstream {
        remote: registry_client::Client::new(registry_client::Config::default())
            .remote(endpoint)
            .unwrap(),
        prefix: "system/deckhouse".into(),
    }
}

struct Replica {
    running: storage::run::Running,
    sync: Sync,
    _dir: tempfile::TempDir,
}

async fn replica(
    server: &testkit::Cluster,
    node: &str,
    upstream: &testkit::Upstream,
    root: Digest,
) -> Replica {
    let dir = tempfile::tempdir().unwrap();
    let accounts = Accounts::new().with("node", "node-pw", Access::Pull);
    let running = storage::run::start(storage::run::Config {
        data_dir: dir.path().join("data"),
        read_address: "127.0.0.1:0".parse().unwrap(),
        write_address: "127.0.0.1:0".parse().unwrap(),
        tls: None,
        read_accounts: accounts.clone(),
        write_accounts: accounts,
        upstream: Some(upstream_of(upstream)),
        limits: Limits {
            budget: None,
            reserve: Some(0),
        },
        settings: Settings::default(),
        node: node.into(),
        metrics_address: None,
    })
    .await
    .unwrap();
    let mut election = storage_kube::election::Config::new(node);
    election.lease.lease_duration = LEASE;
    election.lease.renew_deadline = Duration::from_millis(1500);
    election.lease.retry_period = Duration::from_millis(200);
    election.recheck = Duration::from_millis(300);
    let config = sync::Config {
        election,
        address: running.read_address.to_string(),
        repository: Repository::parse("system/deckhouse").unwrap(),
        roots: vec![root],
        leader: LeaderAccess {
            scheme: registry_client::Scheme::Http,
            ca_pem: None,
            credentials: Some(registry_client::Credentials::new("node", "node-pw")),
        },
        parallelism: 4,
        interval: Duration::from_millis(200),
    };
    let sync = sync::spawn(
        server.client().await,
        running.registry.clone(),
        Some(upstream_of(upstream)),
        config,
    )
    .unwrap();
    Replica {
        running,
        sync,
        _dir: dir,
    }
}

async fn until(what: &str, within: Duration, mut done: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_leader_fills_the_follower_copies_from_it_and_takes_over_when_it_dies() {
    let server = testkit::Cluster::start().await;
    let admin = server.client().await;
    let rstor: Api<RegistryStorage> = Api::all(admin);
    rstor
        .create(
            &PostParams::default(),
            &RegistryStorage::new("registry", RegistryStorageSpec::default()),
        )
        .await
        .unwrap();

    let upstream =
        testkit::Upstream::start(UpstreamOptions::default().token_auth("up", "up-pw")).await;
    let images = tempfile::tempdir().unwrap();
    let layout = testkit::image::Layout::new(images.path()).unwrap();
    let image = ImageBuilder::new("synced")
        .uncompressed()
        .layers(&[3 << 20, 200_000])
        .build(&layout);
    testkit::push::Registry::of(&upstream)
        .push_image("deckhouse/ee", Some("v1.70.0"), &image)
        .await
        .unwrap();
    let root = Digest::parse(image.digest()).unwrap();

    let a = replica(&server, "master-a", &upstream, root).await;
    let b = replica(&server, "master-b", &upstream, root).await;

    until(
        "both replicas full in the status",
        Duration::from_secs(20),
        async || {
            let Some(status) = rstor.get("registry").await.unwrap().status else {
                return false;
            };
            status.replicas.len() == 2 && status.replicas.iter().all(|r| r.full == Some(true))
        },
    )
    .await;
    assert!(a.sync.is_leader() && !b.sync.is_leader());
    let status = rstor.get("registry").await.unwrap().status.unwrap();
    let follower = status
        .replicas
        .iter()
        .find(|r| r.node == "master-b")
        .unwrap();
    assert_eq!(follower.source.as_deref(), Some("master-a"));
    assert_eq!(follower.verified_digests, Some(1));
    assert_eq!(follower.declared_digests, Some(1));
    assert!(follower.verified_set.is_some());
    assert!(follower.store.as_ref().is_some_and(|s| s.writable));
    // The follower copied from the leader: the upstream served every blob once.
    let log = upstream.log();
    for blob in image.blobs() {
        let gets = log
            .lines()
            .filter(|l| {
                l.contains(&format!("/blobs/{} ", blob.digest))
                    && l.contains("\"GET ")
                    && l.contains("\" 200 ")
            })
            .count();
        assert_eq!(
            gets, 1,
            "{} fetched {gets} times from the upstream",
            blob.digest
        );
    }
    let report = b.running.registry.store().verify().unwrap();
    assert!(report.removed.is_empty());

    // The leader dies without releasing the lease: the full follower takes over.
    let killed = Instant::now();
    a.sync.abort();
    a.running.stop().await;
    until("the follower leads", LEASE * 4, async || b.sync.is_leader()).await;
    let took = killed.elapsed();
    assert!(took >= LEASE - Duration::from_millis(300), "{took:?}");
    until(
        "the new leader's role in the status",
        Duration::from_secs(5),
        async || {
            rstor
                .get("registry")
                .await
                .unwrap()
                .status
                .is_some_and(|s| {
                    s.replicas.iter().any(|r| {
                        r.node == "master-b" && r.role.map(|r| r.as_str()) == Some("Leader")
                    })
                })
        },
    )
    .await;
}
