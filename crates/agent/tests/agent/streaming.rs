//! Byte-exact streaming: Range answers, a layout swap that leaves requests in flight alone, and
//! a silent registry abandoned in time for the next one to serve.

use std::time::Duration;

use futures_util::StreamExt;
use registry_plan::BackendName;
use testkit::image::Layout as ImageLayout;
use testkit::push::Registry;
use testkit::{ImageBuilder, Upstream};

use crate::common::*;

async fn upstream_with_blob(size: u64) -> (Upstream, testkit::Image) {
    let upstream = Upstream::start_plain().await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("big")
        .layer(size)
        .uncompressed()
        .build(&images);
    Registry::of(&upstream)
        .push_image("dkp/big", Some("v1"), &image)
        .await
        .unwrap();
    (upstream, image)
}

#[tokio::test]
async fn ranges_are_answered_by_the_registry_byte_for_byte() {
    let (upstream, image) = upstream_with_blob(100_000).await;
    let layout = layout(
        vec![backend(
            BackendName::Upstream,
            endpoint(&upstream, "/dkp", None),
        )],
        vec![],
    );
    let dropin = tempfile::tempdir().unwrap();
    let agent = AgentUnderTest::start(&layout, dropin.path()).await;
    let blob = &image.layers[0];
    let bytes = blob.read();
    let url = format!(
        "https://{}/v2/system/deckhouse/big/blobs/{}",
        agent.address(),
        blob.digest
    );
    let client = testkit::http_client(Some(&agent.running.ca_pem));
    let response = client
        .get(&url)
        .header("Range", "bytes=10-19")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 206);
    assert_eq!(
        response.headers()["content-range"].to_str().unwrap(),
        format!("bytes 10-19/{}", bytes.len())
    );
    assert_eq!(response.bytes().await.unwrap(), bytes[10..20]);
    let whole = client.get(&url).send().await.unwrap();
    assert_eq!(
        whole.headers()["docker-content-digest"].to_str().unwrap(),
        blob.digest
    );
    assert_eq!(whole.bytes().await.unwrap(), bytes);
    agent.running.stop().await;
}

#[tokio::test]
async fn a_new_layout_does_not_disturb_a_download_in_flight() {
    let (upstream, image) = upstream_with_blob(24 << 20).await;
    let layout = layout(
        vec![backend(
            BackendName::Upstream,
            endpoint(&upstream, "/dkp", None),
        )],
        vec![],
    );
    let dropin = tempfile::tempdir().unwrap();
    let agent = AgentUnderTest::start(&layout, dropin.path()).await;
    let blob = &image.layers[0];
    let url = format!(
        "https://{}/v2/system/deckhouse/big/blobs/{}",
        agent.address(),
        blob.digest
    );
    let client = testkit::http_client(Some(&agent.running.ca_pem));
    let response = client.get(&url).send().await.unwrap();
    let mut stream = response.bytes_stream();
    let mut received = stream.next().await.unwrap().unwrap().to_vec();
    // The layout now points somewhere dead; the download in flight finishes on the old one.
    agent.running.layout.set(Some(registry_plan::Layout {
        backends: vec![backend(BackendName::Upstream, dead_endpoint("/dkp"))],
        ..Default::default()
    }));
    while let Some(chunk) = stream.next().await {
        received.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(received.len() as u64, blob.size);
    assert!(received == blob.read(), "the bytes differ");
    // New requests use the new layout.
    assert_eq!(client.get(&url).send().await.unwrap().status(), 502);
    agent.running.stop().await;
}

#[tokio::test]
async fn a_silent_registry_is_abandoned_for_the_next_one() {
    let (upstream, image) = upstream_with_blob(10_000).await;
    // Accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_address = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let mut storage = dead_endpoint("/dkp");
    storage.host = silent_address.to_string();
    let layout = layout(
        vec![
            backend(BackendName::Storage, storage),
            backend(BackendName::Upstream, endpoint(&upstream, "/dkp", None)),
        ],
        vec![],
    );
    let dropin = tempfile::tempdir().unwrap();
    let agent = AgentUnderTest::start_with_timeouts(
        &layout,
        dropin.path(),
        registry_client::Timeouts {
            connect: Duration::from_secs(2),
            response_headers: Duration::from_millis(700),
            stall: Duration::from_secs(2),
            total: Some(Duration::from_secs(30)),
        },
    )
    .await;
    let started = std::time::Instant::now();
    let url = format!(
        "https://{}/v2/system/deckhouse/big/manifests/{}",
        agent.address(),
        image.digest()
    );
    let response = testkit::http_client(Some(&agent.running.ca_pem))
        .get(&url)
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    assert!(
        elapsed >= Duration::from_millis(700),
        "the silent registry was not tried first"
    );
    assert!(
        agent.sample(&format!(
            "d8_registry_agent_failovers_total{{target=\"{silent_address}\",reason=\"unreachable\"}}"
        )) >= 1
    );
    agent.running.stop().await;
}

/// A registry that accepts connections and never answers (a replica cut off mid-way, still
/// first in line) until `answer` is set; from then on every new connection gets `503`.
struct Silent {
    address: std::net::SocketAddr,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    answer: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Silent {
    async fn start() -> Self {
        use std::sync::atomic::Ordering::SeqCst;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let silent = Self {
            address: listener.local_addr().unwrap(),
            accepted: Default::default(),
            answer: Default::default(),
        };
        let (accepted, answer) = (silent.accepted.clone(), silent.answer.clone());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut socket, _)) = listener.accept().await {
                accepted.fetch_add(1, SeqCst);
                if !answer.load(SeqCst) {
                    held.push(socket);
                    continue;
                }
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let _ = socket
                        .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                });
            }
        });
        silent
    }

    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A layout with this registry first and `upstream` second, and an agent on it with short
    /// timeouts (2 s to connect and for response headers).
    async fn first_before(&self, upstream: &Upstream, dropin: &std::path::Path) -> AgentUnderTest {
        let mut storage = dead_endpoint("/dkp");
        storage.host = self.address.to_string();
        let layout = layout(
            vec![
                backend(BackendName::Storage, storage),
                backend(BackendName::Upstream, endpoint(upstream, "/dkp", None)),
            ],
            vec![],
        );
        AgentUnderTest::start_with_timeouts(
            &layout,
            dropin,
            registry_client::Timeouts {
                connect: HEADERS_TIMEOUT,
                response_headers: HEADERS_TIMEOUT,
                stall: Duration::from_secs(2),
                total: Some(Duration::from_secs(30)),
            },
        )
        .await
    }
}

