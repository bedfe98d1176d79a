//! The publish endpoint: skopeo pushes over mTLS with write credentials; anything less is
//! refused with a message saying what is missing. And the budget.

use testkit::skopeo::{Access, Copy};
use testkit::{Certs, Credentials, ImageBuilder};

use crate::common::{self, NODE, Options, PUSHER, basic, client};
use storage::{Limits, Tls};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_pushes_only_with_a_client_certificate_and_write_credentials() {
    let ca = Certs::new("publish-ca");
    let server = ca.server(&[]);
    let replica = common::start(Options {
        write_tls: Some(Tls {
            cert_pem: server.cert_pem.clone(),
            key_pem: server.key_pem.clone(),
            client_ca_pem: Some(ca.ca_pem()),
            ingress_client_ca: None,
        }),
        ..Options::default()
    })
    .await;
    let scratch = tempfile::tempdir().expect("tempdir");
    let layout = testkit::image::Layout::new(&scratch.path().join("oci")).expect("layout");
    let image = ImageBuilder::new("published")
        .layer(256 << 10)
        .build(&layout);
    layout.tag(&image.manifest, "v1").expect("tag");
    let destination = format!("docker://{}/system/deckhouse/app:v1", replica.write);
    let credentials = Credentials::new(PUSHER.0, PUSHER.1);

    // Certificate-less: the CA is trusted, the right credentials given, still refused.
    let ca_only = scratch.path().join("ca-only");
    std::fs::create_dir_all(&ca_only).expect("dir");
    std::fs::write(ca_only.join("ca.crt"), ca.ca_pem()).expect("ca");
    let no_cert = Access {
        credentials: Some(credentials.clone()),
        cert_dir: Some(ca_only),
    };
    let outcome = Copy::new(&layout.skopeo_ref("v1"), &destination)
        .destination_access(no_cert)
        .run()
        .await;
    assert!(!outcome.success, "a password alone must not push");
    assert!(
        outcome.stderr.contains("certificate required"),
        "the refusal names what is missing: {}",
        outcome.stderr
    );

    // Certificate with wrong credentials: refused.
    let client_cert = ca.client("d8-mirror");
    let wrong = Access::default()
        .with_client_cert(&scratch.path().join("wrong"), &ca.ca_pem(), &client_cert)
        .with_credentials(Some(Credentials::new(PUSHER.0, "leaked-or-guessed")));
    let outcome = Copy::new(&layout.skopeo_ref("v1"), &destination)
        .destination_access(wrong)
        .run()
        .await;
    assert!(!outcome.success, "a certificate alone must not push");
    assert!(
        outcome.stderr.contains("401") || outcome.stderr.to_lowercase().contains("unauthorized"),
        "{}",
        outcome.stderr
    );

    // A certificate from another CA fails the handshake.
    let stranger = Certs::new("someone-else").client("d8-mirror");
    let foreign = Access::default()
        .with_client_cert(&scratch.path().join("foreign"), &ca.ca_pem(), &stranger)
        .with_credentials(Some(credentials.clone()));
    let outcome = Copy::new(&layout.skopeo_ref("v1"), &destination)
        .destination_access(foreign)
        .run()
        .await;
    assert!(
        !outcome.success,
        "a certificate of another CA must not push"
    );

    // Both: accepted, byte-exact.
    let both = Access::default()
        .with_client_cert(&scratch.path().join("both"), &ca.ca_pem(), &client_cert)
        .with_credentials(Some(credentials));
    Copy::new(&layout.skopeo_ref("v1"), &destination)
        .destination_access(both)
        .run()
        .await
        .expect_success("push with certificate and credentials");

    // Pulled back through the read listener by the node account, bit for bit.
    let http = client();
    let manifest = http
        .get(format!(
            "{}/v2/system/deckhouse/app/manifests/v1",
            replica.read_url()
        ))
        .header("authorization", basic(NODE))
        .header("accept", oci::media_type::MANIFEST_ACCEPT)
        .send()
        .await
        .expect("get");
    assert_eq!(manifest.status(), 200);
    assert_eq!(manifest.headers()["docker-content-digest"], image.digest());
    assert_eq!(
        manifest.bytes().await.expect("bytes"),
        image.manifest.read()
    );
    for blob in image.blobs() {
        let d = oci::Digest::parse(&blob.digest).expect("digest");
        assert_eq!(replica.store().blob_size(&d), Some(blob.size));
    }
    let report = replica.store().verify().expect("verify");
    assert!(report.removed.is_empty());
}

