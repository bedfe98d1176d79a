//! A private containerd (own root, state, socket and hosts dir) and `ctr`, the way a node pulls.
//!
//! containerd 1.6 quirk: a `hosts.toml` with only root keys (just `server = …`) fails to decode
//! and containerd silently falls back to `https://<ref host>`; every file written here has a
//! `[host."…"]` table, and every pull fails loudly if containerd reports a decode error.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{Service, require_tool, wait_until};
use crate::skopeo::Outcome;
use crate::upstream::{Credentials, Upstream};

pub mod cri;

/// A running containerd; stopped and its directories removed on drop.
#[derive(Debug)]
pub struct Containerd {
    // Field order matters: the service stops before its directory goes away.
    service: Service,
    ctr: PathBuf,
    socket: PathBuf,
    /// The network namespace containerd and `ctr` run in (`ip netns exec`), if not the test's.
    netns: Option<String>,
    dir: tempfile::TempDir,
}

/// Options of one `ctr images pull`.
#[derive(Clone, Debug, Default)]
pub struct PullOptions {
    /// `--user user:password`: credentials containerd itself sends to the registry.
    pub credentials: Option<Credentials>,
    /// `--platform`, e.g. `linux/arm64`.
    pub platform: Option<String>,
    /// `--all-platforms`.
    pub all_platforms: bool,
}

/// The configuration [`Containerd::start`] writes: everything under `root`, CRI plugin off.
fn default_config(root: &Path, socket: &Path) -> String {
    format!(
        "version = 2\n\
         root = \"{root}/root\"\n\
         state = \"{root}/state\"\n\
         disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
         [grpc]\n  address = \"{socket}\"\n\
         [ttrpc]\n  address = \"{socket}.ttrpc\"\n\
         [debug]\n  address = \"{root}/debug.sock\"\n  level = \"debug\"\n\
         [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{root}/opt\"\n",
        root = root.display(),
        socket = socket.display(),
    )
}

impl Containerd {
    /// Starts containerd (CRI plugin off) and waits until `ctr version` answers.
    pub async fn start() -> Self {
        Self::start_in(None, default_config).await
    }

    /// Starts containerd inside network namespace `netns` (a node of
    /// [`netns::Network`](crate::netns::Network)): its pulls, and `ctr`'s (which fetches
    /// itself on containerd 1.x), reach that node's `127.0.0.1`.
    pub async fn start_in_netns(netns: &str) -> Self {
        Self::start_in(Some(netns.to_owned()), default_config).await
    }

    /// Starts containerd with the configuration `config(dir, socket)` returns — e.g. a node's
    /// own file with its directories moved under `dir` — and waits until `ctr version` answers
    /// on `socket`. Every path the configuration names must lie under `dir` (removed on drop).
    pub async fn start_with(config: impl FnOnce(&Path, &Path) -> String) -> Self {
        Self::start_in(None, config).await
    }

    async fn start_in(netns: Option<String>, config: impl FnOnce(&Path, &Path) -> String) -> Self {
        let binary = require_tool("containerd", "containerd");
        let ctr = require_tool("ctr", "containerd");
        require_tool("runc", "runc");
        let dir = tempfile::Builder::new()
            .prefix("testkit-ctd-")
            .tempdir()
            .expect("temp dir");
        let root = dir.path();
        let socket = root.join("containerd.sock");
        std::fs::create_dir_all(root.join("certs.d/_default")).expect("hosts dir");
        let config = config(root, &socket);
        let config_path = root.join("config.toml");
        std::fs::write(&config_path, config).expect("write containerd config");
        let mut command = in_netns(netns.as_deref(), &binary);
        command.arg("--config").arg(&config_path);
        let mut service = Service::spawn("containerd", command, root.join("containerd.log"))
            .expect("spawn containerd");
        let probe_ctr = ctr.clone();
        let probe_socket = socket.clone();
        wait_until(&mut service, Duration::from_secs(15), || {
            let mut command = tokio::process::Command::from(in_netns(netns.as_deref(), &probe_ctr));
            command.arg("--address").arg(&probe_socket).arg("version");
            async move { command.output().await.is_ok_and(|o| o.status.success()) }
        })
        .await;
        Self {
            service,
            ctr,
            socket,
            netns,
            dir,
        }
    }

    /// The hosts dir passed to `ctr --hosts-dir` (`certs.d`).
    pub fn hosts_dir(&self) -> PathBuf {
        self.dir.path().join("certs.d")
    }

    /// containerd's log so far.
    pub fn log(&self) -> String {
        self.service.log()
    }

    /// Writes `<hosts dir>/<namespace>/hosts.toml` (`_default`, or a registry host).
    pub fn write_hosts(&self, namespace: &str, toml: &str) {
        let dir = self.hosts_dir().join(namespace);
        std::fs::create_dir_all(&dir).expect("hosts namespace dir");
        std::fs::write(dir.join("hosts.toml"), toml).expect("write hosts.toml");
    }

    /// Sends every pull to `mirror` first (capabilities pull and resolve, trusting `ca_pem` when
    /// given). The fallback `server` is pinned to `fallback`, a local address, so that a failing
    /// mirror never sends containerd off the machine.
    pub fn use_mirror(&self, mirror: &str, ca_pem: Option<&str>, fallback: &str) {
        let ca = ca_pem.map(|pem| self.write_ca("mirror-ca.crt", pem));
        self.write_hosts("_default", &hosts_toml(fallback, mirror, ca.as_deref()));
    }

