//! Replicas writing their status entries into one RegistryStorage on the embedded API server.

use api::registry::{RegistryStorage, RegistryStorageSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use storage::status::{Report, Role, StatusSink};
use storage_kube::{Error, KubeStatus};

struct Cluster {
    server: apiserver::RunningServer,
    _dir: tempfile::TempDir,
}

async fn cluster() -> Cluster {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let crds = api::crds::all()
        .into_iter()
        .map(|crd| serde_json::to_value(crd).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = apiserver::ApiServer::builder()
        .data_dir(dir.path())
        .crds(crds)
        .namespace("d8-system")
        .serve(listener)
        .await
        .unwrap();
    Cluster { server, _dir: dir }
}

impl Cluster {
    async fn client(&self) -> Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(self.server.admin_kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        Client::try_from(config).unwrap()
    }
}

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
    let cluster = cluster().await;
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
    let cluster = cluster().await;
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
