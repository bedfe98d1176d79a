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
        r#"registrynodes.deckhouse.io "node1" is forbidden: User "system:registry-agent:node1" cannot patch resource "registrynodes" in API group "deckhouse.io" at the cluster scope"#
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

/// TokenReview names a token's holder; SubjectAccessReview answers from the RBAC objects
/// stored (and those objects grant ordinary requests too); only a caller allowed to create
/// reviews may ask.
#[tokio::test]
async fn token_and_subject_access_reviews_follow_stored_rbac() {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    use k8s_openapi::api::authorization::v1::{
        NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let s = common::start_with(|b| {
        b.namespace("d8-system")
            .user(User::new("prometheus").group("d8:monitoring"))
            .user(User::new("nobody"))
    })
    .await;
    let admin = s.admin().await;
    let token = s.server.token("prometheus").unwrap().to_string();

    let reviews: Api<TokenReview> = Api::all(admin.clone());
    let review = |token: &str| TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let answered = reviews
        .create(&PostParams::default(), &review(&token))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(answered.authenticated, Some(true));
    let user = answered.user.unwrap();
    assert_eq!(user.username.as_deref(), Some("prometheus"));
    assert_eq!(
        user.groups.unwrap(),
        ["d8:monitoring", "system:authenticated"]
    );
    let forged = reviews
        .create(&PostParams::default(), &review("not-a-token"))
        .await
        .unwrap();
    assert_ne!(forged.status.unwrap().authenticated, Some(true));

    let sar = |user: &str, groups: &[&str], path: Option<&str>| SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(groups.iter().map(|g| (*g).to_string()).collect()),
            non_resource_attributes: path.map(|p| NonResourceAttributes {
                path: Some(p.into()),
                verb: Some("get".into()),
            }),
            resource_attributes: path.is_none().then(|| ResourceAttributes {
                namespace: Some("d8-system".into()),
                verb: Some("get".into()),
                group: Some("apps".into()),
                resource: Some("deployments".into()),
                subresource: Some("prometheus-metrics".into()),
                name: Some("deckhouse".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let sars: Api<SubjectAccessReview> = Api::all(admin.clone());
    let allowed = |review: SubjectAccessReview| {
        let sars = sars.clone();
        async move {
            let status = sars
                .create(&PostParams::default(), &review)
                .await
                .unwrap()
                .status
                .unwrap();
            (status.allowed, status.reason.unwrap_or_default())
        }
    };
    let group = &["d8:monitoring", "system:authenticated"][..];
    assert!(!allowed(sar("prometheus", group, None)).await.0);
    assert!(!allowed(sar("prometheus", group, Some("/metrics"))).await.0);

    // The grants Deckhouse gives its Prometheus: a ClusterRole for non-resource URLs bound to
    // a group, a Role for one Deployment's metrics bound to a user.
    let cluster_role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "d8:scrape"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &cluster_role)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "d8:scrape"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "d8:scrape"},
        "subjects": [{"kind": "Group", "name": "d8:monitoring"}]})).unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "scrape", "namespace": "d8-system"},
        "rules": [{"apiGroups": ["apps"], "resources": ["deployments/prometheus-metrics"],
                   "resourceNames": ["deckhouse"], "verbs": ["get"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]}))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), "d8-system")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "scrape", "namespace": "d8-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "scrape"},
        "subjects": [{"kind": "User", "name": "prometheus"}]}))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "d8-system")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    assert_eq!(
        allowed(sar("prometheus", &[], None)).await,
        (
            true,
            r#"RBAC: allowed by RoleBinding "scrape" of Role "scrape" to User "prometheus" in namespace "d8-system""#.into()
        )
    );
    assert_eq!(
        allowed(sar("prometheus", group, Some("/metrics"))).await,
        (
            true,
            r#"RBAC: allowed by ClusterRoleBinding "d8:scrape" of ClusterRole "d8:scrape" to Group "d8:monitoring""#.into()
        )
    );
    assert!(!allowed(sar("nobody", &[], None)).await.0);
    assert!(
        !allowed(sar("prometheus", group, Some("/debug/pprof")))
            .await
            .0
    );

    // The Role grants real requests as well.
    let prometheus = s.client("prometheus").await;
    let cms: Api<ConfigMap> = Api::namespaced(prometheus.clone(), "d8-system");
    cms.list(&ListParams::default()).await.unwrap();
    let other: Api<ConfigMap> = Api::namespaced(prometheus.clone(), "default");
    assert_eq!(
        status_code(other.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    // Asking needs `create` on the reviews (system:auth-delegator in a cluster).
    let e = Api::<SubjectAccessReview>::all(prometheus)
        .create(&PostParams::default(), &sar("prometheus", &[], None))
        .await
        .unwrap_err();
    let kube::Error::Api(e) = e else { panic!() };
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            r#"subjectaccessreviews.authorization.k8s.io is forbidden: User "prometheus" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope"#
        )
    );
}

