//! The ModuleConfig `registry` that `d8 up` makes on its first start is replaced cleanly by the
//! README's `kubectl apply -f examples/moduleconfig-registry.yaml`, client-side and
//! `--server-side`: no warning, no conflict, and the air-gap `storage.source.bundleRef` is gone.

use testkit::process::free_port;

use super::Up;
use crate::{example, kubectl};

async fn fresh_up(dir: &std::path::Path) -> (Up, std::path::PathBuf) {
    let data = dir.join("data");
    let args = vec![
        format!("--data-dir={}", data.display()),
        "--node-name=local".to_owned(),
        format!("--listen=127.0.0.1:{}", free_port()),
        format!("--agent-address=127.0.0.1:{}", free_port()),
        format!("--agent-metrics-address=127.0.0.1:{}", free_port()),
        format!("--metrics-address=127.0.0.1:{}", free_port()),
        format!("--storage-read-address=127.0.0.1:{}", free_port()),
        format!("--storage-write-address=127.0.0.1:{}", free_port()),
        format!("--storage-metrics-address=127.0.0.1:{}", free_port()),
        "--storage-reserve=64Mi".to_owned(),
        format!(
            "--containerd-registry-dir={}",
            dir.join("containerd").display()
        ),
        "--without-release-engine".to_owned(),
    ];
    let mut up = Up::start(&args, dir.join("up.log"));
    up.wait_until("it is up", |log| log.contains("Ctrl-C stops."))
        .await;
    (up, data.join("apiserver/kubeconfigs/admin.kubeconfig"))
}

#[tokio::test]
async fn kubectl_apply_of_the_example_replaces_the_air_gap_config_both_ways() {
    for server_side in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (_up, admin) = fresh_up(dir.path()).await;
        let source = |admin| {
            kubectl(
                admin,
                &[
                    "get",
                    "mc",
                    "registry",
                    "-o",
                    "jsonpath={.spec.settings.storage}",
                ],
            )
            .1
        };
        assert!(source(&admin).contains("bundleRef"), "the air-gap start");
        if !server_side {
            // `kubectl get mc` shows Deckhouse's status for each built-in module d8 up runs.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                let (_, table, _) = kubectl(&admin, &["get", "mc"]);
                let registry: Vec<_> = table
                    .lines()
                    .filter(|l| l.starts_with("registry "))
                    .collect();
                let shown = registry.len() == 1
                    && registry[0].split_whitespace().collect::<Vec<_>>()[1..3] == ["true", "1"];
                if shown && !table.contains("Ignored") {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "kubectl get mc:\n{table}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
        }
        let mut args = vec!["apply", "-f"];
        let file = example("moduleconfig-registry.yaml");
        args.push(&file);
        if server_side {
            args.push("--server-side");
        }
        let (ok, out, err) = kubectl(&admin, &args);
        assert!(ok, "server-side {server_side}: {out}\n{err}");
        assert!(!err.contains("Warning"), "server-side {server_side}: {err}");
        assert_eq!(
            source(&admin),
            "",
            "server-side {server_side}: storage left behind"
        );
        let host = kubectl(
            &admin,
            &[
                "get",
                "mc",
                "registry",
                "-o",
                "jsonpath={.spec.settings.primary.upstream.host}",
            ],
        )
        .1;
        assert_eq!(host, "registry.deckhouse.io");
    }
}