#[tokio::test]
async fn chunked_and_monolithic_pushes_and_the_budget() {
    let replica = common::start(Options {
        limits: Limits {
            budget: Some(3 << 20),
            reserve: Some(0),
        },
        ..Options::default()
    })
    .await;
    let http = client();
    let base = format!("http://{}", replica.write);
    let auth = basic(PUSHER);

    // chunked: POST, two PATCHes, closing PUT
    let data = vec![7u8; 2 << 20];
    let digest = common::sha256(&data);
    let start = http
        .post(format!("{base}/v2/system/deckhouse/blobs/uploads/"))
        .header("authorization", &auth)
        .send()
        .await
        .expect("post");
    assert_eq!(start.status(), 202);
    let location = start.headers()["location"]
        .to_str()
        .expect("location")
        .to_owned();
    let patch = http
        .patch(format!("{base}{location}"))
        .header("authorization", &auth)
        .header("content-range", format!("0-{}", (1 << 20) - 1))
        .body(data[..1 << 20].to_vec())
        .send()
        .await
        .expect("patch");
    assert_eq!(patch.status(), 202);
    assert_eq!(
        patch.headers()["range"],
        format!("0-{}", (1 << 20) - 1).as_str()
    );
    let out_of_order = http
        .patch(format!("{base}{location}"))
        .header("authorization", &auth)
        .header("content-range", "5-9")
        .body(vec![0u8; 5])
        .send()
        .await
        .expect("patch");
    assert_eq!(out_of_order.status(), 416);
    let patch = http
        .patch(format!("{base}{location}"))
        .header("authorization", &auth)
        .body(data[1 << 20..].to_vec())
        .send()
        .await
        .expect("patch");
    assert_eq!(patch.status(), 202);
    let put = http
        .put(format!("{base}{location}?digest={digest}"))
        .header("authorization", &auth)
        .send()
        .await
        .expect("put");
    assert_eq!(put.status(), 201, "{:?}", put.text().await);

    // mount of a blob the store has
    let mount = http
        .post(format!(
            "{base}/v2/other/repo/blobs/uploads/?mount={digest}&from=system/deckhouse"
        ))
        .header("authorization", &auth)
        .send()
        .await
        .expect("mount");
    assert_eq!(mount.status(), 201);

    // monolithic with a wrong digest: refused, nothing stored
    let wrong = http
        .post(format!(
            "{base}/v2/system/deckhouse/blobs/uploads/?digest=sha256:{}",
            "1".repeat(64)
        ))
        .header("authorization", &auth)
        .body(vec![1u8; 100])
        .send()
        .await
        .expect("post");
    assert_eq!(wrong.status(), 400);
    assert!(wrong.text().await.expect("text").contains("DIGEST_INVALID"));

    // over the budget: refused with the reason; reads go on
    let big = vec![9u8; 2 << 20];
    let refused = http
        .post(format!(
            "{base}/v2/system/deckhouse/blobs/uploads/?digest={}",
            common::sha256(&big)
        ))
        .header("authorization", &auth)
        .body(big)
        .send()
        .await
        .expect("post");
    assert_eq!(refused.status(), 413);
    let text = refused.text().await.expect("text");
    assert!(
        text.contains("BudgetExhausted") && text.contains("storage.size"),
        "{text}"
    );
    let usage = replica.store().usage().expect("usage");
    assert_eq!(usage.used, 2 << 20, "the refused write left nothing behind");
    let read = http
        .get(format!(
            "{}/v2/system/deckhouse/blobs/{digest}",
            replica.read_url()
        ))
        .header("authorization", basic(NODE))
        .send()
        .await
        .expect("get");
    assert_eq!(read.status(), 200);
    assert_eq!(common::sha256(&read.bytes().await.expect("bytes")), digest);

    // the node account cannot write
    let node = http
        .post(format!("{base}/v2/system/deckhouse/blobs/uploads/"))
        .header("authorization", basic(NODE))
        .send()
        .await
        .expect("post");
    assert_eq!(
        node.status(),
        401,
        "the write listener knows no node account"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_large_upload_still_gets_its_answer() {
    let replica = common::start(Options {
        limits: Limits {
            budget: Some(1 << 20),
            reserve: Some(0),
        },
        ..Options::default()
    })
    .await;
    let http = client();
    let base = format!("http://{}", replica.write);
    let auth = basic(PUSHER);
    let start = http
        .post(format!("{base}/v2/system/deckhouse/blobs/uploads/"))
        .header("authorization", &auth)
        .send()
        .await
        .expect("post");
    assert_eq!(start.status(), 202);
    let location = start.headers()["location"]
        .to_str()
        .expect("location")
        .to_owned();
    // 64 MiB against a 1 MiB budget: refused after the first MiB, while the client still sends.
    let big = vec![5u8; 64 << 20];
    let refused = http
        .patch(format!("{base}{location}"))
        .header("authorization", &auth)
        .header("content-type", "application/octet-stream")
        .body(big)
        .send()
        .await
        .expect("the client receives the answer, not a reset connection");
    assert_eq!(refused.status(), 413);
    let text = refused.text().await.expect("text");
    assert!(text.contains("BudgetExhausted"), "{text}");
}

/// A pusher killed in the middle of a PATCH (`d8 mirror push` under SIGKILL, a dropped link)
/// resumes where the bytes stopped: the session keeps every byte that arrived, says how many,
/// and the closing digest checks them all — nothing is sent twice.
#[tokio::test]
async fn a_chunk_cut_off_mid_body_is_kept_and_the_upload_resumes_at_its_end() {
    use tokio::io::AsyncWriteExt;

    let replica = common::start(Options::default()).await;
    let http = client();
    let base = format!("http://{}", replica.write);
    let auth = basic(PUSHER);
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
    let digest = common::sha256(&data);
    let start = http
        .post(format!("{base}/v2/system/deckhouse/blobs/uploads/"))
        .header("authorization", &auth)
        .send()
        .await
        .expect("post");
    assert_eq!(start.status(), 202);
    let location = start.headers()["location"]
        .to_str()
        .expect("location")
        .to_owned();

    // A PATCH announcing 3 MiB whose sender dies after 1.5 MiB.
    let sent = (3 << 20) / 2;
    let mut socket = tokio::net::TcpStream::connect(replica.write)
        .await
        .expect("connect");
    let head = format!(
        "PATCH {location} HTTP/1.1\r\nhost: {}\r\nauthorization: {auth}\r\n\
         content-type: application/octet-stream\r\ncontent-length: {}\r\n\r\n",
        replica.write,
        data.len()
    );
    socket.write_all(head.as_bytes()).await.expect("head");
    socket.write_all(&data[..sent]).await.expect("part");
    socket.flush().await.expect("flush");
    // Let the replica read what was sent, then die the way a killed process with unread
    // data does: a reset, not a clean close.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    #[allow(deprecated)]
    socket
        .set_linger(Some(std::time::Duration::ZERO))
        .expect("linger");
    drop(socket);

    // The session survives with exactly the bytes that arrived.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let range = loop {
        let status = http
            .get(format!("{base}{location}"))
            .header("authorization", &auth)
            .send()
            .await
            .expect("status");
        assert_eq!(
            status.status(),
            204,
            "the cut session must still exist: {:?}",
            status.text().await
        );
        let range = status.headers()["range"]
            .to_str()
            .expect("range")
            .to_owned();
        if range == format!("0-{}", sent - 1) || std::time::Instant::now() > deadline {
            break range;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(range, format!("0-{}", sent - 1));

    // The pusher sends only the rest, then closes with the digest of the whole blob.
    let rest = http
        .patch(format!("{base}{location}"))
        .header("authorization", &auth)
        .header("content-range", format!("{sent}-{}", data.len() - 1))
        .body(data[sent..].to_vec())
        .send()
        .await
        .expect("patch");
    assert_eq!(rest.status(), 202);
    let put = http
        .put(format!("{base}{location}?digest={digest}"))
        .header("authorization", &auth)
        .send()
        .await
        .expect("put");
    assert_eq!(put.status(), 201, "{:?}", put.text().await);
    let stored = oci::Digest::parse(&digest).expect("digest");
    assert_eq!(replica.store().blob_size(&stored), Some(data.len() as u64));
    assert!(replica.store().verify().expect("verify").removed.is_empty());
}
