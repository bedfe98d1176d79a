//! The publish Ingress's client certificate: Secret `d8-system/registry-storage-ingress-client`
//! (`kubernetes.io/tls`; `tls.crt`, `tls.key`, and the CA of its own that signs it, `ca.crt` and
//! `ca.key`), which the Ingress presents to the cache replicas (`proxy-ssl-secret`), and the
//! `ingress-client-ca.crt` key of Secret `registry-storage` the replicas trust it by
//! (`--ingress-client-ca`). Issued, kept and renewed as [`pki::plan`] decides (a client
//! certificate 30 days before its end, the CA a year before its); a Secret made by hand without
//! the CA's key is replaced. The replicas' key is written first, so by the time the Ingress
//! presents a certificate of a new CA the replicas have been told of it.
//!
//! Kept while the cache is on (RegistryStorage `registry` exists), so the replicas hold the CA
//! before the Ingress appears; it stays when the cache is turned off (nothing reads it then).
//! Secret `registry-storage` is the operator's (its serving certificate and accounts): without
//! it there is no replica to tell, and only the client certificate is kept.

use std::collections::BTreeMap;
use std::time::SystemTime;

use api::registry::NAMESPACE;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use pki::{CA_CERT, CA_KEY, Leaf, Pems, Profile, Renewal, TLS_CERT, TLS_KEY};
use registry_controller_plan::publish::INGRESS_CLIENT_SECRET;

use crate::Controller;
use crate::error::{Error, kube};

/// The replicas' Secret (the chart mounts it at `/etc/registry-storage`).
pub const STORAGE_SECRET: &str = "registry-storage";
/// Its key holding the CA of the ingress's client certificate.
pub const STORAGE_CA_KEY: &str = "ingress-client-ca.crt";
/// The CA and the client certificate it signs.
pub const PROFILE: Profile<'static> = Profile {
    ca: "registry-storage-ingress-client-ca",
    leaf: Leaf::Client(INGRESS_CLIENT_SECRET),
};
const TLS_TYPE: &str = "kubernetes.io/tls";

fn text(secret: Option<&Secret>, key: &str) -> String {
    secret
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(key))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .unwrap_or_default()
}

/// The PEM texts a Secret holds (empty where a key is missing).
pub fn pems(secret: Option<&Secret>) -> Pems {
    Pems {
        ca_crt: text(secret, CA_CERT),
        ca_key: text(secret, CA_KEY),
        tls_crt: text(secret, TLS_CERT),
        tls_key: text(secret, TLS_KEY),
    }
}

/// Whether the client Secret must be written: [`pki::plan`] renewed something, or the Secret
/// is missing or not of type `kubernetes.io/tls` (which cannot be changed in place: it is then
/// replaced by deleting and creating it).
fn must_write(existing: Option<&Secret>, renewal: Renewal) -> bool {
    renewal != Renewal::Keep || existing.is_none_or(|s| s.type_.as_deref() != Some(TLS_TYPE))
}

impl Controller {
    /// Converges both Secrets on [`PROFILE`] (see the module docs).
    pub(crate) async fn sync_ingress_client(&self) -> Result<(), Error> {
        let secrets = self.secrets();
        let existing = secrets
            .get_opt(INGRESS_CLIENT_SECRET)
            .await
            .map_err(kube(format!(
                "reading Secret {NAMESPACE}/{INGRESS_CLIENT_SECRET}"
            )))?;
        let current = pems(existing.as_ref());
        let (next, renewal) =
            pki::renew_for(&current, &PROFILE, SystemTime::now()).map_err(|source| {
                Error::Certificate {
                    what: format!("Secret {NAMESPACE}/{INGRESS_CLIENT_SECRET}"),
                    source,
                }
            })?;

        let storage = secrets
            .get_opt(STORAGE_SECRET)
            .await
            .map_err(kube(format!("reading Secret {NAMESPACE}/{STORAGE_SECRET}")))?;
        if storage.is_some() && text(storage.as_ref(), STORAGE_CA_KEY) != next.ca_crt {
            tracing::info!(
                secret = %format!("{NAMESPACE}/{STORAGE_SECRET}"),
                "the replicas are given the CA of the ingress's client certificate ({STORAGE_CA_KEY})"
            );
            let patch = serde_json::json!({"data": {
                STORAGE_CA_KEY: ByteString(next.ca_crt.clone().into_bytes()),
            }});
            secrets
                .patch(
                    STORAGE_SECRET,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(kube(format!("writing Secret {NAMESPACE}/{STORAGE_SECRET}")))?;
        }

        if !must_write(existing.as_ref(), renewal) {
            return Ok(());
        }
        tracing::info!(
            secret = %format!("{NAMESPACE}/{INGRESS_CLIENT_SECRET}"),
            renewal = ?renewal,
            "the publish Ingress's client certificate is issued"
        );
        let what = format!("writing Secret {NAMESPACE}/{INGRESS_CLIENT_SECRET}");
        let data = BTreeMap::from(
            [
                (CA_CERT, &next.ca_crt),
                (CA_KEY, &next.ca_key),
                (TLS_CERT, &next.tls_crt),
                (TLS_KEY, &next.tls_key),
            ]
            .map(|(k, v)| (k.to_owned(), ByteString(v.clone().into_bytes()))),
        );
        match existing {
            Some(mut secret) if secret.type_.as_deref() == Some(TLS_TYPE) => {
                secret.data = Some(data);
                secret.string_data = None;
                secrets
                    .replace(INGRESS_CLIENT_SECRET, &PostParams::default(), &secret)
                    .await
                    .map_err(kube(&what))?;
            }
            existing => {
                if existing.is_some() {
                    // A Secret's type cannot change: one made by hand as Opaque goes first.
                    self.delete(
                        &secrets,
                        INGRESS_CLIENT_SECRET,
                        &format!("Secret {NAMESPACE}/{INGRESS_CLIENT_SECRET}"),
                    )
                    .await?;
                }
                let secret = Secret {
                    metadata: kube::api::ObjectMeta {
                        name: Some(INGRESS_CLIENT_SECRET.to_owned()),
                        namespace: Some(NAMESPACE.to_owned()),
                        labels: Some(BTreeMap::from([
                            ("heritage".to_owned(), "deckhouse".to_owned()),
                            ("module".to_owned(), "registry".to_owned()),
                            ("app".to_owned(), "registry-storage".to_owned()),
                        ])),
                        ..Default::default()
                    },
                    type_: Some(TLS_TYPE.to_owned()),
                    data: Some(data),
                    ..Default::default()
                };
                secrets
                    .create(&PostParams::default(), &secret)
                    .await
                    .map_err(kube(&what))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_written_when_renewed_missing_or_of_another_type() {
        let secret = |type_: Option<&str>| Secret {
            type_: type_.map(str::to_owned),
            ..Default::default()
        };
        let tls = secret(Some(TLS_TYPE));
        let opaque = secret(Some("Opaque"));
        for (existing, renewal, want) in [
            (None, Renewal::Keep, true),
            (None, Renewal::All, true),
            (Some(&tls), Renewal::Keep, false),
            (Some(&tls), Renewal::Serving, true),
            (Some(&tls), Renewal::All, true),
            (Some(&opaque), Renewal::Keep, true),
            (Some(&secret(None)), Renewal::Keep, true),
        ] {
            assert_eq!(
                must_write(existing, renewal),
                want,
                "{:?} {renewal:?}",
                existing.map(|s| &s.type_)
            );
        }
    }
}
