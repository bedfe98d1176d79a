//! HTTP: authentication, authorization, routing and the Kubernetes wire formats, on axum.

use crate::auth::{Access, Attributes, Identity, User};
use crate::core::{
    Core, DeleteOpts, Deleted, FieldValidation, ListQuery, Page, Propagation, WriteOpts,
};
use crate::error::ApiError;
use crate::list::Item;
use crate::patch::PatchType;
use crate::path::{self, ResourcePath, Target};
use crate::rbac::{Policy, Subject};
use crate::resources::ResourceDef;
use crate::reviews;
use crate::selector::{FieldSelector, LabelSelector};
use crate::{discovery, table};
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The most a request body may hold (as kube-apiserver: 3 MiB).
const MAX_BODY: usize = 3 << 20;

/// The client certificate's fingerprint, put on each request by the TLS acceptor.
#[derive(Debug, Clone)]
pub(crate) struct PeerCert(pub(crate) Option<String>);

/// Who may call, by token digest or certificate fingerprint.
#[derive(Debug, Default)]
pub(crate) struct AuthIndex {
    by_token: HashMap<String, Arc<User>>,
    by_cert: HashMap<String, Arc<User>>,
    by_name: HashMap<String, Arc<User>>,
}

fn token_digest(t: &str) -> String {
    crate::pki::hex_encode(ring::digest::digest(&ring::digest::SHA256, t.as_bytes()).as_ref())
}

impl AuthIndex {
    pub(crate) fn new(ids: &[Identity]) -> Self {
        let mut a = Self::default();
        for id in ids {
            let u = Arc::new(id.user.clone());
            a.by_token.insert(token_digest(&id.token), u.clone());
            a.by_name.insert(u.name.clone(), u.clone());
            if let Some(fp) = &id.cert_fingerprint {
                a.by_cert.insert(fp.clone(), u);
            }
        }
        a
    }

    fn authenticate(&self, req: &Request) -> Option<Arc<User>> {
        if let Some(PeerCert(Some(fp))) = req.extensions().get::<PeerCert>()
            && let Some(u) = self.by_cert.get(fp)
        {
            return Some(u.clone());
        }
        let h = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
        let token = h
            .strip_prefix("Bearer ")
            .or_else(|| h.strip_prefix("bearer "))?
            .trim();
        self.by_token(token)
    }

    /// Who holds `token`. Looked up by digest, so the comparison does not leak the token
    /// through timing.
    fn by_token(&self, token: &str) -> Option<Arc<User>> {
        self.by_token.get(&token_digest(token)).cloned()
    }
}

/// Shared state of the HTTP layer.
#[derive(Debug)]
pub(crate) struct AppState {
    pub(crate) core: Arc<Core>,
    pub(crate) auth: AuthIndex,
    pub(crate) bookmark_interval: Duration,
    /// Where every authorized request is recorded, when asked for.
    pub(crate) request_log: Option<crate::RequestLog>,
}

impl AppState {
    /// Why `subject` may do `access`: the rules of the user of that name, then the RBAC
    /// objects stored (bindings naming the user, its groups or its ServiceAccount). `None`
    /// when nothing grants it.
    async fn authorize(
        &self,
        user: &str,
        groups: &[String],
        access: &Access<'_>,
    ) -> Result<Option<String>, ApiError> {
        if let Some(u) = self.auth.by_name.get(user)
            && u.grants(access)
        {
            return Ok(Some(format!("allowed by the rules of user {user:?}")));
        }
        let policy = self.policy().await?;
        Ok(policy.allows(&Subject { user, groups }, access))
    }

