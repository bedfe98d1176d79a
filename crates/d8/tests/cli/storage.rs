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
    upstream_url: &str,
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
        .arg(format!("{upstream_url}/deckhouse/ee"))
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
    let dir = tempfile::tempdir().unwrap();
    let requests = dir.path().join("requests.jsonl");
    let server = crate::Apiserver::start_with(&crate::rbac::apiserver_flags(
        &["registry-storage"],
        &requests,
    ))
    .await;
    let admin = server.admin();
    // The replicas run as the chart's ServiceAccount, with only what its roles grant.
    crate::rbac::apply_chart_rbac(&admin);
    let replica = server.kubeconfig("system-serviceaccount-d8-system-registry-storage");
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
        &replica,
        &upstream.url(),
        image.digest(),
    );
    let (b, b_url) = start_member(
        &dir.path().join("b"),
        "master-b",
        &replica,
        &upstream.url(),
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
    // Their calls, verbs included, are exactly what the chart's roles grant them.
    tokio::time::sleep(Duration::from_millis(500)).await; // the log is written every 200 ms
    crate::rbac::assert_role_matches(
        &requests,
        &crate::rbac::service_account("registry-storage"),
        "registry-storage",
        &[
            (
                "list",
                "deckhouse.io/deckhousereleases",
                "--expected-from-cluster computes the expected set from the releases; this \
                 test names it with --expected-root (storage-kube's gc tests cover the listing)",
            ),
            (
                "list",
                "deckhouse.io/modulereleases",
                "--expected-from-cluster adds deployed modules' images; not given here",
            ),
        ],
    );
}

