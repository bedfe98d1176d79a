//! Requests in, answers out: the path picks the review, the body is read up to
//! [`admission::MAX_REVIEW_BYTES`], and a malformed or oversized review is a 400 saying why.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use admission::ClusterObjects;
use admission::review::{AdmissionRequest, conversion_review};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

/// How long reading the cluster's facts may take (kube-apiserver's default webhook timeout is
/// 10 s).
const FACTS_TIMEOUT: Duration = Duration::from_secs(5);

/// A future of the cluster's objects.
pub type ObjectsFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ClusterObjects, String>> + Send + 'a>>;

/// Where the cluster's facts come from.
pub trait Facts: Send + Sync {
    /// The objects admission reads ([`admission::context::KINDS`]), now.
    fn objects(&self) -> ObjectsFuture<'_>;
}

/// The facts read from the API with kube-rs, every kind in its stored version.
#[derive(Clone)]
pub struct KubeFacts {
    client: kube::Client,
}

impl std::fmt::Debug for KubeFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeFacts").finish_non_exhaustive()
    }
}

impl KubeFacts {
    /// Facts read through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    async fn list(&self, kind: &str) -> Result<Vec<Value>, String> {
        let crd = api::crds::find(admission::context::GROUP, kind)
            .ok_or_else(|| format!("no CRD for {kind}"))?;
        let version = crd
            .spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.clone())
            .unwrap_or_default();
        let gvk = GroupVersionKind::gvk(admission::context::GROUP, &version, kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing {}: {e}", crd.spec.names.plural))?;
        list.items
            .into_iter()
            .map(|o| serde_json::to_value(o).map_err(|e| e.to_string()))
            .collect()
    }
}

impl Facts for KubeFacts {
    fn objects(&self) -> ObjectsFuture<'_> {
        Box::pin(async move {
            let mut objects = ClusterObjects::default();
            for kind in admission::context::KINDS {
                let items = self.list(kind).await?;
                if let Some(slot) = objects.of_kind(kind) {
                    *slot = items;
                }
            }
            Ok(objects)
        })
    }
}

/// The webhook's request handler.
#[derive(Clone)]
pub struct Webhook {
    facts: Arc<dyn Facts>,
    verdicts: admission::Verdicts,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook").finish_non_exhaustive()
    }
}

fn text(status: StatusCode, message: impl Into<String>) -> Response<Full<Bytes>> {
    let mut body = message.into();
    body.push('\n');
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn json(value: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// What a path serves.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Validate,
    Convert,
    Health,
}

fn route(method: &Method, path: &str) -> Result<Route, (StatusCode, String)> {
    let route = match path {
        "/healthz" | "/readyz" => Route::Health,
        "/convert" => Route::Convert,
        p if p == "/validate" || p.starts_with("/validate/") => Route::Validate,
        other => return Err((StatusCode::NOT_FOUND, format!("no webhook at {other}"))),
    };
    let allowed = match route {
        Route::Health => method == Method::GET,
        _ => method == Method::POST,
    };
    if !allowed {
        return Err((
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not served at {path}"),
        ));
    }
    Ok(route)
}

impl Webhook {
    /// A handler reading the cluster's facts from `facts`, answering for every rule.
    pub fn new(facts: Arc<dyn Facts>) -> Self {
        Self {
            facts,
            verdicts: admission::Verdicts::All,
        }
    }

    /// The handler answering only for `verdicts` ([`admission::Verdicts::Webhook`] behind an
    /// embedded API server that runs the rest in process).
    pub fn keeping(self, verdicts: admission::Verdicts) -> Self {
        Self { verdicts, ..self }
    }

    /// Answers one request.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Full<Bytes>>
    where
        B: http_body::Body<Data = Bytes> + Send,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let route = match route(request.method(), request.uri().path()) {
            Ok(r) => r,
            Err((status, message)) => return text(status, message),
        };
        if route == Route::Health {
            return text(StatusCode::OK, "ok");
        }
        let body = match Limited::new(request.into_body(), admission::MAX_REVIEW_BYTES)
            .collect()
            .await
        {
            Ok(b) => b.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return text(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "the review is larger than the {} bytes accepted",
                        admission::MAX_REVIEW_BYTES
                    ),
                );
            }
            Err(e) => return text(StatusCode::BAD_REQUEST, format!("reading the review: {e}")),
        };
        match route {
            Route::Convert => match conversion_review(&body) {
                Ok(answer) => json(&answer),
                Err(e) => text(StatusCode::BAD_REQUEST, e.to_string()),
            },
            _ => self.admission(&body).await,
        }
    }

    async fn admission(&self, body: &[u8]) -> Response<Full<Bytes>> {
        let request = match AdmissionRequest::parse(body) {
            Ok(r) => r,
            Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
        };
        let context = if request.needs_context() {
            match tokio::time::timeout(FACTS_TIMEOUT, self.facts.objects()).await {
                Ok(Ok(objects)) => admission::context(&objects),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, kind = request.kind(), "cluster facts unavailable");
                    return text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("cannot read the cluster's state: {e}"),
                    );
                }
                Err(_) => {
                    return text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("cannot read the cluster's state within {FACTS_TIMEOUT:?}"),
                    );
                }
            }
        } else {
            Default::default()
        };
        json(&request.respond(&context, self.verdicts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_methods() {
        let post = Method::POST;
        assert_eq!(
            route(&post, "/validate/v1alpha1/module-configs"),
            Ok(Route::Validate)
        );
        assert_eq!(route(&post, "/validate"), Ok(Route::Validate));
        assert_eq!(route(&post, "/convert"), Ok(Route::Convert));
        assert_eq!(route(&Method::GET, "/healthz"), Ok(Route::Health));
        assert_eq!(
            route(&post, "/validated").unwrap_err().0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            route(&Method::GET, "/convert").unwrap_err().0,
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
