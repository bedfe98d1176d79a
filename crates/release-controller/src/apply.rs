//! Applying a platform release, and knowing what runs.
//!
//! In a cluster, applying sets the image of the first container of `d8-system/deployment/deckhouse`
//! to `<imagesRegistry>:<version>`; Kubernetes rolls the pod. Once ConfigMap
//! `d8-system/registry-image-address` publishes the in-cluster address (every node's agent applied
//! its layout), `<imagesRegistry>` is that base, and the running image moves to it at once
//! ([`Deployer::follow_image_address`]) — with every other component running the platform's
//! image (`follow`); it moves back when the ConfigMap goes. On the embedded API server the same
//! Deployment object is the record of the deployed version (created on first use there), and
//! [`DeploymentTarget::running_version`] exposes it to the rest of the platform.

use std::fmt;
use std::time::Duration;

use futures_util::future::BoxFuture;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use registry_controller_plan::IMAGE_ADDRESS_CONFIGMAP;
use registry_controller_plan::image_address;

use crate::Error;

mod follow;
pub use follow::{
    AGENT_MANIFEST_KEY, NODE_BOOTSTRAP_CONFIGMAP, PLATFORM_DAEMONSETS, PLATFORM_DEPLOYMENTS,
};

/// Namespace of the Deckhouse Deployment.
pub const NAMESPACE: &str = "d8-system";
/// Name of the Deckhouse Deployment.
pub const DEPLOYMENT: &str = "deckhouse";

/// Switches the platform to a version and reports the running one.
pub trait Deployer: Send + Sync + fmt::Debug {
    /// The running version (`v1.66.3`), `None` when nothing runs yet.
    fn running_version(&self) -> BoxFuture<'_, Result<Option<String>, Error>>;
    /// Switches to `version` (`v1.68.5`).
    fn deploy<'a>(&'a self, version: &'a str) -> BoxFuture<'a, Result<(), Error>>;
    /// Names the running platform's image — and that of every component running it — by the
    /// current image address (ConfigMap `d8-system/registry-image-address` while it exists,
    /// else the install repository), keeping its version. Whether it changed anything.
    fn follow_image_address(&self) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(std::future::ready(Ok(false)))
    }
}

/// Whether the running Deckhouse is ready (minor releases wait for it).
pub trait Readiness: Send + Sync + fmt::Debug {
    /// Ready now.
    fn is_ready(&self) -> BoxFuture<'_, bool>;
}

/// Always ready: a single machine, where the controller is the platform.
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysReady;

impl Readiness for AlwaysReady {
    fn is_ready(&self) -> BoxFuture<'_, bool> {
        Box::pin(std::future::ready(true))
    }
}

/// Ready when `GET <url>` answers 2xx (in a cluster `http://<pod-ip>:4222/readyz`).
#[derive(Clone, Debug)]
pub struct HttpReadiness {
    http: reqwest::Client,
    url: String,
}

impl HttpReadiness {
    /// Readiness from `url`.
    pub fn new(url: impl Into<String>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default();
        Self {
            http,
            url: url.into(),
        }
    }
}

impl Readiness for HttpReadiness {
    fn is_ready(&self) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            self.http
                .get(&self.url)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        })
    }
}

/// The `d8-system/deckhouse` Deployment as the deploy target.
#[derive(Clone)]
pub struct DeploymentTarget {
    api: Api<Deployment>,
    daemon_sets: Api<DaemonSet>,
    config_maps: Api<ConfigMap>,
    image_repository: String,
    create_if_missing: bool,
}

impl fmt::Debug for DeploymentTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeploymentTarget")
            .field("image_repository", &self.image_repository)
            .field("create_if_missing", &self.create_if_missing)
            .finish()
    }
}

/// The tag of an image reference (`registry/repo:tag@digest` → `tag`).
pub fn image_tag(image: &str) -> Option<&str> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split_once(':')
        .map(|(_, tag)| tag)
        .filter(|t| !t.is_empty())
}

impl DeploymentTarget {
    /// The Deployment in a cluster: it must exist; images are `<image_repository>:<version>`.
    pub fn cluster(client: Client, image_repository: impl Into<String>) -> Self {
        Self {
            api: Api::namespaced(client.clone(), NAMESPACE),
            daemon_sets: Api::namespaced(client.clone(), NAMESPACE),
            config_maps: Api::namespaced(client, NAMESPACE),
            image_repository: image_repository.into(),
            create_if_missing: false,
        }
    }

    /// The Deployment on the embedded API server: created on the first deploy, as the record
    /// of the deployed version.
    pub fn embedded(client: Client, image_repository: impl Into<String>) -> Self {
        Self {
            create_if_missing: true,
            ..Self::cluster(client, image_repository)
        }
    }

    /// The image of `version` in the install repository.
    pub fn image_of(&self, version: &str) -> String {
        format!("{}:{version}", self.image_repository)
    }

