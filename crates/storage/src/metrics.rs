//! The store's metrics with Deckhouse's names, refreshed from the store on every scrape:
//! `d8_registry_store_{used,budget,reserve,filesystem_free,filesystem_capacity}_bytes{node}` and
//! `d8_registry_store_writable{node,reason}` (1 with `reason=""` while writes are accepted, 0
//! with the refusal's name while they are not). Labels are bounded: the node and two reasons.
//! For the `D8RegistryStorageNotReclaimed` alert: `d8_registry_storage_started_timestamp_seconds`
//! and `d8_registry_storage_last_collection_timestamp_seconds{node}` (absent until a collection
//! finished since the start).

use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::store::Store;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WritableLabels {
    node: String,
    reason: String,
}

/// The store's gauges.
#[derive(Debug)]
pub struct StoreMetrics {
    registry: Registry,
    store: Store,
    node: String,
    used: Family<NodeLabels, Gauge>,
    budget: Family<NodeLabels, Gauge>,
    reserve: Family<NodeLabels, Gauge>,
    free: Family<NodeLabels, Gauge>,
    capacity: Family<NodeLabels, Gauge>,
    writable: Family<WritableLabels, Gauge>,
    started: Family<NodeLabels, Gauge>,
    collected: Family<NodeLabels, Gauge>,
}

fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl StoreMetrics {
    /// Gauges of `store` on `node`.
    pub fn new(store: Store, node: &str) -> Self {
        let mut registry = Registry::default();
        let used = Family::<NodeLabels, Gauge>::default();
        let budget = Family::<NodeLabels, Gauge>::default();
        let reserve = Family::<NodeLabels, Gauge>::default();
        let free = Family::<NodeLabels, Gauge>::default();
        let capacity = Family::<NodeLabels, Gauge>::default();
        let writable = Family::<WritableLabels, Gauge>::default();
        // prometheus-client appends the `_bytes` unit suffix itself only with a unit; the
        // names are spelled out so they match Deckhouse's exactly.
        registry.register(
            "d8_registry_store_used_bytes",
            "Bytes taken by committed content and writes in progress",
            used.clone(),
        );
        registry.register(
            "d8_registry_store_budget_bytes",
            "storage.size in bytes (absent when unset)",
            budget.clone(),
        );
        registry.register(
            "d8_registry_store_reserve_bytes",
            "Bytes kept free on the filesystem",
            reserve.clone(),
        );
        registry.register(
            "d8_registry_store_filesystem_free_bytes",
            "Free bytes on the store's filesystem",
            free.clone(),
        );
        registry.register(
            "d8_registry_store_filesystem_capacity_bytes",
            "Size of the store's filesystem",
            capacity.clone(),
        );
        registry.register(
            "d8_registry_store_writable",
            "1 while the store accepts writes; 0 with the reason while it refuses them",
            writable.clone(),
        );
        let started = Family::<NodeLabels, Gauge>::default();
        let collected = Family::<NodeLabels, Gauge>::default();
        registry.register(
            "d8_registry_storage_started_timestamp_seconds",
            "When the replica's store was opened (Unix seconds)",
            started.clone(),
        );
        registry.register(
            "d8_registry_storage_last_collection_timestamp_seconds",
            "When the replica's last garbage collection finished (Unix seconds)",
            collected.clone(),
        );
        Self {
            started,
            collected,
            registry,
            store,
            node: node.to_owned(),
            used,
            budget,
            reserve,
            free,
            capacity,
            writable,
        }
    }

    fn refresh(&self) {
        let node = NodeLabels {
            node: self.node.clone(),
        };
        let usage = match self.store.usage() {
            Ok(usage) => usage,
            Err(error) => {
                tracing::warn!(%error, "cannot measure the store for metrics");
                return;
            }
        };
        self.used
            .get_or_create(&node)
            .set(gauge(usage.used + usage.pending));
        match usage.budget {
            Some(b) => {
                self.budget.get_or_create(&node).set(gauge(b));
            }
            None => self.budget.clear(),
        }
        self.reserve.get_or_create(&node).set(gauge(usage.reserve));
        self.free
            .get_or_create(&node)
            .set(gauge(usage.filesystem.free));
        self.capacity
            .get_or_create(&node)
            .set(gauge(usage.filesystem.capacity));
        self.started
            .get_or_create(&node)
            .set(gauge(self.store.started_at()));
        match self.store.collected_at() {
            Some(at) => {
                self.collected.get_or_create(&node).set(gauge(at));
            }
            None => self.collected.clear(),
        }
        self.writable.clear();
        let labels = WritableLabels {
            node: self.node.clone(),
            reason: usage
                .refusal
                .map(|r| r.as_str().to_owned())
                .unwrap_or_default(),
        };
        self.writable
            .get_or_create(&labels)
            .set(i64::from(usage.refusal.is_none()));
    }

    /// The text exposition, measured now.
    pub fn encode(&self) -> String {
        self.refresh();
        let mut out = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(%error, "cannot encode metrics");
        }
        out
    }
}

