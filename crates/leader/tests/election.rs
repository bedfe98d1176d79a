//! Three elector processes against the embedded API server: at most one leader at any
//! moment, takeover after the holder dies (lease expiry), fast takeover after a clean release.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use leader::{Config, LeaderElector};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::AsyncBufReadExt as _;

fn ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

const LEASE: Duration = Duration::from_secs(2);

fn cfg(identity: &str) -> Config {
    Config {
        lease_duration: LEASE,
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..Config::new("test-leader", identity)
    }
}

/// One candidate process: prints `LEADING <ms>` / `FOLLOWING <ms>`; on stdin EOF it
/// prints `STOPPING <ms>` and releases the lease.
#[tokio::test]
#[ignore = "helper: a candidate process of three_processes_elect_one_leader"]
async fn child_candidate() {
    let kc = std::env::var("ELECTION_KUBECONFIG").expect("ELECTION_KUBECONFIG");
    let id = std::env::var("ELECTION_ID").unwrap();
    let api: Api<Lease> = Api::namespaced(
        testkit::cluster::client(std::path::Path::new(&kc)).await,
        "default",
    );
    let mut lead = LeaderElector::new(api, cfg(&id)).unwrap().spawn();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    #[allow(clippy::print_stdout)]
    loop {
        tokio::select! {
            l = stdin.next_line() => {
                if matches!(l, Ok(None) | Err(_)) {
                    println!("STOPPING {}", ms());
                    lead.shutdown().await;
                    println!("STOPPED {}", ms());
                    return;
                }
            }
            leading = lead.changed() => {
                println!("{} {}", if leading { "LEADING" } else { "FOLLOWING" }, ms());
            }
        }
    }
}

struct Candidate {
    child: tokio::process::Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<(String, u128)>,
}

fn spawn(kc: &str, id: &str) -> Candidate {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_candidate",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("ELECTION_KUBECONFIG", kc)
        .env("ELECTION_ID", id)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut r = tokio::io::BufReader::new(out).lines();
        while let Ok(Some(l)) = r.next_line().await {
            for word in ["LEADING", "FOLLOWING", "STOPPING", "STOPPED"] {
                if let Some(i) = l.find(&format!("{word} ")) {
                    let t = l[i + word.len() + 1..].trim().parse().unwrap();
                    let _ = tx.send((word.to_string(), t));
                }
            }
        }
    });
    Candidate { child, lines }
}

/// Collected (identity, event, ms) from all candidates until `until` returns true.
async fn collect(
    cands: &mut [Candidate],
    log: &mut Vec<(usize, String, u128)>,
    secs: u64,
    until: impl Fn(&[(usize, String, u128)]) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !until(log) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out; log so far: {log:?}"
        );
        for (i, c) in cands.iter_mut().enumerate() {
            while let Ok((w, t)) = c.lines.try_recv() {
                log.push((i, w, t));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn leader_now(log: &[(usize, String, u128)]) -> Option<usize> {
    let mut cur = None;
    for (i, w, _) in log {
        match w.as_str() {
            "LEADING" => cur = Some(*i),
            "FOLLOWING" | "STOPPING" if cur == Some(*i) => cur = None,
            _ => {}
        }
    }
    cur
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_elect_one_leader() {
    let cluster = testkit::Cluster::start().await;
    let kc = cluster.admin_kubeconfig().display().to_string();
    let mut cands: Vec<Candidate> = (0..3).map(|i| spawn(&kc, &format!("c{i}"))).collect();
    let mut log = Vec::new();

    collect(&mut cands, &mut log, 30, |l| leader_now(l).is_some()).await;
    let first = leader_now(&log).unwrap();
    // Let the leader renew for a while: nobody else may lead meanwhile.
    tokio::time::sleep(LEASE * 2).await;
    collect(&mut cands, &mut log, 1, |_| true).await;
    assert_eq!(leader_now(&log), Some(first));

    // kill -9 the leader: the lease is not released; another takes over after it expires.
    let killed_at = ms();
    cands[first].child.start_kill().unwrap();
    let _ = cands[first].child.wait().await;
    collect(&mut cands, &mut log, 30, |l| {
        leader_now(
            &l.iter()
                .filter(|e| e.0 != first)
                .cloned()
                .collect::<Vec<_>>(),
        )
        .is_some()
    })
    .await;
    let second = log.iter().rev().find(|e| e.1 == "LEADING").unwrap().clone();
    assert_ne!(second.0, first);
    let takeover = second.2 - killed_at;
    assert!(
        takeover >= LEASE.as_millis() - 300,
        "took over only after expiry: {takeover} ms"
    );
    let api: Api<Lease> = Api::namespaced(
        {
            let kc = kube::config::Kubeconfig::read_from(&kc).unwrap();
            kube::Client::try_from(
                kube::Config::from_custom_kubeconfig(kc, &Default::default())
                    .await
                    .unwrap(),
            )
            .unwrap()
        },
        "default",
    );
    let lease = api.get("test-leader").await.unwrap().spec.unwrap();
    assert_eq!(
        lease.holder_identity.as_deref(),
        Some(format!("c{}", second.0).as_str())
    );
    assert_eq!(lease.lease_transitions, Some(1));
    assert!(lease.acquire_time.is_some() && lease.renew_time.is_some());

    // A clean shutdown releases the lease: the third takes over well before expiry.
    let stop_at = ms();
    drop(cands[second.0].child.stdin.take());
    collect(&mut cands, &mut log, 30, |l| {
        l.iter()
            .any(|e| e.1 == "LEADING" && e.0 != first && e.0 != second.0)
    })
    .await;
    let third = log.iter().rev().find(|e| e.1 == "LEADING").unwrap().clone();
    let fast = third.2 - stop_at;
    assert!(
        fast < LEASE.as_millis(),
        "takeover after release took {fast} ms"
    );

    // At most one leader at any moment: leadership intervals never overlap.
    let mut intervals: Vec<(u128, u128, usize)> = Vec::new();
    let mut open: [Option<u128>; 3] = [None; 3];
    for (i, w, t) in &log {
        match w.as_str() {
            "LEADING" => open[*i] = Some(*t),
            "FOLLOWING" | "STOPPING" => {
                if let Some(s) = open[*i].take() {
                    intervals.push((s, *t, *i));
                }
            }
            _ => {}
        }
    }
    if let Some(s) = open[first].take() {
        intervals.push((s, killed_at, first));
    }
    for (i, o) in open.iter().enumerate() {
        if let Some(s) = o {
            intervals.push((*s, u128::MAX, i));
        }
    }
    intervals.sort();
    for w in intervals.windows(2) {
        assert!(w[0].1 <= w[1].0, "two leaders at once: {w:?} (log {log:?})");
    }
    eprintln!("takeover after kill -9: {takeover} ms; after clean release: {fast} ms");
}
