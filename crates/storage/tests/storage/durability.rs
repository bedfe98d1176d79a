//! `kill -9` at arbitrary points of writing: the store reopens clean and every committed blob
//! verifies. The writer is this test binary re-executed as a child process.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oci::{Algorithm, Repository, Tag};
use storage::{Limits, Store};

const CHILD_ENV: &str = "STORAGE_KILL_CHILD_DIR";

/// The child: writes blobs, manifests and tags as fast as it can until killed.
#[test]
#[ignore = "run as a child process by kill_minus_nine_leaves_a_consistent_store"]
fn kill_child_writer() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = Store::open(
        std::path::Path::new(&dir),
        Limits {
            budget: None,
            reserve: Some(0),
        },
    )
    .expect("open");
    let repo = Repository::parse("system/deckhouse").expect("repo");
    let pid = std::process::id();
    for n in 0u64.. {
        let size = 64 * 1024 + (n % 7) as usize * 700_001;
        let seed = (n ^ u64::from(pid)).to_le_bytes();
        let data: Vec<u8> = (0..size).map(|i| seed[i % 8] ^ (i as u8)).collect();
        let mut writer = store.writer(Algorithm::Sha256, None).expect("writer");
        for chunk in data.chunks(128 << 10) {
            writer.write(chunk).expect("write");
        }
        let digest = writer.commit(None).expect("commit");
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{digest}","size":{size}}},"layers":[]}}"#
        );
        let tag = Tag::parse(&format!("t{}", n % 5)).expect("tag");
        store
            .put_manifest(
                &repo,
                manifest.as_bytes(),
                oci::media_type::OCI_MANIFEST,
                None,
                Some(&tag),
            )
            .expect("manifest");
    }
}

fn blob_files(dir: &std::path::Path) -> usize {
    fn walk(p: &std::path::Path) -> usize {
        std::fs::read_dir(p).map_or(0, |entries| {
            entries
                .flatten()
                .map(|e| {
                    let path = e.path();
                    if path.is_dir() { walk(&path) } else { 1 }
                })
                .sum()
        })
    }
    walk(&dir.join("blobs"))
}

#[tokio::test]
async fn kill_minus_nine_leaves_a_consistent_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let exe = std::env::current_exe().expect("current exe");
    let mut total_verified = 0;
    for round in 0..4u64 {
        let mut child = Command::new(&exe)
            .args([
                "durability::kill_child_writer",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let before = blob_files(&data);
        let deadline = Instant::now() + Duration::from_secs(30);
        while blob_files(&data) < before + 3 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // kill at a different point of the write cycle each round
        tokio::time::sleep(Duration::from_millis(7 * round + 3)).await;
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");

        let store = Store::open(
            &data,
            Limits {
                budget: None,
                reserve: Some(0),
            },
        )
        .expect("reopen");
        assert_eq!(
            std::fs::read_dir(data.join("tmp")).expect("tmp").count(),
            0,
            "round {round}: leftovers removed on open"
        );
        let report = store.verify().expect("verify");
        assert!(
            report.removed.is_empty(),
            "round {round}: every committed blob verifies; corrupt: {:?}",
            report.removed
        );
        assert!(
            report.verified as usize > before,
            "round {round}: the child wrote"
        );
        let usage = store.usage().expect("usage");
        let on_disk: u64 = store
            .blobs()
            .expect("blobs")
            .iter()
            .map(|d| store.blob_size(d).unwrap_or(0))
            .sum();
        assert_eq!(
            usage.used, on_disk,
            "round {round}: accounting matches the disk"
        );
        // every tag points at a manifest that is present and whose config is present
        let repo = Repository::parse("system/deckhouse").expect("repo");
        for tag in store.tags(&repo).expect("tags").unwrap_or_default() {
            let tag = Tag::parse(&tag).expect("tag");
            let digest = store.tag(&repo, &tag).expect("tag target");
            let manifest = store
                .manifest(&repo, &digest)
                .expect("read")
                .unwrap_or_else(|| panic!("round {round}: tag {tag} points at a missing manifest"));
            let parsed = oci::Manifest::parse(manifest.bytes, None).expect("parse");
            for d in parsed.references() {
                assert!(
                    store.blob_size(&d.digest).is_some(),
                    "round {round}: {}",
                    d.digest
                );
            }
        }
        total_verified = report.verified;
    }
    assert!(total_verified > 0);
}
