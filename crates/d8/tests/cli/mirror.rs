//! `d8 mirror pull` and `d8 mirror push` as an operator runs them: the push is SIGKILLed
//! half-way and run again; it completes without sending any blob twice (counted by a proxy of
//! our own in front of the registry and in the registry's access log).

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use testkit::image::Layout;
use testkit::push::Registry;
use testkit::{ImageBuilder, Upstream, UpstreamOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const D8: &str = env!("CARGO_BIN_EXE_d8");
const LAYER: u64 = 4 << 20;
const CHUNK: u64 = 1 << 20;

/// A TCP proxy to `upstream` counting the bytes clients send.
async fn counting_proxy(upstream: String) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let Ok(mut server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut cr, mut cw) = client.split();
                let (mut sr, mut sw) = server.split();
                let up = async {
                    let mut buf = vec![0u8; 64 << 10];
                    loop {
                        let n = match cr.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        counter.fetch_add(n as u64, Ordering::Relaxed);
                        if sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = sw.shutdown().await;
                };
                let down = async {
                    let _ = tokio::io::copy(&mut sr, &mut cw).await;
                    let _ = cw.shutdown().await;
                };
                tokio::join!(up, down);
            });
        }
    });
    (address, sent)
}

fn summary(stdout: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "summary")
        .unwrap_or_else(|| panic!("no summary line in:\n{stdout}"))
}

