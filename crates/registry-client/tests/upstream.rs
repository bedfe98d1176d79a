//! The client against real `docker-registry` upstreams from `testkit`: token auth (one fetch per
//! scope, reuse, refresh after expiry, one fetch for concurrent callers), Basic auth, anonymous,
//! TLS from a private CA (and refusal with the wrong CA), and the push helpers.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use registry_client::{
    Client, Config, Credentials, Endpoint, Error, Mount, Remote, RequestBody, Timeouts,
};
use testkit::image::{Image, Layout};
use testkit::{Certs, ImageBuilder, Upstream, UpstreamOptions};

const ACCEPT_ALL: &[&str] = &[
    oci::media_type::OCI_MANIFEST,
    oci::media_type::OCI_INDEX,
    oci::media_type::DOCKER_MANIFEST,
    oci::media_type::DOCKER_MANIFEST_LIST,
];

fn endpoint_of(upstream: &Upstream) -> Endpoint {
    let mut endpoint = Endpoint::from_url(&upstream.url()).unwrap();
    if let Some(ca) = upstream.ca_pem() {
        endpoint = endpoint.ca_pem(ca);
    }
    if let Some(c) = upstream.credentials() {
        endpoint = endpoint.credentials(Credentials::new(&c.user, &c.password));
    }
    endpoint
}

fn quick() -> Config {
    Config {
        timeouts: Timeouts {
            connect: Duration::from_secs(5),
            response_headers: Duration::from_secs(10),
            stall: Duration::from_secs(10),
            total: None,
        },
        ..Config::default()
    }
}

async fn image_in(upstream: &Upstream, repo: &str, tag: &str, seed: &str) -> Image {
    let layout = Layout::new(&upstream.scratch_dir().join(format!("layout-{seed}"))).unwrap();
    let image = ImageBuilder::new(seed).layers(&[70_000]).build(&layout);
    testkit::push::Registry::of(upstream)
        .push_image(repo, Some(tag), &image)
        .await
        .unwrap();
    image
}

fn digest(s: &str) -> oci::Digest {
    oci::Digest::parse(s).unwrap()
}

/// Pulls the manifest by tag and every blob, checking bytes against the image.
async fn pull_all(remote: &Remote, repo: &str, tag: &str, image: &Image) {
    let manifest = remote.get_manifest(repo, tag, ACCEPT_ALL).await.unwrap();
    assert_eq!(manifest.digest.to_string(), image.digest());
    assert_eq!(manifest.bytes.as_ref(), image.manifest.read().as_slice());
    for blob in image.blobs() {
        let d = digest(&blob.digest);
        let head = remote.head_blob(repo, &d).await.unwrap();
        assert_eq!(head.size, Some(blob.size));
        let response = remote
            .get_blob(repo, &d, None, Some(blob.size))
            .await
            .unwrap();
        let bytes = response.into_body().collect(u64::MAX).await.unwrap();
        assert_eq!(bytes.as_ref(), blob.read().as_slice());
    }
}

#[tokio::test]
async fn token_auth_fetches_once_per_scope_and_reuses() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("puller", "s3cret")).await;
    let app = image_in(&upstream, "team/app", "v1", "token-app").await;
    let other = image_in(&upstream, "team/other", "v1", "token-other").await;
    let tokens = upstream.token_server().unwrap();
    let before = tokens.issued();

    let client = Client::new(quick());
    let remote = client.remote(endpoint_of(&upstream)).unwrap();
    pull_all(&remote, "team/app", "v1", &app).await;
    pull_all(&remote, "team/app", "v1", &app).await;
    assert_eq!(
        tokens.issued() - before,
        1,
        "one token for repository:team/app:pull"
    );
    pull_all(&remote, "team/other", "v1", &other).await;
    assert_eq!(
        tokens.issued() - before,
        2,
        "a second scope, a second token"
    );
    pull_all(&remote, "team/app", "v1", &app).await;
    assert_eq!(
        tokens.issued() - before,
        2,
        "the first token is still reused"
    );
    let stats = client.token_stats();
    assert_eq!((stats.issued, stats.probes, stats.failed), (2, 2, 0));

    // Another Remote of the same client shares the cache.
    let again = client.remote(endpoint_of(&upstream)).unwrap();
    again
        .head_manifest("team/other", "v1", ACCEPT_ALL)
        .await
        .unwrap();
    assert_eq!(tokens.issued() - before, 2);
}