#[tokio::test]
async fn the_request_log_records_who_did_what_with_the_verdict() {
    let log = apiserver::RequestLog::new();
    let s = common::start_with(|b| {
        b.crd_yaml(REGISTRY_NODE_CRD)
            .unwrap()
            .namespace("d8-system")
            .user(User::registry_agent("node1"))
            .request_log(log.clone())
    })
    .await;
    let admin = s.admin().await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "RegistryNode"),
        "registrynodes",
    );
    let o: DynamicObject = serde_json::from_value(json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "RegistryNode", "metadata": {"name": "node1"}, "spec": {}})).unwrap();
    Api::<DynamicObject>::all_with(admin, &ar)
        .create(&PostParams::default(), &o)
        .await
        .unwrap();

    let agent = s.client("system:registry-agent:node1").await;
    let rn: Api<DynamicObject> = Api::all_with(agent, &ar);
    rn.patch_status(
        "node1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"reconciled": true}})),
    )
    .await
    .unwrap();
    assert_eq!(status_code(rn.get("node2").await.unwrap_err()), 403);

    let seen: Vec<apiserver::LoggedRequest> = log
        .entries()
        .into_iter()
        .filter(|r| r.user == "system:registry-agent:node1")
        .collect();
    let entry =
        |verb: &str, sub: Option<&str>, name: &str, allowed: bool| apiserver::LoggedRequest {
            user: "system:registry-agent:node1".to_owned(),
            verb: verb.to_owned(),
            group: "deckhouse.io".to_owned(),
            resource: "registrynodes".to_owned(),
            subresource: sub.map(str::to_owned),
            namespace: None,
            name: Some(name.to_owned()),
            allowed,
        };
    assert_eq!(
        seen,
        vec![
            entry("patch", Some("status"), "node1", true),
            entry("get", None, "node2", false),
        ]
    );
    assert!(
        log.entries()
            .iter()
            .any(|r| r.verb == "create" && r.resource == "registrynodes" && r.allowed),
        "the admin's create is recorded too"
    );
}

#[tokio::test]
async fn the_bootstrap_cluster_admin_role_grants_what_it_is_bound_to() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let s = common::start_with(|b| b.namespace("d8-system").user(User::new("operator"))).await;
    let admin = s.admin().await;
    let role = Api::<ClusterRole>::all(admin.clone())
        .get("cluster-admin")
        .await
        .unwrap();
    let rules = serde_json::to_value(role.rules.unwrap()).unwrap();
    assert_eq!(rules[0]["verbs"], json!(["*"]));
    let operator = s.client("operator").await;
    let secrets: Api<Secret> = Api::namespaced(operator.clone(), "d8-system");
    let refused = secrets.list(&Default::default()).await.unwrap_err();
    assert_eq!(status_code(refused), 403);
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "operator-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "User", "name": "operator"}]}))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    secrets.list(&Default::default()).await.unwrap();
}

/// Retries `check` for up to 5 s: ClusterRole aggregation follows a change as
/// kube-controller-manager's does, shortly after it.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if check().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{what}: not within 5 s");
}

#[tokio::test]
async fn view_bound_in_a_namespace_reads_there_and_aggregated_roles_extend_it() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
    let s = common::start_with(|b| b.namespace("d8-system").user(User::new("viewer"))).await;
    let admin = s.admin().await;
    let roles = Api::<ClusterRole>::all(admin.clone());
    for name in ["admin", "edit", "view"] {
        let role = roles.get(name).await.unwrap();
        assert_eq!(
            role.metadata.labels.unwrap()["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
        assert_eq!(
            role.metadata.annotations.unwrap()["rbac.authorization.kubernetes.io/autoupdate"],
            "true"
        );
        assert!(role.aggregation_rule.is_some(), "{name} is aggregated");
        assert!(
            !role.rules.unwrap_or_default().is_empty(),
            "{name} has rules"
        );
    }
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "viewer", "namespace": "d8-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "viewer"}]}))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "d8-system")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "settings"}})).unwrap();
    Api::<ConfigMap>::namespaced(admin.clone(), "d8-system")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    let viewer = s.client("viewer").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(viewer.clone(), "d8-system");
    let secrets: Api<Secret> = Api::namespaced(viewer.clone(), "d8-system");
    configmaps.get("settings").await.unwrap();
    configmaps.list(&ListParams::default()).await.unwrap();
    let refused = configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_err();
    assert_eq!(status_code(refused), 403, "view does not write");
    let refused = configmaps
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "b"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(refused), 403, "view does not patch");
    assert_eq!(
        status_code(secrets.list(&ListParams::default()).await.unwrap_err()),
        403,
        "view reads no Secrets"
    );
    let elsewhere: Api<ConfigMap> = Api::namespaced(viewer.clone(), "default");
    assert_eq!(
        status_code(elsewhere.list(&ListParams::default()).await.unwrap_err()),
        403,
        "the binding grants only in its namespace"
    );

    // A role labelled to aggregate into view (as Deckhouse's user-authz roles are) extends it.
    let extra: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "user-authz:secrets-reader",
                     "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]}))
    .unwrap();
    roles.create(&PostParams::default(), &extra).await.unwrap();
    eventually("view reads Secrets once a role aggregates into it", || {
        let secrets = secrets.clone();
        async move { secrets.list(&ListParams::default()).await.is_ok() }
    })
    .await;
    let granted = |role: ClusterRole| {
        role.rules.unwrap_or_default().iter().any(|r| {
            r.resources.as_deref() == Some(&["secrets".to_owned()][..])
                && r.verbs == ["get", "list"]
        })
    };
    assert!(
        granted(roles.get("view").await.unwrap()),
        "view lists the rule"
    );
    assert!(granted(roles.get("edit").await.unwrap()), "edit holds view");
    assert!(
        granted(roles.get("admin").await.unwrap()),
        "admin holds edit"
    );
    assert_eq!(
        status_code(elsewhere.list(&ListParams::default()).await.unwrap_err()),
        403
    );

    // The label taken off: view is back to what it was.
    roles
        .patch(
            "user-authz:secrets-reader",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"rbac.authorization.k8s.io/aggregate-to-view": null}}})),
        )
        .await
        .unwrap();
    eventually(
        "view stops reading Secrets once the role no longer aggregates",
        || {
            let secrets = secrets.clone();
            async move { secrets.list(&ListParams::default()).await.is_err() }
        },
    )
    .await;
    assert!(!granted(roles.get("admin").await.unwrap()));
}

