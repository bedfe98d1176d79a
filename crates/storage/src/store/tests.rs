use super::*;

fn store(limits: Limits) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), limits).expect("open");
    (dir, store)
}

fn repo(s: &str) -> Repository {
    Repository::parse(s).expect("repo")
}

fn tmp_entries(store: &Store) -> usize {
    fs::read_dir(store.root().join("tmp")).expect("tmp").count()
}

#[test]
fn a_blob_is_visible_only_once_committed_and_verified() {
    let (_dir, store) = store(Limits {
        budget: None,
        reserve: Some(0),
    });
    let data = b"hello layer".repeat(1000);
    let digest = Digest::sha256(&data);
    let mut w = store.writer(Algorithm::Sha256, None).expect("writer");
    w.write(&data[..100]).expect("write");
    assert_eq!(
        store.blob_size(&digest),
        None,
        "partial content is never visible"
    );
    w.write(&data[100..]).expect("write");
    assert_eq!(w.commit(Some(digest)).expect("commit"), digest);
    assert_eq!(store.blob_size(&digest), Some(data.len() as u64));
    assert_eq!(
        store.read_blob(&digest, 1 << 20).expect("read"),
        Some(data.clone())
    );
    assert_eq!(tmp_entries(&store), 0);
    assert_eq!(store.usage().expect("usage").used, data.len() as u64);
}

#[test]
fn chunks_are_written_in_order_across_more_than_one_pwritev() {
    let (_dir, store) = store(Limits {
        budget: None,
        reserve: Some(0),
    });
    // a batch of more slices than one pwritev takes, empty chunks among them
    let chunks: Vec<Vec<u8>> = (0..2500u32)
        .map(|i| vec![i as u8; (i % 7) as usize])
        .collect();
    let data = chunks.concat();
    let digest = Digest::sha256(&data);
    let mut w = store.writer(Algorithm::Sha256, None).expect("writer");
    w.write(b"").expect("nothing to write");
    for part in [&chunks[..1500], &chunks[1500..]] {
        let mut batch = Batch::default();
        for chunk in part {
            batch.push(bytes::Bytes::copy_from_slice(chunk));
        }
        assert_eq!(batch.len(), part.iter().map(Vec::len).sum::<usize>());
        assert!(batch.is_full(), "256 chunks fill a batch, however small");
        w.write_batch(&batch).expect("write");
    }
    assert_eq!(w.len(), data.len() as u64);
    assert_eq!(w.commit(Some(digest)).expect("commit"), digest);
    assert_eq!(store.read_blob(&digest, 1 << 20).expect("read"), Some(data));
}

#[test]
fn a_mismatch_stores_nothing_and_leaves_no_temp_file() {
    let (_dir, store) = store(Limits {
        budget: None,
        reserve: Some(0),
    });
    let wrong = Digest::sha256(b"something else");
    let mut w = store.writer(Algorithm::Sha256, Some(5)).expect("writer");
    w.write(b"hello").expect("write");
    let err = w.commit(Some(wrong)).expect_err("mismatch");
    assert!(matches!(err, Error::DigestMismatch(_)), "{err}");
    assert_eq!(store.blob_size(&wrong), None);
    assert_eq!(store.blob_size(&Digest::sha256(b"hello")), None);
    assert_eq!(tmp_entries(&store), 0);
    let usage = store.usage().expect("usage");
    assert_eq!((usage.used, usage.pending), (0, 0), "reservation released");
}

#[test]
fn open_removes_leftovers_and_counts_committed_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let digest = {
        let store = Store::open(
            dir.path(),
            Limits {
                budget: None,
                reserve: Some(0),
            },
        )
        .expect("open");
        let d = store.put_bytes(b"committed", None).expect("put");
        // As if killed mid-write: a temporary file stays (a leaked writer would also leak the
        // store and its directory lock, which a killed process releases).
        fs::write(store.root().join("tmp/blob-killed"), b"half of something").expect("write");
        fs::create_dir(store.root().join("tmp/upload-x")).expect("dir");
        assert_eq!(tmp_entries(&store), 2);
        d
    };
    let store = Store::open(
        dir.path(),
        Limits {
            budget: None,
            reserve: Some(0),
        },
    )
    .expect("reopen");
    assert_eq!(tmp_entries(&store), 0);
    assert_eq!(store.usage().expect("usage").used, 9);
    assert_eq!(store.blob_size(&digest), Some(9));
}

#[test]
fn verify_removes_corrupt_blobs_only() {
    let (_dir, store) = store(Limits {
        budget: None,
        reserve: Some(0),
    });
    let good = store.put_bytes(b"good", None).expect("put");
    let bad = store.put_bytes(b"bad!", None).expect("put");
    fs::write(store.blob_path(&bad), b"evil").expect("corrupt");
    let report = store.verify().expect("verify");
    assert_eq!(report.verified, 1);
    assert_eq!(report.removed, vec![store.blob_path(&bad)]);
    assert!(store.blob_size(&good).is_some());
    assert!(store.blob_size(&bad).is_none());
}