#[tokio::test]
async fn token_is_refreshed_before_expiry() {
    // expires_in 31 s ⇒ reused for 31 − 30 = 1 s.
    let upstream =
        Upstream::start(UpstreamOptions::default().token_auth_expiring("puller", "pw", 31)).await;
    let app = image_in(&upstream, "team/app", "v1", "expiring").await;
    let tokens = upstream.token_server().unwrap();
    let before = tokens.issued();
    let client = Client::new(quick());
    let remote = client.remote(endpoint_of(&upstream)).unwrap();
    pull_all(&remote, "team/app", "v1", &app).await;
    assert_eq!(tokens.issued() - before, 1);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    pull_all(&remote, "team/app", "v1", &app).await;
    assert_eq!(tokens.issued() - before, 2, "refreshed after expiry − 30 s");
}

#[tokio::test]
async fn concurrent_callers_of_one_scope_share_one_token_fetch() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("puller", "pw")).await;
    let app = image_in(&upstream, "team/app", "v1", "concurrent").await;
    let tokens = upstream.token_server().unwrap();
    let before = tokens.issued();
    let client = Client::new(quick());
    let remote = client.remote(endpoint_of(&upstream)).unwrap();
    let tasks: Vec<_> = (0..24)
        .map(|_| {
            let remote = remote.clone();
            let expected = app.digest().to_owned();
            tokio::spawn(async move {
                let m = remote
                    .get_manifest("team/app", "v1", ACCEPT_ALL)
                    .await
                    .unwrap();
                assert_eq!(m.digest.to_string(), expected);
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        tokens.issued() - before,
        1,
        "24 concurrent misses, one fetch"
    );
    assert_eq!(client.token_stats().probes, 1);
}

#[tokio::test]
async fn wrong_credentials_fail_over_and_never_show_the_password() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("puller", "pw")).await;
    image_in(&upstream, "team/app", "v1", "wrong-creds").await;
    let client = Client::new(quick());
    let remote = client
        .remote(
            Endpoint::from_url(&upstream.url())
                .unwrap()
                .credentials(Credentials::new("puller", "not-the-password-xyzzy")),
        )
        .unwrap();
    let err = remote
        .get_manifest("team/app", "v1", ACCEPT_ALL)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Auth { .. }), "{err}");
    assert!(
        err.retry_elsewhere(),
        "our credentials are wrong: try the next target"
    );
    let shown = format!("{err} {err:?} {remote:?}");
    assert!(!shown.contains("xyzzy"), "{shown}");
}

#[tokio::test]
async fn anonymous_token_is_refused_as_not_our_credentials() {
    // No credentials: the flow fetches an anonymous token, which the test token server refuses.
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("puller", "pw")).await;
    let client = Client::new(quick());
    let remote = client
        .remote(Endpoint::from_url(&upstream.url()).unwrap())
        .unwrap();
    let err = remote.tags("team/app", None, None).await.unwrap_err();
    assert!(matches!(err, Error::Auth { .. }), "{err}");
}

#[tokio::test]
async fn basic_auth_and_anonymous_upstreams() {
    let basic = Upstream::start(UpstreamOptions::default().basic_auth("u", "p")).await;
    let app = image_in(&basic, "team/app", "v1", "basic").await;
    let client = Client::new(quick());
    let remote = client.remote(endpoint_of(&basic)).unwrap();
    pull_all(&remote, "team/app", "v1", &app).await;
    remote.check().await.unwrap();
    assert_eq!(client.token_stats().issued, 0, "Basic needs no token");

    // Without credentials the Basic upstream refuses, and says it was not our credentials.
    let anonymous = client
        .remote(Endpoint::from_url(&basic.url()).unwrap())
        .unwrap();
    let err = anonymous
        .get_manifest("team/app", "v1", ACCEPT_ALL)
        .await
        .unwrap_err();
    match &err {
        Error::Unauthorized {
            credentials_sent, ..
        } => assert!(!credentials_sent),
        other => panic!("{other}"),
    }
    assert!(!err.retry_elsewhere());

    let open = Upstream::start_plain().await;
    let image = image_in(&open, "library/busybox", "latest", "open").await;
    let remote = client.remote(endpoint_of(&open)).unwrap();
    pull_all(&remote, "library/busybox", "latest", &image).await;
    let missing = remote
        .get_manifest("library/busybox", "nope", ACCEPT_ALL)
        .await
        .unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
    assert!(!missing.retry_elsewhere());
    assert!(
        matches!(&missing, Error::Status { code: Some(c), .. } if c == "MANIFEST_UNKNOWN"),
        "{missing:?}"
    );
}

