//! Replication: the leader fills ahead of time from a docker-registry upstream; a follower then
//! copies the same multi-platform image from the leader's read listener with the upstream gone,
//! resumes from what it already holds, and ends with every blob verifying.

use std::sync::atomic::Ordering;

use oci::{Digest, Repository};
use storage::replicate::{Progress, Replicator};
use testkit::image::{Format, Index};
use testkit::{ImageBuilder, UpstreamOptions};

use crate::common::{self, NODE, Options, remote_of};

fn leader_remote(replica: &common::Replica) -> registry_client::Remote {
    let endpoint = registry_client::Endpoint::from_url(&replica.read_url())
        .expect("endpoint")
        .credentials(registry_client::Credentials::new(NODE.0, NODE.1));
    registry_client::Client::new(registry_client::Config::default())
        .remote(endpoint)
        .expect("remote")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_copies_an_index_from_the_leader_with_the_upstream_gone_and_resumes() {
    let mut upstream =
        testkit::Upstream::start(UpstreamOptions::default().token_auth("up", "up-pw")).await;
    let dir = tempfile::tempdir().unwrap();
    let layout = testkit::image::Layout::new(dir.path()).unwrap();
    let amd = ImageBuilder::new("replicated")
        .layers(&[300_000, 2 << 20, 5_000])
        .platform("linux", "amd64")
        .build(&layout);
    let arm = ImageBuilder::new("replicated")
        .layers(&[400_000, 1 << 20])
        .platform("linux", "arm64")
        .build(&layout);
    let index = Index::build(&layout, Format::Oci, &[amd.clone(), arm.clone()]);
    testkit::push::Registry::of(&upstream)
        .push_index("deckhouse/ee", "v1.70.0", &index)
        .await
        .unwrap();
    let root = Digest::parse(index.digest()).unwrap();
    let repository = Repository::parse("system/deckhouse").unwrap();
    let blob_count = amd.blobs().chain(arm.blobs()).count() as u64;

    // The leader fills ahead of time from the upstream.
    let leader = common::start(Options::default()).await;
    let from_upstream = remote_of(&upstream, "deckhouse/ee");
    let progress = Progress::default();
    Replicator::new(
        leader.store(),
        &from_upstream,
        "",
        &repository,
        3,
        &progress,
    )
    .copy_all(&[root])
    .await
    .expect("leader fill");
    assert_eq!(progress.manifests_copied.load(Ordering::Relaxed), 3);
    assert_eq!(progress.blobs_copied.load(Ordering::Relaxed), blob_count);
    upstream.kill();

    // A follower that already holds one layer (an earlier run cut short) copies the rest.
    let follower = common::start(Options::default()).await;
    let held = &amd.layers[1];
    follower
        .store()
        .put_bytes(&held.read(), Some(Digest::parse(&held.digest).unwrap()))
        .unwrap();
    let source = leader_remote(&leader);
    let progress = Progress::default();
    Replicator::new(
        follower.store(),
        &source,
        "system/deckhouse",
        &repository,
        2,
        &progress,
    )
    .copy_all(&[root])
    .await
    .expect("replication from the leader");
    assert_eq!(progress.manifests_copied.load(Ordering::Relaxed), 3);
    assert_eq!(
        progress.blobs_copied.load(Ordering::Relaxed),
        blob_count - 1
    );
    assert_eq!(progress.already_held.load(Ordering::Relaxed), 1);
    let expected_bytes: u64 = amd.blob_bytes() + arm.blob_bytes() - held.read().len() as u64;
    assert_eq!(
        progress.bytes_copied.load(Ordering::Relaxed),
        expected_bytes
    );

    // Everything is there and verifies; the follower serves the image itself.
    let report = follower.store().verify().unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    for image in [&amd, &arm] {
        assert!(
            follower
                .store()
                .has_manifest(&repository, &Digest::parse(image.digest()).unwrap())
        );
        for blob in image.blobs() {
            let digest = Digest::parse(&blob.digest).unwrap();
            assert_eq!(
                follower.store().blob_size(&digest),
                Some(blob.read().len() as u64)
            );
        }
    }

    // A second run finds everything held and copies nothing.
    let again = Progress::default();
    Replicator::new(
        follower.store(),
        &source,
        "system/deckhouse",
        &repository,
        2,
        &again,
    )
    .copy_all(&[root])
    .await
    .unwrap();
    assert_eq!(again.blobs_copied.load(Ordering::Relaxed), 0);
    assert_eq!(again.manifests_copied.load(Ordering::Relaxed), 0);

    // A root the leader lacks is an error naming it, and nothing partial appears.
    let missing = Digest::sha256(b"not there");
    let error = Replicator::new(
        follower.store(),
        &source,
        "system/deckhouse",
        &repository,
        2,
        &Progress::default(),
    )
    .copy_all(&[missing])
    .await
    .unwrap_err();
    assert!(
        !follower.store().has_manifest(&repository, &missing),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fill_ahead_of_time_and_clients_missing_the_same_blob_share_one_upstream_request() {
    let upstream =
        testkit::Upstream::start(UpstreamOptions::default().token_auth("up", "up-pw")).await;
    let dir = tempfile::tempdir().unwrap();
    let layout = testkit::image::Layout::new(dir.path()).unwrap();
    let image = ImageBuilder::new("shared-fill")
        .uncompressed()
        .layer(16 << 20)
        .build(&layout);
    testkit::push::Registry::of(&upstream)
        .push_image("deckhouse/ee", Some("v1.70.0"), &image)
        .await
        .unwrap();
    let leader = common::start(Options {
        upstream: Some(storage::Upstream {
            remote: remote_of(&upstream, "deckhouse/ee"),
            prefix: "system/deckhouse".into(),
        }),
        ..Options::default()
    })
    .await;
    let repository = Repository::parse("system/deckhouse").unwrap();
    let layer = image.layers[0].digest.clone();
    let url = format!("{}/v2/system/deckhouse/blobs/{layer}", leader.read_url());
    let http = common::client();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (http, url) = (http.clone(), url.clone());
            tokio::spawn(async move {
                let response = http
                    .get(&url)
                    .header("authorization", common::basic(NODE))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200);
                common::sha256(&response.bytes().await.unwrap())
            })
        })
        .collect();
    let from_upstream = remote_of(&upstream, "deckhouse/ee");
    let progress = Progress::default();
    Replicator::new(
        leader.store(),
        &from_upstream,
        "",
        &repository,
        2,
        &progress,
    )
    .through(&leader.registry)
    .copy_all(&[Digest::parse(image.digest()).unwrap()])
    .await
    .expect("fill");
    for client in clients {
        assert_eq!(client.await.unwrap(), layer);
    }
    let gets = common::upstream_gets(&upstream.log(), &format!("/v2/deckhouse/ee/blobs/{layer}"));
    assert_eq!(
        gets, 1,
        "the layer was fetched {gets} times from the upstream"
    );
    assert!(leader.store().verify().unwrap().removed.is_empty());
}
