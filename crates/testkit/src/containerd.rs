//! A private containerd (own root, state, socket and hosts dir) and `ctr`, the way a node pulls.
//!
//! Two containerds run here: the system's (Debian 12's containerd 1.6, from apt) and containerd
//! 2 ([`Binaries::v2`]: Debian sid's package extracted beside it by `.ci/fetch-containerd2`,
//! with its own `ctr` and shim; runc is the system's).
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

/// The environment variable naming the directory of containerd 2's binaries.
pub const CONTAINERD2_ENV: &str = "D8_CONTAINERD2";

/// Where `.ci/fetch-containerd2` puts containerd 2's binaries by default.
pub const CONTAINERD2_DEFAULT_DIR: &str = "/opt/containerd2/usr/bin";

/// The binaries a [`Containerd`] runs: `containerd` and `ctr` of one release, and the directory
/// containerd finds its shim (`containerd-shim-runc-v2`) in when it is not the system's.
#[derive(Clone, Debug)]
pub struct Binaries {
    containerd: PathBuf,
    ctr: PathBuf,
    /// Put first on containerd's `PATH` (the shim of the same package), if any.
    dir: Option<PathBuf>,
    major: u32,
}

impl Binaries {
    /// The system's containerd and ctr (Debian 12: containerd 1.6); a missing one fails, naming
    /// the package.
    pub fn system() -> Self {
        let containerd = require_tool("containerd", "containerd");
        let ctr = require_tool("ctr", "containerd");
        let major = probe_major(&containerd).unwrap_or_else(|e| panic!("{e}"));
        Self {
            containerd,
            ctr,
            dir: None,
            major,
        }
    }

    /// containerd 2: the directory [`CONTAINERD2_ENV`] names (default
    /// [`CONTAINERD2_DEFAULT_DIR`]), holding `containerd`, `ctr` and `containerd-shim-runc-v2` of
    /// containerd 2.x. Missing or another version fails, saying how to get it.
    pub fn v2() -> Self {
        let dir = std::env::var_os(CONTAINERD2_ENV)
            .map_or_else(|| PathBuf::from(CONTAINERD2_DEFAULT_DIR), PathBuf::from);
        Self::v2_in(&dir).unwrap_or_else(|e| panic!("{e}"))
    }

    /// containerd 2's binaries in `dir`, or why they are not there and how to get them.
    fn v2_in(dir: &Path) -> Result<Self, String> {
        let how = format!(
            "run `sudo .ci/fetch-containerd2` (it extracts Debian sid's containerd package into \
             /opt/containerd2, leaving the system's containerd alone; `.ci/run` does it too), \
             or point {CONTAINERD2_ENV} at a directory holding containerd 2's containerd, ctr \
             and containerd-shim-runc-v2"
        );
        if let Some(tool) = ["containerd", "ctr", "containerd-shim-runc-v2"]
            .into_iter()
            .find(|tool| !crate::process::is_executable(&dir.join(tool)))
        {
            return Err(format!(
                "containerd 2 is not installed: no {tool} in {}: {how}",
                dir.display()
            ));
        }
        let containerd = dir.join("containerd");
        let major = probe_major(&containerd).map_err(|e| format!("{e}: {how}"))?;
        if major != 2 {
            return Err(format!(
                "{} is containerd {major}, not 2: {how}",
                containerd.display()
            ));
        }
        Ok(Self {
            ctr: dir.join("ctr"),
            containerd,
            dir: Some(dir.to_owned()),
            major,
        })
    }

    /// The runc shim containerd starts: the one beside it (containerd 2), or the system's.
    pub fn shim(&self) -> PathBuf {
        match &self.dir {
            Some(dir) => dir.join("containerd-shim-runc-v2"),
            None => require_tool("containerd-shim-runc-v2", "containerd"),
        }
    }

