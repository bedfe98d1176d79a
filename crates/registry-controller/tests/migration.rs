//! The migration gate on the embedded API server (issue #19, point 3): while the previous
//! implementation keeps the pull path, the controller still writes `registry-suggested-config`
//! (the page `D8RegistryMigrationPending` sends the operator to) and emits
//! `d8_registry_migration_pending{reason}`, probes the registry the cluster would pull from
//! after the switch (`upstream_reachable` fires before it), and for a mode that must be brought
//! to Unmanaged first emits `d8_registry_migration_preflight{blocking="true"}` — and takes
//! nothing over.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use prometheus_client::registry::Registry as MetricsRegistry;
use registry_controller::{Controller, Options, metrics};
use registry_controller_plan::migration::Gate;
use registry_controller_plan::{SUGGESTED_CONFIG_KEY, SUGGESTED_CONFIG_SECRET, SWITCH_SECRET};

fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("d8-system".to_owned()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

fn legacy_state(mode: &str) -> String {
    format!("mode: {mode}\ntarget_mode: {mode}\n")
}

#[tokio::test]
async fn a_blocked_gate_still_suggests_the_config_and_reports_blocking_preflight() {
    let server = testkit::Cluster::start().await;
    let admin = server.client().await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "d8-system");
    // The previous implementation in Direct mode, the cluster installed from an external
    // registry (nothing listens there), no `registry` ModuleConfig yet.
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let dockercfg = format!(r#"{{"auths":{{"{address}":{{"auth":"dTpw"}}}}}}"#);
    secrets
        .create(
            &PostParams::default(),
            &secret(
                "deckhouse-registry",
                &[
                    ("address", &address),
                    ("path", "/deckhouse/ee"),
                    ("scheme", "http"),
                    (".dockerconfigjson", &dockercfg),
                ],
            ),
        )
        .await
        .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &secret("registry-state", &[("state", &legacy_state("Direct"))]),
        )
        .await
        .unwrap();

    let controller = Controller::new(
        admin.clone(),
        Options {
            interval: Duration::from_millis(200),
            probe_timeout: Duration::from_secs(5),
            ..Options::default()
        },
    );
    let mut registry = MetricsRegistry::default();
    controller.metrics().register(&mut registry);

    let report = controller.reconcile().await.unwrap();
    assert!(matches!(report.gate, Gate::Blocked(_)), "{:?}", report.gate);
    let suggested = secrets
        .get_opt(SUGGESTED_CONFIG_SECRET)
        .await
        .unwrap()
        .expect("registry-suggested-config is written while the gate blocks");
    let yaml = suggested.data.unwrap()[SUGGESTED_CONFIG_KEY].0.clone();
    let yaml = String::from_utf8(yaml).unwrap();
    assert!(
        yaml.contains(&address) && yaml.contains("Managed"),
        "{yaml}"
    );
    let text = metrics::encode(&registry);
    assert!(
        text.contains(
            "d8_registry_migration_pending{reason=\"the cluster is in the \\\"Direct\\\" mode"
        ),
        "{text}"
    );
    // The registry the cluster would pull from after the switch is probed before it.
    assert!(
        text.lines().any(|l| l
            .starts_with("d8_registry_migration_preflight{check=\"upstream_reachable\"")
            && l.contains("blocking=\"false\"")
            && l.ends_with(" 1")),
        "{text}"
    );
    assert!(
        !text.contains("blocking=\"true\""),
        "Direct blocks only for the config, no blocking preflight: {text}"
    );
    assert!(
        secrets.get_opt(SWITCH_SECRET).await.unwrap().is_none(),
        "nothing is taken over while blocked"
    );

    // The previous implementation in Proxy: it must be brought to Unmanaged first.
    let mut state = secrets.get("registry-state").await.unwrap();
    state.data = secret("registry-state", &[("state", &legacy_state("Proxy"))]).data;
    secrets
        .replace("registry-state", &PostParams::default(), &state)
        .await
        .unwrap();
    let report = controller.reconcile().await.unwrap();
    assert!(matches!(report.gate, Gate::Blocked(_)), "{:?}", report.gate);
    let text = metrics::encode(&registry);
    let blocking: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("d8_registry_migration_preflight{") && l.ends_with(" 1"))
        .filter(|l| l.contains("blocking=\"true\""))
        .collect();
    assert!(
        blocking.iter().any(|l| l.contains("check=\"mode\"")),
        "{text}"
    );
    assert!(
        secrets
            .get_opt(SUGGESTED_CONFIG_SECRET)
            .await
            .unwrap()
            .is_some(),
        "the suggestion stays while blocked"
    );
    assert!(secrets.get_opt(SWITCH_SECRET).await.unwrap().is_none());
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> Secret {
    let mut secret = secret(name, &[("k", "v")]);
    secret.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    secret
}

