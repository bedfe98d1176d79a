//! `authentication.k8s.io/v1` TokenReview and `authorization.k8s.io/v1` SubjectAccessReview,
//! the two reviews a delegating component (kube-rbac-proxy, or `d8 controller` protecting its
//! metrics) asks the API server for: who holds this bearer token, and may that subject do this.
//!
//! Pure: the request body in, the answered review out; who a token is and what a subject may do
//! are passed in by the HTTP layer.

use serde_json::{Value, json};

use crate::auth::{Access, Attributes, User};
use crate::error::ApiError;

/// The path a TokenReview is created at.
pub(crate) const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
/// The path a SubjectAccessReview is created at.
pub(crate) const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// The group every authenticated user is in, as kube-apiserver adds it.
const AUTHENTICATED: &str = "system:authenticated";

fn invalid(kind: &str, field: &str, value: &str, message: &str) -> ApiError {
    let group = match kind {
        "TokenReview" => "authentication.k8s.io",
        _ => "authorization.k8s.io",
    };
    ApiError::unprocessable(format!(
        "{kind}.{group} \"\" is invalid: {field}: Invalid value: {value:?}: {message}"
    ))
}

/// Answers a TokenReview: `user` is who holds `spec.token`, if anyone does.
pub(crate) fn token_review(
    mut review: Value,
    user: impl FnOnce(&str) -> Option<std::sync::Arc<User>>,
) -> Result<Value, ApiError> {
    let token = review["spec"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let status = match user(&token) {
        Some(u) => {
            let mut groups = u.groups.clone();
            if !groups.iter().any(|g| g == AUTHENTICATED) {
                groups.push(AUTHENTICATED.into());
            }
            let mut status = json!({
                "authenticated": true,
                "user": {"username": u.name, "groups": groups},
            });
            if let Some(audiences) = review["spec"].get("audiences").filter(|a| a.is_array()) {
                status["audiences"] = audiences.clone();
            }
            status
        }
        None => json!({"user": {}}),
    };
    // The token never goes back to the caller.
    review["spec"] = json!({});
    review["status"] = status;
    review["metadata"]["creationTimestamp"] = Value::Null;
    Ok(review)
}

/// The subject and the access a SubjectAccessReview asks about.
pub(crate) struct AccessQuestion {
    pub(crate) user: String,
    pub(crate) groups: Vec<String>,
    verb: String,
    group: String,
    resource: String,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    path: Option<String>,
}

fn text(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

impl AccessQuestion {
    /// Reads `spec` of a SubjectAccessReview, with Kubernetes' validation messages.
    pub(crate) fn parse(review: &Value) -> Result<Self, ApiError> {
        let spec = &review["spec"];
        let user = text(&spec["user"]).unwrap_or_default();
        let groups: Vec<String> = spec["groups"]
            .as_array()
            .map(|a| a.iter().filter_map(text).collect())
            .unwrap_or_default();
        if user.is_empty() && groups.is_empty() {
            return Err(invalid(
                "SubjectAccessReview",
                "spec.user",
                "",
                "at least one of user or group must be specified",
            ));
        }
        let (resource, non_resource) = (
            spec["resourceAttributes"].as_object(),
            spec["nonResourceAttributes"].as_object(),
        );
        let mut q = Self {
            user,
            groups,
            verb: String::new(),
            group: String::new(),
            resource: String::new(),
            subresource: None,
            namespace: None,
            name: None,
            path: None,
        };
        match (resource, non_resource) {
            (Some(r), None) => {
                let get = |k: &str| r.get(k).and_then(text);
                q.verb = get("verb").unwrap_or_default();
                q.group = get("group").unwrap_or_default();
                q.resource = get("resource").unwrap_or_default();
                q.subresource = get("subresource");
                q.namespace = get("namespace");
                q.name = get("name");
            }
            (None, Some(n)) => {
                q.verb = n.get("verb").and_then(text).unwrap_or_default();
                q.path = Some(n.get("path").and_then(text).unwrap_or_default());
            }
            _ => {
                return Err(invalid(
                    "SubjectAccessReview",
                    "spec.resourceAttributes",
                    "",
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                ));
            }
        }
        Ok(q)
    }

    /// The access asked about.
    pub(crate) fn access(&self) -> Access<'_> {
        match &self.path {
            Some(path) => Access::NonResource {
                verb: &self.verb,
                path,
            },
            None => Access::Resource(Attributes {
                verb: &self.verb,
                group: &self.group,
                resource: &self.resource,
                subresource: self.subresource.as_deref(),
                namespace: self.namespace.as_deref(),
                name: self.name.as_deref(),
            }),
        }
    }
}

/// The answered SubjectAccessReview: `reason` is why it is allowed, `None` when nothing grants.
pub(crate) fn access_review(mut review: Value, reason: Option<String>) -> Value {
    review["status"] = match reason {
        Some(reason) => json!({"allowed": true, "reason": reason}),
        None => json!({"allowed": false}),
    };
    review["metadata"]["creationTimestamp"] = Value::Null;
    review
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn token_review_names_the_holder_and_never_echoes_the_token() {
        let holder = Arc::new(User::new("prometheus").group("monitoring"));
        let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": "secret", "audiences": ["x"]}});
        let answered =
            token_review(review.clone(), |t| (t == "secret").then(|| holder.clone())).unwrap();
        assert_eq!(
            answered["status"],
            json!({"authenticated": true, "audiences": ["x"],
                "user": {"username": "prometheus", "groups": ["monitoring", "system:authenticated"]}})
        );
        assert!(!answered.to_string().contains("secret"));
        let unknown = token_review(review, |_| None).unwrap();
        assert_eq!(unknown["status"], json!({"user": {}}));
        let empty = token_review(json!({"spec": {}}), |_| None).unwrap_err();
        assert_eq!(
            (empty.code, empty.message.as_str()),
            (400, "token is required for TokenReview in authentication")
        );
    }

    #[test]
    fn access_review_questions() {
        let q = AccessQuestion::parse(&json!({"spec": {"user": "u", "groups": ["g"],
            "nonResourceAttributes": {"verb": "get", "path": "/metrics"}}}))
        .unwrap();
        assert!(matches!(
            q.access(),
            Access::NonResource {
                verb: "get",
                path: "/metrics"
            }
        ));
        let q = AccessQuestion::parse(&json!({"spec": {"user": "u", "resourceAttributes": {
            "verb": "get", "group": "apps", "resource": "deployments",
            "subresource": "prometheus-metrics", "namespace": "d8-system", "name": "deckhouse"}}}))
        .unwrap();
        let Access::Resource(a) = q.access() else {
            panic!("a resource question")
        };
        assert_eq!(
            (
                a.verb,
                a.group,
                a.resource,
                a.subresource,
                a.namespace,
                a.name
            ),
            (
                "get",
                "apps",
                "deployments",
                Some("prometheus-metrics"),
                Some("d8-system"),
                Some("deckhouse")
            )
        );
        for (spec, message) in [
            (
                json!({"nonResourceAttributes": {"verb": "get", "path": "/"}}),
                "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified",
            ),
            (
                json!({"user": "u"}),
                "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ),
        ] {
            let e = AccessQuestion::parse(&json!({ "spec": spec }))
                .err()
                .unwrap();
            assert_eq!((e.code, e.message.as_str()), (422, message));
        }
        assert_eq!(
            access_review(json!({}), None)["status"],
            json!({"allowed": false})
        );
    }
}
