//! Three replicas campaigning for Lease `registry-storage` on the embedded API server, with
//! short timings: the best replica leads while none is full; a non-full leader steps aside for
//! the first full replica (the rules are the same with or without an upstream); when the leader dies without releasing, a full follower
//! takes over after the lease expires.

use std::time::Duration;

use api::registry::{RegistryStorage, RegistryStorageSpec};
use kube::api::{Api, PostParams};
use storage::status::Report;
use storage_kube::KubeStatus;
use storage_kube::election::{self, Config, Election};
use tokio::sync::watch;
use tokio::time::Instant;

const LEASE: Duration = Duration::from_secs(2);

fn config(node: &str) -> Config {
    let mut config = Config::new(node);
    config.lease.lease_duration = LEASE;
    config.lease.renew_deadline = Duration::from_millis(1500);
    config.lease.retry_period = Duration::from_millis(200);
    config.recheck = Duration::from_millis(300);
    config
}

struct Replica {
    report: watch::Sender<Report>,
    election: Election,
}

async fn replica(server: &testkit::Cluster, node: &str, verified: u64) -> Replica {
    let client = server.client().await;
    let mut report = Report::new(node, format!("{node}:5001"));
    report.verified_digests = verified;
    report.declared_digests = 10;
    let (tx, rx) = watch::channel(report);
    let election =
        election::spawn(client.clone(), KubeStatus::new(client), rx, config(node)).expect("spawn");
    Replica {
        report: tx,
        election,
    }
}

fn full(replica: &Replica) {
    replica.report.send_modify(|r| {
        r.full = true;
        r.verified_digests = 10;
    });
}

/// Waits until exactly `node` leads among `replicas` (by name); returns how long it took.
async fn wait_leader(replicas: &[(&str, &Replica)], node: &str, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let leaders: Vec<&str> = replicas
            .iter()
            .filter(|(_, r)| r.election.is_leader())
            .map(|(n, _)| *n)
            .collect();
        assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
        if leaders == [node] {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{node} did not become the only leader within {within:?} (leaders: {leaders:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_first_full_replica_leads_and_a_full_follower_takes_over_from_a_dead_leader() {
    let server = testkit::Cluster::start().await;
    let admin = server.client().await;
    Api::<RegistryStorage>::all(admin.clone())
        .create(
            &PostParams::default(),
            &RegistryStorage::new("registry", RegistryStorageSpec::default()),
        )
        .await
        .unwrap();

    let a = replica(&server, "master-a", 5).await;
    let b = replica(&server, "master-b", 3).await;
    let c = replica(&server, "master-c", 1).await;
    let all = [("master-a", &a), ("master-b", &b), ("master-c", &c)];
    // None is full: the one with the most verified digests leads.
    wait_leader(&all, "master-a", Duration::from_secs(10)).await;

    // C becomes full: the non-full leader steps aside and C leads.
    full(&c);
    wait_leader(&all, "master-c", Duration::from_secs(10)).await;
    let rstor = Api::<RegistryStorage>::all(admin.clone());
    let roles = async || {
        rstor
            .get("registry")
            .await
            .unwrap()
            .status
            .unwrap()
            .replicas
            .iter()
            .map(|r| (r.node.clone(), r.role.map(|r| r.as_str().to_owned())))
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = roles().await;
        if now.iter().all(|(n, r)| {
            r.as_deref()
                == Some(if n == "master-c" {
                    "Leader"
                } else {
                    "Follower"
                })
        }) {
            break;
        }
        assert!(Instant::now() < deadline, "roles not reported: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // B becomes full too; the leader C dies without releasing the lease (like kill -9).
    full(&b);
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(c.election.is_leader(), "the incumbent keeps leading");
    c.election.abort();
    let killed = Instant::now();
    let rest = [("master-a", &a), ("master-b", &b)];
    wait_leader(&rest, "master-b", LEASE * 3).await;
    let took = killed.elapsed();
    assert!(
        took >= LEASE - Duration::from_millis(300),
        "taken over after {took:?}, before the dead leader's lease could expire"
    );
    assert!(
        !a.election.is_leader(),
        "a non-full replica never leads while one is full"
    );
}