/// Completed blob uploads per digest in a docker-registry access log (closing PUTs and
/// monolithic POSTs answered 201).
fn uploads_per_digest(log: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for line in log
        .lines()
        .filter(|l| l.contains("\" 201 ") && l.contains("/blobs/uploads/"))
    {
        let line = line.replace("%3A", ":");
        if let Some(at) = line.find("digest=sha256:") {
            let digest: String = line[at + 7..].chars().take(71).collect();
            *out.entry(digest).or_default() += 1;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_killed_half_way_completes_on_rerun_without_sending_a_blob_twice() {
    // The source: one release whose image set is four images of 4 MiB layers.
    let source = Upstream::start(UpstreamOptions::default()).await;
    let scratch = tempfile::tempdir().unwrap();
    let images = Layout::new(&scratch.path().join("images")).unwrap();
    let registry = Registry::of(&source);
    let mut digests = BTreeMap::new();
    for i in 0..4 {
        let image = ImageBuilder::new(&format!("component-{i}"))
            .uncompressed()
            .layers(&[LAYER, LAYER / 2])
            .build(&images);
        registry
            .push_image("deckhouse/ee", None, &image)
            .await
            .unwrap();
        digests.insert(format!("c{i}"), image.digest().to_owned());
    }
    let list = serde_json::json!({ "common": digests }).to_string();
    let root = ImageBuilder::new("deckhouse")
        .files(&[("deckhouse/modules/images_digests.json", list.as_bytes())])
        .build(&images);
    registry
        .push_image("deckhouse/ee", Some("v1.0.0"), &root)
        .await
        .unwrap();
    let channel = ImageBuilder::new("rc")
        .files(&[("version.json", br#"{"version":"v1.0.0"}"#)])
        .build(&images);
    registry
        .push_image("deckhouse/ee/release-channel", Some("v1.0.0"), &channel)
        .await
        .unwrap();

    let bundle = scratch.path().join("bundle");
    let pull = tokio::process::Command::new(D8)
        .args(["mirror", "pull"])
        .arg(&bundle)
        .args(["--source", &format!("{}/deckhouse/ee", source.host())])
        .args([
            "--insecure",
            "--deckhouse-tag",
            "v1.0.0",
            "--no-modules",
            "--json",
        ])
        .env_remove("SSL_CERT_FILE")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&pull.stdout);
    assert!(
        pull.status.success(),
        "pull failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&pull.stderr)
    );
    let pulled = summary(&stdout);
    let blob_bytes = pulled["bytes"].as_u64().unwrap();
    assert!(blob_bytes > 4 * LAYER, "{pulled}");

    // The target behind our counting proxy.
    let target = Upstream::start(UpstreamOptions::default()).await;
    let (proxy, received) = counting_proxy(target.host()).await;
    let push = |extra: &[&str]| {
        let mut command = tokio::process::Command::new(D8);
        command
            .args(["mirror", "push"])
            .arg(&bundle)
            .arg(format!("{proxy}/deckhouse"))
            .args(["--insecure", "--json", "--parallel", "2"])
            .args(["--upload-chunk-size", &format!("{CHUNK}")])
            .args(extra)
            .env_remove("SSL_CERT_FILE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    };
    let mut first = push(&[]).spawn().unwrap();
    let half = blob_bytes * 45 / 100;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while received.load(Ordering::Relaxed) < half {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the push never got half-way"
        );
        if let Ok(Some(status)) = first.try_wait() {
            panic!("the push ended before half-way: {status}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    first.kill().await.unwrap(); // SIGKILL
    let at_kill = received.load(Ordering::Relaxed);
    assert!(
        at_kill < blob_bytes,
        "killed before the end ({at_kill} of {blob_bytes})"
    );

    let second = push(&[]).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(
        second.status.success(),
        "re-run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let rerun = summary(&stdout);
    let total = received.load(Ordering::Relaxed);

    // Every image is in the target.
    let remote = registry_client::Client::default()
        .remote(registry_client::Endpoint::http(&target.host()).path_prefix("deckhouse"))
        .unwrap();
    for digest in digests.values() {
        remote
            .head_manifest("", digest, &["application/vnd.oci.image.manifest.v1+json"])
            .await
            .unwrap_or_else(|e| panic!("{digest} in the target: {e}"));
    }
    let tagged = remote
        .head_manifest(
            "",
            "v1.0.0",
            &["application/vnd.oci.image.manifest.v1+json"],
        )
        .await
        .unwrap();
    assert_eq!(tagged.digest.unwrap().to_string(), root.digest());

    // No blob completed twice, and the bytes sent over both runs are the bundle's blobs plus
    // at most what was in flight at the kill: docker-registry signs each upload offset
    // (`_state`), so a session whose last chunk landed after our journal entry cannot be resumed
    // and that blob starts again — at most one partial blob per parallel upload.
    let uploads = uploads_per_digest(&target.log());
    assert!(!uploads.is_empty(), "{}", target.log());
    for (digest, count) in &uploads {
        assert_eq!(*count, 1, "blob {digest} was uploaded {count} times");
    }
    let slack = 2 * LAYER + (1 << 20);
    assert!(
        total <= blob_bytes + slack,
        "sent {total} bytes over both runs for {blob_bytes} bytes of blobs (at the kill: {at_kill}); rerun: {rerun}"
    );
    assert!(
        rerun["skipped"].as_u64().unwrap() >= 1,
        "the re-run skips what the first run completed: {rerun}"
    );
    assert!(
        total - at_kill < blob_bytes,
        "the re-run sent less than the whole bundle: {rerun}"
    );
    eprintln!(
        "bundle blobs {blob_bytes} B; sent {at_kill} B before SIGKILL, {total} B in all ({:.3}x); rerun {rerun}",
        total as f64 / blob_bytes as f64
    );
}

#[tokio::test]
async fn failures_exit_non_zero_with_a_message() {
    let empty = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(D8)
        .args(["mirror", "push"])
        .arg(empty.path())
        .args(["127.0.0.1:1/deckhouse", "--insecure"])
        .env_remove("SSL_CERT_FILE")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is this a bundle written by `d8 mirror pull`"),
        "{stderr}"
    );

    let out = tokio::process::Command::new(D8)
        .args(["mirror", "pull"])
        .arg(empty.path().join("b"))
        .args([
            "--source",
            "127.0.0.1:1/deckhouse/ee",
            "--insecure",
            "--include-platform",
            ">=x",
        ])
        .env_remove("SSL_CERT_FILE")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid version constraint"), "{stderr}");
}
