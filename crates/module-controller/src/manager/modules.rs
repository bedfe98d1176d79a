//! Modules and ModuleConfigs: enabling, source choice, update policy, ModuleConfig status.

use super::*;

impl Manager {
    /// The settings of the module's active release (`None` when nothing is installed).
    fn active_settings(&self, module: &str) -> Option<module_plan::config::ModuleSettings> {
        if let Some(e) = self
            .embedded
            .iter()
            .find(|e| e.files.definition.name == module)
        {
            return Some(e.files.settings.clone());
        }
        let version = self.downloaded.active_version(module)?;
        let dir = self.downloaded.release_dir(module, &version);
        read_module_files(module, &dir).ok().map(|f| f.settings)
    }

    /// Creates or updates the Modules of the embedded modules and deletes embedded Modules no
    /// longer on disk.
    async fn sync_embedded(&self) -> Result<(), Error> {
        let modules: Api<Module> = self.api();
        let version = self
            .facts
            .deckhouse_version
            .as_ref()
            .map(|v| format!("v{v}"));
        let channel = self
            .policy_for("deckhouse")
            .await?
            .ok()
            .map(|p| p.channel.as_str().to_owned());
        for e in &self.embedded {
            let name = &e.files.definition.name;
            let mut properties = e.files.definition.properties();
            properties.source = Some(SOURCE_EMBEDDED.to_owned());
            properties.version = version.clone();
            properties.release_channel = channel.clone();
            let existing = self.get_opt::<Module>(name).await?;
            if let Some(m) = &existing {
                properties.update_policy = m.spec.properties.update_policy.clone();
            }
            match existing {
                None => {
                    let mut m = Module::new(name, Default::default());
                    m.spec.properties = properties;
                    modules
                        .create(&PostParams::default(), &m)
                        .await
                        .map_err(|e| Error::kube(format!("create Module {name}"), e))?;
                }
                Some(m) if m.spec.properties != properties => {
                    modules
                        .patch(
                            name,
                            &pp(),
                            &Patch::Merge(json!({"properties": properties})),
                        )
                        .await
                        .map_err(|e| Error::kube(format!("patch Module {name}"), e))?;
                }
                Some(_) => {}
            }
        }
        for m in modules
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list Modules", e))?
        {
            let embedded = m.spec.properties.source.as_deref() == Some(SOURCE_EMBEDDED);
            if embedded
                && !self
                    .embedded
                    .iter()
                    .any(|e| e.files.definition.name == m.name_any())
            {
                modules
                    .delete(&m.name_any(), &DeleteParams::default())
                    .await
                    .map_err(|e| Error::kube(format!("delete Module {}", m.name_any()), e))?;
            }
        }
        Ok(())
    }

    /// Writes the ModuleSettingsDefinition of a module from its settings.
    async fn sync_settings_definition(
        &self,
        module: &str,
        settings: &module_plan::config::ModuleSettings,
    ) -> Result<(), Error> {
        use api::module_settings_definition::ModuleSettingsDefinition;
        let api: Api<ModuleSettingsDefinition> = self.api();
        let spec = settings.definition();
        match self.get_opt::<ModuleSettingsDefinition>(module).await? {
            Some(existing) if existing.spec == spec => Ok(()),
            Some(_) => api
                .patch(module, &pp(), &Patch::Merge(json!({"spec": spec})))
                .await
                .map(drop)
                .map_err(|e| Error::kube(format!("patch ModuleSettingsDefinition {module}"), e)),
            None => {
                let mut msd = ModuleSettingsDefinition::new(module, spec);
                msd.labels_mut()
                    .insert(keys::LABEL_HERITAGE.into(), keys::HERITAGE_DECKHOUSE.into());
                api.create(&PostParams::default(), &msd)
                    .await
                    .map(drop)
                    .map_err(|e| {
                        Error::kube(format!("create ModuleSettingsDefinition {module}"), e)
                    })
            }
        }
    }

