//! Deckhouse's bookkeeping around packages, end to end on the embedded API server and a real
//! `docker-registry`: the registry spec checksum and the `registry-spec-changed` annotation
//! it fans out to Applications, the owner references Deckhouse sets, the 10 newest
//! PackageRepositoryOperations kept, and a deleted repository leaving `availableRepositories`.

use api::packages::{
    Application, ApplicationPackage, ApplicationPackageVersion, ApplicationSpec, PackageRegistry,
    PackageRepository, PackageRepositoryOperation, PackageRepositoryOperationSpec,
    PackageRepositorySpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use package_controller::bookkeeping::{ANNOTATION_CHECKSUM, ANNOTATION_SPEC_CHANGED};
use package_controller::controller::{Controller, Options};
use serde_json::json;
use testkit::image::Layout;
use testkit::push::Registry;
use testkit::{Cluster, ImageBuilder, Upstream};

/// Package `echo` v1.0.0 under registry path `path`.
async fn push_echo(push: &Registry, layout: &Layout, path: &str) {
    let marker = ImageBuilder::new(&format!("{path}-marker")).build(layout);
    push.push_image(path, Some("echo"), &marker).await.unwrap();
    let package_yaml = "name: echo\ntype: Application\ndescription: {en: Echo}\ncategory: Misc\nstage: General Availability\n";
    let meta = ImageBuilder::new(&format!("{path}-meta"))
        .files(&[("package.yaml", package_yaml.as_bytes())])
        .build(layout);
    push.push_image(&format!("{path}/echo/version"), Some("v1.0.0"), &meta)
        .await
        .unwrap();
    let cm =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-echo\ndata: {}\n";
    let bundle = ImageBuilder::new(&format!("{path}-bundle"))
        .files(&[
            (
                "Chart.yaml",
                b"apiVersion: v2\nname: echo\nversion: 0.1.0\n".as_slice(),
            ),
            ("templates/cm.yaml", cm.as_bytes()),
        ])
        .build(layout);
    push.push_image(&format!("{path}/echo"), Some("v1.0.0"), &bundle)
        .await
        .unwrap();
}

fn registry(upstream: &Upstream, path: &str) -> PackageRegistry {
    PackageRegistry {
        repo: format!("{}/{path}", upstream.host()),
        scheme: Some("HTTP".into()),
        ..Default::default()
    }
}

async fn repository(client: &Client, name: &str, registry: PackageRegistry) {
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
        .unwrap();
}

async fn application(client: &Client, ns: &str, version: &str) {
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    let mut a = Application::new(
        "shop",
        ApplicationSpec {
            package_name: "echo".into(),
            package_version: version.into(),
            package_repository_name: Some("main".into()),
            ..Default::default()
        },
    );
    a.metadata.namespace = Some(ns.into());
    Api::<Application>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &a)
        .await
        .unwrap();
}

async fn app(client: &Client, ns: &str) -> Application {
    Api::<Application>::namespaced(client.clone(), ns)
        .get("shop")
        .await
        .unwrap()
}

/// (kind, name, controller, blockOwnerDeletion) of each owner reference.
fn owners<K: kube::Resource>(o: &K) -> Vec<(String, String, Option<bool>, Option<bool>)> {
    o.meta()
        .owner_references
        .iter()
        .flatten()
        .map(|r| {
            (
                r.kind.clone(),
                r.name.clone(),
                r.controller,
                r.block_owner_deletion,
            )
        })
        .collect()
}

async fn operations(client: &Client, repo: &str) -> Vec<String> {
    let mut names: Vec<String> = Api::<PackageRepositoryOperation>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|o| o.spec.package_repository_name == repo)
        .map(|o| o.name_any())
        .collect();
    names.sort();
    names
}

async fn manual_operation(client: &Client, name: &str) {
    let op = PackageRepositoryOperation {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: PackageRepositoryOperationSpec {
            package_repository_name: "main".into(),
            type_: "Update".into(),
            update: None,
        },
        status: None,
    };
    Api::<PackageRepositoryOperation>::all(client.clone())
        .create(&PostParams::default(), &op)
        .await
        .unwrap();
}

