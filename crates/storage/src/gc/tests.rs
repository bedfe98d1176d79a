use std::time::{Duration, Instant};

use registry_plan::expected::{Entry, ExpectedSet};

use super::*;
use crate::store::Limits;

const ROOT: &str = "system/deckhouse";

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(
        dir.path(),
        Limits {
            budget: None,
            reserve: Some(0),
        },
    )
    .expect("open");
    (dir, store)
}

fn repo(s: &str) -> Repository {
    Repository::parse(s).expect("repo")
}

struct Image {
    manifest: Digest,
    blobs: Vec<Digest>,
}

/// Stores an image (config + one own layer + a layer every image shares) in `repository`,
/// tagged `tag` when given.
fn image(store: &Store, repository: &str, tag: Option<&str>, name: &str) -> Image {
    let config = format!("{{\"name\":\"{name}\"}}");
    let layer = format!("layer of {name}").repeat(100);
    let shared = b"the layer every image shares".to_vec();
    let c = store.put_bytes(config.as_bytes(), None).expect("config");
    let l = store.put_bytes(layer.as_bytes(), None).expect("layer");
    let s = store.put_bytes(&shared, None).expect("shared");
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": c.to_string(), "size": config.len()},
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": l.to_string(), "size": layer.len()},
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": s.to_string(), "size": shared.len()},
        ],
    });
    let bytes = serde_json::to_vec(&manifest).expect("json");
    let tag = tag.map(|t| Tag::parse(t).expect("tag"));
    let m = store
        .put_manifest(
            &repo(repository),
            &bytes,
            "application/vnd.oci.image.manifest.v1+json",
            None,
            tag.as_ref(),
        )
        .expect("manifest");
    Image {
        manifest: m,
        blobs: vec![c, l],
    }
}

fn options(deployed: &str, previous: Option<&str>, keep: &[&Image]) -> Options {
    Options {
        root: repo(ROOT),
        deployed: Some(deployed.to_owned()),
        previous: previous.map(str::to_owned),
        keep: Some(ExpectedSet {
            entries: keep
                .iter()
                .map(|i| Entry::Digest(i.manifest.to_string()))
                .collect(),
        }),
        dry_run: false,
        grace: Duration::ZERO,
    }
}

fn present(store: &Store, image: &Image) -> bool {
    std::iter::once(&image.manifest)
        .chain(&image.blobs)
        .all(|d| store.blob_path(d).exists())
}

fn gone(store: &Store, image: &Image) -> bool {
    std::iter::once(&image.manifest)
        .chain(&image.blobs)
        .all(|d| !store.blob_path(d).exists())
}

#[test]
fn several_versions_lose_exactly_the_old_slices_and_a_dry_run_changes_nothing() {
    let (_dir, store) = open();
    let v57 = image(&store, ROOT, Some("v1.57.0"), "v1.57.0");
    let v58 = image(&store, ROOT, Some("v1.58.0"), "v1.58.0");
    let v59 = image(&store, ROOT, Some("v1.59.0"), "v1.59.0");
    let v60 = image(&store, ROOT, Some("v1.60.0"), "v1.60.0");
    let v61 = image(&store, ROOT, Some("v1.61.0"), "v1.61.0");
    // A digest-pinned component of v1.60.0 (images_digests.json) and an old one.
    let component = image(&store, ROOT, None, "controller of v1.60.0");
    let old_component = image(&store, ROOT, None, "controller of v1.57.0");
    let foreign = image(
        &store,
        &format!("{ROOT}/modules/echo"),
        Some("v0.0.1"),
        "echo",
    );
    store
        .set_tag(
            &repo(ROOT),
            &Tag::parse("stable").expect("tag"),
            &v60.manifest,
        )
        .expect("tag");
    let used_before = store.usage().expect("usage").used;
    let keep = [&v59, &v60, &component];

    let mut dry = options("v1.60.0", Some("v1.59.0"), &keep);
    dry.dry_run = true;
    let report = collect(&store, &dry).expect("dry run");
    assert!(report.dry_run);
    let mut tags: Vec<&str> = report.tags.iter().map(|(_, t)| t.as_str()).collect();
    tags.sort_unstable();
    assert_eq!(tags, ["v1.57.0", "v1.58.0"]);
    assert_eq!(report.manifests.len(), 3, "{:?}", report.manifests);
    assert_eq!(report.blobs.len(), 9, "3 manifests, 3 configs, 3 layers");
    assert!(report.bytes > 0);
    assert!(
        present(&store, &v57) && present(&store, &old_component),
        "dry run deletes nothing"
    );
    assert_eq!(store.usage().expect("usage").used, used_before);
    assert_eq!(store.collected_at(), None, "a dry run is not a collection");

    let done = collect(&store, &options("v1.60.0", Some("v1.59.0"), &keep)).expect("run");
    assert_eq!(done.tags, report.tags);
    assert_eq!(done.blobs.len(), 9);
    assert_eq!(done.bytes, report.bytes);
    for kept in [&v59, &v60, &v61, &component, &foreign] {
        assert!(present(&store, kept), "kept image lost a blob");
    }
    for deleted in [&v57, &v58, &old_component] {
        assert!(gone(&store, deleted), "old image still present");
    }
    assert!(
        store
            .tag(&repo(ROOT), &Tag::parse("v1.57.0").expect("tag"))
            .is_none()
    );
    assert_eq!(
        store.tag(&repo(ROOT), &Tag::parse("stable").expect("tag")),
        Some(v60.manifest)
    );
    assert_eq!(store.usage().expect("usage").used, used_before - done.bytes);
    assert!(store.collected_at().is_some());
    let again = collect(&store, &options("v1.60.0", Some("v1.59.0"), &keep)).expect("again");
    assert_eq!(again, Collection::default(), "a second run finds nothing");
}

