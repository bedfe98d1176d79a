//! Watches ValidationWebhook and ConversionWebhook objects and keeps, for each, its handler
//! served, its webhook registered (the ValidatingWebhookConfiguration, the CRD's
//! `spec.conversion`) and its status saying whether it serves and why not.

use crate::Options;
use crate::finalizers;
use crate::handlers::{Converter, Validator};
use crate::render;
use crate::server::Served;
use api::webhooks::{ConversionWebhook, ValidationWebhook};
use futures_util::StreamExt as _;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const MANAGER: &str = "webhook-handler";

/// Handlers built so far, by object name, with the content they were built from.
#[derive(Default)]
struct Built {
    validators: BTreeMap<String, (String, Result<Arc<Validator>, String>)>,
    converters: BTreeMap<String, (String, Result<Arc<Converter>, String>)>,
}

fn to_values(list: Vec<DynamicObject>) -> Vec<Value> {
    list.into_iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect()
}

fn name_of(v: &Value) -> String {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The status of a webhook object: serving, or why not.
pub(crate) fn status(result: Result<&str, &str>) -> Value {
    let (status, reason, message) = match result {
        Ok(m) => ("True", "Serving", m),
        Err(m) => ("False", "HandlerNotServed", m),
    };
    json!({"conditions": [{"type": "Ready", "status": status, "reason": reason, "message": message}]})
}

/// Writes the status unless it already says the same.
async fn set_status(api: &Api<DynamicObject>, obj: &Value, mut want: Value) {
    let current = obj.pointer("/status/conditions/0");
    let same = current.is_some_and(|c| {
        ["status", "reason", "message"]
            .iter()
            .all(|k| c.get(k) == want["conditions"][0].get(k))
    });
    if same {
        return;
    }
    want["conditions"][0]["lastTransitionTime"] = json!(
        jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .map(|t| t.to_string())
            .unwrap_or_default()
    );
    let name = name_of(obj);
    if let Err(e) = api
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": want})),
        )
        .await
    {
        tracing::warn!(%name, error = %e, "cannot write the status");
    }
}

/// How often the CA file is looked at between passes.
const CA_CHECK: Duration = Duration::from_secs(2);

