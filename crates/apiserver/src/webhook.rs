//! Admission and conversion webhooks, called the way kube-apiserver calls them: the
//! `MutatingWebhookConfiguration` and `ValidatingWebhookConfiguration` objects stored here, and
//! the conversion webhook of a CRD (`spec.conversion.strategy: Webhook`), over HTTPS.
//!
//! Matching, reviews and the reading of answers are pure (`config`, `admission`,
//! `conversion`); this module resolves endpoints and makes the calls.

mod admission;
mod client;
mod conditions;
mod config;
mod conversion;

pub(crate) use admission::UserInfo;
pub(crate) use conversion::ConversionWebhook;

use crate::core::Core;
use crate::error::ApiError;
use crate::meta;
use crate::resources::ResourceDef;
use crate::store::{Key, prefix};
use config::{ClientConfig, Hook, HookKind, Request, Target};
use serde_json::Value;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs as _};
use std::time::Duration;

/// Conversion webhooks get kube-apiserver's default client timeout.
const CONVERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// The conversion webhook of a CRD, if its strategy is `Webhook`.
pub(crate) fn conversion_of_crd(crd: &Value) -> Option<ConversionWebhook> {
    conversion::of_crd(crd)
}

/// The request being admitted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attributes<'a> {
    pub(crate) def: &'a ResourceDef,
    /// The version the client wrote in.
    pub(crate) version: &'a str,
    pub(crate) subresource: Option<&'a str>,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub(crate) operation: &'static str,
    pub(crate) dry_run: bool,
    pub(crate) user: Option<&'a UserInfo>,
}

impl Attributes<'_> {
    /// kube-apiserver never calls webhooks for webhook configurations themselves.
    fn exempt(&self) -> bool {
        self.def.group == "admissionregistration.k8s.io"
    }

    fn request<'b>(&'b self, version: &'b str) -> Request<'b> {
        Request {
            operation: self.operation,
            group: &self.def.group,
            version: "",
            resource: &self.def.plural,
            subresource: self.subresource.unwrap_or_default(),
            namespaced: self.def.namespaced,
        }
        .at(version)
    }
}

impl<'a> Request<'a> {
    fn at(self, version: &'a str) -> Self {
        Self { version, ..self }
    }
}

/// One admission webhook call, ready to send.
struct Call {
    endpoint: client::Endpoint,
    ca_bundle: Option<Vec<u8>>,
    body: Vec<u8>,
    uid: String,
    timeout: Duration,
    mutating: bool,
}

impl Call {
    /// Sends the review and reads the answer; the error is the reason of a failed call.
    async fn send(self) -> Result<admission::Answer, String> {
        let (status, resp) = client::post(
            &self.endpoint,
            self.ca_bundle.as_deref(),
            self.body,
            self.timeout,
        )
        .await
        .map_err(|e| format!("failed to call webhook: {e}"))?;
        admission::verify(&self.uid, self.mutating, status, &resp)
    }
}

/// What becomes of one webhook for one request.
enum Prepared {
    /// Call it.
    Call(Call),
    /// Its `matchConditions` say not to call it.
    Skip,
    /// Its `matchConditions` cannot be evaluated under `failurePolicy: Fail`.
    Refuse(ApiError),
}

/// Runs a call on the server's runtime from a blocking thread and waits for it.
fn run<F>(f: F) -> Result<F::Output, String>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = tokio::runtime::Handle::try_current()
        .map_err(|_| "no async runtime to call the webhook from".to_string())?;
    let (tx, rx) = std::sync::mpsc::channel();
    handle.spawn(async move {
        let _ = tx.send(f.await);
    });
    rx.recv()
        .map_err(|_| "the webhook call was cancelled".to_string())
}

/// The version an object is in (`apiVersion`'s last part).
fn version_of(obj: &Value) -> Option<&str> {
    obj.get("apiVersion")
        .and_then(Value::as_str)
        .map(|a| a.rsplit('/').next().unwrap_or(a))
}

/// Go's `schema.GroupVersionKind.String()`.
fn gvk_string(def: &ResourceDef, version: &str) -> String {
    format!("{}/{version}, Kind={}", def.group, def.kind)
}

impl Core {
    /// The webhooks of the stored configurations of `kind`, in the order of their
    /// configurations' names.
    fn hooks(&self, kind: HookKind) -> Result<Vec<Hook>, ApiError> {
        let plural = match kind {
            HookKind::Validating => "validatingwebhookconfigurations",
            HookKind::Mutating => "mutatingwebhookconfigurations",
        };
        let mut out = Vec::new();
        self.store.scan(
            &prefix("admissionregistration.k8s.io", plural, None),
            None,
            |_, v| {
                out.extend(config::hooks_of(kind, &v));
                true
            },
        )?;
        Ok(out)
    }

