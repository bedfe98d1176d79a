use super::*;

fn spec() -> RegistryNodeSpec {
    serde_json::from_value(serde_json::json!({
        "cache": true,
        "backends": [
            {"name": "Storage", "scheme": "HTTPS", "host": "10.0.0.1:5001", "path": "/system/deckhouse",
             "auth": {"secretRef": {"name": "registry-resolved-auth", "key": "storage"}},
             "mirrors": [{"scheme": "HTTPS", "host": "10.0.0.2:5001", "path": "/system/deckhouse",
                          "auth": {"secretRef": {"name": "registry-resolved-auth", "key": "storage"}}}]},
            {"name": "Upstream", "scheme": "HTTP", "host": "registry.example:5000", "path": "/deckhouse/ee",
             "auth": {"secretRef": {"name": "registry-resolved-auth", "key": "upstream"}}}
        ],
        "additionalRoutes": [
            {"match": "ghcr.io", "scheme": "HTTPS", "host": "proxy.example", "path": "/ghcr"}
        ]
    }))
    .unwrap()
}

fn secrets(entries: &[(&str, &str)]) -> BTreeMap<String, BTreeMap<String, Vec<u8>>> {
    let data = entries
        .iter()
        .map(|(k, v)| {
            let encoded = base64::engine::general_purpose::STANDARD.encode(v);
            ((*k).to_owned(), encoded.into_bytes())
        })
        .collect();
    BTreeMap::from([("registry-resolved-auth".to_owned(), data)])
}

#[test]
fn references_resolve_to_credentials() {
    let spec = spec();
    assert_eq!(secret_names(&spec), ["registry-resolved-auth"]);
    let layout = resolve(
        &spec,
        &secrets(&[("storage", "node:n0de"), ("upstream", "license-token:a:b")]),
    )
    .unwrap();
    assert!(layout.cache);
    let storage = &layout.backends[0];
    assert_eq!(storage.name, BackendName::Storage);
    assert_eq!(storage.endpoint.auth.as_ref().unwrap().username, "node");
    assert_eq!(storage.mirrors[0].auth.as_ref().unwrap().password, "n0de");
    let upstream = &layout.backends[1];
    assert_eq!(upstream.endpoint.scheme, Scheme::Http);
    assert_eq!(upstream.endpoint.path, "/deckhouse/ee");
    let credentials = upstream.endpoint.auth.as_ref().unwrap();
    assert_eq!(
        (credentials.username.as_str(), credentials.password.as_str()),
        ("license-token", "a:b")
    );
    assert_eq!(layout.additional_routes[0].match_host, "ghcr.io");
    assert!(layout.additional_routes[0].endpoint.auth.is_none());
}

#[test]
fn a_missing_key_or_bad_value_names_it_but_never_a_value() {
    let error = resolve(&spec(), &secrets(&[("storage", "node:n0de")])).unwrap_err();
    assert_eq!(error, "Secret registry-resolved-auth has no key upstream");
    let mut bad = secrets(&[("storage", "node:n0de")]);
    bad.get_mut("registry-resolved-auth")
        .unwrap()
        .insert("upstream".into(), b"%%%not-base64".to_vec());
    let error = resolve(&spec(), &bad).unwrap_err();
    assert!(
        error.contains("key upstream") && !error.contains("%%%"),
        "{error}"
    );
    let error = resolve(&spec(), &BTreeMap::new()).unwrap_err();
    assert!(error.contains("was not read"), "{error}");
}

#[test]
fn status_says_where_the_layout_came_from() {
    let now: jiff::Timestamp = "2026-11-30T10:00:00Z".parse().unwrap();
    let applied = NodeStatus {
        observed_generation: 4,
        reconciled: true,
        proxy_listening: true,
        active_backends: vec!["Storage".into(), "Upstream".into()],
        origin: Some(Origin::Api),
        message: "ok".into(),
    };
    let patch = status_patch(&applied, now);
    assert_eq!(patch["status"]["observedGeneration"], 4);
    assert_eq!(patch["status"]["activeBackends"][1], "Upstream");
    assert_eq!(patch["status"]["conditions"][0]["reason"], "Applied");
    assert_eq!(patch["status"]["conditions"][0]["status"], "True");
    let cached = NodeStatus {
        origin: Some(Origin::Cache),
        ..applied.clone()
    };
    assert_eq!(
        status_patch(&cached, now)["status"]["conditions"][0]["reason"],
        "AppliedFromCache"
    );
    let failed = NodeStatus {
        reconciled: false,
        ..applied
    };
    assert_eq!(
        status_patch(&failed, now)["status"]["conditions"][0]["status"],
        "False"
    );
}

#[test]
fn an_auth_without_a_secret_ref_is_anonymous() {
    let spec: RegistryNodeSpec = serde_json::from_value(serde_json::json!({
        "cache": false,
        "backends": [{"name": "Upstream", "host": "registry.example", "auth": {}}]
    }))
    .unwrap();
    assert!(secret_names(&spec).is_empty(), "no Secret to read");
    let layout = resolve(&spec, &BTreeMap::new()).unwrap();
    assert!(layout.backends[0].endpoint.auth.is_none());
}
