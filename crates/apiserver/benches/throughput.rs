//! Throughput of the embedded API server through kube-rs over HTTPS: creates/s, updates/s,
//! listing 10k objects, and watch delivery latency, alone and while 16 clients write. Prints
//! figures; not a timed test.
//!
//! Run: `cargo bench -p apiserver --bench throughput` (set `BENCH_N` to change sizes;
//! `BENCH_SCALE=1` adds the scale row: memory, list and watch latency at 10k, 50k and 100k
//! objects, or the sizes `BENCH_SCALE` lists, comma-separated).
#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The resident memory of this process (server and clients), KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Write-to-event latency of `probes` sequential updates of one object while `writers`
/// clients update other objects as fast as they can; one watcher sees every event. Returns
/// (send → event, send → acknowledgement) latencies, sorted, and the writers' updates/s.
async fn watch_under_load(
    api: &Api<ConfigMap>,
    probes: usize,
    writers: usize,
) -> (Vec<Duration>, Vec<Duration>, f64) {
    for w in 0..writers {
        let _ = api
            .create(&PostParams::default(), &cm(&format!("load-{w}")))
            .await;
    }
    let _ = api.create(&PostParams::default(), &cm("probe")).await;
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
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut load = Vec::new();
    for w in 0..writers {
        let (a, stop) = (api.clone(), stop.clone());
        load.push(tokio::spawn(async move {
            let name = format!("load-{w}");
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                a.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"v": n.to_string()}})),
                )
                .await
                .unwrap();
            }
            n
        }));
    }
    let mut event = Vec::new();
    let mut ack = Vec::new();
    for v in 1..=probes {
        let t = Instant::now();
        let want = format!("p{v}");
        let (pp, patch) = (
            PatchParams::default(),
            Patch::Merge(json!({"data": {"v": want}})),
        );
        let write = api.patch("probe", &pp, &patch);
        let seen = async {
            loop {
                if let Some(Ok(WatchEvent::Modified(o))) = watch.next().await
                    && o.metadata.name.as_deref() == Some("probe")
                    && o.data.as_ref().and_then(|d| d.get("v")) == Some(&want)
                {
                    return t.elapsed();
                }
            }
        };
        let (w, e) = tokio::join!(
            async {
                write.await.unwrap();
                t.elapsed()
            },
            seen
        );
        ack.push(w);
        event.push(e);
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for h in load {
        total += h.await.unwrap();
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    event.sort();
    ack.sort();
    (event, ack, rate)
}

/// How many objects the namespace holds, from one page of one (`remainingItemCount`).
async fn count(api: &Api<ConfigMap>) -> usize {
    let page = api.list(&ListParams::default().limit(1)).await.unwrap();
    page.items.len() + page.metadata.remaining_item_count.unwrap_or(0) as usize
}

/// The floor of every commit: `n` writes of 4 KiB, each followed by fdatasync, in `dir`.
fn fsync_latency(dir: &std::path::Path, n: usize) -> Vec<Duration> {
    use std::io::Write as _;
    let mut f = std::fs::File::create(dir.join("fsync-probe")).unwrap();
    let mut lat: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f.write_all(&[7u8; 4096]).unwrap();
            f.sync_data().unwrap();
            t.elapsed()
        })
        .collect();
    drop(f);
    let _ = std::fs::remove_file(dir.join("fsync-probe"));
    lat.sort();
    lat
}

/// Fills the namespace up to `n` objects with 16 clients.
async fn fill(api: &Api<ConfigMap>, n: usize) {
    let have = count(api).await;
    let a = api.clone();
    concurrent(n.saturating_sub(have), 16, move |i| {
        let a = a.clone();
        async move {
            a.create(&PostParams::default(), &cm(&format!("fill-{have}-{i}")))
                .await
                .unwrap();
        }
    })
    .await;
}

/// Times one list of everything as bytes (the server's work and the transfer, no decoding by
/// the client); returns (bytes, time).
async fn raw_list(client: &kube::Client) -> (usize, Duration) {
    use http_body_util::BodyExt as _;
    let t = Instant::now();
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .body(kube::client::Body::empty())
        .unwrap();
    let body = client
        .send(req)
        .await
        .unwrap()
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes();
    (body.len(), t.elapsed())
}

