//! The chart's webhook certificates, kept in the cluster by `d8 controller` (the leader): for
//! each [`Target`] a Secret (`tls.crt`, `tls.key`, `ca.crt`, and the CA's key `ca.key`, which
//! the chart's volumes do not project into the webhook pods) holding a serving certificate for
//! the target's Services, made and renewed by [`crate::certs::renew`], and the CA injected as
//! `caBundle` into every ValidatingWebhookConfiguration webhook and CRD conversion whose
//! `clientConfig.service` is one of those Services — the chart's `deckhouse-webhook`, the
//! configuration `webhook-handler` registers, and, with a conversion Service, `spec.conversion`
//! of our CRDs that serve several versions.
//!
//! When the CA itself is renewed, the injected bundle holds the new CA and the old one for that
//! pass, so a webhook still serving the old certificate (its Secret volume not yet refreshed)
//! keeps being trusted; the next pass leaves the new CA alone.
//!
//! Decisions are pure ([`dns_names`], [`webhooks_patch`], [`conversion_patch`],
//! [`ca_bundle`]); [`Keeper::pass`] reads and writes.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::certs::{self, CA_CERT, CA_KEY, Pems, Renewal, TLS_CERT, TLS_KEY};

/// One Secret and the Services its certificate serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The Secret's name (in the keeper's namespace).
    pub secret: String,
    /// The Services whose DNS names the certificate carries.
    pub services: Vec<String>,
}

impl std::str::FromStr for Target {
    type Err = String;

    /// `SECRET=SERVICE[,SERVICE…]`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{text:?}: expected SECRET=SERVICE[,SERVICE…]");
        let (secret, services) = text.split_once('=').ok_or_else(bad)?;
        let services: Vec<String> = services
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if secret.trim().is_empty() || services.is_empty() {
            return Err(bad());
        }
        Ok(Self {
            secret: secret.trim().to_owned(),
            services,
        })
    }
}

/// The names a Service is reached by in the cluster: `svc`, `svc.ns`, `svc.ns.svc` and
/// `svc.ns.svc.cluster.local` for each Service (kube-apiserver calls `svc.ns.svc`).
pub fn dns_names(namespace: &str, services: &[String]) -> Vec<String> {
    services
        .iter()
        .flat_map(|s| {
            [
                s.clone(),
                format!("{s}.{namespace}"),
                format!("{s}.{namespace}.svc"),
                format!("{s}.{namespace}.svc.cluster.local"),
            ]
        })
        .collect()
}

/// The `caBundle` to inject: the CA in service, and while a renewal replaces the CA, the one it
/// replaces too.
pub fn ca_bundle(next: &Pems, previous: &Pems, renewal: Renewal) -> String {
    let mut pem = next.ca_crt.clone();
    if renewal == Renewal::All && !previous.ca_crt.is_empty() && previous.ca_crt != next.ca_crt {
        if !pem.ends_with('\n') {
            pem.push('\n');
        }
        pem.push_str(&previous.ca_crt);
    }
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// Whether a `clientConfig` names one of `services` in `namespace`.
fn names_service(client_config: &Value, namespace: &str, services: &[String]) -> bool {
    let service = &client_config["service"];
    service["namespace"].as_str() == Some(namespace)
        && service["name"]
            .as_str()
            .is_some_and(|n| services.iter().any(|s| s == n))
}

/// A merge patch of a webhook configuration whose webhooks calling `services` lack `bundle`
/// (the whole `webhooks` list, guarded by the object's `resourceVersion`); `None` when every
/// such webhook has it already, or none calls them.
pub fn webhooks_patch(
    config: &Value,
    namespace: &str,
    services: &[String],
    bundle: &str,
) -> Option<Value> {
    let mut webhooks = config["webhooks"].as_array()?.clone();
    let mut changed = false;
    for webhook in &mut webhooks {
        let client_config = &mut webhook["clientConfig"];
        if names_service(client_config, namespace, services)
            && client_config["caBundle"].as_str() != Some(bundle)
        {
            client_config["caBundle"] = json!(bundle);
            changed = true;
        }
    }
    changed.then(|| {
        json!({
            "metadata": {"resourceVersion": config["metadata"]["resourceVersion"]},
            "webhooks": webhooks,
        })
    })
}

/// The `spec.conversion` of a CRD converted by Service `service` in `namespace` at `/convert`.
pub fn service_conversion(namespace: &str, service: &str, bundle: &str) -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {
                "service": {"namespace": namespace, "name": service, "path": "/convert", "port": 443},
                "caBundle": bundle,
            },
        },
    })
}

