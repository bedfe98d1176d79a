//! `d8 registry storage` as a process: a replica with credentials from files pulls a blob
//! through from a docker-registry upstream, answers unauthenticated clients with 401, refuses
//! pushes on the read listener, and keeps what it stored across a restart with the upstream
//! gone.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use testkit::process::{Service, free_port};
use testkit::{ImageBuilder, Upstream, UpstreamOptions};

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// Starts `d8 registry storage` and waits until its read listener answers.
async fn start_replica(
    dir: &Path,
    upstream: Option<&Upstream>,
    log: &str,
) -> (Service, String, String) {
    let read = free_port();
    let write = free_port();
    let metrics = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .env("RUST_LOG", "debug")
        .env("D8_REGISTRY_PUSH_CREDENTIALS", "sync:sync-pw")
        .args(["registry", "storage", "--node-name", "master-0"])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg(format!("--read-address=127.0.0.1:{read}"))
        .arg(format!("--write-address=127.0.0.1:{write}"))
        .arg(format!("--metrics-address=127.0.0.1:{metrics}"))
        .arg("--pull-credentials-file")
        .arg(dir.join("pull"));
    if let Some(upstream) = upstream {
        command
            .arg("--upstream")
            .arg(format!("{}/deckhouse/ee", upstream.url()))
            .arg("--upstream-credentials-file")
            .arg(dir.join("upstream"));
    }
    let mut service = Service::spawn("d8 registry storage", command, dir.join(log)).unwrap();
    let url = format!("http://127.0.0.1:{read}");
    let http = testkit::http_client(None);
    let ping = format!("{url}/v2/");
    testkit::process::wait_until(&mut service, Duration::from_secs(30), || {
        let (http, ping) = (http.clone(), ping.clone());
        async move { http.get(&ping).send().await.is_ok() }
    })
    .await;
    (service, url, format!("http://127.0.0.1:{metrics}/metrics"))
}

#[tokio::test]
async fn the_storage_binary_pulls_through_from_the_upstream_with_credentials_from_files() {
    let mut upstream = Upstream::start(UpstreamOptions::default().token_auth("up", "up-pw")).await;
    let layout = testkit::image::Layout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("storage-cli")
        .uncompressed()
        .layer(3 << 20)
        .build(&layout);
    testkit::push::Registry::of(&upstream)
        .push_image("deckhouse/ee", Some("v1.70.0"), &image)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pull"), "# node account\nnode:node-pw\n").unwrap();
    std::fs::write(dir.path().join("upstream"), "up:up-pw\n").unwrap();

    let (mut replica, url, metrics) =
        start_replica(dir.path(), Some(&upstream), "storage.log").await;
    let http = testkit::http_client(None);
    let layer = &image.layers[0];
    let blob = format!("{url}/v2/system/deckhouse/blobs/{}", layer.digest);

    let anonymous = http.get(&blob).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let wrong = http
        .get(&blob)
        .header("authorization", basic("node", "wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    let response = http
        .get(&blob)
        .header("authorization", basic("node", "node-pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bytes = response.bytes().await.unwrap();
    assert_eq!(bytes.len(), layer.read().len());
    assert_eq!(oci::Digest::sha256(&bytes).to_string(), layer.digest);

    // The stored blob shows in the store's metrics, labelled with the node.
    let text = http
        .get(&metrics)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let used: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(r#"d8_registry_store_used_bytes{node="master-0"} "#))
        .unwrap_or_else(|| panic!("no used_bytes in:\n{text}"))
        .parse()
        .unwrap();
    assert!(used >= 3 << 20, "{used}");
    assert!(
        text.contains(r#"d8_registry_store_writable{node="master-0",reason=""} 1"#),
        "{text}"
    );

    // The push account from the environment may pull too; the read listener takes no pushes.
    let manifest = http
        .get(format!("{url}/v2/system/deckhouse/manifests/v1.70.0"))
        .header("authorization", basic("sync", "sync-pw"))
        .header("accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap();
    assert_eq!(manifest.status(), 200);
    let push = http
        .post(format!("{url}/v2/system/deckhouse/blobs/uploads/"))
        .header("authorization", basic("sync", "sync-pw"))
        .send()
        .await
        .unwrap();
    assert!(push.status().is_client_error(), "{}", push.status());

    // Restarted with the upstream gone, the replica serves what it stored.
    replica.stop();
    upstream.kill();
    let (_replica, url, _) = start_replica(dir.path(), None, "storage-2.log").await;
    let response = http
        .get(format!("{url}/v2/system/deckhouse/blobs/{}", layer.digest))
        .header("authorization", basic("node", "node-pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bytes = response.bytes().await.unwrap();
    assert_eq!(oci::Digest::sha256(&bytes).to_string(), layer.digest);
}

#[test]
fn the_storage_binary_refuses_to_start_without_accounts_and_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_d8"))
        .env_remove("D8_REGISTRY_PULL_CREDENTIALS")
        .env_remove("D8_REGISTRY_PUSH_CREDENTIALS")
        .args(["registry", "storage", "--node-name", "n"])
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--read-address=127.0.0.1:0", "--write-address=127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--pull-credentials-file"), "{stderr}");

    std::fs::write(dir.path().join("bad"), "user-without-password\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_d8"))
        .args(["registry", "storage", "--node-name", "n", "--size", "lots"])
        .arg("--pull-credentials-file")
        .arg(dir.path().join("bad"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("line 1") && !stderr.contains("user-without-password"),
        "{stderr}"
    );
}
