//! The alert rules: the PrometheusRule and the plain rule file promtool tests are the same
//! groups, and every alert of the module has its name, `for` and severity, the labels every
//! alert carries, and the `managed` guard where it must have one. (Whether each one fires and
//! stays silent is `monitoring/tests.yaml`, run by promtool in CI.)

use serde_json::Value;

fn load(name: &str) -> Value {
    let path = format!("{}/monitoring/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

const TABLE: [(&str, &str, &str, bool); 16] = [
    ("D8RegistryConfigInvalid", "5m", "4", true),
    ("D8RegistryNodeNotConverged", "20m", "5", true),
    ("D8RegistryNodeRunningFromDisk", "1h", "6", true),
    ("D8RegistryStorageIncomplete", "2h", "6", true),
    ("D8RegistryAirGapTransitionHeld", "6h", "5", false),
    ("D8RegistryUpstreamProbeFailing", "15m", "4", true),
    ("D8RegistryUpstreamRejected", "15m", "6", false),
    ("D8RegistryStaleCacheData", "24h", "8", false),
    ("D8RegistryStorageNotReclaimed", "1h", "6", true),
    ("D8RegistryStoreWritesRefused", "2m", "4", true),
    ("D8RegistryStoreNearlyFull", "5m", "6", true),
    ("D8RegistryStoreUnbounded", "1h", "7", true),
    ("D8RegistryDrainStuck", "5m", "6", false),
    ("D8RegistryMigrationPending", "5m", "8", false),
    ("D8RegistryMigrationPreflightBlocked", "15m", "6", false),
    ("D8RegistryNodeForeignRegistryConfig", "5m", "5", false),
];

#[test]
fn the_prometheus_rule_and_the_rule_file_are_the_same_groups() {
    let rule = load("registry.yaml");
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(rule["spec"]["groups"], load("rules.yaml")["groups"]);
}

#[test]
fn every_alert_of_the_table_with_its_for_severity_labels_and_guard() {
    let groups = load("rules.yaml");
    let rules = groups["groups"][0]["rules"].as_array().unwrap();
    assert_eq!(groups["groups"][0]["name"], "D8RegistryAlerts");
    let names: Vec<&str> = rules.iter().map(|r| r["alert"].as_str().unwrap()).collect();
    let expected: Vec<&str> = TABLE.iter().map(|row| row.0).collect();
    assert_eq!(names, expected);
    for ((name, for_, severity, guarded), rule) in TABLE.iter().zip(rules) {
        assert_eq!(rule["for"], *for_, "{name}");
        assert_eq!(rule["labels"]["severity_level"], *severity, "{name}");
        assert_eq!(rule["labels"]["tier"], "cluster", "{name}");
        assert_eq!(rule["labels"]["d8_module"], "registry", "{name}");
        let expr = rule["expr"].as_str().unwrap();
        assert_eq!(
            expr.contains("max(d8_registry_managed) > 0"),
            *guarded,
            "{name}: managed guard"
        );
        assert!(rule["annotations"]["summary"].is_string(), "{name}");
    }
}
