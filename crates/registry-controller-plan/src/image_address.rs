//! The image address, step two of the switch: ConfigMap `d8-system/registry-image-address`
//! (`base: registry.d8-system.svc:5001/system/deckhouse`) tells the platform to name images by
//! the in-cluster address. It may appear only once every node can resolve that address, i.e.
//! every node's agent reports the current generation applied; once published it is sticky
//! (a node joining later must not flip the whole platform back); it goes at once when the
//! registry is no longer Managed, so the platform falls back to the install registry.

use std::collections::BTreeMap;

/// What the agent of one node reported in its RegistryNode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeProgress {
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
    /// `status.reconciled`.
    pub reconciled: Option<bool>,
}

impl NodeProgress {
    /// The agent applied the generation it is looking at.
    pub fn applied(&self) -> bool {
        self.reconciled == Some(true)
            && self.generation.is_some()
            && self.observed_generation == self.generation
    }
}

/// Whether the ConfigMap must exist after this reconcile.
pub fn published(
    managed: bool,
    exists: bool,
    nodes: &[String],
    registry_nodes: &BTreeMap<String, NodeProgress>,
) -> bool {
    if !managed {
        return false;
    }
    if exists {
        return true;
    }
    !nodes.is_empty()
        && nodes
            .iter()
            .all(|node| registry_nodes.get(node).is_some_and(NodeProgress::applied))
}

/// The image base ConfigMap `registry-image-address` publishes (its `data`), `None` when it is
/// absent or names none. This is what the platform reads to learn where its images are.
pub fn published_base(data: Option<&BTreeMap<String, String>>) -> Option<&str> {
    data?
        .get(BASE_KEY)
        .map(|b| b.trim().trim_end_matches('/'))
        .filter(|b| !b.is_empty())
}

/// Key of the base in the ConfigMap's data.
pub const BASE_KEY: &str = "base";

/// The repository the platform's own images are named by: the published base while there is
/// one, else the repository it was installed from.
pub fn repository<'a>(published: Option<&'a str>, install: &'a str) -> &'a str {
    published.unwrap_or(install)
}

/// An image reference split into repository, tag and digest
/// (`host:5000/deckhouse/ee:v1@sha256:…` → `host:5000/deckhouse/ee`, `v1`, `sha256:…`).
fn split(image: &str) -> (&str, Option<&str>, Option<&str>) {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last = name.rfind('/').map_or(0, |i| i + 1);
    match name[last..].rfind(':') {
        Some(i) => (&name[..last + i], Some(&name[last + i + 1..]), digest),
        None => (name, None, digest),
    }
}

/// The repository of an image reference (`host:5000/deckhouse/ee:v1@sha256:…` →
/// `host:5000/deckhouse/ee`).
pub fn repository_of(image: &str) -> &str {
    split(image).0
}

/// The reference a container of one of the platform's own components (the deckhouse
/// Deployment, `d8-webhook`, `webhook-handler`, the cache replicas, the registry agent, the CNI
/// migration's manager and agent — all run the platform's image) must name now, its tag and
/// digest kept; `None` when it stays. While a base is published, the platform's images — named
/// by the install repository, the in-cluster base or one of its `own` repositories (where the
/// chart put it) — move there; once none is, those at the in-cluster base go back to the
/// install repository and the others stay where the chart put them. Another image (a
/// `kube-rbac-proxy` sidecar) never moves. This is the one place that decides every
/// component's image.
pub fn component_image(
    image: &str,
    own: &[&str],
    published: Option<&str>,
    install: &str,
) -> Option<String> {
    let current = repository_of(image);
    match published {
        Some(base) => {
            let ours = current == install
                || current == crate::IMAGE_BASE
                || current == base
                || own.contains(&current);
            ours.then(|| rebase(image, base)).flatten()
        }
        None if current == crate::IMAGE_BASE => rebase(image, install),
        None => None,
    }
}

