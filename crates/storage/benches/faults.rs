//! The fault matrix of issue #25 through two pull-through caches side by side: the replica
//! (`d8 registry storage`, in process) and docker-registry's pull-through mode (CNCF
//! distribution, `proxy.remoteurl`), both in front of the same `FaultyUpstream` (testkit's proxy
//! in front of a docker-registry holding the image).
//!
//! Not a timed benchmark: the anchor that keeps the comparison visible. For each fault it prints
//! what a client got from each cache (right bytes, a clean error, a broken-off body, no answer
//! within the cell's limit, or — never acceptable — a complete wrong blob), what each kept on
//! disk, and whether the next fault-free pull was right.
//!
//! `cargo bench -p storage --bench faults` (needs `docker-registry`). `BENCH_FAULT_WAIT` sets the
//! seconds a client waits per pull (default 45: longer than the replica's default watchdogs, 30 s).

#![allow(clippy::print_stdout)]

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use sha2::Digest as _;
use testkit::{Fault, FaultyUpstream, ImageBuilder, Seen, Upstream, UpstreamOptions};

const LAYER: u64 = 2 << 20;

/// What one cache did with one fault.
struct Cell {
    first: String,
    took: Duration,
    after: String,
    kept: String,
}

async fn pull(
    http: &reqwest::Client,
    url: &str,
    digest: &str,
    wait: Duration,
) -> (String, Duration) {
    let started = Instant::now();
    let seen = tokio::time::timeout(wait, async {
        Seen::of(http.get(url).send().await, digest).await
    })
    .await;
    let took = started.elapsed();
    let text = match seen {
        Ok(seen) => seen.to_string(),
        Err(_) => format!("no answer in {}s", wait.as_secs()),
    };
    (text, took)
}

/// Files under `dir` whose path contains `part`.
fn files_under(dir: &Path, part: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().contains(part) {
                out.push(path);
            }
        }
    }
    out
}

/// distribution's disk: partial uploads left, and blobs that do not hash to their name.
fn distribution_disk(root: &Path) -> String {
    let uploads = files_under(root, "/_uploads/")
        .iter()
        .filter(|p| p.ends_with("data"))
        .count();
    let mut corrupt = 0;
    for data in files_under(root, "/blobs/sha256/") {
        if !data.ends_with("data") {
            continue;
        }
        let name = data
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bytes = std::fs::read(&data).unwrap_or_default();
        if hex::encode(sha2::Sha256::digest(&bytes)) != name {
            corrupt += 1;
        }
    }
    format!("{uploads} partial uploads, {corrupt} corrupt blobs")
}

fn replica_disk(store: &storage::Store) -> String {
    let tmp = std::fs::read_dir(store.root().join("tmp"))
        .map(|d| d.count())
        .unwrap_or(0);
    let removed = store
        .verify()
        .map(|r| r.removed.len())
        .unwrap_or(usize::MAX);
    format!("{tmp} partial files, {removed} corrupt blobs")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    testkit::install_crypto();
    let wait = Duration::from_secs(
        std::env::var("BENCH_FAULT_WAIT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(45),
    );
    let origin = Upstream::start(UpstreamOptions::default()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = testkit::image::Layout::new(dir.path()).expect("layout");
    let image = ImageBuilder::new("faults-anchor")
        .uncompressed()
        .layers(&[LAYER; Fault::MATRIX.len()])
        .build(&layout);
    testkit::push::Registry::of(&origin)
        .push_image("deckhouse/ee", Some("v1"), &image)
        .await
        .expect("push");

    // Each cache in front of its own faulty proxy, so one cache's pending requests never
    // meet the other's.
    let ours_faulty = FaultyUpstream::start(&origin, Fault::None).await;
    let theirs_faulty = FaultyUpstream::start(&origin, Fault::None).await;
    let data = tempfile::tempdir().expect("tempdir");
    // The replica as `d8 registry storage` runs it by default: a 30 s stall window and a
    // floor of 32 KiB per 30 s.
    let remote = registry_client::Client::new(registry_client::Config {
        min_throughput: Some(registry_client::MinThroughput::DEFAULT),
        ..registry_client::Config::default()
    })
    .remote(
        registry_client::Endpoint::from_url(&ours_faulty.url())
            .expect("endpoint")
            .path_prefix("deckhouse/ee"),
    )
    .expect("remote");
    let replica = storage::run::start(storage::run::Config {
        data_dir: data.path().join("store"),
        read_address: "127.0.0.1:0".parse().expect("address"),
        write_address: "127.0.0.1:0".parse().expect("address"),
        tls: None,
        read_accounts: storage::Accounts::open(),
        write_accounts: storage::Accounts::open(),
        upstream: Some(storage::Upstream {
            remote,
            prefix: "system/deckhouse".into(),
        }),
        limits: storage::Limits {
            budget: None,
            reserve: Some(0),
        },
        settings: storage::Settings::default(),
        node: "bench".into(),
        metrics_address: None,
    })
    .await
    .expect("replica");
    let distribution =
        Upstream::start(UpstreamOptions::default().proxy(&theirs_faulty.url(), None)).await;

    let http = testkit::http_client(None);
    let mut rows = Vec::new();
    for (fault, blob) in Fault::MATRIX.into_iter().zip(&image.layers) {
        let mut cells = Vec::new();
        for (faulty, url) in [
            (
                &ours_faulty,
                format!(
                    "http://{}/v2/system/deckhouse/blobs/{}",
                    replica.read_address, blob.digest
                ),
            ),
            (
                &theirs_faulty,
                format!(
                    "{}/v2/deckhouse/ee/blobs/{}",
                    distribution.url(),
                    blob.digest
                ),
            ),
        ] {
            faulty.set_fault(fault);
            let (first, took) = pull(&http, &url, &blob.digest, wait).await;
            faulty.set_fault(Fault::None);
            let (after, _) = pull(&http, &url, &blob.digest, wait).await;
            cells.push(Cell {
                first,
                took,
                after,
                kept: String::new(),
            });
        }
        cells[0].kept = replica_disk(replica.registry.store());
        cells[1].kept = distribution_disk(&distribution.storage_dir());
        eprintln!("{}: done", fault.name());
        rows.push((fault, cells));
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nfault matrix, {} MiB blobs, {}s per pull; disk after each row (cumulative)\n",
        LAYER >> 20,
        wait.as_secs()
    );
    let _ = writeln!(
        out,
        "| fault | d8 replica: first pull | next pull | disk | distribution pull-through: first pull | next pull | disk |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for (fault, cells) in &rows {
        let _ = writeln!(
            out,
            "| {} | {} ({:.1?}) | {} | {} | {} ({:.1?}) | {} | {} |",
            fault.name(),
            cells[0].first,
            cells[0].took,
            cells[0].after,
            cells[0].kept,
            cells[1].first,
            cells[1].took,
            cells[1].after,
            cells[1].kept,
        );
    }
    println!("{out}");
    replica.stop().await;
}
