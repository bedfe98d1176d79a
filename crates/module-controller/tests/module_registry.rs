//! A real `docker-registry` holding a module source: three modules over several versions and
//! release channels, plus hostile module images. Scanning reads the layout; installing a
//! release downloads, verifies, unpacks, checks the current settings and switches the link;
//! hostile images and settings the new schema refuses leave the active release untouched.

#[path = "support/fixtures.rs"]
mod support;

use api::module_config::ModuleConfigSpec;
use module_controller::apply::install;
use module_controller::install::Downloaded;
use module_controller::unpack::Limits;
use serde_json::json;
use support::{REPO, hostile_layer, module_image, raw_image, source};

fn config(settings: serde_json::Value) -> ModuleConfigSpec {
    ModuleConfigSpec {
        enabled: Some(true),
        version: Some(1),
        settings: Some(settings),
        ..Default::default()
    }
}

#[tokio::test]
async fn scan_reads_modules_channels_and_versions() {
    let s = source().await;
    assert_eq!(
        s.registry.modules().await.unwrap(),
        vec!["echo", "hello", "parca"]
    );
    let stable = s.registry.release("echo", "stable").await.unwrap();
    assert_eq!(stable.version.to_string(), "1.0.1");
    assert_eq!(stable.changelog, Some(json!({"features": ["echo v1.0.1"]})));
    assert!(stable.module_yaml.unwrap().contains("deckhouse: '>= 1.60'"));
    let alpha = s.registry.release("echo", "alpha").await.unwrap();
    assert_eq!(alpha.version.to_string(), "1.2.0");
    assert_ne!(
        alpha.digest, stable.digest,
        "the digest is the channel's checksum"
    );
    let mut versions = s.registry.versions("echo").await.unwrap();
    versions.sort();
    assert_eq!(versions, vec!["v1.0.0", "v1.0.1", "v1.1.0", "v1.2.0"]);
    let err = s
        .registry
        .release("hello", "alpha")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("GET hello/release:alpha manifest"), "{err}");
}

#[tokio::test]
async fn install_switches_releases_and_refuses_what_would_break() {
    let s = source().await;
    let dir = tempfile::tempdir().unwrap();
    let downloaded = Downloaded::open(dir.path()).unwrap();
    let limits = Limits::default();
    // Settings written for version 1 (`count`), converted to 2 (`replicas`) and defaulted.
    let current = config(json!({"count": 3}));
    let installed = install(
        &s.registry,
        &downloaded,
        "echo",
        "v1.0.1",
        "1.0.1",
        &current,
        limits,
    )
    .await
    .unwrap();
    assert_eq!(installed.values, json!({"replicas": 3, "mode": "fast"}));
    assert_eq!(installed.files.definition.weight, 910);
    let link = dir.path().join("modules/910-echo");
    assert_eq!(
        std::fs::read_link(&link).unwrap().to_str(),
        Some("../echo/v1.0.1")
    );
    assert_eq!(
        std::fs::read_to_string(link.join("templates/deployment.yaml")).unwrap(),
        "# echo v1.0.1\n"
    );
    assert_eq!(downloaded.active_version("echo").as_deref(), Some("1.0.1"));

    // v1.2.0 allows at most 2 replicas: not switched in, and the reason says why.
    let err = install(
        &s.registry,
        &downloaded,
        "echo",
        "v1.2.0",
        "1.2.0",
        &current,
        limits,
    )
    .await
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "validation failed: spec.settings are not valid (version 1 converted to 2):  1 error occurred: * echo.replicas should be less than or equal to 2  "
    );
    assert_eq!(downloaded.active_version("echo").as_deref(), Some("1.0.1"));
    assert!(!dir.path().join("echo/v1.2.0").exists());

    // With settings it accepts, it is switched in atomically.
    install(
        &s.registry,
        &downloaded,
        "echo",
        "v1.2.0",
        "1.2.0",
        &config(json!({"count": 2})),
        limits,
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_link(&link).unwrap().to_str(),
        Some("../echo/v1.2.0")
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join(".staging"))
            .unwrap()
            .count(),
        0,
        "staging is left empty"
    );
}

