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
        // A small reserve: the default keeps up to 60 GiB free, more than a build machine has.
        .arg("--reserve=64Mi")
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

/// Starts a replica process joined to the cluster through `kubeconfig`, with short timings.
fn start_member(
    dir: &Path,
    node: &str,
    kubeconfig: &Path,
    upstream: &Upstream,
    root: &str,
) -> (Service, String) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("pull"), "node:node-pw\n").unwrap();
    std::fs::write(dir.join("upstream"), "up:up-pw\n").unwrap();
    let read = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .env("RUST_LOG", "info")
        .args(["registry", "storage", "--node-name", node])
        .arg("--reserve=64Mi")
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg(format!("--read-address=127.0.0.1:{read}"))
        .arg(format!("--write-address=127.0.0.1:{}", free_port()))
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--pull-credentials-file")
        .arg(dir.join("pull"))
        .arg("--upstream")
        .arg(format!("{}/deckhouse/ee", upstream.url()))
        .arg("--upstream-credentials-file")
        .arg(dir.join("upstream"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--expected-root", root])
        .args(["--sync-interval=200ms", "--eligibility-interval=300ms"])
        .args([
            "--lease-duration=2s",
            "--renew-deadline=1500ms",
            "--retry-period=200ms",
        ]);
    let service = Service::spawn(
        &format!("d8 registry storage {node}"),
        command,
        dir.join("log"),
    )
    .unwrap();
    (service, format!("http://127.0.0.1:{read}"))
}

/// `(node, role, full, source)` of every replica entry.
fn replicas(kubeconfig: &Path) -> Vec<(String, String, bool, String)> {
    let (ok, out, _) = crate::kubectl(
        kubeconfig,
        &[
            "get",
            "registrystorages.deckhouse.io",
            "registry",
            "-o",
            "json",
        ],
    );
    if !ok {
        return Vec::new();
    }
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    value["status"]["replicas"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|r| {
                    (
                        r["node"].as_str().unwrap_or_default().to_owned(),
                        r["role"].as_str().unwrap_or_default().to_owned(),
                        r["full"].as_bool().unwrap_or(false),
                        r["source"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn two_replica_processes_fill_replicate_and_a_follower_takes_over_after_kill_9() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("up", "up-pw")).await;
    let layout = testkit::image::Layout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("storage-cluster")
        .uncompressed()
        .layers(&[2 << 20, 100_000])
        .build(&layout);
    testkit::push::Registry::of(&upstream)
        .push_image("deckhouse/ee", Some("v1.70.0"), &image)
        .await
        .unwrap();
    let server = crate::Apiserver::start(&[]).await;
    let admin = server.admin();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rstor.yaml"),
        "apiVersion: deckhouse.io/v1alpha1\nkind: RegistryStorage\nmetadata:\n  name: registry\nspec: {}\n",
    )
    .unwrap();
    crate::kubectl_ok(
        &admin,
        &[
            "apply",
            "-f",
            &dir.path().join("rstor.yaml").display().to_string(),
        ],
    );

    let (a, a_url) = start_member(
        &dir.path().join("a"),
        "master-a",
        &admin,
        &upstream,
        image.digest(),
    );
    let (b, b_url) = start_member(
        &dir.path().join("b"),
        "master-b",
        &admin,
        &upstream,
        image.digest(),
    );
    until("both replicas full", Duration::from_secs(30), || {
        let r = replicas(&admin);
        r.len() == 2 && r.iter().all(|(_, _, full, _)| *full)
    })
    .await;
    until("roles reported", Duration::from_secs(10), || {
        let r = replicas(&admin);
        let leader: Vec<_> = r
            .iter()
            .filter(|(_, role, _, _)| role == "Leader")
            .collect();
        leader.len() == 1
            && r.iter()
                .filter(|(_, role, _, _)| role == "Follower")
                .count()
                == 1
    })
    .await;
    let entries = replicas(&admin);
    let (leader, _, _, _) = entries
        .iter()
        .find(|(_, role, _, _)| role == "Leader")
        .unwrap()
        .clone();
    let (follower, _, _, source) = entries
        .iter()
        .find(|(_, role, _, _)| role == "Follower")
        .unwrap()
        .clone();
    assert_eq!(source, leader, "the follower copied from the leader");
    // Whichever started campaigning first may lead; the other copied from it.
    let (mut leader_process, follower_url) = if leader == "master-a" {
        (a, b_url)
    } else {
        (b, a_url)
    };

    // kill -9 the leader: the full follower takes over after the lease expires.
    let pid = leader_process.pid().unwrap();
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    let killed = std::time::Instant::now();
    until("the follower leads", Duration::from_secs(15), || {
        replicas(&admin)
            .iter()
            .any(|(node, role, full, _)| *node == follower && role == "Leader" && *full)
    })
    .await;
    let took = killed.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "took over after {took:?}"
    );
    leader_process.stop();

    // The new leader serves the image from its own disk.
    let http = testkit::http_client(None);
    for blob in image.blobs() {
        let response = http
            .get(format!(
                "{follower_url}/v2/system/deckhouse/blobs/{}",
                blob.digest
            ))
            .header("authorization", basic("node", "node-pw"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let bytes = response.bytes().await.unwrap();
        assert_eq!(oci::Digest::sha256(&bytes).to_string(), blob.digest);
    }
}
