//! Repository scans end to end: the embedded API server, a real `docker-registry` holding
//! packages, and the package controller's passes — what `kubectl get pro,apv,applicationpackages`
//! shows afterwards.

mod support;

use api::packages::{
    ApplicationPackage, ApplicationPackageVersion, PackageRepository, PackageRepositoryOperation,
    UpdateOperation,
};
use kube::api::PostParams;
use kube::{Api, Client, ResourceExt};
use package_controller::controller::{Controller, Options};
use package_controller::scan::Scanner;
use serde_json::json;
use support::{
    REPO, corrupt_layer, hostile_layer, raw_image, registry, repository, update_operation,
};
use testkit::image::Layout;
use testkit::push::Registry;
use testkit::{Cluster, Fault, FaultyUpstream, Image, ImageBuilder, Upstream};

const ECHO_YAML: &str = r#"name: echo
type: Application
description:
  en: An echo server
  ru: Эхо-сервер
category: Networking
stage: General Availability
licensing:
  editions:
    ce: {available: true}
versionCompatibilityRules:
  upgrade:
    allowSkipMinor: 0
"#;

struct Fixture {
    _dir: tempfile::TempDir,
    layout: Layout,
    push: Registry,
}

impl Fixture {
    fn new(upstream: &Upstream) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(&dir.path().join("layout")).unwrap();
        Self {
            push: Registry::of(upstream),
            layout,
            _dir: dir,
        }
    }

    /// `R:<package>` (the name), and `R/<package>/version:<v>` holding `files`.
    async fn push_version(&self, package: &str, version: &str, files: &[(&str, &[u8])]) {
        let marker = ImageBuilder::new("package-marker").build(&self.layout);
        self.push
            .push_image(REPO, Some(package), &marker)
            .await
            .unwrap();
        let image = ImageBuilder::new(&format!("{package}-{version}"))
            .files(files)
            .build(&self.layout);
        self.push
            .push_image(&format!("{REPO}/{package}/version"), Some(version), &image)
            .await
            .unwrap();
    }

    async fn push_raw_version(&self, package: &str, version: &str, image: &Image) {
        let marker = ImageBuilder::new("package-marker").build(&self.layout);
        self.push
            .push_image(REPO, Some(package), &marker)
            .await
            .unwrap();
        self.push
            .push_image(&format!("{REPO}/{package}/version"), Some(version), image)
            .await
            .unwrap();
    }
}

fn condition<'a>(
    conditions: &'a [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    t: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    conditions
        .iter()
        .find(|c| c.type_ == t)
        .unwrap_or_else(|| panic!("no condition {t} in {conditions:?}"))
}

