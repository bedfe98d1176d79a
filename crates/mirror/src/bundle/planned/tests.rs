use super::*;

/// The entries of a layout with a blob under a path longer than a tar header holds.
fn entries() -> (BTreeMap<String, Content>, BTreeMap<String, Vec<u8>>) {
    let mut contents = BTreeMap::new();
    let long_dir = format!("modules/{}/release", "x".repeat(90));
    for (i, size) in [0usize, 1, 511, 512, 513, 300_000].into_iter().enumerate() {
        let bytes: Vec<u8> = (0..size).map(|b| (b * 7 + i) as u8).collect();
        let digest = oci::Digest::sha256(&bytes);
        let dir = if i == 4 { long_dir.as_str() } else { "install" };
        contents.insert(crate::layout::blob_path(dir, &digest), bytes);
    }
    contents.insert(
        "install/index.json".into(),
        br#"{"schemaVersion":2}"#.to_vec(),
    );
    contents.insert(
        "oci-layout".into(),
        br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
    );
    let planned = contents
        .iter()
        .map(|(path, bytes)| {
            let content = if path.ends_with("index.json") || path.ends_with("oci-layout") {
                Content::Bytes(bytes.clone())
            } else {
                Content::Blob {
                    digest: oci::Digest::sha256(bytes),
                    size: bytes.len() as u64,
                }
            };
            (path.clone(), content)
        })
        .collect();
    (planned, contents)
}

/// What `tar::Builder` writes for the same entries.
fn reference(contents: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, bytes) in contents {
        builder
            .append_data(&mut header(bytes.len() as u64), path, bytes.as_slice())
            .unwrap();
    }
    builder.into_inner().unwrap()
}

/// Writes the package the way a pull does: the frame first, blobs in reverse order, then the
/// in-order hash.
fn write(dir: &Path, chunk: Option<u64>) -> (Plan, Vec<FileEntry>) {
    let (planned, contents) = entries();
    let plan = plan("platform", planned, chunk).unwrap();
    let (files, kept) = Files::open(dir, &plan, false).unwrap();
    assert!(!kept);
    files.write_frame(&plan).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let ready: Vec<bool> = plan
        .entries
        .iter()
        .map(|e| matches!(e.content, Content::Bytes(_)))
        .collect();
    for (i, entry) in plan.entries.iter().enumerate().rev() {
        if let Content::Blob { .. } = entry.content {
            files.write_at(entry.data, &contents[&entry.path]).unwrap();
            tx.send(i).unwrap();
        }
    }
    drop(tx);
    let digests = files.hash_in_order(&plan, ready, &rx).unwrap().unwrap();
    (plan.clone(), files.finish(digests).unwrap())
}

#[test]
fn a_planned_package_is_byte_for_byte_what_tar_writes() {
    let (_, contents) = entries();
    let expected = reference(&contents);
    let dir = tempfile::tempdir().unwrap();
    let (plan, files) = write(dir.path(), None);
    assert_eq!(plan.total, expected.len() as u64);
    assert_eq!(files.len(), 1);
    let written = std::fs::read(dir.path().join("platform.tar")).unwrap();
    assert!(written == expected, "the tar differs from tar::Builder's");
    assert_eq!(files[0].size, expected.len() as u64);
    assert_eq!(files[0].digest, oci::Digest::sha256(&expected).to_string());
    assert!(
        !dir.path().join(".platform.tar.partial").exists(),
        "renamed into place"
    );
}

#[test]
fn chunks_split_the_same_bytes_and_hash_each_file() {
    let (_, contents) = entries();
    let expected = reference(&contents);
    let dir = tempfile::tempdir().unwrap();
    let chunk = 100_000u64;
    let (_, files) = write(dir.path(), Some(chunk));
    assert_eq!(files.len() as u64, (expected.len() as u64).div_ceil(chunk));
    let mut joined = Vec::new();
    for (i, file) in files.iter().enumerate() {
        assert_eq!(file.name, chunk_name("platform", i));
        let bytes = std::fs::read(dir.path().join(&file.name)).unwrap();
        assert_eq!(file.size, bytes.len() as u64);
        assert_eq!(file.digest, oci::Digest::sha256(&bytes).to_string());
        joined.extend(bytes);
    }
    assert!(
        joined == expected,
        "the chunks joined differ from tar::Builder's"
    );
}

#[test]
fn the_hash_stops_when_an_entry_never_arrives() {
    let (planned, _) = entries();
    let plan = plan("platform", planned, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = Files::open(dir.path(), &plan, false).unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<usize>();
    drop(tx);
    let ready = vec![false; plan.entries.len()];
    assert_eq!(files.hash_in_order(&plan, ready, &rx).unwrap(), None);
}

#[test]
fn the_fingerprint_changes_with_the_layout_and_files_are_kept_only_at_their_size() {
    let (planned, _) = entries();
    let one = plan("platform", planned.clone(), None).unwrap();
    let chunked = plan("platform", planned.clone(), Some(1 << 20)).unwrap();
    let mut fewer = planned;
    fewer.remove("oci-layout");
    let other = plan("platform", fewer, None).unwrap();
    assert_ne!(one.fingerprint(), chunked.fingerprint());
    assert_ne!(one.fingerprint(), other.fingerprint());
    assert_eq!(one.fingerprint(), one.clone().fingerprint());

    let dir = tempfile::tempdir().unwrap();
    let (files, kept) = Files::open(dir.path(), &one, true).unwrap();
    assert!(!kept, "nothing to keep yet");
    files.write_at(0, b"abc").unwrap();
    drop(files);
    let (files, kept) = Files::open(dir.path(), &one, true).unwrap();
    assert!(kept);
    let mut buf = [0u8; 3];
    files.read_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"abc");
    drop(files);
    let (_, kept) = Files::open(dir.path(), &other, true).unwrap();
    assert!(!kept, "another size: started anew");
}
