//! The expected set computed from the cluster and garbage collection, with real parts: the
//! embedded API server holds the DeckhouseReleases, a docker-registry upstream holds release
//! images whose `deckhouse/modules/images_digests.json` names the platform's component images,
//! and a replica (store on disk, HTTP listeners) runs its sync loop over the cluster's set.
//!
//! - The replica reports not full while a component of the deployed release is missing
//!   upstream, and full once it appears (counted on its own disk, declared = release images of
//!   the deployed and previous versions + their components).
//! - A collection under Lease `registry-storage-gc` deletes exactly the older release and its
//!   component, keeps the deployed and previous ones, records `collectedAt`, and leaves the
//!   replica full.

use std::time::Duration;

use api::deckhouse_release::DeckhouseRelease;
use api::module_release::ModuleRelease;
use api::registry::{RegistryStorage, RegistryStorageSpec};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use oci::{Digest, Repository};
use storage::{Access, Accounts, Limits, Settings};
use storage_kube::expected::Source;
use storage_kube::gc::{self, Keep};
use storage_kube::sync::{self, ClusterSet, LeaderAccess};
use testkit::ImageBuilder;
use testkit::image::{Image, Layout};
use tokio::time::Instant;

const REPO: &str = "system/deckhouse";

async fn until(what: &str, within: Duration, mut done: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn component(layout: &Layout, name: &str) -> Image {
    ImageBuilder::new(name)
        .uncompressed()
        .layers(&[150_000])
        .build(layout)
}

/// A release image whose images_digests.json names `components`.
fn release(layout: &Layout, version: &str, components: &[&Image]) -> Image {
    let mut map = serde_json::Map::new();
    for (i, c) in components.iter().enumerate() {
        map.insert(format!("image{i}"), serde_json::Value::from(c.digest()));
    }
    let json = serde_json::json!({ "common": map }).to_string();
    ImageBuilder::new(&format!("deckhouse {version}"))
        .files(&[("deckhouse/modules/images_digests.json", json.as_bytes())])
        .build(layout)
}

async fn deckhouse_release(api: &Api<DeckhouseRelease>, version: &str, phase: &str) {
    let release = DeckhouseRelease::test(version);
    api.create(&PostParams::default(), &release).await.unwrap();
    api.patch_status(
        version,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"phase": phase}})),
    )
    .await
    .unwrap();
}