#[tokio::test]
async fn repositories_and_applications_are_kept_as_deckhouse_keeps_them() {
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(&dir.path().join("layout")).unwrap();
    let push = Registry::of(&upstream);
    push_echo(&push, &layout, "packages").await;
    push_echo(&push, &layout, "mirror").await;
    // A second tag in `packages`, so that a page of one tag would be shorter.
    let marker = ImageBuilder::new("packages-zzz").build(&layout);
    push.push_image("packages", Some("zzz"), &marker)
        .await
        .unwrap();
    let controller = Controller::new(
        client.clone(),
        Options {
            packages_dir: dir.path().join("packages"),
            ..Default::default()
        },
    );
    repository(&client, "main", registry(&upstream, "packages")).await;
    controller.pass().await.unwrap();
    repository(&client, "extra", registry(&upstream, "mirror")).await;
    controller.pass().await.unwrap();

    // Scans: versions and the package owned (controlled) by the repository that made them.
    let repos: Api<PackageRepository> = Api::all(client.clone());
    let packages: Api<ApplicationPackage> = Api::all(client.clone());
    let versions: Api<ApplicationPackageVersion> = Api::all(client.clone());
    let echo = packages.get("echo").await.unwrap();
    assert_eq!(
        echo.status.clone().unwrap().available_repositories,
        ["main", "extra"]
    );
    let controlled = |name: &str| {
        vec![(
            "PackageRepository".to_owned(),
            name.to_owned(),
            Some(true),
            None,
        )]
    };
    assert_eq!(owners(&echo), controlled("main"));
    assert_eq!(
        owners(&versions.get("extra-echo-v1.0.0").await.unwrap()),
        controlled("extra")
    );
    let main = repos.get("main").await.unwrap();
    let checksum = main.annotations()[ANNOTATION_CHECKSUM].clone();
    // Deckhouse's pagination probe (a listing limited to one tag against the full one):
    // Debian's docker-registry answers `?n=1` with every tag, so it does not page and
    // `partialScanAvailable` stays unset.
    let partial = |r: &PackageRepository| r.status.as_ref().and_then(|s| s.partial_scan_available);
    assert_eq!(partial(&main), None);
    assert_eq!(checksum.len(), 32);

    // An Application is owned by its version and package, neither controlling it.
    application(&client, "a", "v1.0.0").await;
    application(&client, "b", "v9.9.9").await;
    controller.pass().await.unwrap();
    let linked = |version: &str| {
        vec![
            (
                "ApplicationPackageVersion".to_owned(),
                version.to_owned(),
                Some(false),
                Some(true),
            ),
            (
                "ApplicationPackage".to_owned(),
                "echo".to_owned(),
                Some(false),
                Some(true),
            ),
        ]
    };
    assert_eq!(owners(&app(&client, "a").await), linked("main-echo-v1.0.0"));
    assert!(owners(&app(&client, "b").await).is_empty());

    // The registry spec changes: the checksum follows and the repository's Applications are
    // told; one whose version is found reads the registry again and drops the annotation.
    repos
        .patch(
            "main",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"registry": registry(&upstream, "mirror")}})),
        )
        .await
        .unwrap();
    controller.pass().await.unwrap();
    let main = repos.get("main").await.unwrap();
    assert_ne!(main.annotations()[ANNOTATION_CHECKSUM], checksum);
    let b = app(&client, "b").await;
    let when = &b.annotations()[ANNOTATION_SPEC_CHANGED];
    assert!(when.parse::<jiff::Timestamp>().is_ok(), "{when}");
    assert!(
        !app(&client, "a")
            .await
            .annotations()
            .contains_key(ANNOTATION_SPEC_CHANGED)
    );
    Api::<Application>::namespaced(client.clone(), "b")
        .patch(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"packageVersion": "v1.0.0"}})),
        )
        .await
        .unwrap();
    controller.pass().await.unwrap();
    let b = app(&client, "b").await;
    assert!(!b.annotations().contains_key(ANNOTATION_SPEC_CHANGED));
    assert_eq!(owners(&b), linked("main-echo-v1.0.0"));

    // A scan on demand is owned by its repository; of a repository's operations the 10 newest
    // are kept.
    manual_operation(&client, "main-now").await;
    controller.pass().await.unwrap();
    let ops: Api<PackageRepositoryOperation> = Api::all(client.clone());
    assert_eq!(
        owners(&ops.get("main-now").await.unwrap()),
        controlled("main")
    );
    for i in 0..12 {
        manual_operation(&client, &format!("main-manual-{i:02}")).await;
    }
    controller.pass().await.unwrap();
    let kept = operations(&client, "main").await;
    assert_eq!(kept.len(), 10, "{kept:?}");
    assert!(kept.contains(&"main-manual-11".to_owned()), "{kept:?}");
    assert!(!kept.contains(&"main-manual-00".to_owned()), "{kept:?}");
    assert_eq!(operations(&client, "extra").await.len(), 1);

    // A deleted repository leaves the package's available repositories; the package (made
    // by main) and what runs stay.
    repos
        .delete("extra", &DeleteParams::default())
        .await
        .unwrap();
    controller.pass().await.unwrap();
    let echo = packages.get("echo").await.unwrap();
    assert_eq!(echo.status.unwrap().available_repositories, ["main"]);
    assert!(
        app(&client, "a")
            .await
            .status
            .unwrap()
            .current_version
            .is_some()
    );

    // The repository that made the package is deleted: its versions and the package go with
    // it (their owner), as Kubernetes' garbage collector deletes dependents.
    repos
        .delete("main", &DeleteParams::default())
        .await
        .unwrap();
    let mut gone = false;
    for _ in 0..100 {
        if packages.get_opt("echo").await.unwrap().is_none()
            && versions
                .get_opt("main-echo-v1.0.0")
                .await
                .unwrap()
                .is_none()
        {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(gone, "package and versions of a deleted repository stay");
}
