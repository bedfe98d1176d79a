//! Fixtures the package controller's integration tests share: the embedded API server and a
//! plain `docker-registry` started together, packages pushed as Deckhouse publishes them, the
//! objects a test creates, a running controller, and the hostile-image builders of the module
//! controller's tests.

#![allow(dead_code, unreachable_pub, missing_debug_implementations)]

use std::collections::BTreeMap;
use std::time::Duration;

use api::packages::{
    Application, ApplicationSpec, PackageRegistry, PackageRepository, PackageRepositoryOperation,
    PackageRepositoryOperationSpec, PackageRepositorySpec, UpdateOperation,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::PostParams;
use kube::{Api, Client};
use package_controller::controller::{Controller, Options};
use serde_json::json;
use testkit::image::{Image, Layout};
use testkit::push::Registry;
use testkit::{Cluster, ImageBuilder, Upstream};

#[path = "../../../module-controller/tests/support/fixtures.rs"]
mod module_fixtures;

#[allow(unused_imports)]
pub use module_fixtures::{hostile_layer, raw_image};

/// The registry path the packages are published under.
pub const REPO: &str = "packages";

/// What every test starts from: an API server, a registry, a scratch directory with an OCI
/// layout to build images in, and a client that pushes them.
pub struct Env {
    pub cluster: Cluster,
    pub client: Client,
    pub upstream: Upstream,
    pub dir: tempfile::TempDir,
    pub layout: Layout,
    pub push: Registry,
}

impl Env {
    pub async fn start() -> Self {
        testkit::install_crypto();
        let cluster = Cluster::start().await;
        let client = cluster.client().await;
        let upstream = Upstream::start_plain().await;
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(&dir.path().join("layout")).unwrap();
        let push = Registry::of(&upstream);
        Self {
            cluster,
            client,
            upstream,
            dir,
            layout,
            push,
        }
    }
}

/// Controller options that keep the downloaded bundles under `dir/packages`.
pub fn options(dir: &tempfile::TempDir) -> Options {
    Options {
        packages_dir: dir.path().join("packages"),
        ..Default::default()
    }
}

/// Package `name` `version` under registry path `repo`: its name as a tag of `repo`, a version
/// image holding `meta` (`package.yaml` and the like) and `bundle` as the bundle.
pub async fn push_package(
    push: &Registry,
    layout: &Layout,
    repo: &str,
    name: &str,
    version: &str,
    meta: &[(&str, &[u8])],
    bundle: &Image,
) {
    let marker = ImageBuilder::new(&format!("{repo}-{name}-marker")).build(layout);
    push.push_image(repo, Some(name), &marker).await.unwrap();
    let meta = ImageBuilder::new(&format!("{repo}-{name}-meta-{version}"))
        .files(meta)
        .build(layout);
    push.push_image(&format!("{repo}/{name}/version"), Some(version), &meta)
        .await
        .unwrap();
    push.push_image(&format!("{repo}/{name}"), Some(version), bundle)
        .await
        .unwrap();
}

/// Flips the last byte of `image`'s first layer where `upstream` stores it: the registry then
/// serves other bytes than the manifest names.
pub fn corrupt_layer(upstream: &Upstream, image: &Image) {
    let hex = image.layers[0].digest.trim_start_matches("sha256:");
    let data = upstream.storage_dir().join(format!(
        "docker/registry/v2/blobs/sha256/{}/{hex}/data",
        &hex[..2]
    ));
    let mut bytes = std::fs::read(&data).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&data, bytes).unwrap();
}

/// A registry reached over plain HTTP at `host`, packages under `path`.
pub fn registry(host: &str, path: &str) -> PackageRegistry {
    PackageRegistry {
        repo: format!("{host}/{path}"),
        scheme: Some("HTTP".into()),
        ..Default::default()
    }
}

pub async fn repository(
    client: &Client,
    name: &str,
    registry: PackageRegistry,
) -> PackageRepository {
    Api::<PackageRepository>::all(client.clone())
        .create(
            &PostParams::default(),
            &PackageRepository::new(
                name,
                PackageRepositorySpec {
                    registry,
                    scan_interval: None,
                },
            ),
        )
        .await
        .unwrap()
}

/// A scan on demand (`Update`) of repository `main`.
pub fn update_operation(name: &str, update: Option<UpdateOperation>) -> PackageRepositoryOperation {
    PackageRepositoryOperation {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: PackageRepositoryOperationSpec {
            package_repository_name: "main".into(),
            type_: "Update".into(),
            update,
        },
        status: None,
    }
}

/// An Application of `package` `version` from repository `main`.
pub fn spec(package: &str, version: &str) -> ApplicationSpec {
    ApplicationSpec {
        package_name: package.into(),
        package_version: version.into(),
        package_repository_name: Some("main".into()),
        ..Default::default()
    }
}

pub async fn new_application(client: &Client, ns: &str, name: &str, spec: ApplicationSpec) {
    let mut a = Application::new(name, spec);
    a.metadata.namespace = Some(ns.into());
    Api::<Application>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &a)
        .await
        .unwrap();
}

pub async fn get_application(client: &Client, ns: &str, name: &str) -> Application {
    Api::<Application>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
}

pub async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Creates the namespaced `object` (in `ns`, else `default`).
pub async fn create<K>(client: &Client, ns: Option<&str>, object: serde_json::Value)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Clone
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns.unwrap_or("default"));
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

/// ConfigMap `ns/name`'s data, if it exists.
pub async fn cm(client: &Client, ns: &str, name: &str) -> Option<BTreeMap<String, String>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.get_opt(name)
        .await
        .unwrap()
        .map(|c| c.data.unwrap_or_default())
}

/// Waits (up to a minute) until `check` holds for ConfigMap `ns/name`'s data.
pub async fn wait_for(
    client: &Client,
    ns: &str,
    name: &str,
    check: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    let mut last = None;
    for _ in 0..600 {
        last = cm(client, ns, name).await;
        if let Some(d) = &last
            && check(d)
        {
            return d.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("ConfigMap {ns}/{name} never got there: {last:?}");
}

/// A controller running (`Controller::run`) until stopped.
pub struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    pub fn start(controller: Controller) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            controller
                .run(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Self { stop, task }
    }

    /// Stops the controller and waits until it has stopped.
    pub async fn stop(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap();
    }
}
