//! The `d8` binary as an operator runs it: `d8 apiserver` with kubectl, and `d8 registry agent`
//! pulling for containerd on the layout an operator applies; `d8 up`, the whole platform;
//! `d8 mirror` into a `d8 registry storage` publish endpoint.

mod admission;
mod agent;
mod apiserver;
mod cni_detect;
mod cni_migration;
mod documentation;
mod image;
mod install;
mod metrics;
mod mirror;
mod module;
mod module_hooks;
mod module_kill;
mod multinode;
mod object_keeper;
mod packages;
mod rbac;
mod registry_publish;
mod release;
mod storage;
mod up;
mod walkthrough;
mod webhook_certs;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use testkit::process::{Service, free_port, require_tool};

/// A running `d8 apiserver` (stopped on drop) and its data directory.
pub(crate) struct Apiserver {
    _service: Service,
    dir: tempfile::TempDir,
}

impl Apiserver {
    pub(crate) async fn start(agent_nodes: &[&str]) -> Self {
        let args: Vec<String> = agent_nodes
            .iter()
            .flat_map(|n| ["--agent-node".to_string(), (*n).to_string()])
            .collect();
        Self::start_with(&args).await
    }

    /// `d8 apiserver` with extra flags.
    pub(crate) async fn start_with(extra: &[String]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
        command
            .arg("apiserver")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"));
        command.args(extra);
        let mut service =
            Service::spawn("d8 apiserver", command, dir.path().join("apiserver.log")).unwrap();
        let admin = dir.path().join("data/kubeconfigs/admin.kubeconfig");
        testkit::process::wait_until(&mut service, Duration::from_secs(30), || {
            let admin = admin.clone();
            async move { admin.exists() && kubectl(&admin, &["get", "--raw", "/healthz"]).0 }
        })
        .await;
        Self {
            _service: service,
            dir,
        }
    }

    pub(crate) fn kubeconfig(&self, user: &str) -> PathBuf {
        self.dir
            .path()
            .join("data/kubeconfigs")
            .join(format!("{user}.kubeconfig"))
    }

    pub(crate) fn admin(&self) -> PathBuf {
        self.kubeconfig("admin")
    }
}

/// What the module and release tests start from: `d8 apiserver` and its admin kubeconfig, a
/// registry with a client pushing into it, and a scratch directory holding an image layout.
pub(crate) struct Stage {
    /// Runs while the stage lives.
    pub(crate) apiserver: Apiserver,
    pub(crate) admin: PathBuf,
    pub(crate) upstream: testkit::Upstream,
    pub(crate) push: testkit::push::Registry,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) layout: testkit::image::Layout,
}

impl Stage {
    pub(crate) async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// The stage with `d8 apiserver` taking extra flags.
    pub(crate) async fn start_with(flags: &[String]) -> Self {
        testkit::install_crypto();
        let apiserver = Apiserver::start_with(flags).await;
        let admin = apiserver.admin();
        let upstream = testkit::Upstream::start_plain().await;
        let push = testkit::push::Registry::of(&upstream);
        let dir = tempfile::tempdir().unwrap();
        let layout = testkit::image::Layout::new(&dir.path().join("layout")).unwrap();
        Self {
            apiserver,
            admin,
            upstream,
            push,
            dir,
            layout,
        }
    }
}

/// Runs kubectl; returns (success, stdout, stderr).
pub(crate) fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(require_tool("kubectl", "kubernetes-client"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("run kubectl");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// kubectl that must succeed; returns stdout.
pub(crate) fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (ok, stdout, stderr) = kubectl(kubeconfig, args);
    assert!(ok, "kubectl {args:?} failed:\n{stdout}\n{stderr}");
    stdout
}

/// The repository's `examples/` directory.
pub(crate) fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
        .display()
        .to_string()
}