fn digests(image: &Image) -> Vec<Digest> {
    std::iter::once(image.digest())
        .chain(image.blobs().map(|b| b.digest.as_str()))
        .map(|d| Digest::parse(d).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cluster_set_decides_fullness_and_what_collection_keeps() {
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

    // Upstream: three releases; the deployed one names a component not pushed yet.
    let upstream = testkit::Upstream::start_plain().await;
    let images = tempfile::tempdir().unwrap();
    let layout = Layout::new(images.path()).unwrap();
    let c58 = component(&layout, "controller v1.58");
    let c59 = component(&layout, "controller v1.59");
    let c60 = component(&layout, "controller v1.60");
    let late = component(&layout, "agent v1.60 (pushed late)");
    let r58 = release(&layout, "v1.58.0", &[&c58]);
    let r59 = release(&layout, "v1.59.0", &[&c59]);
    let r60 = release(&layout, "v1.60.0", &[&c60, &late]);
    let push = testkit::push::Registry::of(&upstream);
    for c in [&c58, &c59, &c60] {
        push.push_image("deckhouse/ee", None, c).await.unwrap();
    }
    for (tag, r) in [("v1.58.0", &r58), ("v1.59.0", &r59), ("v1.60.0", &r60)] {
        push.push_image("deckhouse/ee", Some(tag), r).await.unwrap();
    }
    // A module the cluster runs, from the platform's own module source; its package declares
    // one image of its own (a flat images_digests.json at the package root).
    let echo_image = component(&layout, "echo's own image");
    push.push_image("deckhouse/ee/modules/echo", None, &echo_image)
        .await
        .unwrap();
    let echo_digests = serde_json::json!({ "echo": echo_image.digest() }).to_string();
    let echo = ImageBuilder::new("module echo v1.2.3")
        .files(&[("images_digests.json", echo_digests.as_bytes())])
        .build(&layout);
    push.push_image("deckhouse/ee/modules/echo", Some("v1.2.3"), &echo)
        .await
        .unwrap();
    // The module catalogue: one tag of `modules` per module the source offers.
    for offered in ["echo", "hello"] {
        let entry = component(&layout, &format!("catalogue entry {offered}"));
        push.push_image("deckhouse/ee/modules", Some(offered), &entry)
            .await
            .unwrap();
    }
    let modules: Api<ModuleRelease> = Api::all(admin.clone());
    modules
        .create(
            &PostParams::default(),
            &ModuleRelease::test("echo", "1.2.3"),
        )
        .await
        .unwrap();
    let name = ModuleRelease::test("echo", "1.2.3").metadata.name.unwrap();
    modules
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"phase": "Deployed"}})),
        )
        .await
        .unwrap();
    let releases: Api<DeckhouseRelease> = Api::all(admin.clone());
    deckhouse_release(&releases, "v1.58.0", "Superseded").await;
    deckhouse_release(&releases, "v1.59.0", "Superseded").await;
    deckhouse_release(&releases, "v1.60.0", "Deployed").await;

    // The replica.
    let data = tempfile::tempdir().unwrap();
    let accounts = Accounts::new().with("node", "node-pw", Access::Pull);
    let upstream_endpoint =
        registry_client::Endpoint::from_url(&format!("{}/deckhouse/ee", upstream.url())).unwrap();
    let storage_upstream = storage::Upstream {
        remote: registry_client::Client::new(registry_client::Config::default())
            .remote(upstream_endpoint)
            .unwrap(),
        prefix: REPO.into(),
    };
    let running = storage::run::start(storage::run::Config {
        data_dir: data.path().to_owned(),
        read_address: "127.0.0.1:0".parse().unwrap(),
        write_address: "127.0.0.1:0".parse().unwrap(),
        tls: None,
        read_accounts: accounts.clone(),
        write_accounts: accounts,
        upstream: Some(storage_upstream.clone()),
        limits: Limits {
            budget: None,
            reserve: Some(0),
        },
        settings: Settings::default(),
        node: "master-0".into(),
        metrics_address: None,
    })
    .await
    .unwrap();
    let own = registry_client::Client::new(registry_client::Config::default())
        .remote(
            registry_client::Endpoint::new(
                registry_client::Scheme::Http,
                &running.read_address.to_string(),
            )
            .credentials(registry_client::Credentials::new("node", "node-pw")),
        )
        .unwrap();
    let source = Source::registry(own.clone(), REPO);
    let mut election = storage_kube::election::Config::new("master-0");
    election.lease.lease_duration = Duration::from_secs(2);
    election.lease.renew_deadline = Duration::from_millis(1500);
    election.lease.retry_period = Duration::from_millis(200);
    election.recheck = Duration::from_millis(300);
    let config = sync::Config {
        election,
        address: running.read_address.to_string(),
        repository: Repository::parse(REPO).unwrap(),
        roots: Vec::new(),
        leader: LeaderAccess {
            scheme: registry_client::Scheme::Http,
            ca_pem: None,
            credentials: Some(registry_client::Credentials::new("node", "node-pw")),
        },
        parallelism: 4,
        interval: Duration::from_millis(200),
    };
    let mut cluster = ClusterSet::new(source.clone());
    cluster.ttl = Duration::from_millis(500);
    let sync = sync::spawn_with_cluster_set(
        admin.clone(),
        running.registry.clone(),
        Some(storage_upstream),
        config,
        Some(cluster),
    )
    .unwrap();

    // Declared: r59, r60, c59, c60, late, echo and echo's own image, the catalogue's echo and
    // hello = 9. `late` is missing upstream: not full.
    let entry = async || {
        rstor
            .get("registry")
            .await
            .unwrap()
            .status
            .and_then(|s| s.replicas.into_iter().find(|r| r.node == "master-0"))
    };
    let start = Instant::now();
    loop {
        let e = entry().await;
        if e.as_ref()
            .is_some_and(|r| r.declared_digests == Some(9) && r.verified_digests == Some(8))
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the replica does not count the cluster's set: {e:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let partial = entry().await.unwrap();
    assert_eq!(partial.full, Some(false), "{partial:?}");
    assert!(
        partial.error.is_some(),
        "the failed fill is reported: {partial:?}"
    );
    assert!(!sync.report().full);

    push.push_image("deckhouse/ee", None, &late).await.unwrap();
    until("the replica is full", Duration::from_secs(30), async || {
        entry()
            .await
            .is_some_and(|r| r.full == Some(true) && r.verified_digests == Some(9))
    })
    .await;
    let full = entry().await.unwrap();
    assert!(full.error.is_none(), "{full:?}");
    assert!(full.verified_set.is_some());
    // The replica keeps the names an air-gapped cluster uses: the module catalogue (what a
    // ModuleSource lists) and the release versions.
    let store = running.registry.store().clone();
    let catalogue = Repository::parse(&format!("{REPO}/modules")).unwrap();
    until(
        "the catalogue's tags are kept",
        Duration::from_secs(10),
        async || {
            let mut tags = store.tags(&catalogue).ok().flatten().unwrap_or_default();
            tags.sort();
            tags == ["echo", "hello"]
        },
    )
    .await;
    let platform = Repository::parse(REPO).unwrap();
    for (version, image) in [("v1.59.0", &r59), ("v1.60.0", &r60)] {
        assert_eq!(
            store.tag(&platform, &oci::Tag::parse(version).unwrap()),
            Some(Digest::parse(image.digest()).unwrap()),
            "{version} is kept as a tag"
        );
    }

    // Someone pulls the old release and its component through the replica: now stored.
    for (reference, image) in [("v1.58.0", &r58), (c58.digest(), &c58)] {
        own.get_manifest(REPO, reference, &[]).await.unwrap();
        for blob in image.blobs() {
            let d = Digest::parse(&blob.digest).unwrap();
            own.get_blob(REPO, &d, None, None)
                .await
                .unwrap()
                .into_body()
                .collect(1 << 30)
                .await
                .unwrap();
        }
    }
    let pulled: Vec<Digest> = digests(&r58).into_iter().chain(digests(&c58)).collect();
    until(
        "the pulled images are stored",
        Duration::from_secs(10),
        async || pulled.iter().all(|d| store.blob_path(d).exists()),
    )
    .await;

    // Dry run, then the collection under the lease.
    let mut gc_config = gc::Config::new(
        "master-0",
        Repository::parse(REPO).unwrap(),
        Keep::Cluster(source),
    );
    gc_config.grace = Duration::ZERO;
    gc_config.lease.lease_duration = Duration::from_secs(2);
    gc_config.lease.renew_deadline = Duration::from_millis(1500);
    gc_config.lease.retry_period = Duration::from_millis(200);
    gc_config.wait = Duration::from_secs(10);
    gc_config.dry_run = true;
    let dry = gc::run_once(&admin, &store, &gc_config).await.unwrap();
    // r58 and c58: 2 manifests, 2 configs, their layers (r58: one files layer; c58: one).
    assert_eq!(dry.manifests.len(), 2, "{dry}");
    assert_eq!(
        dry.blobs.len(),
        digests(&r58).len() + digests(&c58).len(),
        "{dry}"
    );
    assert!(
        store
            .blob_size(&Digest::parse(r58.digest()).unwrap())
            .is_some()
    );
    assert!(
        entry().await.unwrap().collected_at.is_none(),
        "a dry run records nothing"
    );

    gc_config.dry_run = false;
    let done = gc::run_once(&admin, &store, &gc_config).await.unwrap();
    assert_eq!(done.bytes, dry.bytes, "{done}");
    let mut deleted: Vec<Digest> = done.blobs.clone();
    deleted.sort();
    let mut expected: Vec<Digest> = digests(&r58).into_iter().chain(digests(&c58)).collect();
    expected.sort();
    assert_eq!(
        deleted, expected,
        "exactly the old release and its component"
    );
    for kept in [&r59, &r60, &c59, &c60, &late, &echo, &echo_image] {
        for d in digests(kept) {
            assert!(
                store.blob_size(&d).is_some(),
                "{d} of a kept version is gone"
            );
        }
    }
    assert!(
        store
            .tag(
                &Repository::parse(REPO).unwrap(),
                &oci::Tag::parse("v1.58.0").unwrap()
            )
            .is_none()
    );
    assert!(store.verify().unwrap().removed.is_empty());

    let after = entry().await.unwrap();
    assert!(after.collected_at.is_some(), "{after:?}");
    assert!(after.collection_error.is_none());
    let lease: Api<Lease> = Api::namespaced(admin.clone(), "d8-system");
    let lease = lease.get(gc::LEASE).await.unwrap();
    assert!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_none_or(|h| h.is_empty()),
        "the lease is released after the run"
    );
    // Still full after the collection, on the next measurements.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(sync.report().full, "{:?}", sync.report());

    // No deployed release: the run deletes nothing and reports why.
    releases
        .delete("v1.60.0", &Default::default())
        .await
        .unwrap();
    let e = gc::run_once(&admin, &store, &gc_config)
        .await
        .expect_err("no deployed version");
    assert!(
        e.to_string().contains("no deployed platform version"),
        "{e}"
    );
    let failed = entry().await.unwrap();
    assert!(
        failed
            .collection_error
            .as_deref()
            .is_some_and(|m| m.contains("no deployed platform version")),
        "{failed:?}"
    );
    assert_eq!(
        failed.collected_at, after.collected_at,
        "the last success is kept"
    );
    for d in digests(&r59) {
        assert!(store.blob_size(&d).is_some());
    }
    sync.shutdown().await;
    running.stop().await;
}