    /// `d8_deprecated_update_policy`: the modules (`name, source, enabled by config, named
    /// policy`) that a `v1alpha1` policy's selector still matches. Only policies stored
    /// before `v1alpha2` became the stored version keep a selector (a `v1alpha1` write is
    /// stored as `v1alpha2`, which has none), as in Deckhouse.
    async fn sync_deprecated_policies(
        &self,
        facts: &[(String, String, bool, Option<String>)],
    ) -> Result<(), Error> {
        // Read as Deckhouse's hook reads them, through v1alpha1, leniently: a policy without a
        // selector (a server that converts without adding one) selects nothing.
        let gvk =
            kube::api::GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "ModuleUpdatePolicy");
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "moduleupdatepolicies");
        let policies = Api::<kube::api::DynamicObject>::all_with(self.client.clone(), &resource)
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list ModuleUpdatePolicies (v1alpha1)", e))?
            .items;
        let selectors: Vec<(String, api::module_update_policy::v1alpha1::LabelSelector)> = policies
            .iter()
            .filter_map(|p| {
                let selector = p
                    .data
                    .pointer("/spec/moduleReleaseSelector/labelSelector")?;
                Some((p.name_any(), serde_json::from_value(selector.clone()).ok()?))
            })
            .collect();
        let selectors: Vec<(&str, _)> = selectors.iter().map(|(n, s)| (n.as_str(), s)).collect();
        let modules: Vec<module_plan::deprecated_policy::Module<'_>> = facts
            .iter()
            .map(
                |(name, source, enabled, policy)| module_plan::deprecated_policy::Module {
                    name,
                    source,
                    enabled_by_config: *enabled,
                    update_policy: policy.as_deref(),
                },
            )
            .collect();
        let matched = module_plan::deprecated_policy::matches(&modules, &selectors);
        self.metrics
            .set_deprecated_update_policies(matched.iter().map(|(m, p)| (m.as_str(), p.as_str())));
        Ok(())
    }

    /// Runs the enabling chain and writes Module conditions, phases and ModuleConfig statuses.
    pub async fn sync_modules(&self) -> Result<(), Error> {
        self.sync_embedded().await?;
        let modules: Api<Module> = self.api();
        let configs: Api<ModuleConfig> = self.api();
        let all = modules
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list Modules", e))?
            .items;
        let all_configs: BTreeMap<String, ModuleConfig> = configs
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list ModuleConfigs", e))?
            .items
            .into_iter()
            .map(|c| (c.name_any(), c))
            .collect();
        self.metrics.set_maintenance(
            all_configs
                .iter()
                .filter_map(|(name, c)| Some((name.as_str(), c.spec.maintenance?.as_str()))),
        );
        self.metrics.set_allowed_to_disable(
            all_configs
                .iter()
                .map(|(name, c)| (name.as_str(), allowed_to_disable(c))),
        );
        let license_edition = all_configs
            .get("deckhouse")
            .and_then(|c| c.spec.settings.as_ref())
            .and_then(|s| s.pointer("/license/edition"))
            .and_then(serde_json::Value::as_str);
        self.metrics
            .set_edition_not_found(!crate::metrics::edition_found(
                &self.facts.edition,
                license_edition,
            ));
        // `bundle` and the experimental modules from the `deckhouse` ModuleConfig (the
        // `--bundle` flag is the default).
        let facts = self.facts.with_deckhouse_settings(
            all_configs
                .get("deckhouse")
                .and_then(|c| c.spec.settings.as_ref()),
        );
        let inputs: Vec<enabling::Input> = all
            .iter()
            .map(|m| enabling::Input {
                name: m.name_any(),
                properties: m.spec.properties.clone(),
                version: m
                    .spec
                    .properties
                    .version
                    .as_deref()
                    .and_then(enabling::version_of),
                config_enabled: all_configs.get(&m.name_any()).and_then(|c| c.spec.enabled),
                ..Default::default()
            })
            .collect();
        let decisions = enabling::decide_all(&inputs, &facts);
        let infos: Vec<crate::metrics::ModuleInfo> = all
            .iter()
            .map(|m| crate::metrics::ModuleInfo {
                module: m.name_any(),
                enabled: decisions.get(&m.name_any()).is_some_and(|d| d.enabled),
                critical: m.spec.properties.critical.unwrap_or(false),
            })
            .collect();
        self.metrics.set_module_info(&infos);
        let now = self.now();
        let mut conflicts = Vec::new();
        let mut obsolete_versions = Vec::new();
        let mut policy_facts: Vec<(String, String, bool, Option<String>)> = Vec::new();
        for module in &all {
            let name = module.name_any();
            let config = all_configs.get(&name);
            let decision = &decisions[&name];
            let embedded = module.spec.properties.source.as_deref() == Some(SOURCE_EMBEDDED);
            let mut properties = serde_json::Map::new();
            let mut chosen = module.spec.properties.source.clone();
            if !embedded && decision.enabled {
                if let Some(source) = config.and_then(|c| c.spec.source.clone()) {
                    chosen = Some(source);
                } else if chosen.is_none() && module.spec.properties.available_sources.len() == 1 {
                    chosen = module.spec.properties.available_sources.first().cloned();
                }
                if chosen != module.spec.properties.source {
                    properties.insert("source".into(), json!(chosen));
                }
            }
            let policy = config.and_then(|c| c.spec.update_policy.clone());
            if policy != module.spec.properties.update_policy {
                properties.insert("updatePolicy".into(), json!(policy));
            }
            if !properties.is_empty() {
                modules
                    .patch(
                        &name,
                        &pp(),
                        &Patch::Merge(json!({"properties": properties})),
                    )
                    .await
                    .map_err(|e| Error::kube(format!("patch Module {name}"), e))?;
            }
            let by_config = config.and_then(|c| c.spec.enabled);
            policy_facts.push((
                name.clone(),
                chosen.clone().unwrap_or_default(),
                by_config == Some(true),
                policy.clone(),
            ));
            let mut conditions = vec![condition(
                ModuleConditionType::EnabledByModuleConfig,
                by_config == Some(true),
                (by_config != Some(true)).then_some(ModuleConditionReason::ModuleConfig),
                if by_config == Some(true) {
                    ""
                } else {
                    "turned off by module config"
                },
                &now,
            )];
            let current = module.status.as_ref().and_then(|s| s.phase);
            let conflict = !embedded
                && decision.enabled
                && chosen.is_none()
                && module.spec.properties.available_sources.len() > 1;
            let phase = if conflict {
                conflicts.push(name.clone());
                conditions.push(condition(
                    ModuleConditionType::EnabledByModuleManager,
                    false,
                    Some(ModuleConditionReason::Conflict),
                    "several available sources",
                    &now,
                ));
                conditions.push(condition(
                    ModuleConditionType::IsReady,
                    false,
                    Some(ModuleConditionReason::Conflict),
                    "several available sources",
                    &now,
                ));
                Some(ModulePhase::Conflict)
            } else if decision.enabled {
                conditions.push(condition(
                    ModuleConditionType::EnabledByModuleManager,
                    true,
                    None,
                    "",
                    &now,
                ));
                match current {
                    Some(ModulePhase::Conflict) => Some(ModulePhase::Available),
                    other => other,
                }
            } else {
                conditions.push(condition(
                    ModuleConditionType::EnabledByModuleManager,
                    false,
                    Some(decision.reason),
                    &decision.message,
                    &now,
                ));
                conditions.push(condition(
                    ModuleConditionType::IsReady,
                    false,
                    Some(decision.reason),
                    &decision.message,
                    &now,
                ));
                if decision.is_unavailable() {
                    Some(ModulePhase::Unavailable)
                } else if matches!(
                    current,
                    Some(ModulePhase::Available | ModulePhase::Unavailable)
                ) {
                    current
                } else {
                    Some(ModulePhase::Downloaded)
                }
            };
            // An enabled module's phase is the module runtime's (Installing, Reconciling, Ready,
            // Error) once it has one: only the conditions are merged then.
            let keep_phase = !conflict
                && decision.enabled
                && current.is_some_and(|p| p != ModulePhase::Conflict);
            let phase = (!keep_phase).then(|| phase.unwrap_or(ModulePhase::Available));
            self.patch_module_status(&name, phase, conditions).await?;
            let settings = self.active_settings(&name);
            if let Some(settings) = &settings {
                self.sync_settings_definition(&name, settings).await?;
            }
            if let Some(config) = config {
                if let Some(settings) = &settings
                    && let Some(obsolete) = obsolete_version(config, settings.latest())
                {
                    obsolete_versions.push((name.clone(), obsolete, settings.latest()));
                }
                let status = match settings {
                    Some(s) => s.status(&config.spec),
                    None => api::module_config::ModuleConfigStatus::default(),
                };
                if config.status.as_ref() != Some(&status) {
                    configs
                        .patch_status(&name, &pp(), &Patch::Merge(config_status_patch(&status)))
                        .await
                        .map_err(|e| Error::kube(format!("patch ModuleConfig {name} status"), e))?;
                }
                if by_config == Some(false)
                    && config
                        .annotations()
                        .contains_key(keys::ANNOTATION_ALLOW_DISABLING)
                {
                    configs
                        .patch(&name, &pp(), &Patch::Merge(json!({"metadata": {"annotations": {keys::ANNOTATION_ALLOW_DISABLING: null}}})))
                        .await
                        .map_err(|e| Error::kube(format!("patch ModuleConfig {name}"), e))?;
                }
            }
        }
        self.metrics
            .set_at_conflict(conflicts.iter().map(String::as_str));
        self.sync_deprecated_policies(&policy_facts).await?;
        self.metrics.set_obsolete_versions(
            obsolete_versions
                .iter()
                .map(|(name, version, latest)| (name.as_str(), *version, *latest)),
        );
        // ModuleConfigs of unknown modules.
        let known: BTreeSet<String> = all.iter().map(ResourceExt::name_any).collect();
        for (name, config) in &all_configs {
            if known.contains(name) || name == "global" {
                continue;
            }
            let status = if module_plan::config::BUILT_IN_MODULES.contains(&name.as_str()) {
                let refusal = match name.as_str() {
                    "registry" => self.registry_refusal().await?,
                    _ => None,
                };
                module_plan::config::built_in_module_status(&config.spec, refusal.as_deref())
            } else {
                module_plan::config::unknown_module_status()
            };
            if config.status.as_ref() != Some(&status) {
                configs
                    .patch_status(name, &pp(), &Patch::Merge(config_status_patch(&status)))
                    .await
                    .map_err(|e| Error::kube(format!("patch ModuleConfig {name} status"), e))?;
            }
        }
        Ok(())
    }

    /// Why the registry module refuses its configuration: RegistryConfig `registry`'s
    /// condition `Valid=False` (prerequisites not met, invalid settings), written by the
    /// registry controller.
    async fn registry_refusal(&self) -> Result<Option<String>, Error> {
        let api: Api<api::registry::RegistryConfig> = Api::all(self.client.clone());
        let config = api
            .get_opt("registry")
            .await
            .map_err(|e| Error::kube("get RegistryConfig registry", e))?;
        Ok(config
            .and_then(|c| c.status)
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Valid"))
            .filter(|c| c.status == api::conditions::ConditionStatus::False)
            .map(|c| c.message.unwrap_or_else(|| c.reason.clone())))
    }
}

