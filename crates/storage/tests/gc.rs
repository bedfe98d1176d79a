//! Garbage collection of a running replica: a real store on disk, real HTTP through both
//! listeners, a docker-registry upstream for pull-through fills. Collections run while clients
//! pull, fill and push; nothing in use is lost, and what the keep rules drop is gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use oci::{Digest, Repository};
use registry_plan::expected::{Entry, ExpectedSet};
use storage::gc::{self, Options};
use storage::{Access, Accounts, Limits, Settings};
use testkit::ImageBuilder;

const ROOT: &str = "system/deckhouse";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

struct Built {
    manifest: Bytes,
    digest: Digest,
    blobs: Vec<(Digest, Bytes)>,
}

/// An image of `layers` (config first), deterministic from `name`.
fn build(name: &str, layers: &[Bytes]) -> Built {
    let config = Bytes::from(format!(
        "{{\"architecture\":\"amd64\",\"os\":\"linux\",\"name\":\"{name}\"}}"
    ));
    let descriptor = |media: &str, b: &Bytes| serde_json::json!({"mediaType": media, "digest": Digest::sha256(b).to_string(), "size": b.len()});
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": descriptor("application/vnd.oci.image.config.v1+json", &config),
        "layers": layers.iter().map(|l| descriptor("application/vnd.oci.image.layer.v1.tar", l)).collect::<Vec<_>>(),
    });
    let manifest = Bytes::from(serde_json::to_vec(&manifest).unwrap());
    let mut blobs = vec![(Digest::sha256(&config), config)];
    blobs.extend(layers.iter().map(|l| (Digest::sha256(l), l.clone())));
    Built {
        digest: Digest::sha256(&manifest),
        manifest,
        blobs,
    }
}

fn layer(name: &str, len: usize) -> Bytes {
    let seed = name.as_bytes();
    Bytes::from(
        (0..len)
            .map(|i| seed[i % seed.len()].wrapping_add((i / 7) as u8))
            .collect::<Vec<u8>>(),
    )
}

fn remote(address: std::net::SocketAddr, user: &str, password: &str) -> registry_client::Remote {
    registry_client::Client::new(registry_client::Config::default())
        .remote(
            registry_client::Endpoint::new(registry_client::Scheme::Http, &address.to_string())
                .credentials(registry_client::Credentials::new(user, password)),
        )
        .unwrap()
}

/// Pushes like a client that skips blobs the registry already has (HEAD first).
async fn push(
    write: &registry_client::Remote,
    repo: &str,
    tag: &str,
    image: &Built,
) -> Result<(), registry_client::Error> {
    for (digest, bytes) in &image.blobs {
        if write.head_blob(repo, digest).await.is_ok() {
            continue;
        }
        write.post_blob(repo, digest, bytes.clone()).await?;
    }
    write
        .put_manifest(repo, tag, MANIFEST, image.manifest.clone())
        .await
        .map(drop)
}

/// Pulls an image by `reference`, every blob verified against its digest.
async fn pull(
    read: &registry_client::Remote,
    repo: &str,
    reference: &str,
) -> Result<usize, String> {
    let m = read
        .get_manifest(repo, reference, &[MANIFEST])
        .await
        .map_err(|e| format!("{repo}:{reference}: {e}"))?;
    let manifest = oci::Manifest::parse(m.bytes.to_vec(), m.media_type.as_deref())
        .map_err(|e| e.to_string())?;
    let mut n = 0;
    for d in manifest.references() {
        read.get_blob(repo, &d.digest, None, Some(d.size))
            .await
            .map_err(|e| format!("{repo}@{}: {e}", d.digest))?
            .into_body()
            .collect(1 << 30)
            .await
            .map_err(|e| format!("{repo}@{}: {e}", d.digest))?;
        n += 1;
    }
    Ok(n)
}

