//! `deckhouse_registry_errors` (D8DeckhouseHasNoAccessToRegistry): each failed read of the
//! release channel from the registry counts once; a successful read adds nothing.

use serde_json::json;

use crate::common::Cluster;

fn registry_errors(c: &Cluster) -> Option<String> {
    c.engine
        .metrics()
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix("deckhouse_registry_errors "))
        .map(str::to_owned)
}

#[tokio::test]
async fn failed_channel_reads_count_as_registry_errors() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Auto"}}))
        .await;
    assert_eq!(registry_errors(&c).as_deref(), Some("0"));
    // Nothing published on the channel yet: the read fails.
    assert!(c.engine.sync_channel().await.is_err());
    assert!(c.engine.sync_channel().await.is_err());
    assert_eq!(registry_errors(&c).as_deref(), Some("2"));
    assert!(
        c.engine
            .metrics()
            .encode()
            .contains("# TYPE deckhouse_registry_errors counter\n")
    );
    c.publish_version("v1.66.3").await;
    c.publish_channel("stable", json!({"version": "v1.66.3"}))
        .await;
    c.engine.sync_channel().await.unwrap();
    assert_eq!(registry_errors(&c).as_deref(), Some("2"));
}
