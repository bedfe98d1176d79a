//! `d8 mirror pull` and `d8 mirror push` of one platform release against `skopeo copy` of the
//! same images, sequentially and in parallel, in one run, with ratios.
//!
//! `cargo bench -p d8 --bench mirror` (needs docker-registry and skopeo). The release is
//! `BENCH_RELEASE_MB` MiB of layers (default 2048) over `BENCH_IMAGES` images (default 16),
//! each one layer of three quarters and one of a quarter of its share. Source and targets are
//! Debian's docker-registry over HTTPS; each push goes into a fresh, empty target.
//! `BENCH_PARALLEL` sets d8's `--parallel` for both (default: d8's own, 4); `BENCH_PUSH_ARGS`
//! adds flags to `d8 mirror push` (e.g. `--upload-chunk-size=64M`).

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use testkit::image::Layout as ImageLayout;
use testkit::push::Registry;
use testkit::skopeo::{Access, Copy};
use testkit::{Certs, ImageBuilder, Upstream, UpstreamOptions};

const D8: &str = env!("CARGO_BIN_EXE_d8");
const PREFIX: &str = "deckhouse/ee";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One image of the release: where it is in the source and in skopeo's local layouts.
struct Item {
    repository: String,
    digest: String,
    tag: String,
}

#[tokio::main]
async fn main() {
    let release_mb = env_u64("BENCH_RELEASE_MB", 2048).max(1);
    let count = env_u64("BENCH_IMAGES", 16).max(1);
    let parallel: Vec<String> = std::env::var("BENCH_PARALLEL")
        .ok()
        .map(|n| vec!["--parallel".into(), n])
        .unwrap_or_default();
    let push_args: Vec<String> = std::env::var("BENCH_PUSH_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let ca = Certs::new("bench mirror CA");
    let scratch = tempfile::tempdir().unwrap();
    let ca_file = scratch.path().join("ca.crt");
    ca.write_ca(&ca_file).unwrap();

    // The source: `count` component images, the release image listing them, a channel image.
    let source = Upstream::start(UpstreamOptions::default().tls(&ca)).await;
    let registry = Registry::of(&source);
    let images_dir = scratch.path().join("images");
    let images = ImageLayout::new(&images_dir).unwrap();
    let share = (release_mb << 20) / count;
    let mut items = Vec::new();
    let mut list = serde_json::Map::new();
    let mut blob_bytes = 0;
    for i in 0..count {
        let image = ImageBuilder::new(&format!("component-{i}"))
            .uncompressed()
            .layers(&[share - share / 4, share / 4])
            .build(&images);
        registry.push_image(PREFIX, None, &image).await.unwrap();
        blob_bytes += image.blob_bytes();
        list.insert(format!("component{i}"), image.digest().into());
        items.push(Item {
            repository: PREFIX.into(),
            digest: image.digest().into(),
            tag: format!("c{i}"),
        });
    }
    let list = serde_json::json!({ "common": list }).to_string();
    let root = ImageBuilder::new("deckhouse")
        .files(&[("deckhouse/modules/images_digests.json", list.as_bytes())])
        .build(&images);
    registry
        .push_image(PREFIX, Some("v1.0.0"), &root)
        .await
        .unwrap();
    let channel = ImageBuilder::new("release-channel")
        .files(&[("version.json", br#"{"version":"v1.0.0"}"#)])
        .build(&images);
    let channel_repo = format!("{PREFIX}/release-channel");
    registry
        .push_image(&channel_repo, Some("v1.0.0"), &channel)
        .await
        .unwrap();
    for (repository, image, tag) in [(PREFIX, &root, "root"), (&*channel_repo, &channel, "rc")] {
        blob_bytes += image.blob_bytes();
        items.push(Item {
            repository: repository.into(),
            digest: image.digest().into(),
            tag: tag.into(),
        });
    }
    std::fs::remove_dir_all(&images_dir).unwrap(); // the source holds them now
    let mib = blob_bytes as f64 / f64::from(1 << 20);
    println!(
        "release: {} images, {mib:.0} MiB of blobs; source and targets: docker-registry over HTTPS",
        items.len()
    );

    // Pull.
    let bundle = scratch.path().join("bundle");
    let d8_pull = timed(|| async {
        run_d8(
            &[
                "mirror".into(),
                "pull".into(),
                bundle.display().to_string(),
                "--source".into(),
                format!("{}/{PREFIX}", source.host()),
                "--tls-ca-file".into(),
                ca_file.display().to_string(),
                "--deckhouse-tag".into(),
                "v1.0.0".into(),
                "--no-modules".into(),
            ]
            .into_iter()
            .chain(parallel.clone())
            .collect::<Vec<_>>(),
            "d8 mirror pull",
        )
        .await
    })
    .await;
    // Access::of writes the CA into the upstream's scratch: once, not by every parallel copy.
    let source_access = Access::of(&source);
    let layouts = scratch.path().join("skopeo-seq");
    let seq_pull = timed(|| async {
        for item in &items {
            skopeo_pull(&source, &source_access, item, &layouts).await;
        }
    })
    .await;
    std::fs::remove_dir_all(&layouts).unwrap();
    let layouts = scratch.path().join("skopeo");
    let par_pull = timed(|| async {
        futures_util::future::join_all(
            items
                .iter()
                .map(|item| skopeo_pull(&source, &source_access, item, &layouts)),
        )
        .await;
    })
    .await;
    report("pull", mib, d8_pull, seq_pull, par_pull);

    // Push, each into an empty docker-registry.
    let mut target = Upstream::start(UpstreamOptions::default().tls(&ca)).await;
    let d8_push = timed(|| async {
        run_d8(
            &[
                "mirror".into(),
                "push".into(),
                bundle.display().to_string(),
                format!("{}/{PREFIX}", target.host()),
                "--tls-ca-file".into(),
                ca_file.display().to_string(),
            ]
            .into_iter()
            .chain(parallel.clone())
            .chain(push_args.clone())
            .collect::<Vec<_>>(),
            "d8 mirror push",
        )
        .await
    })
    .await;
    target.kill();
    drop(target);
    let mut target = Upstream::start(UpstreamOptions::default().tls(&ca)).await;
    let access = Access::of(&target);
    let seq_push = timed(|| async {
        for item in &items {
            skopeo_push(&target, &access, item, &layouts).await;
        }
    })
    .await;
    target.kill();
    drop(target);
    let target = Upstream::start(UpstreamOptions::default().tls(&ca)).await;
    let access = Access::of(&target);
    let par_push = timed(|| async {
        futures_util::future::join_all(
            items
                .iter()
                .map(|item| skopeo_push(&target, &access, item, &layouts)),
        )
        .await;
    })
    .await;
    report("push", mib, d8_push, seq_push, par_push);
}

async fn timed<F, Fut>(f: F) -> Duration
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let start = Instant::now();
    f().await;
    start.elapsed()
}

/// Runs `d8` with `--json` and prints where its time went (the phases it reports).
async fn run_d8(args: &[String], what: &str) {
    let out = tokio::process::Command::new(D8)
        .args(args)
        .arg("--json")
        .env_remove("SSL_CERT_FILE")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{what} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let phases: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "phase_end")
        .map(|v| {
            format!(
                "{} {:.2} s",
                v["phase"].as_str().unwrap_or("?"),
                v["seconds"].as_f64().unwrap_or(0.0)
            )
        })
        .collect();
    println!("  {what} phases: {}", phases.join(", "));
}

fn layout_of(layouts: &Path, item: &Item) -> PathBuf {
    layouts.join(&item.tag)
}

async fn skopeo_pull(source: &Upstream, access: &Access, item: &Item, layouts: &Path) {
    let dir = layout_of(layouts, item);
    std::fs::create_dir_all(&dir).unwrap();
    Copy::new(
        &format!(
            "docker://{}/{}@{}",
            source.host(),
            item.repository,
            item.digest
        ),
        &format!("oci:{}:v1", dir.display()),
    )
    .source_access(access.clone())
    .run()
    .await
    .expect_success("skopeo copy (pull)");
}

async fn skopeo_push(target: &Upstream, access: &Access, item: &Item, layouts: &Path) {
    Copy::new(
        &format!("oci:{}:v1", layout_of(layouts, item).display()),
        &format!(
            "docker://{}/{}:{}",
            target.host(),
            item.repository,
            item.tag
        ),
    )
    .destination_access(access.clone())
    .run()
    .await
    .expect_success("skopeo copy (push)");
}

fn report(what: &str, mib: f64, d8: Duration, sequential: Duration, parallel: Duration) {
    let rate = |d: Duration| mib / d.as_secs_f64();
    println!(
        "{what}: d8 mirror {:.2} s ({:.0} MiB/s); skopeo copy sequential {:.2} s ({:.0} MiB/s), parallel {:.2} s ({:.0} MiB/s); d8 is {:.2}x sequential skopeo, {:.2}x parallel skopeo",
        d8.as_secs_f64(),
        rate(d8),
        sequential.as_secs_f64(),
        rate(sequential),
        parallel.as_secs_f64(),
        rate(parallel),
        sequential.as_secs_f64() / d8.as_secs_f64(),
        parallel.as_secs_f64() / d8.as_secs_f64(),
    );
}
