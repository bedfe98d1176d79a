//! `d8 image build` / `d8 image push`: d8's own image, reproducible, pushed into a real registry
//! (Debian's `docker-registry`) and pulled by a real containerd.

use std::path::Path;
use std::process::Command;

use testkit::{Containerd, Upstream};

fn d8(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_d8"))
        .args(args)
        .output()
        .expect("run d8");
    assert!(
        output.status.success(),
        "d8 {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn build(dir: &Path) -> String {
    d8(&[
        "image",
        "build",
        "--binary",
        env!("CARGO_BIN_EXE_d8"),
        "--output",
        &dir.display().to_string(),
        "--tag",
        "test",
    ])
}

fn blob(dir: &Path, digest: &str) -> serde_json::Value {
    let hex = digest.strip_prefix("sha256:").unwrap();
    serde_json::from_slice(&std::fs::read(dir.join("blobs/sha256").join(hex)).unwrap()).unwrap()
}

#[tokio::test]
async fn the_image_is_reproducible_runs_as_non_root_and_containerd_pulls_what_d8_pushed() {
    let scratch = tempfile::tempdir().unwrap();
    let (a, b) = (scratch.path().join("a"), scratch.path().join("b"));
    let first = build(&a);
    let second = build(&b);
    assert!(first.starts_with("sha256:"), "{first}");
    assert_eq!(first, second, "the same binary gives the same digest");

    let manifest = blob(&a, &first);
    let config = blob(&a, manifest["config"]["digest"].as_str().unwrap());
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(config["config"]["Entrypoint"][0], "/usr/bin/d8");
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.title"],
        "d8"
    );
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        manifest["layers"].as_array().unwrap().len(),
        2,
        "base and binary"
    );

    let upstream = Upstream::start_plain().await;
    let reference = format!("{}/deckhouse/d8:test", upstream.host());
    let pushed = d8(&[
        "image",
        "push",
        &reference,
        "--insecure",
        "--binary",
        env!("CARGO_BIN_EXE_d8"),
        "--output",
        &scratch.path().join("c").display().to_string(),
    ]);
    assert_eq!(pushed, format!("{}/deckhouse/d8@{first}", upstream.host()));
    // A second push of the same build uploads nothing new and names the same digest.
    let again = d8(&[
        "image",
        "push",
        &reference,
        "--insecure",
        "--binary",
        env!("CARGO_BIN_EXE_d8"),
        "--output",
        &scratch.path().join("c").display().to_string(),
    ]);
    assert_eq!(again, pushed);

    let containerd = Containerd::start().await;
    containerd.use_upstream(&upstream);
    let outcome = containerd.pull(&reference).await;
    assert!(outcome.success, "{}\n{}", outcome.stderr, containerd.log());
    assert!(containerd.images().await.contains(&reference));
    let by_digest = format!("{}/deckhouse/d8@{first}", upstream.host());
    let outcome = containerd.pull(&by_digest).await;
    assert!(outcome.success, "{}", outcome.stderr);
}
