//! The publish endpoint's Ingress `registry-push`: `d8 mirror push` reaches the cache leader
//! through it from outside the cluster (→ Service `registry-push` → its one endpoint, the
//! leader: [`crate::push`]). It exists only while the configuration asks for air gap (the cache
//! on and no primary upstream configured) and is removed as soon as an upstream is configured,
//! or the cache or the module is turned off. (Deckhouse's sources disagree: its README has the
//! endpoint only while air-gapped, its current chart publishes it whenever the cache is on. We
//! keep the Ingress, the way in from outside, to air gap as issue #18 asks; the Service and its
//! leader-only slice exist whenever the cache is on, so a bundle can be pushed from inside the
//! cluster before the upstream is dropped.) Its class, source ranges and certificate come from the
//! `registry` ModuleConfig (`ingressClass`, `whitelistSourceRanges`, `https`), falling back to
//! the `global` ModuleConfig's `modules.ingressClass`, `modules.https` and
//! `modules.publicDomainTemplate`, as Deckhouse's modules do; without a public domain there is no
//! host to publish and no Ingress.
//!
//! The objects are Deckhouse's (`templates/v2/storage/ingress.yaml` and the `helm_lib` helpers it
//! calls), field for field: the Ingress ([`ingress`]), in `CertManager` mode its cert-manager
//! Certificate ([`certificate`]), in `CustomCertificate` mode the copy of the operator's Secret
//! it names ([`custom_certificate_copy`]).

use api::registry::{NAMESPACE, RegistrySettings, RegistryStorageSpec};
use serde_json::{Value, json};

/// Name of the Ingress (and of the Service it sends to, which the chart renders:
/// [`crate::push::SERVICE`], whose only endpoint is the cache leader), and of its cert-manager
/// Certificate.
pub const INGRESS: &str = crate::push::SERVICE;
/// Port of Service [`INGRESS`] the Ingress sends to (by number, as Deckhouse's does).
pub const SERVICE_PORT: u16 = 5001;
/// Secret (in `d8-system`, `kubernetes.io/tls`) with the client certificate the ingress
/// controller presents to the replicas' write listener (`proxy-ssl-secret`); the replicas believe
/// the client address it forwards (`X-Forwarded-For`) because its CA is their
/// `ingress-client-ca.crt` (`d8 registry storage --ingress-client-ca`). The registry controller
/// issues both (`registry_controller::ingress_client`).
pub const INGRESS_CLIENT_SECRET: &str = "registry-storage-ingress-client";
/// Secret the serving certificate is kept in: cert-manager issues it (`https.mode:
/// CertManager`); with `CustomCertificate` it is the copy [`CUSTOM_TLS_SECRET`].
pub const TLS_SECRET: &str = "registry-ingress-tls";
/// The copy of the operator's `customCertificate.secretName` the Ingress names
/// (Deckhouse's `helm_lib_module_https_secret_name`: the prefix and `-customcertificate`).
pub const CUSTOM_TLS_SECRET: &str = "registry-ingress-tls-customcertificate";
/// The name substituted into `publicDomainTemplate`.
pub const DOMAIN_NAME: &str = "registry";
/// The labels of what is rendered here (Deckhouse's `helm_lib_module_labels` for the module).
pub const LABELS: [(&str, &str); 3] = [
    ("heritage", "deckhouse"),
    ("module", "registry"),
    ("app", "registry-storage"),
];
/// The header every HTTPS Ingress of a module sends (Deckhouse's
/// `helm_lib_module_ingress_configuration_snippet`).
pub const HSTS_SNIPPET: &str =
    "add_header Strict-Transport-Security \"max-age=31536000; includeSubDomains\" always;\n";

/// Ingress class when neither ModuleConfig names one.
const DEFAULT_INGRESS_CLASS: &str = "nginx";
/// ClusterIssuer when `https.mode` is `CertManager` and none is named.
const DEFAULT_CLUSTER_ISSUER: &str = "letsencrypt";

/// The whole-cluster settings the Ingress falls back to: `spec.settings.modules` of ModuleConfig
/// `global`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Global {
    /// `modules.ingressClass`.
    pub ingress_class: Option<String>,
    /// `modules.https`.
    pub https: Option<Value>,
    /// `modules.publicDomainTemplate` (`%s.example.com`).
    pub public_domain_template: Option<String>,
}

