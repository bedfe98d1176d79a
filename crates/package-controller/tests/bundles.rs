//! Hostile package bundles: an Application's bundle `R/<package>:<version>` is downloaded
//! and unpacked as module images are — verified digests, safe unpacking — so a bundle with a
//! path escaping its directory or a layer whose bytes do not match its digest is refused, the
//! Application says why, and nothing is installed or written outside the bundle directory.

use std::io::Write;

use api::packages::{
    Application, ApplicationSpec, PackageRegistry, PackageRepository, PackageRepositorySpec,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use package_controller::controller::{Controller, Options};
use serde_json::json;
use testkit::image::{Image, Layout};
use testkit::push::Registry;
use testkit::{Cluster, ImageBuilder, Upstream};

const REPO: &str = "packages";

/// A gzip tar with raw headers, so that hostile paths survive.
fn hostile_layer(path: &str, data: &[u8]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_old();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
    h.set_cksum();
    builder.append(&h, data).unwrap();
    let tar = builder.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    gz.finish().unwrap()
}

/// An image whose single layer is `layer`.
fn raw_image(layout: &Layout, layer: &[u8]) -> Image {
    let layer = layout
        .put("application/vnd.oci.image.layer.v1.tar+gzip", layer)
        .unwrap();
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

/// Package `evil` `version`: a good version image, `bundle` as the bundle.
async fn push_evil(push: &Registry, layout: &Layout, version: &str, bundle: &Image) {
    let marker = ImageBuilder::new("evil-marker").build(layout);
    push.push_image(REPO, Some("evil"), &marker).await.unwrap();
    let package_yaml = "name: evil\ntype: Application\ndescription: {en: Evil}\ncategory: Misc\nstage: General Availability\n";
    let meta = ImageBuilder::new(&format!("evil-meta-{version}"))
        .files(&[("package.yaml", package_yaml.as_bytes())])
        .build(layout);
    push.push_image(&format!("{REPO}/evil/version"), Some(version), &meta)
        .await
        .unwrap();
    push.push_image(&format!("{REPO}/evil"), Some(version), bundle)
        .await
        .unwrap();
}

async fn installed_message(client: &Client) -> (String, String, Option<String>) {
    let app = Api::<Application>::namespaced(client.clone(), "e")
        .get("shop")
        .await
        .unwrap();
    let status = app.status.unwrap_or_default();
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Installed")
        .cloned()
        .unwrap();
    (
        c.status,
        c.message,
        status.current_version.and_then(|v| v.version),
    )
}

#[tokio::test]
async fn hostile_bundles_are_refused_as_module_images_are() {
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(&dir.path().join("layout")).unwrap();
    let push = Registry::of(&upstream);
    // v1.0.0: an entry climbing out of the bundle directory.
    let traversal = raw_image(
        &layout,
        &hostile_layer("../../../escaped.yaml", b"kind: ConfigMap\n"),
    );
    push_evil(&push, &layout, "v1.0.0", &traversal).await;
    // v1.0.1: the registry serves other bytes than the manifest names.
    let corrupt = raw_image(
        &layout,
        &hostile_layer(
            "Chart.yaml",
            b"apiVersion: v2\nname: evil\nversion: 0.1.0\n",
        ),
    );
    push_evil(&push, &layout, "v1.0.1", &corrupt).await;
    let hex = corrupt.layers[0]
        .digest
        .trim_start_matches("sha256:")
        .to_owned();
    let data = upstream.storage_dir().join(format!(
        "docker/registry/v2/blobs/sha256/{}/{hex}/data",
        &hex[..2]
    ));
    let mut bytes = std::fs::read(&data).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&data, bytes).unwrap();

    Api::<PackageRepository>::all(client.clone())
        .create(
            &PostParams::default(),
            &PackageRepository::new(
                "main",
                PackageRepositorySpec {
                    registry: PackageRegistry {
                        repo: format!("{}/{REPO}", upstream.host()),
                        scheme: Some("HTTP".into()),
                        ..Default::default()
                    },
                    scan_interval: None,
                },
            ),
        )
        .await
        .unwrap();
    let packages_dir = dir.path().join("cache").join("packages");
    let controller = Controller::new(
        client.clone(),
        Options {
            packages_dir: packages_dir.clone(),
            ..Default::default()
        },
    );
    controller.pass().await.unwrap();
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": "e"}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    let mut a = Application::new(
        "shop",
        ApplicationSpec {
            package_name: "evil".into(),
            package_version: "v1.0.0".into(),
            package_repository_name: Some("main".into()),
            ..Default::default()
        },
    );
    a.metadata.namespace = Some("e".into());
    let apps: Api<Application> = Api::namespaced(client.clone(), "e");
    apps.create(&PostParams::default(), &a).await.unwrap();
    controller.pass().await.unwrap();

    let releases = || async {
        Api::<Secret>::namespaced(client.clone(), "e")
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len()
    };
    let (status, message, current) = installed_message(&client).await;
    assert_eq!(status, "False");
    assert!(
        message.starts_with("download evil v1.0.0: ")
            && message.contains("\"../../../escaped.yaml\" escapes the module directory"),
        "{message}"
    );
    assert_eq!(current, None);
    assert_eq!(releases().await, 0);
    // Nothing escaped, and no half-unpacked bundle is left to be taken for a whole one.
    for d in [dir.path(), &dir.path().join("cache"), &packages_dir] {
        assert!(!d.join("escaped.yaml").exists(), "{}", d.display());
    }
    assert!(!packages_dir.join("main/evil/v1.0.0").exists());

    apps.patch(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"packageVersion": "v1.0.1"}})),
    )
    .await
    .unwrap();
    controller.pass().await.unwrap();
    let (status, message, current) = installed_message(&client).await;
    assert_eq!(status, "False");
    assert!(
        message.starts_with("download evil v1.0.1: ") && message.contains("digest"),
        "{message}"
    );
    assert_eq!(current, None);
    assert_eq!(releases().await, 0);
    assert!(!packages_dir.join("main/evil/v1.0.1").exists());
}
