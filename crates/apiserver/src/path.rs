//! Parsing of Kubernetes REST paths into a typed request target.
//!
//! Pure: no I/O. The resource registry decides later whether the named resource exists.

/// What a request path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `/api`: the legacy core group's versions.
    CoreVersions,
    /// `/apis`: the list of API groups.
    Groups,
    /// `/apis/<group>`: one API group.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`: the resources of a group version.
    Resources { group: String, version: String },
    /// A resource, a collection, or a subresource.
    Resource(ResourcePath),
}

/// A path that addresses objects of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourcePath {
    /// API group, empty for the core group.
    pub(crate) group: String,
    /// API version.
    pub(crate) version: String,
    /// The namespace named by `/namespaces/<ns>/...`, if any.
    pub(crate) namespace: Option<String>,
    /// Plural resource name, e.g. `configmaps`.
    pub(crate) resource: String,
    /// Object name, for single-object requests.
    pub(crate) name: Option<String>,
    /// Subresource such as `status`.
    pub(crate) subresource: Option<String>,
}

/// Splits a request path into what it addresses; `None` when it is not an API path.
pub(crate) fn parse(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path
        .trim_end_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api"] => return Some(Target::CoreVersions),
        ["apis"] => return Some(Target::Groups),
        ["apis", g] => return Some(Target::Group((*g).to_string())),
        ["api", v, rest @ ..] => (String::new(), (*v).to_string(), rest),
        ["apis", g, v, rest @ ..] => ((*g).to_string(), (*v).to_string(), rest),
        _ => return None,
    };
    if rest.is_empty() {
        return Some(Target::Resources { group, version });
    }
    let seg = |i: usize| rest.get(i).map(|s| (*s).to_string());
    let (namespace, resource, name, subresource) = match rest {
        // `namespaces/<name>/status` and `/finalize` are subresources of a Namespace,
        // not a collection inside it.
        ["namespaces", _, "status" | "finalize"] if group.is_empty() => {
            (None, seg(0), seg(1), seg(2))
        }
        ["namespaces", _, _, ..] => (seg(1), seg(2), seg(3), seg(4)),
        _ => (None, seg(0), seg(1), seg(2)),
    };
    let limit = if namespace.is_some() { 5 } else { 3 };
    if rest.len() > limit {
        return None;
    }
    Some(Target::Resource(ResourcePath {
        group,
        version,
        namespace,
        resource: resource?,
        name,
        subresource,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(t: Option<Target>) -> ResourcePath {
        match t {
            Some(Target::Resource(r)) => r,
            other => panic!("not a resource path: {other:?}"),
        }
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(parse("/api"), Some(Target::CoreVersions));
        assert_eq!(parse("/apis/"), Some(Target::Groups));
        assert_eq!(parse("/apis/apps"), Some(Target::Group("apps".into())));
        assert_eq!(
            parse("/api/v1"),
            Some(Target::Resources {
                group: String::new(),
                version: "v1".into()
            })
        );
        assert_eq!(
            parse("/apis/deckhouse.io/v1alpha1"),
            Some(Target::Resources {
                group: "deckhouse.io".into(),
                version: "v1alpha1".into()
            })
        );
        assert_eq!(parse("/version"), None);
    }

    #[test]
    fn namespaced_and_cluster_paths() {
        let r = res(parse("/api/v1/namespaces/d8-system/secrets/x"));
        assert_eq!(r.namespace.as_deref(), Some("d8-system"));
        assert_eq!(r.resource, "secrets");
        assert_eq!(r.name.as_deref(), Some("x"));
        let r = res(parse("/api/v1/namespaces/d8-system/configmaps"));
        assert_eq!((r.resource.as_str(), r.name), ("configmaps", None));
        let r = res(parse("/api/v1/namespaces"));
        assert_eq!((r.resource.as_str(), r.namespace), ("namespaces", None));
        let r = res(parse("/api/v1/namespaces/foo"));
        assert_eq!(r.name.as_deref(), Some("foo"));
        assert_eq!(r.namespace, None);
        let r = res(parse("/api/v1/namespaces/foo/status"));
        assert_eq!(
            (
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("namespaces", Some("foo"), Some("status"))
        );
        let r = res(parse("/apis/deckhouse.io/v1alpha1/registrynodes/n1/status"));
        assert_eq!(r.group, "deckhouse.io");
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = res(parse("/apis/apps/v1/namespaces/a/deployments/b/status"));
        assert_eq!(r.subresource.as_deref(), Some("status"));
        assert_eq!(
            parse("/apis/apps/v1/namespaces/a/deployments/b/status/x"),
            None
        );
        assert_eq!(parse("/apis/apps/v1/deployments/b/status/x"), None);
    }
}