    /// The base ConfigMap `registry-image-address` publishes once every node can pull from the
    /// in-cluster registry, `None` while it does not.
    async fn published(&self) -> Result<Option<String>, Error> {
        let config_map = self
            .config_maps
            .get_opt(IMAGE_ADDRESS_CONFIGMAP)
            .await
            .map_err(|e| Error::kube("get ConfigMap d8-system/registry-image-address", e))?;
        let data = config_map.and_then(|c| c.data);
        Ok(image_address::published_base(data.as_ref()).map(str::to_owned))
    }

    /// The repository images are named by now: the published base, else the install one.
    async fn repository(&self) -> Result<String, Error> {
        let published = self.published().await?;
        Ok(image_address::repository(published.as_deref(), &self.image_repository).to_owned())
    }

    /// Every component running the platform's image follows the image address: the deckhouse
    /// container's repository is the platform's own, whatever it is named by.
    async fn follow(&self) -> Result<bool, Error> {
        let published = self.published().await?;
        let deckhouse = self
            .api
            .get_opt(DEPLOYMENT)
            .await
            .map_err(|e| Error::kube("get Deployment d8-system/deckhouse", e))?;
        let own = deckhouse
            .as_ref()
            .and_then(first_container)
            .and_then(|c| c.image.as_deref())
            .map(|image| image_address::repository_of(image).to_owned());
        let target = follow::Target {
            own: own.iter().map(String::as_str).collect(),
            published: published.as_deref(),
            install: &self.image_repository,
        };
        follow::components(&self.api, &self.daemon_sets, &self.config_maps, &target).await
    }

    async fn running(&self) -> Result<Option<String>, Error> {
        let deployment = self
            .api
            .get_opt(DEPLOYMENT)
            .await
            .map_err(|e| Error::kube("get Deployment d8-system/deckhouse", e))?;
        let Some(deployment) = deployment else {
            return Ok(None);
        };
        let image = first_container(&deployment)
            .and_then(|c| c.image.clone())
            .ok_or_else(|| Error::RunningVersion {
                reason: "the deckhouse Deployment has no container image".into(),
            })?;
        Ok(image_tag(&image).map(str::to_owned))
    }

    async fn apply(&self, version: &str) -> Result<(), Error> {
        let image = format!("{}:{version}", self.repository().await?);
        // Read-modify-replace guarded by resourceVersion: the same on every API server, and a
        // concurrent writer makes this fail (and the reconcile retry) instead of being lost.
        let existing = self
            .api
            .get_opt(DEPLOYMENT)
            .await
            .map_err(|e| Error::kube("get Deployment d8-system/deckhouse", e))?;
        match existing {
            Some(mut deployment) => {
                let container = deployment
                    .spec
                    .as_mut()
                    .and_then(|s| s.template.spec.as_mut())
                    .and_then(|p| p.containers.first_mut())
                    .ok_or_else(|| Error::RunningVersion {
                        reason: "the deckhouse Deployment has no container".into(),
                    })?;
                if container.image.as_deref() == Some(image.as_str()) {
                    return Ok(());
                }
                container.image = Some(image);
                self.api
                    .replace(DEPLOYMENT, &PostParams::default(), &deployment)
                    .await
                    .map_err(|e| Error::kube("update Deployment d8-system/deckhouse", e))?;
            }
            None if self.create_if_missing => {
                self.api
                    .create(&PostParams::default(), &new_deployment(image))
                    .await
                    .map_err(|e| Error::kube("create Deployment d8-system/deckhouse", e))?;
            }
            None => {
                return Err(Error::RunningVersion {
                    reason: "the Deployment d8-system/deckhouse does not exist".into(),
                });
            }
        }
        Ok(())
    }
}

fn first_container(deployment: &Deployment) -> Option<&Container> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()
}

fn new_deployment(image: String) -> Deployment {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_owned(), "deckhouse".to_owned())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(DEPLOYMENT.into()),
            namespace: Some(NAMESPACE.into()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "deckhouse".into(),
                        image: Some(image),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Deployer for DeploymentTarget {
    fn running_version(&self) -> BoxFuture<'_, Result<Option<String>, Error>> {
        Box::pin(self.running())
    }

    fn deploy<'a>(&'a self, version: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.apply(version))
    }

    fn follow_image_address(&self) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(self.follow())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_of_images() {
        assert_eq!(
            image_tag("registry.deckhouse.io/deckhouse/ce:v1.66.3"),
            Some("v1.66.3")
        );
        assert_eq!(
            image_tag("127.0.0.1:5001/system/deckhouse:v1.68.5@sha256:abc"),
            Some("v1.68.5")
        );
        assert_eq!(image_tag("127.0.0.1:5001/system/deckhouse"), None);
        assert_eq!(image_tag("deckhouse:"), None);
    }
}
