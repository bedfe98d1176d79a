//! Hostile package bundles: an Application's bundle `R/<package>:<version>` is downloaded
//! and unpacked as module images are — verified digests, safe unpacking — so a bundle with a
//! path escaping its directory or a layer whose bytes do not match its digest is refused, the
//! Application says why, and nothing is installed or written outside the bundle directory.

mod support;

use api::packages::Application;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use package_controller::controller::{Controller, Options};
use serde_json::json;
use support::{
    Env, REPO, corrupt_layer, hostile_layer, namespace, new_application, push_package, raw_image,
    registry, repository, spec,
};
use tar::EntryType::Regular;
use testkit::image::{Image, Layout};
use testkit::push::Registry;

/// Package `evil` `version`: a good version image, `bundle` as the bundle.
async fn push_evil(push: &Registry, layout: &Layout, version: &str, bundle: &Image) {
    let package_yaml = "name: evil\ntype: Application\ndescription: {en: Evil}\ncategory: Misc\nstage: General Availability\n";
    let meta = [("package.yaml", package_yaml.as_bytes())];
    push_package(push, layout, REPO, "evil", version, &meta, bundle).await;
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
    let env = Env::start().await;
    // v1.0.0: an entry climbing out of the bundle directory.
    let traversal = raw_image(
        &env.layout,
        &hostile_layer(&[("../../../escaped.yaml", b"kind: ConfigMap\n", Regular, "")]),
    );
    push_evil(&env.push, &env.layout, "v1.0.0", &traversal).await;
    // v1.0.1: the registry serves other bytes than the manifest names.
    let corrupt = raw_image(
        &env.layout,
        &hostile_layer(&[(
            "Chart.yaml",
            b"apiVersion: v2\nname: evil\nversion: 0.1.0\n",
            Regular,
            "",
        )]),
    );
    push_evil(&env.push, &env.layout, "v1.0.1", &corrupt).await;
    corrupt_layer(&env.upstream, &corrupt);

    repository(&env.client, "main", registry(&env.upstream.host(), REPO)).await;
    let packages_dir = env.dir.path().join("cache").join("packages");
    let controller = Controller::new(
        env.client.clone(),
        Options {
            packages_dir: packages_dir.clone(),
            ..Default::default()
        },
    );
    controller.pass().await.unwrap();
    namespace(&env.client, "e").await;
    let apps: Api<Application> = Api::namespaced(env.client.clone(), "e");
    new_application(&env.client, "e", "shop", spec("evil", "v1.0.0")).await;
    controller.pass().await.unwrap();

    let releases = || async {
        Api::<Secret>::namespaced(env.client.clone(), "e")
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len()
    };
    let (status, message, current) = installed_message(&env.client).await;
    assert_eq!(status, "False");
    assert!(
        message.starts_with("download evil v1.0.0: ")
            && message.contains("\"../../../escaped.yaml\" escapes the module directory"),
        "{message}"
    );
    assert_eq!(current, None);
    assert_eq!(releases().await, 0);
    // Nothing escaped, and no half-unpacked bundle is left to be taken for a whole one.
    for d in [env.dir.path(), &env.dir.path().join("cache"), &packages_dir] {
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
    let (status, message, current) = installed_message(&env.client).await;
    assert_eq!(status, "False");
    assert!(
        message.starts_with("download evil v1.0.1: ") && message.contains("digest"),
        "{message}"
    );
    assert_eq!(current, None);
    assert_eq!(releases().await, 0);
    assert!(!packages_dir.join("main/evil/v1.0.1").exists());
}
