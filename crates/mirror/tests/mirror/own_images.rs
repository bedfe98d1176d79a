//! Images of your own (`--image`): by tag, by digest and a multi-platform index pulled from a
//! real docker-registry into a bundle, pushed into a storage replica's publish endpoint and
//! pulled by containerd through the agent; an interrupted pull continues where it stopped; a
//! tag that no longer names the pinned digest, and a blob that does not hash to its digest,
//! are refused with no bundle written.

use std::path::Path;
use std::time::Duration;

use testkit::image::{Format, Layout};
use testkit::push::Registry;
use testkit::{Certs, Containerd, Fault, FaultyUpstream, ImageBuilder, Index, Upstream};

use crate::air_gap::{self, AGENT_HOST};
use crate::common;

fn options(registry_host: &str, bundle: &Path, references: &[String]) -> mirror::PullOptions {
    mirror::PullOptions {
        source: registry_client::Endpoint::http(registry_host),
        bundle_dir: bundle.to_owned(),
        platform: None,
        installers: false,
        modules: None,
        modules_path: "modules".into(),
        chunk_size: None,
        dry_run: false,
        resume: true,
        force: false,
        ignore_suspend: false,
        parallel: 4,
        images: mirror::images::plan(references).expect("references"),
        dir_images: Vec::new(),
    }
}