    /// The RBAC objects stored now.
    async fn policy(&self) -> Result<Policy, ApiError> {
        const RBAC: &str = "rbac.authorization.k8s.io";
        let reg = self.core.registry();
        let core = self.core.clone();
        blocking(move || {
            let all = |plural: &str| -> Result<Vec<Value>, ApiError> {
                let Some(def) = reg.get(RBAC, plural) else {
                    return Ok(Vec::new());
                };
                core.list(&def, "v1", &ListQuery::default())?.values()
            };
            Ok(Policy {
                cluster_roles: all("clusterroles")?,
                roles: all("roles")?,
                cluster_role_bindings: all("clusterrolebindings")?,
                role_bindings: all("rolebindings")?,
            })
        })
        .await
    }

    /// Refuses with Kubernetes' message unless `user` may do `attrs`.
    async fn require(&self, user: &User, attrs: Attributes<'_>) -> Result<(), ApiError> {
        let allowed = user.allows(&attrs)
            || self
                .authorize(&user.name, &user.groups, &Access::Resource(attrs))
                .await?
                .is_some();
        if let Some(log) = &self.request_log {
            log.record(&user.name, &attrs, allowed);
        }
        if allowed {
            return Ok(());
        }
        Err(ApiError::forbidden(attrs.forbidden_message(&user.name)))
    }
}

/// Answers a TokenReview or a SubjectAccessReview created at `path` by `user`.
async fn review(
    st: &Arc<AppState>,
    user: &User,
    path: &str,
    req: Request,
) -> Result<Response, ApiError> {
    let (group, resource) = match path {
        reviews::TOKEN_REVIEWS => ("authentication.k8s.io", "tokenreviews"),
        _ => ("authorization.k8s.io", "subjectaccessreviews"),
    };
    if req.method() != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "{resource} can only be created"
        )));
    }
    st.require(
        user,
        Attributes {
            verb: "create",
            group,
            resource,
            subresource: None,
            namespace: None,
            name: None,
        },
    )
    .await?;
    let body: Bytes = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| ApiError::too_large(e.to_string()))?;
    let body: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
    let answered = if path == reviews::TOKEN_REVIEWS {
        reviews::token_review(body, |token| st.auth.by_token(token))?
    } else {
        let question = reviews::AccessQuestion::parse(&body)?;
        let reason = st
            .authorize(&question.user, &question.groups, &question.access())
            .await?;
        reviews::access_review(body, reason)
    };
    Ok(json_response(201, &answered))
}

/// The router: one fallback handler, because Kubernetes paths do not fit a route table.
pub(crate) fn router(state: Arc<AppState>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(state)
}

fn json_response(code: u16, body: &Value) -> Response {
    json_bytes(code, body.to_string().into_bytes())
}

fn json_bytes(code: u16, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The JSON of a list: its items written as they are (stored JSON mostly), not re-encoded.
fn list_json(def: &ResourceDef, version: &str, page: &Page) -> Result<Vec<u8>, ApiError> {
    let mut meta = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = json!(c);
    }
    if let Some(n) = page.remaining {
        meta["remainingItemCount"] = json!(n);
    }
    let size: usize = page
        .items
        .iter()
        .map(|i| match i {
            Item::Raw(b) => b.len() + 1,
            Item::Value(_) => 512,
        })
        .sum();
    let mut out = Vec::with_capacity(size + 256);
    // Keys in the order serde_json writes a map, as the other responses.
    out.extend_from_slice(b"{\"apiVersion\":");
    let enc = |out: &mut Vec<u8>, v: &Value| {
        serde_json::to_writer(out, v).map_err(|e| ApiError::internal(e.to_string()))
    };
    enc(&mut out, &json!(def.api_version(version)))?;
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item.write_json(&mut out)?;
    }
    out.extend_from_slice(b"],\"kind\":");
    enc(&mut out, &json!(def.list_kind))?;
    out.extend_from_slice(b",\"metadata\":");
    enc(&mut out, &meta)?;
    out.push(b'}');
    Ok(out)
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.status())
}

