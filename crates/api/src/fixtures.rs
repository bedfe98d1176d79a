//! Fixture constructors for tests: valid objects with the names and labels Deckhouse would give
//! them, plus builder methods for the interesting states.
//!
//! Compiled for this crate's tests and, for other crates, behind the `test-fixtures` feature:
//! `api = { workspace = true, features = ["test-fixtures"] }` in `[dev-dependencies]`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::deckhouse_release::{
    DeckhouseRelease, DeckhouseReleaseFields, DeckhouseReleasePhase, DeckhouseReleaseSpec,
    DeckhouseReleaseStatus,
};
use crate::keys;
use crate::module::{Module, ModuleFields, ModuleProperties};
use crate::module_config::{ModuleConfig, ModuleConfigSpec};
use crate::module_release::{
    ModuleRelease, ModuleReleasePhase, ModuleReleaseSpec, ModuleReleaseStatus,
};
use crate::module_source::{ModuleSource, ModuleSourceSpec, SourceRegistry};
use crate::module_update_policy::{ModuleUpdatePolicy, ModuleUpdatePolicySpec, Update};
use crate::object_keeper::{FollowObjectRef, ObjectKeeper, ObjectKeeperMode, ObjectKeeperSpec};
use crate::registry::{
    Primary, RegistryConfig, RegistryConfigSpec, RegistryMode, RegistryUpstream,
    RegistryUpstreamSpec, Upstream,
};
use crate::update::{UpdateMode, UpdateWindow};

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        ..Default::default()
    }
}

impl ModuleRelease {
    /// Release `version` of `module` from the `deckhouse` source, named `<module>-v<version>`,
    /// labelled as the source controller labels it, with no status yet.
    pub fn test(module: &str, version: &str) -> Self {
        let version = version.trim_start_matches('v');
        let mut release = ModuleRelease::new(
            &Self::name_for(module, version),
            ModuleReleaseSpec {
                module_name: module.into(),
                version: version.into(),
                ..Default::default()
            },
        );
        let labels = BTreeMap::from([
            (keys::LABEL_MODULE.to_string(), module.to_string()),
            (
                keys::LABEL_SOURCE.to_string(),
                crate::module_source::DEFAULT_SOURCE.to_string(),
            ),
        ]);
        release.metadata.labels = Some(labels);
        release
    }

    /// With phase `phase` (and the matching `status` label).
    pub fn with_phase(mut self, phase: ModuleReleasePhase) -> Self {
        self.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(keys::LABEL_STATUS.into(), phase.label());
        self.status = Some(ModuleReleaseStatus {
            phase: Some(phase),
            ..self.status.unwrap_or_default()
        });
        self
    }

    /// Pending.
    pub fn pending(self) -> Self {
        self.with_phase(ModuleReleasePhase::Pending)
    }

    /// Deployed.
    pub fn deployed(self) -> Self {
        self.with_phase(ModuleReleasePhase::Deployed)
    }

    /// With annotation `key: value`.
    pub fn annotated(mut self, key: &str, value: &str) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// Governed by update policy `policy` (the `modules.deckhouse.io/update-policy` label).
    pub fn with_policy(mut self, policy: &str) -> Self {
        self.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(keys::LABEL_UPDATE_POLICY.into(), policy.into());
        self
    }
}

impl DeckhouseRelease {
    /// Release `version` (named `v<version>`), not approved, with no status.
    pub fn test(version: &str) -> Self {
        let name = format!("v{}", version.trim_start_matches('v'));
        Self {
            metadata: meta(&name),
            spec: DeckhouseReleaseFields {
                approved: false,
                spec: DeckhouseReleaseSpec {
                    version: name.clone(),
                    ..Default::default()
                },
            },
            status: None,
        }
    }

    /// Pending.
    pub fn pending(mut self) -> Self {
        self.status = Some(DeckhouseReleaseStatus {
            phase: Some(DeckhouseReleasePhase::Pending),
            ..Default::default()
        });
        self
    }

    /// Approved (top-level `approved: true`).
    pub fn approved(mut self) -> Self {
        self.spec.approved = true;
        self
    }
}

impl ModuleConfig {
    /// An empty ModuleConfig for module `name`.
    pub fn test(name: &str) -> Self {
        ModuleConfig::new(name, ModuleConfigSpec::default())
    }

    /// With `spec.enabled`.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.spec.enabled = Some(enabled);
        self
    }

    /// With settings of version `version`.
    pub fn settings(mut self, version: i64, settings: serde_json::Value) -> Self {
        self.spec.version = Some(version);
        self.spec.settings = Some(settings);
        self
    }
}

impl ModuleUpdatePolicy {
    /// Policy `name`: Stable channel, Auto mode, no windows.
    pub fn test(name: &str) -> Self {
        ModuleUpdatePolicy::new(
            name,
            ModuleUpdatePolicySpec {
                release_channel: Default::default(),
                update: Update {
                    mode: UpdateMode::Auto,
                    windows: vec![],
                },
            },
        )
    }

