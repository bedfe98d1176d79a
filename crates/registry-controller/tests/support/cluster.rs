//! What the registry controller's integration tests share: the embedded API server with our
//! CRDs, an admin client, a node, and ClusterConfiguration written as the installer writes it.

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Client;
use kube::api::{Api, PostParams};

pub(crate) async fn cluster() -> (apiserver::RunningServer, tempfile::TempDir) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let crds = api::crds::all()
        .into_iter()
        .map(|crd| serde_json::to_value(crd).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = apiserver::ApiServer::builder()
        .data_dir(dir.path())
        .crds(crds)
        .namespace("d8-system")
        .serve(listener)
        .await
        .unwrap();
    (server, dir)
}

pub(crate) async fn client(server: &apiserver::RunningServer) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(server.admin_kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Writes ClusterConfiguration as the installer does.
pub(crate) async fn cluster_configuration(admin: &Client, cluster_type: &str, cri: &str) {
    let api: Api<Secret> = Api::namespaced(admin.clone(), "kube-system");
    let yaml = format!(
        "apiVersion: deckhouse.io/v1\nkind: ClusterConfiguration\nclusterType: {cluster_type}\n\
         defaultCRI: {cri}\npodSubnetCIDR: 10.111.0.0/16\nkubernetesVersion: Automatic\n"
    );
    let object: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "d8-cluster-configuration", "namespace": "kube-system"},
        "stringData": {"cluster-configuration.yaml": yaml},
    }))
    .unwrap();
    match api.get_opt("d8-cluster-configuration").await.unwrap() {
        None => {
            api.create(&PostParams::default(), &object).await.unwrap();
        }
        Some(existing) => {
            let mut object = object;
            object.metadata.resource_version = existing.metadata.resource_version;
            api.replace("d8-cluster-configuration", &PostParams::default(), &object)
                .await
                .unwrap();
        }
    }
}

/// Node `name`, with nothing but its name, as the registry controller's tests need one.
pub(crate) async fn node(admin: &Client, name: &str) {
    let node: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    Api::<Node>::all(admin.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
}