async fn names(secrets: &Api<Secret>) -> Vec<String> {
    let mut names: Vec<String> = secrets
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    names.sort();
    names
}

/// Issue #19 point 4, the cluster side of the Direct-mode handover: the previous
/// implementation's Secrets stay while nodes may still pull its way, and go once every node's
/// agent took over (the image address is published) — a second pass changes nothing.
#[tokio::test]
async fn the_previous_implementations_objects_go_once_the_nodes_took_over() {
    let server = testkit::Cluster::start().await;
    let admin = server.client().await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "d8-system");
    let create = |s: Secret| {
        let secrets = secrets.clone();
        async move { secrets.create(&PostParams::default(), &s).await.unwrap() }
    };
    // The previous implementation in Direct mode and what it left.
    create(secret(
        "registry-state",
        &[("state", &legacy_state("Direct"))],
    ))
    .await;
    create(secret("registry-config", &[("config", "mode: Direct\n")])).await;
    create(secret("registry-pki", &[("registry-ca.key", "KEY")])).await;
    create(labelled(
        "registry-node-config-master-0",
        &[("app.kubernetes.io/managed-by", "registry-nodeservices")],
    ))
    .await;
    // Not the previous implementation's.
    create(labelled(
        "registry-notes",
        &[("app.kubernetes.io/managed-by", "an-admin")],
    ))
    .await;
    // The operator's Managed configuration with a source of images lets the gate pass.
    let module_configs: Api<api::module_config::ModuleConfig> = Api::all(admin.clone());
    let mc: api::module_config::ModuleConfig = serde_json::from_value(serde_json::json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": "registry"},
        "spec": {"version": 1, "enabled": true, "settings": {"mode": "Managed",
            "primary": {"upstream": {"scheme": "HTTP", "host": "127.0.0.1:9", "path": "/dkp"}}}},
    }))
    .unwrap();
    module_configs
        .create(&PostParams::default(), &mc)
        .await
        .unwrap();

    let controller = Controller::new(
        admin.clone(),
        Options {
            interval: Duration::from_millis(200),
            probe_timeout: Duration::from_secs(2),
            ..Options::default()
        },
    );
    let report = controller.reconcile().await;
    assert!(
        secrets.get_opt(SWITCH_SECRET).await.unwrap().is_some(),
        "the gate passed: {report:?}"
    );
    let legacy = [
        "registry-config",
        "registry-node-config-master-0",
        "registry-pki",
        "registry-state",
    ];
    let present = names(&secrets).await;
    for name in legacy {
        assert!(
            present.iter().any(|n| n == name),
            "{name} stays while no node's agent took over: {present:?}"
        );
    }

    // Every node's agent applied its layout: the controller publishes the image address (made
    // here directly; the publication rule has its own tests).
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(admin.clone(), "d8-system");
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "registry-image-address", "namespace": "d8-system"},
                "data": {"base": "registry.d8-system.svc:5001/system/deckhouse"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let _ = controller.reconcile().await;
    let after = names(&secrets).await;
    for name in legacy {
        assert!(
            !after.iter().any(|n| n == name),
            "{name} is removed after the handover: {after:?}"
        );
    }
    for kept in ["registry-notes", SWITCH_SECRET] {
        assert!(after.iter().any(|n| n == kept), "{kept} stays: {after:?}");
    }

    // Idempotent: a second pass finds nothing to remove and deletes nothing else.
    let before: Vec<(Option<String>, Option<String>)> = secrets
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| (s.metadata.name, s.metadata.resource_version))
        .collect();
    let _ = controller.reconcile().await;
    let again: Vec<(Option<String>, Option<String>)> = secrets
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| (s.metadata.name, s.metadata.resource_version))
        .collect();
    assert_eq!(
        before
            .iter()
            .filter(|(n, _)| n.as_deref() == Some("registry-notes"))
            .collect::<Vec<_>>(),
        again
            .iter()
            .filter(|(n, _)| n.as_deref() == Some("registry-notes"))
            .collect::<Vec<_>>()
    );
    assert_eq!(names(&secrets).await, after);
}
