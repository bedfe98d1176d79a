//! What a request is checked against: kube-rbac-proxy's `authorization.resourceAttributes`
//! when configured, else the request's own path as a non-resource URL; the verb follows the
//! HTTP method as kube-rbac-proxy maps it.

use std::str::FromStr;

/// The resource a caller must be allowed on (`resourceAttributes` of kube-rbac-proxy's
/// configuration), e.g. Deployment `d8-system/deckhouse`'s subresource `prometheus-metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    /// Namespace of the object (empty: cluster-wide).
    pub namespace: String,
    /// API group (empty: core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Object name.
    pub name: String,
}

/// A `--…-resource-attributes` value that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    /// A piece without `=`.
    #[error("{0:?}: expected KEY=VALUE")]
    NotKeyValue(String),
    /// A key kube-rbac-proxy's `resourceAttributes` does not have.
    #[error("unknown key {0:?} (namespace, apiGroup, apiVersion, resource, subresource, name)")]
    UnknownKey(String),
    /// No `resource=`.
    #[error("resource is required")]
    NoResource,
}

impl FromStr for ResourceAttributes {
    type Err = ParseError;

    /// `namespace=d8-system,apiGroup=apps,apiVersion=v1,resource=deployments,…`: the keys of
    /// kube-rbac-proxy's `resourceAttributes`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut a = Self::default();
        for piece in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = piece
                .split_once('=')
                .ok_or_else(|| ParseError::NotKeyValue(piece.into()))?;
            let field = match key.trim() {
                "namespace" => &mut a.namespace,
                "apiGroup" => &mut a.api_group,
                "apiVersion" => &mut a.api_version,
                "resource" => &mut a.resource,
                "subresource" => &mut a.subresource,
                "name" => &mut a.name,
                other => return Err(ParseError::UnknownKey(other.into())),
            };
            *field = value.trim().to_string();
        }
        if a.resource.is_empty() {
            return Err(ParseError::NoResource);
        }
        Ok(a)
    }
}

/// The authorization verb of an HTTP method, as kube-rbac-proxy derives it (empty for others).
pub fn verb(method: &str) -> &'static str {
    match method {
        "GET" => "get",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// The access a SubjectAccessReview asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Question<'a> {
    /// The configured resource, with the request's verb.
    Resource {
        /// The verb.
        verb: &'static str,
        /// The resource.
        attributes: &'a ResourceAttributes,
    },
    /// The request's path as a non-resource URL.
    NonResource {
        /// The verb.
        verb: &'static str,
        /// The URL path.
        path: &'a str,
    },
}

impl<'a> Question<'a> {
    /// What a `method` request on `path` is checked against.
    pub fn of(method: &str, path: &'a str, attributes: Option<&'a ResourceAttributes>) -> Self {
        let verb = verb(method);
        match attributes {
            Some(attributes) => Self::Resource { verb, attributes },
            None => Self::NonResource { verb, path },
        }
    }

    /// kube-rbac-proxy's description in its refusals: `user=…, verb=…, resource=…,
    /// subresource=…`.
    pub fn describe(&self, user: &str) -> String {
        let (verb, resource, subresource) = match self {
            Self::Resource { verb, attributes } => (
                *verb,
                attributes.resource.as_str(),
                attributes.subresource.as_str(),
            ),
            Self::NonResource { verb, .. } => (*verb, "", ""),
        };
        format!("user={user}, verb={verb}, resource={resource}, subresource={subresource}")
    }

    /// A stable key for the verdict cache.
    pub(crate) fn key(&self) -> String {
        match self {
            Self::Resource {
                verb,
                attributes: a,
            } => format!(
                "r\0{verb}\0{}\0{}\0{}\0{}\0{}\0{}",
                a.namespace, a.api_group, a.api_version, a.resource, a.subresource, a.name
            ),
            Self::NonResource { verb, path } => format!("n\0{verb}\0{path}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_attributes_parse() {
        let deckhouse = ResourceAttributes {
            namespace: "d8-system".into(),
            api_group: "apps".into(),
            api_version: "v1".into(),
            resource: "deployments".into(),
            subresource: "prometheus-metrics".into(),
            name: "deckhouse".into(),
        };
        let table: &[(&str, Result<ResourceAttributes, ParseError>)] = &[
            (
                "namespace=d8-system,apiGroup=apps,apiVersion=v1,resource=deployments,subresource=prometheus-metrics,name=deckhouse",
                Ok(deckhouse),
            ),
            (
                " resource = nodes , ",
                Ok(ResourceAttributes {
                    resource: "nodes".into(),
                    ..Default::default()
                }),
            ),
            ("namespace=x", Err(ParseError::NoResource)),
            (
                "resource=a,verb=get",
                Err(ParseError::UnknownKey("verb".into())),
            ),
            ("resource", Err(ParseError::NotKeyValue("resource".into()))),
        ];
        for (text, expected) in table {
            assert_eq!(&text.parse::<ResourceAttributes>(), expected, "{text}");
        }
    }

    #[test]
    fn questions_and_verbs() {
        let a: ResourceAttributes = "resource=deployments,subresource=prometheus-metrics"
            .parse()
            .unwrap();
        for (method, verb) in [
            ("GET", "get"),
            ("POST", "create"),
            ("PUT", "update"),
            ("PATCH", "patch"),
            ("DELETE", "delete"),
            ("HEAD", ""),
        ] {
            assert_eq!(
                Question::of(method, "/metrics", None),
                Question::NonResource {
                    verb,
                    path: "/metrics"
                }
            );
            assert_eq!(
                Question::of(method, "/metrics", Some(&a)),
                Question::Resource {
                    verb,
                    attributes: &a
                }
            );
        }
        assert_eq!(
            Question::of("GET", "/metrics", Some(&a)).describe("bob"),
            "user=bob, verb=get, resource=deployments, subresource=prometheus-metrics"
        );
        assert_eq!(
            Question::of("GET", "/metrics", None).describe("bob"),
            "user=bob, verb=get, resource=, subresource="
        );
    }
}
