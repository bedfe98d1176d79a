//! What `d8 up` leaves on disk: no Secret value (nor the upstream password of the registry
//! ModuleConfig) in any byte of any file under the data directory, and nothing there that
//! another local user can read.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use testkit::process::{free_port, require_tool};

use super::Up;
use crate::kubectl_ok;

const SECRET_VALUE: &str = "correct-horse-battery-staple-7319";
const UPSTREAM_PASSWORD: &str = "upstream-password-5521-zebra";

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        out.push(path.clone());
        if path.is_dir() && !path.is_symlink() {
            files(&path, out);
        }
    }
}

#[tokio::test]
async fn no_secret_value_lies_in_the_data_directory_and_no_other_user_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    // Only d8's own permissions keep other users out: the scratch directory is open to all.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = dir.path().join("data");
    let containerd_dir = dir.path().join("containerd");
    let args = vec![
        format!("--data-dir={}", data.display()),
        "--node-name=local".to_owned(),
        format!("--listen=127.0.0.1:{}", free_port()),
        format!("--agent-address=127.0.0.1:{}", free_port()),
        format!("--agent-metrics-address=127.0.0.1:{}", free_port()),
        format!("--metrics-address=127.0.0.1:{}", free_port()),
        format!("--storage-read-address=127.0.0.1:{}", free_port()),
        format!("--storage-write-address=127.0.0.1:{}", free_port()),
        format!("--storage-metrics-address=127.0.0.1:{}", free_port()),
        "--storage-reserve=64Mi".to_owned(),
        format!("--containerd-registry-dir={}", containerd_dir.display()),
        "--interval=1s".to_owned(),
        "--without-release-engine".to_owned(),
    ];
    let mut up = Up::start(&args, dir.path().join("up.log"));
    up.wait_until("it is up", |log| log.contains("Ctrl-C stops."))
        .await;
    let admin = data.join("apiserver/kubeconfigs/admin.kubeconfig");
    let manifest = dir.path().join("secret.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1
kind: Secret
metadata:
  name: app-credentials
  namespace: default
stringData:
  password: {SECRET_VALUE}
---
apiVersion: deckhouse.io/v1alpha1
kind: ModuleConfig
metadata:
  name: registry
spec:
  version: 1
  enabled: true
  settings:
    mode: Managed
    primary:
      upstream:
        scheme: HTTP
        host: 127.0.0.1:{port}
        path: /dkp
        auth:
          username: license-token
          password: {UPSTREAM_PASSWORD}
",
            port = free_port()
        ),
    )
    .unwrap();
    kubectl_ok(
        &admin,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &manifest.display().to_string(),
        ],
    );
    // The API still serves the value to those allowed to read it.
    let served = kubectl_ok(
        &admin,
        &[
            "get",
            "secret",
            "app-credentials",
            "-o",
            "jsonpath={.data.password}",
        ],
    );
    assert_eq!(
        served,
        base64::engine::general_purpose::STANDARD.encode(SECRET_VALUE)
    );
    // Let the controllers and the agent act on the new configuration.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let status = up.terminate().await;
    assert!(status.success(), "SIGTERM: {status}\n{}", up.log());

    let mut all = vec![data.clone()];
    files(&data, &mut all);
    let needles: Vec<Vec<u8>> = [SECRET_VALUE, UPSTREAM_PASSWORD]
        .iter()
        .flat_map(|v| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(v);
            // The middle of the base64 text, whatever bytes precede it.
            [
                v.as_bytes().to_vec(),
                b64.as_bytes()[4..b64.len() - 4].to_vec(),
            ]
        })
        .collect();
    let mut exposed = Vec::new();
    let mut readable = Vec::new();
    for path in &all {
        let meta = std::fs::symlink_metadata(path).unwrap();
        if meta.permissions().mode() & 0o077 != 0 && !meta.file_type().is_symlink() {
            readable.push(format!(
                "{} {:o}",
                path.display(),
                meta.permissions().mode()
            ));
        }
        if meta.is_file() {
            let bytes = std::fs::read(path).unwrap();
            for needle in &needles {
                if bytes.windows(needle.len()).any(|w| w == needle.as_slice()) {
                    exposed.push(format!(
                        "{} holds {}",
                        path.display(),
                        String::from_utf8_lossy(needle)
                    ));
                }
            }
        }
    }
    assert!(
        exposed.is_empty(),
        "values at rest in plain text: {exposed:#?}"
    );
    assert!(
        readable.is_empty(),
        "open to group or others: {readable:#?}"
    );

    // As another user (nobody), nothing under the data directory opens.
    if rustix::process::geteuid().is_root() {
        let setpriv = require_tool("setpriv", "util-linux");
        for path in &all {
            let (tool, flag) = if path.is_dir() {
                ("ls", "-A")
            } else {
                ("cat", "--")
            };
            let out = Command::new(&setpriv)
                .args([
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    tool,
                    flag,
                ])
                .arg(path)
                .output()
                .unwrap();
            assert!(
                !out.status.success() || path == &data && out.stdout.is_empty(),
                "nobody read {}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stdout)
            );
        }
    } else {
        eprintln!("not root: the mode bits were checked, reading as another user was not tried");
    }
}
