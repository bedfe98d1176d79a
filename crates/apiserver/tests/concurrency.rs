//! Concurrent writers never lose an update: every conflict is a 409 and the history of the
//! object (observed through a watch) is a serial chain containing every operation once.

#[path = "support/child.rs"]
mod child;
#[path = "support/common.rs"]
mod common;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use proptest::prelude::*;
use serde_json::json;
use std::time::Duration;

fn log_of(c: &ConfigMap) -> Vec<String> {
    let l = c
        .data
        .as_ref()
        .and_then(|d| d.get("log"))
        .cloned()
        .unwrap_or_default();
    l.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Appends `ops` entries `id.N` to the log of `name` by read-modify-write; returns conflicts.
/// `merge` selects a merge patch with a resourceVersion precondition instead of a PUT.
async fn writer(api: Api<ConfigMap>, name: String, id: String, ops: usize, merge: bool) -> usize {
    let mut conflicts = 0;
    for op in 0..ops {
        loop {
            let cur = api.get(&name).await.unwrap();
            let mut log = log_of(&cur);
            log.push(format!("{id}.{op}"));
            let joined = log.join(",");
            let r = if merge {
                let rv = cur.metadata.resource_version.clone().unwrap();
                let p = Patch::Merge(
                    json!({"metadata": {"resourceVersion": rv}, "data": {"log": joined}}),
                );
                api.patch(&name, &PatchParams::default(), &p).await
            } else {
                let mut next = cur.clone();
                next.data = Some([("log".to_string(), joined)].into());
                api.replace(&name, &PostParams::default(), &next).await
            };
            match r {
                Ok(_) => break,
                Err(kube::Error::Api(e)) if e.code == 409 => conflicts += 1,
                Err(e) => panic!("a conflict must be a 409, got {e:?}"),
            }
        }
    }
    conflicts
}

/// Creates the ledger and returns the watch of its history from its creation.
async fn ledger(
    api: &Api<ConfigMap>,
    name: &str,
) -> impl futures_util::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + use<> {
    let o: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"log": ""}})).unwrap();
    let created = api.create(&PostParams::default(), &o).await.unwrap();
    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    api.watch(&wp, &created.metadata.resource_version.unwrap())
        .await
        .unwrap()
        .boxed()
}

/// Checks the watched history is a chain (each version = previous + one entry) holding
/// every operation exactly once, each writer's in order, and matching the final object.
async fn check_history(
    mut history: impl futures_util::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
    api: &Api<ConfigMap>,
    name: &str,
    writers: &[(String, usize)],
) {
    let total: usize = writers.iter().map(|(_, n)| n).sum();
    let mut prev: Vec<String> = Vec::new();
    for _ in 0..total {
        let ev = tokio::time::timeout(Duration::from_secs(10), history.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let WatchEvent::Modified(c) = ev else {
            panic!("unexpected {ev:?}")
        };
        let log = log_of(&c);
        assert_eq!(
            log.len(),
            prev.len() + 1,
            "each version adds exactly one entry"
        );
        assert_eq!(
            &log[..prev.len()],
            &prev[..],
            "no version loses an earlier entry"
        );
        prev = log;
    }
    let final_log = log_of(&api.get(name).await.unwrap());
    assert_eq!(final_log, prev);
    for (id, n) in writers {
        let mine: Vec<String> = final_log
            .iter()
            .filter(|e| e.starts_with(&format!("{id}.")))
            .cloned()
            .collect();
        let want: Vec<String> = (0..*n).map(|i| format!("{id}.{i}")).collect();
        assert_eq!(mine, want, "writer {id}: every op once, in order");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    #[test]
    fn concurrent_tasks_never_lose_updates(ops in proptest::collection::vec((1usize..6, any::<bool>()), 2..5)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let s = common::start().await;
            let api: Api<ConfigMap> = Api::namespaced(s.admin().await, "default");
            let history = ledger(&api, "ledger").await;
            let mut tasks = Vec::new();
            let mut writers = Vec::new();
            for (i, (n, merge)) in ops.iter().enumerate() {
                let id = format!("t{i}");
                writers.push((id.clone(), *n));
                tasks.push(tokio::spawn(writer(api.clone(), "ledger".into(), id, *n, *merge)));
            }
            for t in tasks {
                tokio::time::timeout(Duration::from_secs(60), t).await.unwrap().unwrap();
            }
            check_history(history, &api, "ledger", &writers).await;
        });
    }
}

