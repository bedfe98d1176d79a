//! Authentication (bearer tokens, client certificates) and authorization by RBAC-equivalent rules.

use serde::{Deserialize, Serialize};

/// A permission, like one RBAC `PolicyRule` bound in some namespaces (or cluster-wide).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or `*`.
    pub verbs: Vec<String>,
    /// API groups (`""` for core), or `*`.
    pub api_groups: Vec<String>,
    /// Resources, with `plural/subresource` for subresources, or `*`.
    pub resources: Vec<String>,
    /// Object names the rule is limited to; empty for any.
    pub resource_names: Vec<String>,
    /// Namespaces the rule applies in; empty for cluster-wide (as a ClusterRoleBinding).
    pub namespaces: Vec<String>,
    /// URLs outside the API (`/metrics`, `/healthz`, `/debug/*`) the verbs apply to.
    #[serde(default)]
    pub non_resource_urls: Vec<String>,
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_string()).collect()
}

impl Rule {
    /// `verbs` on `resources` of `api_groups`, any name, cluster-wide.
    pub fn new(verbs: &[&str], api_groups: &[&str], resources: &[&str]) -> Self {
        Self {
            verbs: strs(verbs),
            api_groups: strs(api_groups),
            resources: strs(resources),
            resource_names: Vec::new(),
            namespaces: Vec::new(),
            non_resource_urls: Vec::new(),
        }
    }

    /// `verbs` on URLs outside the API: exact, or a prefix ending in `*` (RBAC's
    /// `nonResourceURLs`).
    pub fn non_resource(verbs: &[&str], urls: &[&str]) -> Self {
        Self {
            non_resource_urls: strs(urls),
            ..Self::new(verbs, &[], &[])
        }
    }

    /// Limits the rule to these object names.
    pub fn names(mut self, names: &[&str]) -> Self {
        self.resource_names = strs(names);
        self
    }

    /// Limits the rule to these namespaces.
    pub fn in_namespaces(mut self, namespaces: &[&str]) -> Self {
        self.namespaces = strs(namespaces);
        self
    }

    /// Everything (`cluster-admin`).
    pub fn admin() -> Self {
        Self::new(&["*"], &["*"], &["*"])
    }

    /// Whether the rule grants `access`.
    pub(crate) fn grants(&self, access: &Access<'_>) -> bool {
        match access {
            Access::Resource(a) => self.allows(a),
            Access::NonResource { verb, path } => {
                self.verbs.iter().any(|v| v == "*" || v == verb)
                    && self.non_resource_urls.iter().any(|u| {
                        u == path
                            || u.strip_suffix('*')
                                .is_some_and(|prefix| path.starts_with(prefix))
                    })
            }
        }
    }

    fn allows(&self, a: &Attributes<'_>) -> bool {
        let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        let resource = match a.subresource {
            Some(sub) => format!("{}/{sub}", a.resource),
            None => a.resource.to_string(),
        };
        let resource_ok = self.resources.iter().any(|r| {
            r == "*"
                || *r == resource
                || (a.subresource.is_some() && *r == format!("{}/*", a.resource))
                || (r
                    .strip_prefix("*/")
                    .is_some_and(|s| Some(s) == a.subresource))
        });
        let name_ok = self.resource_names.is_empty()
            || a.name
                .is_some_and(|n| self.resource_names.iter().any(|x| x == n));
        let ns_ok = self.namespaces.is_empty()
            || a.namespace
                .is_some_and(|n| self.namespaces.iter().any(|x| x == n));
        any(&self.verbs, a.verb)
            && any(&self.api_groups, a.group)
            && resource_ok
            && name_ok
            && ns_ok
    }
}

/// How a user's kubeconfig authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Credential {
    /// A bearer token.
    #[default]
    Token,
    /// A client certificate signed by the server's CA.
    ClientCert,
}

/// A client identity: its name, groups, permissions and credential kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// The user name (the certificate's CN).
    pub name: String,
    /// Groups (the certificate's O).
    pub groups: Vec<String>,
    /// What the user may do.
    pub rules: Vec<Rule>,
    /// What its kubeconfig carries.
    pub credential: Credential,
}

