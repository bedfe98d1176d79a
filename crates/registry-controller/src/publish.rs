//! The publish endpoint from outside the cluster: Ingress `registry-push`, in `CertManager` mode
//! its cert-manager Certificate, in `CustomCertificate` mode the copy of the operator's Secret —
//! decided by [`registry_controller_plan::publish`], written here.

use api::module_config::ModuleConfig;
use api::registry::{NAMESPACE, RegistrySettings, RegistryStorageSpec};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use registry_controller_plan::publish;
use serde_json::Value;

use crate::Controller;
use crate::error::{Error, kube};

/// cert-manager's Certificate.
fn certificate_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
        "certificates",
    )
}

fn render<K: serde::de::DeserializeOwned>(want: &Value, what: &str) -> Result<K, Error> {
    serde_json::from_value(want.clone()).map_err(|source| Error::Render {
        what: what.into(),
        source,
    })
}

/// `object`, rendered from `want`, written as [`publish::INGRESS`]: created when `existing` is
/// `None`, replaced when it no longer matches `want` ([`publish::matches`]), else left alone.
async fn put<K>(api: &Api<K>, existing: Option<K>, mut object: K, want: &Value) -> kube::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let params = PostParams::default();
    match existing {
        Some(current) => {
            if publish::matches(&serde_json::to_value(&current).unwrap_or_default(), want) {
                return Ok(());
            }
            object.meta_mut().resource_version = current.meta().resource_version.clone();
            api.replace(publish::INGRESS, &params, &object).await?;
        }
        None => {
            api.create(&params, &object).await?;
        }
    }
    Ok(())
}

impl Controller {
    /// Converges the publish endpoint's objects: created or replaced while the storage asks for
    /// air gap (and there is a public domain), deleted otherwise.
    pub(crate) async fn sync_publish(
        &self,
        settings: &RegistrySettings,
        storage: Option<&RegistryStorageSpec>,
    ) -> Result<(), Error> {
        let global = if publish::wanted(storage) {
            let module_configs: Api<ModuleConfig> = Api::all(self.client.clone());
            let mc = module_configs
                .get_opt("global")
                .await
                .map_err(kube("reading ModuleConfig global"))?;
            publish::Global::from_settings(mc.as_ref().and_then(|m| m.spec.settings.as_ref()))
        } else {
            publish::Global::default()
        };
        self.sync_custom_certificate(publish::custom_certificate_source(
            settings, &global, storage,
        ))
        .await?;
        self.sync_certificate(publish::certificate(settings, &global, storage))
            .await?;
        self.sync_ingress(publish::ingress(settings, &global, storage))
            .await
    }

    /// Ingress `registry-push` is `want`, or absent.
    async fn sync_ingress(&self, want: Option<Value>) -> Result<(), Error> {
        let ingresses: Api<Ingress> = Api::namespaced(self.client.clone(), NAMESPACE);
        let what = "writing Ingress registry-push";
        let existing = ingresses
            .get_opt(publish::INGRESS)
            .await
            .map_err(kube("reading Ingress registry-push"))?;
        let Some(want) = want else {
            if existing.is_some() {
                tracing::info!("no air gap asked for: the publish Ingress goes");
                self.delete(&ingresses, publish::INGRESS, "Ingress registry-push")
                    .await?;
            }
            return Ok(());
        };
        let object: Ingress = render(&want, "Ingress registry-push")?;
        if existing.is_none() {
            tracing::info!("air gap is asked for: the publish Ingress is created");
        }
        put(&ingresses, existing, object, &want)
            .await
            .map_err(kube(what))
    }

    /// Certificate `registry-push` is `want`, or absent. Without cert-manager (the kind is not
    /// served) nothing is requested: the Ingress then serves the ingress controller's own
    /// certificate, and this is said at `warn` on every pass.
    async fn sync_certificate(&self, want: Option<Value>) -> Result<(), Error> {
        let certificates: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), NAMESPACE, &certificate_resource());
        let what = "writing Certificate registry-push";
        // Not served (no cert-manager) reads as absent.
        let existing = certificates
            .get_opt(publish::INGRESS)
            .await
            .map_err(kube("reading Certificate registry-push"))?;
        let Some(want) = want else {
            if existing.is_some() {
                self.delete(&certificates, publish::INGRESS, "Certificate registry-push")
                    .await?;
            }
            return Ok(());
        };
        let object: DynamicObject = render(&want, "Certificate registry-push")?;
        match put(&certificates, existing, object, &want).await {
            Ok(()) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => {
                tracing::warn!(
                    "cert-manager's Certificate is not served (is cert-manager installed?): \
                     the publish endpoint's certificate is not requested"
                );
                Ok(())
            }
            Err(source) => Err(Error::Kube {
                what: what.into(),
                source,
            }),
        }
    }

    /// Secret `registry-ingress-tls-customcertificate` is a copy of the operator's `source`, or
    /// absent. A `source` that does not exist (yet) leaves the copy as it is.
    async fn sync_custom_certificate(&self, source: Option<String>) -> Result<(), Error> {
        let secrets = self.secrets();
        let copy = publish::CUSTOM_TLS_SECRET;
        let what = format!("Secret {NAMESPACE}/{copy}");
        let Some(source) = source else {
            if secrets
                .get_opt(copy)
                .await
                .map_err(kube(format!("reading {what}")))?
                .is_some()
            {
                self.delete(&secrets, copy, &what).await?;
            }
            return Ok(());
        };
        let Some(original) = secrets
            .get_opt(&source)
            .await
            .map_err(kube(format!("reading Secret {NAMESPACE}/{source}")))?
        else {
            tracing::warn!(
                secret = %format!("{NAMESPACE}/{source}"),
                "https.customCertificate.secretName names no Secret: the publish endpoint has no certificate"
            );
            return Ok(());
        };
        let data = serde_json::to_value(&original.data).unwrap_or_default();
        let want = publish::custom_certificate_copy(&data);
        let mut object: Secret = render(&want, &what)?;
        match secrets
            .get_opt(copy)
            .await
            .map_err(kube(format!("reading {what}")))?
        {
            Some(current) => {
                if current.data == object.data && current.type_ == object.type_ {
                    return Ok(());
                }
                if current.type_ != object.type_ {
                    self.delete(&secrets, copy, &what).await?;
                    secrets
                        .create(&PostParams::default(), &object)
                        .await
                        .map_err(kube(format!("writing {what}")))?;
                    return Ok(());
                }
                object.metadata.resource_version = current.metadata.resource_version;
                secrets
                    .replace(copy, &PostParams::default(), &object)
                    .await
                    .map_err(kube(format!("writing {what}")))?;
            }
            None => {
                tracing::info!(secret = %format!("{NAMESPACE}/{source}"), "the publish endpoint's custom certificate is copied");
                secrets
                    .create(&PostParams::default(), &object)
                    .await
                    .map_err(kube(format!("writing {what}")))?;
            }
        }
        Ok(())
    }
}