impl Global {
    /// Reads `spec.settings` of ModuleConfig `global`; what is missing or not a string is unset.
    pub fn from_settings(settings: Option<&Value>) -> Self {
        let modules = settings.and_then(|s| s.get("modules"));
        let text = |key: &str| {
            modules
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Self {
            ingress_class: text("ingressClass"),
            https: modules.and_then(|m| m.get("https")).cloned(),
            public_domain_template: text("publicDomainTemplate"),
        }
    }
}

/// Whether the endpoint is asked for: the desired RegistryStorage asks for air gap. (It is
/// published only with a host as well: [`ingress`].)
pub fn wanted(storage: Option<&RegistryStorageSpec>) -> bool {
    storage.is_some_and(|s| s.air_gap_requested == Some(true) && s.publish != Some(false))
}

/// The host of the endpoint: `publicDomainTemplate` with `%s` → `registry`; none without a
/// template (then there is no Ingress, as in Deckhouse).
pub fn host(global: &Global) -> Option<String> {
    global
        .public_domain_template
        .as_deref()
        .filter(|t| t.contains("%s"))
        .map(|t| t.replace("%s", DOMAIN_NAME))
}

/// How the endpoint's HTTPS is served (`https`: the module's, else the global one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Https {
    /// `Disabled` or `OnlyInURI`: no TLS section (TLS, if any, ends in front of the ingress
    /// controller).
    Off,
    /// `CertManager` (the default): a Certificate from this ClusterIssuer, into [`TLS_SECRET`].
    CertManager {
        /// `certManager.clusterIssuerName` (default `letsencrypt`).
        cluster_issuer: String,
    },
    /// `CustomCertificate`: the operator's Secret (in `d8-system`), copied to
    /// [`CUSTOM_TLS_SECRET`].
    Custom {
        /// `customCertificate.secretName`.
        secret: Option<String>,
    },
}

impl Https {
    /// The mode in force: the module's `https` wins over the global one.
    pub fn of(settings: &RegistrySettings, global: &Global) -> Self {
        let https = settings.https.as_ref().or(global.https.as_ref());
        let text = |pointer: &str| {
            https
                .and_then(|h| h.pointer(pointer))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match text("/mode").as_deref().unwrap_or("CertManager") {
            "Disabled" | "OnlyInURI" => Https::Off,
            "CustomCertificate" => Https::Custom {
                secret: text("/customCertificate/secretName"),
            },
            _ => Https::CertManager {
                cluster_issuer: text("/certManager/clusterIssuerName")
                    .unwrap_or_else(|| DEFAULT_CLUSTER_ISSUER.to_owned()),
            },
        }
    }

    /// The Secret the Ingress's TLS section names (`None`: no TLS section).
    fn secret(&self) -> Option<&'static str> {
        match self {
            Https::Off => None,
            Https::CertManager { .. } => Some(TLS_SECRET),
            Https::Custom { .. } => Some(CUSTOM_TLS_SECRET),
        }
    }
}

fn metadata(name: &str) -> Value {
    let labels: serde_json::Map<String, Value> = LABELS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).into()))
        .collect();
    json!({"name": name, "namespace": NAMESPACE, "labels": labels})
}

/// The endpoint's host while it is to be published: air gap asked for and a public domain.
fn published_host(storage: Option<&RegistryStorageSpec>, global: &Global) -> Option<String> {
    if wanted(storage) { host(global) } else { None }
}

