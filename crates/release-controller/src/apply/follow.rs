//! Step two of the registry switch for every component that runs the platform's image: the
//! chart's workloads (`deckhouse` with its init container, `d8-webhook`, `webhook-handler`, the
//! cache replicas' DaemonSet `registry-storage`) and the registry agent's static pod manifest in
//! ConfigMap `registry-node-bootstrap` (what the node bootstrap script installs). Each container
//! image is decided by [`image_address::component_image`]; sidecars from elsewhere stay. The
//! CNI migration's workloads are not listed: `d8 controller` applies them with the deckhouse
//! container's image, which has moved by then.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec};
use kube::Api;
use kube::api::PostParams;

use registry_controller_plan::image_address;

use crate::Error;

/// Deployments in `d8-system` that run the platform's image (the chart's names).
pub const PLATFORM_DEPLOYMENTS: &[&str] = &["deckhouse", "d8-webhook", "webhook-handler"];
/// DaemonSets in `d8-system` that run the platform's image: the cache replicas.
pub const PLATFORM_DAEMONSETS: &[&str] = &["registry-storage"];
/// The ConfigMap holding the registry agent's static pod manifest.
pub const NODE_BOOTSTRAP_CONFIGMAP: &str = "registry-node-bootstrap";
/// Its key holding the manifest.
pub const AGENT_MANIFEST_KEY: &str = "registry-agent.yaml";

/// Where the platform's images are to be named now.
#[derive(Clone, Debug)]
pub(crate) struct Target<'a> {
    /// Repositories of the platform's own image: the deckhouse container's.
    pub own: Vec<&'a str>,
    /// The base ConfigMap `registry-image-address` publishes.
    pub published: Option<&'a str>,
    /// The install repository.
    pub install: &'a str,
}

impl Target<'_> {
    fn image(&self, image: &str) -> Option<String> {
        image_address::component_image(image, &self.own, self.published, self.install)
    }

    /// Renames every container's and init container's image that must move; whether any did.
    pub(crate) fn pod_spec(&self, spec: &mut PodSpec) -> bool {
        let mut changed = false;
        let init = spec.init_containers.iter_mut().flatten();
        for container in init.chain(spec.containers.iter_mut()) {
            if let Some(image) = container.image.as_deref().and_then(|i| self.image(i)) {
                container.image = Some(image);
                changed = true;
            }
        }
        changed
    }

    /// A static pod manifest (YAML text) with its `image:` lines renamed, `None` when none
    /// moves. Only the value changes: the rest of the text stays byte for byte.
    pub(crate) fn manifest(&self, text: &str) -> Option<String> {
        let mut changed = false;
        let mut out = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            let body = line.trim_end_matches('\n');
            let trimmed = body.trim_start();
            let key = trimmed.strip_prefix("- ").unwrap_or(trimmed);
            let moved = key
                .strip_prefix("image:")
                .map(|v| v.trim().trim_matches('"'))
                .and_then(|image| self.image(image).map(|new| (image, new)));
            match moved {
                Some((old, new)) => {
                    out.push_str(&body.replacen(old, &new, 1));
                    out.push_str(&line[body.len()..]);
                    changed = true;
                }
                None => out.push_str(line),
            }
        }
        changed.then_some(out)
    }
}

/// Moves the pod template of each of the workloads `names` (of `kind`) that exists; whether any
/// changed.
async fn workloads<K>(
    api: &Api<K>,
    kind: &str,
    names: &[&str],
    target: &Target<'_>,
    pod_spec: impl Fn(&mut K) -> Option<&mut PodSpec>,
) -> Result<bool, Error>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut changed = false;
    for name in names {
        let what = format!("{kind} d8-system/{name}");
        let Some(mut object) = api
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(format!("get {what}"), e))?
        else {
            continue;
        };
        if pod_spec(&mut object).is_some_and(|spec| target.pod_spec(spec)) {
            tracing::info!(object = %what, "its image follows the image address");
            api.replace(name, &PostParams::default(), &object)
                .await
                .map_err(|e| Error::kube(format!("update {what}"), e))?;
            changed = true;
        }
    }
    Ok(changed)
}