fn plain(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

/// Serves `/metrics` and `/healthz` over plain HTTP/1.1 until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<StoreMetrics>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "metrics accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
                let metrics = metrics.clone();
                async move {
                    let response = match request.uri().path() {
                        "/metrics" => {
                            let text = tokio::task::spawn_blocking(move || metrics.encode())
                                .await
                                .unwrap_or_default();
                            plain(StatusCode::OK, text)
                        }
                        "/healthz" => plain(StatusCode::OK, "ok".into()),
                        _ => plain(StatusCode::NOT_FOUND, "not found".into()),
                    };
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(std::time::Duration::from_secs(60), connection).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Limits;

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn gauges_follow_the_store_and_the_refusal_reason() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            dir.path(),
            Limits {
                budget: Some(1000),
                reserve: Some(0),
            },
        )
        .unwrap();
        let metrics = StoreMetrics::new(store.clone(), "master-0");
        let text = metrics.encode();
        assert_eq!(
            line(&text, "d8_registry_store_used_bytes{"),
            Some(r#"d8_registry_store_used_bytes{node="master-0"} 0"#),
            "{text}"
        );
        assert_eq!(
            line(&text, "d8_registry_store_budget_bytes{"),
            Some(r#"d8_registry_store_budget_bytes{node="master-0"} 1000"#)
        );
        assert_eq!(
            line(&text, "d8_registry_store_writable{"),
            Some(r#"d8_registry_store_writable{node="master-0",reason=""} 1"#)
        );
        for name in [
            "d8_registry_store_reserve_bytes{",
            "d8_registry_store_filesystem_free_bytes{",
            "d8_registry_store_filesystem_capacity_bytes{",
        ] {
            assert!(line(&text, name).is_some(), "{name} missing:\n{text}");
        }

        store.put_bytes(&[7u8; 1000], None).unwrap();
        let text = metrics.encode();
        assert_eq!(
            line(&text, "d8_registry_store_used_bytes{"),
            Some(r#"d8_registry_store_used_bytes{node="master-0"} 1000"#),
            "{text}"
        );
        let writable: Vec<_> = text
            .lines()
            .filter(|l| l.starts_with("d8_registry_store_writable{"))
            .collect();
        assert_eq!(
            writable,
            [r#"d8_registry_store_writable{node="master-0",reason="BudgetExhausted"} 0"#],
            "{text}"
        );
    }

    #[test]
    fn collection_timestamps_appear_once_a_collection_finished() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            dir.path(),
            Limits {
                budget: None,
                reserve: Some(0),
            },
        )
        .unwrap();
        let metrics = StoreMetrics::new(store.clone(), "master-0");
        let text = metrics.encode();
        let started = line(&text, "d8_registry_storage_started_timestamp_seconds{")
            .expect("started")
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .expect("a number");
        assert!(started > 1_700_000_000, "{text}");
        assert_eq!(
            line(
                &text,
                "d8_registry_storage_last_collection_timestamp_seconds{"
            ),
            None,
            "no collection yet: {text}"
        );
        let options = crate::gc::Options {
            root: oci::Repository::parse("system/deckhouse").unwrap(),
            deployed: Some("v1.0.0".into()),
            previous: None,
            keep: Some(registry_plan::expected::ExpectedSet::default()),
            dry_run: false,
            grace: std::time::Duration::ZERO,
        };
        crate::gc::collect(&store, &options).unwrap();
        let text = metrics.encode();
        let collected = line(
            &text,
            "d8_registry_storage_last_collection_timestamp_seconds{",
        )
        .expect("collected")
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse::<u64>().ok())
        .expect("a number");
        assert!(collected >= started, "{text}");
    }
}
