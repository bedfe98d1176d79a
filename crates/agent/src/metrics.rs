//! The agent's metrics, with Deckhouse's names. Label values are bounded: routing kinds,
//! results, configured target names and origins — never a repository, digest or credential.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::source::Origin;

/// How a request ended (`result` label of `d8_registry_agent_requests_total`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Outcome {
    /// A target answered (2xx/3xx, or a relayed 4xx other than 404).
    served,
    /// A target answered 404; relayed, never retried elsewhere.
    not_found,
    /// The last target's 5xx was relayed, or a blob transfer was broken off (no target could
    /// finish it, or its bytes did not match the digest).
    unavailable,
    /// No route: loop, no layout, no upstream for a sibling.
    unroutable,
    /// Every target failed.
    all_failed,
}

/// Why the agent moved to the next target (`reason` label of `_failovers_total`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum FailoverReason {
    /// Transport error or timeout.
    unreachable,
    /// 401/403 to our own credentials.
    unauthorized,
    /// 5xx with targets left.
    server_error,
    /// A blob stream broke mid-body; the rest was asked of the next target.
    interrupted,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    kind: String,
    result: Outcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailoverLabels {
    target: String,
    reason: FailoverReason,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetLabel {
    target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OriginLabel {
    origin: &'static str,
}

/// Reads the token exchanges counted so far: (succeeded, failed).
pub type TokenSource = Box<dyn Fn() -> (u64, u64) + Send + Sync>;

/// The agent's metric families and their registry.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    failovers: Family<FailoverLabels, Counter>,
    digest_mismatches: Family<TargetLabel, Counter>,
    resumes: Family<TargetLabel, Counter>,
    avoidances: Family<TargetLabel, Counter>,
    avoided: Family<TargetLabel, Gauge>,
    token_exchanges: Family<ResultLabel, Counter>,
    layout_origin: Family<OriginLabel, Gauge>,
    tokens: std::sync::Mutex<(Option<TokenSource>, (u64, u64))>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let failovers = Family::<FailoverLabels, Counter>::default();
        let token_exchanges = Family::<ResultLabel, Counter>::default();
        let digest_mismatches = Family::<TargetLabel, Counter>::default();
        let resumes = Family::<TargetLabel, Counter>::default();
        let avoidances = Family::<TargetLabel, Counter>::default();
        let avoided = Family::<TargetLabel, Gauge>::default();
        let layout_origin = Family::<OriginLabel, Gauge>::default();
        registry.register(
            "d8_registry_agent_requests",
            "Registry requests handled by the agent, by routing kind and result",
            requests.clone(),
        );
        registry.register(
            "d8_registry_agent_failovers",
            "Moves from one target to the next, by target and reason",
            failovers.clone(),
        );
        registry.register(
            "d8_registry_agent_digest_mismatches",
            "Blobs a target served with bytes that do not hash to their digest (the response \
             was broken off), by target",
            digest_mismatches.clone(),
        );
        registry.register(
            "d8_registry_agent_resumes",
            "Blob streams continued mid-body with a Range request, by the target that continued",
            resumes.clone(),
        );
        registry.register(
            "d8_registry_agent_target_avoidances",
            "Times a target that refused, reset or timed out was put behind the others for a \
             window (10 s doubling to 5 min while it keeps failing), by target",
            avoidances.clone(),
        );
        registry.register(
            "d8_registry_agent_target_avoided",
            "1 while a target that failed to answer is tried after the others (until it answers \
             a probe or a request), 0 once it is back in its place, by target",
            avoided.clone(),
        );
        registry.register(
            "d8_registry_agent_token_exchanges",
            "Token requests made to registries' token services, by result",
            token_exchanges.clone(),
        );
        registry.register(
            "d8_registry_agent_layout_origin",
            "Where the applied layout came from: 1 for the current origin",
            layout_origin.clone(),
        );
        Self {
            registry,
            requests,
            failovers,
            digest_mismatches,
            resumes,
            avoidances,
            avoided,
            token_exchanges,
            layout_origin,
            tokens: std::sync::Mutex::new((None, (0, 0))),
        }
    }
}

impl Metrics {
    /// Counts a finished request.
    pub fn request(&self, kind: &str, result: Outcome) {
        self.requests
            .get_or_create(&RequestLabels {
                kind: kind.to_owned(),
                result,
            })
            .inc();
    }

    /// Counts a failover away from `target` (a backend name, route match or host).
    pub fn failover(&self, target: &str, reason: FailoverReason) {
        self.failovers
            .get_or_create(&FailoverLabels {
                target: target.to_owned(),
                reason,
            })
            .inc();
    }

