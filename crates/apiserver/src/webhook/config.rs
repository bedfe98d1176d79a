//! Webhook configurations read from stored `ValidatingWebhookConfiguration` and
//! `MutatingWebhookConfiguration` objects, and which of their webhooks a request calls.
//!
//! Pure: no I/O. Defaults are those of `admissionregistration.k8s.io/v1`.

use super::conditions::Condition;
use crate::selector::LabelSelector;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Validating or mutating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookKind {
    Validating,
    Mutating,
}

/// Where a webhook is reached (`clientConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Url(String),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
    /// Neither `url` nor `service`.
    Missing,
}

/// How to reach a webhook: where, and the CA bundle to trust (PEM), if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientConfig {
    pub(crate) target: Target,
    pub(crate) ca_bundle: Option<Vec<u8>>,
}

impl ClientConfig {
    /// Reads a `clientConfig` (of a webhook, or of a CRD's conversion webhook).
    pub(crate) fn parse(c: Option<&Value>) -> Self {
        let s = |v: Option<&Value>, p: &str| {
            v.and_then(|v| v.pointer(p))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let target = if let Some(url) = s(c, "/url") {
            Target::Url(url)
        } else if let Some(svc) = c.and_then(|c| c.get("service")) {
            Target::Service {
                namespace: s(Some(svc), "/namespace").unwrap_or_default(),
                name: s(Some(svc), "/name").unwrap_or_default(),
                path: s(Some(svc), "/path").unwrap_or_else(|| "/".into()),
                port: svc
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            }
        } else {
            Target::Missing
        };
        let ca_bundle = s(c, "/caBundle").and_then(|b| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(b).ok()
        });
        Self { target, ca_bundle }
    }
}

/// One rule: operations × groups × versions × resources, in a scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    operations: Vec<String>,
    groups: Vec<String>,
    versions: Vec<String>,
    resources: Vec<String>,
    scope: String,
}

/// One webhook of a configuration.
#[derive(Debug, Clone)]
pub(crate) struct Hook {
    pub(crate) kind: HookKind,
    /// The configuration's name (webhooks are called in the order of these names).
    pub(crate) configuration: String,
    pub(crate) name: String,
    pub(crate) client: ClientConfig,
    rules: Vec<Rule>,
    /// `failurePolicy: Fail` (the default); `Ignore` admits when the call fails.
    pub(crate) fail_closed: bool,
    /// `matchPolicy: Equivalent` (the default): other versions of the resource match too.
    pub(crate) equivalent: bool,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
    /// `sideEffects`: `None` and `NoneOnDryRun` may be called for dry runs.
    pub(crate) dry_run_safe: bool,
    pub(crate) timeout: Duration,
    pub(crate) review_versions: Vec<String>,
    /// `matchConditions`, compiled.
    pub(crate) conditions: Arc<[Condition]>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks): called again when a later webhook
    /// changed the object.
    pub(crate) reinvoke: bool,
}

/// What a request is, for matching.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub(crate) operation: &'a str,
    pub(crate) group: &'a str,
    pub(crate) version: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: &'a str,
    pub(crate) namespaced: bool,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The webhooks of one stored configuration object.
