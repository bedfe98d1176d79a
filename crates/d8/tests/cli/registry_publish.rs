//! The registry controller's publish endpoint through `d8 controller` running as ServiceAccount
//! deckhouse with the chart's roles: Ingress `d8-system/registry-push` is created when the
//! `registry` ModuleConfig asks for air gap, replaced when its settings change, and deleted once
//! an upstream is configured; with it, the copy of the operator's custom certificate or the
//! cert-manager Certificate, and the client certificate the Ingress presents to the replicas
//! (Secret `registry-storage-ingress-client`, its CA given to the replicas in Secret
//! `registry-storage`) — every write the chart's role must allow, seen in the request log.
//! (What the Ingress holds is tested in `crates/registry-controller-plan/src/publish.rs` and
//! `crates/registry-controller/tests/publish.rs`.)

use std::path::Path;
use std::process::Command;

use testkit::process::{Service, free_port};

use crate::cni_migration::{apply, eventually, get};
use crate::kubectl;

const INGRESS: [&str; 4] = ["ingress", "registry-push", "-n", "d8-system"];
const CERTIFICATE: [&str; 4] = [
    "certificates.cert-manager.io",
    "registry-push",
    "-n",
    "d8-system",
];

/// cert-manager's Certificate kind, as far as the controller needs it served.
const CERTIFICATE_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {plural: certificates, singular: certificate, kind: Certificate}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// Node `name` with its one address `ip` (InternalIP), as a kubelet reports it.
fn node(admin: &Path, dir: &Path, name: &str, ip: &str) {
    apply(
        admin,
        dir,
        &format!("{name}.yaml"),
        &format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n"),
    );
    let patch =
        format!(r#"{{"status": {{"addresses": [{{"type": "InternalIP", "address": "{ip}"}}]}}}}"#);
    crate::kubectl_ok(
        admin,
        &[
            "patch",
            "node",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ],
    );
}

/// Lease `d8-system/registry-storage` held by the cache replica on `holder`, renewed now.
fn lease(admin: &Path, dir: &Path, holder: &str) {
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S.%6fZ");
    apply(
        admin,
        dir,
        "lease.yaml",
        &format!(
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: registry-storage\n  namespace: d8-system\nspec:\n  holderIdentity: {holder}\n  leaseDurationSeconds: 3600\n  acquireTime: \"{now}\"\n  renewTime: \"{now}\"\n"
        ),
    );
}

/// EndpointSlice `registry-push-leader`: its address type and addresses.
fn push_slice(admin: &Path) -> String {
    get(
        admin,
        &["endpointslice", "registry-push-leader", "-n", "d8-system"],
        "{.addressType} {.endpoints[*].addresses[*]}",
    )
}

fn exists(admin: &Path, object: &[&str]) -> bool {
    let mut args = vec!["get"];
    args.extend_from_slice(object);
    kubectl(admin, &args).0
}

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
    apply(&admin, d, "certificate-crd.yaml", CERTIFICATE_CRD);
    // The operator's: the replicas' Secret (here without the ingress's CA) and the custom
    // certificate.
    apply(
        &admin,
        d,
        "registry-storage.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: registry-storage\n  namespace: d8-system\nstringData:\n  pull: \"registry-ro:pw\"\n",
    );
    let wildcard = testkit::Certs::new("wildcard-ca").server(&["registry.kube.example.com"]);
    apply(
        &admin,
        d,
        "wildcard.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: wildcard\n  namespace: d8-system\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: {:?}\n  tls.key: {:?}\n",
            wildcard.cert_pem, wildcard.key_pem
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
    // The Ingress names the copy of the custom certificate.
    assert_eq!(
        get(&admin, &INGRESS, "{.spec.tls[0].secretName}"),
        "registry-ingress-tls-customcertificate"
    );
    let copy = [
        "secret",
        "registry-ingress-tls-customcertificate",
        "-n",
        "d8-system",
    ];
    assert_eq!(
        get(&admin, &copy, "{.data.tls\\.crt}"),
        get(
            &admin,
            &["secret", "wildcard", "-n", "d8-system"],
            "{.data.tls\\.crt}"
        )
    );
    // The push path follows the lease: the leader's node address (replaced as the lease moves;
    // deleted and created again when the address family changes).
    node(&admin, d, "node-1", "10.0.0.1");
    node(&admin, d, "node-2", "10.0.0.2");
    node(&admin, d, "node-3", "fd00::3");
    for (holder, want) in [
        ("node-1", "IPv4 10.0.0.1"),
        ("node-2", "IPv4 10.0.0.2"),
        ("node-3", "IPv6 fd00::3"),
    ] {
        lease(&admin, d, holder);
        eventually(
            &format!("the push slice follows the lease to {holder}"),
            || push_slice(&admin) == want,
        )
        .await;
    }
    // A RegistryUpstream: its verdict in its status, its route in every node's layout.
    apply(
        &admin,
        d,
        "upstream.yaml",
        "apiVersion: deckhouse.io/v1alpha1\nkind: RegistryUpstream\nmetadata:\n  name: quay\nspec:\n  match: quay.example:5000\n  upstream: {scheme: HTTP, host: \"127.0.0.1:9\", path: /other}\n",
    );
    eventually("the RegistryUpstream is accepted", || {
        get(&admin, &["registryupstream", "quay"], "{.status.accepted}") == "true"
    })
    .await;
    eventually("its route is in the nodes' layouts", || {
        get(
            &admin,
            &["registrynode", "node-2"],
            "{.spec.additionalRoutes[*].match}",
        )
        .contains("quay.example:5000")
    })
    .await;

    // The client certificate the Ingress presents, and its CA given to the replicas.
    let client = [
        "secret",
        "registry-storage-ingress-client",
        "-n",
        "d8-system",
    ];
    eventually("the ingress's client certificate is issued", || {
        exists(&admin, &client)
    })
    .await;
    assert_eq!(get(&admin, &client, "{.type}"), "kubernetes.io/tls");
    assert_eq!(
        get(
            &admin,
            &["secret", "registry-storage", "-n", "d8-system"],
            "{.data.ingress-client-ca\\.crt}"
        ),
        get(&admin, &client, "{.data.ca\\.crt}")
    );

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
        "registry-ingress-tls"
    );
    // CertManager: cert-manager's Certificate instead of the copy.
    assert_eq!(
        get(&admin, &CERTIFICATE, "{.spec.issuerRef.name}"),
        "letsencrypt"
    );
    eventually("the copy of the custom certificate goes", || {
        !exists(&admin, &copy)
    })
    .await;
    apply(
        &admin,
        d,
        "registry.yaml",
        &registry(
            "{mode: CertManager, certManager: {clusterIssuerName: corp}}",
            "172.16.0.0/12",
            false,
        ),
    );
    eventually("another issuer: the Certificate is replaced", || {
        get(&admin, &CERTIFICATE, "{.spec.issuerRef.name}") == "corp"
    })
    .await;

    apply(
        &admin,
        d,
        "registry.yaml",
        &registry("{mode: CertManager}", "172.16.0.0/12", true),
    );
    eventually("an upstream is configured: the Ingress is deleted", || {
        !exists(&admin, &INGRESS)
    })
    .await;
    eventually("and its Certificate", || !exists(&admin, &CERTIFICATE)).await;
    crate::rbac::assert_deckhouse_calls("registry_publish", &requests).await;
}
