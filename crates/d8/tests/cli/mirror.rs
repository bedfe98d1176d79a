//! `d8 mirror pull` and `d8 mirror push` as an operator runs them, into a `d8 registry storage`
//! process's publish endpoint (TLS, client certificate, write credentials) joined to
//! `d8 apiserver`: pushes without a certificate or with wrong credentials are refused with
//! messages naming the flags to fix; a push SIGKILLed half-way completes on re-run without
//! sending any blob twice (bytes counted by a proxy in front of the endpoint); the replica then
//! reports itself full for the release in `RegistryStorage.status.replicas[]`, and containerd
//! pulls every image of the bundle through a `d8 registry agent` process that knows only the
//! replica.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use registry_plan::{Backend, BackendName, Layout, Scheme};
use testkit::image::Layout as ImageLayout;
use testkit::process::{Service, free_port};
use testkit::push::Registry;
use testkit::{Certs, Containerd, ImageBuilder, Upstream, UpstreamOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{Apiserver, kubectl, kubectl_ok};

const D8: &str = env!("CARGO_BIN_EXE_d8");
const COMPONENTS: usize = 8;
const LAYER: u64 = 2 << 20;
const CHUNK: u64 = 512 << 10;
const PUSHER: (&str, &str) = ("d8-mirror", "write-pw");
const NODE: (&str, &str) = ("node", "node-pw");
const AGENT_HOST: &str = "registry.d8-system.svc:5001";

/// A TCP proxy to `upstream` counting the bytes clients send (TLS records included).
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

/// A `d8 registry storage` process with no upstream (air gap): both listeners speak TLS, the
/// write listener (the publish endpoint) requires a client certificate of the CA.
struct Replica {
    service: Service,
    read: String,
    write: String,
}

fn start_replica(dir: &Path, pki: &Pki, kubeconfig: &Path, roots: &BTreeSet<String>) -> Replica {
    std::fs::write(dir.join("pull"), format!("{}:{}\n", NODE.0, NODE.1)).unwrap();
    std::fs::write(dir.join("push"), format!("{}:{}\n", PUSHER.0, PUSHER.1)).unwrap();
    let read = format!("127.0.0.1:{}", free_port());
    let write = format!("127.0.0.1:{}", free_port());
    let mut command = Command::new(D8);
    command
        .env("RUST_LOG", "info")
        .env_remove("D8_REGISTRY_PULL_CREDENTIALS")
        .env_remove("D8_REGISTRY_PUSH_CREDENTIALS")
        .args(["registry", "storage", "--node-name", "master-0"])
        // A small reserve: the default keeps up to 60 GiB free, more than a build machine has.
        .arg("--reserve=64Mi")
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg(format!("--read-address={read}"))
        .arg(format!("--write-address={write}"))
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--tls-cert")
        .arg(&pki.server_cert)
        .arg("--tls-key")
        .arg(&pki.server_key)
        .arg("--client-ca")
        .arg(&pki.ca)
        .arg("--pull-credentials-file")
        .arg(dir.join("pull"))
        .arg("--push-credentials-file")
        .arg(dir.join("push"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--sync-interval=200ms", "--eligibility-interval=300ms"])
        .args([
            "--lease-duration=2s",
            "--renew-deadline=1500ms",
            "--retry-period=200ms",
        ]);
    for root in roots {
        command.args(["--expected-root", root]);
    }
    let service = Service::spawn("d8 registry storage", command, dir.join("storage.log")).unwrap();
    Replica {
        service,
        read,
        write,
    }
}

/// The CA (trusted by every client, and the publish endpoint's client CA), the replica's
/// serving certificate and the operator's client certificate, as files.
struct Pki {
    ca: PathBuf,
    ca_pem: String,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn pki(dir: &Path) -> Pki {
    let certs = Certs::new("registry-ca");
    let ca = dir.join("ca.crt");
    certs.write_ca(&ca).unwrap();
    let server = certs.server(&[]).write(dir, "server").unwrap();
    let client = certs.client("d8-mirror").write(dir, "client").unwrap();
    Pki {
        ca,
        ca_pem: certs.ca_pem(),
        server_cert: server.cert,
        server_key: server.key,
        client_cert: client.cert,
        client_key: client.key,
    }
}

/// This replica's `(full, verifiedDigests, declaredDigests)` in `RegistryStorage.status`.
fn fullness(kubeconfig: &Path) -> Option<(bool, i64, i64)> {
    let (ok, out, _) = kubectl(
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
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(&out).ok()?;
    let entry = value["status"]["replicas"]
        .as_array()?
        .iter()
        .find(|r| r["node"] == "master-0")?
        .clone();
    Some((
        entry["full"].as_bool().unwrap_or(false),
        entry["verifiedDigests"].as_i64().unwrap_or(0),
        entry["declaredDigests"].as_i64().unwrap_or(0),
    ))
}

async fn until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_into_the_publish_endpoint_killed_half_way_completes_fills_the_replica_and_serves_containerd()
 {
    // The source: one release whose image set is eight images of 2 MiB + 1 MiB layers.
    let source = Upstream::start(UpstreamOptions::default()).await;
    let scratch = tempfile::tempdir().unwrap();
    let images = ImageLayout::new(&scratch.path().join("images")).unwrap();
    let registry = Registry::of(&source);
    let mut digests = std::collections::BTreeMap::new();
    let mut roots = BTreeSet::new();
    for i in 0..COMPONENTS {
        let image = ImageBuilder::new(&format!("component-{i}"))
            .uncompressed()
            .layers(&[LAYER, LAYER / 2])
            .build(&images);
        registry
            .push_image("deckhouse/ee", None, &image)
            .await
            .unwrap();
        digests.insert(format!("c{i}"), image.digest().to_owned());
        roots.insert(image.digest().to_owned());
        roots.extend(image.blobs().map(|b| b.digest.clone()));
    }
    let list = serde_json::json!({ "common": digests }).to_string();
    let root = ImageBuilder::new("deckhouse")
        .files(&[("deckhouse/modules/images_digests.json", list.as_bytes())])
        .build(&images);
    registry
        .push_image("deckhouse/ee", Some("v1.0.0"), &root)
        .await
        .unwrap();
    roots.insert(root.digest().to_owned());
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
    let blob_bytes = summary(&stdout)["bytes"].as_u64().unwrap();
    assert!(blob_bytes > COMPONENTS as u64 * LAYER, "{stdout}");

    // The cluster: d8 apiserver, RegistryStorage `registry`, one replica expecting the release.
    let server = Apiserver::start(&[]).await;
    let admin = server.admin();
    let dir = tempfile::tempdir().unwrap();
    let rstor = dir.path().join("rstor.yaml");
    std::fs::write(
        &rstor,
        "apiVersion: deckhouse.io/v1alpha1\nkind: RegistryStorage\nmetadata:\n  name: registry\nspec: {}\n",
    )
    .unwrap();
    kubectl_ok(&admin, &["apply", "-f", &rstor.display().to_string()]);
    let pki = pki(dir.path());
    let mut replica = start_replica(dir.path(), &pki, &admin, &roots);
    let declared = roots.len() as i64;
    let write = replica.write.clone();
    testkit::process::wait_until(&mut replica.service, Duration::from_secs(30), || {
        let write = write.clone();
        async move { TcpStream::connect(&write).await.is_ok() }
    })
    .await;
    until(
        "the replica reports the release missing",
        Duration::from_secs(30),
        || fullness(&admin) == Some((false, 0, declared)),
    )
    .await;

    let push = |target: &str, extra: &[&str]| {
        let mut command = tokio::process::Command::new(D8);
        command
            .args(["mirror", "push"])
            .arg(&bundle)
            .arg(format!("{target}/system/deckhouse"))
            .arg("--tls-ca-file")
            .arg(&pki.ca)
            .args(["--json", "--parallel", "2"])
            .args(["--upload-chunk-size", &format!("{CHUNK}")])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    };
    let cert = pki.client_cert.display().to_string();
    let key = pki.client_key.display().to_string();
    let with_cert = ["--tls-cert", &cert, "--tls-key", &key];

    // Refused without a client certificate, then with one but a wrong password: the
    // messages name what to fix, and nothing reaches the store.
    let out = push(&replica.write, &["-u", PUSHER.0, "-p", PUSHER.1])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("requires a client certificate")
            && stderr.contains("--tls-cert")
            && stderr.contains("--tls-key"),
        "{stderr}"
    );
    let mut wrong = with_cert.to_vec();
    wrong.extend(["-u", PUSHER.0, "-p", "guessed"]);
    let out = push(&replica.write, &wrong).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("refused the credentials")
            && stderr.contains("--registry-login")
            && stderr.contains("--registry-password"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("guessed") && !stderr.contains(PUSHER.1),
        "no password in messages: {stderr}"
    );
    assert_eq!(fullness(&admin), Some((false, 0, declared)));

    // With certificate and write credentials, through a counting proxy; SIGKILL half-way.
    let (proxy, received) = counting_proxy(replica.write.clone()).await;
    let mut good = with_cert.to_vec();
    good.extend(["-u", PUSHER.0, "-p", PUSHER.1]);
    let mut first = push(&proxy, &good).spawn().unwrap();
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
    assert!(
        fullness(&admin).is_some_and(|(full, _, _)| !full),
        "not full after the kill"
    );

    let second = push(&proxy, &good).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(
        second.status.success(),
        "re-run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let rerun = summary(&stdout);
    let total = received.load(Ordering::Relaxed);
    assert!(
        rerun["skipped"].as_u64().unwrap() >= 1,
        "the re-run skips what the first run completed: {rerun}"
    );
    // Both runs together: the bundle's blobs once, plus manifests, HTTP and TLS overhead, plus
    // at most a chunk still in flight at the kill. The replica keeps every byte of a cut PATCH
    // (also when hyper drops the request with the dead connection) and the re-run continues each
    // journaled session at the offset the replica reports, so nothing that arrived is sent
    // again; measured 1.004x the blobs in four runs out of four. Restarting an interrupted blob
    // (what the replica did before) overshoots this.
    let slack = CHUNK + (256 << 10);
    assert!(
        total <= blob_bytes + slack,
        "sent {total} bytes over both runs for {blob_bytes} bytes of blobs (at the kill: {at_kill}); rerun: {rerun}"
    );
    eprintln!(
        "bundle blobs {blob_bytes} B; sent {at_kill} B before SIGKILL, {total} B in all ({:.3}x); rerun {rerun}",
        total as f64 / blob_bytes as f64
    );

    // The replica reports itself full for the release.
    until(
        "the replica reports itself full",
        Duration::from_secs(30),
        || fullness(&admin) == Some((true, declared, declared)),
    )
    .await;

    // containerd pulls every image of the bundle through an agent that knows only the replica.
    let containerd = Containerd::start().await;
    let state = tempfile::tempdir().unwrap();
    let layout = Layout {
        cache: true,
        backends: vec![Backend {
            name: BackendName::Storage,
            endpoint: registry_plan::Endpoint {
                scheme: Scheme::Https,
                host: replica.read.clone(),
                path: "/system/deckhouse".into(),
                ca: Some(pki.ca_pem.clone()),
                auth: Some(registry_plan::Credentials {
                    username: NODE.0.into(),
                    password: NODE.1.into(),
                }),
            },
            mirrors: vec![],
        }],
        additional_routes: vec![],
    };
    let bootstrap = state.path().join("bootstrap-layout.json");
    std::fs::write(&bootstrap, serde_json::to_vec(&layout).unwrap()).unwrap();
    let mut command = Command::new(D8);
    command
        .env("RUST_LOG", "info")
        .args(["registry", "agent", "--node-name", "local"])
        .arg(format!("--listen-address=127.0.0.1:{}", free_port()))
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--kubeconfig")
        .arg(state.path().join("no-kubeconfig"))
        .arg("--containerd-registry-dir")
        .arg(containerd.hosts_dir())
        .arg("--pki-dir")
        .arg(state.path().join("pki"))
        .arg("--bootstrap-layout")
        .arg(&bootstrap)
        .arg("--layout-cache")
        .arg(state.path().join("cache/layout.json"))
        .arg("--trust-dir")
        .arg(state.path().join("trust"));
    let mut agent =
        Service::spawn("d8 registry agent", command, state.path().join("agent.log")).unwrap();
    let hosts = containerd.hosts_dir().join("_default/hosts.toml");
    testkit::process::wait_until(&mut agent, Duration::from_secs(30), || {
        let hosts = hosts.clone();
        async move { hosts.exists() }
    })
    .await;
    let manifest = ::mirror::bundle::BundleManifest::read(&bundle)
        .unwrap()
        .expect("d8-mirror-bundle.json");
    let mut pulled = BTreeSet::new();
    for image in manifest.packages.iter().flat_map(|p| &p.images) {
        let name = if image.repository.is_empty() {
            format!("{AGENT_HOST}/system/deckhouse")
        } else {
            format!("{AGENT_HOST}/system/deckhouse/{}", image.repository)
        };
        let reference = if image.tag.starts_with('@') {
            format!("{name}{}", image.tag)
        } else {
            format!("{name}:{}", image.tag)
        };
        containerd
            .pull(&reference)
            .await
            .expect_success(&format!("pull {reference}"));
        pulled.insert(image.digest.clone());
    }
    for digest in digests.values() {
        assert!(pulled.contains(digest), "{digest} pulled");
    }
    assert!(pulled.contains(root.digest()) && pulled.contains(channel.digest()));
    replica.service.assert_running();
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