/// A merge patch of a CRD: `ours` (the conversion it must have, for our converted CRDs) when it
/// differs, else `bundle` injected when its conversion calls one of `services`; `None` when
/// nothing is to change.
pub fn conversion_patch(
    crd: &Value,
    ours: Option<&Value>,
    namespace: &str,
    services: &[String],
    bundle: &str,
) -> Option<Value> {
    let current = &crd["spec"]["conversion"];
    if let Some(ours) = ours {
        return (current != ours).then(|| json!({"spec": {"conversion": ours}}));
    }
    let client_config = &current["webhook"]["clientConfig"];
    (names_service(client_config, namespace, services)
        && client_config["caBundle"].as_str() != Some(bundle))
    .then(|| json!({"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": bundle}}}}}))
}

/// The PEMs a Secret holds (missing keys empty).
pub fn pems_of(secret: &Secret) -> Pems {
    let data = secret.data.clone().unwrap_or_default();
    let text = |key: &str| {
        data.get(key)
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default()
    };
    Pems {
        ca_crt: text(CA_CERT),
        ca_key: text(CA_KEY),
        tls_crt: text(TLS_CERT),
        tls_key: text(TLS_KEY),
    }
}

fn secret_data(pems: &Pems) -> BTreeMap<String, ByteString> {
    [
        (TLS_CERT, &pems.tls_crt),
        (TLS_KEY, &pems.tls_key),
        (CA_CERT, &pems.ca_crt),
        (CA_KEY, &pems.ca_key),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.clone().into_bytes())))
    .collect()
}

/// Why a pass did not finish.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    /// The API refused or failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// A certificate could not be made.
    #[error("Secret {secret}: {source}")]
    Cert {
        /// The Secret.
        secret: String,
        /// Why.
        #[source]
        source: certs::CertError,
    },
}

fn kube_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> KeepError {
    let what = what.into();
    move |source| KeepError::Kube { what, source }
}

/// The field manager of the keeper's writes.
const MANAGER: &str = "deckhouse";

/// Keeps the targets' Secrets and `caBundle`s.
#[derive(Clone)]
pub struct Keeper {
    client: kube::Client,
    namespace: String,
    targets: Vec<Target>,
    conversion_service: Option<String>,
}

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper")
            .field("namespace", &self.namespace)
            .field("targets", &self.targets)
            .field("conversion_service", &self.conversion_service)
            .finish_non_exhaustive()
    }
}

