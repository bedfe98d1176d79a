//! The module manager running as a controller against the embedded API server and a real
//! `docker-registry`: nothing here calls a pass by hand. Creating a ModuleSource makes its
//! Modules appear; enabling a module installs its first release on disk; a new channel version
//! is picked up by the periodic rescan and applied; approving a Manual release through its
//! annotation applies it; an override polled on its `scanInterval` follows a moving tag.

#[path = "support/fixtures.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use api::module::Module;
use api::module_pull_override::ModulePullOverride;
use api::module_release::ModuleRelease;
use api::module_source::ModuleSource;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use module_controller::controller::Options;
use module_controller::install::Downloaded;
use module_controller::manager::Manager;
use module_plan::enabling::{Facts, version_of};
use serde_json::{Value, json};
use support::{REPO, module_image, release_image, source};

async fn create<K>(client: &Client, object: Value)
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
    <K as kube::Resource>::DynamicType: Default,
{
    let typed: K = serde_json::from_value(object).unwrap();
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), &typed)
        .await
        .unwrap();
}

/// Polls `check` until it yields a value, failing after 60 s with `what`.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn phase_of(r: &ModuleRelease) -> String {
    r.status
        .as_ref()
        .and_then(|s| s.phase)
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default()
}

/// The embedded API server with the platform's CRDs, and an admin client.
async fn api_server(dir: &std::path::Path) -> (apiserver::RunningServer, Client) {
    let crds = api::crds::all()
        .into_iter()
        .map(|crd| serde_json::to_value(crd).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = apiserver::ApiServer::builder()
        .data_dir(dir.join("apiserver"))
        .crds(crds)
        .namespace("d8-system")
        .serve(listener)
        .await
        .unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(server.admin_kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    (server, Client::try_from(config).unwrap())
}

#[tokio::test]
async fn the_default_source_is_created_and_kept() {
    let source = source().await;
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = api_server(dir.path()).await;
    let registry = api::module_source::SourceRegistry {
        scheme: api::module_source::Scheme::Http,
        repo: format!("{}/{REPO}", source.upstream.host()),
        docker_cfg: None,
        ca: None,
    };
    let manager = Manager::new(
        client.clone(),
        Downloaded::open(dir.path().join("downloaded")).unwrap(),
        Arc::new(release_controller::SystemClock),
        Facts::default(),
    )
    .with_default_source(registry.clone());
    manager.reconcile_all().await.unwrap();
    let sources: Api<ModuleSource> = Api::all(client.clone());
    let created = sources.get("deckhouse").await.unwrap();
    assert_eq!(created.spec.registry, registry);
    assert_eq!(created.status.unwrap().modules_count, Some(3));
    // Edited by hand, it is put back on the next pass.
    sources
        .patch(
            "deckhouse",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"registry": {"repo": "elsewhere.example/modules"}}})),
        )
        .await
        .unwrap();
    manager.reconcile_all().await.unwrap();
    assert_eq!(
        sources.get("deckhouse").await.unwrap().spec.registry,
        registry
    );
}

