//! Shared fixtures: a real `docker-registry` holding a module source (three modules over
//! several versions and release channels) and hostile-image builders. The package controller's
//! tests include this file too (`crates/package-controller/tests/support/mod.rs`).

#![allow(dead_code, unreachable_pub, missing_debug_implementations)]

use std::io::Write;

use module_controller::registry::ModuleRegistry;
use serde_json::json;
use testkit::image::Layout;
use testkit::push::Registry;
use testkit::{Image, ImageBuilder, Upstream};

pub const REPO: &str = "deckhouse/ee/modules";

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

pub fn schema(max_replicas: u32) -> String {
    format!(
        "type: object\nx-config-version: 2\nproperties:\n  replicas:\n    type: integer\n    default: 1\n    maximum: {max_replicas}\n  mode:\n    type: string\n    default: fast\n"
    )
}

const CONVERSION_V2: &str = "version: 2\nconversions:\n  - .replicas = .count | del(.count)\n";

/// A module image as Deckhouse builds them.
pub fn module_image(layout: &Layout, module: &str, version: &str, max_replicas: u32) -> Image {
    let module_yaml = format!("name: {module}\nweight: 910\nstage: General Availability\n");
    let schema = schema(max_replicas);
    let template = format!("# {module} {version}\n");
    ImageBuilder::new(&format!("{module}-{version}"))
        .files(&[
            ("module.yaml", module_yaml.as_bytes()),
            ("openapi/config-values.yaml", schema.as_bytes()),
            ("openapi/conversions/v2.yaml", CONVERSION_V2.as_bytes()),
            ("templates/deployment.yaml", template.as_bytes()),
            (
                "version.json",
                format!("{{\"version\":\"{version}\"}}").as_bytes(),
            ),
        ])
        .build(layout)
}

pub fn release_image(layout: &Layout, module: &str, version: &str) -> Image {
    ImageBuilder::new(&format!("{module}-release-{version}"))
        .files(&[
            (
                "version.json",
                format!("{{\"version\":\"{version}\"}}").as_bytes(),
            ),
            (
                "changelog.yaml",
                format!("features:\n- {module} {version}\n").as_bytes(),
            ),
            (
                "module.yaml",
                format!("name: {module}\nrequirements:\n  deckhouse: '>= 1.60'\n").as_bytes(),
            ),
        ])
        .build(layout)
}

/// An image whose single layer is `layer` (hostile content the builder would refuse).
pub fn raw_image(layout: &Layout, layer: &[u8]) -> Image {
    let layer = layout.put(LAYER, layer).unwrap();
    let config = layout
        .put(
            "application/vnd.oci.image.config.v1+json",
            br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#,
        )
        .unwrap();
    let descriptor =
        |b: &testkit::Blob| json!({"mediaType": b.media_type, "digest": b.digest, "size": b.size});
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": descriptor(&config),
        "layers": [descriptor(&layer)],
    });
    let manifest = layout
        .put(
            "application/vnd.oci.image.manifest.v1+json",
            &serde_json::to_vec(&manifest).unwrap(),
        )
        .unwrap();
    Image {
        manifest,
        config,
        layers: vec![layer],
        platform: ("amd64".into(), "linux".into()),
    }
}

/// A gzip tar with raw headers: `(path, data, kind, link)`.
pub fn hostile_layer(entries: &[(&str, &[u8], tar::EntryType, &str)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data, kind, link) in entries {
        let mut h = tar::Header::new_old();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(*kind);
        let old = h.as_old_mut();
        old.name[..path.len()].copy_from_slice(path.as_bytes());
        old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_cksum();
        builder.append(&h, *data).unwrap();
    }
    let tar = builder.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    gz.finish().unwrap()
}

pub struct Source {
    pub upstream: Upstream,
    pub registry: ModuleRegistry,
    pub _dir: tempfile::TempDir,
    pub layout: Layout,
    pub push: Registry,
}

pub async fn source() -> Source {
    testkit::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start_plain().await;
    let push = Registry::of(&upstream);
    let layout = Layout::new(&dir.path().join("layout")).unwrap();
    // The tags of R are the module names.
    let marker = ImageBuilder::new("module-marker").build(&layout);
    for module in ["echo", "hello", "parca"] {
        push.push_image(REPO, Some(module), &marker).await.unwrap();
    }
    for (module, versions, channels) in [
        (
            "echo",
            vec!["v1.0.0", "v1.0.1", "v1.1.0", "v1.2.0"],
            vec![("stable", "v1.0.1"), ("alpha", "v1.2.0")],
        ),
        (
            "hello",
            vec!["v0.1.0", "v0.2.0"],
            vec![("stable", "v0.2.0")],
        ),
        (
            "parca",
            vec!["v2.0.0"],
            vec![("stable", "v2.0.0"), ("early-access", "v2.0.0")],
        ),
    ] {
        for v in &versions {
            // echo v1.2.0 tightens the schema: at most 2 replicas.
            let max = if module == "echo" && *v == "v1.2.0" {
                2
            } else {
                10
            };
            let image = module_image(&layout, module, v, max);
            push.push_image(&format!("{REPO}/{module}"), Some(v), &image)
                .await
                .unwrap();
            // Each release image under its version too, read for every step-by-step release.
            let release = release_image(&layout, module, v);
            push.push_image(&format!("{REPO}/{module}/release"), Some(v), &release)
                .await
                .unwrap();
        }
        for (channel, v) in channels {
            let image = release_image(&layout, module, v);
            push.push_image(&format!("{REPO}/{module}/release"), Some(channel), &image)
                .await
                .unwrap();
        }
    }
    let client = registry_client::Client::new(registry_client::Config::default());
    let spec = api::module_source::SourceRegistry {
        scheme: api::module_source::Scheme::Http,
        repo: format!("{}/{REPO}", upstream.host()),
        docker_cfg: None,
        ca: None,
    };
    let registry = ModuleRegistry::from_source(&client, &spec).unwrap();
    Source {
        upstream,
        registry,
        _dir: dir,
        layout,
        push,
    }
}