fn with_warnings(mut r: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {:?}", w.replace(['\r', '\n'], " "));
        if let Ok(v) = HeaderValue::from_str(&text) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

async fn handle(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let r = dispatch(&st, req)
        .await
        .unwrap_or_else(|e| error_response(&e));
    tracing::debug!(%method, %uri, status = r.status().as_u16(), "request");
    r
}

/// An apply that would create `name` is also a `create`, and is authorized as one, as
/// kube-apiserver's patch handler does (so a role granting `patch` alone cannot create).
async fn require_create_if_missing(
    st: &Arc<AppState>,
    user: &User,
    def: &ResourceDef,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    let core = st.core.clone();
    let key = Core::key(def, namespace, name);
    let exists = blocking(move || Ok(core.store.get(&key)?.is_some())).await?;
    if exists {
        return Ok(());
    }
    let attrs = Attributes {
        verb: "create",
        group: &def.group,
        resource: &def.plural,
        subresource: None,
        namespace,
        name: Some(name),
    };
    st.require(user, attrs).await
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
}

async fn dispatch(st: &Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    let p = req.uri().path().to_string();
    match p.as_str() {
        "/healthz" | "/livez" | "/readyz" => return Ok((StatusCode::OK, "ok").into_response()),
        "/version" | "/version/" => return Ok(json_response(200, &discovery::version())),
        _ => {}
    }
    let user = st
        .auth
        .authenticate(&req)
        .ok_or_else(ApiError::unauthorized)?;
    if p == reviews::TOKEN_REVIEWS || p == reviews::ACCESS_REVIEWS {
        return review(st, &user, &p, req).await;
    }
    let reg = st.core.registry();
    if p == "/openapi/v3" || p == "/openapi/v3/" {
        return Ok(json_response(200, &discovery::openapi_root(&reg)));
    }
    if let Some(gv) = p.strip_prefix("/openapi/v3/") {
        let (g, v) = match gv.split('/').collect::<Vec<_>>().as_slice() {
            ["api", v] => (String::new(), (*v).to_string()),
            ["apis", g, v] => ((*g).to_string(), (*v).to_string()),
            _ => return Err(ApiError::no_route()),
        };
        return discovery::openapi_gv(&reg, &g, &v)
            .map(|d| json_response(200, &d))
            .ok_or_else(ApiError::no_route);
    }
    let target = path::parse(&p).ok_or_else(ApiError::no_route)?;
    let discovery_doc = match &target {
        Target::CoreVersions => Some(discovery::core_versions()),
        Target::Groups => Some(discovery::groups(&reg)),
        Target::Group(g) => Some(discovery::group(&reg, g).ok_or_else(ApiError::no_route)?),
        Target::Resources { group, version } => {
            Some(discovery::resources(&reg, group, version).ok_or_else(ApiError::no_route)?)
        }
        Target::Resource(_) => None,
    };
    if let Some(doc) = discovery_doc {
        if req.method() != Method::GET {
            return Err(ApiError::method_not_allowed(
                "discovery documents are read-only",
            ));
        }
        return Ok(json_response(200, &doc));
    }
    let Target::Resource(rp) = target else {
        return Err(ApiError::no_route());
    };
    let Some(def) = reg.lookup(&rp.group, &rp.version, &rp.resource) else {
        let verb = verb_of(req.method(), rp.name.is_some(), &query(&req));
        return Err(unknown_resource(st, &user, &rp, verb).await);
    };
    if (!def.namespaced && rp.namespace.is_some())
        || (def.namespaced && rp.namespace.is_none() && rp.name.is_some())
    {
        return Err(ApiError::no_route());
    }
    let served = |sub: &str| {
        def.version(&rp.version).is_some_and(|v| match sub {
            "status" => v.status,
            "scale" => v.scale.is_some(),
            _ => false,
        })
    };
    if rp.subresource.as_deref().is_some_and(|s| !served(s)) {
        return Err(ApiError::no_route());
    }
    resource(st, &user, def, rp, req).await
}

/// The answer to a request for a resource no API serves: kube-apiserver authorizes before it
/// routes, so a caller not granted the request is refused (`403`, and the request log records
/// it) and only a caller that is granted it learns that nothing is there (`404`).
async fn unknown_resource(
    st: &Arc<AppState>,
    user: &User,
    rp: &ResourcePath,
    verb: Result<&str, ApiError>,
) -> ApiError {
    let Ok(verb) = verb else {
        return ApiError::no_route();
    };
    let attrs = Attributes {
        verb,
        group: &rp.group,
        resource: &rp.resource,
        subresource: rp.subresource.as_deref(),
        namespace: rp.namespace.as_deref(),
        name: rp.name.as_deref(),
    };
    match st.require(user, attrs).await {
        Ok(()) => ApiError::no_route(),
        Err(refused) => refused,
    }
}

fn query(req: &Request) -> HashMap<String, String> {
    Query::<HashMap<String, String>>::try_from_uri(req.uri())
        .map(|q| q.0)
        .unwrap_or_default()
}

fn verb_of(
    method: &Method,
    named: bool,
    q: &HashMap<String, String>,
) -> Result<&'static str, ApiError> {
    let watch = q.get("watch").is_some_and(|w| w == "true" || w == "1");
    Ok(match (method.as_str(), named) {
        ("GET", true) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (m, _) => {
            return Err(ApiError::method_not_allowed(format!(
                "method {m} is not supported here"
            )));
        }
    })
}

