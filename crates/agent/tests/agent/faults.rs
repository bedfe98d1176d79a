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
    let dropin = tempfile::tempdir().unwrap();
    let agent = agent_for(&layout(backends, vec![]), dropin.path()).await;
    let client = testkit::http_client(Some(&agent.running.ca_pem));
    let mut report = String::new();
    let mut failures = Vec::new();
    for (fault, blob) in Fault::MATRIX.into_iter().zip(&image.layers) {
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
    }
    eprintln!(
        "agent, {} target(s):\n{report}",
        if two_targets { 2 } else { 1 }
    );
    assert!(
        failures.is_empty(),
        "{failures:?}\n{report}\n{}",
        agent.metrics()
    );
    let metrics = agent.metrics();
    assert!(
        metrics.contains(&format!(
            "d8_registry_agent_digest_mismatches_total{{target=\"{}\"}} 1",
            faulty.host()
        )),
        "{metrics}"
    );
    agent.running.stop().await;
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
