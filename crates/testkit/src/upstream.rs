//! A real upstream registry: Debian's `docker-registry` (CNCF distribution 2.8) on a free
//! loopback port, with its own storage, optionally behind Basic auth, Bearer tokens or TLS.

pub mod token;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::certs::Certs;
use crate::process::{Service, free_port, require_tool, wait_ready};
use token::TokenServer;

/// A response header every answer of one upstream carries, valued with its own scratch
/// directory: it tells this registry's answers from those of whatever else holds the port.
const MARKER: &str = "X-Testkit-Upstream";

/// Credentials for an upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
}

impl Credentials {
    /// `user` / `password`.
    pub fn new(user: &str, password: &str) -> Self {
        Self {
            user: user.to_owned(),
            password: password.to_owned(),
        }
    }

    /// `user:password`, as skopeo's `--creds` and ctr's `--user` take it.
    pub fn colon_joined(&self) -> String {
        format!("{}:{}", self.user, self.password)
    }
}

#[derive(Clone, Debug, Default)]
enum Auth {
    #[default]
    None,
    Basic(Credentials),
    Token {
        credentials: Credentials,
        expires_in: u64,
    },
}

/// How to start an [`Upstream`].
#[derive(Debug, Default)]
pub struct UpstreamOptions<'a> {
    auth: Auth,
    tls: Option<&'a Certs>,
    proxy: Option<(String, Option<Credentials>)>,
}

impl<'a> UpstreamOptions<'a> {
    /// htpasswd Basic auth with one user.
    pub fn basic_auth(mut self, user: &str, password: &str) -> Self {
        self.auth = Auth::Basic(Credentials::new(user, password));
        self
    }

    /// Bearer-token auth through a token server of ours that accepts one user; tokens last five
    /// minutes.
    pub fn token_auth(self, user: &str, password: &str) -> Self {
        self.token_auth_expiring(user, password, 300)
    }

    /// Bearer-token auth whose tokens expire after `expires_in` seconds.
    pub fn token_auth_expiring(mut self, user: &str, password: &str, expires_in: u64) -> Self {
        self.auth = Auth::Token {
            credentials: Credentials::new(user, password),
            expires_in,
        };
        self
    }

    /// HTTPS with a server certificate issued by `ca`.
    pub fn tls(mut self, ca: &'a Certs) -> Self {
        self.tls = Some(ca);
        self
    }

    /// distribution's pull-through mode (`proxy.remoteurl`): the reference cache we compare with.
    pub fn proxy(mut self, remote_url: &str, credentials: Option<Credentials>) -> Self {
        self.proxy = Some((remote_url.to_owned(), credentials));
        self
    }
}

/// A running `docker-registry`; stopped (and its storage removed) when dropped.
#[derive(Debug)]
pub struct Upstream {
    // Field order matters: the service stops before its directory goes away.
    service: Service,
    token: Option<TokenServer>,
    credentials: Option<Credentials>,
    port: u16,
    tls: bool,
    ca_pem: Option<String>,
    dir: tempfile::TempDir,
}

impl Upstream {
    /// Starts a registry with no authentication over plain HTTP.
    pub async fn start_plain() -> Self {
        Self::start(UpstreamOptions::default()).await
    }