/// `image` named by `repository` instead, with its tag and digest kept
/// (`old/deckhouse/ee:v1.68.5@sha256:…` → `<repository>:v1.68.5@sha256:…`); `None` when it is
/// named by `repository` already.
pub fn rebase(image: &str, repository: &str) -> Option<String> {
    let (current, tag, digest) = split(image);
    if current == repository {
        return None;
    }
    let mut out = repository.to_owned();
    if let Some(tag) = tag {
        out.push(':');
        out.push_str(tag);
    }
    if let Some(digest) = digest {
        out.push('@');
        out.push_str(digest);
    }
    Some(out)
}

/// `global.modulesImages.registry` for modules: where their images are, as Deckhouse's values
/// name it (`base` = `address` + `path`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ModulesImagesRegistry {
    /// `registry.d8-system.svc:5001/system/deckhouse`.
    pub base: String,
    /// `registry.d8-system.svc:5001`.
    pub address: String,
    /// `/system/deckhouse`.
    pub path: String,
}

impl ModulesImagesRegistry {
    /// The registry of a base (`host[:port][/path]`).
    pub fn of_base(base: &str) -> Self {
        let base = base.trim_end_matches('/');
        let (address, path) = match base.find('/') {
            Some(i) => (&base[..i], &base[i..]),
            None => (base, ""),
        };
        Self {
            base: base.to_owned(),
            address: address.to_owned(),
            path: path.to_owned(),
        }
    }