#[tokio::test]
async fn a_scan_creates_packages_and_versions_with_their_metadata() {
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let f = Fixture::new(&upstream);
    for v in ["v1.0.0", "v1.1.0"] {
        f.push_version(
            "echo",
            v,
            &[
                ("package.yaml", ECHO_YAML.as_bytes()),
                (
                    "version.json",
                    format!("{{\"version\":\"{v}\"}}").as_bytes(),
                ),
                (
                    "changelog.yaml",
                    b"features: [greets back]\nfixes: [no echo]\n",
                ),
            ],
        )
        .await;
    }
    f.push_version(
        "web",
        "v2.0.0",
        &[("package.yaml", b"name: web\ntype: Application\n")],
    )
    .await;
    // An old-style module (no package.yaml): reported, not created.
    f.push_version(
        "legacy",
        "v1.0.0",
        &[("version.json", b"{\"version\":\"v1.0.0\"}")],
    )
    .await;
    repository(&client, "main", registry(&upstream.host(), REPO)).await;

    let controller = Controller::new(client.clone(), Options::default());
    controller.pass().await.unwrap();

    let ops: Api<PackageRepositoryOperation> = Api::all(client.clone());
    let list = ops.list(&Default::default()).await.unwrap().items;
    assert_eq!(list.len(), 1, "one automatic scan");
    let op = &list[0];
    assert!(op.name_any().starts_with("main-scan-"), "{}", op.name_any());
    assert_eq!(
        op.labels()["packages.deckhouse.io/operation-trigger"],
        "auto"
    );
    assert_eq!(op.labels()["packages.deckhouse.io/repository"], "main");
    assert_eq!(op.spec.update.as_ref().unwrap().full_scan, Some(true));
    let status = op.status.clone().unwrap();
    assert_eq!(condition(&status.conditions, "Completed").status, "True");
    assert!(status.start_time.is_some() && status.completion_time.is_some());
    let p = status.packages.unwrap();
    assert_eq!(p.total, Some(3));
    assert_eq!(p.processed_overall, Some(3));
    assert!(p.discovered.is_empty());
    let processed: Vec<(&str, Option<i64>, Option<i64>)> = p
        .processed
        .iter()
        .map(|x| (x.name.as_str(), x.found_versions, x.new_versions))
        .collect();
    assert_eq!(
        processed,
        [("echo", Some(2), Some(2)), ("web", Some(1), Some(1))]
    );
    assert_eq!(p.failed.len(), 1);
    assert_eq!(p.failed[0].name, "legacy");
    assert_eq!(
        p.failed[0].errors[0].message,
        "package has no type labels and no package.yaml, processed as the legacy module (v1alpha1)"
    );

    let repos: Api<PackageRepository> = Api::all(client.clone());
    let repo = repos.get("main").await.unwrap().status.unwrap();
    assert_eq!(repo.phase.as_deref(), Some("Active"));
    assert_eq!(repo.packages_count, Some(2));
    assert!(repo.sync_time.is_some());
    let finished = condition(&repo.conditions, "LastOperationScanFinished");
    assert_eq!(finished.status, "True");
    assert_eq!(
        finished.message,
        "Successfully scanned repository, found 3 package(s)"
    );

    let packages: Api<ApplicationPackage> = Api::all(client.clone());
    let echo = packages.get("echo").await.unwrap();
    assert_eq!(echo.status.unwrap().available_repositories, ["main"]);
    assert!(packages.get_opt("legacy").await.unwrap().is_none());

    let versions: Api<ApplicationPackageVersion> = Api::all(client.clone());
    let apv = versions.get("main-echo-v1.1.0").await.unwrap();
    assert!(
        !apv.labels().contains_key("packages.deckhouse.io/draft"),
        "metadata loaded, no longer a draft"
    );
    assert_eq!(apv.labels()["packages.deckhouse.io/package"], "echo");
    let s = apv.status.unwrap();
    let loaded = s
        .conditions
        .iter()
        .find(|c| c.type_ == "MetadataLoaded")
        .unwrap();
    assert_eq!(loaded.status, "True");
    let m = s.package_metadata.unwrap();
    assert_eq!(m.description.unwrap().ru.as_deref(), Some("Эхо-сервер"));
    assert_eq!(m.category.as_deref(), Some("Networking"));
    assert_eq!(m.stage.as_deref(), Some("General Availability"));
    assert_eq!(m.changelog.unwrap().features, ["greets back"]);
    assert_eq!(m.licensing.unwrap().editions["ce"].available, Some(true));
    assert_eq!(
        m.version_compatibility_rules
            .unwrap()
            .upgrade
            .unwrap()
            .allow_skip_minor,
        Some(0)
    );
    assert_eq!(s.package_version.as_deref(), Some("v1.1.0"));

    // A second pass within the interval schedules nothing new.
    controller.pass().await.unwrap();
    assert_eq!(ops.list(&Default::default()).await.unwrap().items.len(), 1);
}

/// Creates a manual `Update` operation (`fullScan` as given) and returns its processed
/// packages `(name, type, foundVersions, newVersions)` once the controller has run it.
async fn scan_now(
    client: &Client,
    controller: &Controller,
    name: &str,
    full_scan: Option<bool>,
) -> Vec<(String, Option<String>, Option<i64>, Option<i64>)> {
    let ops: Api<PackageRepositoryOperation> = Api::all(client.clone());
    let update = full_scan.map(|f| UpdateOperation {
        full_scan: Some(f),
        timeout: None,
    });
    let op = update_operation(name, update);
    ops.create(&PostParams::default(), &op).await.unwrap();
    controller.pass().await.unwrap();
    let status = ops.get(name).await.unwrap().status.unwrap();
    assert_eq!(condition(&status.conditions, "Completed").status, "True");
    let p = status.packages.unwrap();
    assert!(p.failed.is_empty(), "{:?}", p.failed);
    p.processed
        .into_iter()
        .map(|x| (x.name, x.type_, x.found_versions, x.new_versions))
        .collect()
}