#[tokio::test]
async fn hostile_images_are_rejected_and_the_installed_version_stays() {
    let s = source().await;
    let dir = tempfile::tempdir().unwrap();
    let downloaded = Downloaded::open(dir.path()).unwrap();
    let current = ModuleConfigSpec::default();
    let good = module_image(&s.layout, "evil", "v1.0.0", 10);
    s.push
        .push_image(&format!("{REPO}/evil"), Some("v1.0.0"), &good)
        .await
        .unwrap();
    install(
        &s.registry,
        &downloaded,
        "evil",
        "v1.0.0",
        "1.0.0",
        &current,
        Limits::default(),
    )
    .await
    .unwrap();

    use tar::EntryType::{Char, Regular, Symlink};
    let huge = vec![7u8; 4096];
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "v1.0.1",
            hostile_layer(&[(
                "../../../etc/cron.d/evil",
                b"* * * * * root sh",
                Regular,
                "",
            )]),
            "layer entry \"../../../etc/cron.d/evil\" escapes the module directory: \"..\" component",
        ),
        (
            "v1.0.2",
            hostile_layer(&[("templates", b"", Symlink, "../../..")]),
            "layer entry \"templates\" escapes the module directory: symlink: it resolves outside the module directory",
        ),
        (
            "v1.0.3",
            hostile_layer(&[("etc", b"", Symlink, "/etc")]),
            "layer entry \"etc\" escapes the module directory: symlink to the absolute or empty path \"/etc\"",
        ),
        (
            "v1.0.4",
            hostile_layer(&[("big.bin", &huge, Regular, "")]),
            "file \"big.bin\" is 4096, more than the limit of 1024",
        ),
        (
            "v1.0.5",
            hostile_layer(&[("dev/kmsg", b"", Char, "")]),
            "layer entry \"dev/kmsg\" is a character device, which a module image may not contain",
        ),
    ];
    let limits = Limits {
        max_file_bytes: 1024,
        ..Limits::default()
    };
    for (tag, layer, message) in &cases {
        let image = raw_image(&s.layout, layer);
        s.push
            .push_image(&format!("{REPO}/evil"), Some(tag), &image)
            .await
            .unwrap();
        let err = install(&s.registry, &downloaded, "evil", tag, tag, &current, limits)
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(&err, message, "{tag}");
        assert_eq!(
            downloaded.active_version("evil").as_deref(),
            Some("1.0.0"),
            "{tag}"
        );
        assert!(!dir.path().join(format!("evil/{tag}")).exists(), "{tag}");
    }

    // Wrong digest: the registry serves other bytes than the manifest names.
    let image = raw_image(
        &s.layout,
        &hostile_layer(&[("ok.txt", b"harmless", Regular, "")]),
    );
    s.push
        .push_image(&format!("{REPO}/evil"), Some("v1.0.6"), &image)
        .await
        .unwrap();
    let hex = image.layers[0]
        .digest
        .trim_start_matches("sha256:")
        .to_owned();
    let data = s.upstream.storage_dir().join(format!(
        "docker/registry/v2/blobs/sha256/{}/{hex}/data",
        &hex[..2]
    ));
    let mut bytes = std::fs::read(&data).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&data, bytes).unwrap();
    let err = install(
        &s.registry,
        &downloaded,
        "evil",
        "v1.0.6",
        "1.0.6",
        &current,
        limits,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("reading evil:v1.0.6 layer sha256:"),
        "{err}"
    );
    assert!(err.to_lowercase().contains("digest"), "{err}");
    assert_eq!(downloaded.active_version("evil").as_deref(), Some("1.0.0"));
    assert_eq!(
        std::fs::read_dir(dir.path().join(".staging"))
            .unwrap()
            .count(),
        0
    );
}