impl Keeper {
    /// A keeper of `targets` in `namespace`; `conversion_service` (one of the targets'
    /// Services) converts our CRDs that serve several versions.
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        targets: Vec<Target>,
        conversion_service: Option<String>,
    ) -> Self {
        Self {
            client,
            namespace: namespace.into(),
            targets,
            conversion_service,
        }
    }

    /// One pass at `now`: each target's Secret made or renewed as needed, then its CA injected
    /// where its Services are called. Returns what was renewed, by target.
    pub async fn pass(&self, now: SystemTime) -> Result<Vec<Renewal>, KeepError> {
        let mut renewals = Vec::new();
        for target in &self.targets {
            renewals.push(self.keep(target, now).await?);
        }
        Ok(renewals)
    }

    async fn keep(&self, target: &Target, now: SystemTime) -> Result<Renewal, KeepError> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let what = format!("Secret {}/{}", self.namespace, target.secret);
        let existing = secrets
            .get_opt(&target.secret)
            .await
            .map_err(kube_error(format!("reading {what}")))?;
        let previous = existing.as_ref().map(pems_of).unwrap_or_default();
        let names = dns_names(&self.namespace, &target.services);
        let (next, renewal) =
            certs::renew(&previous, &names, now).map_err(|source| KeepError::Cert {
                secret: target.secret.clone(),
                source,
            })?;
        let bundle = ca_bundle(&next, &previous, renewal);
        // The CA first: the API server trusts the new certificate before a webhook serves it.
        self.inject(target, &bundle).await?;
        if renewal != Renewal::Keep {
            let mut secret = existing.unwrap_or_else(|| Secret {
                metadata: kube::api::ObjectMeta {
                    name: Some(target.secret.clone()),
                    namespace: Some(self.namespace.clone()),
                    labels: Some(
                        [("heritage", "deckhouse"), ("module", "deckhouse")]
                            .map(|(k, v)| (k.to_owned(), v.to_owned()))
                            .into(),
                    ),
                    ..Default::default()
                },
                type_: Some("kubernetes.io/tls".into()),
                ..Default::default()
            });
            secret.data = Some(secret_data(&next));
            let params = PostParams {
                field_manager: Some(MANAGER.into()),
                ..Default::default()
            };
            if secret.metadata.resource_version.is_some() {
                secrets
                    .replace(&target.secret, &params, &secret)
                    .await
                    .map_err(kube_error(format!("updating {what}")))?;
            } else {
                secrets
                    .create(&params, &secret)
                    .await
                    .map_err(kube_error(format!("creating {what}")))?;
            }
            tracing::info!(secret = %target.secret, ?renewal, "webhook certificate renewed");
        }
        // A pass that renewed the CA injected both; this leaves the new one alone.
        if renewal == Renewal::All {
            self.inject(target, &ca_bundle(&next, &next, Renewal::Keep))
                .await?;
        }
        Ok(renewal)
    }

    async fn inject(&self, target: &Target, bundle: &str) -> Result<(), KeepError> {
        let ns = &self.namespace;
        let configs: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        let listed = configs
            .list(&ListParams::default())
            .await
            .map_err(kube_error("listing ValidatingWebhookConfigurations"))?;
        for config in listed {
            let name = config.metadata.name.clone().unwrap_or_default();
            let value = serde_json::to_value(&config).unwrap_or_default();
            if let Some(patch) = webhooks_patch(&value, ns, &target.services, bundle) {
                configs
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(kube_error(format!(
                        "injecting the CA into ValidatingWebhookConfiguration {name}"
                    )))?;
                tracing::info!(configuration = %name, "caBundle injected");
            }
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let ours = self
            .conversion_service
            .as_ref()
            .filter(|s| target.services.contains(s))
            .map(|s| service_conversion(ns, s, bundle));
        let converted = crate::registration::converted_crds();
        let listed = crds
            .list(&ListParams::default())
            .await
            .map_err(kube_error("listing CustomResourceDefinitions"))?;
        for crd in listed {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let value = serde_json::to_value(&crd).unwrap_or_default();
            let ours = ours.as_ref().filter(|_| converted.contains(&name));
            if let Some(patch) = conversion_patch(&value, ours, ns, &target.services, bundle) {
                crds.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(kube_error(format!(
                        "setting the conversion of CustomResourceDefinition {name}"
                    )))?;
                tracing::info!(crd = %name, "conversion caBundle injected");
            }
        }
        Ok(())
    }

    /// Passes every `interval` (the first at once) until `stopped`; a failed pass is logged and
    /// tried again after `retry`.
    pub async fn run(
        &self,
        interval: Duration,
        retry: Duration,
        stopped: impl std::future::Future<Output = ()>,
    ) {
        let passes = async {
            loop {
                let wait = match self.pass(SystemTime::now()).await {
                    Ok(renewals) => {
                        tracing::info!(?renewals, "webhook certificates checked");
                        interval
                    }
                    Err(error) => {
                        tracing::error!(%error, "webhook certificates not kept");
                        retry
                    }
                };
                tokio::time::sleep(wait).await;
            }
        };
        tokio::select! {
            () = passes => {}
            () = stopped => {}
        }
    }
}

#[cfg(test)]
mod tests;
