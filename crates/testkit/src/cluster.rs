//! An embedded API server with every CRD of ours and the `d8-system` namespace, and kube
//! clients on it: the fixture of every test that needs a cluster (feature `kube`).
//!
//! ```no_run
//! # async fn example() {
//! let cluster = testkit::Cluster::start().await;
//! let client = cluster.client().await;
//! # }
//! ```

use std::path::Path;

/// A running embedded API server in a temporary directory (removed on drop).
#[derive(Debug)]
pub struct Cluster {
    server: apiserver::RunningServer,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// A server with every CRD of `api::crds::all`, `d8-system`, and no admission hook.
    pub async fn start() -> Self {
        Self::start_with(|b| b).await
    }

    /// Like [`Cluster::start`], with `customize` applied to the builder last (users, a
    /// validator, a converter, plain HTTP…). Its data directory is `dir()/apiserver`.
    pub async fn start_with(
        customize: impl FnOnce(apiserver::Builder) -> apiserver::Builder,
    ) -> Self {
        crate::install_crypto();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let crds = api::crds::all()
            .into_iter()
            .map(|crd| serde_json::to_value(crd).expect("a CRD serializes"));
        let builder = apiserver::ApiServer::builder()
            .data_dir(dir.path().join("apiserver"))
            .crds(crds)
            .namespace("d8-system");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let server = customize(builder)
            .serve(listener)
            .await
            .expect("the embedded API server starts");
        Self { server, dir }
    }

    /// The running server.
    pub fn server(&self) -> &apiserver::RunningServer {
        &self.server
    }

    /// The temporary directory the test may use (the server keeps its data under `apiserver`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the server (its data stays until the cluster is dropped).
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        self.server.url()
    }

    /// The kubeconfig of `user` (one of the server's users).
    pub fn kubeconfig(&self, user: &str) -> Option<&Path> {
        self.server.kubeconfigs().get(user).map(|p| p.as_path())
    }

    /// The admin kubeconfig.
    pub fn admin_kubeconfig(&self) -> &Path {
        self.server.admin_kubeconfig()
    }

    /// A client with the admin's credentials.
    pub async fn client(&self) -> kube::Client {
        client(self.server.admin_kubeconfig()).await
    }
}

/// A kube client from a kubeconfig file.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    crate::install_crypto();
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a client configuration");
    kube::Client::try_from(config).expect("a kube client")
}
