//! Telling an API server about `d8 webhook`: the ValidatingWebhookConfiguration
//! `deckhouse-webhook` with Deckhouse's webhook names (each refusal names the webhook Deckhouse
//! refuses it with, so a message reads the same through either transport), and `spec.conversion`
//! of every kind we serve in more than one version. Building the objects is pure
//! ([`validating_configuration`], [`conversion`]); [`register`] writes them.
//!
//! Deckhouse mutates none of these kinds at admission, so there is no mutating configuration.

use base64::Engine as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

/// The configuration's name, as Deckhouse's chart names it.
pub const CONFIGURATION: &str = "deckhouse-webhook";

/// The field manager of the registration.
const MANAGER: &str = "d8-webhook";

/// One webhook: Deckhouse's name, our path, what it covers.
struct Hook {
    name: &'static str,
    path: &'static str,
    resource: &'static str,
    operations: &'static [&'static str],
}

/// The webhooks, one per kind whose refusals name a webhook (`api::validation`'s names).
const HOOKS: &[Hook] = &[
    Hook {
        name: "module-configs.deckhouse-webhook.deckhouse.io",
        path: "/validate/v1alpha1/module-configs",
        resource: "moduleconfigs",
        operations: &["CREATE", "UPDATE", "DELETE"],
    },
    Hook {
        name: "update-policies.deckhouse-webhook.deckhouse.io",
        path: "/validate/v1alpha1/update-policies",
        resource: "moduleupdatepolicies",
        operations: &["CREATE", "UPDATE", "DELETE"],
    },
    Hook {
        name: "deckhouse-releases.deckhouse-webhook.deckhouse.io",
        path: "/validate/v1alpha1/deckhouse-releases",
        resource: "deckhousereleases",
        operations: &["UPDATE"],
    },
];

fn ca_bundle(ca_pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(ca_pem)
}

/// The ValidatingWebhookConfiguration for a webhook served at `base_url` (`https://host:port`)
/// with a certificate signed by `ca_pem`.
pub fn validating_configuration(base_url: &str, ca_pem: &str) -> Value {
    let webhooks: Vec<Value> = HOOKS
        .iter()
        .map(|h| {
            json!({
                "name": h.name,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "timeoutSeconds": 10,
                "clientConfig": {"url": format!("{base_url}{}", h.path), "caBundle": ca_bundle(ca_pem)},
                "rules": [{
                    "apiGroups": [admission::context::GROUP],
                    "apiVersions": ["*"],
                    "operations": h.operations,
                    "resources": [h.resource],
                    "scope": "*",
                }],
            })
        })
        .collect();
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION, "labels": {"heritage": "deckhouse", "module": "deckhouse"}},
        "webhooks": webhooks,
    })
}

/// `spec.conversion` of a CRD converted by the webhook at `base_url`.
pub fn conversion(base_url: &str, ca_pem: &str) -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("{base_url}/convert"), "caBundle": ca_bundle(ca_pem)},
        },
    })
}

/// The CRDs of ours that serve more than one version: those the webhook converts.
pub fn converted_crds() -> Vec<String> {
    api::crds::all()
        .into_iter()
        .filter(|crd| crd.spec.versions.iter().filter(|v| v.served).count() > 1)
        .map(|crd| crd.metadata.name.unwrap_or_default())
        .collect()
}

/// Writes the configuration and the conversions for the webhook at `base_url` (server-side
/// apply of the configuration, a merge patch of each CRD's `spec.conversion`). Writes to webhook
/// configurations and CRDs call no webhook, so registering never waits for the server it
/// names.
pub async fn register(
    client: &kube::Client,
    base_url: &str,
    ca_pem: &str,
) -> Result<(), kube::Error> {
    let vwc = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
        ),
        "validatingwebhookconfigurations",
    );
    let configs: Api<DynamicObject> = Api::all_with(client.clone(), &vwc);
    configs
        .patch(
            CONFIGURATION,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(validating_configuration(base_url, ca_pem)),
        )
        .await?;
    let crd = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let crds: Api<DynamicObject> = Api::all_with(client.clone(), &crd);
    let patch = json!({"spec": {"conversion": conversion(base_url, ca_pem)}});
    for name in converted_crds() {
        crds.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_names_deckhouses_webhooks_and_our_paths() {
        let vwc = validating_configuration("https://127.0.0.1:9443", "PEM");
        assert_eq!(vwc["metadata"]["name"], "deckhouse-webhook");
        let hooks = vwc["webhooks"].as_array().unwrap();
        let names: Vec<&str> = hooks.iter().map(|h| h["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "module-configs.deckhouse-webhook.deckhouse.io",
                "update-policies.deckhouse-webhook.deckhouse.io",
                "deckhouse-releases.deckhouse-webhook.deckhouse.io",
            ]
        );
        assert_eq!(
            hooks[0]["clientConfig"]["url"],
            "https://127.0.0.1:9443/validate/v1alpha1/module-configs"
        );
        assert_eq!(hooks[0]["clientConfig"]["caBundle"], "UEVN");
        assert!(hooks.iter().all(|h| h["failurePolicy"] == "Fail"));
        let conversion = conversion("https://127.0.0.1:9443", "PEM");
        assert_eq!(
            conversion["webhook"]["clientConfig"]["url"],
            "https://127.0.0.1:9443/convert"
        );
    }

    #[test]
    fn module_update_policies_are_converted() {
        assert!(
            converted_crds().contains(&"moduleupdatepolicies.deckhouse.io".to_string()),
            "{:?}",
            converted_crds()
        );
    }
}
