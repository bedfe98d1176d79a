//! The publish Ingress's client certificate, issued and kept by the registry controller on the
//! embedded API server (issue #18): Secret `d8-system/registry-storage-ingress-client`
//! (`kubernetes.io/tls`, a client certificate of a CA of its own) and the CA in key
//! `ingress-client-ca.crt` of the replicas' Secret `registry-storage`, which must vouch for that
//! certificate as a replica checks it (rustls' WebPKI client verifier); kept as they are on the
//! next pass, renewed near the end, and one made by hand without its CA's key replaced.

#[path = "support/cluster.rs"]
mod cluster;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use cluster::{client, cluster, cluster_configuration};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};
use registry_controller::ingress_client::{PROFILE, STORAGE_CA_KEY, STORAGE_SECRET, pems};
use registry_controller::{Controller, Options};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;

use api::module_config::ModuleConfig;

const CLIENT_SECRET: &str = "registry-storage-ingress-client";

async fn create<K>(api: &Api<K>, object: serde_json::Value)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

fn key(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

/// Whether `client_pem` is a client certificate `ca_pem` vouches for, as a replica decides it.
fn vouches(ca_pem: &str, client_pem: &str) -> bool {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .unwrap();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(client_pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    verifier
        .verify_client_cert(&chain[0], &chain[1..], UnixTime::now())
        .is_ok()
}

async fn air_gapped_cluster(admin: &Client) {
    cluster::node(admin, "node-1").await;
    cluster_configuration(admin, "Static", "Containerd").await;
    create(
        &Api::<ModuleConfig>::all(admin.clone()),
        serde_json::json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
            "metadata": {"name": "registry"},
            "spec": {"version": 1, "enabled": true, "settings": {
                "mode": "Managed",
                "storage": {"cache": true, "source": {"bundleRef": "d8-mirror-bundle"}},
            }},
        }),
    )
    .await;
}

#[tokio::test]
async fn the_controller_issues_keeps_and_renews_the_ingress_client_certificate() {
    let (server, _dir) = cluster().await;
    let admin = client(&server).await;
    air_gapped_cluster(&admin).await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "d8-system");
    // The operator's Secret of the replicas, without the ingress's CA.
    create(
        &secrets,
        serde_json::json!({
            "metadata": {"name": STORAGE_SECRET, "namespace": "d8-system"},
            "stringData": {"pull": "registry-ro:secret"},
        }),
    )
    .await;
    let controller = Controller::new(
        admin.clone(),
        Options {
            probe_timeout: Duration::from_secs(2),
            ..Options::default()
        },
    );

    controller.reconcile().await.unwrap();
    let issued = secrets.get(CLIENT_SECRET).await.unwrap();
    assert_eq!(issued.type_.as_deref(), Some("kubernetes.io/tls"));
    let storage = secrets.get(STORAGE_SECRET).await.unwrap();
    let ca = key(&storage, STORAGE_CA_KEY);
    assert_eq!(ca, key(&issued, "ca.crt"));
    assert!(vouches(&ca, &key(&issued, "tls.crt")));
    assert_eq!(
        key(&storage, "pull"),
        "registry-ro:secret",
        "the rest stays"
    );
    // Not a certificate a stranger's CA vouches for.
    let stranger = pki::renew_for(&pki::Pems::default(), &PROFILE, SystemTime::now())
        .unwrap()
        .0;
    assert!(!vouches(&stranger.ca_crt, &key(&issued, "tls.crt")));

    // The next pass keeps both as they are.
    controller.reconcile().await.unwrap();
    let kept = secrets.get(CLIENT_SECRET).await.unwrap();
    assert_eq!(
        kept.metadata.resource_version,
        issued.metadata.resource_version
    );
    let storage_again = secrets.get(STORAGE_SECRET).await.unwrap();
    assert_eq!(
        storage_again.metadata.resource_version,
        storage.metadata.resource_version
    );

    // 20 days before the certificate's end: a new one from the same CA.
    let days = |n: u64| Duration::from_secs(n * 86_400);
    let (old, _) = pki::renew_for(
        &pki::Pems {
            tls_crt: String::new(),
            ..pems(Some(&kept))
        },
        &PROFILE,
        SystemTime::now() - pki::SERVING_VALIDITY + days(20),
    )
    .unwrap();
    let mut aging = kept.clone();
    aging.data.as_mut().unwrap().insert(
        "tls.crt".into(),
        k8s_openapi::ByteString(old.tls_crt.clone().into_bytes()),
    );
    aging.data.as_mut().unwrap().insert(
        "tls.key".into(),
        k8s_openapi::ByteString(old.tls_key.clone().into_bytes()),
    );
    secrets
        .replace(CLIENT_SECRET, &PostParams::default(), &aging)
        .await
        .unwrap();
    controller.reconcile().await.unwrap();
    let renewed = secrets.get(CLIENT_SECRET).await.unwrap();
    assert_ne!(key(&renewed, "tls.crt"), old.tls_crt);
    assert_eq!(key(&renewed, "ca.crt"), ca, "the same CA");
    assert!(vouches(&ca, &key(&renewed, "tls.crt")));

    // Made by hand as install.md used to say (kubectl create secret tls: no CA key): replaced,
    // and the replicas are given the new CA.
    secrets
        .delete(CLIENT_SECRET, &Default::default())
        .await
        .unwrap();
    create(
        &secrets,
        serde_json::json!({
            "metadata": {"name": CLIENT_SECRET, "namespace": "d8-system"},
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": stranger.tls_crt, "tls.key": stranger.tls_key},
        }),
    )
    .await;
    controller.reconcile().await.unwrap();
    let replaced = secrets.get(CLIENT_SECRET).await.unwrap();
    let new_ca = key(&secrets.get(STORAGE_SECRET).await.unwrap(), STORAGE_CA_KEY);
    assert_ne!(new_ca, ca);
    assert_eq!(key(&replaced, "ca.crt"), new_ca);
    assert!(vouches(&new_ca, &key(&replaced, "tls.crt")));
    assert!(!vouches(&new_ca, &stranger.tls_crt));
}
