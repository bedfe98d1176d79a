//! skopeo, the containers/image client: pushes and pulls the way podman and CRI-O do (several
//! `Accept` lines, a `/v2/` ping first, no `ns` parameter).

use std::path::{Path, PathBuf};

use crate::process::require_tool;
use crate::upstream::{Credentials, Upstream};

/// How skopeo reaches one side of a copy.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// `--creds user:password`.
    pub credentials: Option<Credentials>,
    /// `--cert-dir`: `*.crt` CAs, `*.cert`/`*.key` a client certificate. Implies TLS verification.
    pub cert_dir: Option<PathBuf>,
}

impl Access {
    /// Plain HTTP or unverified TLS, no credentials.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// What it takes to reach `upstream`: its credentials and, over TLS, its CA.
    pub fn of(upstream: &Upstream) -> Self {
        let cert_dir = upstream.ca_pem().map(|pem| {
            let dir = upstream.scratch_dir().join("skopeo-certs");
            std::fs::create_dir_all(&dir).expect("cert dir");
            std::fs::write(dir.join("ca.crt"), pem).expect("write ca.crt");
            dir
        });
        Self {
            credentials: upstream.credentials().cloned(),
            cert_dir,
        }
    }

    /// The same access with other credentials.
    pub fn with_credentials(mut self, credentials: Option<Credentials>) -> Self {
        self.credentials = credentials;
        self
    }

    /// Adds a client certificate (`client.cert` / `client.key`) to a cert dir at `dir`,
    /// together with the CA that signed the server.
    pub fn with_client_cert(mut self, dir: &Path, ca_pem: &str, client: &crate::CertKey) -> Self {
        std::fs::create_dir_all(dir).expect("cert dir");
        std::fs::write(dir.join("ca.crt"), ca_pem).expect("write ca.crt");
        std::fs::write(dir.join("client.cert"), &client.cert_pem).expect("write client.cert");
        crate::certs::write_private(&dir.join("client.key"), client.key_pem.as_bytes())
            .expect("write client.key");
        self.cert_dir = Some(dir.to_owned());
        self
    }

    fn args(&self, side: &str) -> Vec<String> {
        let mut args = Vec::new();
        match &self.cert_dir {
            Some(dir) => {
                args.push(format!("--{side}cert-dir={}", dir.display()));
                args.push(format!("--{side}tls-verify=true"));
            }
            None => args.push(format!("--{side}tls-verify=false")),
        }
        match &self.credentials {
            Some(c) => args.push(format!("--{side}creds={}", c.colon_joined())),
            None => args.push(format!("--{side}no-creds")),
        }
        args
    }
}

/// What a command reported.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Exit status was zero.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Outcome {
    pub(crate) fn of(output: std::process::Output) -> Self {
        Self {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Panics with both streams unless the command succeeded.
    pub fn expect_success(self, what: &str) -> Self {
        assert!(
            self.success,
            "{what} failed:\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// One `skopeo copy --all --preserve-digests SRC DST` (byte-exact: no conversion, no
/// re-compression; it fails rather than change a digest).
#[derive(Clone, Debug)]
pub struct Copy {
    source: String,
    destination: String,
    source_access: Access,
    destination_access: Access,
    registries_conf: Option<PathBuf>,
}

impl Copy {
    /// From `source` to `destination`, both in skopeo's `transport:details` form
    /// (`docker://host/repo:tag`, `oci:dir:tag`).
    pub fn new(source: &str, destination: &str) -> Self {
        Self {
            source: source.to_owned(),
            destination: destination.to_owned(),
            source_access: Access::default(),
            destination_access: Access::default(),
            registries_conf: None,
        }
    }

    /// How to reach the source registry.
    pub fn source_access(mut self, access: Access) -> Self {
        self.source_access = access;
        self
    }

    /// How to reach the destination registry.
    pub fn destination_access(mut self, access: Access) -> Self {
        self.destination_access = access;
        self
    }

    /// A `registries.conf` with mirrors or location rewrites.
    pub fn registries_conf(mut self, path: &Path) -> Self {
        self.registries_conf = Some(path.to_owned());
        self
    }

    /// Runs the copy (five-minute limit) and reports what skopeo said.
    pub async fn run(&self) -> Outcome {
        let skopeo = require_tool("skopeo", "skopeo");
        let mut command = tokio::process::Command::new(skopeo);
        if let Some(conf) = &self.registries_conf {
            command.arg(format!("--registries-conf={}", conf.display()));
        }
        command
            .args(["copy", "--all", "--preserve-digests", "--retry-times=0"])
            .args(self.source_access.args("src-"))
            .args(self.destination_access.args("dest-"))
            .arg(&self.source)
            .arg(&self.destination)
            .kill_on_drop(true);
        let output = tokio::time::timeout(std::time::Duration::from_secs(300), command.output())
            .await
            .expect("skopeo copy took over five minutes")
            .expect("run skopeo");
        Outcome::of(output)
    }
}