/// A writer process (run only through `child::spawn`).
#[tokio::test]
#[ignore = "helper: a writer process of writers_in_three_processes_never_lose_updates"]
async fn child_writer() {
    let kc = std::env::var("WRITER_KUBECONFIG").expect("WRITER_KUBECONFIG");
    let id = std::env::var("WRITER_ID").unwrap();
    let ops: usize = std::env::var("WRITER_OPS").unwrap().parse().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(
        common::client_from(std::path::Path::new(&kc)).await,
        "default",
    );
    let conflicts = writer(api, "shared".into(), id.clone(), ops, id.ends_with('1')).await;
    #[allow(clippy::print_stdout)]
    {
        println!("DONE {conflicts}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_in_three_processes_never_lose_updates() {
    let s = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.admin().await, "default");
    let history = ledger(&api, "shared").await;
    const OPS: usize = 15;
    let kc = s.server.admin_kubeconfig().display().to_string();
    let mut children: Vec<_> = (0..3)
        .map(|i| {
            child::spawn(
                "child_writer",
                &[
                    ("WRITER_KUBECONFIG", kc.clone()),
                    ("WRITER_ID", format!("p{i}")),
                    ("WRITER_OPS", OPS.to_string()),
                ],
            )
        })
        .collect();
    let mut conflicts = 0;
    for c in &mut children {
        conflicts += child::wait_line(c, "DONE ").await.parse::<usize>().unwrap();
    }
    let writers: Vec<(String, usize)> = (0..3).map(|i| (format!("p{i}"), OPS)).collect();
    check_history(history, &api, "shared", &writers).await;
    eprintln!("3 processes × {OPS} ops: {conflicts} conflicts (409), no update lost");
}

/// Admission runs outside the store's write lock: a write whose validation hook is still
/// deciding holds back no other write, and the revisions follow the order of the commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_admission_holds_back_no_other_write() {
    use apiserver::{GroupVersionKind, Validator};
    use std::sync::{Mutex, mpsc};

    /// Holds the admission of the ConfigMap "slow" until told to go on.
    struct Slow {
        entered: Mutex<mpsc::Sender<()>>,
        go: Mutex<mpsc::Receiver<()>>,
    }
    impl Validator for Slow {
        fn validate(
            &self,
            _: &GroupVersionKind,
            _: Option<&serde_json::Value>,
            new: &serde_json::Value,
        ) -> Result<Vec<String>, apiserver::Denial> {
            if new["metadata"]["name"] == "slow" {
                let _ = self.entered.lock().unwrap().send(());
                let _ = self.go.lock().unwrap().recv();
            }
            Ok(Vec::new())
        }
    }

    let (entered_tx, entered) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    let s = common::start_with(|b| {
        b.validator(Slow {
            entered: Mutex::new(entered_tx),
            go: Mutex::new(go_rx),
        })
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(s.admin().await, "default");
    let cm = |name: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    };
    let slow = {
        let (api, cm) = (api.clone(), cm("slow"));
        tokio::spawn(async move { api.create(&PostParams::default(), &cm).await })
    };
    tokio::task::spawn_blocking(move || entered.recv().unwrap())
        .await
        .unwrap();
    // While "slow" is in admission, other writes go through (a guard against a hang, not a
    // measure of time).
    let fast = tokio::time::timeout(
        Duration::from_secs(60),
        api.create(&PostParams::default(), &cm("fast")),
    )
    .await
    .expect("a write is not held back by another's admission")
    .unwrap();
    go.send(()).unwrap();
    let slow = slow.await.unwrap().unwrap();
    let rv = |c: &ConfigMap| {
        c.metadata
            .resource_version
            .as_deref()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&fast) < rv(&slow), "committed first, lower revision");
}
