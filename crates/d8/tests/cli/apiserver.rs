//! `kubectl` against `d8 apiserver`: Deckhouse's examples apply, show their printer columns and
//! delete; invalid variants are refused with Deckhouse's messages.

use crate::{Apiserver, example, kubectl, kubectl_ok};

#[tokio::test]
async fn kubectl_applies_gets_and_deletes_deckhouse_resources() {
    let server = Apiserver::start(&[]).await;
    let admin = server.admin();
    for file in [
        "registry-upstream.yaml",
        "module-update-policy.yaml",
        "moduleconfig-registry.yaml",
    ] {
        let out = kubectl_ok(&admin, &["apply", "-f", &example(file)]);
        assert!(out.contains("created"), "{out}");
    }
    let table = kubectl_ok(&admin, &["get", "registryupstreams"]);
    assert!(table.contains("virtualization-images"), "{table}");
    let header = table.lines().next().unwrap_or_default().to_owned();
    assert!(header.starts_with("NAME"), "{table}");
    let policies = kubectl_ok(
        &admin,
        &[
            "get",
            "mup",
            "-o",
            "jsonpath={.items[0].spec.update.windows[0].from}",
        ],
    );
    assert_eq!(policies, "13:30");
    kubectl_ok(
        &admin,
        &["delete", "-f", &example("registry-upstream.yaml")],
    );
    let (_, _, missing) = kubectl(
        &admin,
        &["get", "registryupstream", "virtualization-images"],
    );
    assert!(
        missing.contains("NotFound") || missing.contains("not found"),
        "{missing}"
    );
}

#[tokio::test]
async fn invalid_variants_are_refused_with_deckhouses_messages() {
    let server = Apiserver::start(&[]).await;
    let admin = server.admin();
    let (ok, _, stderr) = kubectl(
        &admin,
        &[
            "apply",
            "-f",
            &example("invalid/module-update-policy-reversed-window.yaml"),
        ],
    );
    assert!(!ok);
    assert!(
        stderr.contains("Start time (windows.from) should be less than the end time of the update window (windows.to)"),
        "{stderr}"
    );
    let (ok, _, stderr) = kubectl(
        &admin,
        &[
            "apply",
            "-f",
            &example("invalid/moduleconfig-registry-unmanaged-with-primary.yaml"),
        ],
    );
    assert!(!ok);
    assert!(
        stderr.contains("set 'mode: Managed' to apply these settings"),
        "{stderr}"
    );
    // Nothing was stored.
    let (_, _, missing) = kubectl(&admin, &["get", "moduleconfig", "registry"]);
    assert!(missing.contains("not found"), "{missing}");
}