fn options(deployed: &Built, grace: Duration) -> Options {
    Options {
        root: Repository::parse(ROOT).unwrap(),
        deployed: Some("v1.60.0".into()),
        previous: None,
        keep: Some(ExpectedSet {
            entries: [Entry::Digest(deployed.digest.to_string())].into(),
        }),
        dry_run: false,
        grace,
    }
}

async fn collect(store: &storage::Store, options: &Options) -> gc::Collection {
    let (store, options) = (store.clone(), options.clone());
    tokio::task::spawn_blocking(move || gc::collect(&store, &options))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn collections_concurrent_with_pulls_fills_and_pushes_lose_nothing() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Upstream images filled on demand while collections run.
    let upstream = testkit::Upstream::start_plain().await;
    let scratch = tempfile::tempdir().unwrap();
    let layout = testkit::image::Layout::new(scratch.path()).unwrap();
    let registry = testkit::push::Registry::of(&upstream);
    let mut upstream_tags = Vec::new();
    for i in 0..6 {
        let image = ImageBuilder::new(&format!("filled {i}"))
            .uncompressed()
            .layers(&[1 << 20, 300_000])
            .build(&layout);
        let tag = format!("filled-{i}");
        registry
            .push_image("deckhouse/ee", Some(&tag), &image)
            .await
            .unwrap();
        upstream_tags.push(tag);
    }

    let data = tempfile::tempdir().unwrap();
    let accounts =
        Accounts::new()
            .with("node", "node-pw", Access::Pull)
            .with("sync", "sync-pw", Access::Push);
    let endpoint =
        registry_client::Endpoint::from_url(&format!("{}/deckhouse/ee", upstream.url())).unwrap();
    let running = storage::run::start(storage::run::Config {
        data_dir: data.path().to_owned(),
        read_address: "127.0.0.1:0".parse().unwrap(),
        write_address: "127.0.0.1:0".parse().unwrap(),
        tls: None,
        read_accounts: accounts.clone(),
        write_accounts: accounts,
        upstream: Some(storage::Upstream {
            remote: registry_client::Client::new(registry_client::Config::default())
                .remote(endpoint)
                .unwrap(),
            prefix: ROOT.into(),
        }),
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
    let store = running.registry.store().clone();
    let read = remote(running.read_address, "node", "node-pw");
    let write = remote(running.write_address, "sync", "sync-pw");

    // The deployed release and an old one; the old one has a large layer and a layer that
    // later pushes reuse.
    let shared = layer("shared by v1.50.0 and later pushes", 200_000);
    let big = layer("the big layer of v1.50.0", 8 << 20);
    let deployed = build("v1.60.0", &[layer("v1.60.0", 500_000)]);
    let old = build("v1.50.0", &[big.clone(), shared.clone()]);
    push(&write, ROOT, "v1.60.0", &deployed).await.unwrap();
    push(&write, ROOT, "v1.50.0", &old).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let grace = Duration::from_secs(1);

    // 1. A pusher finds the old shared layer present (HEAD), and a collection runs before
    //    it pushes its manifest: the layer was used, so it stays and the push succeeds.
    let reuse = build("reuses the shared layer", std::slice::from_ref(&shared));
    let shared_digest = Digest::sha256(&shared);
    let module = format!("{ROOT}/modules/echo");
    for (digest, bytes) in &reuse.blobs {
        if write.head_blob(&module, digest).await.is_err() {
            write
                .post_blob(&module, digest, bytes.clone())
                .await
                .unwrap();
        }
    }
    // 2. A reader is half-way through the old big layer when the collection runs.
    let big_digest = Digest::sha256(&big);
    let mut reading = read
        .get_blob(ROOT, &big_digest, None, Some(big.len() as u64))
        .await
        .unwrap()
        .into_body();
    let first = reading.next().await.unwrap().unwrap();
    let first_run = collect(&store, &options(&deployed, grace)).await;
    assert_eq!(
        first_run.tags,
        [(ROOT.to_owned(), "v1.50.0".to_owned())],
        "{first_run}"
    );
    assert_eq!(first_run.manifests, [(ROOT.to_owned(), old.digest)]);
    assert!(first_run.skipped_in_use >= 2, "{first_run}");
    assert!(
        store.blob_path(&big_digest).exists(),
        "a blob being read stays"
    );
    assert!(
        store.blob_path(&shared_digest).exists(),
        "a blob an upload relies on stays"
    );
    let mut got = first.len();
    while let Some(chunk) = reading.next().await {
        got += chunk.unwrap().len();
    }
    assert_eq!(
        got,
        big.len(),
        "the reader received the whole verified layer"
    );
    write
        .put_manifest(&module, "v0.1.0", MANIFEST, reuse.manifest.clone())
        .await
        .expect("the manifest push after the collection finds its layer");

    // 3. Many collections while clients pull the deployed release, fill from the upstream
    //    and push new images.
    let stop = Arc::new(AtomicBool::new(false));
    let runs = Arc::new(AtomicUsize::new(0));
    let collector = {
        let (store, stop, runs) = (store.clone(), stop.clone(), runs.clone());
        let options = options(&deployed, grace);
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                collect(&store, &options).await;
                runs.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let mut clients = Vec::new();
    for worker in 0..3 {
        let (read, write) = (read.clone(), write.clone());
        let shared = shared.clone();
        let deployed_ref = deployed.digest.to_string();
        let upstream_tags = upstream_tags.clone();
        clients.push(tokio::spawn(async move {
            let mut pushed = Vec::new();
            for i in 0..6 {
                pull(&read, ROOT, &deployed_ref)
                    .await
                    .expect("deployed pull");
                let tag = &upstream_tags[(worker * 2 + i) % upstream_tags.len()];
                pull(&read, ROOT, tag).await.expect("pull-through");
                let repo = format!("{ROOT}/modules/m{worker}");
                let name = format!("m{worker} v0.{i}.0");
                let image = build(&name, &[layer(&name, 100_000), shared.clone()]);
                let tag = format!("v0.{i}.0");
                push(&write, &repo, &tag, &image).await.expect("push");
                pushed.push((repo, tag, image.digest));
            }
            pushed
        }));
    }
    let mut pushed = Vec::new();
    for c in clients {
        pushed.extend(c.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    collector.await.unwrap();
    assert!(
        runs.load(Ordering::Relaxed) >= 3,
        "collections ran meanwhile"
    );

    // Nothing in use was lost: every pushed image, every filled image and the deployed
    // release pull completely (served from the store: the upstream is gone).
    drop(upstream);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let last = collect(&store, &options(&deployed, grace)).await;
    // (Locally pushed images are pulled by digest: under the upstream's prefix a tag is the
    // upstream's to answer.)
    for (repo, tag, digest) in &pushed {
        pull(&read, repo, &digest.to_string())
            .await
            .expect("pushed image intact");
        assert_eq!(
            store.tag(
                &Repository::parse(repo).unwrap(),
                &oci::Tag::parse(tag).unwrap()
            ),
            Some(*digest)
        );
        assert!(store.blob_path(digest).exists());
    }
    for tag in &upstream_tags {
        pull(&read, ROOT, tag).await.expect("filled image intact");
    }
    pull(&read, ROOT, "v1.60.0").await.expect("deployed intact");
    pull(&read, &module, "v0.1.0")
        .await
        .expect("the reusing image intact");
    // What the rules dropped is gone: the old release's own big layer and manifest.
    assert!(!store.blob_path(&big_digest).exists(), "{last}");
    assert!(!store.blob_path(&old.digest).exists());
    assert!(store.blob_path(&shared_digest).exists(), "still referenced");
    let verify = store.verify().unwrap();
    assert!(verify.removed.is_empty(), "{verify:?}");
    running.stop().await;
}