/// The field manager of a write: `fieldManager`, else the User-Agent's first word, as
/// kube-apiserver names managers of clients that do not say.
fn field_manager(q: &HashMap<String, String>, user_agent: &str) -> Result<String, ApiError> {
    let invalid = |field: &str, msg: &str| {
        let mut e = ApiError::unprocessable(format!(
            "PatchOptions.meta.k8s.io \"\" is invalid: {field}: {msg}"
        ));
        e.details = Some(
            json!({"group": "meta.k8s.io", "kind": "PatchOptions", "name": "",
            "causes": [{"reason": "FieldValueInvalid", "message": msg, "field": field}]}),
        );
        e
    };
    match q.get("fieldManager").filter(|m| !m.is_empty()) {
        Some(m) if m.len() > 128 => Err(invalid(
            "fieldManager",
            "Too long: may not be more than 128 bytes",
        )),
        Some(m) if m.chars().any(|c| c.is_control()) => Err(invalid(
            "fieldManager",
            &format!("Invalid value: {m:?}: must only contain printable characters"),
        )),
        Some(m) => Ok(m.clone()),
        None => {
            let prefix: String = user_agent
                .split('/')
                .next()
                .unwrap_or_default()
                .chars()
                .filter(|c| !c.is_control())
                .take(128)
                .collect();
            Ok(if prefix.is_empty() {
                "unknown".into()
            } else {
                prefix
            })
        }
    }
}

fn write_opts(q: &HashMap<String, String>, user: &User) -> Result<WriteOpts, ApiError> {
    let field_validation = match q.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Ignore") => FieldValidation::Ignore,
        Some("Strict") => FieldValidation::Strict,
        Some(o) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation must be Ignore, Warn or Strict, not {o:?}"
            )));
        }
    };
    let dry_run = match q.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(o) => {
            return Err(ApiError::bad_request(format!(
                "dryRun must be All, not {o:?}"
            )));
        }
    };
    Ok(WriteOpts {
        field_validation,
        dry_run,
        manager: None,
        force: false,
        user: Some(user_info(user)),
    })
}

fn parse_object(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .or_else(|_| {
            std::str::from_utf8(body)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_saphyr::from_str::<Value>(t).map_err(|e| e.to_string()))
        })
        .map_err(|e| ApiError::bad_request(format!("the request body is not a valid object: {e}")))
}

fn wants_table(req: &Request) -> bool {
    req.headers()
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| {
            a.split(',')
                .next()
                .is_some_and(|first| first.contains("as=Table"))
        })
}