#[test]
fn a_blob_in_use_is_skipped_and_collected_later() {
    let (_dir, store) = open();
    let v60 = image(&store, ROOT, Some("v1.60.0"), "v1.60.0");
    let v50 = image(&store, ROOT, Some("v1.50.0"), "v1.50.0");
    let mut opts = options("v1.60.0", None, &[&v60]);
    // Everything of v1.50.0 was written moments ago, inside the grace period: a push still
    // under way. Its (old) tag goes by the rules, but its manifest and blobs stay.
    opts.grace = Duration::from_secs(120);
    let first = collect(&store, &opts).expect("run");
    assert_eq!(first.tags.len(), 1, "{first}");
    assert!(
        first.manifests.is_empty() && first.blobs.is_empty(),
        "{first}"
    );
    assert!(present(&store, &v50));
    // Later a reader opens one layer; a run whose cutoff falls between the writes and the read
    // finds the rest of v1.50.0 older than its grace period.
    let after_the_writes = Instant::now();
    let reading = store
        .open_blob(&v50.blobs[1])
        .expect("open")
        .expect("present");
    opts.grace = Duration::ZERO;
    let second = collect_at(&store, &opts, after_the_writes).expect("run");
    assert_eq!(second.manifests.len(), 1, "{second}");
    assert_eq!(second.skipped_in_use, 1, "{second}");
    assert!(
        store.blob_path(&v50.blobs[1]).exists(),
        "a blob being read is kept"
    );
    assert!(!store.blob_path(&v50.blobs[0]).exists(), "the rest goes");
    drop(reading);
    // Once the read, too, is older than the cutoff, the layer goes.
    let after_the_read = Instant::now();
    let third = collect_at(&store, &opts, after_the_read).expect("run");
    assert_eq!(third.blobs, [v50.blobs[1]], "{third}");
    assert!(present(&store, &v60));
}

#[test]
fn unknown_keep_set_or_no_deployed_version_deletes_nothing() {
    let (_dir, store) = open();
    let v60 = image(&store, ROOT, Some("v1.60.0"), "v1.60.0");
    let v50 = image(&store, ROOT, Some("v1.50.0"), "v1.50.0");
    let mut opts = options("v1.60.0", None, &[&v60]);
    opts.keep = None;
    let report = collect(&store, &opts).expect("run");
    assert_eq!(
        (
            report.tags.len(),
            report.manifests.len(),
            report.blobs.len()
        ),
        (0, 0, 0)
    );
    assert!(report.to_string().contains("unknown"), "{report}");
    opts.deployed = None;
    let e = collect(&store, &opts).expect_err("no deployed version");
    assert!(
        e.to_string().contains("no deployed platform version"),
        "{e}"
    );
    assert!(present(&store, &v50));
}

#[test]
fn a_claimed_blob_survives_a_concurrent_sweep() {
    // The race a push would lose: the sweep decides a blob is unreferenced, a pusher finds it
    // present (mount / HEAD) and references it. The claim and the removal are serialized, so
    // either the claim comes first (the blob stays) or the blob is gone (and the pusher
    // uploads it again).
    for _ in 0..10 {
        let (_dir, store) = open();
        let v60 = image(&store, ROOT, Some("v1.60.0"), "v1.60.0");
        let orphan = store.put_bytes(b"orphan layer", None).expect("orphan");
        // The run's cutoff falls after the write, so only the claim can protect it.
        let after_the_write = Instant::now();
        let opts = options("v1.60.0", None, &[&v60]);
        let s = store.clone();
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let go = start.clone();
        let claimer = std::thread::spawn(move || {
            go.wait();
            s.blob_size(&orphan).is_some()
        });
        start.wait();
        let report = collect_at(&store, &opts, after_the_write).expect("run");
        let claimed = claimer.join().expect("thread");
        let exists = store.blob_path(&orphan).exists();
        assert_eq!(
            exists, claimed,
            "claimed={claimed} but exists={exists} ({report})"
        );
    }
}
