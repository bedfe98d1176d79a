//! The fault matrix through the replica's pull-through: the upstream (testkit's `FaultyUpstream`
//! in front of a real docker-registry) resets, stalls, fails once, flips a byte, refuses,
//! cuts a body short or trickles.
//!
//! For every fault: the client gets the right bytes or a clean error within the watchdogs,
//! nothing corrupt or partial is kept (every stored blob re-hashes to its name, `tmp/` is empty),
//! the next fault-free pull starts a fresh upstream fetch and is right, and the replica still
//! answers. The trickle is the case of issue #25: without the throughput floor its fill stayed
//! open for ever and every later pull joined it. A reset, a stall or a short body mid-blob is
//! resumed with a Range request (issue #25 point 2), so the first pull gets the right bytes.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::common::{self, NODE, Options, basic, client};
use storage::Upstream;
use testkit::{Fault, FaultyUpstream, ImageBuilder, Seen, UpstreamOptions};

const LAYER: u64 = 2 << 20;
const STALL: Duration = Duration::from_secs(1);
const FLOOR: registry_client::MinThroughput = registry_client::MinThroughput {
    bytes: 256 * 1024,
    window: Duration::from_secs(2),
};
const WITHIN: Duration = Duration::from_secs(10);

/// A remote for `url` with the test's watchdogs.
fn watched_remote(url: &str, credentials: bool) -> registry_client::Remote {
    let mut endpoint = registry_client::Endpoint::from_url(url)
        .expect("endpoint")
        .path_prefix("deckhouse/ee");
    if credentials {
        endpoint = endpoint.credentials(registry_client::Credentials::new("up", "up-pw"));
    }
    registry_client::Client::new(registry_client::Config {
        timeouts: registry_client::Timeouts {
            connect: Duration::from_secs(2),
            response_headers: Duration::from_secs(5),
            stall: STALL,
            total: None,
        },
        min_throughput: Some(FLOOR),
        ..registry_client::Config::default()
    })
    .remote(endpoint)
    .expect("remote")
}

