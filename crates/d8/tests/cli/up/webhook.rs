//! `d8 up` validates and converts through `d8 webhook`: it registers the webhook (the
//! ValidatingWebhookConfiguration `deckhouse-webhook`, ModuleUpdatePolicy's conversion) with a
//! certificate it keeps under the data directory, and kubectl sees every Deckhouse message of
//! ours unchanged. The embedded server keeps in process only the rules kube-apiserver runs
//! itself in Deckhouse, so without the registration the ModuleConfig rules would not refuse
//! anything. A restart on a new port registers the new one before anything is written.

use std::os::unix::fs::PermissionsExt as _;

use testkit::process::free_port;

use super::Up;
use crate::admission::{
    every_rule_refuses_with_deckhouses_message, update_policies_read_back_in_both_versions,
};
use crate::kubectl_ok;

/// The webhook's address from `d8 up`'s banner.
fn webhook_address(log: &str) -> String {
    log.lines()
        .find_map(|l| l.trim().strip_prefix("admission webhook"))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no webhook line in:\n{log}"))
        .to_owned()
}

#[tokio::test]
async fn d8_up_validates_and_converts_through_d8_webhook_and_registers_it_again_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = |webhook_port: u16| {
        vec![
            format!("--data-dir={}", data.display()),
            "--node-name=local".to_owned(),
            format!("--listen=127.0.0.1:{}", free_port()),
            format!("--agent-address=127.0.0.1:{}", free_port()),
            format!("--agent-metrics-address=127.0.0.1:{}", free_port()),
            format!("--metrics-address=127.0.0.1:{}", free_port()),
            format!("--webhook-address=127.0.0.1:{webhook_port}"),
            format!(
                "--containerd-registry-dir={}",
                dir.path().join("containerd").display()
            ),
            "--initial-registry=unmanaged".to_owned(),
            "--without-release-engine".to_owned(),
        ]
    };
    let mut up = Up::start(&args(0), dir.path().join("up-1.log"));
    up.wait_until("it is up", |log| log.contains("Ctrl-C stops."))
        .await;
    let admin = data.join("apiserver/kubeconfigs/admin.kubeconfig");
    let first = webhook_address(&up.log());
    assert!(first.starts_with("https://127.0.0.1:"), "{first}");

    // Registered under Deckhouse's names, at the address it listens on, with its CA.
    let urls = kubectl_ok(
        &admin,
        &[
            "get",
            "validatingwebhookconfiguration",
            "deckhouse-webhook",
            "-o",
            "jsonpath={range .webhooks[*]}{.name} {.clientConfig.url}{\"\\n\"}{end}",
        ],
    );
    assert!(
        urls.contains(&format!(
            "module-configs.deckhouse-webhook.deckhouse.io {first}/validate/v1alpha1/module-configs"
        )),
        "{urls}"
    );
    let conversion = kubectl_ok(
        &admin,
        &[
            "get",
            "crd",
            "moduleupdatepolicies.deckhouse.io",
            "-o",
            "jsonpath={.spec.conversion.strategy} {.spec.conversion.webhook.clientConfig.url}",
        ],
    );
    assert_eq!(conversion, format!("Webhook {first}/convert"));
    let pki = data.join("webhook");
    for file in ["ca.crt", "ca.key", "tls.crt", "tls.key"] {
        let mode = std::fs::metadata(pki.join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    let ca = std::fs::read(pki.join("ca.crt")).unwrap();

    every_rule_refuses_with_deckhouses_message(&admin);
    update_policies_read_back_in_both_versions(&admin);
    assert!(up.terminate().await.success(), "{}", up.log());

    // A restart on another port: the stored configuration (failurePolicy Fail) names a port
    // nobody listens on until the new registration replaces it, before d8 up writes anything.
    let port = free_port();
    let mut up = Up::start(&args(port), dir.path().join("up-2.log"));
    up.wait_until("it is up again", |log| log.contains("Ctrl-C stops."))
        .await;
    let second = webhook_address(&up.log());
    assert_eq!(second, format!("https://127.0.0.1:{port}"));
    let url = kubectl_ok(
        &admin,
        &[
            "get",
            "validatingwebhookconfiguration",
            "deckhouse-webhook",
            "-o",
            "jsonpath={.webhooks[0].clientConfig.url}",
        ],
    );
    assert_eq!(url, format!("{second}/validate/v1alpha1/module-configs"));
    // The same CA: the certificate is kept, not made again at every start.
    assert_eq!(std::fs::read(pki.join("ca.crt")).unwrap(), ca);
    // Writes and reads through the webhook on its new port.
    let (ok, _, stderr) = crate::kubectl(
        &admin,
        &[
            "patch",
            "moduleconfig",
            "echo",
            "--type=merge",
            "-p",
            "{\"spec\":{\"settings\":{\"replicas\":9}}}",
        ],
    );
    assert!(!ok);
    assert!(
        stderr.contains("admission webhook \"module-configs.deckhouse-webhook.deckhouse.io\" denied the request: spec.settings are not valid (version 1)"),
        "{stderr}"
    );
    let mode = kubectl_ok(
        &admin,
        &[
            "get",
            "moduleupdatepolicies.v1alpha1.deckhouse.io",
            "policy-ignore",
            "-o",
            "jsonpath={.spec.update.mode}",
        ],
    );
    assert_eq!(mode, "Ignore");
    assert!(up.terminate().await.success(), "{}", up.log());
}
