//! Authentication (tokens, client certificates) and RBAC-like authorization.

#[path = "support/common.rs"]
mod common;

use apiserver::{Rule, User};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const REGISTRY_NODE_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: registrynodes.deckhouse.io
spec:
  group: deckhouse.io
  scope: Cluster
  names: {plural: registrynodes, singular: registrynode, kind: RegistryNode}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"#;

fn status_code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API error: {other:?}"),
    }
}

#[tokio::test]
async fn registry_agent_reads_only_its_node_and_one_secret() {
    let s = common::start_with(|b| {
        b.crd_yaml(REGISTRY_NODE_CRD)
            .unwrap()
            .namespace("d8-system")
            .user(User::registry_agent("node1"))
    })
    .await;
    let admin = s.admin().await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "RegistryNode"),
        "registrynodes",
    );
    let rn_admin: Api<DynamicObject> = Api::all_with(admin.clone(), &ar);
    for n in ["node1", "node2"] {
        let o: DynamicObject = serde_json::from_value(json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "RegistryNode", "metadata": {"name": n}, "spec": {"mode": "Direct"}})).unwrap();
        rn_admin.create(&PostParams::default(), &o).await.unwrap();
    }
    let sec_admin: Api<Secret> = Api::namespaced(admin.clone(), "d8-system");
    for n in ["registry-resolved-auth", "other"] {
        let o: Secret = serde_json::from_value(
            json!({"metadata": {"name": n}, "stringData": {}, "data": {"k": "dg=="}}),
        )
        .unwrap();
        sec_admin.create(&PostParams::default(), &o).await.unwrap();
    }

    let agent = s.client("system:registry-agent:node1").await;
    let rn: Api<DynamicObject> = Api::all_with(agent.clone(), &ar);
    assert_eq!(
        rn.get("node1").await.unwrap().data["spec"]["mode"],
        "Direct"
    );
    assert_eq!(status_code(rn.get("node2").await.unwrap_err()), 403);
    assert_eq!(
        status_code(rn.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    let patched = rn
        .patch_status(
            "node1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["ready"], true);
    assert_eq!(
        status_code(
            rn.patch_status(
                "node2",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {}}))
            )
            .await
            .unwrap_err()
        ),
        403
    );
    let err = rn
        .patch(
            "node1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"mode": "Proxy"}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else { panic!() };
    assert_eq!(e.code, 403);
    assert_eq!(
        e.message,
        r#"registrynodes "node1" is forbidden: User "system:registry-agent:node1" cannot patch resource "registrynodes" in API group "deckhouse.io" at the cluster scope"#
    );

    let secrets: Api<Secret> = Api::namespaced(agent.clone(), "d8-system");
    assert!(
        secrets
            .get("registry-resolved-auth")
            .await
            .unwrap()
            .data
            .unwrap()
            .contains_key("k")
    );
    assert_eq!(status_code(secrets.get("other").await.unwrap_err()), 403);
    assert_eq!(
        status_code(secrets.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    let all: Api<Secret> = Api::all(agent.clone());
    assert_eq!(
        status_code(all.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    assert_eq!(
        status_code(
            secrets
                .list(&ListParams::default().fields("metadata.name=registry-resolved-auth"))
                .await
                .unwrap_err()
        ),
        403
    );
    let default_ns: Api<Secret> = Api::namespaced(agent.clone(), "default");
    assert_eq!(
        status_code(default_ns.get("registry-resolved-auth").await.unwrap_err()),
        403
    );
    let cms: Api<ConfigMap> = Api::namespaced(agent, "d8-system");
    assert_eq!(
        status_code(cms.list(&ListParams::default()).await.unwrap_err()),
        403
    );
}

#[tokio::test]
async fn unauthenticated_and_certificate_users() {
    let s = common::start_with(|b| {
        b.user(
            User::new("viewer")
                .rule(
                    Rule::new(&["get", "list", "watch"], &[""], &["configmaps"])
                        .in_namespaces(&["default"]),
                )
                .with_client_cert(),
        )
    })
    .await;
    // The viewer's kubeconfig holds a client certificate, not a token.
    let kc = std::fs::read_to_string(s.server.kubeconfig("viewer").unwrap()).unwrap();
    assert!(kc.contains("client-certificate-data") && !kc.contains("token:"));
    let viewer = s.client("viewer").await;
    let cms: Api<ConfigMap> = Api::namespaced(viewer, "default");
    assert!(
        cms.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let o: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    assert_eq!(
        status_code(cms.create(&PostParams::default(), &o).await.unwrap_err()),
        403
    );

    // No credentials, or a wrong token: 401. Health and version stay public.
    common::init();
    let mut cfg = kube::Config::new(s.server.url().parse().unwrap());
    cfg.root_cert = Some(vec![
        rustls_pki_types::pem::PemObject::from_pem_slice(s.server.ca_pem().unwrap().as_bytes())
            .map(|c: rustls_pki_types::CertificateDer<'static>| c.to_vec())
            .unwrap(),
    ]);
    let anon = kube::Client::try_from(cfg.clone()).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(anon.clone(), "default");
    assert_eq!(
        status_code(cms.list(&ListParams::default()).await.unwrap_err()),
        401
    );
    assert_eq!(anon.apiserver_version().await.unwrap().minor, "31");
    cfg.auth_info.token = Some("not-a-token".to_string().into());
    let wrong = kube::Client::try_from(cfg).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(wrong, "default");
    assert_eq!(
        status_code(cms.list(&ListParams::default()).await.unwrap_err()),
        401
    );
}