#[tokio::test]
async fn the_controller_discovers_installs_and_follows_changes() {
    let source = source().await;
    let dir = tempfile::tempdir().unwrap();
    let crds = api::crds::all()
        .into_iter()
        .map(|crd| serde_json::to_value(crd).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = apiserver::ApiServer::builder()
        .data_dir(dir.path().join("apiserver"))
        .crds(crds)
        .namespace("d8-system")
        .serve(listener)
        .await
        .unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(server.admin_kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = Client::try_from(config).unwrap();
    let downloaded = Downloaded::open(dir.path().join("downloaded")).unwrap();
    let facts = Facts {
        bundle: "Default".into(),
        edition: "ee".into(),
        deckhouse_version: version_of("v1.69.3"),
        kubernetes_version: version_of("1.29.3"),
        bootstrapped: true,
        ..Default::default()
    };
    let manager = Manager::new(
        client.clone(),
        downloaded.clone(),
        Arc::new(release_controller::SystemClock),
        facts,
    );
    let options = Options {
        source_interval: Duration::from_secs(2),
        release_requeue: Duration::from_secs(1),
        debounce: Duration::from_millis(50),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let observed = manager.clone();
    let controller = tokio::spawn(async move {
        manager
            .run_controller(options, async move {
                let _ = stopped.await;
            })
            .await;
    });

    // A ModuleSource appears: its three modules become Modules.
    create::<ModuleSource>(
        &client,
        json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleSource",
            "metadata": {"name": "example"},
            "spec": {"registry": {"scheme": "HTTP", "repo": format!("{}/{REPO}", source.upstream.host())}}
        }),
    )
    .await;
    let modules: Api<Module> = Api::all(client.clone());
    let names = eventually("the source's modules exist", || async {
        let mut names: Vec<String> = modules
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        names.sort();
        (names.len() == 3).then_some(names)
    })
    .await;
    assert_eq!(names, ["echo", "hello", "parca"]);
    assert!(downloaded.active_version("echo").is_none());

    // Enabling echo installs the Stable channel's version, at once.
    create::<api::module_config::ModuleConfig>(
        &client,
        json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
            "metadata": {"name": "echo"}, "spec": {"enabled": true}
        }),
    )
    .await;
    let releases: Api<ModuleRelease> = Api::all(client.clone());
    // The files are switched in first, then the release and the Module say so.
    eventually("echo 1.0.1 is installed and Deployed", || async {
        let release = releases.get_opt("echo-v1.0.1").await.ok()??;
        let echo = modules.get("echo").await.ok()?;
        (downloaded.active_version("echo").as_deref() == Some("1.0.1")
            && phase_of(&release) == "Deployed"
            && echo.spec.properties.version.as_deref() == Some("v1.0.1"))
        .then_some(())
    })
    .await;

    // A new Stable version is found by the periodic rescan and applied (the embedded policy
    // is Auto).
    let image = module_image(&source.layout, "echo", "v1.0.2", 10);
    source
        .push
        .push_image(&format!("{REPO}/echo"), Some("v1.0.2"), &image)
        .await
        .unwrap();
    let release = release_image(&source.layout, "echo", "v1.0.2");
    source
        .push
        .push_image(&format!("{REPO}/echo/release"), Some("stable"), &release)
        .await
        .unwrap();
    eventually("echo 1.0.2 is installed and 1.0.1 Superseded", || async {
        let first = releases.get("echo-v1.0.1").await.ok()?;
        (downloaded.active_version("echo").as_deref() == Some("1.0.2")
            && phase_of(&first) == "Superseded")
            .then_some(())
    })
    .await;

    // Manual policy: hello's first release goes in at once, the next waits for approval, and
    // approving it through the annotation alone applies it.
    create::<api::module_update_policy::v1alpha2::ModuleUpdatePolicy>(
        &client,
        json!({
            "apiVersion": "deckhouse.io/v1alpha2", "kind": "ModuleUpdatePolicy",
            "metadata": {"name": "manual"},
            "spec": {"releaseChannel": "Stable", "update": {"mode": "Manual"}}
        }),
    )
    .await;
    create::<api::module_config::ModuleConfig>(
        &client,
        json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
            "metadata": {"name": "hello"}, "spec": {"enabled": true, "updatePolicy": "manual"}
        }),
    )
    .await;
    eventually("hello 0.2.0 is installed", || async {
        (downloaded.active_version("hello").as_deref() == Some("0.2.0")).then_some(())
    })
    .await;
    let image = module_image(&source.layout, "hello", "v0.2.1", 10);
    source
        .push
        .push_image(&format!("{REPO}/hello"), Some("v0.2.1"), &image)
        .await
        .unwrap();
    let release = release_image(&source.layout, "hello", "v0.2.1");
    source
        .push
        .push_image(&format!("{REPO}/hello/release"), Some("stable"), &release)
        .await
        .unwrap();
    let waiting = eventually("hello 0.2.1 waits for approval", || async {
        let r = releases.get_opt("hello-v0.2.1").await.ok()??;
        let message = r.status.as_ref()?.message.clone();
        message.contains("approved").then_some(message)
    })
    .await;
    assert_eq!(
        waiting,
        "Release is waiting for the 'modules.deckhouse.io/approved: \"true\"' annotation"
    );
    assert_eq!(downloaded.active_version("hello").as_deref(), Some("0.2.0"));
    releases
        .patch(
            "hello-v0.2.1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"modules.deckhouse.io/approved": "true"}}}),
            ),
        )
        .await
        .unwrap();
    eventually("hello 0.2.1 is installed", || async {
        (downloaded.active_version("hello").as_deref() == Some("0.2.1")).then_some(())
    })
    .await;

    // An override polled every second follows its moving tag.
    let dev = |n: u32| module_image(&source.layout, "hello", &format!("dev-{n}"), 10);
    source
        .push
        .push_image(&format!("{REPO}/hello"), Some("main"), &dev(1))
        .await
        .unwrap();
    create::<ModulePullOverride>(
        &client,
        json!({
            "apiVersion": "deckhouse.io/v1alpha2", "kind": "ModulePullOverride",
            "metadata": {"name": "hello"}, "spec": {"imageTag": "main", "scanInterval": "1s"}
        }),
    )
    .await;
    let overrides: Api<ModulePullOverride> = Api::all(client.clone());
    let first_digest = eventually("the override is deployed", || async {
        let o = overrides.get("hello").await.ok()?;
        let status = o.status?;
        (status.message.as_deref() == Some("Ready")).then_some(status.image_digest?)
    })
    .await;
    assert_eq!(downloaded.active_version("hello").as_deref(), Some("dev"));
    let image = dev(2);
    source
        .push
        .push_image(&format!("{REPO}/hello"), Some("main"), &image)
        .await
        .unwrap();
    let moved = eventually("the override follows the tag", || async {
        let digest = overrides.get("hello").await.ok()?.status?.image_digest?;
        (digest != first_digest).then_some(digest)
    })
    .await;
    assert_eq!(moved, image.manifest.digest);
    let template = std::fs::read_to_string(
        downloaded
            .release_dir("hello", "dev")
            .join("templates/deployment.yaml"),
    )
    .unwrap();
    assert_eq!(template, "# hello dev-2\n");

    // Settled, the controller's own status writes do not wake it: over 5 s only the 2 s
    // rescans (and at most one pass for the last change) run, not a pass per write.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = observed.full_passes();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let passes = observed.full_passes() - before;
    assert!(
        passes <= 4,
        "{passes} full passes in 5 s while nothing changed"
    );

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), controller)
        .await
        .expect("the controller stops on shutdown")
        .unwrap();
}