impl User {
    /// A user with no permissions yet, authenticating by token.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            groups: Vec::new(),
            rules: Vec::new(),
            credential: Credential::Token,
        }
    }

    /// Adds a rule.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Adds a group.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.groups.push(group.into());
        self
    }

    /// Authenticates with a client certificate instead of a token.
    pub fn with_client_cert(mut self) -> Self {
        self.credential = Credential::ClientCert;
        self
    }

    /// The administrator: everything allowed, client certificate.
    pub fn admin() -> Self {
        Self::new("admin")
            .group("system:masters")
            .rule(Rule::admin())
            .with_client_cert()
    }

    /// The registry agent of node `node`: get its own RegistryNode, update or patch that
    /// RegistryNode's status, and get the Secret `d8-system/registry-resolved-auth`. Nothing else.
    pub fn registry_agent(node: &str) -> Self {
        Self::new(format!("system:registry-agent:{node}"))
            .group("system:registry-agents")
            .rule(Rule::new(&["get"], &["deckhouse.io"], &["registrynodes"]).names(&[node]))
            .rule(
                Rule::new(
                    &["patch", "update"],
                    &["deckhouse.io"],
                    &["registrynodes/status"],
                )
                .names(&[node]),
            )
            .rule(
                Rule::new(&["get"], &[""], &["secrets"])
                    .names(&["registry-resolved-auth"])
                    .in_namespaces(&["d8-system"]),
            )
    }

    /// Whether the user may perform the request.
    pub(crate) fn allows(&self, a: &Attributes<'_>) -> bool {
        self.rules.iter().any(|r| r.allows(a))
    }

    /// Whether the user's own rules grant `access` (RBAC objects may grant more).
    pub(crate) fn grants(&self, access: &Access<'_>) -> bool {
        self.rules.iter().any(|r| r.grants(access))
    }
}

/// What an authorization decision is about: a resource request, or a URL outside the API
/// (`/metrics`, `/healthz`), as a SubjectAccessReview's `resourceAttributes` or
/// `nonResourceAttributes`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Access<'a> {
    /// A request on an API resource.
    Resource(Attributes<'a>),
    /// A request on a path outside the API.
    NonResource {
        /// The lowercase verb (`get`, `post`…).
        verb: &'a str,
        /// The URL path.
        path: &'a str,
    },
}

/// What a request asks to do, for authorization.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attributes<'a> {
    pub(crate) verb: &'a str,
    pub(crate) group: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: Option<&'a str>,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
}

impl Attributes<'_> {
    /// Kubernetes' refusal message.
    pub(crate) fn forbidden_message(&self, user: &str) -> String {
        let resource = match self.subresource {
            Some(s) => format!("{}/{s}", self.resource),
            None => self.resource.to_string(),
        };
        // The refused resource as kube-apiserver names it: qualified by its group, if any, and
        // without the subresource (which only the sentence after it names).
        let qualified = match self.group {
            "" => self.resource.to_string(),
            group => format!("{}.{group}", self.resource),
        };
        let subject = match self.name {
            Some(n) => format!("{qualified} {n:?}"),
            None => qualified,
        };
        let scope = match self.namespace {
            Some(ns) => format!(" in the namespace {ns:?}"),
            None => " at the cluster scope".to_string(),
        };
        format!(
            "{subject} is forbidden: User {user:?} cannot {} resource {resource:?} in API group {:?}{scope}",
            self.verb, self.group
        )
    }
}

/// A stored identity: the user plus its secrets.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Identity {
    pub(crate) user: User,
    pub(crate) token: String,
    #[serde(default)]
    pub(crate) cert_fingerprint: Option<String>,
}