#[tokio::test]
async fn an_incremental_scan_takes_only_versions_newer_than_the_last_loaded() {
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let f = Fixture::new(&upstream);
    let files = [("package.yaml", ECHO_YAML.as_bytes())];
    for v in ["v1.0.0", "v1.1.0"] {
        f.push_version("echo", v, &files).await;
    }
    f.push_version(
        "web",
        "v2.0.0",
        &[("package.yaml", b"name: web\ntype: Application\n")],
    )
    .await;
    repository(&client, "main", registry(&upstream.host(), REPO)).await;
    let controller = Controller::new(client.clone(), Options::default());
    // The first automatic scan is a full one and loads every version's metadata.
    controller.pass().await.unwrap();
    let versions: Api<ApplicationPackageVersion> = Api::all(client.clone());
    let loaded = versions.get("main-echo-v1.1.0").await.unwrap();
    assert!(loaded.status.unwrap().package_metadata.is_some());

    // A patch for the older line and a newer minor are published.
    for v in ["v1.0.1", "v1.2.0"] {
        f.push_version("echo", v, &files).await;
    }
    let app = Some("Application".to_owned());
    let incremental = scan_now(&client, &controller, "main-incremental", None).await;
    assert_eq!(
        incremental,
        [
            ("echo".to_owned(), app.clone(), Some(1), Some(1)),
            ("web".to_owned(), app.clone(), Some(0), Some(0)),
        ],
        "only v1.2.0 is newer than the last loaded v1.1.0; web has nothing new"
    );
    assert!(
        versions
            .get_opt("main-echo-v1.2.0")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        versions
            .get_opt("main-echo-v1.0.1")
            .await
            .unwrap()
            .is_none(),
        "a version below the last loaded one is left to a full scan"
    );
    let repos: Api<PackageRepository> = Api::all(client.clone());
    let repo = repos.get("main").await.unwrap().status.unwrap();
    assert_eq!(repo.packages_count, Some(2), "web stays in the repository");

    // `fullScan: false` said outright is the same; nothing newer than v1.2.0 now.
    let again = scan_now(&client, &controller, "main-incremental-2", Some(false)).await;
    assert_eq!(again[0], ("echo".to_owned(), app.clone(), Some(0), Some(0)));

    // A full scan lists every version and creates the missed patch.
    let full = scan_now(&client, &controller, "main-full", Some(true)).await;
    assert_eq!(full[0], ("echo".to_owned(), app.clone(), Some(4), Some(1)));
    assert!(
        versions
            .get_opt("main-echo-v1.0.1")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_registry_failing_midway_leaves_an_honest_partial_result() {
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let f = Fixture::new(&upstream);
    for package in ["alpha", "bravo", "charlie"] {
        f.push_version(
            package,
            "v1.0.0",
            &[(
                "package.yaml",
                format!("name: {package}\ntype: Application\n").as_bytes(),
            )],
        )
        .await;
    }
    let proxy = FaultyUpstream::start(&upstream, Fault::None).await;
    repository(&client, "flaky", registry(&proxy.host(), REPO)).await;
    let ops: Api<PackageRepositoryOperation> = Api::all(client.clone());
    let op: PackageRepositoryOperation = serde_json::from_value(json!({
        "apiVersion": "deckhouse.io/v1alpha1",
        "kind": "PackageRepositoryOperation",
        "metadata": {"name": "flaky-now"},
        "spec": {"packageRepositoryName": "flaky", "type": "Update"},
    }))
    .unwrap();
    ops.create(&PostParams::default(), &op).await.unwrap();

    let scanner = Scanner::new(
        client.clone(),
        registry_client::Client::new(registry_client::Config::default()),
    );
    let step = || async {
        let op = ops.get("flaky-now").await.unwrap();
        scanner.step(&op).await.unwrap()
    };
    assert!(step().await); // Pending
    assert!(step().await); // Discovered
    assert!(step().await); // alpha
    proxy.set_fault(Fault::Unauthorized);
    assert!(step().await); // bravo: the registry refuses everything
    proxy.set_fault(Fault::None);
    assert!(step().await); // charlie
    assert!(step().await); // Completed
    assert!(!step().await);

    let op = ops.get("flaky-now").await.unwrap();
    assert_eq!(
        op.labels()["packages.deckhouse.io/operation-trigger"],
        "manual"
    );
    let status = op.status.unwrap();
    assert_eq!(condition(&status.conditions, "Completed").status, "True");
    let p = status.packages.unwrap();
    let processed: Vec<&str> = p.processed.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(processed, ["alpha", "charlie"]);
    assert_eq!(p.failed.len(), 1);
    assert_eq!(p.failed[0].name, "bravo");
    let message = &p.failed[0].errors[0].message;
    assert!(
        message.starts_with("get found tags to process: "),
        "{message}"
    );
    assert!(
        !message.contains("Basic "),
        "no credentials or challenges: {message}"
    );
    let versions: Api<ApplicationPackageVersion> = Api::all(client.clone());
    assert!(
        versions
            .get_opt("flaky-alpha-v1.0.0")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        versions
            .get_opt("flaky-bravo-v1.0.0")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        versions
            .get_opt("flaky-charlie-v1.0.0")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_repository_that_cannot_be_listed_fails_the_operation() {
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let proxy = FaultyUpstream::start(&upstream, Fault::Unauthorized).await;
    repository(&client, "closed", registry(&proxy.host(), REPO)).await;
    Controller::new(client.clone(), Options::default())
        .pass()
        .await
        .unwrap();
    let ops: Api<PackageRepositoryOperation> = Api::all(client.clone());
    let op = &ops.list(&Default::default()).await.unwrap().items[0];
    let completed = condition(&op.status.as_ref().unwrap().conditions, "Completed").clone();
    assert_eq!(completed.status, "False");
    assert_eq!(completed.reason, "PackageListingFailed");
    assert!(
        completed.message.starts_with("Failed to list packages: "),
        "{}",
        completed.message
    );
    let repos: Api<PackageRepository> = Api::all(client.clone());
    let repo = repos.get("closed").await.unwrap().status.unwrap();
    let finished = condition(&repo.conditions, "LastOperationScanFinished");
    assert_eq!(finished.status, "False");
    assert_eq!(finished.reason, "PackageListingFailed");
}

#[tokio::test]
async fn hostile_version_images_are_refused_as_module_images_are() {
    use tar::EntryType::{Regular, Symlink};
    testkit::install_crypto();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let upstream = Upstream::start_plain().await;
    let f = Fixture::new(&upstream);
    // The newest version is good (the type is read from it); the older ones are hostile.
    f.push_version(
        "evil",
        "v9.0.0",
        &[("package.yaml", b"name: evil\ntype: Application\n")],
    )
    .await;
    let oversized = vec![b'#'; (1 << 20) + 1];
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "v1.0.0",
            hostile_layer(&[("../../etc/cron.d/evil", b"* * * * * root sh", Regular, "")]),
            "layer entry \"../../etc/cron.d/evil\" escapes the module directory: \"..\" component",
        ),
        (
            "v1.0.1",
            hostile_layer(&[("package.yaml", b"", Symlink, "/etc/passwd")]),
            "layer entry \"package.yaml\" escapes the module directory: symlink to the absolute or empty path \"/etc/passwd\"",
        ),
        (
            "v1.0.2",
            hostile_layer(&[("package.yaml", &oversized, Regular, "")]),
            "file \"package.yaml\" is 1048577, more than the limit of 1048576",
        ),
    ];
    for (tag, layer, _) in &cases {
        f.push_raw_version("evil", tag, &raw_image(&f.layout, layer))
            .await;
    }
    // Wrong digest: the registry serves other bytes than the manifest names.
    let image = raw_image(
        &f.layout,
        &hostile_layer(&[("package.yaml", b"type: Application\n", Regular, "")]),
    );
    f.push_raw_version("evil", "v1.0.3", &image).await;
    corrupt_layer(&upstream, &image);

    repository(&client, "main", registry(&upstream.host(), REPO)).await;
    let controller = Controller::new(client.clone(), Options::default());
    controller.pass().await.unwrap();

    let versions: Api<ApplicationPackageVersion> = Api::all(client.clone());
    let loaded = |apv: &ApplicationPackageVersion| {
        apv.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "MetadataLoaded"))
            .cloned()
            .unwrap()
    };
    let good = versions.get("main-evil-v9.0.0").await.unwrap();
    assert_eq!(loaded(&good).status, "True");
    for (tag, _, message) in &cases {
        let apv = versions.get(&format!("main-evil-{tag}")).await.unwrap();
        assert!(
            apv.labels().contains_key("packages.deckhouse.io/draft"),
            "{tag} stays a draft"
        );
        let c = loaded(&apv);
        assert_eq!(c.status, "False", "{tag}");
        assert_eq!(c.reason.as_deref(), Some("GetImageError"), "{tag}");
        assert_eq!(
            c.message.as_deref(),
            Some(format!("failed to get image: {message}").as_str()),
            "{tag}"
        );
        assert!(apv.status.unwrap().package_metadata.is_none(), "{tag}");
    }
    let apv = versions.get("main-evil-v1.0.3").await.unwrap();
    let c = loaded(&apv);
    assert_eq!(c.status, "False");
    let message = c.message.unwrap();
    assert!(message.contains("digest"), "{message}");
}
