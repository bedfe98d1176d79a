//! `d8 up` as an operator runs it: the platform starts Unmanaged and writes nothing for
//! containerd; a `registry` ModuleConfig applied with kubectl makes it Managed with an upstream,
//! containerd then pulls through the agent; SIGTERM stops it cleanly (exit 0), and a restart on
//! the same directory serves the same pulls again. `platform` runs the whole registry scenario
//! with the cache replica.

mod apply;
mod at_rest;
mod platform;
mod probe;
mod webhook;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use testkit::image::Layout as ImageLayout;
use testkit::process::free_port;
use testkit::push::Registry;
use testkit::{Containerd, ImageBuilder, Upstream, UpstreamOptions};

use crate::{kubectl, kubectl_ok};

const IMAGE: &str = "registry.d8-system.svc:5001/system/deckhouse/app:v1";

/// One `d8 up` process; its stdout and stderr go to `log`. Killed on drop if still running.
struct Up {
    child: Option<Child>,
    log: PathBuf,
}

impl Up {
    fn start(args: &[String], log: PathBuf) -> Self {
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_d8"))
            .arg("up")
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Self {
            child: Some(child),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `ready` holds, failing with the log if the process exits or time runs out.
    async fn wait_until(&mut self, what: &str, mut ready: impl FnMut(&str) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.as_mut().unwrap().try_wait() {
                panic!("d8 up exited ({status}) before {what}:\n{}", self.log());
            }
            if ready(&self.log()) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting until {what}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Sends SIGTERM and returns the exit status (within 30 s).
    async fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if tokio::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("d8 up did not stop within 30 s of SIGTERM:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("----- d8 up log -----\n{}\n----- end -----", self.log());
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn module_config(upstream: &Upstream, path: &Path) {
    std::fs::write(
        path,
        format!(
            "apiVersion: deckhouse.io/v1alpha1
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
        host: \"{host}\"
        path: /dkp
        auth:
          username: license-token
          password: s3cret
",
            host = upstream.host()
        ),
    )
    .unwrap();
}

#[tokio::test]
async fn d8_up_pulls_through_the_agent_once_managed_and_restarts_into_the_same_state() {
    let upstream =
        Upstream::start(UpstreamOptions::default().token_auth("license-token", "s3cret")).await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let registry = Registry::of(&upstream);
    let app = ImageBuilder::new("app").layer(30_000).build(&images);
    registry
        .push_image("dkp/app", Some("v1"), &app)
        .await
        .unwrap();
    // The preflight probe's sentinel.
    let channel = ImageBuilder::new("channel").layer(100).build(&images);
    registry
        .push_image("dkp/release-channel", Some("stable"), &channel)
        .await
        .unwrap();

    let containerd = Containerd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let api_port = free_port();
    let args = vec![
        "--data-dir".to_owned(),
        data.display().to_string(),
        "--node-name=local".to_owned(),
        format!("--listen=127.0.0.1:{api_port}"),
        format!("--agent-address=127.0.0.1:{}", free_port()),
        format!("--agent-metrics-address=127.0.0.1:{}", free_port()),
        format!("--metrics-address=127.0.0.1:{}", free_port()),
        "--containerd-registry-dir".to_owned(),
        containerd.hosts_dir().display().to_string(),
        "--interval=1s".to_owned(),
        "--initial-registry=unmanaged".to_owned(),
    ];

    let mut up = Up::start(&args, dir.path().join("up-1.log"));
    up.wait_until("it prints where everything listens", |log| {
        log.contains("Ctrl-C stops.")
    })
    .await;
    let log = up.log();
    let admin = data.join("apiserver/kubeconfigs/admin.kubeconfig");
    for line in [
        format!("Kubernetes API      https://127.0.0.1:{api_port}"),
        format!("admin kubeconfig    {}", admin.display()),
        "registry module     Unmanaged".to_owned(),
    ] {
        assert!(log.contains(&line), "{line:?} missing from:\n{log}");
    }
    assert_eq!(
        kubectl_ok(&admin, &["get", "node", "-o", "name"]),
        "node/local\n"
    );

    // Unmanaged: nothing is written for containerd.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let hosts = containerd.hosts_dir().join("_default/hosts.toml");
    assert!(!hosts.exists(), "Unmanaged writes no drop-in");

    // Managed with an upstream, applied with kubectl.
    let manifest = dir.path().join("registry.yaml");
    module_config(&upstream, &manifest);
    kubectl_ok(&admin, &["apply", "-f", &manifest.display().to_string()]);
    up.wait_until(
        "the agent's drop-in and registry-image-address appear",
        |_| {
            hosts.exists()
                && kubectl(
                    &admin,
                    &[
                        "get",
                        "configmap",
                        "-n",
                        "d8-system",
                        "registry-image-address",
                    ],
                )
                .0
        },
    )
    .await;
    containerd
        .pull(IMAGE)
        .await
        .expect_success("pull through d8 up's agent");

    let status = up.terminate().await;
    assert!(status.success(), "SIGTERM: {status}\n{}", up.log());
    assert!(up.log().contains("stopping"), "{}", up.log());

    // Restart on the same directory: the same state, the same pulls.
    containerd.clear().await;
    let mut up = Up::start(&args, dir.path().join("up-2.log"));
    up.wait_until("it is up again", |log| log.contains("Ctrl-C stops."))
        .await;
    assert!(
        up.log().contains("registry module     Managed"),
        "{}",
        up.log()
    );
    up.wait_until("the agent reports the node reconciled", |_| {
        kubectl(
            &admin,
            &[
                "get",
                "rnode",
                "local",
                "-o",
                "jsonpath={.status.reconciled}",
            ],
        )
        .1 == "true"
    })
    .await;
    containerd
        .pull(IMAGE)
        .await
        .expect_success("pull after the restart");
    let status = up.terminate().await;
    assert!(status.success(), "second SIGTERM: {status}\n{}", up.log());
}

/// The platform runs the module manager: a ModuleSource on a real registry applied with kubectl
/// and a ModuleConfig enabling one of its modules install it under DATA_DIR.
#[tokio::test]
async fn d8_up_installs_a_module_from_a_module_source() {
    let upstream = Upstream::start_plain().await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    crate::module::publish(&Registry::of(&upstream), &images, "echo", "v1.0.0").await;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = vec![
        "--data-dir".to_owned(),
        data.display().to_string(),
        "--node-name=local".to_owned(),
        format!("--listen=127.0.0.1:{}", free_port()),
        format!("--agent-address=127.0.0.1:{}", free_port()),
        format!("--agent-metrics-address=127.0.0.1:{}", free_port()),
        format!("--metrics-address=127.0.0.1:{}", free_port()),
        "--containerd-registry-dir".to_owned(),
        dir.path().join("containerd").display().to_string(),
        "--interval=1s".to_owned(),
        "--initial-registry=unmanaged".to_owned(),
        "--without-release-engine".to_owned(),
    ];
    let mut up = Up::start(&args, dir.path().join("up.log"));
    up.wait_until("it prints where everything listens", |log| {
        log.contains("Ctrl-C stops.")
    })
    .await;
    let downloaded = data.join("downloaded-modules");
    let line = format!("modules             {}", downloaded.display());
    assert!(up.log().contains(&line), "{line:?} missing:\n{}", up.log());

    let admin = data.join("apiserver/kubeconfigs/admin.kubeconfig");
    let manifest = dir.path().join("modules.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: deckhouse.io/v1alpha1
kind: ModuleSource
metadata:
  name: example
spec:
  registry:
    scheme: HTTP
    repo: {}/{}
---
apiVersion: deckhouse.io/v1alpha1
kind: ModuleConfig
metadata:
  name: echo
spec:
  enabled: true
",
            upstream.host(),
            crate::module::REPO
        ),
    )
    .unwrap();
    kubectl_ok(&admin, &["apply", "-f", &manifest.display().to_string()]);
    let installed = downloaded.join("modules/910-echo/templates/app.yaml");
    up.wait_until("echo is installed under the data dir", |_| {
        installed.exists()
    })
    .await;
    assert_eq!(std::fs::read_to_string(&installed).unwrap(), "# v1.0.0\n");
    assert_eq!(up.terminate().await.code(), Some(0), "{}", up.log());
}
