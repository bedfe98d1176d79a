//! Pull-through from a real docker-registry upstream (token auth).

use std::time::Duration;

use crate::common::{self, NODE, Options, basic, client, remote_of, upstream_gets};
use storage::{Settings, Upstream};
use testkit::{ImageBuilder, UpstreamOptions};

async fn upstream_with_image(layer: u64) -> (testkit::Upstream, testkit::Image, tempfile::TempDir) {
    let upstream =
        testkit::Upstream::start(UpstreamOptions::default().token_auth("up", "up-pw")).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = testkit::image::Layout::new(dir.path()).expect("layout");
    let image = ImageBuilder::new("pull-through")
        .uncompressed()
        .layer(layer)
        .build(&layout);
    testkit::push::Registry::of(&upstream)
        .push_image("deckhouse/ee", Some("v1.2.3"), &image)
        .await
        .expect("push to upstream");
    (upstream, image, dir)
}

fn upstream_for(upstream: &testkit::Upstream) -> Upstream {
    Upstream {
        remote: remote_of(upstream, "deckhouse/ee"),
        prefix: "system/deckhouse".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_cold_clients_cause_one_upstream_fetch() {
    let (upstream, image, _layout) = upstream_with_image(24 << 20).await;
    let replica = common::start(Options {
        upstream: Some(upstream_for(&upstream)),
        ..Options::default()
    })
    .await;
    let layer = &image.layers[0];
    let url = format!(
        "{}/v2/system/deckhouse/blobs/{}",
        replica.read_url(),
        layer.digest
    );
    let http = client();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (http, url) = (http.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let response = http
                .get(&url)
                .header("authorization", basic(NODE))
                .send()
                .await
                .expect("send");
            assert_eq!(response.status(), 200);
            let len = response.content_length();
            let bytes = response.bytes().await.expect("body");
            (len, common::sha256(&bytes))
        }));
    }
    for task in tasks {
        let (len, digest) = task.await.expect("task");
        assert_eq!(
            len,
            Some(layer.size),
            "exact Content-Length for every reader"
        );
        assert_eq!(digest, layer.digest);
    }
    let path = format!("/v2/deckhouse/ee/blobs/{}", layer.digest);
    assert_eq!(
        upstream_gets(&upstream.log(), &path),
        1,
        "one upstream GET for 20 clients:\n{}",
        upstream.log()
    );
    assert_eq!(replica.registry.fills_started(), 1);
    // committed: a later pull is local
    let digest = oci::Digest::parse(&layer.digest).expect("digest");
    assert_eq!(replica.store().blob_size(&digest), Some(layer.size));
    let again = http
        .get(&url)
        .header("authorization", basic(NODE))
        .header("range", "bytes=10-19")
        .send()
        .await
        .expect("send");
    assert_eq!(again.status(), 206);
    assert_eq!(
        again.headers()["content-range"],
        format!("bytes 10-19/{}", layer.size).as_str()
    );
    assert_eq!(again.bytes().await.expect("body"), layer.read()[10..20]);
    assert_eq!(upstream_gets(&upstream.log(), &path), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_by_tag_are_cached_and_served_when_the_upstream_is_gone() {
    let (mut upstream, image, _layout) = upstream_with_image(64 << 10).await;
    let replica = common::start(Options {
        upstream: Some(upstream_for(&upstream)),
        settings: Settings {
            tag_ttl: Duration::from_millis(1),
        },
        ..Options::default()
    })
    .await;
    let http = client();
    let manifest_url = format!(
        "{}/v2/system/deckhouse/manifests/v1.2.3",
        replica.read_url()
    );
    let get = |method: reqwest::Method| {
        http.request(method, &manifest_url)
            .header("authorization", basic(NODE))
            .header("accept", oci::media_type::MANIFEST_ACCEPT)
            .send()
    };
    let head = get(reqwest::Method::HEAD).await.expect("head");
    assert_eq!(head.status(), 200);
    assert_eq!(
        head.headers()["docker-content-digest"],
        image.digest(),
        "by tag, the upstream's digest"
    );
    assert_eq!(
        head.headers()["content-length"],
        image.manifest.size.to_string().as_str(),
        "exact HEAD"
    );
    let body = get(reqwest::Method::GET).await.expect("get");
    assert_eq!(
        body.bytes().await.expect("bytes"),
        image.manifest.read(),
        "byte-exact"
    );
    for blob in image.blobs() {
        let r = http
            .get(format!(
                "{}/v2/system/deckhouse/blobs/{}",
                replica.read_url(),
                blob.digest
            ))
            .header("authorization", basic(NODE))
            .send()
            .await
            .expect("blob");
        assert_eq!(r.status(), 200);
        assert_eq!(
            common::sha256(&r.bytes().await.expect("bytes")),
            blob.digest
        );
    }
    upstream.stop();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let stale = get(reqwest::Method::GET).await.expect("get");
    assert_eq!(
        stale.status(),
        200,
        "last known tag while the upstream is down"
    );
    assert_eq!(stale.bytes().await.expect("bytes"), image.manifest.read());
    let by_digest = http
        .get(format!(
            "{}/v2/system/deckhouse/manifests/{}",
            replica.read_url(),
            image.digest()
        ))
        .header("authorization", basic(NODE))
        .send()
        .await
        .expect("get");
    assert_eq!(by_digest.status(), 200);
    let missing = http
        .get(format!(
            "{}/v2/system/deckhouse/blobs/sha256:{}",
            replica.read_url(),
            "0".repeat(64)
        ))
        .header("authorization", basic(NODE))
        .send()
        .await
        .expect("get");
    assert!(
        missing.status().is_server_error(),
        "a miss with the upstream down is a 5xx, so the agent tries the next target: {}",
        missing.status()
    );
    let tags = http
        .get(format!(
            "{}/v2/system/deckhouse/tags/list",
            replica.read_url()
        ))
        .header("authorization", basic(NODE))
        .send()
        .await
        .expect("tags");
    assert_eq!(tags.status(), 200);
    let tags: serde_json::Value = tags.json().await.expect("json");
    assert_eq!(tags["tags"], serde_json::json!(["v1.2.3"]));
}

#[tokio::test]
async fn the_read_listener_requires_pull_credentials_and_refuses_writes() {
    let replica = common::start(Options::default()).await;
    let http = client();
    let url = format!("{}/v2/", replica.read_url());
    let anonymous = http.get(&url).send().await.expect("send");
    assert_eq!(anonymous.status(), 401);
    assert_eq!(
        anonymous.headers()["www-authenticate"],
        "Basic realm=\"Deckhouse registry\""
    );
    let wrong = http
        .get(&url)
        .header("authorization", basic(("node", "nope")))
        .send()
        .await
        .expect("send");
    assert_eq!(wrong.status(), 401);
    let ok = http
        .get(&url)
        .header("authorization", basic(NODE))
        .send()
        .await
        .expect("send");
    assert_eq!(ok.status(), 200);
    let push = http
        .post(format!(
            "{}/v2/system/deckhouse/blobs/uploads/",
            replica.read_url()
        ))
        .header("authorization", basic(common::PUSHER))
        .send()
        .await
        .expect("send");
    assert_eq!(push.status(), 405);
    assert!(push.text().await.expect("text").contains("read-only"));
}