/// kube-apiserver's answer to a `continue` that comes with a `resourceVersion` other than "0":
/// the token already names the revision its pages are read at.
const CONTINUE_WITH_RV: &str = "specifying resource version is not allowed when using continue";

fn list_query(rp: &ResourcePath, q: &HashMap<String, String>) -> Result<ListQuery, ApiError> {
    let continue_token = q.get("continue").filter(|c| !c.is_empty()).cloned();
    let rv = q.get("resourceVersion").map(String::as_str).unwrap_or("");
    if continue_token.is_some() && !matches!(rv, "" | "0") {
        return Err(ApiError::bad_request(CONTINUE_WITH_RV));
    }
    Ok(ListQuery {
        namespace: rp.namespace.clone(),
        labels: LabelSelector::parse(
            q.get("labelSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?,
        fields: FieldSelector::parse(
            q.get("fieldSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )
        .map_err(ApiError::bad_request)?,
        limit: q.get("limit").and_then(|l| l.parse().ok()),
        continue_token,
    })
}

async fn resource(
    st: &Arc<AppState>,
    user: &User,
    def: Arc<ResourceDef>,
    rp: ResourcePath,
    req: Request,
) -> Result<Response, ApiError> {
    let q = query(&req);
    let verb = verb_of(req.method(), rp.name.is_some(), &q)?;
    let lq = list_query(&rp, &q)?;
    let name_attr = rp.name.as_deref().or_else(|| {
        if matches!(verb, "list" | "watch") {
            lq.fields.pinned_name()
        } else {
            None
        }
    });
    let attrs = Attributes {
        verb,
        group: &def.group,
        resource: &def.plural,
        subresource: rp.subresource.as_deref(),
        namespace: rp.namespace.as_deref(),
        name: name_attr,
    };
    st.require(user, attrs).await?;
    let table = wants_table(&req);
    let include = q
        .get("includeObject")
        .cloned()
        .unwrap_or_else(|| "Metadata".into());
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|c| c.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let body: Bytes = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| ApiError::too_large(e.to_string()))?;
    let core = st.core.clone();
    let version = rp.version.clone();
    let ns = rp.namespace.clone();
    let name = rp.name.clone().unwrap_or_default();
    let sub = rp.subresource.clone();
    if sub.as_deref() == Some("scale") {
        return scale(core, def, version, ns, name, verb, &q, &ct, body, user).await;
    }
    match verb {
        "get" => {
            let d = def.clone();
            let obj = blocking(move || core.get(&d, &version, ns.as_deref(), &name)).await?;
            if table {
                let meta = table::TableMeta::of_object(&obj);
                return Ok(json_response(
                    200,
                    &table::table(&def, &rp.version, &[obj], &meta, &include),
                ));
            }
            Ok(json_response(200, &obj))
        }
        "list" => {
            let d = def.clone();
            let page = blocking(move || core.list(&d, &version, &lq)).await?;
            if table {
                let meta = table::TableMeta {
                    resource_version: Some(page.resource_version.to_string()),
                    continue_token: page.continue_token.clone(),
                    remaining: page.remaining,
                };
                return Ok(json_response(
                    200,
                    &table::table(&def, &rp.version, &page.values()?, &meta, &include),
                ));
            }
            let v = rp.version.clone();
            let body = blocking(move || list_json(&def, &v, &page)).await?;
            Ok(json_bytes(200, body))
        }
        "watch" => crate::watch_http::watch(st, def, rp.version.clone(), lq, &q).await,
        "create" => {
            let mut opts = write_opts(&q, user)?;
            opts.manager = Some(field_manager(&q, &user_agent)?);
            let obj = parse_object(&body)?;
            let w = blocking(move || core.create(&def, &version, ns.as_deref(), obj, opts)).await?;
            Ok(with_warnings(json_response(201, &w.object), &w.warnings))
        }
        "update" => {
            let mut opts = write_opts(&q, user)?;
            opts.manager = Some(field_manager(&q, &user_agent)?);
            let obj = parse_object(&body)?;
            let w = blocking(move || {
                core.update(
                    &def,
                    &version,
                    ns.as_deref(),
                    &name,
                    obj,
                    sub.as_deref(),
                    opts,
                )
            })
            .await?;
            Ok(with_warnings(json_response(200, &w.object), &w.warnings))
        }
        "patch" => {
            let mut opts = write_opts(&q, user)?;
            let ty = PatchType::from_content_type(&ct)
                .ok_or_else(|| ApiError::unsupported_media_type(&ct))?;
            let force = match q.get("force").map(String::as_str) {
                None | Some("" | "false") => false,
                Some("true") => true,
                Some(o) => {
                    return Err(ApiError::bad_request(format!(
                        "force must be true or false, not {o:?}"
                    )));
                }
            };
            if ty == PatchType::Apply {
                if q.get("fieldManager").is_none_or(String::is_empty) {
                    let mut e = ApiError::unprocessable(
                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                    );
                    e.details = Some(
                        json!({"group": "meta.k8s.io", "kind": "PatchOptions", "name": "",
                        "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]}),
                    );
                    return Err(e);
                }
            } else if force {
                let mut e = ApiError::unprocessable(
                    "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
                );
                e.details = Some(
                    json!({"group": "meta.k8s.io", "kind": "PatchOptions", "name": "",
                    "causes": [{"reason": "FieldValueForbidden", "message": "Forbidden: may not be specified for non-apply patch", "field": "force"}]}),
                );
                return Err(e);
            }
            opts.manager = Some(field_manager(&q, &user_agent)?);
            opts.force = force;
            if ty == PatchType::Apply && sub.is_none() {
                require_create_if_missing(st, user, &def, ns.as_deref(), &name).await?;
            }
            let w = blocking(move || {
                core.patch(
                    &def,
                    &version,
                    ns.as_deref(),
                    &name,
                    ty,
                    &body,
                    sub.as_deref(),
                    opts,
                )
            })
            .await?;
            Ok(with_warnings(
                json_response(if w.created { 201 } else { 200 }, &w.object),
                &w.warnings,
            ))
        }
        "delete" => {
            let opts = delete_opts(&q, &body, user)?;
            let d = def.clone();
            let r = blocking(move || core.delete(&d, ns.as_deref(), &name, &opts)).await?;
            Ok(match r {
                Deleted::Pending(obj) => {
                    json_response(200, &st.core.to_version(&def, &rp.version, obj)?)
                }
                Deleted::Gone(obj) => json_response(
                    200,
                    &json!({
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                        "details": {"name": obj.pointer("/metadata/name"), "group": def.group, "kind": def.plural,
                                    "uid": obj.pointer("/metadata/uid")}
                    }),
                ),
            })
        }
        "deletecollection" => {
            let opts = delete_opts(&q, &body, user)?;
            let d = def.clone();
            let items = blocking(move || {
                let mut lq = lq;
                lq.limit = None;
                let page = core.list(&d, &version, &lq)?;
                let mut out = Vec::new();
                for o in page.values()? {
                    let n = o
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let ons = o
                        .pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    match core.delete(&d, ons.as_deref(), &n, &opts) {
                        Ok(Deleted::Pending(o) | Deleted::Gone(o)) => out.push(o),
                        Err(e) if e.code == 404 => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(out)
            })
            .await?;
            Ok(json_response(
                200,
                &json!({"kind": def.list_kind, "apiVersion": def.api_version(&rp.version), "metadata": {}, "items": items}),
            ))
        }
        _ => Err(ApiError::method_not_allowed(verb.to_string())),
    }
}

/// `GET`, `PUT` and `PATCH` of `…/scale`.
#[allow(clippy::too_many_arguments)]
async fn scale(
    core: Arc<Core>,
    def: Arc<ResourceDef>,
    version: String,
    ns: Option<String>,
    name: String,
    verb: &str,
    q: &HashMap<String, String>,
    ct: &str,
    body: Bytes,
    user: &User,
) -> Result<Response, ApiError> {
    let ty = match verb {
        "get" => {
            let s = blocking(move || core.get_scale(&def, &version, ns.as_deref(), &name)).await?;
            return Ok(json_response(200, &s));
        }
        "update" => None,
        "patch" => Some(
            PatchType::from_content_type(ct).ok_or_else(|| ApiError::unsupported_media_type(ct))?,
        ),
        other => {
            return Err(ApiError::method_not_allowed(format!(
                "{other} is not supported on the scale subresource"
            )));
        }
    };
    let opts = write_opts(q, user)?;
    let w =
        blocking(move || core.write_scale(&def, &version, ns.as_deref(), &name, ty, &body, opts))
            .await?;
    Ok(with_warnings(json_response(200, &w.object), &w.warnings))
}

fn delete_opts(
    q: &HashMap<String, String>,
    body: &[u8],
    user: &User,
) -> Result<DeleteOpts, ApiError> {
    let b: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        parse_object(body)?
    };
    let policy = q.get("propagationPolicy").cloned().or_else(|| {
        b.get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let mut propagation = match policy.as_deref() {
        None | Some("") => None,
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some("Orphan") => Some(Propagation::Orphan),
        Some(o) => {
            return Err(ApiError::bad_request(format!(
                "unsupported propagationPolicy {o:?}"
            )));
        }
    };
    let orphan = q
        .get("orphanDependents")
        .map(|s| s == "true")
        .or_else(|| b.get("orphanDependents").and_then(Value::as_bool));
    if propagation.is_none() {
        propagation = orphan.map(|o| {
            if o {
                Propagation::Orphan
            } else {
                Propagation::Background
            }
        });
    }
    let s = |p: &str| {
        b.pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let dry = q.get("dryRun").is_some_and(|d| d == "All")
        || b.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"));
    Ok(DeleteOpts {
        propagation,
        uid: s("/preconditions/uid"),
        resource_version: s("/preconditions/resourceVersion"),
        dry_run: dry,
        user: Some(user_info(user)),
    })
}

/// The writer as admission webhooks see it (`userInfo`).
fn user_info(user: &User) -> crate::webhook::UserInfo {
    crate::webhook::UserInfo {
        username: user.name.clone(),
        groups: user.groups.clone(),
    }
}

/// Serializes one watch event line.
pub(crate) fn event_line(type_: &str, object: &Value) -> Bytes {
    // Written around the object instead of copying it into a wrapper `Value`; the keys in the
    // order serde_json writes a map.
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"object\":");
    // Writing a `Value` into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, object);
    out.extend_from_slice(b",\"type\":");
    let _ = serde_json::to_writer(&mut out, type_);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lists and watch lines written around stored JSON read as the wrapper objects would.
    #[test]
    fn written_around_objects_as_serde_json_would() {
        let obj =
            json!({"metadata": {"name": "a \"quoted\" name", "labels": {"z": "1", "a": "2"}}});
        let line = event_line("MODIFIED", &obj);
        let want = format!("{}\n", json!({"type": "MODIFIED", "object": obj}));
        assert_eq!(std::str::from_utf8(&line).unwrap(), want);

        let (reg, _) = crate::resources::Registry::build([]);
        let def = reg.get("", "configmaps").unwrap();
        let page = Page {
            items: vec![
                Item::Raw(
                    br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#.to_vec(),
                ),
                Item::Value(
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
                ),
            ],
            resource_version: 7,
            continue_token: Some("tok".into()),
            remaining: Some(3),
        };
        let body: Value = serde_json::from_slice(&list_json(&def, "v1", &page).unwrap()).unwrap();
        assert_eq!(
            body,
            json!({
                "apiVersion": "v1", "kind": "ConfigMapList",
                "metadata": {"resourceVersion": "7", "continue": "tok", "remainingItemCount": 3},
                "items": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}},
                ],
            })
        );
    }
}