const HEADERS_TIMEOUT: Duration = Duration::from_secs(2);

/// GETs `url` through the agent: 200 and the whole body, and how long that took.
async fn timed_get(client: &reqwest::Client, url: &str) -> Duration {
    let started = std::time::Instant::now();
    let response = client.get(url).send().await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    response.bytes().await.unwrap();
    started.elapsed()
}

#[tokio::test]
async fn a_silent_first_registry_costs_one_request_its_timeout_and_is_probed_after_its_window() {
    let (upstream, image) = upstream_with_blob(10_000).await;
    let silent = Silent::start().await;
    let dropin = tempfile::tempdir().unwrap();
    let agent = silent.first_before(&upstream, dropin.path()).await;
    let client = testkit::http_client(Some(&agent.running.ca_pem));
    let blob_url = format!(
        "https://{}/v2/system/deckhouse/big/blobs/{}",
        agent.address(),
        image.layers[0].digest
    );
    let config_url = format!(
        "https://{}/v2/system/deckhouse/big/blobs/{}",
        agent.address(),
        image.config.digest
    );
    let avoidances = format!(
        "d8_registry_agent_target_avoidances_total{{target=\"{}\"}}",
        silent.address
    );
    // The first request waits for the silent registry's timeout, then fails over.
    let first = timed_get(&client, &blob_url).await;
    let window_opened = std::time::Instant::now();
    assert!(
        first >= HEADERS_TIMEOUT,
        "the silent registry was not tried first: {first:?}"
    );
    // The next ones go to the answering registry first: no timeout each.
    for url in [&blob_url, &config_url, &blob_url] {
        let took = timed_get(&client, url).await;
        assert!(
            took < Duration::from_millis(500),
            "a request waited {took:?} on the avoided registry"
        );
    }
    assert_eq!(silent.accepted(), 1, "the silent registry was asked once");
    assert_eq!(agent.sample(&avoidances), 1);
    let avoided_now = format!(
        "d8_registry_agent_target_avoided{{target=\"{}\"}}",
        silent.address
    );
    assert_eq!(agent.sample(&avoided_now), 1);

    // The window (10 s) lapses. The registry now answers, but no request pays for finding out:
    // the agent probes it in the background and the request goes elsewhere first.
    silent
        .answer
        .store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(window_opened.elapsed())).await;
    let took = timed_get(&client, &blob_url).await;
    assert!(
        took < Duration::from_millis(500),
        "the request after the window waited {took:?} on the registry"
    );
    // Once the probe has its answer, the registry is back in its place: asked first again
    // (its 503 is failed over from). Until then requests go elsewhere, without waiting.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while silent.accepted() < 3 {
        assert!(std::time::Instant::now() < deadline, "not asked again");
        let took = timed_get(&client, &blob_url).await;
        assert!(took < Duration::from_millis(500), "{took:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(silent.accepted(), 3, "one probe, then one request");
    assert_eq!(agent.sample(&avoided_now), 0, "back in its place");
    assert_eq!(
        agent.sample(&format!(
            "d8_registry_agent_failovers_total{{target=\"{}\",reason=\"server_error\"}}",
            silent.address
        )),
        1
    );
    assert_eq!(agent.sample(&avoidances), 1);
    agent.running.stop().await;
}

