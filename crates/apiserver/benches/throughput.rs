//! Throughput of the embedded API server through kube-rs over HTTPS: creates/s, updates/s,
//! listing 10k objects, and watch delivery latency. Prints figures; not a timed test.
//!
//! Run: `cargo bench -p apiserver --bench throughput` (set `BENCH_N` to change sizes).
#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use std::time::{Duration, Instant};

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"bench": "yes"}}, "data": {"v": "0"}}),
    )
    .unwrap()
}

async fn concurrent<F, Fut>(total: usize, tasks: usize, f: F) -> Duration
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let mut hs = Vec::new();
    for t in 0..tasks {
        let f = f.clone();
        hs.push(tokio::spawn(async move {
            let mut i = t;
            while i < total {
                f(i).await;
                i += tasks;
            }
        }));
    }
    for h in hs {
        h.await.unwrap();
    }
    start.elapsed()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = apiserver::ApiServer::builder()
        .data_dir(dir.path())
        .serve(listener)
        .await
        .unwrap();
    let kc = kube::config::Kubeconfig::read_from(server.admin_kubeconfig()).unwrap();
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");

    // Watch latency: one watcher, sequential updates, time from acknowledged write to event.
    let rv = api
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("latency"))
        .await
        .unwrap();
    let _ = watch.next().await;
    let mut lat = Vec::new();
    for v in 1..=200 {
        let t = Instant::now();
        api.patch(
            "latency",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": v.to_string()}})),
        )
        .await
        .unwrap();
        let acked = t.elapsed();
        loop {
            if let Some(Ok(WatchEvent::Modified(_))) = watch.next().await {
                break;
            }
        }
        lat.push((t.elapsed(), acked));
    }
    lat.sort();
    let p = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)].0;
    let write_p50 = {
        let mut a: Vec<Duration> = lat.iter().map(|x| x.1).collect();
        a.sort();
        a[a.len() / 2]
    };

    for tasks in [1usize, 16] {
        let label = format!("c{tasks}-");
        let a = api.clone();
        let m = (n / 10).max(100);
        let d = concurrent(m, tasks, move |i| {
            let (a, name) = (a.clone(), format!("{label}{i}"));
            async move {
                a.create(&PostParams::default(), &cm(&name)).await.unwrap();
            }
        })
        .await;
        println!(
            "creates:   {m:>6} objects, {tasks:>2} clients: {:>7.0}/s",
            m as f64 / d.as_secs_f64()
        );
        let a = api.clone();
        let label = format!("c{tasks}-");
        let d = concurrent(m, tasks, move |i| {
            let (a, name) = (a.clone(), format!("{label}{i}"));
            async move {
                a.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"v": "1"}})),
                )
                .await
                .unwrap();
            }
        })
        .await;
        println!(
            "updates:   {m:>6} objects, {tasks:>2} clients: {:>7.0}/s",
            m as f64 / d.as_secs_f64()
        );
    }
    // Fill to n objects, then list them.
    let have = api.list(&ListParams::default()).await.unwrap().items.len();
    let a = api.clone();
    concurrent(n.saturating_sub(have), 16, move |i| {
        let a = a.clone();
        async move {
            a.create(&PostParams::default(), &cm(&format!("fill-{i}")))
                .await
                .unwrap();
        }
    })
    .await;
    let t = Instant::now();
    let all = api.list(&ListParams::default()).await.unwrap();
    let one = t.elapsed();
    let t = Instant::now();
    let mut paged = 0;
    let mut lp = ListParams::default().limit(500);
    loop {
        let page = api.list(&lp).await.unwrap();
        paged += page.items.len();
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    let pages = t.elapsed();
    let t = Instant::now();
    let sel = api
        .list(&ListParams::default().labels("bench=no"))
        .await
        .unwrap();
    let filtered = t.elapsed();
    println!(
        "list:      {:>6} objects in one request: {:>7.1} ms",
        all.items.len(),
        one.as_secs_f64() * 1e3
    );
    println!(
        "list:      {paged:>6} objects in pages of 500: {:>7.1} ms",
        pages.as_secs_f64() * 1e3
    );
    println!(
        "list:      label selector matching {} of {}: {:>7.1} ms",
        sel.items.len(),
        all.items.len(),
        filtered.as_secs_f64() * 1e3
    );
    println!(
        "watch:     write ack p50 {:.2} ms; write-to-event p50 {:.2} ms, p99 {:.2} ms (200 sequential updates)",
        write_p50.as_secs_f64() * 1e3,
        p(0.5).as_secs_f64() * 1e3,
        p(0.99).as_secs_f64() * 1e3
    );
    server.shutdown().await;
}
