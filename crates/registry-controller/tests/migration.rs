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