/// A merge patch setting a ModuleConfig's status: both fields always written, so an empty
/// message clears the previous one (the type leaves empty fields out).
fn config_status_patch(status: &api::module_config::ModuleConfigStatus) -> serde_json::Value {
    json!({"status": {"version": status.version, "message": status.message}})
}

/// `d8_moduleconfig_allowed_to_disable`: the ModuleConfig carries the allow-disabling annotation
/// (any value, as Deckhouse's webhook checks its presence) while it still enables the module.
/// The settings version of `config` when it is set and older than `latest` (Deckhouse fires
/// `ModuleConfigObsoleteVersion` for it; never for `global`).
fn obsolete_version(config: &ModuleConfig, latest: i64) -> Option<i64> {
    let version = config.spec.version.filter(|v| *v > 0)?;
    (config.name_any() != "global" && version < latest).then_some(version)
}

fn allowed_to_disable(config: &ModuleConfig) -> bool {
    config
        .annotations()
        .contains_key(keys::ANNOTATION_ALLOW_DISABLING)
        && config.spec.enabled == Some(true)
}

/// Whether `config` enables its module (`enabled: true`) and leaves `source` free to serve it
/// (no `source`, `Embedded`, or `source` itself): only then is an unreadable channel release
/// image of the module an error of the source and raises `d8_module_updating_module_is_not_valid`
/// (Deckhouse's module source controller; a module nobody asked this source for may be broken).
pub(super) fn wants_module_from(config: Option<&ModuleConfig>, source: &str) -> bool {
    let Some(config) = config.filter(|c| c.spec.enabled == Some(true)) else {
        return false;
    };
    match config.spec.source.as_deref() {
        None | Some("") | Some(SOURCE_EMBEDDED) => true,
        Some(chosen) => chosen == source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_serves_a_module_its_config_enables_from_it() {
        for (enabled, chosen, want) in [
            (Some(true), None, true),
            (Some(true), Some(""), true),
            (Some(true), Some(SOURCE_EMBEDDED), true),
            (Some(true), Some("example"), true),
            (Some(true), Some("other"), false),
            (Some(false), None, false),
            (None, Some("example"), false),
        ] {
            let mut config = ModuleConfig::new("echo", Default::default());
            config.spec.enabled = enabled;
            config.spec.source = chosen.map(str::to_owned);
            assert_eq!(
                wants_module_from(Some(&config), "example"),
                want,
                "{enabled:?} {chosen:?}"
            );
        }
        assert!(!wants_module_from(None, "example"));
    }

    #[test]
    fn obsolete_version_is_a_set_version_below_the_latest() {
        for (name, version, latest, want) in [
            ("echo", Some(1), 2, Some(1)),
            ("echo", Some(2), 2, None),
            ("echo", Some(3), 2, None),
            ("echo", None, 2, None),
            ("echo", Some(0), 2, None),
            ("global", Some(1), 2, None),
        ] {
            let mut config = ModuleConfig::new(name, Default::default());
            config.spec.version = version;
            assert_eq!(
                obsolete_version(&config, latest),
                want,
                "{name} {version:?} {latest}"
            );
        }
    }

    #[test]
    fn allowed_to_disable_needs_the_annotation_and_an_enabled_module() {
        for (annotated, enabled, want) in [
            (true, Some(true), true),
            (true, Some(false), false),
            (true, None, false),
            (false, Some(true), false),
        ] {
            let mut config = ModuleConfig::new("echo", Default::default());
            config.spec.enabled = enabled;
            if annotated {
                config
                    .annotations_mut()
                    .insert(keys::ANNOTATION_ALLOW_DISABLING.into(), "true".into());
            }
            assert_eq!(allowed_to_disable(&config), want, "{annotated} {enabled:?}");
        }
    }
}
