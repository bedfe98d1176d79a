use std::io::Write;

use super::*;

/// One tar entry, written with raw header bytes so that hostile names survive.
enum E<'a> {
    File(&'a str, &'a [u8], u32),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    Hard(&'a str, &'a str),
    Special(&'a str, tar::EntryType),
}

fn tar_of(entries: &[E<'_>]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_old();
        let (path, data, kind, mode, link): (&str, &[u8], tar::EntryType, u32, Option<&str>) =
            match e {
                E::File(p, d, m) => (p, d, tar::EntryType::Regular, *m, None),
                E::Dir(p) => (p, b"", tar::EntryType::Directory, 0o755, None),
                E::Symlink(p, t) => (p, b"", tar::EntryType::Symlink, 0o777, Some(t)),
                E::Hard(p, t) => (p, b"", tar::EntryType::Link, 0o644, Some(t)),
                E::Special(p, k) => (p, b"", *k, 0o644, None),
            };
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_entry_type(kind);
        let old = h.as_old_mut();
        old.name[..path.len()].copy_from_slice(path.as_bytes());
        if let Some(link) = link {
            old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        h.set_cksum();
        builder.append(&h, data).unwrap();
    }
    builder.into_inner().unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn unpack(layers: &[Vec<u8>], limits: &Limits) -> (tempfile::TempDir, Result<Unpacked, Error>) {
    let outer = tempfile::tempdir().unwrap();
    std::fs::create_dir(outer.path().join("root")).unwrap();
    let root = outer.path().join("root");
    let mut stats = Unpacked::default();
    let result = layers
        .iter()
        .try_for_each(|l| unpack_layer(l.as_slice(), &root, limits, &mut stats))
        .and_then(|()| check_symlinks(&root, &stats))
        .map(|()| stats);
    (outer, result)
}

#[test]
fn a_normal_module_unpacks_with_owner_permissions() {
    let layer = gzip(&tar_of(&[
        E::Dir("./"),
        E::File("./module.yaml", b"name: echo\n", 0o644),
        E::Dir("templates"),
        E::File("templates/deploy.yaml", b"kind: Deployment\n", 0o666),
        E::File("hooks/run.sh", b"#!/bin/sh\n", 0o4755),
        E::Symlink("templates/link.yaml", "deploy.yaml"),
        E::Symlink("hooks/lib", "../templates"),
        E::Hard("templates/copy.yaml", "templates/deploy.yaml"),
    ]));
    let (dir, result) = unpack(&[layer], &Limits::default());
    let stats = result.unwrap();
    let root = dir.path().join("root");
    assert_eq!(
        std::fs::read(root.join("module.yaml")).unwrap(),
        b"name: echo\n"
    );
    assert_eq!(
        std::fs::read(root.join("templates/link.yaml")).unwrap(),
        b"kind: Deployment\n"
    );
    assert_eq!(
        std::fs::read(root.join("templates/copy.yaml")).unwrap(),
        b"kind: Deployment\n"
    );
    assert_eq!(
        std::fs::read(root.join("hooks/lib/deploy.yaml")).unwrap(),
        b"kind: Deployment\n"
    );
    let mode = |p: &str| {
        std::fs::metadata(root.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("templates/deploy.yaml"), 0o600);
    assert_eq!(
        mode("hooks/run.sh"),
        0o700,
        "setuid and group/other bits are cut"
    );
    assert_eq!(mode("templates"), 0o700);
    assert_eq!(stats.bytes, 11 + 17 + 10 + 17);
}

#[test]
fn hostile_layers_are_refused_with_a_clear_message() {
    let limits = Limits {
        max_file_bytes: 1000,
        max_total_bytes: 1500,
        max_entries: 20,
        max_layer_bytes: 1 << 20,
    };
    let big = vec![0u8; 1001];
    let half = vec![0u8; 800];
    let cases: Vec<(&str, Vec<Vec<u8>>, &str)> = vec![
        ("traversal", vec![tar_of(&[E::File("../evil", b"x", 0o644)])],
            "layer entry \"../evil\" escapes the module directory: \"..\" component"),
        ("nested traversal", vec![tar_of(&[E::File("a/../../evil", b"x", 0o644)])],
            "layer entry \"a/../../evil\" escapes the module directory: \"..\" component"),
        ("absolute", vec![tar_of(&[E::File("/etc/passwd", b"x", 0o644)])],
            "layer entry \"/etc/passwd\" escapes the module directory: absolute path"),
        ("absolute symlink", vec![tar_of(&[E::Symlink("etc", "/etc")])],
            "layer entry \"etc\" escapes the module directory: symlink to the absolute or empty path \"/etc\""),
        ("relative escaping symlink", vec![tar_of(&[E::Dir("a"), E::Symlink("a/up", "../..")])],
            "layer entry \"a/up\" escapes the module directory: symlink: it resolves outside the module directory"),
        ("write through symlink", vec![tar_of(&[E::Symlink("s", "."), E::File("s/x", b"x", 0o644)])],
            "layer entry \"s/x\" escapes the module directory: its parent \"s\" is a symlink"),
        ("symlink loop escape", vec![tar_of(&[E::Dir("x"), E::Symlink("x/a", "."), E::Symlink("x/l", "a/../../..")])],
            "layer entry \"x/l\" escapes the module directory: symlink: it resolves outside the module directory"),
        ("escape across layers", vec![
            tar_of(&[E::Symlink("ok", "data")]),
            tar_of(&[E::Dir("data"), E::Symlink("data", "..")]),
        ], "escapes the module directory: symlink: it resolves outside the module directory"),
        ("hard link outside", vec![tar_of(&[E::Hard("x", "../../etc/shadow")])],
            "layer entry \"x\" escapes the module directory: hard link to \"../../etc/shadow\""),
        ("char device", vec![tar_of(&[E::Special("dev/null", tar::EntryType::Char)])],
            "layer entry \"dev/null\" is a character device, which a module image may not contain"),
        ("block device", vec![tar_of(&[E::Special("sda", tar::EntryType::Block)])],
            "layer entry \"sda\" is a block device, which a module image may not contain"),
        ("fifo", vec![tar_of(&[E::Special("pipe", tar::EntryType::Fifo)])],
            "layer entry \"pipe\" is a FIFO, which a module image may not contain"),
        ("huge file", vec![gzip(&tar_of(&[E::File("big.bin", &big, 0o644)]))],
            "file \"big.bin\" is 1001, more than the limit of 1000"),
        ("huge total", vec![tar_of(&[E::File("a", &half, 0o644), E::File("b", &half, 0o644)])],
            "the unpacked module is 1600, more than the limit of 1500"),
        ("too many entries", vec![tar_of(&(0..21).map(|_| E::Dir("d")).collect::<Vec<_>>())],
            "the number of entries is 21, more than the limit of 20"),
        ("not a tar", vec![gzip(b"this is not a tar archive at all, but it is long enough to be read as a header block by the tar reader ......................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................")],
            "layer is not a tar archive"),
    ];
    for (name, layers, message) in cases {
        let (_dir, result) = unpack(&layers, &limits);
        let err = result.err().unwrap_or_else(|| panic!("{name}: accepted"));
        assert!(err.to_string().contains(message), "{name}: {err}");
    }
}

#[test]
fn whiteouts_remove_earlier_files() {
    let first = tar_of(&[
        E::File("a/x", b"1", 0o644),
        E::File("a/y", b"2", 0o644),
        E::File("b", b"3", 0o644),
    ]);
    let second = tar_of(&[
        E::File(".wh.b", b"", 0o644),
        E::File("a/.wh..wh..opq", b"", 0o644),
        E::File("a/z", b"4", 0o644),
    ]);
    let (dir, result) = unpack(&[first, second], &Limits::default());
    result.unwrap();
    let root = dir.path().join("root");
    assert!(!root.join("b").exists());
    assert!(!root.join("a/x").exists());
    assert_eq!(std::fs::read(root.join("a/z")).unwrap(), b"4");
}

#[test]
fn small_files_are_read_from_the_layer_root() {
    let layer = gzip(&tar_of(&[
        E::File("version.json", b"{\"version\":\"v1.2.3\"}", 0o644),
        E::File("sub/module.yaml", b"no", 0o644),
        E::File("./changelog.yaml", b"features: []\n", 0o644),
    ]));
    let files = read_files(
        layer.as_slice(),
        &["version.json", "changelog.yaml", "module.yaml"],
        100,
    )
    .unwrap();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["version.json", "changelog.yaml"]);
    let err = read_files(
        tar_of(&[E::File("../version.json", b"{}", 0o644)]).as_slice(),
        &["version.json"],
        100,
    )
    .unwrap_err();
    assert!(matches!(err, Error::Escape { .. }), "{err}");
    let err = read_files(
        tar_of(&[E::File("version.json", &[b' '; 101], 0o644)]).as_slice(),
        &["version.json"],
        100,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "file \"version.json\" is 101, more than the limit of 100"
    );
}