/// One pass: build what changed, serve it, register it with `ca_pem`, report it.
async fn reconcile(
    client: &kube::Client,
    opts: &Options,
    ca_pem: &str,
    served: &Served,
    built: &mut Built,
) -> Result<(), kube::Error> {
    let vw_api = Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::erase::<ValidationWebhook>(&()),
    );
    let cw_api = Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::erase::<ConversionWebhook>(&()),
    );
    let vws = to_values(vw_api.list(&ListParams::default()).await?.items);
    let cws = to_values(cw_api.list(&ListParams::default()).await?.items);

    // Validation webhooks.
    let mut next = BTreeMap::new();
    let mut serving = BTreeMap::new();
    let mut webhooks = Vec::new();
    let mut statuses = Vec::new();
    for vw in vws.iter().filter(|o| !finalizers::deleting(o)) {
        let name = name_of(vw);
        let key = json!([
            vw.get("validationObject"),
            vw.get("handler"),
            vw.get("context")
        ])
        .to_string();
        let result = match built.validators.remove(&name) {
            Some((k, r)) if k == key => r,
            _ => Validator::build(client, &opts.hooks_dir, vw)
                .await
                .map(Arc::new),
        };
        match &result {
            Ok(v) => {
                serving.insert(render::validating_path(vw), v.clone());
                webhooks.push(render::validating_webhook(vw, &opts.endpoint, ca_pem));
                statuses.push((
                    vw,
                    status(Ok(&format!(
                        "the handler of webhook {} is serving",
                        v.webhook
                    ))),
                ));
            }
            Err(e) => statuses.push((vw, status(Err(e)))),
        }
        next.insert(name, (key, result));
    }
    *served.validators.write().unwrap_or_else(|p| p.into_inner()) = serving;
    built.validators = next;
    let vwc_api = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    if webhooks.is_empty() {
        match vwc_api
            .delete(render::CONFIGURATION_NAME, &Default::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    } else {
        vwc_api
            .patch(
                render::CONFIGURATION_NAME,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(render::validating_configuration(webhooks)),
            )
            .await?;
    }
    // Registered without the deleted ones: their files go, then their finalizers.
    for vw in &vws {
        if finalizers::deleting(vw) {
            remove_hook(&opts.hooks_dir, &render::validating_hook_file(&name_of(vw)));
        }
        finalizers::keep(&vw_api, vw, finalizers::VALIDATION).await?;
    }
    for (vw, s) in statuses {
        set_status(&vw_api, vw, s).await;
    }

    // Conversion webhooks.
    let crd_api = Api::<CustomResourceDefinition>::all(client.clone());
    let mut next = BTreeMap::new();
    let mut serving = BTreeMap::new();
    let mut statuses = Vec::new();
    for cw in cws.iter().filter(|o| !finalizers::deleting(o)) {
        let crd = name_of(cw);
        let key = json!([cw.get("conversions"), cw.get("context")]).to_string();
        let mut result = match built.converters.remove(&crd) {
            Some((k, r)) if k == key => r,
            _ => Converter::build(client, &opts.hooks_dir, cw)
                .await
                .map(Arc::new),
        };
        if let Ok(c) = &result {
            serving.insert(crd.clone(), c.clone());
        }
        *served.converters.write().unwrap_or_else(|p| p.into_inner()) = serving.clone();
        if result.is_ok() {
            let want = render::crd_conversion(&crd, &opts.endpoint, ca_pem);
            match crd_api.get_opt(&crd).await? {
                None => result = Err(format!("CustomResourceDefinition {crd} not found")),
                Some(current) => {
                    let have = serde_json::to_value(&current.spec.conversion).unwrap_or_default();
                    if have != want {
                        crd_api
                            .patch(
                                &crd,
                                &PatchParams::default(),
                                &Patch::Merge(json!({"spec": {"conversion": want}})),
                            )
                            .await?;
                    }
                }
            }
        }
        statuses.push((
            cw,
            match &result {
                Ok(_) => status(Ok(&format!("converting {crd}"))),
                Err(e) => status(Err(e)),
            },
        ));
        next.insert(crd, (key, result));
    }
    *served.converters.write().unwrap_or_else(|p| p.into_inner()) = serving;
    // A removed ConversionWebhook leaves its CRD without a conversion webhook: one being
    // deleted before its finalizers go (even when this process never served it), one gone
    // without them (removed by hand) when it was served here.
    for cw in cws.iter().filter(|o| finalizers::deleting(o)) {
        let crd = name_of(cw);
        reset_conversion(&crd_api, &crd).await?;
        remove_hook(&opts.hooks_dir, &render::conversion_hook_file(&crd));
        finalizers::keep(&cw_api, cw, finalizers::CONVERSION).await?;
    }
    for crd in built.converters.keys() {
        if !next.contains_key(crd) {
            reset_conversion(&crd_api, crd).await?;
        }
    }
    built.converters = next;
    for cw in cws.iter().filter(|o| !finalizers::deleting(o)) {
        finalizers::keep(&cw_api, cw, finalizers::CONVERSION).await?;
    }
    for (cw, s) in statuses {
        set_status(&cw_api, cw, s).await;
    }
    Ok(())
}

/// Sets the CRD's conversion back to `None` when it converts through a webhook.
async fn reset_conversion(
    crd_api: &Api<CustomResourceDefinition>,
    crd: &str,
) -> Result<(), kube::Error> {
    let Some(current) = crd_api.get_opt(crd).await? else {
        return Ok(());
    };
    if current
        .spec
        .conversion
        .is_none_or(|c| c.strategy != "Webhook")
    {
        return Ok(());
    }
    crd_api
        .patch(
            crd,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}})),
        )
        .await?;
    Ok(())
}

/// Removes a hook file of a deleted object (gone already is fine).
fn remove_hook(hooks_dir: &std::path::Path, file: &str) {
    let path = hooks_dir.join(file);
    if let Err(e) = std::fs::remove_file(&path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove the hook file");
    }
}

/// Reconciles on every change of a webhook object or of the CA file (and every 30 seconds)
/// until cancelled.
pub(crate) async fn run(client: kube::Client, opts: Options, served: Arc<Served>) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(64);
    for ar in [
        ApiResource::erase::<ValidationWebhook>(&()),
        ApiResource::erase::<ConversionWebhook>(&()),
    ] {
        let api = Api::<DynamicObject>::all_with(client.clone(), &ar);
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(e) = events.next().await {
                if e.is_err() {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                let _ = tx.try_send(());
            }
        });
    }
    let mut built = Built::default();
    loop {
        let ca_pem = opts.ca.current();
        if let Err(e) = reconcile(&client, &opts, &ca_pem, &served, &mut built).await {
            tracing::warn!(error = %e, "webhook handler reconcile failed; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let next_pass = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            tokio::select! {
                _ = rx.recv() => break,
                _ = tokio::time::sleep_until(next_pass) => break,
                _ = tokio::time::sleep(CA_CHECK) => {
                    if opts.ca.current() != ca_pem {
                        tracing::info!("the CA changed: registering the new one");
                        break;
                    }
                }
            }
        }
        while rx.try_recv().is_ok() {}
    }
}
