//! The job of Deckhouse's `detect-cni-migration` global hook, for a platform installed from
//! the chart: while a CNIMigration exists, the deckhouse chart's CNI migration template is
//! rendered with `global.internal.cniMigrationEnabled` (and `cniMigrationName`,
//! `cniMigrationWebhooksDisable`, [`detect::hook_values`]) and its objects — Deployment
//! `cni-migration-manager`, DaemonSet `cni-migration-agent` — applied; once no migration is
//! left they are deleted. Runs in `d8 controller` under the platform Lease, unless the manager
//! runs in that process itself (`d8 up`).
//!
//! The chart is the one shipped (the binary carries its template, [`Render`]); the values it
//! needs besides the hook's — the image and its pull secrets — are the running `deckhouse`
//! Deployment's, so the migration's pods run the platform's own image wherever it moved.

use std::sync::Arc;
use std::time::Duration;

use api::network::CNIMigration;
use futures_util::future::BoxFuture;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use super::detect::{self, HookValues, MigrationInfo};
use super::is_true;
use crate::Error;

/// The field manager of the objects applied here.
pub const FIELD_MANAGER: &str = "deckhouse";

/// Renders the deckhouse chart's CNI migration template with the given values (merged over
/// the chart's `values.yaml`, as Helm merges a values file) into its objects.
pub trait Render: Send + Sync {
    /// The rendered objects (JSON), in Helm's install order.
    fn render(&self, values: Value) -> BoxFuture<'static, Result<Vec<Value>, String>>;
}

/// Settings of the controller.
#[derive(Clone, Debug)]
pub struct Options {
    /// The platform's namespace: the `deckhouse` Deployment's, and the components'.
    pub namespace: String,
    /// Time between two passes.
    pub interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            namespace: "d8-system".into(),
            interval: Duration::from_secs(5),
        }
    }
}

/// The controller.
#[derive(Clone)]
pub struct Components {
    client: Client,
    options: Options,
    render: Arc<dyn Render>,
    /// What the last pass left: `Some(true)` the components applied, `Some(false)` removed.
    last: Arc<std::sync::Mutex<Option<bool>>>,
}

impl std::fmt::Debug for Components {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Components")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The chart values of the platform's image and pull secrets, from the image reference the
/// `deckhouse` Deployment runs (`repo@digest`, `repo:tag` or `repo`).
pub fn platform_values(image: &str, pull_secrets: &[String]) -> Value {
    let (repository, tag, digest) = match image.split_once('@') {
        Some((repo, digest)) => (repo, "", digest),
        None => {
            // A tag is after the last ':' that comes after the last '/' (a port is not one).
            let slash = image.rfind('/').map_or(0, |i| i + 1);
            match image[slash..].rfind(':') {
                Some(i) => (&image[..slash + i], &image[slash + i + 1..], ""),
                None => (image, "latest", ""),
            }
        }
    };
    json!({
        "image": {"repository": repository, "tag": tag, "digest": digest},
        "imagePullSecrets": pull_secrets,
    })
}

/// The values of one render: the platform's and the hook's (`global.internal.*`).
pub fn chart_values(platform: Value, hook: Option<&HookValues>) -> Value {
    let mut values = platform;
    values["global"] = detect::global_values(hook);
    values
}

impl Components {
    /// A controller talking to `client`, rendering with `render`.
    pub fn new(client: Client, options: Options, render: Arc<dyn Render>) -> Self {
        Self {
            client,
            options,
            render,
            last: Default::default(),
        }
    }

    /// Runs passes every interval until `stopped` resolves.
    pub async fn run(&self, stopped: impl std::future::Future<Output = ()>) {
        tokio::pin!(stopped);
        loop {
            if let Err(e) = self.pass().await {
                tracing::warn!(error = %e, "detect-cni-migration pass failed");
            }
            tokio::select! {
                _ = &mut stopped => return,
                _ = tokio::time::sleep(self.options.interval) => {}
            }
        }
    }

