//! Client-wide settings: timeouts, redirect limit, user agent.

use std::time::Duration;

/// Every network wait the client makes, bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect plus TLS handshake.
    pub connect: Duration,
    /// From sending a request to receiving its status line and headers (per redirect hop).
    pub response_headers: Duration,
    /// Longest gap between two body chunks while the consumer is waiting for data: past it the
    /// body ends with [`Error::Stalled`](crate::Error::Stalled). Time the consumer spends not
    /// asking for data (back-pressure from a slow client) does not count.
    pub stall: Duration,
    /// Optional deadline for one request including its whole body (the agent's
    /// `--forward-timeout`); `None` for none.
    pub total: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            response_headers: Duration::from_secs(30),
            stall: Duration::from_secs(30),
            total: None,
        }
    }
}

/// The slowest a body may arrive: fewer than `bytes` in `window` of waiting for data ends it
/// with [`Error::TooSlow`](crate::Error::TooSlow). Like the stall window, only time the consumer
/// spends waiting for data counts, so a slow client never ends its own upstream transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinThroughput {
    /// Bytes that must arrive in each window.
    pub bytes: u64,
    /// The window.
    pub window: Duration,
}

impl MinThroughput {
    /// The floor of the node agent and the cache replica unless configured otherwise: 32 KiB in
    /// 30 s (about 1 KiB/s). A link that slow moves a 100 MiB layer in a day; anything slower is
    /// a connection to end so that the next attempt can go elsewhere.
    pub const DEFAULT: Self = Self {
        bytes: 32 * 1024,
        window: Duration::from_secs(30),
    };
}

/// Settings shared by every endpoint of one [`Client`](crate::Client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The timeouts.
    pub timeouts: Timeouts,
    /// Most redirects followed for one request.
    pub max_redirects: usize,
    /// `User-Agent` sent when the caller gives none.
    pub user_agent: String,
    /// Largest manifest [`Remote::get_manifest`](crate::Remote::get_manifest) reads (the
    /// distribution-spec asks registries to accept at least 4 MiB).
    pub max_manifest_bytes: u64,
    /// Speak HTTP/1.1 only, one connection per request in flight, even to registries that offer
    /// HTTP/2. A relay (the node agent) wants it: concurrent blob streams then decrypt on every
    /// core, and one slow consumer's HTTP/2 flow-control window never holds up the others.
    pub http1_only: bool,
    /// The minimum-throughput watchdog on response bodies; `None` for none (only the stall
    /// window then ends a crawling body).
    pub min_throughput: Option<MinThroughput>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            timeouts: Timeouts::default(),
            max_redirects: 5,
            user_agent: concat!("d8-registry-client/", env!("CARGO_PKG_VERSION")).to_owned(),
            max_manifest_bytes: 4 << 20,
            http1_only: false,
            min_throughput: None,
        }
    }
}
