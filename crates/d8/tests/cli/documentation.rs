//! `d8 controller` sends a module's documentation to the documentation builder, on `d8
//! apiserver` with kubectl and a tiny builder (an HTTP server in the test) behind the
//! `documentation` Service's EndpointSlice: the docs of the installed version arrive, and those
//! of the new version after an update; a failing builder's error shows on the
//! ModuleDocumentation status and the build is tried again until it succeeds.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use testkit::process::{Service, free_port};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{kubectl, kubectl_ok};

/// What the builder received: `(path, body)`.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A documentation builder: `POST /api/v1/doc/<module>/<version>` answers 201 (or 500 while
/// `failing`), `POST /api/v1/build` 200.
async fn builder(failing: Arc<AtomicBool>) -> (u16, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let received: Received = Arc::default();
    let log = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            let log = log.clone();
            let failing = failing.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head, length) = loop {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
                        let length = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        buffer.drain(..end + 4);
                        break (head, length);
                    }
                };
                while buffer.len() < length {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                }
                let path = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned();
                let (status, body) = if path.starts_with("/api/v1/doc/") {
                    if failing.load(Ordering::SeqCst) {
                        ("500 Internal Server Error", "builder is down")
                    } else {
                        ("201 Created", "")
                    }
                } else if path == "/api/v1/build" {
                    ("200 OK", "")
                } else {
                    ("404 Not Found", "")
                };
                log.lock().unwrap().push((path, buffer));
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, received)
}

fn apply(admin: &Path, dir: &Path, name: &str, yaml: &str) {
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    kubectl_ok(admin, &["apply", "-f", path.to_str().unwrap()]);
}

/// A downloaded module version with its docs and a template the builder must not get.
fn module_files(downloaded: &Path, version: &str, text: &str) {
    let root = downloaded.join("echo").join(version);
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(root.join("docs/README.md"), text).unwrap();
    std::fs::write(root.join("module.yaml"), "name: echo\n").unwrap();
    std::fs::write(root.join("templates/deployment.yaml"), "kind: Deployment\n").unwrap();
}

/// The ModuleDocumentation the module manager writes for the version it installed.
fn documentation(admin: &Path, dir: &Path, version: &str, checksum: &str) {
    apply(
        admin,
        dir,
        &format!("doc-{version}.yaml"),
        &format!(
            "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleDocumentation\nmetadata:\n  name: echo\nspec:\n  version: {version}\n  checksum: {checksum}\n  path: /echo/{version}\n"
        ),
    );
}

fn status(admin: &Path, jsonpath: &str) -> String {
    kubectl(
        admin,
        &[
            "get",
            "moduledocumentation",
            "echo",
            "-o",
            &format!("jsonpath={jsonpath}"),
        ],
    )
    .1
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn module_docs_reach_the_builder_on_install_and_update_and_failures_are_retried() {
    testkit::install_crypto();
    let requests_dir = tempfile::tempdir().unwrap();
    let requests = requests_dir.path().join("requests.jsonl");
    let (apiserver, deckhouse) = crate::rbac::deckhouse_apiserver(&[], &requests).await;
    let admin = apiserver.admin();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let downloaded = d.join("downloaded");
    std::fs::create_dir_all(&downloaded).unwrap();
    module_files(&downloaded, "v1.0.0", "echo docs, first version");

    let failing = Arc::new(AtomicBool::new(false));
    let (port, received) = builder(failing.clone()).await;
    let _ = kubectl(&admin, &["create", "namespace", "d8-system"]);
    apply(
        &admin,
        d,
        "slice.yaml",
        &format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: documentation-abcde\n  namespace: d8-system\n  labels:\n    app: documentation\n    kubernetes.io/service-name: documentation\naddressType: IPv4\nports:\n- name: builder-http\n  port: {port}\n  protocol: TCP\nendpoints:\n- addresses: [127.0.0.1]\n  conditions: {{ready: true}}\n"
        ),
    );

    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&deckhouse)
        .args(["--identity", "test-controller", "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--downloaded-modules-dir")
        .arg(&downloaded)
        .args(["--documentation-retry", "300ms"]);
    let _controller = Service::spawn("d8 controller", command, d.join("controller.log")).unwrap();
    let address = format!("http://127.0.0.1:{port}");

    // Installed: the version's docs (and only those) reach the builder, then a build.
    documentation(&admin, d, "v1.0.0", "sum-1");
    eventually("v1.0.0 rendered", || {
        status(&admin, "{.status.result}") == "Rendered"
    })
    .await;
    {
        let got = received.lock().unwrap();
        let (_, tar) = got
            .iter()
            .find(|(p, _)| p == "/api/v1/doc/echo/v1.0.0")
            .expect("the docs of v1.0.0 were sent");
        assert!(contains(tar, b"docs/README.md") && contains(tar, b"echo docs, first version"));
        assert!(contains(tar, b"module.yaml"));
        assert!(
            !contains(tar, b"templates/deployment.yaml"),
            "only documentation files"
        );
        assert!(got.iter().any(|(p, _)| p == "/api/v1/build"));
    }
    assert_eq!(
        status(
            &admin,
            "{.status.conditions[0].type} {.status.conditions[0].version} {.status.conditions[0].address}"
        ),
        format!("Rendered v1.0.0 {address}")
    );

    // Updated while the builder fails: the error shows on the status, the build is retried.
    failing.store(true, Ordering::SeqCst);
    module_files(&downloaded, "v1.1.0", "echo docs, second version");
    documentation(&admin, d, "v1.1.0", "sum-2");
    eventually("the builder's error on the status", || {
        status(&admin, "{.status.result}") == "Error"
    })
    .await;
    let message = status(&admin, "{.status.conditions[0].message}");
    assert!(
        message.contains("[500]") && message.contains("builder is down"),
        "{message}"
    );
    assert_eq!(status(&admin, "{.status.conditions[0].type}"), "Error");
    let attempts = |received: &Received| {
        received
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == "/api/v1/doc/echo/v1.1.0")
            .count()
    };
    eventually("tried again", || attempts(&received) >= 2).await;

    // The builder recovers: the new version's docs arrive and the status says so.
    failing.store(false, Ordering::SeqCst);
    eventually("v1.1.0 rendered", || {
        status(&admin, "{.status.result} {.status.conditions[0].version}") == "Rendered v1.1.0"
    })
    .await;
    {
        let got = received.lock().unwrap();
        let (_, tar) = got
            .iter()
            .rev()
            .find(|(p, _)| p == "/api/v1/doc/echo/v1.1.0")
            .unwrap();
        assert!(contains(tar, b"echo docs, second version"));
    }
    crate::rbac::assert_deckhouse_calls("documentation", &requests).await;
}