/// Moves the platform's workloads and the agent's manifest in `d8-system`; whether anything
/// changed. Missing objects (a single machine, components turned off) are skipped.
pub(crate) async fn components(
    deployments: &Api<Deployment>,
    daemon_sets: &Api<DaemonSet>,
    config_maps: &Api<ConfigMap>,
    target: &Target<'_>,
) -> Result<bool, Error> {
    let mut changed = workloads(
        deployments,
        "Deployment",
        PLATFORM_DEPLOYMENTS,
        target,
        |d| d.spec.as_mut().and_then(|s| s.template.spec.as_mut()),
    )
    .await?;
    changed |= workloads(daemon_sets, "DaemonSet", PLATFORM_DAEMONSETS, target, |d| {
        d.spec.as_mut().and_then(|s| s.template.spec.as_mut())
    })
    .await?;
    let what = format!("ConfigMap d8-system/{NODE_BOOTSTRAP_CONFIGMAP}");
    if let Some(mut object) = config_maps
        .get_opt(NODE_BOOTSTRAP_CONFIGMAP)
        .await
        .map_err(|e| Error::kube(format!("get {what}"), e))?
    {
        let manifest = object
            .data
            .as_mut()
            .and_then(|d| d.get_mut(AGENT_MANIFEST_KEY));
        if let Some(manifest) = manifest
            && let Some(moved) = target.manifest(manifest)
        {
            *manifest = moved;
            tracing::info!(object = %what, "the agent's image follows the image address");
            config_maps
                .replace(NODE_BOOTSTRAP_CONFIGMAP, &PostParams::default(), &object)
                .await
                .map_err(|e| Error::kube(format!("update {what}"), e))?;
            changed = true;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Container;

    const BASE: &str = "registry.d8-system.svc:5001/system/deckhouse";

    fn target(published: Option<&'static str>) -> Target<'static> {
        Target {
            own: vec!["registry.example.com/deckhouse/d8"],
            published,
            install: "registry.deckhouse.io/deckhouse/ce",
        }
    }

    fn container(name: &str, image: &str) -> Container {
        Container {
            name: name.into(),
            image: Some(image.into()),
            ..Default::default()
        }
    }

    #[test]
    fn containers_and_init_containers_move_sidecars_stay() {
        let mut spec = PodSpec {
            init_containers: Some(vec![container(
                "init-downloaded-modules",
                "registry.example.com/deckhouse/d8:0.1.0",
            )]),
            containers: vec![
                container("deckhouse", "registry.example.com/deckhouse/d8:0.1.0"),
                container("kube-rbac-proxy", "quay.io/brancz/kube-rbac-proxy:v0.18.2"),
            ],
            ..Default::default()
        };
        assert!(target(Some(BASE)).pod_spec(&mut spec));
        let images = |spec: &PodSpec| -> Vec<String> {
            let init = spec.init_containers.iter().flatten();
            init.chain(&spec.containers)
                .map(|c| c.image.clone().unwrap())
                .collect()
        };
        assert_eq!(
            images(&spec),
            [
                format!("{BASE}:0.1.0"),
                format!("{BASE}:0.1.0"),
                "quay.io/brancz/kube-rbac-proxy:v0.18.2".to_owned()
            ]
        );
        assert!(!target(Some(BASE)).pod_spec(&mut spec), "a second pass");
        assert!(target(None).pod_spec(&mut spec));
        assert_eq!(
            images(&spec)[0],
            "registry.deckhouse.io/deckhouse/ce:0.1.0",
            "back to the install repository"
        );
        assert!(!target(None).pod_spec(&mut spec), "and there it stays");
    }

    #[test]
    fn the_static_pod_manifest_changes_only_its_image_lines() {
        let text = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n    - name: registry-agent\n      image: registry.example.com/deckhouse/d8@sha256:abc\n      args:\n        - image: not-a-container\n    - image: \"quay.io/other:v1\"\n      name: other\n";
        let moved = target(Some(BASE)).manifest(text).unwrap();
        assert_eq!(
            moved,
            text.replace(
                "registry.example.com/deckhouse/d8@sha256:abc",
                &format!("{BASE}@sha256:abc")
            )
        );
        assert_eq!(target(Some(BASE)).manifest(&moved), None);
        assert_eq!(target(None).manifest("kind: Pod\n"), None);
    }
}