    /// What modules' `global.modulesImages.registry` says: the published base while there is
    /// one (`registry-image-address` data), else the install registry's base.
    pub fn current(published: Option<&BTreeMap<String, String>>, install_base: &str) -> Self {
        Self::of_base(repository(published_base(published), install_base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Data = BTreeMap<String, String>;

    #[test]
    fn the_published_base_is_read_from_the_config_map() {
        let data = |b: &str| BTreeMap::from([("base".to_owned(), b.to_owned())]);
        let published = data(crate::IMAGE_BASE);
        let rows: [(&str, Option<&Data>, Option<&str>); 4] = [
            ("published", Some(&published), Some(crate::IMAGE_BASE)),
            ("no ConfigMap", None, None),
            ("empty base", Some(&data(" ")), None),
            ("no base key", Some(&BTreeMap::new()), None),
        ];
        for (what, data, want) in rows {
            assert_eq!(published_base(data), want, "{what}");
        }
        assert_eq!(
            published_base(Some(&data("r.example:5001/system/deckhouse/"))),
            Some("r.example:5001/system/deckhouse")
        );
    }

    #[test]
    fn images_move_to_the_new_repository_keeping_their_version() {
        let new = crate::IMAGE_BASE;
        let rows = [
            (
                "tag",
                "registry.deckhouse.io/deckhouse/ee:v1.68.5",
                Some(format!("{new}:v1.68.5")),
            ),
            (
                "tag and digest",
                "127.0.0.1:5000/deckhouse/ee:v1.68.5@sha256:abc",
                Some(format!("{new}:v1.68.5@sha256:abc")),
            ),
            (
                "digest only, registry with a port",
                "127.0.0.1:5000/deckhouse/ee@sha256:abc",
                Some(format!("{new}@sha256:abc")),
            ),
            ("already there", &format!("{new}:v1.68.5"), None),
        ];
        for (what, image, want) in rows {
            assert_eq!(rebase(image, new), want, "{what}");
        }
        assert_eq!(
            rebase(&format!("{new}:v1"), "registry.deckhouse.io/deckhouse/ee"),
            Some("registry.deckhouse.io/deckhouse/ee:v1".to_owned())
        );
    }

    #[test]
    fn every_component_image_is_decided_by_one_rule() {
        let base = crate::IMAGE_BASE;
        let install = "registry.deckhouse.io/deckhouse/ce";
        let chart = "registry.example.com/deckhouse/d8";
        let proxy = "quay.io/brancz/kube-rbac-proxy:v0.18.2";
        let own = [chart];
        let rows: [(&str, &str, Option<&str>, Option<String>); 9] = [
            (
                "the install image moves to the published base",
                "registry.deckhouse.io/deckhouse/ce:v1.68.5",
                Some(base),
                Some(format!("{base}:v1.68.5")),
            ),
            (
                "the chart's image (the deckhouse container's repository) moves too, by digest",
                "registry.example.com/deckhouse/d8@sha256:abc",
                Some(base),
                Some(format!("{base}@sha256:abc")),
            ),
            (
                "already at the base",
                &format!("{base}:0.1.0"),
                Some(base),
                None,
            ),
            ("a sidecar from elsewhere stays", proxy, Some(base), None),
            (
                "a sidecar stays when nothing is published",
                proxy,
                None,
                None,
            ),
            (
                "nothing published: the base's images go back to the install repository",
                &format!("{base}:0.1.0"),
                None,
                Some(format!("{install}:0.1.0")),
            ),
            (
                "nothing published: the chart's image stays where the chart put it",
                "registry.example.com/deckhouse/d8:0.1.0",
                None,
                None,
            ),
            (
                "nothing published: the install image stays",
                "registry.deckhouse.io/deckhouse/ce:v1.68.5",
                None,
                None,
            ),
            (
                "a base published elsewhere: images there are ours as well",
                "mirror.local:5001/system/deckhouse:v1",
                Some("mirror.local:5001/system/deckhouse"),
                None,
            ),
        ];
        for (what, image, published, want) in rows {
            assert_eq!(
                component_image(image, &own, published, install),
                want,
                "{what}"
            );
        }
    }

    #[test]
    fn modules_images_registry_follows_the_published_base() {
        let published = BTreeMap::from([("base".to_owned(), crate::IMAGE_BASE.to_owned())]);
        assert_eq!(
            ModulesImagesRegistry::current(Some(&published), "registry.deckhouse.io/deckhouse/ee"),
            ModulesImagesRegistry {
                base: "registry.d8-system.svc:5001/system/deckhouse".into(),
                address: "registry.d8-system.svc:5001".into(),
                path: "/system/deckhouse".into(),
            }
        );
        assert_eq!(
            ModulesImagesRegistry::current(None, "registry.deckhouse.io/deckhouse/ee"),
            ModulesImagesRegistry {
                base: "registry.deckhouse.io/deckhouse/ee".into(),
                address: "registry.deckhouse.io".into(),
                path: "/deckhouse/ee".into(),
            }
        );
    }

    fn applied(generation: i64) -> NodeProgress {
        NodeProgress {
            generation: Some(generation),
            observed_generation: Some(generation),
            reconciled: Some(true),
        }
    }

    type Row<'a> = (
        &'a str,
        bool,
        bool,
        &'a [String],
        &'a BTreeMap<String, NodeProgress>,
        bool,
    );

    #[test]
    fn the_two_step_rule() {
        let nodes = vec!["a".to_owned(), "b".to_owned()];
        let all = BTreeMap::from([("a".to_owned(), applied(2)), ("b".to_owned(), applied(1))]);
        let behind = BTreeMap::from([
            ("a".to_owned(), applied(2)),
            (
                "b".to_owned(),
                NodeProgress {
                    generation: Some(2),
                    observed_generation: Some(1),
                    reconciled: Some(true),
                },
            ),
        ]);
        let failed = BTreeMap::from([
            ("a".to_owned(), applied(2)),
            (
                "b".to_owned(),
                NodeProgress {
                    reconciled: Some(false),
                    ..applied(1)
                },
            ),
        ]);
        let missing = BTreeMap::from([("a".to_owned(), applied(2))]);
        let rows: [Row<'_>; 8] = [
            ("every node applied", true, false, &nodes, &all, true),
            (
                "one node behind a generation",
                true,
                false,
                &nodes,
                &behind,
                false,
            ),
            (
                "one node failed to apply",
                true,
                false,
                &nodes,
                &failed,
                false,
            ),
            (
                "one node has no RegistryNode",
                true,
                false,
                &nodes,
                &missing,
                false,
            ),
            ("no nodes at all", true, false, &[], &all, false),
            ("sticky once published", true, true, &nodes, &behind, true),
            (
                "removed at once when not Managed",
                false,
                true,
                &nodes,
                &all,
                false,
            ),
            (
                "never published when not Managed",
                false,
                false,
                &nodes,
                &all,
                false,
            ),
        ];
        for (what, managed, exists, nodes, registry_nodes, want) in rows {
            assert_eq!(
                published(managed, exists, nodes, registry_nodes),
                want,
                "{what}"
            );
        }
    }
}