    /// With update mode `mode`.
    pub fn mode(mut self, mode: UpdateMode) -> Self {
        self.spec.update.mode = mode;
        self
    }

    /// With one more window `from`–`to` on every day.
    pub fn window(mut self, from: &str, to: &str) -> Self {
        self.spec.update.windows.push(UpdateWindow {
            from: from.into(),
            to: to.into(),
            days: vec![],
        });
        self
    }
}

impl ModuleSource {
    /// Source `name` for `repo`, HTTPS, anonymous.
    pub fn test(name: &str, repo: &str) -> Self {
        ModuleSource::new(
            name,
            ModuleSourceSpec {
                release_channel: None,
                registry: SourceRegistry {
                    repo: repo.into(),
                    ..Default::default()
                },
            },
        )
    }
}

impl Module {
    /// Module `name` from source `source`, version `version`.
    pub fn test(name: &str, source: &str, version: &str) -> Self {
        Module::new(
            name,
            ModuleFields {
                properties: ModuleProperties {
                    source: Some(source.into()),
                    version: Some(version.into()),
                    available_sources: vec![source.into()],
                    ..Default::default()
                },
                legacy_spec: None,
            },
        )
    }
}

impl ObjectKeeper {
    /// A keeper living for `ttl` after creation.
    pub fn test_ttl(name: &str, ttl: &str) -> Self {
        ObjectKeeper::new(
            name,
            ObjectKeeperSpec {
                mode: ObjectKeeperMode::Ttl,
                follow_object_ref: None,
                ttl: Some(ttl.into()),
            },
        )
    }

    /// A keeper following ConfigMap `namespace/object` with UID `uid`.
    pub fn test_follow(name: &str, namespace: &str, object: &str, uid: &str) -> Self {
        ObjectKeeper::new(
            name,
            ObjectKeeperSpec {
                mode: ObjectKeeperMode::FollowObject,
                follow_object_ref: Some(FollowObjectRef {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespace: namespace.into(),
                    name: object.into(),
                    uid: uid.into(),
                }),
                ttl: None,
            },
        )
    }
}

impl RegistryConfig {
    /// The singleton `registry`: Managed, pulling straight from `host` (no cache).
    pub fn test(host: &str) -> Self {
        RegistryConfig::new(
            crate::registry::SINGLETON,
            RegistryConfigSpec {
                mode: RegistryMode::Managed,
                primary: Some(Primary {
                    upstream: Some(Upstream {
                        host: host.into(),
                        ..Default::default()
                    }),
                }),
                storage: None,
            },
        )
    }
}

impl RegistryUpstream {
    /// Route pulls naming `matched` to `host`.
    pub fn test(name: &str, matched: &str, host: &str) -> Self {
        RegistryUpstream::new(
            name,
            RegistryUpstreamSpec {
                match_: matched.into(),
                upstream: Upstream {
                    host: host.into(),
                    ..Default::default()
                },
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixtures_serialize_to_valid_objects() {
        let mr = ModuleRelease::test("echo", "v1.2.3")
            .pending()
            .with_policy("p");
        assert_eq!(mr.metadata.name.as_deref(), Some("echo-v1.2.3"));
        assert_eq!(mr.spec.version, "1.2.3");
        assert_eq!(mr.metadata.labels.as_ref().unwrap()["status"], "pending");
        let json = serde_json::to_value(&mr).unwrap();
        assert_eq!(json["apiVersion"], "deckhouse.io/v1alpha1");
        assert_eq!(json["status"]["phase"], "Pending");
        let dr = serde_json::to_value(DeckhouseRelease::test("1.69.3").approved()).unwrap();
        assert_eq!(dr["metadata"]["name"], "v1.69.3");
        assert_eq!(dr["approved"], true);
        assert_eq!(dr["spec"]["version"], "v1.69.3");
        let module = serde_json::to_value(Module::test("echo", "deckhouse", "v1.0.0")).unwrap();
        assert_eq!(module["properties"]["source"], "deckhouse");
        assert!(module.get("spec").is_none());
        for object in [
            serde_json::to_value(ModuleUpdatePolicy::test("p").window("1:00", "2:00")).unwrap(),
            serde_json::to_value(ObjectKeeper::test_ttl("k", "1h")).unwrap(),
            serde_json::to_value(ObjectKeeper::test_follow("k", "ns", "cm", "u")).unwrap(),
            serde_json::to_value(RegistryConfig::test("registry.example.com")).unwrap(),
            serde_json::to_value(ModuleConfig::test("registry").settings(
                1,
                serde_json::json!({"mode": "Managed", "primary": {"upstream": {"host": "r"}}}),
            ))
            .unwrap(),
        ] {
            let kind = object["kind"].as_str().unwrap().to_string();
            assert_eq!(
                crate::validation::validate(&kind, None, &object),
                Ok(vec![]),
                "{kind}"
            );
        }
    }
}
