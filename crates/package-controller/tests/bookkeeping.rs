//! Deckhouse's bookkeeping around packages, end to end on the embedded API server and a real
//! `docker-registry`: the registry spec checksum and the `registry-spec-changed` annotation
//! it fans out to Applications, the owner references Deckhouse sets, the 10 newest
//! PackageRepositoryOperations kept, and a deleted repository leaving `availableRepositories`.

mod support;

use api::packages::{
    Application, ApplicationPackage, ApplicationPackageVersion, PackageRepository,
    PackageRepositoryOperation,
};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use package_controller::bookkeeping::{ANNOTATION_CHECKSUM, ANNOTATION_SPEC_CHANGED};
use package_controller::controller::Controller;
use serde_json::json;
use support::{
    Env, get_application, namespace, new_application, push_package, registry, repository, spec,
    update_operation,
};
use testkit::ImageBuilder;
use testkit::image::Layout;
use testkit::push::Registry;

/// Package `echo` v1.0.0 under registry path `path`.
async fn push_echo(push: &Registry, layout: &Layout, path: &str) {
    let package_yaml = "name: echo\ntype: Application\ndescription: {en: Echo}\ncategory: Misc\nstage: General Availability\n";
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
    let meta = [("package.yaml", package_yaml.as_bytes())];
    push_package(push, layout, path, "echo", "v1.0.0", &meta, &bundle).await;
}

async fn application(client: &Client, ns: &str, version: &str) {
    namespace(client, ns).await;
    new_application(client, ns, "shop", spec("echo", version)).await;
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
    Api::<PackageRepositoryOperation>::all(client.clone())
        .create(&PostParams::default(), &update_operation(name, None))
        .await
        .unwrap();
}

#[tokio::test]
async fn repositories_and_applications_are_kept_as_deckhouse_keeps_them() {
    let env = Env::start().await;
    push_echo(&env.push, &env.layout, "packages").await;
    push_echo(&env.push, &env.layout, "mirror").await;
    // A second tag in `packages`, so that a page of one tag would be shorter.
    let marker = ImageBuilder::new("packages-zzz").build(&env.layout);
    env.push
        .push_image("packages", Some("zzz"), &marker)
        .await
        .unwrap();
    let controller = Controller::new(env.client.clone(), support::options(&env.dir));
    repository(
        &env.client,
        "main",
        registry(&env.upstream.host(), "packages"),
    )
    .await;
    controller.pass().await.unwrap();
    repository(
        &env.client,
        "extra",
        registry(&env.upstream.host(), "mirror"),
    )
    .await;
    controller.pass().await.unwrap();

    // Scans: versions and the package owned (controlled) by the repository that made them.
    let repos: Api<PackageRepository> = Api::all(env.client.clone());
    let packages: Api<ApplicationPackage> = Api::all(env.client.clone());
    let versions: Api<ApplicationPackageVersion> = Api::all(env.client.clone());
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
    application(&env.client, "a", "v1.0.0").await;
    application(&env.client, "b", "v9.9.9").await;
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
    assert_eq!(
        owners(&get_application(&env.client, "a", "shop").await),
        linked("main-echo-v1.0.0")
    );
    assert!(owners(&get_application(&env.client, "b", "shop").await).is_empty());

    // The registry spec changes: the checksum follows and the repository's Applications are
    // told; one whose version is found reads the registry again and drops the annotation.
    repos
        .patch(
            "main",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"registry": registry(&env.upstream.host(), "mirror")}})),
        )
        .await
        .unwrap();
    controller.pass().await.unwrap();
    let main = repos.get("main").await.unwrap();
    assert_ne!(main.annotations()[ANNOTATION_CHECKSUM], checksum);
    let b = get_application(&env.client, "b", "shop").await;
    let when = &b.annotations()[ANNOTATION_SPEC_CHANGED];
    assert!(when.parse::<jiff::Timestamp>().is_ok(), "{when}");
    assert!(
        !get_application(&env.client, "a", "shop")
            .await
            .annotations()
            .contains_key(ANNOTATION_SPEC_CHANGED)
    );
    Api::<Application>::namespaced(env.client.clone(), "b")
        .patch(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"packageVersion": "v1.0.0"}})),
        )
        .await
        .unwrap();
    controller.pass().await.unwrap();
    let b = get_application(&env.client, "b", "shop").await;
    assert!(!b.annotations().contains_key(ANNOTATION_SPEC_CHANGED));
    assert_eq!(owners(&b), linked("main-echo-v1.0.0"));

    // A scan on demand is owned by its repository; of a repository's operations the 10 newest
    // are kept.
    manual_operation(&env.client, "main-now").await;
    controller.pass().await.unwrap();
    let ops: Api<PackageRepositoryOperation> = Api::all(env.client.clone());
    assert_eq!(
        owners(&ops.get("main-now").await.unwrap()),
        controlled("main")
    );
    for i in 0..12 {
        manual_operation(&env.client, &format!("main-manual-{i:02}")).await;
    }
    controller.pass().await.unwrap();
    let kept = operations(&env.client, "main").await;
    assert_eq!(kept.len(), 10, "{kept:?}");
    assert!(kept.contains(&"main-manual-11".to_owned()), "{kept:?}");
    assert!(!kept.contains(&"main-manual-00".to_owned()), "{kept:?}");
    assert_eq!(operations(&env.client, "extra").await.len(), 1);

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
        get_application(&env.client, "a", "shop")
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
