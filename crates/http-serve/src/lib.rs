//! The accept loop shared by the platform's HTTP servers (the node agent, the cache replicas):
//! plain TCP or TLS with a handshake timeout, HTTP/1.1 and HTTP/2 (whatever the acceptor's
//! ALPN offers), and a graceful shutdown that lets requests in flight finish.
//!
//! It knows nothing of what is served: the caller builds one service per connection from what
//! the connection tells ([`Connection`]). Requests with oversized headers are answered with 431
//! on both protocols before they reach the service ([`limits`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

pub mod ca;
pub mod limits;
pub mod tls;
pub use limits::{Guarded, Lingering, MAX_HEADER_BYTES};

/// How long a client may take over the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long requests in flight may take to finish after shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What a service may want to know about its connection.
#[derive(Clone, Debug)]
pub struct Connection {
    /// The client's address.
    pub peer: SocketAddr,
    /// Whether the client presented a certificate the acceptor verified.
    pub client_certificate: bool,
    /// The certificate chain the client presented (end entity first); empty without one.
    pub client_chain: Vec<tokio_rustls::rustls::pki_types::CertificateDer<'static>>,
}

/// Per-connection buffer bounds, for servers that hold many slow clients at once. Unset, hyper
/// queues up to 16 body chunks (at most about 400 KiB) of a response per connection, and rustls
/// up to 64 KiB of encrypted records.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bounds {
    /// hyper's HTTP/1 buffer cap: a request head must fit, and a response body stops being
    /// polled once this much waits for the socket (hyper's floor is 8 KiB).
    pub http1_buffer: Option<usize>,
    /// rustls' cap on the encrypted records it queues for a TLS client: what a stalled TLS client
    /// pins beyond hyper's buffer. Keep it at two records or more: a cap of one record splits
    /// every record that meets a full queue in two (a full one and a few bytes).
    pub tls_queue: Option<usize>,
}

impl Bounds {
    /// For servers that stream large bodies to many clients at once (a cache replica's TLS
    /// read listener): hyper queues about one TLS record of a response, rustls about
    /// two once encrypted. Whatever is queued beyond that only sits in memory for as long as a
    /// client is slow to read.
    ///
    /// rustls' own default (64 KiB of records) cost 29 KiB more per stalled stream, for
    /// no throughput; one record (17 000 bytes) splits every record that meets a full queue into
    /// a full one and a sliver, 9 % more CPU per GiB (`agent_pull` bench, bench/README.md).
    pub const STREAMING: Self = Self {
        http1_buffer: Some(16 * 1024),
        tls_queue: Some(33 * 1024),
    };
}

/// The connection builder for `bounds`: HTTP/1.1 and HTTP/2, with HTTP/2 header blocks decoded
/// up to [`limits::H2_HEADER_LIST_CEILING`] so that [`Guarded`] answers oversized ones.
pub fn builder(bounds: Bounds) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if let Some(size) = bounds.http1_buffer {
        builder.http1().max_buf_size(size.max(8192));
    }
    builder
        .http2()
        .max_header_list_size(limits::H2_HEADER_LIST_CEILING);
    builder
}

/// The next connection, with `TCP_NODELAY` set, or `None` once `shutdown` resolves. A failed
/// accept (out of descriptors, a client gone before it was accepted) is logged and retried after
/// 50 ms rather than ending the server.
pub async fn accept(
    listener: &TcpListener,
    shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
) -> Option<(tokio::net::TcpStream, SocketAddr)> {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    return Some((stream, peer));
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            () = &mut *shutdown => return None,
        }
    }
}

/// Serves connections from `listener` until `shutdown` resolves, then lets requests in flight
/// finish (up to 30 s). `service` makes the service for one connection.
pub async fn serve<F, S, B>(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    bounds: Bounds,
    service: F,
    shutdown: impl std::future::Future<Output = ()>,
) where
    F: Fn(Connection) -> S + Clone + Send + 'static,
    S: hyper::service::Service<
            http::Request<Incoming>,
            Response = http::Response<B>,
            Error = Infallible,
        > + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let graceful = GracefulShutdown::new();
    let builder = builder(bounds);
    tokio::pin!(shutdown);
    while let Some((stream, peer)) = accept(&listener, &mut shutdown).await {
        let service = service.clone();
        let builder = builder.clone();
        let tls = tls.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let Some(acceptor) = tls else {
                let connection = Connection {
                    peer,
                    client_certificate: false,
                    client_chain: Vec::new(),
                };
                let serving = builder.serve_connection(
                    TokioIo::new(Lingering::new(stream)),
                    Guarded(service(connection)),
                );
                let _ = watcher.watch(serving.into_owned()).await;
                return;
            };
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(mut stream)) => {
                    if let Some(limit) = bounds.tls_queue {
                        stream.get_mut().1.set_buffer_limit(Some(limit));
                    }
                    let client_chain = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .map(|c| c.iter().map(|c| c.clone().into_owned()).collect::<Vec<_>>())
                        .unwrap_or_default();
                    let connection = Connection {
                        peer,
                        client_certificate: !client_chain.is_empty(),
                        client_chain,
                    };
                    let serving = builder.serve_connection(
                        TokioIo::new(Lingering::new(stream)),
                        Guarded(service(connection)),
                    );
                    let _ = watcher.watch(serving.into_owned()).await;
                }
                Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
}