/// The Ingress (a `networking.k8s.io/v1` object) the cluster must have — Deckhouse's
/// `registry-push`, field for field; `None` when it must not exist. `storage` is the desired
/// RegistryStorage spec (`None` without the cache).
pub fn ingress(
    settings: &RegistrySettings,
    global: &Global,
    storage: Option<&RegistryStorageSpec>,
) -> Option<Value> {
    let host = published_host(storage, global)?;
    let class = settings
        .ingress_class
        .clone()
        .or_else(|| global.ingress_class.clone())
        .unwrap_or_else(|| DEFAULT_INGRESS_CLASS.to_owned());
    let https = Https::of(settings, global);
    let mut annotations = serde_json::Map::new();
    // To the backend over HTTPS, presenting the ingress's own client certificate (whose
    // forwarded client address the replica believes); the replica's serving certificate is not
    // verified (its names are node addresses, the EndpointSlice's). What admits a push is the
    // replica's write credentials.
    for (key, value) in [
        ("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS"),
        (
            "nginx.ingress.kubernetes.io/proxy-ssl-secret",
            &*format!("{NAMESPACE}/{INGRESS_CLIENT_SECRET}"),
        ),
        ("nginx.ingress.kubernetes.io/proxy-ssl-verify", "off"),
        ("nginx.ingress.kubernetes.io/proxy-body-size", "0"),
        ("nginx.ingress.kubernetes.io/proxy-read-timeout", "600"),
        ("nginx.ingress.kubernetes.io/proxy-send-timeout", "600"),
    ] {
        annotations.insert(key.into(), value.into());
    }
    if !settings.whitelist_source_ranges.is_empty() {
        annotations.insert(
            "nginx.ingress.kubernetes.io/whitelist-source-range".into(),
            settings.whitelist_source_ranges.join(",").into(),
        );
    }
    if https != Https::Off {
        annotations.insert(
            "nginx.ingress.kubernetes.io/configuration-snippet".into(),
            HSTS_SNIPPET.into(),
        );
    }
    let rule = json!({"host": host, "http": {"paths": [{
        "backend": {"service": {"name": INGRESS, "port": {"number": SERVICE_PORT}}},
        "path": "/",
        "pathType": "Prefix",
    }]}});
    let mut spec = json!({"ingressClassName": class, "rules": [rule]});
    if let Some(secret) = https.secret() {
        spec["tls"] = json!([{"hosts": [host], "secretName": secret}]);
    }
    let mut metadata = metadata(INGRESS);
    metadata["annotations"] = annotations.into();
    Some(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": spec,
    }))
}

/// The cert-manager Certificate (`cert-manager.io/v1`) of the endpoint's host while the Ingress
/// exists and `https.mode` is `CertManager`: Deckhouse's `registry-push`, issued into
/// [`TLS_SECRET`] by the ClusterIssuer; `commonName` only when the host fits in 64 characters.
pub fn certificate(
    settings: &RegistrySettings,
    global: &Global,
    storage: Option<&RegistryStorageSpec>,
) -> Option<Value> {
    let host = published_host(storage, global)?;
    let Https::CertManager { cluster_issuer } = Https::of(settings, global) else {
        return None;
    };
    let mut spec = json!({
        "certificateOwnerRef": false,
        "secretName": TLS_SECRET,
        "dnsNames": [host],
        "issuerRef": {"name": cluster_issuer, "kind": "ClusterIssuer"},
    });
    if host.len() <= 64 {
        spec["commonName"] = host.into();
    }
    Some(json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": metadata(INGRESS),
        "spec": spec,
    }))
}

/// With `https.mode: CustomCertificate`, while the Ingress exists: the operator's Secret (in
/// `d8-system`) to copy into [`CUSTOM_TLS_SECRET`].
pub fn custom_certificate_source(
    settings: &RegistrySettings,
    global: &Global,
    storage: Option<&RegistryStorageSpec>,
) -> Option<String> {
    published_host(storage, global)?;
    match Https::of(settings, global) {
        Https::Custom { secret } => secret,
        _ => None,
    }
}

/// The copy of the operator's certificate (`kubernetes.io/tls`, its `tls.crt` and `tls.key`,
/// base64 as read) the Ingress names.
pub fn custom_certificate_copy(source_data: &Value) -> Value {
    let mut data = serde_json::Map::new();
    for key in ["tls.crt", "tls.key"] {
        if let Some(value) = source_data.get(key) {
            data.insert(key.into(), value.clone());
        }
    }
    let mut object = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(CUSTOM_TLS_SECRET),
        "type": "kubernetes.io/tls",
        "data": data,
    });
    object["metadata"]["namespace"] = NAMESPACE.into();
    object
}