pub(crate) fn hooks_of(kind: HookKind, cfg: &Value) -> Vec<Hook> {
    let configuration = crate::meta::get(cfg, "name")
        .unwrap_or_default()
        .to_string();
    let Some(list) = cfg.get("webhooks").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .map(|w| {
            let s = |p: &str| w.get(p).and_then(Value::as_str);
            let rules = w
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|r| Rule {
                    operations: strings(r.get("operations")),
                    groups: strings(r.get("apiGroups")),
                    versions: strings(r.get("apiVersions")),
                    resources: strings(r.get("resources")),
                    scope: r
                        .get("scope")
                        .and_then(Value::as_str)
                        .unwrap_or("*")
                        .to_string(),
                })
                .collect();
            let timeout = w
                .get("timeoutSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(10)
                .clamp(1, 30);
            Hook {
                kind,
                configuration: configuration.clone(),
                name: s("name").unwrap_or_default().to_string(),
                client: ClientConfig::parse(w.get("clientConfig")),
                rules,
                fail_closed: s("failurePolicy") != Some("Ignore"),
                equivalent: s("matchPolicy") != Some("Exact"),
                namespace_selector: LabelSelector::from_object(w.get("namespaceSelector")),
                object_selector: LabelSelector::from_object(w.get("objectSelector")),
                dry_run_safe: matches!(s("sideEffects"), Some("None" | "NoneOnDryRun")),
                timeout: Duration::from_secs(timeout),
                review_versions: strings(w.get("admissionReviewVersions")),
                conditions: w
                    .get("matchConditions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(Condition::parse)
                    .collect(),
                reinvoke: kind == HookKind::Mutating && s("reinvocationPolicy") == Some("IfNeeded"),
            }
        })
        .collect()
}

fn has(list: &[String], v: &str) -> bool {
    list.iter().any(|x| x == "*" || x == v)
}

fn resource_matches(patterns: &[String], resource: &str, sub: &str) -> bool {
    patterns.iter().any(|p| {
        let (pr, ps) = p.split_once('/').unwrap_or((p, ""));
        let r_ok = pr == "*" || pr == resource;
        let s_ok = if ps.is_empty() {
            sub.is_empty()
        } else {
            ps == "*" || ps == sub
        };
        r_ok && s_ok
    })
}

impl Rule {
    fn matches(&self, r: &Request<'_>) -> bool {
        let scope_ok = match self.scope.as_str() {
            "Cluster" => !r.namespaced,
            "Namespaced" => r.namespaced,
            _ => true,
        };
        scope_ok
            && has(&self.operations, r.operation)
            && has(&self.groups, r.group)
            && has(&self.versions, r.version)
            && resource_matches(&self.resources, r.resource, r.subresource)
    }
}

impl Hook {
    /// Whether a rule of the webhook covers the request exactly as sent.
    pub(crate) fn rules_match(&self, r: &Request<'_>) -> bool {
        self.rules.iter().any(|rule| rule.matches(r))
    }

    /// Whether the selectors let the request through: the object selector on the new or the
    /// old object, the namespace selector on the namespace's labels (a Namespace's own labels;
    /// other cluster-scoped objects always pass).
    pub(crate) fn selectors_match(
        &self,
        new: Option<&Value>,
        old: Option<&Value>,
        namespace: Option<&Value>,
        is_namespace: bool,
    ) -> bool {
        let object_ok = self.object_selector.as_ref().is_none_or(|s| {
            [new, old]
                .into_iter()
                .flatten()
                .any(|o| s.matches(o) && !o.is_null())
        });
        let ns_ok = match &self.namespace_selector {
            None => true,
            Some(s) if is_namespace => [new, old].into_iter().flatten().any(|o| s.matches(o)),
            Some(s) => namespace.is_none_or(|n| s.matches(n)),
        };
        object_ok && ns_ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req<'a>(op: &'a str, version: &'a str, resource: &'a str, sub: &'a str) -> Request<'a> {
        Request {
            operation: op,
            group: "example.io",
            version,
            resource,
            subresource: sub,
            namespaced: true,
        }
    }

    fn hook(rule: Value) -> Hook {
        let cfg = json!({"metadata": {"name": "c"}, "webhooks": [{"name": "w.example.io", "rules": [rule]}]});
        hooks_of(HookKind::Validating, &cfg).remove(0)
    }

    #[test]
    fn rules_match_as_kube_apiserver_matches_them() {
        let base = json!({"operations": ["CREATE"], "apiGroups": ["example.io"], "apiVersions": ["v1"], "resources": ["widgets"]});
        let table: &[(Value, Request<'_>, bool)] = &[
            (base.clone(), req("CREATE", "v1", "widgets", ""), true),
            (base.clone(), req("UPDATE", "v1", "widgets", ""), false),
            (base.clone(), req("CREATE", "v2", "widgets", ""), false),
            (base.clone(), req("CREATE", "v1", "gadgets", ""), false),
            (
                base.clone(),
                req("CREATE", "v1", "widgets", "status"),
                false,
            ),
            (
                json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}),
                req("DELETE", "v9", "gadgets", ""),
                true,
            ),
            (
                json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}),
                req("UPDATE", "v1", "gadgets", "status"),
                false,
            ),
            (
                json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}),
                req("UPDATE", "v1", "gadgets", "status"),
                true,
            ),
            (
                json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["widgets/status"]}),
                req("UPDATE", "v1", "widgets", "status"),
                true,
            ),
            (
                json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"}),
                req("CREATE", "v1", "widgets", ""),
                false,
            ),
            (
                json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"}),
                req("CREATE", "v1", "widgets", ""),
                true,
            ),
        ];
        for (rule, r, want) in table {
            assert_eq!(hook(rule.clone()).rules_match(r), *want, "{rule} {r:?}");
        }
    }

    #[test]
    fn defaults_are_those_of_admissionregistration_v1() {
        let h = hook(json!({}));
        assert!(h.fail_closed && h.equivalent && !h.dry_run_safe);
        assert_eq!(h.timeout, Duration::from_secs(10));
        assert_eq!(h.client.target, Target::Missing);
        let cfg = json!({"metadata": {"name": "c"}, "webhooks": [{
            "name": "w", "failurePolicy": "Ignore", "matchPolicy": "Exact", "sideEffects": "None",
            "timeoutSeconds": 3,
            "clientConfig": {"service": {"namespace": "d8-system", "name": "webhook-handler"}, "caBundle": "cGVt"}}]});
        let h = hooks_of(HookKind::Mutating, &cfg).remove(0);
        assert!(!h.fail_closed && !h.equivalent && h.dry_run_safe);
        assert_eq!(h.timeout, Duration::from_secs(3));
        assert_eq!(
            h.client.target,
            Target::Service {
                namespace: "d8-system".into(),
                name: "webhook-handler".into(),
                path: "/".into(),
                port: 443
            }
        );
        assert_eq!(h.client.ca_bundle.as_deref(), Some(&b"pem"[..]));
    }

    #[test]
    fn selectors_look_at_either_object_and_at_the_namespace() {
        let labelled = |l: Value| json!({"metadata": {"labels": l}});
        let cfg = json!({"metadata": {"name": "c"}, "webhooks": [{"name": "w",
            "objectSelector": {"matchLabels": {"app": "a"}},
            "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}}]});
        let h = hooks_of(HookKind::Validating, &cfg).remove(0);
        let a = labelled(json!({"app": "a"}));
        let b = labelled(json!({"app": "b"}));
        let dev = labelled(json!({"env": "dev"}));
        let prod = labelled(json!({"env": "prod"}));
        assert!(h.selectors_match(Some(&a), None, Some(&prod), false));
        assert!(h.selectors_match(Some(&b), Some(&a), Some(&prod), false));
        assert!(!h.selectors_match(Some(&b), None, Some(&prod), false));
        assert!(!h.selectors_match(Some(&a), None, Some(&dev), false));
        // Cluster-scoped objects always pass the namespace selector.
        assert!(h.selectors_match(Some(&a), None, None, false));
    }
}