    /// Counts a blob `target` served with the wrong bytes.
    pub fn digest_mismatch(&self, target: &str) {
        self.digest_mismatches
            .get_or_create(&TargetLabel {
                target: target.to_owned(),
            })
            .inc();
    }

    /// Counts a blob stream `target` continued after another broke.
    pub fn resumed(&self, target: &str) {
        self.resumes
            .get_or_create(&TargetLabel {
                target: target.to_owned(),
            })
            .inc();
    }

    /// Counts a window in which `target` is tried after the others, and marks it avoided.
    pub fn avoided(&self, target: &str) {
        let label = TargetLabel {
            target: target.to_owned(),
        };
        self.avoidances.get_or_create(&label).inc();
        self.avoided.get_or_create(&label).set(1);
    }

    /// `target` is back in its place.
    pub fn back(&self, target: &str) {
        self.avoided
            .get_or_create(&TargetLabel {
                target: target.to_owned(),
            })
            .set(0);
    }

    /// Where token exchanges are counted (the upstream client); read at every scrape.
    pub fn count_tokens_from(&self, source: TokenSource) {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner()).0 = Some(source);
    }

    /// Brings `_token_exchanges_total` up to date with the source.
    fn refresh_tokens(&self) {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let (source, seen) = &mut *tokens;
        let Some(source) = source else { return };
        let (ok, failed) = source();
        for (result, now, before) in [("ok", ok, &mut seen.0), ("error", failed, &mut seen.1)] {
            let counter = self.token_exchanges.get_or_create(&ResultLabel {
                result: result.to_owned(),
            });
            counter.inc_by(now.saturating_sub(*before));
            *before = now.max(*before);
        }
    }

    /// Sets the origin gauge: 1 for `origin`, 0 for the others (all 0 without a layout).
    pub fn layout_origin(&self, origin: Option<Origin>) {
        for candidate in Origin::ALL {
            let value = i64::from(Some(candidate) == origin);
            self.layout_origin
                .get_or_create(&OriginLabel {
                    origin: candidate.as_str(),
                })
                .set(value);
        }
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        self.refresh_tokens();
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_are_deckhouses() {
        let metrics = Metrics::default();
        metrics.request("Primary", Outcome::served);
        metrics.request("Primary", Outcome::served);
        metrics.failover("Storage", FailoverReason::unauthorized);
        metrics.failover("Storage", FailoverReason::interrupted);
        metrics.digest_mismatch("mirror:5000");
        metrics.resumed("upstream:443");
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let seen = calls.clone();
        metrics.count_tokens_from(Box::new(move || {
            let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            (n, 0)
        }));
        metrics.layout_origin(Some(Origin::Cache));
        let text = metrics.encode();
        assert!(
            text.contains(r#"d8_registry_agent_requests_total{kind="Primary",result="served"} 2"#),
            "{text}"
        );
        assert!(text.contains(
            r#"d8_registry_agent_failovers_total{target="Storage",reason="unauthorized"} 1"#
        ));
        assert!(text.contains(
            r#"d8_registry_agent_failovers_total{target="Storage",reason="interrupted"} 1"#
        ));
        assert!(
            text.contains(r#"d8_registry_agent_digest_mismatches_total{target="mirror:5000"} 1"#)
        );
        assert!(text.contains(r#"d8_registry_agent_resumes_total{target="upstream:443"} 1"#));
        assert!(text.contains(r#"d8_registry_agent_token_exchanges_total{result="ok"} 1"#));
        let text = metrics.encode();
        assert!(
            text.contains(r#"d8_registry_agent_token_exchanges_total{result="ok"} 2"#),
            "{text}"
        );
        assert!(text.contains(r#"d8_registry_agent_token_exchanges_total{result="error"} 0"#));
        assert!(text.contains(r#"d8_registry_agent_layout_origin{origin="Cache"} 1"#));
        assert!(text.contains(r#"d8_registry_agent_layout_origin{origin="API"} 0"#));
        metrics.avoided("10.0.0.4:5001");
        let text = metrics.encode();
        assert!(
            text.contains(r#"d8_registry_agent_target_avoidances_total{target="10.0.0.4:5001"} 1"#)
        );
        assert!(text.contains(r#"d8_registry_agent_target_avoided{target="10.0.0.4:5001"} 1"#));
        metrics.back("10.0.0.4:5001");
        let text = metrics.encode();
        assert!(text.contains(r#"d8_registry_agent_target_avoided{target="10.0.0.4:5001"} 0"#));
    }
}
