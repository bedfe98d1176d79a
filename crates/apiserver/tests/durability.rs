//! Every acknowledged write survives `kill -9` of the server process.

#[path = "support/child.rs"]
mod child;
#[path = "support/common.rs"]
mod common;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The server process the durability test kills (run only through `child::spawn`).
#[tokio::test]
#[ignore = "helper: the server process the durability test kills"]
async fn child_server() {
    let dir = std::env::var("APISERVER_CHILD_DIR").expect("APISERVER_CHILD_DIR");
    common::init();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = apiserver::ApiServer::builder()
        .data_dir(&dir)
        .serve(listener)
        .await
        .unwrap();
    #[allow(clippy::print_stdout)]
    {
        println!("READY {}", server.admin_kubeconfig().display());
    }
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("APISERVER_CHILD_DIR", dir.path().display().to_string())];
    let mut server = child::spawn("child_server", &env);
    let kubeconfig = child::wait_line(&mut server, "READY ").await;
    let client = common::client_from(std::path::Path::new(&kubeconfig)).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let counter: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "counter"}, "data": {"v": "0"}}))
            .unwrap();
    api.create(&PostParams::default(), &counter).await.unwrap();

    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let last_count = Arc::new(Mutex::new(0u64));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (api, acked) = (api.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let name = format!("w{w}-{i}");
                let o: ConfigMap =
                    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
                match api.create(&PostParams::default(), &o).await {
                    Ok(_) => acked.lock().unwrap().push(name),
                    Err(_) => return,
                }
            }
        }));
    }
    {
        let (api, last) = (api.clone(), last_count.clone());
        writers.push(tokio::spawn(async move {
            for v in 1.. {
                let p = Patch::Merge(json!({"data": {"v": v.to_string()}}));
                match api.patch("counter", &PatchParams::default(), &p).await {
                    Ok(_) => *last.lock().unwrap() = v,
                    Err(_) => return,
                }
            }
        }));
    }
    // Let writes flow, then kill the server without warning.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.start_kill().unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .unwrap();
    for w in writers {
        tokio::time::timeout(Duration::from_secs(30), w)
            .await
            .unwrap()
            .unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let last = *last_count.lock().unwrap();
    assert!(
        acked.len() > 20 && last > 5,
        "the test wrote enough before the kill: {} creates, {last} updates",
        acked.len()
    );

    let mut server = child::spawn("child_server", &env);
    let kubeconfig = child::wait_line(&mut server, "READY ").await;
    let client = common::client_from(std::path::Path::new(&kubeconfig)).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let names: std::collections::HashSet<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let lost: Vec<&String> = acked.iter().filter(|n| !names.contains(*n)).collect();
    assert!(lost.is_empty(), "acknowledged creates lost: {lost:?}");
    let v: u64 = api.get("counter").await.unwrap().data.unwrap()["v"]
        .parse()
        .unwrap();
    // The last acknowledged update is there; at most one more (committed, not acknowledged).
    assert!(
        v == last || v == last + 1,
        "counter {v}, last acknowledged {last}"
    );
    server.start_kill().unwrap();
}