/// Whether the existing Ingress (`metadata.annotations`, `metadata.labels`, `spec`) already is
/// `want`: fields the API server adds (status, defaults elsewhere) are not compared.
pub fn matches(existing: &Value, want: &Value) -> bool {
    ["/metadata/annotations", "/metadata/labels", "/spec"]
        .iter()
        .all(|p| existing.pointer(p) == want.pointer(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage(air_gap: bool) -> RegistryStorageSpec {
        RegistryStorageSpec {
            publish: Some(true),
            air_gap_requested: Some(air_gap),
            ..Default::default()
        }
    }

    fn settings(raw: Value) -> RegistrySettings {
        serde_json::from_value(raw).unwrap()
    }

    fn domain() -> Global {
        Global {
            public_domain_template: Some("%s.kube.example.com".into()),
            ..Default::default()
        }
    }

    #[test]
    fn exists_only_while_air_gap_is_asked_for_and_with_a_public_domain() {
        let s = RegistrySettings::default();
        for (storage, global, want) in [
            (None, domain(), false),
            (Some(storage(false)), domain(), false),
            (Some(storage(true)), domain(), true),
            (Some(storage(true)), Global::default(), false),
            (
                Some(RegistryStorageSpec {
                    publish: Some(false),
                    ..storage(true)
                }),
                domain(),
                false,
            ),
        ] {
            let ingress = ingress(&s, &global, storage.as_ref());
            assert_eq!(ingress.is_some(), want, "{storage:?} {global:?}");
            assert_eq!(
                certificate(&s, &global, storage.as_ref()).is_some(),
                want,
                "{storage:?} {global:?}"
            );
        }
    }

    /// Deckhouse's `templates/v2/storage/ingress.yaml`, rendered for CertManager mode with
    /// source ranges: every field, nothing more.
    #[test]
    fn the_ingress_is_deckhouses() {
        let s = settings(json!({"whitelistSourceRanges": ["10.0.0.0/10", "192.168.0.0/16"]}));
        let got = ingress(&s, &domain(), Some(&storage(true))).unwrap();
        assert_eq!(
            got,
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {
                    "name": "registry-push",
                    "namespace": "d8-system",
                    "labels": {"heritage": "deckhouse", "module": "registry", "app": "registry-storage"},
                    "annotations": {
                        "nginx.ingress.kubernetes.io/backend-protocol": "HTTPS",
                        "nginx.ingress.kubernetes.io/proxy-ssl-secret": "d8-system/registry-storage-ingress-client",
                        "nginx.ingress.kubernetes.io/proxy-ssl-verify": "off",
                        "nginx.ingress.kubernetes.io/proxy-body-size": "0",
                        "nginx.ingress.kubernetes.io/proxy-read-timeout": "600",
                        "nginx.ingress.kubernetes.io/proxy-send-timeout": "600",
                        "nginx.ingress.kubernetes.io/whitelist-source-range": "10.0.0.0/10,192.168.0.0/16",
                        "nginx.ingress.kubernetes.io/configuration-snippet":
                            "add_header Strict-Transport-Security \"max-age=31536000; includeSubDomains\" always;\n",
                    },
                },
                "spec": {
                    "ingressClassName": "nginx",
                    "rules": [{
                        "host": "registry.kube.example.com",
                        "http": {"paths": [{
                            "backend": {"service": {"name": "registry-push", "port": {"number": 5001}}},
                            "path": "/",
                            "pathType": "Prefix",
                        }]},
                    }],
                    "tls": [{"hosts": ["registry.kube.example.com"], "secretName": "registry-ingress-tls"}],
                },
            })
        );
        // Nothing of a client certificate asked of whoever pushes (auth-tls-*): the write
        // credentials admit a push.
        let annotations = got["metadata"]["annotations"].as_object().unwrap();
        assert!(annotations.keys().all(|k| !k.contains("auth-tls")));
        assert_eq!(
            certificate(&s, &domain(), Some(&storage(true))).unwrap(),
            json!({
                "apiVersion": "cert-manager.io/v1",
                "kind": "Certificate",
                "metadata": {
                    "name": "registry-push",
                    "namespace": "d8-system",
                    "labels": {"heritage": "deckhouse", "module": "registry", "app": "registry-storage"},
                },
                "spec": {
                    "certificateOwnerRef": false,
                    "secretName": "registry-ingress-tls",
                    "commonName": "registry.kube.example.com",
                    "dnsNames": ["registry.kube.example.com"],
                    "issuerRef": {"name": "letsencrypt", "kind": "ClusterIssuer"},
                },
            })
        );
    }

    #[test]
    fn class_ranges_and_certificate_come_from_the_module_then_global() {
        let g = Global::from_settings(Some(&json!({"modules": {
            "ingressClass": "public",
            "publicDomainTemplate": "%s.example.com",
            "https": {"mode": "CustomCertificate", "customCertificate": {"secretName": "wild"}},
        }})));
        let table = [
            // (registry settings, class, tls secret, cluster issuer, custom source, ranges, hsts)
            (
                json!({}),
                "public",
                Some(CUSTOM_TLS_SECRET),
                None,
                Some("wild"),
                None,
                true,
            ),
            (
                json!({"ingressClass": "private", "whitelistSourceRanges": ["10.0.0.0/8", "192.168.0.0/16"],
                       "https": {"mode": "CertManager", "certManager": {"clusterIssuerName": "corp"}}}),
                "private",
                Some(TLS_SECRET),
                Some("corp"),
                None,
                Some("10.0.0.0/8,192.168.0.0/16"),
                true,
            ),
            (
                json!({"https": {"mode": "CertManager"}}),
                "public",
                Some(TLS_SECRET),
                Some("letsencrypt"),
                None,
                None,
                true,
            ),
            (
                json!({"https": {"mode": "Disabled"}}),
                "public",
                None,
                None,
                None,
                None,
                false,
            ),
            (
                json!({"https": {"mode": "OnlyInURI"}}),
                "public",
                None,
                None,
                None,
                None,
                false,
            ),
        ];
        for (raw, class, secret, issuer, custom, ranges, hsts) in table {
            let s = settings(raw.clone());
            let storage = Some(storage(true));
            let got = ingress(&s, &g, storage.as_ref()).unwrap();
            let annotation = |k: &str| got["metadata"]["annotations"][k].as_str();
            assert_eq!(got["spec"]["ingressClassName"], class, "{raw}");
            assert_eq!(
                got["spec"]["tls"][0]["secretName"].as_str(),
                secret,
                "{raw}"
            );
            assert_eq!(
                certificate(&s, &g, storage.as_ref())
                    .as_ref()
                    .and_then(|c| c["spec"]["issuerRef"]["name"].as_str()),
                issuer,
                "{raw}"
            );
            assert_eq!(
                custom_certificate_source(&s, &g, storage.as_ref()).as_deref(),
                custom,
                "{raw}"
            );
            assert_eq!(
                annotation("nginx.ingress.kubernetes.io/whitelist-source-range"),
                ranges,
                "{raw}"
            );
            assert_eq!(
                annotation("nginx.ingress.kubernetes.io/configuration-snippet").is_some(),
                hsts,
                "{raw}"
            );
            assert_eq!(annotation("cert-manager.io/cluster-issuer"), None);
            assert_eq!(got["spec"]["rules"][0]["host"], "registry.example.com");
        }
    }

    #[test]
    fn a_long_host_gets_no_common_name() {
        let long = Global {
            public_domain_template: Some(format!("%s.{}.example.com", "a".repeat(60))),
            ..Default::default()
        };
        let got = certificate(&RegistrySettings::default(), &long, Some(&storage(true))).unwrap();
        assert_eq!(got["spec"].get("commonName"), None);
        assert_eq!(
            got["spec"]["dnsNames"][0].as_str().map(str::len),
            Some("registry.".len() + 60 + ".example.com".len())
        );
    }

    #[test]
    fn the_custom_certificate_copy_holds_the_pair_alone() {
        let copy = custom_certificate_copy(
            &json!({"tls.crt": "Y3J0", "tls.key": "a2V5", "ca.crt": "Y2E="}),
        );
        assert_eq!(copy["metadata"]["name"], CUSTOM_TLS_SECRET);
        assert_eq!(copy["type"], "kubernetes.io/tls");
        assert_eq!(copy["data"], json!({"tls.crt": "Y3J0", "tls.key": "a2V5"}));
    }

    #[test]
    fn a_template_without_placeholder_gives_no_host() {
        for (template, want) in [
            (None, None),
            (Some("example.com"), None),
            (Some("%s.kube.local"), Some("registry.kube.local")),
        ] {
            let g = Global {
                public_domain_template: template.map(str::to_owned),
                ..Default::default()
            };
            assert_eq!(host(&g).as_deref(), want, "{template:?}");
        }
    }

    #[test]
    fn matches_ignores_what_the_server_adds() {
        let want = ingress(
            &RegistrySettings::default(),
            &domain(),
            Some(&storage(true)),
        )
        .unwrap();
        let mut existing = want.clone();
        existing["metadata"]["uid"] = "u".into();
        existing["status"] = json!({"loadBalancer": {}});
        assert!(matches(&existing, &want));
        existing["spec"]["ingressClassName"] = "other".into();
        assert!(!matches(&existing, &want));
    }
}
