//! One replica as a process runs it: the store opened (leftovers of a killed run removed), the
//! read and write listeners bound, and a handle that stops both gracefully.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::auth::Accounts;
use crate::error::Error;
use crate::metrics::StoreMetrics;
use crate::server::{self, Tls};
use crate::service::{Listener, Registry, Settings, Upstream};
use crate::store::{Limits, Store};

/// Everything a replica needs to start.
#[derive(Clone, Debug)]
pub struct Config {
    /// The store's root directory.
    pub data_dir: PathBuf,
    /// The read ("5001") listener's address.
    pub read_address: SocketAddr,
    /// The write ("5003") listener's address.
    pub write_address: SocketAddr,
    /// TLS of both listeners; plain HTTP without it. A client CA in it makes the write
    /// listener the publish endpoint (client certificate *and* write credentials required);
    /// the read listener never asks for a client certificate.
    pub tls: Option<Tls>,
    /// Accounts of the read listener (pull, and push accounts, which may also pull).
    pub read_accounts: Accounts,
    /// Accounts of the write listener (push).
    pub write_accounts: Accounts,
    /// The upstream filled from while one is held.
    pub upstream: Option<Upstream>,
    /// Budget and reserve.
    pub limits: Limits,
    /// Registry settings.
    pub settings: Settings,
    /// The node (the `node` label of the metrics).
    pub node: String,
    /// Where `/metrics` is served (plain HTTP); none serves no metrics.
    pub metrics_address: Option<SocketAddr>,
}

/// A running replica.
#[derive(Debug)]
pub struct Running {
    /// The shared registry state (store, fills, upstream).
    pub registry: Registry,
    /// Where the read listener is bound.
    pub read_address: SocketAddr,
    /// Where the write listener is bound.
    pub write_address: SocketAddr,
    /// Where `/metrics` is served, if it is.
    pub metrics_address: Option<SocketAddr>,
    stops: Vec<oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

async fn bind(address: SocketAddr, what: &str) -> Result<TcpListener, Error> {
    TcpListener::bind(address)
        .await
        .map_err(|e| Error::Config(format!("cannot listen on {address} ({what}): {e}")))
}

/// Opens the store and starts both listeners.
pub async fn start(config: Config) -> Result<Running, Error> {
    let data_dir = config.data_dir.clone();
    let limits = config.limits.clone();
    let store = tokio::task::spawn_blocking(move || Store::open(&data_dir, limits))
        .await
        .map_err(|e| Error::Config(format!("opening the store: {e}")))??;
    let registry = Registry::new(store, config.upstream.clone(), config.settings.clone());
    let acceptor = config.tls.as_ref().map(server::acceptor).transpose()?;
    // Nothing fronts the read listener and nobody needs a certificate there.
    let read_acceptor = match &config.tls {
        Some(tls) if tls.client_ca_pem.is_some() || tls.ingress_client_ca.is_some() => {
            Some(server::acceptor(&Tls {
                client_ca_pem: None,
                ingress_client_ca: None,
                ..tls.clone()
            })?)
        }
        _ => acceptor.clone(),
    };
    let require_client_certificate = config
        .tls
        .as_ref()
        .is_some_and(|t| t.client_ca_pem.is_some());
    let read = bind(config.read_address, "read listener").await?;
    let write = bind(config.write_address, "write listener").await?;
    let read_address = read
        .local_addr()
        .map_err(|e| Error::Config(format!("read listener: {e}")))?;
    let write_address = write
        .local_addr()
        .map_err(|e| Error::Config(format!("write listener: {e}")))?;
    let metrics = match config.metrics_address {
        Some(address) => Some(bind(address, "metrics").await?),
        None => None,
    };
    let metrics_address = metrics
        .as_ref()
        .map(TcpListener::local_addr)
        .transpose()
        .map_err(|e| Error::Config(format!("metrics listener: {e}")))?;
    let mut stops = Vec::new();
    let mut tasks = Vec::new();
    if let Some(socket) = metrics {
        let gauges = Arc::new(StoreMetrics::new(registry.store().clone(), &config.node));
        let (tx, rx) = oneshot::channel::<()>();
        stops.push(tx);
        tasks.push(tokio::spawn(crate::metrics::serve(socket, gauges, async {
            let _ = rx.await;
        })));
    }
    for (socket, acceptor, listener) in [
        (
            read,
            read_acceptor,
            Listener::read(registry.clone(), config.read_accounts.clone()),
        ),
        (
            write,
            acceptor,
            Listener::write(
                registry.clone(),
                config.write_accounts.clone(),
                require_client_certificate,
            ),
        ),
    ] {
        let (tx, rx) = oneshot::channel::<()>();
        stops.push(tx);
        tasks.push(tokio::spawn(server::serve(
            socket,
            acceptor,
            listener,
            async {
                let _ = rx.await;
            },
        )));
    }
    Ok(Running {
        registry,
        read_address,
        write_address,
        metrics_address,
        stops,
        tasks,
    })
}

impl Running {
    /// Stops accepting, lets requests in flight finish (bounded), and returns.
    pub async fn stop(mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_address_is_a_clear_error() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().join("data"),
            read_address: taken.local_addr().unwrap(),
            write_address: "127.0.0.1:0".parse().unwrap(),
            tls: None,
            read_accounts: Accounts::open(),
            write_accounts: Accounts::open(),
            upstream: None,
            limits: Limits::default(),
            settings: Settings::default(),
            node: "n".into(),
            metrics_address: None,
        };
        let error = start(config).await.unwrap_err().to_string();
        assert!(
            error.contains("cannot listen on") && error.contains("read listener"),
            "{error}"
        );
    }
}