#[tokio::test]
async fn requests_waiting_on_a_registry_another_request_found_silent_stop_waiting() {
    let (upstream, image) = upstream_with_blob(10_000).await;
    let silent = Silent::start().await;
    let dropin = tempfile::tempdir().unwrap();
    let agent = silent.first_before(&upstream, dropin.path()).await;
    let client = testkit::http_client(Some(&agent.running.ca_pem));
    let url = |digest: &str| {
        format!(
            "https://{}/v2/system/deckhouse/big/blobs/{digest}",
            agent.address()
        )
    };
    // One request is sent, and a second one 1.5 s later, both to the silent registry first.
    let (early_url, late_url) = (url(&image.layers[0].digest), url(&image.config.digest));
    let early = timed_get(&client, &early_url);
    let late = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        timed_get(&client, &late_url).await
    };
    let (early, late) = tokio::join!(early, late);
    assert!(early >= HEADERS_TIMEOUT, "{early:?}");
    // When the first one's wait ends in a timeout, the second stops waiting too: it was sent
    // 1.5 s later, so it is served about 0.5 s after it was sent, not 2 s.
    assert!(
        late < Duration::from_millis(1300),
        "the second request waited out its own timeout: {late:?}"
    );
    assert_eq!(
        silent.accepted(),
        2,
        "both were sent to the silent registry"
    );
    agent.running.stop().await;
}

#[tokio::test]
async fn blobs_are_fetched_from_an_http2_registry_over_http1() {
    // docker-registry over TLS offers HTTP/2; the agent keeps one HTTP/1.1 connection per
    // stream so concurrent pulls are decrypted on every core, not serialised on one.
    let ca = testkit::Certs::new("agent test upstream CA");
    let upstream = Upstream::start(testkit::UpstreamOptions::default().tls(&ca)).await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("h1").layer(50_000).build(&images);
    Registry::of(&upstream)
        .push_image("dkp/h1", Some("v1"), &image)
        .await
        .unwrap();
    let layout = layout(
        vec![backend(
            BackendName::Upstream,
            endpoint(&upstream, "/dkp", None),
        )],
        vec![],
    );
    let dropin = tempfile::tempdir().unwrap();
    let agent = AgentUnderTest::start(&layout, dropin.path()).await;
    let blob = &image.layers[0];
    let url = format!(
        "https://{}/v2/system/deckhouse/h1/blobs/{}",
        agent.address(),
        blob.digest
    );
    let client = testkit::http_client(Some(&agent.running.ca_pem));
    let response = client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().await.unwrap(), blob.read());

    let log = upstream.log();
    let request = format!("\"GET /v2/dkp/h1/blobs/{}", blob.digest);
    let line = log
        .lines()
        .find(|line| line.contains(&request))
        .unwrap_or_else(|| panic!("no {request} in the registry's access log:\n{log}"));
    assert!(line.contains(" HTTP/1.1\""), "{line}");
}

/// A registry front on its own port that redirects every blob request to `to` (same path) and
/// records the `Authorization` each one carried. With `challenge`, `/v2/` asks for Basic.
async fn redirecting_front(
    to: String,
    challenge: bool,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
) {
    use axum::response::IntoResponse;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let record = record.clone();
        let to = to.clone();
        async move {
            let path = request.uri().path().to_owned();
            let auth = request
                .headers()
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_owned());
            if path == "/v2/" {
                if challenge && auth.is_none() {
                    return (
                        http::StatusCode::UNAUTHORIZED,
                        [("www-authenticate", "Basic realm=\"front\"")],
                    )
                        .into_response();
                }
                return http::StatusCode::OK.into_response();
            }
            record.lock().unwrap().push(auth);
            (
                http::StatusCode::TEMPORARY_REDIRECT,
                [("location", format!("{to}{path}"))],
            )
                .into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (address, seen)
}

#[tokio::test]
async fn redirects_are_followed_and_our_credentials_stay_with_their_origin() {
    let (upstream, image) = upstream_with_blob(300_000).await;
    // front (asks for our credentials) → second (another origin) → the registry.
    let (second, second_saw) = redirecting_front(upstream.url(), false).await;
    let (front, front_saw) = redirecting_front(format!("http://{second}"), true).await;
    let mut front_endpoint = dead_endpoint("/dkp");
    front_endpoint.host = front;
    front_endpoint.auth = Some(registry_plan::Credentials {
        username: "agent".into(),
        password: "front-secret".into(),
    });
    let layout = layout(vec![backend(BackendName::Upstream, front_endpoint)], vec![]);
    let dropin = tempfile::tempdir().unwrap();
    let agent = AgentUnderTest::start(&layout, dropin.path()).await;
    let blob = &image.layers[0];
    let url = format!(
        "https://{}/v2/system/deckhouse/big/blobs/{}",
        agent.address(),
        blob.digest
    );
    let client = testkit::http_client(Some(&agent.running.ca_pem));
    let response = client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().await.unwrap(), blob.read());
    let front_saw = front_saw.lock().unwrap().clone();
    assert_eq!(front_saw.len(), 1, "{front_saw:?}");
    assert!(
        front_saw[0]
            .as_deref()
            .is_some_and(|a| a.starts_with("Basic ")),
        "the front asked for our credentials: {front_saw:?}"
    );
    assert_eq!(
        *second_saw.lock().unwrap(),
        vec![None],
        "Authorization must not follow a redirect to another origin"
    );
}
