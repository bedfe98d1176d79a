//! Replicas writing their status entries into one RegistryStorage on the embedded API server.

use api::registry::{RegistryStorage, RegistryStorageSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use storage::status::{Report, Role, StatusSink};
use storage_kube::{Error, KubeStatus};

async fn create_storage(client: &Client) {
    let api: Api<RegistryStorage> = Api::all(client.clone());
    api.create(
        &PostParams::default(),
        &RegistryStorage::new("registry", RegistryStorageSpec::default()),
    )
    .await
    .unwrap();
}

fn report(node: &str, verified: u64) -> Report {
    let mut report = Report::new(node, format!("{node}.example:5001"));
    report.verified_digests = verified;
    report.declared_digests = 100;
    report.role = Some(Role::Follower);
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_replicas_never_lose_each_others_entries() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client().await;
    create_storage(&admin).await;
    const WRITES: u64 = 15;
    let mut tasks = Vec::new();
    for node in ["master-0", "master-1", "master-2"] {
        // One client per replica, as separate processes would have.
        let sink = KubeStatus::new(cluster.client().await);
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for n in 1..=WRITES {
                seen = sink.publish(&report(node, n)).await.expect("publish");
            }
            seen
        }));
    }
    for task in tasks {
        let seen = task.await.unwrap();
        assert!(!seen.is_empty());
    }
    let api: Api<RegistryStorage> = Api::all(admin);
    let status = api.get("registry").await.unwrap().status.unwrap();
    let entries: Vec<_> = status
        .replicas
        .iter()
        .map(|r| (r.node.as_str(), r.verified_digests))
        .collect();
    let last = Some(i32::try_from(WRITES).unwrap());
    assert_eq!(
        entries,
        [("master-0", last), ("master-1", last), ("master-2", last)]
    );
    assert!(
        status
            .replicas
            .iter()
            .all(|r| r.declared_digests == Some(100)
                && r.address.as_deref() == Some(&format!("{}.example:5001", r.node)))
    );
}

#[tokio::test]
async fn the_returned_list_feeds_election_and_a_missing_object_is_a_clear_error() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client().await;
    let sink = KubeStatus::new(admin.clone());
    let error = sink.publish(&report("master-0", 1)).await.unwrap_err();
    assert!(matches!(error, Error::Missing { .. }), "{error}");
    assert!(error.to_string().contains("does not exist yet"), "{error}");

    create_storage(&admin).await;
    let mut full = report("master-1", 100);
    full.full = true;
    sink.publish(&full).await.unwrap();
    let reports = sink.publish(&report("master-0", 3)).await.unwrap();
    let observed = registry_plan::election::Observed {
        incumbent: None,
        reports: &reports,
        current_set: None,
    };
    assert!(registry_plan::election::may_lead("master-1", &observed));
    assert!(!registry_plan::election::may_lead("master-0", &observed));
}