fn listed(bundle: &Path) -> Vec<(String, String, String)> {
    let manifest = mirror::bundle::BundleManifest::read(bundle)
        .unwrap()
        .expect("d8-mirror-bundle.json");
    let mut out: Vec<_> = manifest
        .packages
        .iter()
        .flat_map(|p| &p.images)
        .map(|i| (i.repository.clone(), i.tag.clone(), i.digest.clone()))
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_images_by_tag_digest_and_index_reach_containerd_through_the_agent() {
    let upstream = Upstream::start_plain().await;
    let layout = Layout::new(&upstream.scratch_dir().join("images")).unwrap();
    let registry = Registry::of(&upstream);
    let app = ImageBuilder::new("app").layer(40_000).build(&layout);
    registry
        .push_image("team/app", Some("v1"), &app)
        .await
        .unwrap();
    let tool = ImageBuilder::new("tool").layer(20_000).build(&layout);
    registry.push_image("tool", None, &tool).await.unwrap();
    let amd64 = ImageBuilder::new("multi-amd64")
        .platform("linux", "amd64")
        .layer(10_000)
        .build(&layout);
    let arm64 = ImageBuilder::new("multi-arm64")
        .platform("linux", "arm64")
        .layer(10_000)
        .build(&layout);
    let index = Index::build(&layout, Format::Oci, &[amd64.clone(), arm64.clone()]);
    registry.push_index("multi", "v2", &index).await.unwrap();

    let host = upstream.host();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let references = [
        format!("{host}/team/app:v1"),
        format!("{host}/tool@{}", tool.digest()),
        format!("{host}/multi:v2"),
    ];
    let summary = mirror::pull(&options(&host, &bundle, &references), &common::quiet())
        .await
        .expect("pull");
    assert_eq!(summary.own_images.len(), 3, "{summary:?}");
    assert!(summary.platform_tags.is_empty() && summary.modules.is_empty());
    assert!(
        bundle.join("images.tar").exists(),
        "one package: images.tar"
    );
    assert_eq!(
        listed(&bundle),
        [
            ("multi".into(), "v2".into(), index.digest().to_owned()),
            ("team/app".into(), "v1".into(), app.digest().to_owned()),
            (
                "tool".into(),
                format!("@{}", tool.digest()),
                tool.digest().to_owned()
            ),
        ]
    );
    let every_blob = app.blob_bytes()
        + tool.blob_bytes()
        + amd64.blob_bytes()
        + arm64.blob_bytes()
        + [&app, &tool, &amd64, &arm64]
            .iter()
            .map(|i| i.manifest.size)
            .sum::<u64>()
        + index.manifest.size;
    assert_eq!(summary.bytes, every_blob, "every platform of the index");

    // Into the cluster's publish endpoint, then through the agent alone.
    let ca = Certs::new("registry-push-ca");
    let replica = air_gap::replica(&ca).await;
    mirror::push(
        &common::push_options(air_gap::push_endpoint(&replica, &ca), &bundle),
        &common::quiet(),
    )
    .await
    .expect("push");
    let store = replica.registry.store();
    let multi = oci::Repository::parse("system/deckhouse/multi").unwrap();
    for child in [&amd64, &arm64] {
        let digest = oci::Digest::parse(child.digest()).unwrap();
        assert!(store.has_manifest(&multi, &digest), "both platforms pushed");
    }
    let containerd = Containerd::start().await;
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = air_gap::agent_of(&replica, &containerd, agent_dir.path()).await;
    for reference in [
        format!("{AGENT_HOST}/system/deckhouse/team/app:v1"),
        format!("{AGENT_HOST}/system/deckhouse/tool@{}", tool.digest()),
        format!("{AGENT_HOST}/system/deckhouse/multi:v2"),
    ] {
        containerd
            .pull(&reference)
            .await
            .expect_success(&format!("pull {reference}"));
    }
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_pull_of_own_images_continues_where_it_stopped() {
    let upstream = Upstream::start_plain().await;
    let layout = Layout::new(&upstream.scratch_dir().join("images")).unwrap();
    // A small layer that arrives within a second and a large one that needs many.
    let app = ImageBuilder::new("app")
        .layers(&[2_000, 64 << 10])
        .build(&layout);
    Registry::of(&upstream)
        .push_image("app", Some("v1"), &app)
        .await
        .unwrap();
    let slow = FaultyUpstream::start(
        &upstream,
        Fault::Trickle {
            bytes_per_second: 8 << 10,
        },
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let references = [format!("{}/app:v1", slow.host())];
    let first = tokio::spawn({
        let options = options(&slow.host(), &bundle, &references);
        async move { mirror::pull(&options, &common::quiet()).await }
    });
    // Killed once the config and the small layer are in, the large one still on its way.
    let cached = |digest: &str| in_place_or_cached(&bundle, digest);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !(cached(&app.config.digest) && cached(&app.layers[0].digest)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "small blobs never arrived"
        );
        assert!(
            !first.is_finished(),
            "the pull ended before it was interrupted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.abort();
    let _ = first.await;
    assert!(
        !cached(&app.layers[1].digest),
        "the large layer was cut off"
    );
    assert!(!bundle.join("d8-mirror-bundle.json").exists());

    slow.set_fault(Fault::None);
    let summary = mirror::pull(
        &options(&slow.host(), &bundle, &references),
        &common::quiet(),
    )
    .await
    .expect("the second run completes");
    assert_eq!(
        summary.reused,
        app.config.size + app.layers[0].size,
        "what the first run verified is reused: {summary:?}"
    );
    assert_eq!(
        summary.downloaded, app.layers[1].size,
        "only the cut-off layer is fetched again: {summary:?}"
    );
    assert_eq!(
        listed(&bundle),
        [("app".into(), "v1".into(), app.digest().to_owned())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_digests_are_refused_and_no_bundle_is_written() {
    let upstream = Upstream::start_plain().await;
    let layout = Layout::new(&upstream.scratch_dir().join("images")).unwrap();
    let registry = Registry::of(&upstream);
    let v1 = ImageBuilder::new("app-v1").layer(4_000).build(&layout);
    let v2 = ImageBuilder::new("app-v2").layer(4_000).build(&layout);
    registry.push_image("app", Some("v1"), &v1).await.unwrap();
    registry.push_image("app", Some("v2"), &v2).await.unwrap();
    let host = upstream.host();
    let dir = tempfile::tempdir().unwrap();

    // The tag names another image than the digest pinned with it.
    let bundle = dir.path().join("pinned");
    let references = [format!("{host}/app:v1@{}", v2.digest())];
    let err = mirror::pull(&options(&host, &bundle, &references), &common::quiet())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!(
            "/app:v1: the source tags {}, not {}",
            v1.digest(),
            v2.digest()
        )),
        "{err}"
    );
    assert!(!bundle.join("d8-mirror-bundle.json").exists());
    assert!(!bundle.join("images.tar").exists());

    // A digest the registry does not hold.
    let absent = format!("sha256:{}", "0".repeat(64));
    let references = [format!("{host}/app@{absent}")];
    let err = mirror::pull(&options(&host, &bundle, &references), &common::quiet())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&absent) && err.contains("not found"), "{err}");

    // A registry whose blob bytes do not hash to their digest.
    let flipping = FaultyUpstream::start(&upstream, Fault::FlipByte).await;
    let bundle = dir.path().join("flipped");
    let references = [format!("{}/app:v1", flipping.host())];
    let err = mirror::pull(
        &options(&flipping.host(), &bundle, &references),
        &common::quiet(),
    )
    .await
    .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("digest mismatch: expected sha256:")
            && v1.blobs().any(|b| message.contains(&b.digest)),
        "the blob and the mismatch are named: {message}"
    );
    assert!(!bundle.join("d8-mirror-bundle.json").exists());
    for blob in v1.blobs() {
        assert!(
            !in_place_or_cached(&bundle, &blob.digest),
            "a blob that failed its digest is never kept under that digest"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_made_from_a_directory_reaches_containerd_through_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("bin")).unwrap();
    std::fs::write(site.join("index.html"), "<h1>hello</h1>\n").unwrap();
    std::fs::write(site.join("bin/hello"), "#!/bin/sh\necho hello\n").unwrap();
    std::fs::set_permissions(
        site.join("bin/hello"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("index.html", site.join("home.html")).unwrap();
    let from_dir = |bundle: &Path| {
        let mut options = options("registry.invalid", bundle, &[]);
        options.dir_images = vec![
            mirror::images::parse_dir_image(&format!("{}=team/site:v1", site.display())).unwrap(),
        ];
        options
    };
    // No registry at all: nothing is contacted.
    let first = dir.path().join("first");
    let summary = mirror::pull(&from_dir(&first), &common::quiet())
        .await
        .expect("pull from a directory");
    assert_eq!(summary.own_images.len(), 1, "{summary:?}");
    let listed_first = listed(&first);
    assert_eq!(listed_first.len(), 1);
    assert_eq!(
        (listed_first[0].0.as_str(), listed_first[0].1.as_str()),
        ("team/site", "v1")
    );
    let second = dir.path().join("second");
    mirror::pull(&from_dir(&second), &common::quiet())
        .await
        .expect("again");
    assert_eq!(
        listed(&second),
        listed_first,
        "the same directory, the same digest"
    );

    let ca = Certs::new("registry-push-ca");
    let replica = air_gap::replica(&ca).await;
    mirror::push(
        &common::push_options(air_gap::push_endpoint(&replica, &ca), &first),
        &common::quiet(),
    )
    .await
    .expect("push");
    let containerd = Containerd::start().await;
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = air_gap::agent_of(&replica, &containerd, agent_dir.path()).await;
    let reference = format!("{AGENT_HOST}/system/deckhouse/team/site:v1");
    containerd
        .pull(&reference)
        .await
        .expect_success(&format!("pull {reference}"));
    agent.stop().await;
}

/// Whether a pull of `bundle` holds `digest` as verified: in its cache, or journaled as in place
/// in a package being written.
fn in_place_or_cached(bundle: &Path, digest: &str) -> bool {
    let hex = digest.trim_start_matches("sha256:");
    let work = bundle.join(".d8-mirror-pull");
    work.join("blobs/sha256").join(hex).exists()
        || std::fs::read_to_string(work.join("placed"))
            .is_ok_and(|journal| journal.lines().any(|l| l.ends_with(hex)))
}
