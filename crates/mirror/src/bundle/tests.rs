use super::*;
use crate::progress::{Mode, Progress};

fn phase() -> Phase {
    Progress::new(Mode::Quiet).phase("test", 0, 0)
}

/// A package `name` in `dir` holding one layout with the given blobs, chunked as asked.
fn write(dir: &Path, name: &str, blobs: &[Vec<u8>], chunk: Option<u64>) -> Vec<FileEntry> {
    let cas = dir.join("cas");
    std::fs::create_dir_all(&cas).unwrap();
    let writer = PackageWriter::new(dir, name, chunk);
    let mut builder = tar::Builder::new(writer);
    let mut sorted: Vec<(String, PathBuf, oci::Digest)> = blobs
        .iter()
        .map(|b| {
            let digest = oci::Digest::sha256(b);
            let path = cas.join(digest.encoded());
            std::fs::write(&path, b).unwrap();
            (crate::layout::blob_path("install", &digest), path, digest)
        })
        .collect();
    sorted.sort();
    for (path, source, digest) in &sorted {
        append_blob(&mut builder, path, source, *digest, true, &phase()).unwrap();
    }
    append_bytes(
        &mut builder,
        "install/index.json",
        br#"{"schemaVersion":2}"#,
    )
    .unwrap();
    builder.into_inner().unwrap().finish().unwrap()
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
fn a_cached_blob_that_changed_is_refused_while_packed() {
    let dir = tempfile::tempdir().unwrap();
    let digest = oci::Digest::sha256(b"layer");
    let source = dir.path().join("cached");
    std::fs::write(&source, b"layeR").unwrap();
    let mut builder = tar::Builder::new(Vec::new());
    let err = append_blob(&mut builder, "blobs/x", &source, digest, true, &phase()).unwrap_err();
    assert!(err.to_string().contains(&digest.to_string()), "{err}");
}