    /// Pulls straight from `upstream` (no mirror): the registry is both server and host.
    pub fn use_upstream(&self, upstream: &Upstream) {
        let ca = upstream
            .ca_pem()
            .map(|pem| self.write_ca("upstream-ca.crt", pem));
        self.write_hosts(
            "_default",
            &hosts_toml(&upstream.url(), &upstream.url(), ca.as_deref()),
        );
    }

    fn write_ca(&self, name: &str, pem: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, pem).expect("write CA");
        path
    }

    /// `ctr images pull` of `reference` through the hosts dir.
    pub async fn pull(&self, reference: &str) -> Outcome {
        self.pull_with(reference, &PullOptions::default()).await
    }

    /// `ctr images pull` with options. Panics if containerd could not decode a hosts.toml.
    pub async fn pull_with(&self, reference: &str, options: &PullOptions) -> Outcome {
        let mut args = vec!["images".to_owned(), "pull".to_owned()];
        args.push(format!("--hosts-dir={}", self.hosts_dir().display()));
        if let Some(c) = &options.credentials {
            args.push(format!("--user={}", c.colon_joined()));
        }
        if let Some(platform) = &options.platform {
            args.push(format!("--platform={platform}"));
        }
        if options.all_platforms {
            args.push("--all-platforms".to_owned());
        }
        args.push(reference.to_owned());
        let outcome = self.ctr(&args).await;
        assert!(
            !outcome.stderr.contains("failed to decode hosts.toml"),
            "containerd could not read a hosts.toml (the 1.6 root-keys quirk?):\n{}",
            outcome.stderr
        );
        outcome
    }

    /// Image names containerd holds.
    pub async fn images(&self) -> Vec<String> {
        let outcome = self.ctr(&["images".into(), "ls".into(), "-q".into()]).await;
        outcome.stdout.lines().map(str::to_owned).collect()
    }

    /// Digests in containerd's content store.
    pub async fn content(&self) -> Vec<String> {
        let outcome = self
            .ctr(&["content".into(), "ls".into(), "-q".into()])
            .await;
        outcome.stdout.lines().map(str::to_owned).collect()
    }

    /// Forgets every image and all content, so that the next pull fetches everything again.
    pub async fn clear(&self) {
        let images = self.images().await;
        if !images.is_empty() {
            let mut args = vec!["images".to_owned(), "rm".to_owned(), "--sync".to_owned()];
            args.extend(images);
            self.ctr(&args).await.expect_success("ctr images rm");
        }
        let content = self.content().await;
        if !content.is_empty() {
            let mut args = vec!["content".to_owned(), "rm".to_owned()];
            args.extend(content);
            self.ctr(&args).await.expect_success("ctr content rm");
        }
    }

    /// Runs `ctr --debug --address <socket> ARGS` with a two-minute limit.
    pub async fn ctr(&self, args: &[String]) -> Outcome {
        let mut command = tokio::process::Command::from(in_netns(self.netns.as_deref(), &self.ctr));
        command
            .arg("--debug")
            .arg("--address")
            .arg(&self.socket)
            .args(args)
            .kill_on_drop(true);
        let output = tokio::time::timeout(Duration::from_secs(120), command.output())
            .await
            .expect("ctr took over two minutes")
            .expect("run ctr");
        Outcome::of(output)
    }

    /// Bytes of downloads in progress (the content store's ingests): above zero while a pull
    /// is part-way through a blob.
    pub fn ingesting_bytes(&self) -> u64 {
        let ingest = self
            .dir
            .path()
            .join("root/io.containerd.content.v1.content/ingest");
        let Ok(entries) = std::fs::read_dir(ingest) else {
            return 0;
        };
        entries
            .flatten()
            .filter_map(|entry| std::fs::metadata(entry.path().join("data")).ok())
            .map(|meta| meta.len())
            .sum()
    }

    /// `PullImage` through the CRI plugin, as kubelet pulls: the registry configuration is
    /// containerd's own (`config_path`), not `--hosts-dir`. The image id, or the gRPC error.
    /// Needs a configuration with the CRI plugin on ([`Containerd::start_with`]).
    pub async fn cri_pull(&self, reference: &str) -> Result<String, String> {
        cri::pull_image(&self.socket, reference).await
    }

    /// The private root directory.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
}

/// `program`, or `ip netns exec NETNS program` (`ip` execs it: same pid, same signals).
fn in_netns(netns: Option<&str>, program: &Path) -> Command {
    match netns {
        None => Command::new(program),
        Some(netns) => {
            let mut command = Command::new(require_tool("ip", "iproute2"));
            command.args(["netns", "exec", netns]).arg(program);
            command
        }
    }
}

/// A hosts.toml sending pulls to `host` with `server` as containerd's own fallback.
pub fn hosts_toml(server: &str, host: &str, ca: Option<&Path>) -> String {
    let mut toml = format!(
        "server = \"{server}\"\n\n[host.\"{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
    );
    if let Some(ca) = ca {
        toml.push_str(&format!("  ca = \"{}\"\n", ca.display()));
    }
    toml
}