#[tokio::test]
async fn path_prefix_is_prepended_and_scoped() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("u", "p")).await;
    let image = image_in(&upstream, "deckhouse/ee/install", "v1.60.0", "prefix").await;
    let client = Client::new(quick());
    let remote = client
        .remote(endpoint_of(&upstream).path_prefix("/deckhouse/ee/"))
        .unwrap();
    pull_all(&remote, "install", "v1.60.0", &image).await;
    assert_eq!(remote.all_tags("install").await.unwrap(), vec!["v1.60.0"]);
}

#[tokio::test]
async fn tls_from_a_private_ca_and_refusal_with_the_wrong_one() {
    let ca = Certs::new("upstream CA");
    let upstream = Upstream::start(UpstreamOptions::default().tls(&ca).token_auth("u", "p")).await;
    let image = image_in(&upstream, "team/app", "v1", "tls").await;
    let client = Client::new(quick());
    let remote = client.remote(endpoint_of(&upstream)).unwrap();
    assert_eq!(remote.endpoint().scheme, registry_client::Scheme::Https);
    pull_all(&remote, "team/app", "v1", &image).await;

    let wrong = Certs::new("some other CA");
    let remote = client
        .remote(
            Endpoint::from_url(&upstream.url())
                .unwrap()
                .ca_pem(&wrong.ca_pem())
                .credentials(Credentials::new("u", "p")),
        )
        .unwrap();
    let err = remote
        .get_manifest("team/app", "v1", ACCEPT_ALL)
        .await
        .unwrap_err();
    // The token flow's probe is the first request: it fails the handshake.
    assert!(
        matches!(&err, Error::Auth { .. } | Error::Connect { .. }),
        "{err:?}"
    );
    assert!(err.retry_elsewhere());
    let chain = format!("{err:?}");
    assert!(
        chain.contains("UnknownIssuer"),
        "the cause names the certificate problem: {chain}"
    );

    // Plain HTTP to a TLS port is a transport failure, not a hang.
    let plain = client.remote(Endpoint::http(&upstream.host())).unwrap();
    let err = plain
        .raw_request(http::Method::GET, "/v2/", None)
        .send()
        .await;
    match err {
        Ok(r) => assert_eq!(r.status(), http::StatusCode::BAD_REQUEST),
        Err(e) => assert!(e.retry_elsewhere(), "{e}"),
    }
}

#[tokio::test]
async fn manifest_media_types_negotiate_with_distribution() {
    let upstream = Upstream::start_plain().await;
    let layout = Layout::new(&upstream.scratch_dir().join("layout")).unwrap();
    let docker = ImageBuilder::new("docker-format").docker().build(&layout);
    testkit::push::Registry::of(&upstream)
        .push_image("team/docker", Some("v1"), &docker)
        .await
        .unwrap();
    let oci_image = image_in(&upstream, "team/oci", "v1", "oci-format").await;
    let remote = Client::new(quick()).remote(endpoint_of(&upstream)).unwrap();
    let m = remote
        .get_manifest("team/docker", "v1", ACCEPT_ALL)
        .await
        .unwrap();
    assert_eq!(
        m.media_type.as_deref(),
        Some(oci::media_type::DOCKER_MANIFEST)
    );
    let m = remote
        .get_manifest("team/oci", "v1", ACCEPT_ALL)
        .await
        .unwrap();
    assert_eq!(m.media_type.as_deref(), Some(oci::media_type::OCI_MANIFEST));
    assert_eq!(m.digest.to_string(), oci_image.digest());
    // distribution refuses an OCI manifest by tag when Accept does not name OCI.
    let refused = remote
        .get_manifest("team/oci", "v1", &[oci::media_type::DOCKER_MANIFEST])
        .await
        .unwrap_err();
    assert!(refused.is_not_found(), "{refused}");
    // HEAD gives the exact size and digest.
    let head = remote
        .head_manifest("team/oci", oci_image.digest(), ACCEPT_ALL)
        .await
        .unwrap();
    assert_eq!(head.size, Some(oci_image.manifest.size));
    assert_eq!(
        head.digest.map(|d| d.to_string()).as_deref(),
        Some(oci_image.digest())
    );
}

