//! The fault matrix through the agent: a registry that resets, stalls, fails once, flips a byte,
//! refuses us, cuts a body short or trickles (testkit's `FaultyUpstream` in front of a real
//! docker-registry), with one target and with the faulty one first of two.
//!
//! For every fault: the client gets the right bytes (they hash to the digest) or a clean error
//! (an error status, or a response broken off short of its length) within the watchdogs — never
//! a complete wrong blob; the next fault-free pull is right; the agent still answers. With two
//! targets every mid-body fault ends in the right bytes.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use registry_client::MinThroughput;
use registry_plan::{BackendName, Endpoint, Scheme};
use testkit::image::Layout as ImageLayout;
use testkit::push::Registry;
use testkit::{Fault, FaultyUpstream, ImageBuilder, Seen, Upstream};

use crate::common::*;

const LAYER: u64 = 2 << 20;
const STALL: Duration = Duration::from_secs(1);
const FLOOR: MinThroughput = MinThroughput {
    bytes: 256 * 1024,
    window: Duration::from_secs(2),
};
/// The longest any cell may take: every attempt ends within the stall window or the floor's
/// window (plus a stall's own wait for the first byte), and the agent makes at most
/// targets + 1 attempts at resuming.
const WITHIN: Duration = Duration::from_secs(15);

/// GETs `url` and classifies the answer against `digest`.
async fn fetch(client: &reqwest::Client, url: &str, digest: &str) -> Seen {
    Seen::of(client.get(url).send().await, digest).await
}

/// An upstream with one blob per fault of the matrix (so that one fault's aftermath does not
/// touch the next).
async fn upstream_with_blobs() -> (Upstream, testkit::Image) {
    let upstream = Upstream::start_plain().await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("faults")
        .layers(&[LAYER; Fault::MATRIX.len()])
        .uncompressed()
        .build(&images);
    Registry::of(&upstream)
        .push_image("dkp/faults", Some("v1"), &image)
        .await
        .unwrap();
    (upstream, image)
}

/// The faulty registry as a target, with credentials (so its 401 is a refusal of *ours*).
fn faulty_endpoint(faulty: &FaultyUpstream) -> Endpoint {
    Endpoint {
        scheme: Scheme::Http,
        host: faulty.host(),
        path: "/dkp".into(),
        ca: None,
        auth: Some(registry_plan::Credentials {
            username: "agent".into(),
            password: "agent-password".into(),
        }),
    }
}

async fn agent_for(layout: &registry_plan::Layout, dropin: &std::path::Path) -> AgentUnderTest {
    let timeouts = registry_client::Timeouts {
        connect: Duration::from_secs(2),
        response_headers: Duration::from_secs(5),
        stall: STALL,
        total: Some(Duration::from_secs(60)),
    };
    AgentUnderTest::start_with_watchdogs(layout, dropin, timeouts, FLOOR).await
}