    /// `containerd config default`: the release's own default configuration.
    pub fn config_default(&self) -> String {
        let output = Command::new(&self.containerd)
            .args(["config", "default"])
            .output()
            .expect("run containerd config default");
        assert!(
            output.status.success(),
            "containerd config default: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("containerd config default is UTF-8")
    }

    /// `containerd --config FILE config dump`: the configuration containerd loads from `file`
    /// (defaults merged in), or what containerd said when it could not load it.
    pub fn config_dump(&self, file: &Path) -> Result<String, String> {
        let output = Command::new(&self.containerd)
            .arg("--config")
            .arg(file)
            .args(["config", "dump"])
            .output()
            .expect("run containerd config dump");
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    /// The configuration [`Containerd::start`] and [`Containerd::start_of`] write: everything
    /// under `root`, CRI off. containerd 2: config version 3, with its CRI split into plugins
    /// (images, runtime, the pod sandbox controller and the service listing it) and NRI (whose
    /// socket is machine-wide) off.
    pub fn private_config(&self, root: &Path, socket: &Path) -> String {
        let (version, disabled) = if self.major >= 2 {
            (
                3,
                "\"io.containerd.grpc.v1.cri\", \"io.containerd.cri.v1.images\", \
                 \"io.containerd.cri.v1.runtime\", \
                 \"io.containerd.podsandbox.controller.v1.podsandbox\", \
                 \"io.containerd.grpc.v1.sandbox-controllers\", \"io.containerd.nri.v1.nri\"",
            )
        } else {
            (2, "\"io.containerd.grpc.v1.cri\"")
        };
        format!(
            "version = {version}\n\
             root = \"{root}/root\"\n\
             state = \"{root}/state\"\n\
             disabled_plugins = [{disabled}]\n\
             [grpc]\n  address = \"{socket}\"\n\
             [ttrpc]\n  address = \"{socket}.ttrpc\"\n\
             [debug]\n  address = \"{root}/debug.sock\"\n  level = \"debug\"\n\
             [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{root}/opt\"\n",
            root = root.display(),
            socket = socket.display(),
        )
    }
}

/// The major version `containerd --version` reports.
fn probe_major(containerd: &Path) -> Result<u32, String> {
    let output = Command::new(containerd)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", containerd.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    major_version(&text).ok_or_else(|| {
        format!(
            "{} --version printed no version: {text}{}",
            containerd.display(),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The major version in `containerd --version`'s line: `containerd <module> <version> …`, the
/// version with or without a leading `v` (`1.6.20~ds1`, `2.1.9+unknown`, `v2.0.0`).
fn major_version(line: &str) -> Option<u32> {
    let version = line.split_whitespace().nth(2)?;
    let version = version.strip_prefix('v').unwrap_or(version);
    version.split('.').next()?.parse().ok()
}

impl Containerd {
    /// Starts the system's containerd (CRI plugin off) and waits until `ctr version` answers.
    pub async fn start() -> Self {
        Self::start_of(&Binaries::system()).await
    }

    /// Starts containerd of `binaries` (e.g. [`Binaries::v2`]) with
    /// [`Binaries::private_config`], and waits until its own `ctr version` answers.
    pub async fn start_of(binaries: &Binaries) -> Self {
        Self::start_of_with(binaries, |root, socket| {
            binaries.private_config(root, socket)
        })
        .await
    }

    /// Starts the system's containerd inside network namespace `netns` (a node of
    /// [`netns::Network`](crate::netns::Network)): its pulls, and `ctr`'s (which fetches
    /// itself on containerd 1.x), reach that node's `127.0.0.1`.
    pub async fn start_in_netns(netns: &str) -> Self {
        let binaries = Binaries::system();
        Self::start_in(Some(netns.to_owned()), &binaries, |root, socket| {
            binaries.private_config(root, socket)
        })
        .await
    }

    /// Starts the system's containerd with the configuration `config(dir, socket)` returns —
    /// e.g. a node's own file with its directories moved under `dir` — and waits until
    /// `ctr version` answers on `socket`. Every path the configuration names must lie under
    /// `dir` (removed on drop).
    pub async fn start_with(config: impl FnOnce(&Path, &Path) -> String) -> Self {
        Self::start_of_with(&Binaries::system(), config).await
    }

    /// [`Containerd::start_with`] with the given binaries; the configuration must be of their
    /// version (containerd 2: `version = 3`).
    pub async fn start_of_with(
        binaries: &Binaries,
        config: impl FnOnce(&Path, &Path) -> String,
    ) -> Self {
        Self::start_in(None, binaries, config).await
    }

    async fn start_in(
        netns: Option<String>,
        binaries: &Binaries,
        config: impl FnOnce(&Path, &Path) -> String,
    ) -> Self {
        require_tool("runc", "runc");
        let ctr = binaries.ctr.clone();
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
        let mut command = in_netns(netns.as_deref(), &binaries.containerd);
        command.arg("--config").arg(&config_path);
        if let Some(shim_dir) = &binaries.dir {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let path = std::env::join_paths(
                std::iter::once(shim_dir.clone()).chain(std::env::split_paths(&path)),
            )
            .expect("PATH with containerd's own directory first");
            command.env("PATH", path);
        }
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

    /// containerd's process id.
    pub fn pid(&self) -> Option<u32> {
        self.service.pid()
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

#[cfg(test)]
mod tests {
    use super::{Binaries, major_version};
    use crate::process::require_tool;

    #[test]
    fn containerd_2_missing_says_how_to_get_it() {
        let empty = tempfile::tempdir().unwrap();
        let error = Binaries::v2_in(empty.path()).unwrap_err();
        assert!(error.contains("no containerd in"), "{error}");
        assert!(error.contains("sudo .ci/fetch-containerd2"), "{error}");
        assert!(error.contains("D8_CONTAINERD2"), "{error}");
    }

    #[test]
    fn containerd_1_6_is_not_taken_for_containerd_2() {
        let dir = tempfile::tempdir().unwrap();
        for tool in ["containerd", "ctr"] {
            std::os::unix::fs::symlink(require_tool(tool, "containerd"), dir.path().join(tool))
                .unwrap();
        }
        // The system's own shim: the version is read from containerd alone.
        std::os::unix::fs::symlink(
            require_tool("containerd-shim-runc-v2", "containerd"),
            dir.path().join("containerd-shim-runc-v2"),
        )
        .unwrap();
        let error = Binaries::v2_in(dir.path()).unwrap_err();
        assert!(error.contains("is containerd 1, not 2"), "{error}");
        assert!(error.contains("sudo .ci/fetch-containerd2"), "{error}");
    }

    #[test]
    fn major_version_of_each_release_line() {
        for (line, major) in [
            (
                "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n",
                Some(1),
            ),
            (
                "containerd github.com/containerd/containerd/v2 2.1.9+unknown \n",
                Some(2),
            ),
            (
                "containerd github.com/containerd/containerd/v2 v2.0.0 207ad711e\n",
                Some(2),
            ),
            ("containerd\n", None),
            ("", None),
            ("containerd x y.1\n", None),
        ] {
            assert_eq!(major_version(line), major, "{line:?}");
        }
    }
}