#[tokio::test]
async fn push_helpers_monolithic_chunked_mount_manifest_and_delete() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("pusher", "pw")).await;
    let client = Client::new(quick());
    let remote = client.remote(endpoint_of(&upstream)).unwrap();

    let a = Bytes::from(vec![1u8; 100_000]);
    let da = oci::Digest::sha256(&a);
    remote
        .push_blob("team/a", &da, RequestBody::Bytes(a.clone()))
        .await
        .unwrap();

    let b = Bytes::from((0..250_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>());
    let db = oci::Digest::sha256(&b);
    let upload = remote.start_upload("team/a").await.unwrap();
    let upload = upload.patch(b.slice(..100_000)).await.unwrap();
    let upload = upload.patch(b.slice(100_000..200_000)).await.unwrap();
    assert_eq!(upload.offset(), 200_000);
    upload
        .finish(&db, Some(RequestBody::Bytes(b.slice(200_000..))))
        .await
        .unwrap();

    let c = Bytes::from_static(b"single post");
    let dc = oci::Digest::sha256(&c);
    remote.post_blob("team/a", &dc, c.clone()).await.unwrap();

    for (d, bytes) in [(&da, &a), (&db, &b), (&dc, &c)] {
        let body = remote
            .get_blob("team/a", d, None, None)
            .await
            .unwrap()
            .into_body();
        assert_eq!(&body.collect(u64::MAX).await.unwrap(), bytes);
    }

    match remote.mount_blob("team/b", &db, "team/a").await.unwrap() {
        Mount::Mounted => {}
        Mount::Upload(u) => panic!(
            "docker-registry mounts within one store, got {}",
            u.location()
        ),
    }
    assert_eq!(
        remote.head_blob("team/b", &db).await.unwrap().size,
        Some(250_000)
    );

    // A manifest referencing the blobs, pushed byte for byte.
    let empty_config = Bytes::from_static(b"{}");
    let dcfg = oci::Digest::sha256(&empty_config);
    remote
        .post_blob("team/b", &dcfg, empty_config.clone())
        .await
        .unwrap();
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"{}","config":{{"mediaType":"application/vnd.oci.empty.v1+json","digest":"{dcfg}","size":2}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{db}","size":250000}}]}}"#,
        oci::media_type::OCI_MANIFEST
    );
    let manifest = Bytes::from(manifest);
    let pushed = remote
        .put_manifest(
            "team/b",
            "v1",
            oci::media_type::OCI_MANIFEST,
            manifest.clone(),
        )
        .await
        .unwrap();
    assert_eq!(pushed, oci::Digest::sha256(&manifest));
    let fetched = remote
        .get_manifest("team/b", "v1", ACCEPT_ALL)
        .await
        .unwrap();
    assert_eq!(fetched.bytes, manifest);
    assert_eq!(remote.all_tags("team/b").await.unwrap(), vec!["v1"]);

    remote
        .delete_manifest("team/b", &pushed.to_string())
        .await
        .unwrap();
    assert!(
        remote
            .get_manifest("team/b", "v1", ACCEPT_ALL)
            .await
            .unwrap_err()
            .is_not_found()
    );
    remote.delete_blob("team/a", &dc).await.unwrap();
    assert!(
        remote
            .head_blob("team/a", &dc)
            .await
            .unwrap_err()
            .is_not_found()
    );

    // A wrong digest on the closing PUT is refused by the registry.
    let wrong = remote
        .push_blob(
            "team/a",
            &oci::Digest::sha256(b"other"),
            RequestBody::Bytes(c.clone()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&wrong, Error::Status { code: Some(code), .. } if code == "DIGEST_INVALID"),
        "{wrong:?}"
    );
    assert!(!wrong.retry_elsewhere());
}

#[tokio::test]
async fn range_requests_stream_the_part() {
    let upstream = Upstream::start_plain().await;
    let remote = Client::new(quick()).remote(endpoint_of(&upstream)).unwrap();
    let data = Bytes::from((0..1000u32).map(|i| (i % 256) as u8).collect::<Vec<_>>());
    let d = oci::Digest::sha256(&data);
    remote
        .push_blob("team/r", &d, RequestBody::Bytes(data.clone()))
        .await
        .unwrap();
    let response = remote
        .get_blob("team/r", &d, Some("bytes=10-19"), None)
        .await
        .unwrap();
    assert_eq!(response.status(), http::StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        response.header_str("content-range"),
        Some("bytes 10-19/1000")
    );
    let mut body = response.into_body();
    let mut got = Vec::new();
    while let Some(chunk) = body.next().await {
        got.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(got, &data[10..20]);
}