/// One collection at a time across replicas: while another replica's collection holds Lease
/// `registry-storage-gc`, a run waits and gives up without touching its store; once the lease
/// is released, the same run collects.
#[tokio::test]
async fn replicas_collect_one_at_a_time() {
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
    let data = tempfile::tempdir().unwrap();
    let store = storage::Store::open(
        data.path(),
        Limits {
            budget: None,
            reserve: Some(0),
        },
    )
    .unwrap();
    // A root the run keeps and a blob nothing references, which it removes.
    let repository = Repository::parse(REPO).unwrap();
    let config_blob = store.put_bytes(b"{}", None).unwrap();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": oci::media_type::OCI_MANIFEST,
        "config": {"mediaType": oci::media_type::OCI_CONFIG, "digest": config_blob.to_string(), "size": 2},
        "layers": [],
    }))
    .unwrap();
    let root = store
        .put_manifest(
            &repository,
            &manifest,
            oci::media_type::OCI_MANIFEST,
            None,
            None,
        )
        .unwrap();
    let garbage = store.put_bytes(b"nobody's layer", None).unwrap();

    // Another replica is collecting: it holds the lease.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "d8-system");
    let held: Lease = serde_json::from_value(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": gc::LEASE, "namespace": "d8-system"},
        "spec": {
            "holderIdentity": "master-1",
            "leaseDurationSeconds": 600,
            "acquireTime": jiff::Timestamp::now().to_string(),
            "renewTime": jiff::Timestamp::now().to_string(),
        },
    }))
    .unwrap();
    leases.create(&PostParams::default(), &held).await.unwrap();

    let mut config = gc::Config::new(
        "master-0",
        repository.clone(),
        Keep::Fixed {
            deployed: Some("v1.60.0".into()),
            previous: None,
            roots: vec![root],
        },
    );
    config.grace = Duration::ZERO;
    config.lease.lease_duration = Duration::from_secs(2);
    config.lease.renew_deadline = Duration::from_millis(1500);
    config.lease.retry_period = Duration::from_millis(200);
    config.wait = Duration::from_secs(3);
    let busy = gc::run_once(&admin, &store, &config)
        .await
        .expect_err("the lease is held by another replica");
    assert!(matches!(busy, gc::GcError::LeaseBusy { .. }), "{busy}");
    assert!(
        store.blob_size(&garbage).is_some(),
        "nothing is collected while another replica collects"
    );

    // The other collection ends: the lease is released.
    leases.delete(gc::LEASE, &Default::default()).await.unwrap();
    let done = gc::run_once(&admin, &store, &config).await.unwrap();
    assert_eq!(done.blobs, [garbage], "{done}");
    assert!(store.blob_size(&config_blob).is_some());
}