/// Times one list of everything and one paged list (pages of 500); returns (objects, one, paged).
async fn time_lists(api: &Api<ConfigMap>) -> (usize, Duration, Duration) {
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
    assert_eq!(paged, all.items.len(), "the pages hold the whole list");
    (all.items.len(), one, t.elapsed())
}

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
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

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
    fill(&api, n).await;
    let (listed, one, pages) = time_lists(&api).await;
    let (bytes, raw) = raw_list(&client).await;
    let t = Instant::now();
    let sel = api
        .list(&ListParams::default().labels("bench=no"))
        .await
        .unwrap();
    let filtered = t.elapsed();
    println!(
        "list:      {listed:>6} objects in one request: {:>7.1} ms",
        one.as_secs_f64() * 1e3
    );
    println!(
        "list:      {listed:>6} objects in one request, bytes only ({:.1} MiB, not decoded): {:>7.1} ms",
        bytes as f64 / 1048576.0,
        ms(raw)
    );
    println!(
        "list:      {listed:>6} objects in pages of 500: {:>7.1} ms",
        pages.as_secs_f64() * 1e3
    );
    println!(
        "list:      label selector matching {} of {}: {:>7.1} ms",
        sel.items.len(),
        listed,
        filtered.as_secs_f64() * 1e3
    );
    println!(
        "watch:     write ack p50 {:.2} ms; write-to-event p50 {:.2} ms, p99 {:.2} ms (200 sequential updates)",
        write_p50.as_secs_f64() * 1e3,
        p(0.5).as_secs_f64() * 1e3,
        p(0.99).as_secs_f64() * 1e3
    );
    let fsync = {
        let d = dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || fsync_latency(&d, 100))
            .await
            .unwrap()
    };
    println!(
        "disk:      4 KiB write + fdatasync p50 {:.2} ms, p99 {:.2} ms (100; the floor of a commit)",
        ms(quantile(&fsync, 0.5)),
        ms(quantile(&fsync, 0.99)),
    );
    let (event, ack, rate) = watch_under_load(&api, 200, 16).await;
    println!(
        "watch:     under load (16 clients updating, {rate:.0}/s): write ack p50 {:.2} ms, p99 {:.2} ms; write-to-event p50 {:.2} ms, p99 {:.2} ms (200 probes)",
        ms(quantile(&ack, 0.5)),
        ms(quantile(&ack, 0.99)),
        ms(quantile(&event, 0.5)),
        ms(quantile(&event, 0.99)),
    );
    if let Ok(sizes) = std::env::var("BENCH_SCALE") {
        scale(&api, &client, &sizes, dir.path()).await;
    }
    server.shutdown().await;
}

/// The scale row: memory, database size, list and watch latency as the store grows.
async fn scale(api: &Api<ConfigMap>, client: &kube::Client, sizes: &str, data: &std::path::Path) {
    let sizes: Vec<usize> = match sizes {
        "1" | "" => vec![10_000, 50_000, 100_000],
        s => s.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
    };
    let db_bytes = || -> u64 {
        std::fs::read_dir(data)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| e.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    };
    println!(
        "scale:     objects | fill/s | RSS MiB | KiB/object (RSS, db) | list one | list bytes only | list paged | watch p50/p99 (sequential)"
    );
    let mut prev: Option<(usize, u64, Duration)> = None;
    for n in sizes {
        let have = count(api).await;
        let t = Instant::now();
        fill(api, n).await;
        let fill_rate = n.saturating_sub(have) as f64 / t.elapsed().as_secs_f64();
        let rss = rss_kib();
        let (listed, one, paged) = time_lists(api).await;
        let (_, raw) = raw_list(client).await;
        let (event, _, _) = watch_under_load(api, 100, 0).await;
        println!(
            "scale:     {listed:>7} | {fill_rate:>6.0} | {:>7.1} | {:>5.2}, {:>5.2} | {:>7.1} ms | {:>7.1} ms | {:>7.1} ms | {:.2}/{:.2} ms",
            rss as f64 / 1024.0,
            rss as f64 / listed as f64,
            db_bytes() as f64 / 1024.0 / listed as f64,
            ms(one),
            ms(raw),
            ms(paged),
            ms(quantile(&event, 0.5)),
            ms(quantile(&event, 0.99)),
        );
        if let Some((pn, prss, pone)) = prev {
            println!(
                "scale:     growth x{:.1} objects: RSS x{:.2}, list x{:.2}",
                listed as f64 / pn as f64,
                rss as f64 / prss as f64,
                one.as_secs_f64() / pone.as_secs_f64()
            );
        }
        prev = Some((listed, rss, one));
    }
}