/// Waits (up to 5 s) until no fill has a temporary file: the fill committed or discarded its
/// content. A client may hold the whole verified blob a moment before the fill's commit.
async fn fills_settled(replica: &common::Replica) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !tmp_entries(replica).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn tmp_entries(replica: &common::Replica) -> Vec<String> {
    std::fs::read_dir(replica.store().root().join("tmp"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_fault_leaves_a_corrupt_blob_or_a_fill_that_never_ends() {
    let upstream = testkit::Upstream::start(UpstreamOptions::default()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = testkit::image::Layout::new(dir.path()).expect("layout");
    let image = ImageBuilder::new("faults")
        .uncompressed()
        .layers(&[LAYER; Fault::MATRIX.len()])
        .build(&layout);
    testkit::push::Registry::of(&upstream)
        .push_image("deckhouse/ee", Some("v1"), &image)
        .await
        .expect("push to upstream");
    let faulty = FaultyUpstream::start(&upstream, Fault::None).await;
    let replica = common::start(Options {
        upstream: Some(Upstream {
            remote: watched_remote(&faulty.url(), true),
            prefix: "system/deckhouse".into(),
        }),
        ..Options::default()
    })
    .await;
    let http = client();
    let get = |digest: &str| {
        http.get(format!(
            "{}/v2/system/deckhouse/blobs/{digest}",
            replica.read_url()
        ))
        .header("authorization", basic(NODE))
        .send()
    };
    let mut report = String::new();
    let mut failures = Vec::new();
    for (fault, blob) in Fault::MATRIX.into_iter().zip(&image.layers) {
        faulty.set_fault(fault);
        let started = Instant::now();
        let first = tokio::time::timeout(WITHIN * 2, async {
            Seen::of(get(&blob.digest).await, &blob.digest).await
        })
        .await
        .unwrap_or(Seen::Status(0));
        let took = started.elapsed();
        // What the fill left: a blob in the store must be the right one.
        fills_settled(&replica).await;
        let digest: oci::Digest = blob.digest.parse().expect("digest");
        let kept = replica.store().blob_size(&digest).is_some();
        let gets_before = faulty.blob_gets();
        faulty.set_fault(Fault::None);
        let after = tokio::time::timeout(WITHIN * 2, async {
            Seen::of(get(&blob.digest).await, &blob.digest).await
        })
        .await
        .unwrap_or(Seen::Status(0));
        let fresh_fetch = kept || faulty.blob_gets() > gets_before;
        let alive = http
            .get(format!("{}/v2/", replica.read_url()))
            .header("authorization", basic(NODE))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        let _ = writeln!(
            report,
            "{:<14} first: {first:<16} in {took:.1?}; kept: {kept}; then: {after} (fresh fetch: \
             {fresh_fetch}); alive: {alive}; tmp: {:?}",
            fault.name(),
            tmp_entries(&replica),
        );
        if first == Seen::Wrong
            || first == Seen::Status(0)
            || took > WITHIN
            || after != Seen::Right
            || !fresh_fetch
            || !alive
        {
            failures.push(fault.name());
        }
    }
    // Nothing corrupt was committed, nothing partial is left behind (a write the failed fill
    // had in flight on the blocking pool removes its file when it returns).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !tmp_entries(&replica).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let verify = replica.store().verify().expect("verify");
    let _ = writeln!(
        report,
        "store: {} blobs verified, {} removed as corrupt; tmp: {:?}",
        verify.verified,
        verify.removed.len(),
        tmp_entries(&replica)
    );
    eprintln!("replica:\n{report}");
    assert!(failures.is_empty(), "{failures:?}\n{report}");
    assert!(verify.removed.is_empty(), "{report}");
    assert!(tmp_entries(&replica).is_empty(), "{report}");
}

/// Issue #25 point 2 for the replica: a fill whose upstream stream breaks mid-blob (reset, cut
/// short, stalled) continues with `Range: bytes=n-` from where it stopped, and the client that
/// started it gets the whole, right blob — one fill, one resume, nothing corrupt kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_fill_continues_with_a_range_request() {
    let faults = [Fault::ResetAtHalf, Fault::ShortBody, Fault::StallAtHalf];
    let upstream = testkit::Upstream::start(UpstreamOptions::default()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = testkit::image::Layout::new(dir.path()).expect("layout");
    let image = ImageBuilder::new("resume")
        .uncompressed()
        .layers(&[LAYER; 3])
        .build(&layout);
    testkit::push::Registry::of(&upstream)
        .push_image("deckhouse/ee", Some("v1"), &image)
        .await
        .expect("push to upstream");
    let faulty = FaultyUpstream::start(&upstream, Fault::None).await;
    let replica = common::start(Options {
        upstream: Some(Upstream {
            remote: watched_remote(&faulty.url(), true),
            prefix: "system/deckhouse".into(),
        }),
        ..Options::default()
    })
    .await;
    let http = client();
    for (fault, blob) in faults.into_iter().zip(&image.layers) {
        faulty.set_fault(fault);
        let fills = replica.registry.fills_started();
        let gets = faulty.blob_gets();
        let seen = tokio::time::timeout(WITHIN * 2, async {
            Seen::of(
                http.get(format!(
                    "{}/v2/system/deckhouse/blobs/{}",
                    replica.read_url(),
                    blob.digest
                ))
                .header("authorization", basic(NODE))
                .send()
                .await,
                &blob.digest,
            )
            .await
        })
        .await
        .unwrap_or(Seen::Status(0));
        let name = fault.name();
        assert_eq!(seen, Seen::Right, "{name}");
        assert_eq!(
            replica.registry.fills_started(),
            fills + 1,
            "{name}: one fill"
        );
        assert_eq!(
            faulty.blob_gets(),
            gets + 2,
            "{name}: the broken GET and one Range GET"
        );
        assert!(faulty.injected() > 0, "{name}: the fault struck");
        fills_settled(&replica).await;
        let digest: oci::Digest = blob.digest.parse().expect("digest");
        assert_eq!(
            replica.store().blob_size(&digest),
            Some(blob.size),
            "{name}"
        );
    }
    faulty.set_fault(Fault::None);
    let verify = replica.store().verify().expect("verify");
    assert!(verify.removed.is_empty(), "{:?}", verify.removed);
    assert_eq!(verify.verified, faults.len() as u64);
    assert!(tmp_entries(&replica).is_empty());
}
