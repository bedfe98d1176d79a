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
//! `modules.publicDomainTemplate`, as Deckhouse's modules do.

use api::registry::{NAMESPACE, RegistrySettings, RegistryStorageSpec};
use serde_json::{Value, json};

/// Name of the Ingress (and of the Service it sends to, which the chart renders:
/// [`crate::push::SERVICE`], whose only endpoint is the cache leader).
pub const INGRESS: &str = crate::push::SERVICE;
/// Port name of Service [`INGRESS`] (to the leader's write listener).
pub const SERVICE_PORT: &str = crate::push::PORT_NAME;
/// Secret (in `d8-system`, key `ca.crt`) with the CA whose client certificates may push.
pub const CLIENT_CA_SECRET: &str = "registry-publish-client-ca";
/// Secret cert-manager issues the serving certificate into (`https.mode: CertManager`).
pub const TLS_SECRET: &str = "registry-publish-tls";
/// The name substituted into `publicDomainTemplate`.
pub const DOMAIN_NAME: &str = "registry";
/// Label marking the objects the controller renders.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "registry-controller");

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

/// Whether the endpoint is published: the desired RegistryStorage asks for air gap.
pub fn wanted(storage: Option<&RegistryStorageSpec>) -> bool {
    storage.is_some_and(|s| s.air_gap_requested == Some(true) && s.publish != Some(false))
}

/// The host of the endpoint: `publicDomainTemplate` with `%s` → `registry`; none without a
/// template (the Ingress then answers on any host).
pub fn host(global: &Global) -> Option<String> {
    global
        .public_domain_template
        .as_deref()
        .filter(|t| t.contains("%s"))
        .map(|t| t.replace("%s", DOMAIN_NAME))
}

/// The certificate settings in force: the module's `https` wins over the global one.
fn https<'a>(settings: &'a RegistrySettings, global: &'a Global) -> Option<&'a Value> {
    settings.https.as_ref().or(global.https.as_ref())
}

