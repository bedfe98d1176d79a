//! Oversized request headers: 431 every time, never a reset connection.

use registry_plan::BackendName;
use testkit::curl::{Protocol, get_with_header};

use crate::common::*;

#[tokio::test]
async fn a_64_kib_header_gets_431_every_time_and_a_small_one_is_served() {
    let containerd_dir = tempfile::tempdir().unwrap();
    let layout = layout(
        vec![backend(BackendName::Upstream, dead_endpoint("/deckhouse"))],
        vec![],
    );
    let agent = AgentUnderTest::start(&layout, containerd_dir.path()).await;
    let scratch = tempfile::tempdir().unwrap();
    let ca = scratch.path().join("ca.crt");
    std::fs::write(&ca, &agent.running.ca_pem).unwrap();
    let url = format!("https://{}/v2/", agent.address());

    let outcomes = tokio::task::spawn_blocking(move || {
        let small = get_with_header(
            &url,
            Some(&ca),
            Protocol::Http1,
            ("x-small", 1024),
            scratch.path(),
        );
        let big: Vec<_> = (0..40)
            .map(|_| {
                get_with_header(
                    &url,
                    Some(&ca),
                    Protocol::Http1,
                    ("x-big", 64 << 10),
                    scratch.path(),
                )
            })
            .collect();
        (small, big)
    })
    .await
    .unwrap();
    assert_eq!(outcomes.0, Ok(200), "a 1 KiB header is served");
    let not_431: Vec<_> = outcomes.1.iter().filter(|o| **o != Ok(431)).collect();
    assert!(
        not_431.is_empty(),
        "every 64 KiB header gets 431: {not_431:?}"
    );
}
