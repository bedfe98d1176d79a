//! The Kubernetes client every subcommand that talks to an API server builds the same way.

use std::path::Path;

use anyhow::Context as _;
use kube::Client;

/// A client from `kubeconfig`, or, without one, from the environment (in-cluster service
/// account, `$KUBECONFIG`, `~/.kube/config`).
pub(crate) async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<Client> {
    let Some(path) = kubeconfig else {
        return Client::try_default()
            .await
            .context("no Kubernetes configuration (use --kubeconfig)");
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .with_context(|| format!("loading the kubeconfig {}", path.display()))?;
    Client::try_from(config).context("building the Kubernetes client")
}
