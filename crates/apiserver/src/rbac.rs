//! Authorization by the RBAC objects the server stores (ClusterRoles, Roles and their bindings),
//! as kube-apiserver's RBAC authorizer decides: a request is allowed when a binding names the
//! subject (its user, one of its groups, or its ServiceAccount) and the role it refers to has a
//! rule granting the request. Nothing denies: no grant is a denial.
//!
//! Pure: the objects come in as JSON, the verdict goes out with Kubernetes' reason text.

use serde_json::Value;

use crate::auth::{Access, Rule};

/// Who asks: a user name and its groups (as a TokenReview returned them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub(crate) user: &'a str,
    pub(crate) groups: &'a [String],
}

/// The RBAC objects, as stored.
#[derive(Debug, Default)]
pub(crate) struct Policy {
    pub(crate) cluster_roles: Vec<Value>,
    pub(crate) roles: Vec<Value>,
    pub(crate) cluster_role_bindings: Vec<Value>,
    pub(crate) role_bindings: Vec<Value>,
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// An RBAC `PolicyRule` as one of our rules.
fn rule(v: &Value) -> Rule {
    Rule {
        verbs: str_list(&v["verbs"]),
        api_groups: str_list(&v["apiGroups"]),
        resources: str_list(&v["resources"]),
        resource_names: str_list(&v["resourceNames"]),
        namespaces: Vec::new(),
        non_resource_urls: str_list(&v["nonResourceURLs"]),
    }
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

fn namespace(o: &Value) -> &str {
    o["metadata"]["namespace"].as_str().unwrap_or_default()
}

/// Whether one of the binding's subjects is `subject`, and which (`User "x"`, for the reason).
fn bound(binding: &Value, subject: &Subject<'_>) -> Option<String> {
    binding["subjects"].as_array()?.iter().find_map(|s| {
        let kind = s["kind"].as_str()?;
        let n = s["name"].as_str()?;
        let matches = match kind {
            "User" => n == subject.user,
            "Group" => subject.groups.iter().any(|g| g == n),
            "ServiceAccount" => {
                let ns = s["namespace"].as_str().unwrap_or(namespace(binding));
                subject.user == format!("system:serviceaccount:{ns}:{n}")
            }
            _ => false,
        };
        matches.then(|| format!("{kind} {n:?}"))
    })
}

impl Policy {
    fn role_rules(&self, kind: &str, ns: &str, role: &str) -> Vec<Rule> {
        let found = match kind {
            "ClusterRole" => self.cluster_roles.iter().find(|r| name(r) == role),
            "Role" => self
                .roles
                .iter()
                .find(|r| name(r) == role && namespace(r) == ns),
            _ => None,
        };
        found
            .and_then(|r| r["rules"].as_array())
            .map(|rules| rules.iter().map(rule).collect())
            .unwrap_or_default()
    }

    /// The reason `subject` may do `access` (`RBAC: allowed by ClusterRoleBinding "b" of
    /// ClusterRole "r" to User "u"`), or `None` when no binding grants it.
    pub(crate) fn allows(&self, subject: &Subject<'_>, access: &Access<'_>) -> Option<String> {
        let in_namespace = match access {
            Access::Resource(a) => a.namespace,
            Access::NonResource { .. } => None,
        };
        let cluster = self
            .cluster_role_bindings
            .iter()
            .map(|b| (b, "ClusterRoleBinding"));
        // RoleBindings grant only inside their namespace, and never non-resource URLs.
        let local = self
            .role_bindings
            .iter()
            .filter(|b| in_namespace.is_some_and(|ns| ns == namespace(b)))
            .map(|b| (b, "RoleBinding"));
        cluster.chain(local).find_map(|(binding, binding_kind)| {
            let who = bound(binding, subject)?;
            let role_kind = binding["roleRef"]["kind"].as_str()?;
            let role = binding["roleRef"]["name"].as_str()?;
            let granted = self
                .role_rules(role_kind, namespace(binding), role)
                .iter()
                .any(|r| r.grants(access));
            granted.then(|| {
                let at = match binding_kind {
                    "RoleBinding" => format!(" in namespace {:?}", namespace(binding)),
                    _ => String::new(),
                };
                format!(
                    "RBAC: allowed by {binding_kind} {:?} of {role_kind} {role:?} to {who}{at}",
                    name(binding)
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Attributes;
    use serde_json::json;

    fn metrics(verb: &str, ns: &str, name: &str) -> Access<'static> {
        let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
        Access::Resource(Attributes {
            verb: leak(verb),
            group: "apps",
            resource: "deployments",
            subresource: Some("prometheus-metrics"),
            namespace: Some(leak(ns)),
            name: Some(leak(name)),
        })
    }

    fn policy() -> Policy {
        Policy {
            cluster_roles: vec![json!({"metadata": {"name": "d8:prometheus"}, "rules": [
                    {"apiGroups": ["apps"], "resources": ["deployments/prometheus-metrics"], "verbs": ["get"]},
                    {"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]}]})],
            roles: vec![
                json!({"metadata": {"name": "scrape", "namespace": "d8-system"}, "rules": [
                    {"apiGroups": ["apps"], "resources": ["deployments/prometheus-metrics"],
                     "resourceNames": ["deckhouse"], "verbs": ["get"]}]}),
            ],
            cluster_role_bindings: vec![
                json!({"metadata": {"name": "prom"}, "roleRef": {"kind": "ClusterRole", "name": "d8:prometheus"},
                    "subjects": [{"kind": "Group", "name": "prometheus"},
                                 {"kind": "ServiceAccount", "name": "prometheus", "namespace": "d8-monitoring"}]}),
            ],
            role_bindings: vec![
                json!({"metadata": {"name": "scrape", "namespace": "d8-system"}, "roleRef": {"kind": "Role", "name": "scrape"},
                    "subjects": [{"kind": "User", "name": "alice"}]}),
                // A RoleBinding may refer to a ClusterRole: granted only in its namespace.
                json!({"metadata": {"name": "by-cluster-role", "namespace": "other"}, "roleRef": {"kind": "ClusterRole", "name": "d8:prometheus"},
                    "subjects": [{"kind": "User", "name": "bob"}]}),
            ],
        }
    }

    #[test]
    fn decisions() {
        let groups = |g: &[&str]| g.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        let none = groups(&[]);
        let prom = groups(&["prometheus"]);
        let sa = "system:serviceaccount:d8-monitoring:prometheus";
        let nr = |path| Access::NonResource { verb: "get", path };
        #[rustfmt::skip]
        let table: &[(&str, &[String], Access<'_>, Option<&str>)] = &[
            ("x", &prom, metrics("get", "d8-system", "deckhouse"),
             Some(r#"RBAC: allowed by ClusterRoleBinding "prom" of ClusterRole "d8:prometheus" to Group "prometheus""#)),
            (sa, &none, metrics("get", "any", "any"),
             Some(r#"RBAC: allowed by ClusterRoleBinding "prom" of ClusterRole "d8:prometheus" to ServiceAccount "prometheus""#)),
            ("x", &prom, metrics("create", "d8-system", "deckhouse"), None),
            ("x", &prom, nr("/metrics"), Some(r#"RBAC: allowed by ClusterRoleBinding "prom" of ClusterRole "d8:prometheus" to Group "prometheus""#)),
            ("x", &prom, nr("/debug/pprof"), Some(r#"RBAC: allowed by ClusterRoleBinding "prom" of ClusterRole "d8:prometheus" to Group "prometheus""#)),
            ("x", &prom, nr("/metricsx"), None),
            ("x", &none, nr("/metrics"), None),
            ("alice", &none, metrics("get", "d8-system", "deckhouse"),
             Some(r#"RBAC: allowed by RoleBinding "scrape" of Role "scrape" to User "alice" in namespace "d8-system""#)),
            ("alice", &none, metrics("get", "d8-system", "webhook-handler"), None),
            ("alice", &none, metrics("get", "default", "deckhouse"), None),
            ("alice", &none, nr("/metrics"), None),
            ("bob", &none, metrics("get", "other", "x"),
             Some(r#"RBAC: allowed by RoleBinding "by-cluster-role" of ClusterRole "d8:prometheus" to User "bob" in namespace "other""#)),
            ("bob", &none, metrics("get", "d8-system", "x"), None),
            // A RoleBinding never grants non-resource URLs.
            ("bob", &none, nr("/metrics"), None),
        ];
        let p = policy();
        for (user, groups, access, expected) in table {
            let subject = Subject { user, groups };
            assert_eq!(
                p.allows(&subject, access).as_deref(),
                *expected,
                "{user} {groups:?} {access:?}"
            );
        }
    }
}
