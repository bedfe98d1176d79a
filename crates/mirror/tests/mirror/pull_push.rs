//! Pull a synthetic release into a bundle, push it into another docker-registry, and find
//! every image there byte for byte; re-runs send nothing; a corrupted bundle commits no image.

use std::collections::BTreeSet;

use crate::common::{self, MODULES, PREFIX, V_NEW, V_OLD};
use testkit::{Upstream, UpstreamOptions};

fn tar_paths(path: &std::path::Path) -> BTreeSet<String> {
    let mut archive = tar::Archive::new(std::fs::File::open(path).expect("open tar"));
    archive
        .entries()
        .expect("entries")
        .map(|e| {
            e.expect("entry")
                .path()
                .expect("path")
                .display()
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_goes_through_a_bundle_byte_for_byte() {
    let source = common::source(64 << 10).await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let summary = mirror::pull(&common::pull_options(&source, &bundle), &common::quiet())
        .await
        .expect("pull");
    assert_eq!(
        summary.platform_tags,
        [V_OLD, V_NEW],
        "v1.60.1 is an older patch of 1.60"
    );
    assert_eq!(summary.modules, MODULES);
    assert_eq!(
        summary.bytes, source.blob_bytes,
        "exactly the release's blobs and manifests"
    );
    assert!(
        !bundle.join(".d8-mirror-pull").exists(),
        "the work directory is removed once the bundle is complete"
    );

    // Deckhouse's layout: registry paths inside the tars, one tar per module.
    let platform = tar_paths(&bundle.join("platform.tar"));
    for path in [
        "index.json",
        "oci-layout",
        "install/index.json",
        "install-standalone/index.json",
        "release-channel/index.json",
    ] {
        assert!(platform.contains(path), "platform.tar lacks {path}");
    }
    for module in MODULES {
        let paths = tar_paths(&bundle.join(format!("module-{module}.tar")));
        assert!(paths.contains(&format!("modules/{module}/index.json")));
        assert!(paths.contains(&format!("modules/{module}/release/index.json")));
    }
    let manifest = mirror::bundle::BundleManifest::read(&bundle)
        .unwrap()
        .expect("d8-mirror-bundle.json");
    assert_eq!(manifest.packages.len(), 1 + MODULES.len());
    let listed: BTreeSet<(String, String)> = manifest
        .packages
        .iter()
        .flat_map(|p| &p.images)
        .map(|i| (i.repository.clone(), i.digest.clone()))
        .collect();
    for e in &source.expected {
        assert!(
            listed.contains(&(e.repo.clone(), e.digest.clone())),
            "the bundle manifest lists {e:?}"
        );
    }

    // Push into another registry under another path.
    let target = Upstream::start(UpstreamOptions::default()).await;
    let endpoint = registry_client::Endpoint::http(&target.host()).path_prefix("system/deckhouse");
    let pushed = mirror::push(
        &common::push_options(endpoint.clone(), &bundle),
        &common::quiet(),
    )
    .await
    .expect("push");
    assert!(pushed.uploaded > 0);
    assert!(
        pushed.mounted > 0,
        "blobs shared across repositories are mounted: {pushed:?}"
    );
    let remote = common::remote(endpoint.clone());
    for e in &source.expected {
        assert_eq!(
            common::resolve(&remote, &e.repo, &e.reference)
                .await
                .as_deref(),
            Some(e.digest.as_str()),
            "{}:{} in the target",
            e.repo,
            e.reference
        );
    }
    assert_eq!(common::resolve(&remote, "", "v1.60.1").await, None);
    let mut modules = remote.all_tags("modules").await.expect("module list");
    modules.sort();
    assert_eq!(modules, MODULES, "ModuleSource discovery tags");
    let channels = remote.all_tags("release-channel").await.unwrap();
    for channel in [
        "alpha",
        "beta",
        "early-access",
        "stable",
        "rock-solid",
        V_OLD,
        V_NEW,
    ] {
        assert!(channels.contains(&channel.to_owned()), "{channels:?}");
    }

    // A second push finds everything in place and sends no blob and no manifest.
    let again = mirror::push(&common::push_options(endpoint, &bundle), &common::quiet())
        .await
        .expect("push again");
    assert_eq!(
        (again.uploaded, again.mounted, again.bytes_sent),
        (0, 0, 0),
        "{again:?}"
    );
    assert_eq!(again.manifests_pushed, 0, "{again:?}");
    assert!(again.skipped > 0);
    drop(source);
    let _ = PREFIX;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_chunked_bundle_commits_nothing_of_the_blob_and_no_image() {
    let source = common::source(300 << 10).await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let mut options = common::pull_options(&source, &bundle);
    options.chunk_size = Some(256 << 10);
    options.modules = None;
    // A dry run first: it fills the cache that the real pull then reuses.
    let mut dry = options.clone();
    dry.dry_run = true;
    let planned = mirror::pull(&dry, &common::quiet()).await.expect("dry run");
    assert!(planned.images > 0);
    assert!(
        !bundle.join("platform.tar").exists() && !bundle.join("platform.tar.0000.chunk").exists(),
        "a dry run writes no bundle"
    );
    // A cached blob that changed on disk since (same size) is not trusted: it is fetched again.
    let cache = bundle.join(".d8-mirror-pull/blobs/sha256");
    let (victim, _) = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.clone(), std::fs::metadata(&p).unwrap().len()))
        .filter(|(_, len)| *len > 200 << 10)
        .max_by_key(|(_, len)| *len)
        .expect("a large cached blob");
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[1000] ^= 0x55;
    std::fs::write(&victim, bytes).unwrap();
    let summary = mirror::pull(&options, &common::quiet())
        .await
        .expect("pull");
    assert!(
        summary.reused > 0,
        "what the dry run fetched is reused: {summary:?}"
    );
    assert!(
        summary.downloaded >= 200 << 10,
        "the changed blob is fetched again: {summary:?}"
    );
    assert_eq!(summary.images, planned.images);
    assert!(summary.files.len() > 3, "chunked: {:?}", summary.files);
    assert!(
        summary
            .files
            .iter()
            .all(|f| f.name.starts_with("platform.tar."))
    );

    // A re-run of the same pull refuses to overwrite the finished bundle.
    let err = mirror::pull(&options, &common::quiet()).await.unwrap_err();
    assert!(err.to_string().contains("--force"), "{err}");

    // Flip one byte inside a layer blob in the middle of the bundle.
    let package = &mirror::bundle::packages(&bundle).unwrap()[0];
    let progress = common::quiet();
    let scanned = mirror::bundle::scan(package, None, &progress.phase("t", 0, 0)).unwrap();
    let (victim_path, victim) = scanned
        .entries
        .iter()
        .filter(|(p, e)| mirror::bundle::blob_digest_of(p).is_some() && e.size > 200 << 10)
        .nth(1)
        .map(|(p, e)| (p.clone(), *e))
        .expect("a large blob");
    let digest = mirror::bundle::blob_digest_of(&victim_path).unwrap();
    let mut at = victim.offset + victim.size / 2;
    let mut chunk = 0;
    while at >= package.parts[chunk].1 {
        at -= package.parts[chunk].1;
        chunk += 1;
    }
    let mut bytes = std::fs::read(&package.parts[chunk].0).unwrap();
    bytes[at as usize] ^= 0x55;
    std::fs::write(&package.parts[chunk].0, bytes).unwrap();

    // Uploads start before the whole bundle is read, but the flipped blob is never committed
    // (it goes up in PATCH chunks, refused before the final PUT) and no image is pushed.
    let target = Upstream::start(UpstreamOptions::default()).await;
    let endpoint = registry_client::Endpoint::http(&target.host()).path_prefix("deckhouse");
    let mut push = common::push_options(endpoint.clone(), &bundle);
    push.chunk_size = 64 << 10;
    push.parallel = 1;
    let err = mirror::push(&push, &common::quiet()).await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&digest.to_string()),
        "names the blob: {message}"
    );
    assert!(message.contains("no image was pushed"), "{message}");
    assert!(
        !target.log().contains("/manifests/"),
        "no manifest was even asked for:\n{}",
        target.log()
    );
    let remote = common::remote(endpoint);
    let dir = victim_path
        .strip_suffix(&format!("blobs/sha256/{}", digest.encoded()))
        .unwrap()
        .trim_end_matches('/');
    let repo = mirror::layout::repository_of("platform", dir);
    let head = remote.head_blob(&repo, &digest).await;
    assert!(
        head.as_ref().is_err_and(|e| e.is_not_found()),
        "the corrupted blob is not in the target: {head:?}"
    );
    for e in &source.expected {
        assert_eq!(
            common::resolve(&remote, &e.repo, &e.reference).await,
            None,
            "no image is in the target: {e:?}"
        );
    }
}