    /// Starts a registry as `options` say and waits until it answers `/v2/`.
    pub async fn start(options: UpstreamOptions<'_>) -> Self {
        let binary = require_tool("docker-registry", "docker-registry");
        let dir = tempfile::Builder::new()
            .prefix("testkit-upstream-")
            .tempdir()
            .expect("temp dir");
        let mut port = free_port();
        let mut config = format!(
            "version: 0.1\n\
             log:\n  level: info\n  accesslog:\n    disabled: false\n\
             storage:\n  filesystem:\n    rootdirectory: {data}\n  delete:\n    enabled: true\n  \
             cache:\n    blobdescriptor: inmemory\n\
             http:\n  addr: 127.0.0.1:{port}\n  secret: testkit\n  \
             headers:\n    {MARKER}: [\"{instance}\"]\n",
            data = dir.path().join("data").display(),
            instance = dir.path().display(),
        );
        let mut ca_pem = None;
        if let Some(ca) = options.tls {
            let paths = ca
                .server(&[])
                .write(dir.path(), "server")
                .expect("write server cert");
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                paths.cert.display(),
                paths.key.display()
            ));
            ca_pem = Some(ca.ca_pem());
        }
        let (token, credentials) = match &options.auth {
            Auth::None => (None, None),
            Auth::Basic(credentials) => {
                let hash = bcrypt::hash(&credentials.password, 4).expect("bcrypt");
                let htpasswd = dir.path().join("htpasswd");
                std::fs::write(&htpasswd, format!("{}:{hash}\n", credentials.user))
                    .expect("write htpasswd");
                config.push_str(&format!(
                    "auth:\n  htpasswd:\n    realm: testkit\n    path: {}\n",
                    htpasswd.display()
                ));
                (None, Some(credentials.clone()))
            }
            Auth::Token {
                credentials,
                expires_in,
            } => {
                let (server, cert_pem) =
                    TokenServer::start(&credentials.user, &credentials.password, *expires_in);
                let bundle = dir.path().join("token-signer.crt");
                std::fs::write(&bundle, cert_pem).expect("write token signer");
                config.push_str(&format!(
                    "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    \
                     rootcertbundle: {}\n",
                    server.realm(),
                    token::SERVICE,
                    token::ISSUER,
                    bundle.display()
                ));
                (Some(server), Some(credentials.clone()))
            }
        };
        if let Some((remote, remote_credentials)) = &options.proxy {
            config.push_str(&format!("proxy:\n  remoteurl: {remote}\n"));
            if let Some(c) = remote_credentials {
                config.push_str(&format!(
                    "  username: {}\n  password: {}\n",
                    c.user, c.password
                ));
            }
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).expect("write registry config");
        let tls = options.tls.is_some();
        let probe = crate::http_client(ca_pem.as_deref());
        // The port was free when picked; another test may take it before the registry binds.
        // Then the registry exits at once, and it is started again on a new port. Whatever
        // else listens there answers without this registry's own marker header, so an answer
        // counts only when it carries it.
        let mut attempts = 0;
        let service = loop {
            attempts += 1;
            let mut command = Command::new(&binary);
            command.arg("serve").arg(&config_path);
            let log = dir.path().join(format!("registry-{attempts}.log"));
            let mut service = Service::spawn(&format!("docker-registry :{port}"), command, log)
                .expect("spawn docker-registry");
            let url = format!(
                "{}://127.0.0.1:{port}/v2/",
                if tls { "https" } else { "http" }
            );
            let instance = dir.path().display().to_string();
            let ready = wait_ready(&mut service, Duration::from_secs(15), || {
                let request = probe.get(&url).send();
                let instance = instance.clone();
                async move {
                    request.await.is_ok_and(|response| {
                        response.headers().get(MARKER).and_then(|v| v.to_str().ok())
                            == Some(instance.as_str())
                    })
                }
            })
            .await;
            match ready {
                Ok(()) => break service,
                Err(_) if attempts < 5 && service.log().contains("address already in use") => {
                    let taken = format!("127.0.0.1:{port}");
                    port = free_port();
                    let text = std::fs::read_to_string(&config_path).expect("read registry config");
                    let text = text.replace(&taken, &format!("127.0.0.1:{port}"));
                    std::fs::write(&config_path, text).expect("write registry config");
                }
                Err(status) => panic!(
                    "docker-registry exited early ({status}); its log:\n{}",
                    service.log()
                ),
            }
        };
        Self {
            service,
            token,
            credentials,
            port,
            tls,
            ca_pem,
            dir,
        }
    }

    /// `127.0.0.1:<port>`: the registry host as it appears in image references.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>` or `https://…`.
    pub fn url(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.host()
        )
    }

    /// Whether it serves HTTPS.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The CA that signed its certificate, when it serves HTTPS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The credentials it accepts, when it has auth.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// The token server, when it uses Bearer tokens.
    pub fn token_server(&self) -> Option<&TokenServer> {
        self.token.as_ref()
    }

    /// The registry's storage directory.
    pub fn storage_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A scratch directory that lives as long as the registry.
    pub fn scratch_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The registry's log so far (access log included).
    pub fn log(&self) -> String {
        self.service.log()
    }

    /// A reqwest client that trusts this registry's CA (no credentials attached).
    pub fn client(&self) -> reqwest::Client {
        crate::http_client(self.ca_pem.as_deref())
    }

    /// Stops the registry now (its storage stays until drop): an upstream going away.
    pub fn stop(&mut self) {
        self.service.stop();
    }

    /// Kills the registry with SIGKILL: an upstream crashing.
    pub fn kill(&mut self) {
        self.service.kill();
    }
}

#[cfg(test)]
mod tests;
