//! A replica started in-process on loopback ports, and small clients.

use std::net::SocketAddr;

use base64::Engine;
use storage::{Accounts, Limits, Listener, Registry, Settings, Store, Tls, Upstream};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub(crate) const NODE: (&str, &str) = ("node", "node-password");
pub(crate) const PUSHER: (&str, &str) = ("pusher", "push-password");

pub(crate) fn basic((user, password): (&str, &str)) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// How to start a replica.
pub(crate) struct Options {
    pub(crate) upstream: Option<Upstream>,
    pub(crate) limits: Limits,
    /// TLS on the write listener (the publish endpoint).
    pub(crate) write_tls: Option<Tls>,
    pub(crate) data_dir: Option<std::path::PathBuf>,
    pub(crate) settings: Settings,
    /// The token service on the read listener.
    pub(crate) tokens: Option<storage::auth::TokenKey>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            upstream: None,
            // No reserve unless a test asks for one: the default (up to 60 GiB free) depends on
            // how full the build machine's disk is.
            limits: Limits {
                budget: None,
                reserve: Some(0),
            },
            write_tls: None,
            data_dir: None,
            settings: Settings::default(),
            tokens: None,
        }
    }
}

pub(crate) struct Replica {
    pub(crate) registry: Registry,
    pub(crate) read: SocketAddr,
    pub(crate) write_url: String,
    pub(crate) write: SocketAddr,
    _dir: tempfile::TempDir,
    stop: Vec<oneshot::Sender<()>>,
}

impl Replica {
    pub(crate) fn read_url(&self) -> String {
        format!("http://{}", self.read)
    }

    pub(crate) fn store(&self) -> &Store {
        self.registry.store()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        for stop in self.stop.drain(..) {
            let _ = stop.send(());
        }
    }
}

async fn spawn(listener: Listener, tls: Option<&Tls>) -> (SocketAddr, oneshot::Sender<()>) {
    let socket = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = socket.local_addr().expect("addr");
    let acceptor = tls.map(|t| storage::server::acceptor(t).expect("acceptor"));
    let (tx, rx) = oneshot::channel();
    tokio::spawn(storage::server::serve(socket, acceptor, listener, async {
        let _ = rx.await;
    }));
    (addr, tx)
}

pub(crate) async fn start(options: Options) -> Replica {
    testkit::install_crypto();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = options
        .data_dir
        .clone()
        .unwrap_or_else(|| dir.path().join("data"));
    let store = Store::open(&data, options.limits.clone()).expect("open store");
    let registry = Registry::new(store, options.upstream.clone(), options.settings.clone());
    let mut read_accounts = Accounts::new()
        .with(NODE.0, NODE.1, storage::Access::Pull)
        .with(PUSHER.0, PUSHER.1, storage::Access::Push);
    if let Some(key) = options.tokens.clone() {
        read_accounts = read_accounts.with_tokens(key);
    }
    let write_accounts = Accounts::new().with(PUSHER.0, PUSHER.1, storage::Access::Push);
    let (read, stop_read) = spawn(Listener::read(registry.clone(), read_accounts), None).await;
    let require_cert = options
        .write_tls
        .as_ref()
        .is_some_and(|t| t.client_ca_pem.is_some());
    let (write, stop_write) = spawn(
        Listener::write(registry.clone(), write_accounts, require_cert),
        options.write_tls.as_ref(),
    )
    .await;
    let scheme = if options.write_tls.is_some() {
        "https"
    } else {
        "http"
    };
    Replica {
        registry,
        read,
        write_url: format!("{scheme}://{write}"),
        write,
        _dir: dir,
        stop: vec![stop_read, stop_write],
    }
}

/// A `registry_client::Remote` for a testkit upstream with the prefix `deckhouse/ee`.
pub(crate) fn remote_of(upstream: &testkit::Upstream, path: &str) -> registry_client::Remote {
    let mut endpoint = registry_client::Endpoint::from_url(&upstream.url()).expect("endpoint");
    if !path.is_empty() {
        endpoint = endpoint.path_prefix(path);
    }
    if let Some(ca) = upstream.ca_pem() {
        endpoint = endpoint.ca_pem(ca);
    }
    if let Some(c) = upstream.credentials() {
        endpoint = endpoint.credentials(registry_client::Credentials::new(&c.user, &c.password));
    }
    registry_client::Client::new(registry_client::Config::default())
        .remote(endpoint)
        .expect("remote")
}

pub(crate) fn client() -> reqwest::Client {
    testkit::http_client(None)
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    oci::Digest::sha256(bytes).to_string()
}

/// Lines of a docker-registry access log that answered `GET <path>` with 200.
pub(crate) fn upstream_gets(log: &str, path: &str) -> usize {
    log.lines()
        .filter(|l| l.contains(&format!("\"GET {path} ")) && l.contains("\" 200 "))
        .count()
}