/// Runs the matrix; `expected(fault)` is what the client must see on the first pull.
async fn matrix(two_targets: bool, expected: impl Fn(Fault) -> Seen) {
    let (upstream, image) = upstream_with_blobs().await;
    let faulty = FaultyUpstream::start(&upstream, Fault::None).await;
    let mut backends = vec![backend(BackendName::Storage, faulty_endpoint(&faulty))];
    if two_targets {
        backends.push(backend(
            BackendName::Upstream,
            endpoint(&upstream, "/dkp", None),
        ));
    }
    let mut report = String::new();
    let mut failures = Vec::new();
    let mut metrics = String::new();
    for (fault, blob) in Fault::MATRIX.into_iter().zip(&image.layers) {
        // An agent of its own per fault: one fault's aftermath (the faulty target avoided for a
        // while after a reset or a stall) must not decide the next one's outcome.
        let dropin = tempfile::tempdir().unwrap();
        let agent = agent_for(&layout(backends.clone(), vec![]), dropin.path()).await;
        let client = testkit::http_client(Some(&agent.running.ca_pem));
        faulty.set_fault(fault);
        let url = format!(
            "https://{}/v2/system/deckhouse/faults/blobs/{}",
            agent.address(),
            blob.digest
        );
        let started = Instant::now();
        let first = fetch(&client, &url, &blob.digest).await;
        let took = started.elapsed();
        // A broken blob is retried as containerd retries it: the agent steers the retry.
        let retry = if first == Seen::Broken && two_targets {
            Some(fetch(&client, &url, &blob.digest).await)
        } else {
            None
        };
        faulty.set_fault(Fault::None);
        let after = fetch(&client, &url, &blob.digest).await;
        let alive = client
            .get(format!("https://{}/v2/", agent.address()))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        let _ = writeln!(
            report,
            "{:<14} first: {first:<18} retry: {:<12} in {took:.1?}; then: {after}; alive: {alive}",
            fault.name(),
            retry.as_ref().map_or("-".to_owned(), ToString::to_string),
        );
        let want = expected(fault);
        let ends_right = retry.as_ref().unwrap_or(&first) == &Seen::Right;
        if first != want
            || took > WITHIN
            || after != Seen::Right
            || !alive
            || (two_targets && fault.is_mid_body() && !ends_right)
        {
            failures.push(format!("{}: expected first {want}", fault.name()));
        }
        metrics.push_str(&agent.metrics());
        agent.running.stop().await;
    }
    eprintln!(
        "agent, {} target(s):\n{report}",
        if two_targets { 2 } else { 1 }
    );
    assert!(failures.is_empty(), "{failures:?}\n{report}\n{metrics}");
    assert!(
        metrics.contains(&format!(
            "d8_registry_agent_digest_mismatches_total{{target=\"{}\"}} 1",
            faulty.host()
        )),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_target_never_hands_out_wrong_bytes() {
    matrix(false, |fault| match fault {
        // Resumed from the same registry, reconnected, past the fault.
        Fault::ResetAtHalf | Fault::StallAtHalf | Fault::ShortBody => Seen::Right,
        // The last target's own failure, relayed as Deckhouse's agent relays it.
        Fault::ServerErrorOnce => Seen::Status(500),
        Fault::FlipByte => Seen::Broken,
        Fault::Unauthorized => Seen::Status(502),
        // Ended by the throughput floor, resumed once, ended again.
        Fault::Trickle { .. } => Seen::Broken,
        Fault::None => Seen::Right,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_targets_end_every_fault_in_the_right_bytes() {
    matrix(true, |fault| match fault {
        // The digest cannot be checked before the last byte: the first pull is broken off,
        // and its retry goes to the other target first.
        Fault::FlipByte => Seen::Broken,
        _ => Seen::Right,
    })
    .await;
}

/// A registry of the test's own serving `blob` at every `…/blobs/…` path: `ranges` says whether
/// it honours `Range` (else it always sends the whole blob with a `200`), `chunked` whether it
/// leaves out `Content-Length`, `flip` whether it flips the byte in the middle.
async fn own_registry(blob: Vec<u8>, ranges: bool, chunked: bool, flip: bool) -> Endpoint {
    use axum::body::Body;
    use axum::http::{HeaderMap, StatusCode, Uri, header};
    let mut blob = blob;
    if flip {
        let half = blob.len() / 2;
        blob[half] ^= 1;
    }
    let blob = bytes::Bytes::from(blob);
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let blob = blob.clone();
        async move {
            if !uri.path().contains("/blobs/") {
                return axum::http::Response::builder()
                    .status(StatusCode::OK)
                    .body(Body::from("{}"))
                    .unwrap();
            }
            let start = headers
                .get(header::RANGE)
                .and_then(|v| {
                    v.to_str()
                        .ok()?
                        .strip_prefix("bytes=")?
                        .strip_suffix('-')?
                        .parse()
                        .ok()
                })
                .filter(|_| ranges)
                .unwrap_or(0usize);
            let part = blob.slice(start..);
            let mut response = axum::http::Response::builder().status(if start > 0 {
                StatusCode::PARTIAL_CONTENT
            } else {
                StatusCode::OK
            });
            if start > 0 {
                response = response.header(
                    header::CONTENT_RANGE,
                    format!("bytes {start}-{}/{}", blob.len() - 1, blob.len()),
                );
            }
            let body = if chunked {
                let pieces: Vec<Result<bytes::Bytes, std::io::Error>> = part
                    .chunks(8192)
                    .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
                    .collect();
                Body::from_stream(futures_util::stream::iter(pieces))
            } else {
                response = response.header(header::CONTENT_LENGTH, part.len());
                Body::from(part)
            };
            response.body(body).unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Endpoint {
        scheme: Scheme::Http,
        host: address.to_string(),
        path: "/own".into(),
        ca: None,
        auth: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_ignores_range_still_finishes_a_broken_blob() {
    let (upstream, image) = upstream_with_blobs().await;
    let blob = &image.layers[0];
    let faulty = FaultyUpstream::start(&upstream, Fault::ResetAtHalf).await;
    let whole_only = own_registry(blob.read(), false, false, false).await;
    let whole_only_host = whole_only.host.clone();
    let layout = layout(
        vec![
            backend(BackendName::Storage, faulty_endpoint(&faulty)),
            backend(BackendName::Upstream, whole_only),
        ],
        vec![],
    );
    let dropin = tempfile::tempdir().unwrap();
    let agent = agent_for(&layout, dropin.path()).await;
    let client = testkit::http_client(Some(&agent.running.ca_pem));
    let url = format!(
        "https://{}/v2/system/deckhouse/faults/blobs/{}",
        agent.address(),
        blob.digest
    );
    assert_eq!(fetch(&client, &url, &blob.digest).await, Seen::Right);
    assert_eq!(
        agent.sample(&format!(
            "d8_registry_agent_resumes_total{{target=\"{whole_only_host}\"}}"
        )),
        1,
        "{}",
        agent.metrics()
    );
    agent.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_content_length_a_wrong_blob_is_still_broken_off() {
    let data: Vec<u8> = (0..(1u32 << 20)).map(|i| (i * 7 + i / 13) as u8).collect();
    let digest = oci::Digest::sha256(&data).to_string();
    let right = own_registry(data.clone(), true, true, false).await;
    let flipped = own_registry(data, true, true, true).await;
    let flipped_host = flipped.host.clone();
    let dropin = tempfile::tempdir().unwrap();
    let agent = agent_for(
        &layout(vec![backend(BackendName::Upstream, flipped)], vec![]),
        dropin.path(),
    )
    .await;
    let client = testkit::http_client(Some(&agent.running.ca_pem));
    let url = format!(
        "https://{}/v2/system/deckhouse/x/blobs/{digest}",
        agent.address()
    );
    assert_eq!(fetch(&client, &url, &digest).await, Seen::Broken);
    assert_eq!(
        agent.sample(&format!(
            "d8_registry_agent_digest_mismatches_total{{target=\"{flipped_host}\"}}"
        )),
        1
    );
    // The same registry serving the right bytes, chunked: relayed whole.
    agent.running.layout.set(Some(registry_plan::Layout {
        backends: vec![backend(BackendName::Upstream, right)],
        ..Default::default()
    }));
    assert_eq!(fetch(&client, &url, &digest).await, Seen::Right);
    agent.running.stop().await;
}

/// containerd itself, pulling a 4 MiB-layer image through the agent: a registry that resets
/// every layer download at half (the only target: resumed from it, reconnected) and one that
/// stalls at half in front of a healthy one (resumed from the healthy one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_pulls_through_registries_that_break_mid_layer() {
    let upstream = Upstream::start_plain().await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("install")
        .layers(&[4 << 20, 4 << 20])
        .build(&images);
    Registry::of(&upstream)
        .push_image("dkp/install", Some("v1"), &image)
        .await
        .unwrap();
    let containerd = testkit::Containerd::start().await;
    let resetting = FaultyUpstream::start(&upstream, Fault::ResetAtHalf).await;
    let agent = agent_for(
        &layout(
            vec![backend(BackendName::Upstream, faulty_endpoint(&resetting))],
            vec![],
        ),
        &containerd.hosts_dir(),
    )
    .await;
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/install:v1")
        .await
        .expect_success("pull through a registry that resets every layer at half");
    assert!(resetting.injected() >= 2, "every layer was reset once");
    assert!(
        agent.sample(&format!(
            "d8_registry_agent_resumes_total{{target=\"{}\"}}",
            resetting.host()
        )) >= 2,
        "{}",
        agent.metrics()
    );

    let stalling = FaultyUpstream::start(&upstream, Fault::StallAtHalf).await;
    agent.running.layout.set(Some(layout(
        vec![
            backend(BackendName::Storage, faulty_endpoint(&stalling)),
            backend(BackendName::Upstream, endpoint(&upstream, "/dkp", None)),
        ],
        vec![],
    )));
    // A fresh image, so that containerd must download its layers again.
    let second = ImageBuilder::new("install-2")
        .layers(&[4 << 20, 4 << 20])
        .build(&images);
    Registry::of(&upstream)
        .push_image("dkp/install", Some("v2"), &second)
        .await
        .unwrap();
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/install:v2")
        .await
        .expect_success("pull with the first target stalling at half of every layer");
    assert!(stalling.injected() >= 2, "every layer stalled once");
    agent.running.stop().await;
}

/// containerd past a registry that flips a byte in the middle of every blob, in front of a
/// healthy one. containerd never commits the wrong content: the agent breaks each blob off one
/// byte short, containerd resumes it with a `Range` request of its own — which the agent sends to
/// the healthy registry, the flipping one now last for that digest — and then refuses to commit
/// what hashes wrong (or, for a blob small enough that the break reaches it with the response
/// head, fails that request outright). (containerd 1.6 keeps that failed download and commits the same bytes again
/// on the next pull: a flipped byte upstream is a failed pull for it, never a wrong image.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_never_commits_a_flipped_layer() {
    let upstream = Upstream::start_plain().await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("flipped").layer(4 << 20).build(&images);
    Registry::of(&upstream)
        .push_image("dkp/install", Some("v1"), &image)
        .await
        .unwrap();
    let containerd = testkit::Containerd::start().await;
    let flipping = FaultyUpstream::start(&upstream, Fault::FlipByte).await;
    let agent = agent_for(
        &layout(
            vec![
                backend(BackendName::Storage, faulty_endpoint(&flipping)),
                backend(BackendName::Upstream, endpoint(&upstream, "/dkp", None)),
            ],
            vec![],
        ),
        &containerd.hosts_dir(),
    )
    .await;
    let pulled = containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/install:v1")
        .await;
    assert!(
        !pulled.success,
        "containerd took a flipped blob: {pulled:?}"
    );
    // containerd either refuses the bytes it resumed ("unexpected commit digest") or, when the
    // break-off of a small blob reaches it before the response head, fails that request (EOF).
    // What it did commit of the blobs it verified itself; the image never appears.
    assert!(containerd.images().await.is_empty(), "{}", pulled.stderr);
    // Two blobs (config and layer), each broken off once; containerd's resumes went elsewhere.
    let mismatches = agent.sample(&format!(
        "d8_registry_agent_digest_mismatches_total{{target=\"{}\"}}",
        flipping.host()
    ));
    assert!(mismatches >= 1, "{}", agent.metrics());
    // Config and layer reach the flipping registry once each at most (containerd may cancel the
    // layer when the config fails first): no Range resume went back to it.
    assert!(
        flipping.blob_gets() <= 2,
        "a client's Range resume of a blob went back to the registry that served it wrong: {} \
         blob requests",
        flipping.blob_gets()
    );
    agent.running.stop().await;
}
