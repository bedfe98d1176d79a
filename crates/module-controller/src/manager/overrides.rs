//! ModulePullOverride: run a module from a mutable tag.

use super::*;

impl Manager {
    async fn set_override_status(&self, name: &str, status: Value) -> Result<(), Error> {
        self.api::<ModulePullOverride>()
            .patch_status(name, &pp(), &Patch::Merge(json!({"status": status})))
            .await
            .map_err(|e| Error::kube(format!("patch ModulePullOverride {name} status"), e))?;
        Ok(())
    }

    /// Reconciles one override: compare the tag's digest, re-install on change, roll back on
    /// delete.
    pub async fn sync_override(&self, o: &ModulePullOverride) -> Result<(), Error> {
        let name = o.name_any();
        let overrides: Api<ModulePullOverride> = self.api();
        let now = self.now();
        if o.meta().deletion_timestamp.is_some() {
            if o.spec.rollback {
                let deployed = self
                    .module_releases(&name)
                    .await?
                    .into_iter()
                    .find(|r| release_phase(r) == Phase::Deployed);
                match deployed {
                    Some(r) => {
                        let weight = self
                            .get_opt::<Module>(&name)
                            .await?
                            .and_then(|m| m.spec.properties.weight)
                            .unwrap_or(module_plan::definition::DOWNLOADED_WEIGHT);
                        self.downloaded.activate(&name, &r.spec.version, weight)?;
                    }
                    None => self.downloaded.deactivate(&name)?,
                }
                self.downloaded.remove_release(&name, OVERRIDE_VERSION)?;
            }
            if self.get_opt::<Module>(&name).await?.is_some() {
                let current = self
                    .get_opt::<Module>(&name)
                    .await?
                    .and_then(|m| m.status.and_then(|s| s.phase));
                self.set_module_phase(
                    &name,
                    current.unwrap_or(ModulePhase::Available),
                    vec![condition(
                        ModuleConditionType::IsOverridden,
                        false,
                        None,
                        "",
                        &now,
                    )],
                )
                .await?;
            }
            let finalizers: Vec<&String> = o
                .finalizers()
                .iter()
                .filter(|f| *f != keys::FINALIZER_MPO)
                .collect();
            overrides
                .patch(
                    &name,
                    &pp(),
                    &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
                )
                .await
                .map_err(|e| Error::kube(format!("patch ModulePullOverride {name}"), e))?;
            return Ok(());
        }
        let Some(module) = self.get_opt::<Module>(&name).await? else {
            return self
                .set_override_status(&name, json!({"message": mpo::MESSAGE_MODULE_NOT_FOUND}))
                .await;
        };
        let source_name = match module.spec.properties.source.as_deref() {
            Some(SOURCE_EMBEDDED) => {
                return self
                    .set_override_status(&name, json!({"message": mpo::MESSAGE_EMBEDDED}))
                    .await;
            }
            None => {
                return self
                    .set_override_status(&name, json!({"message": mpo::MESSAGE_NO_ACTIVE_SOURCE}))
                    .await;
            }
            Some(s) => s.to_owned(),
        };
        let Some(source) = self.get_opt::<ModuleSource>(&source_name).await? else {
            return self
                .set_override_status(&name, json!({"message": mpo::MESSAGE_SOURCE_NOT_FOUND}))
                .await;
        };
        if !o.finalizers().iter().any(|f| f == keys::FINALIZER_MPO) {
            let mut finalizers = o.finalizers().to_vec();
            finalizers.push(keys::FINALIZER_MPO.into());
            overrides
                .patch(
                    &name,
                    &pp(),
                    &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
                )
                .await
                .map_err(|e| Error::kube(format!("patch ModulePullOverride {name}"), e))?;
        }
        let overridden = module.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "IsOverridden" && c.status == "True")
        });
        if !overridden {
            let phase = module
                .status
                .as_ref()
                .and_then(|s| s.phase)
                .unwrap_or(ModulePhase::Available);
            self.set_module_phase(
                &name,
                phase,
                vec![condition(
                    ModuleConditionType::IsOverridden,
                    true,
                    None,
                    "",
                    &now,
                )],
            )
            .await?;
        }
        let registry = match self.registry(&source) {
            Ok(r) => r,
            Err(e) => {
                return self
                    .set_override_status(
                        &name,
                        json!({"message": mpo::message_download_error(&e.to_string())}),
                    )
                    .await;
            }
        };
        let digest = match registry.digest(&name, &o.spec.image_tag).await {
            Ok(d) => d.to_string(),
            Err(e) => {
                return self
                    .set_override_status(
                        &name,
                        json!({"message": mpo::message_download_error(&e.to_string())}),
                    )
                    .await;
            }
        };
        if o.status.as_ref().and_then(|s| s.image_digest.as_deref()) == Some(digest.as_str())
            && self.downloaded.active_version(&name).as_deref() == Some(OVERRIDE_VERSION)
        {
            return self
                .set_override_status(&name, json!({"message": mpo::MESSAGE_READY}))
                .await;
        }
        let config: Option<ModuleConfig> = self.get_opt(&name).await?;
        let spec = config.map(|c| c.spec).unwrap_or_default();
        match install(
            &registry,
            &self.downloaded,
            &name,
            &o.spec.image_tag,
            OVERRIDE_VERSION,
            &spec,
            self.limits,
        )
        .await
        {
            Ok(installed) => {
                tracing::info!(module = %name, %digest, "override deployed");
                self.ensure_documentation(
                    &name,
                    api::module_documentation::ModuleDocumentationSpec {
                        version: OVERRIDE_VERSION.into(),
                        checksum: Some(crate::install::md5_hex(digest.as_bytes())),
                        path: Some(format!("/modules/deployed/{name}")),
                    },
                    OwnerReference {
                        api_version: "deckhouse.io/v1alpha2".into(),
                        kind: "ModulePullOverride".into(),
                        name: name.clone(),
                        uid: o.uid().unwrap_or_default(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    },
                )
                .await?;
                self.set_override_status(
                    &name,
                    json!({"message": mpo::MESSAGE_READY, "imageDigest": digest, "updatedAt": now, "weight": installed.files.definition.weight}),
                )
                .await
            }
            Err(e) => {
                self.set_override_status(
                    &name,
                    json!({"message": mpo::message_download_error(&e.to_string())}),
                )
                .await
            }
        }
    }
}