/// A TCP proxy in front of the upstream that forwards responses at `bytes_per_second` and
/// counts them, so a fill lasts long enough to be interrupted.
struct Throttle {
    address: std::net::SocketAddr,
    forwarded: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Throttle {
    async fn start(upstream: std::net::SocketAddr, bytes_per_second: u64) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let forwarded = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = forwarded.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                        let _ = server_write.shutdown().await;
                    });
                    let slice = (bytes_per_second / 20).max(1) as usize;
                    let mut buf = vec![0u8; slice];
                    loop {
                        let started = tokio::time::Instant::now();
                        let mut filled = 0;
                        while filled < slice {
                            match server_read.read(&mut buf[filled..]).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => filled += n,
                            }
                            if filled > 0 && filled < slice {
                                // Forward what is there rather than wait for a full slice.
                                break;
                            }
                        }
                        if filled == 0 || client_write.write_all(&buf[..filled]).await.is_err() {
                            return;
                        }
                        counter.fetch_add(filled as u64, std::sync::atomic::Ordering::Relaxed);
                        let budget =
                            Duration::from_secs_f64(filled as f64 / bytes_per_second as f64);
                        tokio::time::sleep_until(started + budget).await;
                    }
                });
            }
        });
        Self { address, forwarded }
    }

    fn forwarded(&self) -> u64 {
        self.forwarded.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Re-hashes every committed blob under a replica's data directory; returns how many verified
/// and the names of those that did not.
fn verify_blobs(data: &Path) -> (usize, Vec<String>) {
    let mut verified = 0;
    let mut corrupt = Vec::new();
    let root = data.join("blobs/sha256");
    let Ok(prefixes) = std::fs::read_dir(&root) else {
        return (0, corrupt);
    };
    for prefix in prefixes.flatten() {
        for blob in std::fs::read_dir(prefix.path()).unwrap().flatten() {
            let name = blob.file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(blob.path()).unwrap();
            if oci::Digest::sha256(&bytes).encoded() == name {
                verified += 1;
            } else {
                corrupt.push(name);
            }
        }
    }
    (verified, corrupt)
}

/// Starts `d8 registry agent` for node `local` on `server`, writing containerd's hosts dir.
async fn start_agent(
    server: &crate::Apiserver,
    containerd: &testkit::Containerd,
    state: &Path,
) -> Service {
    std::fs::create_dir_all(state).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .env("RUST_LOG", "info")
        .args([
            "registry",
            "agent",
            "--node-name",
            "local",
            "--interval",
            "1s",
        ])
        .arg(format!("--listen-address=127.0.0.1:{}", free_port()))
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--kubeconfig")
        .arg(server.kubeconfig("system-registry-agent-local"))
        .arg("--containerd-registry-dir")
        .arg(containerd.hosts_dir())
        .arg("--pki-dir")
        .arg(state.join("pki"))
        .arg("--bootstrap-layout")
        .arg(state.join("none.json"))
        .arg("--layout-cache")
        .arg(state.join("cache/layout.json"))
        .arg("--trust-dir")
        .arg(state.join("trust"));
    let mut agent = Service::spawn("d8 registry agent", command, state.join("agent.log")).unwrap();
    let hosts = containerd.hosts_dir().join("_default/hosts.toml");
    testkit::process::wait_until(&mut agent, Duration::from_secs(30), || {
        let hosts = hosts.clone();
        async move { hosts.exists() }
    })
    .await;
    agent
}

/// The RegistryNode of node `local`: the storage replicas only (no upstream to fall back to),
/// `primary` first and the others as its mirrors, with the node account's credentials.
fn storage_node(primary: &str, mirrors: &[&str]) -> String {
    let auth = base64::engine::general_purpose::STANDARD.encode("node:node-pw");
    let secret = base64::engine::general_purpose::STANDARD.encode(&auth);
    let mut yaml = format!(
        "apiVersion: v1
kind: Secret
metadata:
  name: registry-resolved-auth
  namespace: d8-system
data:
  storage: {secret}
---
apiVersion: deckhouse.io/v1alpha1
kind: RegistryNode
metadata:
  name: local
spec:
  cache: true
  backends:
    - name: Storage
      scheme: HTTP
      host: \"{primary}\"
      path: /system/deckhouse
      auth:
        secretRef:
          name: registry-resolved-auth
          key: storage
"
    );
    if !mirrors.is_empty() {
        yaml.push_str("      mirrors:\n");
        for mirror in mirrors {
            yaml.push_str(&format!(
                "        - scheme: HTTP\n          host: \"{mirror}\"\n          path: /system/deckhouse\n          auth:\n            secretRef:\n              name: registry-resolved-auth\n              key: storage\n"
            ));
        }
    }
    yaml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_the_full_one_leads_and_kill_9_mid_fill_loses_no_pull_and_no_blob() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("up", "up-pw")).await;
    let layout = testkit::image::Layout::new(&upstream.scratch_dir().join("images")).unwrap();
    // The expected set: the platform image every replica holds ahead of time.
    let platform = ImageBuilder::new("platform")
        .uncompressed()
        .layers(&[1 << 20, 50_000])
        .build(&layout);
    // An image outside the set, filled on demand: large enough that its fill can be cut.
    let app = ImageBuilder::new("app")
        .uncompressed()
        .layer(24 << 20)
        .build(&layout);
    let push = testkit::push::Registry::of(&upstream);
    push.push_image("deckhouse/ee", Some("v1.70.0"), &platform)
        .await
        .unwrap();
    push.push_image("deckhouse/ee/app", Some("v1"), &app)
        .await
        .unwrap();
    // The replicas reach the upstream through a 6 MiB/s link.
    let upstream_address: std::net::SocketAddr = upstream.host().parse().unwrap();
    let throttle = Throttle::start(upstream_address, 6 << 20).await;
    let slow_upstream = format!("http://{}", throttle.address);

    let server = crate::Apiserver::start(&["local"]).await;
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
    let mut members = Vec::new();
    for node in ["master-a", "master-b", "master-c"] {
        let (service, url) = start_member(
            &dir.path().join(node),
            node,
            &admin,
            &slow_upstream,
            platform.digest(),
        );
        members.push((node.to_owned(), service, url));
    }
    until("three replicas full", Duration::from_secs(60), || {
        let r = replicas(&admin);
        r.len() == 3 && r.iter().all(|(_, _, full, _)| *full)
    })
    .await;
    until("one leader, two followers", Duration::from_secs(15), || {
        let r = replicas(&admin);
        r.iter().filter(|(_, role, _, _)| role == "Leader").count() == 1
            && r.iter()
                .filter(|(_, role, _, _)| role == "Follower")
                .count()
                == 2
    })
    .await;
    let entries = replicas(&admin);
    let leader = entries
        .iter()
        .find(|(_, role, _, _)| role == "Leader")
        .unwrap()
        .0
        .clone();
    for (node, role, _, source) in &entries {
        if role == "Follower" {
            assert_eq!(source, &leader, "{node} copied from the leader");
        }
    }
    let address = |url: &str| url.trim_start_matches("http://").to_owned();
    let leader_index = members.iter().position(|(n, _, _)| *n == leader).unwrap();
    let leader_address = address(&members[leader_index].2);
    let follower_addresses: Vec<String> = members
        .iter()
        .filter(|(n, _, _)| *n != leader)
        .map(|(_, _, url)| address(url))
        .collect();

    // Node `local` pulls through its agent from the storage replicas only.
    let node = dir.path().join("node.yaml");
    let mirrors: Vec<&str> = follower_addresses.iter().map(String::as_str).collect();
    std::fs::write(&node, storage_node(&leader_address, &mirrors)).unwrap();
    crate::kubectl_ok(&admin, &["apply", "-f", &node.display().to_string()]);
    let containerd = testkit::Containerd::start().await;
    let _agent = start_agent(&server, &containerd, &dir.path().join("agent")).await;
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse:v1.70.0")
        .await
        .expect_success("the platform image through the agent from the leader");

    // A pull of the other image makes the leader fill it from the slow upstream; kill -9 the
    // leader in the middle of that fill.
    let before = throttle.forwarded();
    let interrupted = containerd.pull("registry.d8-system.svc:5001/system/deckhouse/app:v1");
    let kill = async {
        until("the leader is mid-fill", Duration::from_secs(30), || {
            throttle.forwarded() > before + (4 << 20)
        })
        .await;
        assert!(
            throttle.forwarded() < before + (20 << 20),
            "the fill must still be running"
        );
        let pid = members[leader_index].1.pid().unwrap();
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        std::time::Instant::now()
    };
    let (_, killed) = tokio::join!(interrupted, kill);

    // A full follower takes over within the lease (2 s) and a few seconds.
    until("a follower leads", Duration::from_secs(10), || {
        replicas(&admin)
            .iter()
            .any(|(node, role, full, _)| *node != leader && role == "Leader" && *full)
    })
    .await;
    let took = killed.elapsed();

    // Pulls through the agent keep working: the followers serve (and fill) what the dead
    // leader no longer can.
    containerd.clear().await;
    let mut outcome = None;
    for _ in 0..3 {
        let pulled = containerd
            .pull("registry.d8-system.svc:5001/system/deckhouse/app:v1")
            .await;
        if pulled.success {
            outcome = Some(pulled);
            break;
        }
    }
    assert!(
        outcome.is_some(),
        "the image pulls through the agent after the leader died"
    );
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse:v1.70.0")
        .await
        .expect_success("the platform image after the leader died");

    // No corrupt blob anywhere, the dead leader's disk included.
    members[leader_index].1.stop();
    let mut total = 0;
    for (node, _, _) in &members {
        let (verified, corrupt) = verify_blobs(&dir.path().join(node).join("data"));
        assert!(corrupt.is_empty(), "{node}: corrupt blobs {corrupt:?}");
        assert!(verified >= 3, "{node}: only {verified} blobs");
        total += verified;
    }
    assert!(total >= 9, "{total}");
    assert!(took < Duration::from_secs(10), "takeover took {took:?}");
}

