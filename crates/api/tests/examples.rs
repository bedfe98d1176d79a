//! Deckhouse's documentation examples decode into the types and pass validation; their invalid
//! variants are refused with Deckhouse's messages. (The manifests `kubectl apply` in the
//! embedded API server's demo.)

use api::validation::validate;
use serde_json::Value;

fn parse(yaml: &str) -> Value {
    serde_saphyr::from_str(yaml).expect("example parses")
}

fn admitted<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    let value = parse(yaml);
    let kind = value["kind"].as_str().expect("kind").to_string();
    assert_eq!(validate(&kind, None, &value), Ok(vec![]), "{kind} refused");
    serde_json::from_value(value).expect("decodes into the Rust type")
}

#[test]
fn the_registry_upstream_of_the_documentation() {
    let rup: api::registry::RegistryUpstream = admitted(
        "apiVersion: deckhouse.io/v1alpha1
kind: RegistryUpstream
metadata:
  name: virtualization-images
spec:
  match: images.virtualization.example.com
  upstream:
    host: vendor.example.com
    path: /virtualization
    auth:
      username: robot
      password: <PASSWORD>
",
    );
    assert_eq!(rup.spec.match_, "images.virtualization.example.com");
    assert_eq!(
        rup.spec.upstream.scheme,
        api::module_source::Scheme::Https,
        "scheme defaults to HTTPS"
    );
    assert!(
        !format!("{rup:?}").contains("<PASSWORD>"),
        "credentials never reach Debug output"
    );
}

#[test]
fn module_update_policies_with_windows() {
    let v2: api::module_update_policy::ModuleUpdatePolicy = admitted(
        "apiVersion: deckhouse.io/v1alpha2
kind: ModuleUpdatePolicy
metadata:
  name: example-update-policy
spec:
  releaseChannel: Alpha
  update:
    mode: Auto
    windows:
      - days: [Mon, Wed]
        from: '13:30'
        to: '14:00'
",
    );
    assert_eq!(v2.spec.update.windows[0].days.len(), 2);
    let v1: api::module_update_policy::v1alpha1::ModuleUpdatePolicy = admitted(
        "apiVersion: deckhouse.io/v1alpha1
kind: ModuleUpdatePolicy
metadata:
  name: example-update-policy
spec:
  moduleReleaseSelector:
    labelSelector:
      matchLabels:
        source: example
        module: module-1
  releaseChannel: Alpha
  update:
    mode: Auto
",
    );
    assert_eq!(
        v1.spec
            .module_release_selector
            .label_selector
            .match_labels
            .len(),
        2
    );
    let reversed = parse(
        "apiVersion: deckhouse.io/v1alpha2
kind: ModuleUpdatePolicy
metadata: {name: p}
spec:
  update:
    windows: [{from: '14:00', to: '13:30'}]
",
    );
    let denial = validate("ModuleUpdatePolicy", None, &reversed).expect_err("refused");
    assert_eq!(
        denial.message(),
        "Invalid update windows. Start time (windows.from) should be less than the end time of the update window (windows.to)"
    );
}

#[test]
fn module_configs() {
    let deckhouse: api::module_config::ModuleConfig = admitted(
        "apiVersion: deckhouse.io/v1alpha1
kind: ModuleConfig
metadata:
  name: deckhouse
spec:
  version: 1
  settings:
    releaseChannel: Stable
    update:
      mode: Auto
      windows:
        - from: '18:00'
          to: '19:30'
          days: [Tue, Sat]
      notification:
        webhook: https://release-webhook.mydomain.com
        minimalNotificationTime: 8h
",
    );
    assert_eq!(deckhouse.spec.version, Some(1));
    let registry: api::module_config::ModuleConfig = admitted(
        "apiVersion: deckhouse.io/v1alpha1
kind: ModuleConfig
metadata:
  name: registry
spec:
  enabled: true
  version: 1
  settings:
    mode: Managed
    primary:
      upstream:
        host: registry.deckhouse.io
        path: /deckhouse/ee
        scheme: HTTPS
        auth:
          license: DECKHOUSE_LICENSE_KEY
    storage:
      cache: true
      size: 50Gi
",
    );
    let settings: api::registry::RegistrySettings =
        serde_json::from_value(registry.spec.settings.expect("settings"))
            .expect("typed registry settings");
    assert_eq!(settings.mode, Some(api::registry::RegistryMode::Managed));
    let unmanaged_with_settings = parse(
        "apiVersion: deckhouse.io/v1alpha1
kind: ModuleConfig
metadata: {name: registry}
spec:
  version: 1
  settings:
    storage: {cache: true}
",
    );
    assert_eq!(
        validate("ModuleConfig", None, &unmanaged_with_settings)
            .expect_err("refused")
            .message(),
        "spec.settings are not valid (version 1): registry: set 'mode: Managed' to apply these settings; with the default 'Unmanaged' the module manages nothing and they have no effect."
    );
}

#[test]
fn object_keepers_module_sources_and_registry_configs() {
    let _: api::object_keeper::ObjectKeeper = admitted(
        "apiVersion: deckhouse.io/v1alpha1
kind: ObjectKeeper
metadata: {name: keep-for-a-day}
spec: {mode: TTL, ttl: 24h}
",
    );
    let source: api::module_source::ModuleSource = admitted(
        "apiVersion: deckhouse.io/v1alpha1
kind: ModuleSource
metadata: {name: example}
spec:
  registry:
    repo: registry.example.io/modules-source
    dockerCfg: e30K
",
    );
    assert_eq!(source.spec.registry.scheme.as_str(), "HTTPS");
    let _: api::registry::RegistryConfig = admitted(
        "apiVersion: deckhouse.io/v1alpha1
kind: RegistryConfig
metadata: {name: registry}
spec:
  mode: Managed
  storage:
    cache: true
    source: {bundleRef: d8-mirror-bundle, expectedDigests: 459}
",
    );
}
