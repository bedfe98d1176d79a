//! Two replicas with their sync loops on the embedded API server and a docker-registry
//! upstream: the elected leader fills from the upstream, the follower copies from the leader's
//! reported address (the upstream serves each blob once), both report full; when the leader
//! dies, the full follower takes over. With the set computed from the cluster, three replicas
//! still fetch every blob from the upstream once, the release image's own included: only the
//! leader reads it through its filling listener, the followers from their store or the leader.

use std::time::Duration;

use api::registry::{RegistryStorage, RegistryStorageSpec};
use kube::api::{Api, PostParams};
use oci::{Digest, Repository};
use storage::{Access, Accounts, Limits, Settings};
use storage_kube::expected::Source;
use storage_kube::sync::{self, ClusterSet, LeaderAccess, Sync};
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

/// A replica with fixed roots (`Some`) or the set computed from the cluster, read through its
/// own read listener as `d8 registry storage --expected-from-cluster` does (`None`).
async fn replica(
    server: &testkit::Cluster,
    node: &str,
    upstream: &testkit::Upstream,
    root: Option<Digest>,
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
        roots: root.into_iter().collect(),
        leader: LeaderAccess {
            scheme: registry_client::Scheme::Http,
            ca_pem: None,
            credentials: Some(registry_client::Credentials::new("node", "node-pw")),
        },
        parallelism: 4,
        interval: Duration::from_millis(200),
    };
    let cluster = root.is_none().then(|| {
        let own = registry_client::Client::new(registry_client::Config::default())
            .remote(
                registry_client::Endpoint::new(
                    registry_client::Scheme::Http,
                    &running.read_address.to_string(),
                )
                .credentials(registry_client::Credentials::new("node", "node-pw")),
            )
            .unwrap();
        ClusterSet::new(Source::registry(own, "system/deckhouse"))
    });
    let sync = sync::spawn_with_cluster_set(
        server.client().await,
        running.registry.clone(),
        Some(upstream_of(upstream)),
        config,
        cluster,
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

/// Every blob of `images` was served by the upstream exactly once.
fn assert_fetched_once(upstream: &testkit::Upstream, images: &[&testkit::image::Image]) {
    let log = upstream.log();
    for blob in images.iter().flat_map(|i| i.blobs()) {
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

    let a = replica(&server, "master-a", &upstream, Some(root)).await;
    let b = replica(&server, "master-b", &upstream, Some(root)).await;

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
    assert_fetched_once(&upstream, &[&image]);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_computing_the_set_from_the_cluster_fetch_every_blob_once() {
    use api::deckhouse_release::DeckhouseRelease;
    use kube::api::{Patch, PatchParams};

    let server = testkit::Cluster::start().await;
    let admin = server.client().await;
    let rstor: Api<RegistryStorage> = Api::all(admin.clone());
    rstor
        .create(
            &PostParams::default(),
            &RegistryStorage::new("registry", RegistryStorageSpec::default()),
        )
        .await
        .unwrap();
    let releases: Api<DeckhouseRelease> = Api::all(admin);
    releases
        .create(&PostParams::default(), &DeckhouseRelease::test("v1.70.0"))
        .await
        .unwrap();
    releases
        .patch_status(
            "v1.70.0",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"phase": "Deployed"}})),
        )
        .await
        .unwrap();

    // The release image (1 MiB of its own besides the images file) names one component.
    let upstream =
        testkit::Upstream::start(UpstreamOptions::default().token_auth("up", "up-pw")).await;
    let images = tempfile::tempdir().unwrap();
    let layout = testkit::image::Layout::new(images.path()).unwrap();
    let component = ImageBuilder::new("controller")
        .uncompressed()
        .layers(&[2 << 20, 100_000])
        .build(&layout);
    let digests = serde_json::json!({"common": {"controller": component.digest()}});
    let release = ImageBuilder::new("deckhouse v1.70.0")
        .uncompressed()
        .layers(&[1 << 20])
        .files(&[(
            "deckhouse/modules/images_digests.json",
            digests.to_string().as_bytes(),
        )])
        .build(&layout);
    let push = testkit::push::Registry::of(&upstream);
    push.push_image("deckhouse/ee", None, &component)
        .await
        .unwrap();
    push.push_image("deckhouse/ee", Some("v1.70.0"), &release)
        .await
        .unwrap();

    let replicas = [
        replica(&server, "master-a", &upstream, None).await,
        replica(&server, "master-b", &upstream, None).await,
        replica(&server, "master-c", &upstream, None).await,
    ];
    until(
        "three full replicas in the status",
        Duration::from_secs(30),
        async || {
            let Some(status) = rstor.get("registry").await.unwrap().status else {
                return false;
            };
            status.replicas.len() == 3
                && status
                    .replicas
                    .iter()
                    .all(|r| r.full == Some(true) && r.declared_digests == Some(2))
        },
    )
    .await;
    assert_eq!(replicas.iter().filter(|r| r.sync.is_leader()).count(), 1);
    assert_fetched_once(&upstream, &[&release, &component]);
}