/// Issue #19, the seed's election rule with an upstream configured: two replica processes start
/// with empty disks behind a slow upstream (16 KiB/s), so one of them leads as the bootstrap
/// stand-in and fills for minutes. A third starts with the whole expected set already on its
/// disk (pulled earlier through it as a standalone cache): within one lease period (2 s) of
/// reporting full it holds the lease — the non-full leader yielded though it could still fill —
/// and the replica that never led copies from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_replica_takes_the_lease_from_a_non_full_leader_within_one_lease_period() {
    const LEASE: Duration = Duration::from_secs(2);
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("up", "up-pw")).await;
    let layout = testkit::image::Layout::new(&upstream.scratch_dir().join("images")).unwrap();
    let platform = ImageBuilder::new("platform")
        .uncompressed()
        .layers(&[2 << 20, 50_000])
        .build(&layout);
    testkit::push::Registry::of(&upstream)
        .push_image("deckhouse/ee", Some("v1.70.0"), &platform)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();

    // master-a's disk gets the set through the replica running alone, as a pull-through cache.
    let a_dir = dir.path().join("master-a");
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::write(a_dir.join("pull"), "node:node-pw\n").unwrap();
    std::fs::write(a_dir.join("upstream"), "up:up-pw\n").unwrap();
    let (mut standalone, url, _) = start_replica(&a_dir, Some(&upstream), "prefill.log").await;
    let http = testkit::http_client(None);
    let manifest = http
        .get(format!(
            "{url}/v2/system/deckhouse/manifests/{}",
            platform.digest()
        ))
        .header("authorization", basic("node", "node-pw"))
        .header("accept", platform.manifest.media_type.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(manifest.status(), 200);
    for blob in platform.blobs() {
        let response = http
            .get(format!("{url}/v2/system/deckhouse/blobs/{}", blob.digest))
            .header("authorization", basic("node", "node-pw"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let bytes = response.bytes().await.unwrap();
        assert_eq!(oci::Digest::sha256(&bytes).to_string(), blob.digest);
    }
    standalone.stop();

    // The cluster: the others reach the upstream through a 16 KiB/s link, so a fill of the
    // 2 MiB layer lasts two minutes.
    let upstream_address: std::net::SocketAddr = upstream.host().parse().unwrap();
    let throttle = Throttle::start(upstream_address, 16 << 10).await;
    let slow_upstream = format!("http://{}", throttle.address);
    let server = crate::Apiserver::start(&[]).await;
    let admin = server.admin();
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
    let mut members = Vec::new();
    for node in ["master-b", "master-c"] {
        let (service, _) = start_member(
            &dir.path().join(node),
            node,
            &admin,
            &slow_upstream,
            platform.digest(),
        );
        members.push(service);
    }
    // Nobody is full: one of them leads as the stand-in and fills from the upstream.
    until("a non-full leader", Duration::from_secs(20), || {
        let r = replicas(&admin);
        r.len() == 2
            && r.iter()
                .filter(|(_, role, full, _)| role == "Leader" && !*full)
                .count()
                == 1
    })
    .await;
    let stand_in = replicas(&admin)
        .into_iter()
        .find(|(_, role, _, _)| role == "Leader")
        .unwrap()
        .0;
    let other = if stand_in == "master-b" {
        "master-c"
    } else {
        "master-b"
    };
    until("the stand-in is filling", Duration::from_secs(20), || {
        throttle.forwarded() > 0
    })
    .await;

    // master-a joins with the set on its disk.
    let (a, _) = start_member(
        &a_dir,
        "master-a",
        &admin,
        &slow_upstream,
        platform.digest(),
    );
    members.push(a);
    until("master-a reports full", Duration::from_secs(30), || {
        replicas(&admin)
            .iter()
            .any(|(node, _, full, _)| node == "master-a" && *full)
    })
    .await;
    let reported_full = std::time::Instant::now();
    until("master-a leads", LEASE * 3, || {
        replicas(&admin)
            .iter()
            .any(|(node, role, _, _)| node == "master-a" && role == "Leader")
    })
    .await;
    let took = reported_full.elapsed();
    assert!(
        took < LEASE,
        "master-a took the lease {took:?} after reporting full, more than one lease period"
    );
    until("the stand-in follows, still not full", LEASE, || {
        replicas(&admin)
            .iter()
            .any(|(node, role, full, _)| *node == stand_in && role == "Follower" && !*full)
    })
    .await;

    // The replica that never led copies from the new leader, not from the upstream.
    until(
        "the other follower full from master-a",
        Duration::from_secs(30),
        || {
            replicas(&admin).iter().any(|(node, role, full, source)| {
                node == other && role == "Follower" && *full && source == "master-a"
            })
        },
    )
    .await;
    assert!(
        throttle.forwarded() < 2 << 20,
        "the upstream served a whole fill: {}",
        throttle.forwarded()
    );
    for member in &mut members {
        member.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn air_gap_push_over_mtls_then_containerd_pulls_through_the_agent_and_the_budget_refuses() {
    use testkit::Credentials;
    use testkit::skopeo::{Access, Copy};

    // No upstream at all: the replica is the authoritative store, its write listener the
    // publish endpoint (client certificate from the publish CA *and* write credentials).
    let ca = testkit::Certs::new("publish-ca");
    let server_cert = ca.server(&[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pull"), "node:node-pw\n").unwrap();
    for (name, text) in [
        ("tls.crt", server_cert.cert_pem.clone()),
        ("tls.key", server_cert.key_pem.clone()),
        ("client-ca.crt", ca.ca_pem()),
        ("token.key", "0123456789abcdef0123456789abcdef".to_owned()),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let read = free_port();
    let write = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .env("RUST_LOG", "info")
        .env("D8_REGISTRY_PUSH_CREDENTIALS", "mirror:mirror-pw")
        .args(["registry", "storage", "--node-name", "master-0"])
        .args(["--reserve=0", "--size=6Mi"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg(format!("--read-address=127.0.0.1:{read}"))
        .arg(format!("--write-address=127.0.0.1:{write}"))
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--pull-credentials-file")
        .arg(dir.path().join("pull"))
        .arg("--tls-cert")
        .arg(dir.path().join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.path().join("tls.key"))
        .arg("--client-ca")
        .arg(dir.path().join("client-ca.crt"))
        // The node account may also trade its password for a token.
        .arg("--token-key-file")
        .arg(dir.path().join("token.key"));
    let mut replica = Service::spawn(
        "d8 registry storage",
        command,
        dir.path().join("storage.log"),
    )
    .unwrap();
    let http = testkit::http_client(Some(&ca.ca_pem()));
    let ping = format!("https://127.0.0.1:{read}/v2/");
    testkit::process::wait_until(&mut replica, Duration::from_secs(30), || {
        let (http, ping) = (http.clone(), ping.clone());
        async move { http.get(&ping).send().await.is_ok() }
    })
    .await;

    let challenge = http
        .get(format!(
            "https://127.0.0.1:{read}/v2/system/deckhouse/app/manifests/v1"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(challenge.status(), 401);
    assert_eq!(
        challenge.headers()["www-authenticate"],
        format!(
            "Bearer realm=\"https://127.0.0.1:{read}/auth/token\",service=\"Deckhouse registry\",scope=\"repository:system/deckhouse/app:pull\""
        )
    );

    let scratch = dir.path().join("bundle");
    let layout = testkit::image::Layout::new(&scratch.join("oci")).unwrap();
    let image = ImageBuilder::new("air-gapped")
        .layer(1 << 20)
        .build(&layout);
    layout.tag(&image.manifest, "v1").unwrap();
    let destination = format!("docker://127.0.0.1:{write}/system/deckhouse/app:v1");
    let credentials = Credentials::new("mirror", "mirror-pw");

    // The right password without a certificate: refused, and the operator is told why.
    let ca_only = scratch.join("ca-only");
    std::fs::create_dir_all(&ca_only).unwrap();
    std::fs::write(ca_only.join("ca.crt"), ca.ca_pem()).unwrap();
    let outcome = Copy::new(&layout.skopeo_ref("v1"), &destination)
        .destination_access(Access {
            credentials: Some(credentials.clone()),
            cert_dir: Some(ca_only),
        })
        .run()
        .await;
    assert!(!outcome.success, "a password alone must not push");
    assert!(
        outcome.stderr.contains("certificate required"),
        "{}",
        outcome.stderr
    );

    // The certificate with wrong credentials: refused as unauthorized.
    let client_cert = ca.client("d8-mirror");
    let outcome = Copy::new(&layout.skopeo_ref("v1"), &destination)
        .destination_access(
            Access::default()
                .with_client_cert(&scratch.join("wrong"), &ca.ca_pem(), &client_cert)
                .with_credentials(Some(Credentials::new("mirror", "guessed"))),
        )
        .run()
        .await;
    assert!(!outcome.success, "a certificate alone must not push");
    assert!(
        outcome.stderr.to_lowercase().contains("unauthorized")
            || outcome.stderr.contains("invalid credentials"),
        "{}",
        outcome.stderr
    );

    // Both: pushed.
    let both = Access::default()
        .with_client_cert(&scratch.join("both"), &ca.ca_pem(), &client_cert)
        .with_credentials(Some(credentials.clone()));
    Copy::new(&layout.skopeo_ref("v1"), &destination)
        .destination_access(both.clone())
        .run()
        .await
        .expect_success("push with certificate and credentials");

    // containerd pulls it through the agent, from the replica alone (HTTPS, its CA).
    let server = crate::Apiserver::start(&["local"]).await;
    let admin = server.admin();
    let node = dir.path().join("node.yaml");
    let mut yaml =
        storage_node(&format!("127.0.0.1:{read}"), &[]).replace("scheme: HTTP", "scheme: HTTPS");
    let ca_lines: String = ca
        .ca_pem()
        .lines()
        .map(|l| format!("        {l}\n"))
        .collect();
    yaml.push_str(&format!("      ca: |\n{ca_lines}"));
    std::fs::write(&node, yaml).unwrap();
    crate::kubectl_ok(&admin, &["apply", "-f", &node.display().to_string()]);
    let containerd = testkit::Containerd::start().await;
    let _agent = start_agent(&server, &containerd, &dir.path().join("agent")).await;
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/app:v1")
        .await
        .expect_success("the pushed image through the agent, no upstream anywhere");
    // A token from the endpoint the challenge names opens the same manifest.
    let token: serde_json::Value = http
        .get(format!(
            "https://127.0.0.1:{read}/auth/token?service=Deckhouse+registry&scope=repository:system/deckhouse/app:pull"
        ))
        .header("authorization", basic("node", "node-pw"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let manifest = http
        .get(format!(
            "https://127.0.0.1:{read}/v2/system/deckhouse/app/manifests/v1"
        ))
        .header(
            "authorization",
            format!("Bearer {}", token["token"].as_str().unwrap()),
        )
        .header("accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap();
    assert_eq!(manifest.status(), 200);
    assert_eq!(manifest.headers()["docker-content-digest"], image.digest());
    let content = containerd.content().await;
    for blob in image.blobs() {
        assert!(content.contains(&blob.digest), "{} not pulled", blob.digest);
    }

    // Disk: a bigger image does not fit the 6 MiB budget; the push is refused with the reason,
    // and reads still work.
    let big = ImageBuilder::new("too-big").layer(8 << 20).build(&layout);
    layout.tag(&big.manifest, "v2").unwrap();
    let outcome = Copy::new(
        &layout.skopeo_ref("v2"),
        &format!("docker://127.0.0.1:{write}/system/deckhouse/app:v2"),
    )
    .destination_access(both)
    .run()
    .await;
    assert!(!outcome.success, "the budget must refuse the push");
    assert!(
        outcome.stderr.contains("BudgetExhausted"),
        "the refusal names the limit: {}",
        outcome.stderr
    );
    containerd.clear().await;
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/app:v1")
        .await
        .expect_success("reads still work with the budget exhausted");
    let (verified, corrupt) = verify_blobs(&dir.path().join("data"));
    assert!(
        corrupt.is_empty() && verified >= 2,
        "{verified} {corrupt:?}"
    );
}