    /// Where a webhook is reached; the error is the cause of a failed call.
    fn endpoint(
        &self,
        client: &ClientConfig,
        timeout: Duration,
    ) -> Result<client::Endpoint, String> {
        match &client.target {
            Target::Url(url) => {
                let (host, port, path) = client::parse_url(url)?;
                let path_and_query = client::with_timeout(&path, timeout);
                let authority = match host.parse::<IpAddr>() {
                    Ok(IpAddr::V6(_)) => format!("[{host}]:{port}"),
                    _ => format!("{host}:{port}"),
                };
                let url = format!("https://{authority}{path_and_query}");
                let addr = (host.as_str(), port)
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut a| a.next())
                    .ok_or_else(|| {
                        format!("Post {url:?}: dial tcp: lookup {host}: no such host")
                    })?;
                Ok(client::Endpoint {
                    url,
                    addr,
                    server_name: host,
                    host: authority,
                    path_and_query,
                })
            }
            Target::Service {
                namespace,
                name,
                path,
                port,
            } => {
                let host = format!("{name}.{namespace}.svc");
                let path_and_query = client::with_timeout(path, timeout);
                let url = format!("https://{host}:{port}{path_and_query}");
                let service = self
                    .store
                    .get(&Key::new("", "services", namespace, name))
                    .map_err(|e| e.to_string())?;
                let ip = service
                    .as_ref()
                    .and_then(|s| s.pointer("/spec/clusterIP"))
                    .and_then(Value::as_str)
                    .and_then(|ip| ip.parse::<IpAddr>().ok())
                    .ok_or_else(|| {
                        format!("Post {url:?}: dial tcp: lookup {host}: no such host")
                    })?;
                Ok(client::Endpoint {
                    url,
                    addr: SocketAddr::new(ip, *port),
                    server_name: host.clone(),
                    host: format!("{host}:{port}"),
                    path_and_query,
                })
            }
            Target::Missing => Err("webhook configuration must have either service or URL".into()),
        }
    }

    /// Which version of the resource a webhook is called with, if any (`matchPolicy`).
    fn matching_version(hook: &Hook, a: &Attributes<'_>) -> Option<String> {
        if hook.rules_match(&a.request(a.version)) {
            return Some(a.version.to_string());
        }
        if !hook.equivalent {
            return None;
        }
        a.def
            .versions
            .iter()
            .find(|v| v.name != a.version && hook.rules_match(&a.request(&v.name)))
            .map(|v| v.name.clone())
    }

    /// The namespace object whose labels the namespace selector reads.
    fn namespace_of(&self, a: &Attributes<'_>, obj: &Value) -> Result<Option<Value>, ApiError> {
        if !a.def.namespaced {
            return Ok(None);
        }
        let ns = meta::get(obj, "namespace").unwrap_or_default();
        Ok(self.store.get(&Key::new("", "namespaces", "", ns))?)
    }

    /// Builds the call of one admission webhook, unless its `matchConditions` skip it or refuse
    /// the request; the error is the reason of a failed call.
    fn prepare(
        &self,
        hook: &Hook,
        a: &Attributes<'_>,
        version: &str,
        object: Option<&Value>,
        old_object: Option<&Value>,
    ) -> Result<Prepared, String> {
        let uid = meta::uuid();
        let subject = object.or(old_object).cloned().unwrap_or(Value::Null);
        let name = meta::get(&subject, "name").unwrap_or_default();
        let user = a.user.cloned().unwrap_or_default();
        let body = admission::Review {
            uid: &uid,
            gvk: (&a.def.group, version, &a.def.kind),
            resource: &a.def.plural,
            request_version: a.version,
            subresource: a.subresource.unwrap_or_default(),
            name,
            namespace: meta::get(&subject, "namespace").unwrap_or_default(),
            operation: a.operation,
            user: &user,
            object,
            old_object,
            dry_run: a.dry_run,
        }
        .body();
        match conditions::evaluate(&hook.conditions, &body["request"], hook.fail_closed) {
            conditions::Matched::Call => {}
            conditions::Matched::Skip => return Ok(Prepared::Skip),
            conditions::Matched::Fail(errors) => {
                tracing::warn!(webhook = %hook.name, %errors, "Failed evaluating match conditions, failing closed");
                return Ok(Prepared::Refuse(ApiError::forbidden(format!(
                    "{} {name:?} is forbidden: {errors}",
                    a.def.group_resource()
                ))));
            }
        }
        if !hook.review_versions.iter().any(|v| v == "v1") {
            return Err(
                "webhook does not accept known AdmissionReview versions (v1, v1beta1)".into(),
            );
        }
        let endpoint = self.endpoint(&hook.client, hook.timeout)?;
        Ok(Prepared::Call(Call {
            endpoint,
            ca_bundle: hook.client.ca_bundle.clone(),
            body: serde_json::to_vec(&body).map_err(|e| e.to_string())?,
            uid,
            timeout: hook.timeout,
            mutating: hook.kind == HookKind::Mutating,
        }))
    }

    /// The webhooks of `kind` this request calls, with the version each is called with.
    fn relevant(
        &self,
        kind: HookKind,
        a: &Attributes<'_>,
        new: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<Vec<(Hook, String)>, ApiError> {
        if a.exempt() {
            return Ok(Vec::new());
        }
        let hooks = self.hooks(kind)?;
        if hooks.is_empty() {
            return Ok(Vec::new());
        }
        let subject = new.or(old).cloned().unwrap_or(Value::Null);
        let ns = self.namespace_of(a, &subject)?;
        let is_namespace = a.def.group.is_empty() && a.def.plural == "namespaces";
        let mut out = Vec::new();
        for hook in hooks {
            let Some(v) = Self::matching_version(&hook, a) else {
                continue;
            };
            if !hook.selectors_match(new, old, ns.as_ref(), is_namespace) {
                continue;
            }
            if a.dry_run && !hook.dry_run_safe {
                return Err(ApiError::bad_request(format!(
                    "admission webhook {:?} does not support dry run",
                    hook.name
                )));
            }
            out.push((hook, v));
        }
        Ok(out)
    }

    /// Mutating admission: each matching webhook in turn, its JSON patch applied to `new`;
    /// then, once, each `reinvocationPolicy: IfNeeded` webhook whose object a later webhook
    /// changed (kube-apiserver's reinvocation).
    pub(crate) fn mutating_admission(
        &self,
        a: &Attributes<'_>,
        old: Option<&Value>,
        new: &mut Value,
        warnings: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        let relevant = self.relevant(HookKind::Mutating, a, Some(new), old)?;
        // The object as each IfNeeded webhook left it.
        let mut left: Vec<(usize, Value)> = Vec::new();
        for (i, (hook, v)) in relevant.iter().enumerate() {
            if self.mutate_once(hook, v, a, old, new, warnings)? && hook.reinvoke {
                left.push((i, new.clone()));
            }
        }
        for (i, as_left) in left {
            if *new != as_left {
                let (hook, v) = &relevant[i];
                self.mutate_once(hook, v, a, old, new, warnings)?;
            }
        }
        Ok(())
    }

    /// One call of a mutating webhook (seeing `new` in version `v`); whether it was called.
    fn mutate_once(
        &self,
        hook: &Hook,
        v: &str,
        a: &Attributes<'_>,
        old: Option<&Value>,
        new: &mut Value,
        warnings: &mut Vec<String>,
    ) -> Result<bool, ApiError> {
        let mut obj = self.convert(a.def, v, new.clone())?;
        let old_v = old.map(|o| self.convert(a.def, v, o.clone())).transpose()?;
        let answer = match self.prepare(hook, a, v, Some(&obj), old_v.as_ref()) {
            Ok(Prepared::Skip) => return Ok(false),
            Ok(Prepared::Refuse(e)) => return Err(e),
            Ok(Prepared::Call(call)) => run(call.send()).and_then(|r| r),
            Err(reason) => Err(reason),
        };
        match answer {
            Ok(answer) => {
                warnings.extend(answer.warnings);
                if !answer.allowed {
                    return Err(admission::denied(&hook.name, answer.result.as_ref()));
                }
                if let Some(patch) = answer.patch {
                    let patch: json_patch::Patch = serde_json::from_value(patch)
                        .map_err(|e| ApiError::internal_error(e.to_string()))?;
                    json_patch::patch(&mut obj, &patch)
                        .map_err(|e| ApiError::internal_error(e.to_string()))?;
                    *new = self.convert(a.def, a.version, obj)?;
                }
            }
            Err(reason) if hook.fail_closed => {
                return Err(admission::call_failed(&hook.name, &reason));
            }
            Err(reason) => {
                tracing::warn!(configuration = %hook.configuration, webhook = %hook.name, %reason, "Failed calling webhook, failing open");
            }
        }
        Ok(true)
    }

    /// Validating admission: every matching webhook (concurrently, as kube-apiserver calls
    /// them); the first refusal in configuration order wins.
    pub(crate) fn validating_admission(
        &self,
        a: &Attributes<'_>,
        old: Option<&Value>,
        new: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        let relevant = self.relevant(HookKind::Validating, a, new, old)?;
        if relevant.is_empty() {
            return Ok(());
        }
        let mut calls = Vec::new();
        let mut called = Vec::new();
        for (hook, v) in &relevant {
            let obj = new.map(|o| self.convert(a.def, v, o.clone())).transpose()?;
            let old_v = old.map(|o| self.convert(a.def, v, o.clone())).transpose()?;
            match self.prepare(hook, a, v, obj.as_ref(), old_v.as_ref()) {
                Ok(Prepared::Skip) => continue,
                Ok(Prepared::Refuse(e)) => return Err(e),
                Ok(Prepared::Call(call)) => calls.push(Ok(call)),
                Err(reason) => calls.push(Err(reason)),
            }
            called.push(hook);
        }
        if calls.is_empty() {
            return Ok(());
        }
        let results = run(futures_util::future::join_all(calls.into_iter().map(
            |c| async move {
                match c {
                    Ok(call) => call.send().await,
                    Err(e) => Err(e),
                }
            },
        )))
        .map_err(ApiError::internal_error)?;
        let mut first = None;
        for (hook, result) in called.into_iter().zip(results) {
            let err = match result {
                Ok(answer) => {
                    warnings.extend(answer.warnings);
                    (!answer.allowed).then(|| admission::denied(&hook.name, answer.result.as_ref()))
                }
                Err(reason) if hook.fail_closed => {
                    Some(admission::call_failed(&hook.name, &reason))
                }
                Err(reason) => {
                    tracing::warn!(configuration = %hook.configuration, webhook = %hook.name, %reason, "Failed calling webhook, failing open");
                    None
                }
            };
            if first.is_none() {
                first = err;
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The object seen through `version`: by the CRD's conversion webhook when it is stored in
    /// another version, else by rewriting `apiVersion`.
    pub(crate) fn convert(
        &self,
        def: &ResourceDef,
        version: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        Ok(self.convert_all(def, version, vec![obj])?.remove(0))
    }

    /// [`Core::convert`] of many objects in one review (only those in another version are sent).
    pub(crate) fn convert_all(
        &self,
        def: &ResourceDef,
        version: &str,
        objs: Vec<Value>,
    ) -> Result<Vec<Value>, ApiError> {
        let Some(w) = &def.conversion else {
            return objs
                .into_iter()
                .map(|o| self.to_version(def, version, o))
                .collect();
        };
        let pending: Vec<usize> = (0..objs.len())
            .filter(|i| version_of(&objs[*i]).is_some_and(|v| v != version))
            .collect();
        let Some(first) = pending.first() else {
            return objs
                .into_iter()
                .map(|o| self.to_version(def, version, o))
                .collect();
        };
        let from = version_of(&objs[*first]).unwrap_or_default().to_string();
        let failed = |cause: String| {
            ApiError::internal_error(format!(
                "conversion webhook for {} failed: {cause}",
                gvk_string(def, &from)
            ))
        };
        if !w.review_versions.iter().any(|v| v == "v1") {
            return Err(failed("no supported conversion review versions".into()));
        }
        let uid = meta::uuid();
        let desired = def.api_version(version);
        let sent: Vec<Value> = pending.iter().map(|i| objs[*i].clone()).collect();
        let body = serde_json::to_vec(&conversion::request(&uid, &desired, &sent))
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let ep = self
            .endpoint(&w.client, CONVERSION_TIMEOUT)
            .map_err(failed)?;
        let ca = w.client.ca_bundle.clone();
        let (_, resp) =
            run(async move { client::post(&ep, ca.as_deref(), body, CONVERSION_TIMEOUT).await })
                .map_err(failed)?
                .map_err(failed)?;
        let converted = conversion::response(&uid, sent.len(), &resp).map_err(|e| {
            if e.starts_with("returned ") {
                ApiError::internal_error(format!(
                    "conversion webhook for {} {e}",
                    gvk_string(def, &from)
                ))
            } else {
                failed(e)
            }
        })?;
        let mut out = objs;
        for (i, mut c) in pending.into_iter().zip(converted) {
            if version_of(&c) != Some(version) {
                return Err(failed(format!(
                    "invalid converted object: expected apiVersion {desired:?}, got {:?}",
                    c.get("apiVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                )));
            }
            if let Some(m) = c.as_object_mut() {
                m.insert("kind".into(), Value::String(def.kind.clone()));
            }
            out[i] = c;
        }
        Ok(out)
    }
}