#[tokio::test]
async fn an_apply_that_creates_needs_create_as_kube_apiserver_authorizes_it() {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let log = apiserver::RequestLog::new();
    let s = common::start_with(|b| {
        b.namespace("d8-system")
            .user(User::new("applier"))
            .request_log(log.clone())
    })
    .await;
    let admin = s.admin().await;
    let grant = |verbs: &[&str]| -> Role {
        serde_json::from_value(json!({
            "metadata": {"name": "applier", "namespace": "d8-system"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]}))
        .unwrap()
    };
    let roles: Api<Role> = Api::namespaced(admin.clone(), "d8-system");
    roles
        .create(&PostParams::default(), &grant(&["patch"]))
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "applier", "namespace": "d8-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "applier"},
        "subjects": [{"kind": "User", "name": "applier"}]}))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "d8-system")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let applier = s.client("applier").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(applier, "d8-system");
    let apply = |value: &str| {
        Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "applied"}, "data": {"k": value}}))
    };
    let params = PatchParams::apply("applier");
    let refused = configmaps
        .patch("applied", &params, &apply("a"))
        .await
        .unwrap_err();
    match refused {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 403);
            assert_eq!(
                status.message,
                r#"configmaps "applied" is forbidden: User "applier" cannot create resource "configmaps" in API group "" in the namespace "d8-system""#
            );
        }
        other => panic!("not an API error: {other:?}"),
    }
    assert!(
        Api::<ConfigMap>::namespaced(admin.clone(), "d8-system")
            .get_opt("applied")
            .await
            .unwrap()
            .is_none()
    );

    // Once it exists, patch alone is enough to apply to it.
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "applied"}})).unwrap();
    Api::<ConfigMap>::namespaced(admin.clone(), "d8-system")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    configmaps
        .patch("applied", &params, &apply("b"))
        .await
        .unwrap();

    let checked: Vec<(String, bool)> = log
        .entries()
        .into_iter()
        .filter(|r| r.user == "applier")
        .map(|r| (r.verb, r.allowed))
        .collect();
    let owned = |v: &str, a: bool| (v.to_owned(), a);
    assert_eq!(
        checked,
        [
            owned("patch", true),
            owned("create", false),
            owned("patch", true)
        ]
    );
}

/// As kube-apiserver, authorization comes before routing: a resource no API serves (here
/// NodeGroups, whose CRD is not installed) is `403 Forbidden` to a caller not granted it, and
/// `404` only to one that is, so a component missing a grant finds out here, not in a cluster
/// where the kind exists.
#[tokio::test]
async fn a_resource_nobody_serves_is_forbidden_before_it_is_not_found() {
    let s = common::start_with(|b| b.user(User::registry_agent("node1"))).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", "v1", "NodeGroup"),
        "nodegroups",
    );
    let agent: Api<DynamicObject> =
        Api::all_with(s.client("system:registry-agent:node1").await, &ar);
    let err = agent.get("master").await.unwrap_err();
    let kube::Error::Api(e) = err else { panic!() };
    assert_eq!(e.code, 403);
    assert_eq!(
        e.message,
        r#"nodegroups.deckhouse.io "master" is forbidden: User "system:registry-agent:node1" cannot get resource "nodegroups" in API group "deckhouse.io" at the cluster scope"#
    );
    assert_eq!(
        status_code(agent.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    let admin: Api<DynamicObject> = Api::all_with(s.admin().await, &ar);
    assert!(
        admin.get_opt("master").await.unwrap().is_none(),
        "404 to admin"
    );
}
