//! The registry controller's publish Ingress through `d8 controller` running as ServiceAccount
//! deckhouse with the chart's roles: Ingress `d8-system/registry-push` is created when the
//! `registry` ModuleConfig asks for air gap, replaced when its settings change, and deleted once
//! an upstream is configured — every write the chart's role must allow, seen in the request log.
//! (What the Ingress holds is tested in `crates/registry-controller/tests/publish.rs`.)

use std::path::Path;
use std::process::Command;

use testkit::process::{Service, free_port};

use crate::cni_migration::{apply, eventually, get};
use crate::kubectl;

const INGRESS: [&str; 4] = ["ingress", "registry-push", "-n", "d8-system"];

fn module_config(name: &str, settings: &str) -> String {
    format!(
        "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: {name}\nspec:\n  version: 1\n  enabled: true\n  settings:\n{settings}"
    )
}

/// The `registry` module's settings: air gap (the cache filled from a bundle), with `https`
/// and `whitelist` as given, and an upstream when `primary` is set.
fn registry(https: &str, whitelist: &str, primary: bool) -> String {
    let mut settings = format!(
        "    mode: Managed\n    storage: {{cache: true, source: {{bundleRef: d8-mirror-bundle}}}}\n    ingressClass: private\n    whitelistSourceRanges: [{whitelist}]\n    https: {https}\n"
    );
    if primary {
        settings
            .push_str("    primary: {upstream: {host: \"127.0.0.1:9\", path: /deckhouse/ee}}\n");
    }
    module_config("registry", &settings)
}

fn controller(kubeconfig: &Path, dir: &Path) -> Service {
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--identity", "test-controller", "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .args(["--registry-interval", "200ms"]);
    Service::spawn("d8 controller", command, dir.join("controller.log")).unwrap()
}

#[tokio::test]
async fn the_publish_ingress_is_created_replaced_and_deleted_as_service_account_deckhouse() {
    testkit::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let requests = d.join("requests.jsonl");
    let (apiserver, deckhouse) = crate::rbac::deckhouse_apiserver(&[], &requests).await;
    let admin = apiserver.admin();
    apply(
        &admin,
        d,
        "node.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-1\n",
    );
    apply(
        &admin,
        d,
        "cluster-configuration.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: d8-cluster-configuration\n  namespace: kube-system\nstringData:\n  cluster-configuration.yaml: |\n    apiVersion: deckhouse.io/v1\n    kind: ClusterConfiguration\n    clusterType: Static\n    defaultCRI: Containerd\n    podSubnetCIDR: 10.111.0.0/16\n    kubernetesVersion: Automatic\n",
    );
    apply(
        &admin,
        d,
        "global.yaml",
        &module_config(
            "global",
            "    modules: {publicDomainTemplate: \"%s.kube.example.com\"}\n",
        ),
    );
    apply(
        &admin,
        d,
        "registry.yaml",
        &registry(
            "{mode: CustomCertificate, customCertificate: {secretName: wildcard}}",
            "10.0.0.0/8",
            false,
        ),
    );
    let _controller = controller(&deckhouse, d);

    let whitelist = || {
        get(
            &admin,
            &INGRESS,
            "{.metadata.annotations.nginx\\.ingress\\.kubernetes\\.io/whitelist-source-range}",
        )
    };
    eventually("air-gapped: the publish Ingress is created", || {
        whitelist() == "10.0.0.0/8"
    })
    .await;
    assert_eq!(get(&admin, &INGRESS, "{.spec.ingressClassName}"), "private");

    apply(
        &admin,
        d,
        "registry.yaml",
        &registry("{mode: CertManager}", "172.16.0.0/12", false),
    );
    eventually("the settings changed: the Ingress is replaced", || {
        whitelist() == "172.16.0.0/12"
    })
    .await;
    assert_eq!(
        get(&admin, &INGRESS, "{.spec.tls[0].secretName}"),
        "registry-publish-tls"
    );

    apply(
        &admin,
        d,
        "registry.yaml",
        &registry("{mode: CertManager}", "172.16.0.0/12", true),
    );
    eventually("an upstream is configured: the Ingress is deleted", || {
        let mut args = vec!["get"];
        args.extend_from_slice(&INGRESS);
        !kubectl(&admin, &args).0
    })
    .await;
    crate::rbac::assert_deckhouse_calls("registry_publish", &requests).await;
}
