//! The upstream probe's refusal as a user meets it: `d8 up`, a ModuleConfig naming an upstream
//! without `<path>/release-channel` tags applied with kubectl, and `kubectl get registryconfig`
//! saying what was looked for, where, and how to fix it — and the fix it names working.

use testkit::image::Layout as ImageLayout;
use testkit::process::free_port;
use testkit::push::Registry;
use testkit::{ImageBuilder, Upstream};

use super::Up;
use crate::{kubectl, kubectl_ok};

/// `status message` of RegistryConfig `registry`'s UpstreamValid condition.
fn upstream_valid(admin: &std::path::Path) -> String {
    kubectl(
        admin,
        &[
            "get",
            "registryconfig",
            "registry",
            "-o",
            r#"jsonpath={range .status.conditions[?(@.type=="UpstreamValid")]}{.status} {.reason}: {.message}{end}"#,
        ],
    )
    .1
}

#[tokio::test]
async fn an_upstream_without_release_channel_tags_is_refused_in_words_that_fix_it() {
    let upstream = Upstream::start_plain().await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let registry = Registry::of(&upstream);
    // The release channel images are under /dkp; the user first names /platform.
    let channel = ImageBuilder::new("channel").layer(100).build(&images);
    registry
        .push_image("dkp/release-channel", Some("stable"), &channel)
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = vec![
        format!("--data-dir={}", data.display()),
        "--node-name=local".to_owned(),
        format!("--listen=127.0.0.1:{}", free_port()),
        format!("--agent-address=127.0.0.1:{}", free_port()),
        format!("--agent-metrics-address=127.0.0.1:{}", free_port()),
        format!("--metrics-address=127.0.0.1:{}", free_port()),
        format!(
            "--containerd-registry-dir={}",
            dir.path().join("containerd").display()
        ),
        "--interval=1s".to_owned(),
        "--initial-registry=unmanaged".to_owned(),
        "--without-release-engine".to_owned(),
    ];
    let mut up = Up::start(&args, dir.path().join("up.log"));
    up.wait_until("it prints where everything listens", |log| {
        log.contains("Ctrl-C stops.")
    })
    .await;
    let admin = data.join("apiserver/kubeconfigs/admin.kubeconfig");
    let manifest = dir.path().join("registry.yaml");
    let module_config = |path: &str| {
        format!(
            "apiVersion: deckhouse.io/v1alpha1
kind: ModuleConfig
metadata:
  name: registry
spec:
  version: 1
  enabled: true
  settings:
    mode: Managed
    primary:
      upstream:
        scheme: HTTP
        host: \"{}\"
        path: {path}
",
            upstream.host()
        )
    };
    std::fs::write(&manifest, module_config("/platform")).unwrap();
    kubectl_ok(&admin, &["apply", "-f", &manifest.display().to_string()]);

    let looked_for = format!("{}/platform/release-channel", upstream.host());
    up.wait_until("UpstreamValid turns False", |_| {
        upstream_valid(&admin).starts_with("False")
    })
    .await;
    let condition = upstream_valid(&admin);
    for part in [
        "False SentinelMissing: ".to_owned(),
        format!("looked for release-channel tags in {looked_for}: no such repository (404)"),
        "an upstream must hold the Deckhouse release channel images".to_owned(),
        "set `path` to where the platform images are".to_owned(),
        "`d8 mirror pull` and `d8 mirror push`".to_owned(),
    ] {
        assert!(
            condition.contains(&part),
            "{part:?} missing from {condition:?}"
        );
    }
    let hosts = dir.path().join("containerd/_default/hosts.toml");
    assert!(
        !hosts.exists(),
        "a refused upstream is never handed to the node"
    );

    // The fix the message names first: `path` where the platform images are.
    std::fs::write(&manifest, module_config("/dkp")).unwrap();
    kubectl_ok(&admin, &["apply", "-f", &manifest.display().to_string()]);
    up.wait_until("UpstreamValid turns True with the right path", |_| {
        upstream_valid(&admin).starts_with("True")
    })
    .await;
    up.wait_until("the node gets the upstream", |_| hosts.exists())
        .await;
    assert_eq!(up.terminate().await.code(), Some(0), "{}", up.log());
}