/// Random hex of `n` bytes from the system RNG.
pub(crate) fn random_hex(n: usize) -> String {
    use ring::rand::SecureRandom as _;
    let mut b = vec![0u8; n];
    // The system RNG failing is unrecoverable; fall back to time so we never panic.
    if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        for (i, x) in b.iter_mut().enumerate() {
            *x = (t >> ((i % 16) * 8)) as u8;
        }
    }
    crate::pki::hex_encode(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs<'a>(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        sub: Option<&'a str>,
        ns: Option<&'a str>,
        name: Option<&'a str>,
    ) -> Attributes<'a> {
        Attributes {
            verb,
            group,
            resource,
            subresource: sub,
            namespace: ns,
            name,
        }
    }

    #[test]
    fn registry_agent_gets_exactly_its_objects() {
        let u = User::registry_agent("n1");
        let ok = [
            attrs(
                "get",
                "deckhouse.io",
                "registrynodes",
                None,
                None,
                Some("n1"),
            ),
            attrs(
                "patch",
                "deckhouse.io",
                "registrynodes",
                Some("status"),
                None,
                Some("n1"),
            ),
            attrs(
                "update",
                "deckhouse.io",
                "registrynodes",
                Some("status"),
                None,
                Some("n1"),
            ),
            attrs(
                "get",
                "",
                "secrets",
                None,
                Some("d8-system"),
                Some("registry-resolved-auth"),
            ),
        ];
        for a in ok {
            assert!(u.allows(&a), "{a:?}");
        }
        let denied = [
            attrs(
                "get",
                "deckhouse.io",
                "registrynodes",
                None,
                None,
                Some("n2"),
            ),
            attrs("list", "deckhouse.io", "registrynodes", None, None, None),
            attrs(
                "patch",
                "deckhouse.io",
                "registrynodes",
                None,
                None,
                Some("n1"),
            ),
            attrs(
                "patch",
                "deckhouse.io",
                "registrynodes",
                Some("status"),
                None,
                Some("n2"),
            ),
            attrs("list", "", "secrets", None, Some("d8-system"), None),
            attrs("get", "", "secrets", None, Some("d8-system"), Some("other")),
            attrs(
                "get",
                "",
                "secrets",
                None,
                Some("default"),
                Some("registry-resolved-auth"),
            ),
            attrs(
                "update",
                "",
                "secrets",
                None,
                Some("d8-system"),
                Some("registry-resolved-auth"),
            ),
            attrs(
                "get",
                "",
                "configmaps",
                None,
                Some("d8-system"),
                Some("registry-resolved-auth"),
            ),
        ];
        for a in denied {
            assert!(!u.allows(&a), "{a:?}");
        }
    }

    #[test]
    fn admin_and_wildcards() {
        assert!(User::admin().allows(&attrs(
            "deletecollection",
            "x",
            "y",
            Some("status"),
            None,
            None
        )));
        let r = Rule::new(&["get"], &["apps"], &["deployments/*"]);
        assert!(r.allows(&attrs(
            "get",
            "apps",
            "deployments",
            Some("status"),
            Some("a"),
            Some("b")
        )));
        assert!(!r.allows(&attrs(
            "get",
            "apps",
            "deployments",
            None,
            Some("a"),
            Some("b")
        )));
    }

    #[test]
    fn forbidden_message_is_kubernetes_shaped() {
        let a = attrs("list", "", "secrets", None, Some("d8-system"), None);
        assert_eq!(
            a.forbidden_message("bob"),
            r#"secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "d8-system""#
        );
        let a = attrs("list", "apps", "deployments", None, Some("default"), None);
        assert_eq!(
            a.forbidden_message("bob"),
            r#"deployments.apps is forbidden: User "bob" cannot list resource "deployments" in API group "apps" in the namespace "default""#
        );
        let a = attrs(
            "patch",
            "deckhouse.io",
            "registrynodes",
            Some("status"),
            None,
            Some("n1"),
        );
        assert_eq!(
            a.forbidden_message("bob"),
            r#"registrynodes.deckhouse.io "n1" is forbidden: User "bob" cannot patch resource "registrynodes/status" in API group "deckhouse.io" at the cluster scope"#
        );
        assert_eq!(random_hex(16).len(), 32);
    }
}