    /// One pass: the components applied while a migration exists, removed otherwise. Returns
    /// the hook's values.
    pub async fn pass(&self) -> Result<Option<HookValues>, Error> {
        let api: Api<CNIMigration> = Api::all(self.client.clone());
        let list = api
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list CNIMigrations", e))?;
        let infos: Vec<MigrationInfo> = list
            .items
            .iter()
            .map(|m| MigrationInfo {
                name: m.name_any(),
                created: m.metadata.creation_timestamp.as_ref().map(|t| t.0),
                succeeded: m
                    .status
                    .as_ref()
                    .is_some_and(|s| is_true(&s.conditions, "Succeeded")),
            })
            .collect();
        let hook = detect::hook_values(&infos);
        let active = hook.is_some();
        if hook.is_none() && *self.last.lock().unwrap_or_else(|e| e.into_inner()) == Some(false) {
            return Ok(None);
        }
        let objects = if active {
            let platform = self.platform().await?;
            self.render(chart_values(platform, hook.as_ref())).await?
        } else {
            // What the template holds while a migration runs: those objects go.
            let enabled = HookValues {
                name: String::new(),
                webhooks_disable: false,
            };
            self.render(chart_values(json!({}), Some(&enabled))).await?
        };
        for object in &objects {
            self.converge(object, active).await?;
        }
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if *last != Some(active) {
            tracing::info!(
                migration = hook.as_ref().map(|h| h.name.as_str()).unwrap_or(""),
                active,
                "CNI migration components {}",
                if active { "applied" } else { "removed" }
            );
        }
        *last = Some(active);
        Ok(hook)
    }

    async fn render(&self, values: Value) -> Result<Vec<Value>, Error> {
        self.render
            .render(values)
            .await
            .map_err(|e| Error::Refused(format!("rendering the CNI migration template: {e}")))
    }

    /// The image and pull secrets of the running `deckhouse` Deployment.
    async fn platform(&self) -> Result<Value, Error> {
        let ns = &self.options.namespace;
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
        let found = api
            .get_opt("deckhouse")
            .await
            .map_err(|e| Error::kube(format!("get Deployment {ns}/deckhouse"), e))?;
        let spec = found
            .and_then(|d| d.spec)
            .and_then(|s| s.template.spec)
            .ok_or_else(|| {
                Error::Refused(format!(
                    "Deployment {ns}/deckhouse not found: the CNI migration's manager and agent run its image"
                ))
            })?;
        let image = spec
            .containers
            .iter()
            .find(|c| c.name == "deckhouse")
            .or_else(|| spec.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        let secrets: Vec<String> = spec
            .image_pull_secrets
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.name)
            .collect();
        Ok(platform_values(&image, &secrets))
    }

    /// Applies (`present`) or deletes one rendered object.
    async fn converge(&self, object: &Value, present: bool) -> Result<(), Error> {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(&self.options.namespace);
        let what = format!("{kind} {ns}/{name}");
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let result = match kind {
            "Deployment" => {
                let api: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
                if present {
                    api.patch(name, &params, &Patch::Apply(object))
                        .await
                        .map(|_| ())
                } else {
                    api.delete(name, &DeleteParams::background())
                        .await
                        .map(|_| ())
                }
            }
            "DaemonSet" => {
                let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), ns);
                if present {
                    api.patch(name, &params, &Patch::Apply(object))
                        .await
                        .map(|_| ())
                } else {
                    api.delete(name, &DeleteParams::background())
                        .await
                        .map(|_| ())
                }
            }
            other => {
                return Err(Error::Refused(format!(
                    "the CNI migration template renders a {other} ({name}): only Deployments and DaemonSets are applied"
                )));
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 && !present => Ok(()),
            Err(e) => Err(Error::kube(
                format!("{} {what}", if present { "apply" } else { "delete" }),
                e,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_platform_image_as_chart_values() {
        let rows = [
            (
                "registry.example.com/deckhouse/d8@sha256:abc",
                ("registry.example.com/deckhouse/d8", "", "sha256:abc"),
            ),
            (
                "registry.d8-system.svc:5001/system/deckhouse:0.1.0",
                ("registry.d8-system.svc:5001/system/deckhouse", "0.1.0", ""),
            ),
            ("127.0.0.1:5001/d8", ("127.0.0.1:5001/d8", "latest", "")),
            ("d8", ("d8", "latest", "")),
        ];
        for (image, (repository, tag, digest)) in rows {
            assert_eq!(
                platform_values(image, &["pull".into()]),
                json!({
                    "image": {"repository": repository, "tag": tag, "digest": digest},
                    "imagePullSecrets": ["pull"],
                }),
                "{image}"
            );
        }
    }

    #[test]
    fn the_hook_values_go_under_global() {
        let hook = HookValues {
            name: "cni-migration".into(),
            webhooks_disable: true,
        };
        let values = chart_values(json!({"image": {"tag": "1"}}), Some(&hook));
        assert_eq!(values["image"]["tag"], "1");
        assert_eq!(values["global"]["internal"]["cniMigrationEnabled"], true);
        assert_eq!(
            values["global"]["internal"]["cniMigrationName"],
            "cni-migration"
        );
        let values = chart_values(json!({}), None);
        assert_eq!(
            values["global"],
            json!({"internal": {"cniMigrationEnabled": false}})
        );
    }
}