#[test]
fn manifests_and_tags_per_repository() {
    let (_dir, store) = store(Limits {
        budget: None,
        reserve: Some(0),
    });
    let a = repo("system/deckhouse/a");
    let b = repo("system/deckhouse/b");
    let bytes = br#"{"schemaVersion":2}"#;
    let v1 = Tag::parse("v1").expect("tag");
    let d = store
        .put_manifest(&a, bytes, oci::media_type::OCI_MANIFEST, None, Some(&v1))
        .expect("put");
    assert_eq!(store.tag(&a, &v1), Some(d));
    assert_eq!(store.tag(&b, &v1), None);
    let m = store.manifest(&a, &d).expect("read").expect("present");
    assert_eq!(m.bytes, bytes);
    assert_eq!(m.media_type, oci::media_type::OCI_MANIFEST);
    assert_eq!(
        store.manifest(&b, &d).expect("read"),
        None,
        "not linked in b"
    );
    assert_eq!(store.tags(&a).expect("tags"), Some(vec!["v1".to_owned()]));
    assert_eq!(store.tags(&repo("nope")).expect("tags"), None);
    // a nested repository does not see the parent's tags
    let nested = repo("system/deckhouse/a/child");
    store
        .put_manifest(&nested, bytes, oci::media_type::OCI_MANIFEST, None, None)
        .expect("put nested");
    assert_eq!(store.tags(&a).expect("tags"), Some(vec!["v1".to_owned()]));
    assert!(store.delete_manifest(&a, &d).expect("delete"));
    assert_eq!(store.tag(&a, &v1), None, "tags pointing at it go too");
    assert!(store.blob_size(&d).is_some(), "content stays until GC");
}

#[test]
fn budget_refuses_writes_with_its_reason() {
    let (_dir, store) = store(Limits {
        budget: Some(1000),
        reserve: Some(0),
    });
    store.put_bytes(&[1u8; 600], None).expect("fits");
    let err = store
        .writer(Algorithm::Sha256, Some(600))
        .expect_err("over budget");
    assert!(
        matches!(
            err,
            Error::Refused {
                refusal: Refusal::BudgetExhausted,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("BudgetExhausted"), "{err}");
    // unknown size: refused when the write crosses the budget
    let mut w = store.writer(Algorithm::Sha256, None).expect("writer");
    w.write(&[2u8; 300]).expect("fits");
    let err = w.write(&[2u8; 300]).expect_err("crosses budget");
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    drop(w);
    assert_eq!(store.usage().expect("usage").pending, 0);
    assert_eq!(
        store.usage().expect("usage").refusal,
        None,
        "one more byte still fits"
    );
}

#[test]
fn reserve_refuses_writes() {
    let (_dir, store) = store(Limits {
        budget: None,
        reserve: Some(u64::MAX / 2),
    });
    let err = store.put_bytes(b"x", None).expect_err("reserve");
    assert!(
        matches!(
            err,
            Error::Refused {
                refusal: Refusal::ReserveExhausted,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        store.usage().expect("usage").refusal,
        Some(Refusal::ReserveExhausted)
    );
}

#[test]
fn completeness_is_counted_on_the_own_disk() {
    use registry_plan::expected::{Entry, ExpectedSet};
    let (_dir, store) = store(Limits {
        budget: None,
        reserve: Some(0),
    });
    let platform = repo("system/deckhouse");
    let v = Tag::parse("v1.60.3").expect("tag");
    let held = store.put_bytes(b"layer", None).expect("put");
    let absent = Digest::sha256(b"elsewhere");
    let set = ExpectedSet {
        entries: [
            Entry::Digest(held.to_string()),
            Entry::Digest(absent.to_string()),
        ]
        .into(),
    };
    let c = store.completeness(&platform, &set, Some(&v));
    assert_eq!((c.declared, c.held, c.full), (2, 1, false));
    store.put_bytes(b"elsewhere", None).expect("put");
    let c = store.completeness(&platform, &set, Some(&v));
    assert_eq!(
        (c.held, c.full),
        (2, false),
        "the deployed tag does not resolve yet"
    );
    store
        .put_manifest(
            &platform,
            br#"{"schemaVersion":2}"#,
            oci::media_type::OCI_MANIFEST,
            None,
            Some(&v),
        )
        .expect("manifest");
    assert!(store.completeness(&platform, &set, Some(&v)).full);
}

#[test]
fn a_second_writer_on_the_same_directory_is_refused_and_a_report_is_not() {
    let limits = Limits {
        budget: None,
        reserve: Some(0),
    };
    let (dir, store) = store(limits.clone());
    let mut writer = store.writer(Algorithm::Sha256, None).unwrap();
    writer.write(b"in progress").unwrap();

    let second = Store::open(dir.path(), limits.clone())
        .map(|_| ())
        .unwrap_err();
    assert!(
        second.to_string().contains("in use by another process"),
        "{second}"
    );
    assert_eq!(
        tmp_entries(&store),
        1,
        "the first writer's upload is untouched"
    );
    assert!(
        Store::inspect(dir.path()).is_ok(),
        "a read-only report may look"
    );

    drop(writer);
    drop(store);
    assert!(Store::open(dir.path(), limits).is_ok(), "free once closed");
}
