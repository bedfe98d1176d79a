use super::*;
use crate::progress::{Mode, Progress};

fn phase() -> Phase {
    Progress::new(Mode::Quiet).phase("test", 0, 0)
}

/// A package `name` in `dir` holding one layout with the given blobs, chunked as asked, written
/// as a pull writes it.
fn write(dir: &Path, name: &str, blobs: &[Vec<u8>], chunk: Option<u64>) -> Vec<FileEntry> {
    use planned::Content;
    let mut entries: BTreeMap<String, Content> = blobs
        .iter()
        .map(|b| {
            let digest = oci::Digest::sha256(b);
            let size = b.len() as u64;
            (
                crate::layout::blob_path("install", &digest),
                Content::Blob { digest, size },
            )
        })
        .collect();
    entries.insert(
        "install/index.json".into(),
        Content::Bytes(br#"{"schemaVersion":2}"#.to_vec()),
    );
    let plan = planned::plan(name, entries, chunk).unwrap();
    let (files, _) = planned::Files::open(dir, &plan, false).unwrap();
    files.write_frame(&plan).unwrap();
    for entry in &plan.entries {
        if let Content::Blob { digest, .. } = entry.content {
            let blob = blobs
                .iter()
                .find(|b| oci::Digest::sha256(b) == digest)
                .unwrap();
            files.write_at(entry.data, blob).unwrap();
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    drop(tx);
    let ready = vec![true; plan.entries.len()];
    let digests = files.hash_in_order(&plan, ready, &rx).unwrap().unwrap();
    files.sync().unwrap();
    files.finish(digests).unwrap()
}

#[test]
fn chunked_packages_read_back_whole_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let blobs: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 300_000 + i as usize]).collect();
    let files = write(dir.path(), "platform", &blobs, Some(256 << 10));
    assert!(files.len() > 4, "{files:?}");
    assert_eq!(files[0].name, "platform.tar.0000.chunk");
    assert!(files.iter().rev().skip(1).all(|f| f.size == 256 << 10));

    let found = packages(dir.path()).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, "platform");
    assert_eq!(found[0].parts.len(), files.len());
    let expected = PackageManifest {
        name: "platform".into(),
        files: files.clone(),
        images: vec![],
        blobs: 5,
        blob_bytes: 0,
    };
    let scanned = scan(&found[0], Some(&expected), &phase()).unwrap();
    assert_eq!(
        scanned.small.get("install/index.json").map(Vec::as_slice),
        Some(&br#"{"schemaVersion":2}"#[..])
    );
    // Every blob can be read back at its offset, across chunk boundaries.
    for blob in &blobs {
        let digest = oci::Digest::sha256(blob);
        let entry = scanned.entries[&crate::layout::blob_path("install", &digest)];
        let mut buf = vec![0; entry.size as usize];
        found[0].read_at(entry.offset, &mut buf).unwrap();
        assert_eq!(&buf, blob);
    }
}

#[test]
fn a_corrupted_blob_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = vec![vec![7u8; 4096], vec![9u8; 8192]];
    write(dir.path(), "platform", &blobs, None);
    let package = &packages(dir.path()).unwrap()[0];
    let scanned = scan(package, None, &phase()).unwrap();
    let victim = oci::Digest::sha256(&blobs[1]);
    let entry = scanned.entries[&crate::layout::blob_path("install", &victim)];
    let mut bytes = std::fs::read(&package.parts[0].0).unwrap();
    bytes[(entry.offset + 100) as usize] ^= 0xff;
    std::fs::write(&package.parts[0].0, bytes).unwrap();
    let err = scan(package, None, &phase()).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::CorruptBlob { .. }), "{message}");
    assert!(message.contains(&victim.to_string()), "{message}");
    assert!(message.contains("platform.tar"), "{message}");
}

#[test]
fn a_missing_chunk_is_refused_against_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let blobs: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 200_000]).collect();
    let files = write(dir.path(), "module-a", &blobs, Some(128 << 10));
    std::fs::remove_file(dir.path().join(&files[2].name)).unwrap();
    let package = &packages(dir.path()).unwrap()[0];
    let expected = PackageManifest {
        name: "module-a".into(),
        files,
        images: vec![],
        blobs: 3,
        blob_bytes: 0,
    };
    let err = scan(package, Some(&expected), &phase()).unwrap_err();
    assert!(err.to_string().contains("chunk is missing"), "{err}");
}

#[test]
fn chunk_names_of_both_spellings_are_recognised() {
    assert_eq!(
        chunk_of("platform.tar.0003.chunk"),
        Some(("platform".into(), 3))
    );
    assert_eq!(
        chunk_of("module-x.tar.chunk012"),
        Some(("module-x".into(), 12))
    );
    assert_eq!(chunk_of("platform.tar.gz"), None);
    assert_eq!(chunk_of("platform.tar.chunk"), None);
    assert_eq!(blob_digest_of("a/b/blobs/sha256/zz"), None);
    let d = oci::Digest::sha256(b"x");
    assert_eq!(
        blob_digest_of(&format!("blobs/sha256/{}", d.encoded())),
        Some(d)
    );
}

#[test]
fn a_cached_blob_that_changed_is_refused_while_copied_in() {
    let dir = tempfile::tempdir().unwrap();
    let digest = oci::Digest::sha256(b"layer");
    let source = dir.path().join("cached");
    std::fs::write(&source, b"layeR").unwrap();
    let entries = BTreeMap::from([(
        "blobs/x".to_owned(),
        planned::Content::Blob { digest, size: 5 },
    )]);
    let plan = planned::plan("p", entries, None).unwrap();
    let (files, _) = planned::Files::open(dir.path(), &plan, false).unwrap();
    let at = plan.entries[0].data;
    let err = crate::pull::copy_in(&files, &source, at, 5, digest, true).unwrap_err();
    assert!(err.to_string().contains(&digest.to_string()), "{err}");
    crate::pull::copy_in(&files, &source, at, 5, digest, false).expect("trusted: not hashed");
}