/// What `https` asks of the Ingress: (annotations, TLS secret). `Disabled` and `OnlyInURI` give
/// no TLS section (TLS, if any, ends in front of the ingress controller).
fn tls(https: Option<&Value>) -> (Vec<(String, String)>, Option<String>) {
    let mode = https
        .and_then(|h| h.get("mode"))
        .and_then(Value::as_str)
        .unwrap_or("CertManager");
    match mode {
        "Disabled" | "OnlyInURI" => (Vec::new(), None),
        "CustomCertificate" => {
            let secret = https
                .and_then(|h| h.pointer("/customCertificate/secretName"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            (Vec::new(), secret)
        }
        _ => {
            let issuer = https
                .and_then(|h| h.pointer("/certManager/clusterIssuerName"))
                .and_then(Value::as_str)
                .unwrap_or(DEFAULT_CLUSTER_ISSUER);
            (
                vec![("cert-manager.io/cluster-issuer".into(), issuer.into())],
                Some(TLS_SECRET.into()),
            )
        }
    }
}

/// The Ingress (a `networking.k8s.io/v1` object) the cluster must have; `None` when it must not
/// exist. `storage` is the desired RegistryStorage spec (`None` without the cache).
pub fn ingress(
    settings: &RegistrySettings,
    global: &Global,
    storage: Option<&RegistryStorageSpec>,
) -> Option<Value> {
    if !wanted(storage) {
        return None;
    }
    let class = settings
        .ingress_class
        .clone()
        .or_else(|| global.ingress_class.clone())
        .unwrap_or_else(|| DEFAULT_INGRESS_CLASS.to_owned());
    let mut annotations = serde_json::Map::new();
    for (key, value) in [
        ("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS"),
        ("nginx.ingress.kubernetes.io/proxy-body-size", "0"),
        ("nginx.ingress.kubernetes.io/proxy-request-buffering", "off"),
        ("nginx.ingress.kubernetes.io/proxy-read-timeout", "600"),
        ("nginx.ingress.kubernetes.io/proxy-send-timeout", "600"),
        ("nginx.ingress.kubernetes.io/auth-tls-verify-client", "on"),
        (
            "nginx.ingress.kubernetes.io/auth-tls-pass-certificate-to-upstream",
            "true",
        ),
    ] {
        annotations.insert(key.into(), value.into());
    }
    annotations.insert(
        "nginx.ingress.kubernetes.io/auth-tls-secret".into(),
        format!("{NAMESPACE}/{CLIENT_CA_SECRET}").into(),
    );
    if !settings.whitelist_source_ranges.is_empty() {
        annotations.insert(
            "nginx.ingress.kubernetes.io/whitelist-source-range".into(),
            settings.whitelist_source_ranges.join(",").into(),
        );
    }
    let (tls_annotations, secret) = tls(https(settings, global));
    for (key, value) in tls_annotations {
        annotations.insert(key, value.into());
    }
    let host = host(global);
    let mut rule = json!({"http": {"paths": [{
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": INGRESS, "port": {"name": SERVICE_PORT}}},
    }]}});
    if let Some(host) = &host {
        rule["host"] = host.clone().into();
    }
    let mut spec = json!({"ingressClassName": class, "rules": [rule]});
    if let Some(secret) = secret {
        let mut entry = json!({"secretName": secret});
        if let Some(host) = &host {
            entry["hosts"] = json!([host]);
        }
        spec["tls"] = json!([entry]);
    }
    Some(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": INGRESS,
            "namespace": NAMESPACE,
            "labels": {"app": "registry-storage", MANAGED_BY.0: MANAGED_BY.1},
            "annotations": annotations,
        },
        "spec": spec,
    }))
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

    #[test]
    fn exists_only_while_air_gap_is_asked_for() {
        let s = RegistrySettings::default();
        let g = Global::default();
        for (storage, want) in [
            (None, false),
            (Some(storage(false)), false),
            (Some(storage(true)), true),
            (
                Some(RegistryStorageSpec {
                    publish: Some(false),
                    ..storage(true)
                }),
                false,
            ),
        ] {
            assert_eq!(
                ingress(&s, &g, storage.as_ref()).is_some(),
                want,
                "{storage:?}"
            );
        }
    }

    #[test]
    fn class_ranges_and_certificate_come_from_the_module_then_global() {
        let g = Global::from_settings(Some(&json!({"modules": {
            "ingressClass": "public",
            "publicDomainTemplate": "%s.example.com",
            "https": {"mode": "CustomCertificate", "customCertificate": {"secretName": "wild"}},
        }})));
        let table = [
            // (registry settings, class, tls secret, cluster issuer, ranges)
            (json!({}), "public", Some("wild"), None, None),
            (
                json!({"ingressClass": "private", "whitelistSourceRanges": ["10.0.0.0/8", "192.168.0.0/16"],
                       "https": {"mode": "CertManager", "certManager": {"clusterIssuerName": "corp"}}}),
                "private",
                Some(TLS_SECRET),
                Some("corp"),
                Some("10.0.0.0/8,192.168.0.0/16"),
            ),
            (
                json!({"https": {"mode": "CertManager"}}),
                "public",
                Some(TLS_SECRET),
                Some("letsencrypt"),
                None,
            ),
            (
                json!({"https": {"mode": "Disabled"}}),
                "public",
                None,
                None,
                None,
            ),
            (
                json!({"https": {"mode": "OnlyInURI"}}),
                "public",
                None,
                None,
                None,
            ),
        ];
        for (raw, class, secret, issuer, ranges) in table {
            let got = ingress(&settings(raw.clone()), &g, Some(&storage(true))).unwrap();
            let annotation = |k: &str| got["metadata"]["annotations"][k].as_str();
            assert_eq!(got["spec"]["ingressClassName"], class, "{raw}");
            assert_eq!(
                got["spec"]["tls"][0]["secretName"].as_str(),
                secret,
                "{raw}"
            );
            assert_eq!(
                annotation("cert-manager.io/cluster-issuer"),
                issuer,
                "{raw}"
            );
            assert_eq!(
                annotation("nginx.ingress.kubernetes.io/whitelist-source-range"),
                ranges,
                "{raw}"
            );
            assert_eq!(
                annotation("nginx.ingress.kubernetes.io/auth-tls-verify-client"),
                Some("on")
            );
            assert_eq!(got["spec"]["rules"][0]["host"], "registry.example.com");
        }
    }

    #[test]
    fn without_global_settings_nginx_letsencrypt_and_any_host() {
        let got = ingress(
            &RegistrySettings::default(),
            &Global::default(),
            Some(&storage(true)),
        )
        .unwrap();
        assert_eq!(got["spec"]["ingressClassName"], "nginx");
        assert_eq!(got["spec"]["rules"][0].get("host"), None);
        assert_eq!(got["spec"]["tls"][0].get("hosts"), None);
        assert_eq!(
            got["metadata"]["annotations"]["cert-manager.io/cluster-issuer"],
            "letsencrypt"
        );
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
            &Global::default(),
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
