//! ModuleReleases: the task calculator and deploy-time rules decide, apply installs.

use super::*;

/// Most releases of one module settled in one pass.
const MAX_STEPS: usize = 16;

impl Manager {
    async fn set_release_status(
        &self,
        name: &str,
        phase: ModuleReleasePhase,
        message: &str,
        extra: Value,
    ) -> Result<(), Error> {
        if phase != ModuleReleasePhase::Pending {
            // Deckhouse's series describes a waiting release only.
            self.metrics.purge_module_release_info(name);
        }
        let releases: Api<ModuleRelease> = self.api();
        let mut status = json!({"phase": phase, "message": message, "transitionTime": self.now()});
        if let (Value::Object(s), Value::Object(e)) = (&mut status, extra) {
            s.extend(e);
        }
        releases
            .patch_status(name, &pp(), &Patch::Merge(json!({"status": status})))
            .await
            .map_err(|e| Error::kube(format!("patch ModuleRelease {name} status"), e))?;
        releases
            .patch(
                name,
                &pp(),
                &Patch::Merge(json!({"metadata": {"labels": {keys::LABEL_STATUS: phase.label()}}})),
            )
            .await
            .map_err(|e| Error::kube(format!("patch ModuleRelease {name}"), e))?;
        Ok(())
    }

    /// A Deployed release marked `registry-spec-changed`: its installed files get the source's
    /// current registry settings, then the mark is dropped.
    async fn apply_registry_changes(&self, module: &str) -> Result<(), Error> {
        for r in self.module_releases(module).await? {
            if release_phase(&r) != Phase::Deployed
                || !r
                    .annotations()
                    .contains_key(keys::MODULE_RELEASE_REGISTRY_SPEC_CHANGED)
            {
                continue;
            }
            let source_name = r
                .labels()
                .get(keys::LABEL_SOURCE)
                .cloned()
                .unwrap_or_default();
            let Some(source) = self.get_opt::<ModuleSource>(&source_name).await? else {
                continue;
            };
            let dir = self.downloaded.release_dir(module, &r.spec.version);
            if dir.is_dir() {
                crate::install::inject_registry(&dir, module, &source.spec.registry)?;
                tracing::info!(release = %r.name_any(), "registry settings rewritten");
            }
            self.annotate_release(
                &r.name_any(),
                json!({keys::MODULE_RELEASE_REGISTRY_SPEC_CHANGED: null}),
            )
            .await?;
        }
        Ok(())
    }

    /// Settles the Pending releases of `module`.
    pub async fn process_releases(&self, module: &str) -> Result<(), Error> {
        self.apply_registry_changes(module).await?;
        if self.get_opt::<ModulePullOverride>(module).await?.is_some() {
            return Ok(());
        }
        let config: Option<ModuleConfig> = self.get_opt(module).await?;
        for _ in 0..MAX_STEPS {
            let releases = self.module_releases(module).await?;
            if config
                .as_ref()
                .is_some_and(|c| c.spec.enabled == Some(false))
            {
                for r in releases
                    .iter()
                    .filter(|r| matches!(release_phase(r), Phase::Pending | Phase::New))
                {
                    self.api::<ModuleRelease>()
                        .delete(&r.name_any(), &DeleteParams::default())
                        .await
                        .map_err(|e| Error::kube("delete ModuleRelease", e))?;
                }
                return Ok(());
            }
            let mut entries: Vec<(ModuleRelease, task::Release)> = Vec::new();
            for r in &releases {
                let Ok(version) = ReleaseVersion::parse(&r.spec.version) else {
                    continue;
                };
                let mut phase = release_phase(r);
                if phase == Phase::New {
                    self.set_release_status(
                        &r.name_any(),
                        ModuleReleasePhase::Pending,
                        "",
                        json!({}),
                    )
                    .await?;
                    phase = Phase::Pending;
                }
                let mut t = task::Release::new(r.name_any(), version, phase);
                t.forced = r.is_forced();
                t.message = r
                    .status
                    .as_ref()
                    .map(|s| s.message.clone())
                    .unwrap_or_default();
                entries.push((r.clone(), t));
            }
            entries.sort_by(|a, b| a.1.version.cmp(&b.1.version));
            let Some((release, _)) = entries.iter().find(|(_, t)| t.phase == Phase::Pending) else {
                return Ok(());
            };
            let name = release.name_any();
            let policy = match self.policy_for(module).await? {
                Ok(p) => p,
                Err(no_policy) => {
                    if let super::NoPolicy::NotFound(_) = no_policy {
                        self.metrics.count_update_policy_not_found(
                            &name,
                            module,
                            &format!("v{}", release.spec.version),
                        );
                    }
                    let message = no_policy.to_string();
                    self.set_release_status(
                        &name,
                        ModuleReleasePhase::Pending,
                        &message,
                        json!({}),
                    )
                    .await?;
                    return Ok(());
                }
            };
            if release.labels().get(keys::LABEL_UPDATE_POLICY) != Some(&policy.name) {
                self.api::<ModuleRelease>()
                    .patch(&name, &pp(), &Patch::Merge(json!({"metadata": {"labels": {keys::LABEL_UPDATE_POLICY: policy.name}}})))
                    .await
                    .map_err(|e| Error::kube(format!("patch ModuleRelease {name}"), e))?;
            }
            let all: Vec<task::Release> = entries.iter().map(|(_, t)| t.clone()).collect();
            let context = task::Context {
                kind: ReleaseKind::Module,
                lts: policy.channel == ReleaseChannel::Lts,
            };
            let decided = match task::calculate(&all, &name, context) {
                Ok(t) => t,
                Err(e) => {
                    self.set_release_status(
                        &name,
                        ModuleReleasePhase::Pending,
                        &e.to_string(),
                        json!({}),
                    )
                    .await?;
                    return Ok(());
                }
            };
            match decided.task_type {
                task::TaskType::Skip => {
                    self.set_release_status(
                        &name,
                        ModuleReleasePhase::Skipped,
                        &decided.message,
                        json!({}),
                    )
                    .await?;
                    continue;
                }
                task::TaskType::Await => {
                    self.set_release_status(
                        &name,
                        ModuleReleasePhase::Pending,
                        &decided.message,
                        json!({}),
                    )
                    .await?;
                    return Ok(());
                }
                task::TaskType::Process => {}
            }
            let mut settings = deploy::Settings::new(ReleaseKind::Module, policy.mode);
            settings.windows = policy.windows.clone();
            settings.minimal_notification_time = policy.notification.minimal_notification_time;
            settings.webhook_configured = policy.notification.webhook.is_some();
            settings.notify_release_type = policy.notification.release_type;
            let state = deploy::ReleaseState {
                name: name.clone(),
                apply_after: release.spec.apply_after.as_ref().map(|t| t.0),
                apply_now: release.is_apply_now(),
                forced: release.is_forced(),
                notified: keys::flag(
                    release.metadata.annotations.as_ref(),
                    keys::MODULE_RELEASE_NOTIFIED,
                ),
                manually_approved: release.is_approved(),
                disruption_approved: false,
            };
            let failures = self.requirement_failures(release);
            let input = deploy::Input {
                settings: &settings,
                release: &state,
                task: &decided,
                now: self.clock.now(),
                pod_ready: true,
                requirement_failures: &failures,
                disruption_reasons: &[],
            };
            let plan = deploy::plan(&input)?;
            // d8_module_release_info as planned; a failed notification below rewrites it.
            if let Some(info) = deploy::ReleaseInfo::of(&input, &plan, false) {
                self.metrics.set_module_release_info(&name, module, &info);
            }
            let plan = match plan {
                deploy::Plan::DeployTime {
                    notify: Some(request),
                    delay,
                } => {
                    let version = ReleaseVersion::parse(&release.spec.version)?;
                    let requirements = release
                        .spec
                        .requirements
                        .as_ref()
                        .map(requirements_map)
                        .unwrap_or_default();
                    let body = deploy::WebhookBody::new(
                        ReleaseKind::Module,
                        &version,
                        requirements,
                        "",
                        request.apply_time,
                    );
                    match self.notifier.send(&policy.notification, &body).await {
                        Ok(()) => {
                            // Recorded at once: the webhook is called at most once per release.
                            self.annotate_release(
                                &name,
                                json!({keys::MODULE_RELEASE_NOTIFIED: "true"}),
                            )
                            .await?;
                            tracing::info!(release = %name, "module release notification sent");
                            deploy::Plan::DeployTime {
                                notify: None,
                                delay,
                            }
                        }
                        Err(error) => {
                            let unsent = deploy::Plan::DeployTime {
                                notify: None,
                                delay: delay.clone(),
                            };
                            if let Some(info) = deploy::ReleaseInfo::of(&input, &unsent, true) {
                                self.metrics.set_module_release_info(&name, module, &info);
                            }
                            let failed = deploy::notification_failed(delay.as_ref(), &error);
                            self.write_delay(release, &failed).await?;
                            return Ok(());
                        }
                    }
                }
                other => other,
            };
            match plan {
                deploy::Plan::ApplyForced | deploy::Plan::DeployTime { delay: None, .. } => {
                    if !self.apply(module, release, config.as_ref()).await? {
                        return Ok(());
                    }
                }
                deploy::Plan::DeployTime {
                    delay: Some(delay), ..
                } => {
                    self.write_delay(release, &delay).await?;
                    return Ok(());
                }
                deploy::Plan::Blocked { message } => {
                    self.set_release_status(
                        &name,
                        ModuleReleasePhase::Pending,
                        &message,
                        json!({}),
                    )
                    .await?;
                    return Ok(());
                }
                deploy::Plan::Requeue => return Ok(()),
            }
        }
        Ok(())
    }

    async fn annotate_release(&self, name: &str, annotations: Value) -> Result<(), Error> {
        self.api::<ModuleRelease>()
            .patch(
                name,
                &pp(),
                &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
            )
            .await
            .map_err(|e| Error::kube(format!("patch ModuleRelease {name}"), e))?;
        Ok(())
    }

    /// Records a delay: Pending with its message, `isUpdating=false`, `notified`, and the
    /// notification shift of `spec.applyAfter` when there is one.
    async fn write_delay(
        &self,
        release: &ModuleRelease,
        delay: &deploy::Delay,
    ) -> Result<(), Error> {
        let name = release.name_any();
        self.set_release_status(
            &name,
            ModuleReleasePhase::Pending,
            &delay.message,
            json!({}),
        )
        .await?;
        let notified = if delay.notified { "true" } else { "false" };
        let mut wanted = serde_json::Map::new();
        wanted.insert(keys::MODULE_RELEASE_IS_UPDATING.into(), json!("false"));
        wanted.insert(keys::MODULE_RELEASE_NOTIFIED.into(), json!(notified));
        if delay.apply_after.is_some() {
            wanted.insert(
                keys::MODULE_RELEASE_NOTIFICATION_TIME_SHIFT.into(),
                json!("true"),
            );
        }
        let current = release.annotations();
        if wanted
            .iter()
            .any(|(k, v)| current.get(k).map(|c| json!(c)) != Some(v.clone()))
        {
            self.annotate_release(&name, Value::Object(wanted)).await?;
        }
        if let Some(after) = delay.apply_after
            && release.spec.apply_after.as_ref().map(|t| t.0) != Some(after)
        {
            self.api::<ModuleRelease>()
                .patch(
                    &name,
                    &pp(),
                    &Patch::Merge(json!({"spec": {"applyAfter": Time(after)}})),
                )
                .await
                .map_err(|e| Error::kube(format!("set applyAfter of {name}"), e))?;
        }
        Ok(())
    }

    fn requirement_failures(&self, release: &ModuleRelease) -> Vec<String> {
        let mut failures = Vec::new();
        let Some(requirements) = release.spec.requirements.as_ref() else {
            return failures;
        };
        let version = ReleaseVersion::parse(&release.spec.version).ok();
        for (key, constraint, actual) in [
            (
                "deckhouse",
                requirements.deckhouse.as_deref(),
                self.facts.deckhouse_version.as_ref(),
            ),
            (
                "kubernetes",
                requirements.kubernetes.as_deref(),
                self.facts.kubernetes_version.as_ref(),
            ),
        ] {
            let (Some(constraint), Some(actual), Some(version)) =
                (constraint, actual, version.as_ref())
            else {
                continue;
            };
            let ok =
                module_plan::constraint::Constraint::parse(constraint).map(|c| c.matches(actual));
            let error = match ok {
                Ok(true) => continue,
                Ok(false) => format!("{actual} does not satisfy {constraint:?}"),
                Err(e) => e.to_string(),
            };
            failures.push(deploy::requirement_not_met_message(key, version, &error));
        }
        failures
    }

    /// Installs `release`; `Ok(false)` when it could not be (the reason is in its status).
    async fn apply(
        &self,
        module: &str,
        release: &ModuleRelease,
        config: Option<&ModuleConfig>,
    ) -> Result<bool, Error> {
        let name = release.name_any();
        let version = release.spec.version.clone();
        let source_name = release
            .labels()
            .get(keys::LABEL_SOURCE)
            .cloned()
            .unwrap_or_default();
        let Some(source) = self.get_opt::<ModuleSource>(&source_name).await? else {
            self.set_release_status(
                &name,
                ModuleReleasePhase::Pending,
                &format!("the source {source_name:?} not found"),
                json!({}),
            )
            .await?;
            return Ok(false);
        };
        let registry = match self.registry(&source) {
            Ok(r) => r,
            Err(e) => {
                self.set_release_status(
                    &name,
                    ModuleReleasePhase::Pending,
                    &e.to_string(),
                    json!({}),
                )
                .await?;
                return Ok(false);
            }
        };
        let spec = config.map(|c| c.spec.clone()).unwrap_or_default();
        let installed = match install(
            &registry,
            &self.downloaded,
            module,
            &format!("v{version}"),
            &version,
            &spec,
            self.limits,
        )
        .await
        {
            Ok(i) => {
                self.metrics.set_configuration_error(module, &version, None);
                i
            }
            Err(e) => {
                if let Error::SettingsRejected { reason } = &e {
                    self.metrics
                        .set_configuration_error(module, &version, Some(reason));
                }
                tracing::warn!(release = %name, error = %e, "module release not applied");
                self.set_release_status(
                    &name,
                    ModuleReleasePhase::Pending,
                    &e.to_string(),
                    json!({}),
                )
                .await?;
                let first = self.downloaded.active_version(module).is_none();
                if first && !matches!(e, Error::SettingsRejected { .. }) {
                    self.set_module_phase(module, ModulePhase::DownloadingError, vec![])
                        .await?;
                }
                return Ok(false);
            }
        };
        let releases: Api<ModuleRelease> = self.api();
        for other in self.module_releases(module).await? {
            if other.name_any() != name && release_phase(&other) == Phase::Deployed {
                self.set_release_status(
                    &other.name_any(),
                    ModuleReleasePhase::Superseded,
                    "",
                    json!({}),
                )
                .await?;
            }
        }
        let mut finalizers = release.finalizers().to_vec();
        if !finalizers.iter().any(|f| f == keys::FINALIZER_EXIST_ON_FS) {
            finalizers.push(keys::FINALIZER_EXIST_ON_FS.into());
        }
        releases
            .patch(
                &name,
                &pp(),
                &Patch::Merge(json!({"metadata": {
                    "finalizers": finalizers,
                    "annotations": {
                        keys::MODULE_RELEASE_APPLY_NOW: null,
                        keys::MODULE_RELEASE_FORCE: null,
                        keys::RELEASE_FORCE: null,
                        keys::MODULE_RELEASE_IS_UPDATING: "false",
                    }
                }})),
            )
            .await
            .map_err(|e| Error::kube(format!("patch ModuleRelease {name}"), e))?;
        let pull = format!("{:.3}s", installed.download.duration.as_secs_f64());
        self.set_release_status(
            &name,
            ModuleReleasePhase::Deployed,
            "",
            json!({"size": installed.download.size, "pullDuration": pull, "approved": true}),
        )
        .await?;
        self.api::<Module>()
            .patch(
                module,
                &pp(),
                &Patch::Merge(json!({"properties": {
                    "version": format!("v{version}"),
                    "source": source_name,
                    "weight": installed.files.definition.weight,
                }})),
            )
            .await
            .map_err(|e| Error::kube(format!("patch Module {module}"), e))?;
        let now = self.now();
        self.set_module_phase(
            module,
            ModulePhase::Ready,
            vec![
                condition(
                    ModuleConditionType::LastReleaseDeployed,
                    true,
                    None,
                    "",
                    &now,
                ),
                condition(ModuleConditionType::IsReady, true, None, "", &now),
            ],
        )
        .await?;
        let checksum = release
            .labels()
            .get(keys::LABEL_RELEASE_CHECKSUM)
            .cloned()
            .unwrap_or_else(|| crate::install::md5_hex(format!("v{version}").as_bytes()));
        self.ensure_documentation(
            module,
            api::module_documentation::ModuleDocumentationSpec {
                version: format!("v{version}"),
                checksum: Some(checksum),
                path: Some(format!("/{module}/v{version}")),
            },
            OwnerReference {
                api_version: "deckhouse.io/v1alpha1".into(),
                kind: "ModuleRelease".into(),
                name: name.clone(),
                uid: release.uid().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            },
        )
        .await?;
        tracing::info!(release = %name, "module release deployed");
        self.cleanup(module).await?;
        Ok(true)
    }

    async fn cleanup(&self, module: &str) -> Result<(), Error> {
        let releases = self.module_releases(module).await?;
        let entries: Vec<cleanup::Entry> = releases
            .iter()
            .filter_map(|r| {
                Some(cleanup::Entry {
                    name: r.name_any(),
                    version: ReleaseVersion::parse(&r.spec.version).ok()?,
                    phase: release_phase(r),
                })
            })
            .collect();
        let api: Api<ModuleRelease> = self.api();
        for name in cleanup::module(&entries) {
            if let Some(r) = releases.iter().find(|r| r.name_any() == name) {
                self.downloaded.remove_release(module, &r.spec.version)?;
            }
            api.patch(
                &name,
                &pp(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .map_err(|e| Error::kube(format!("patch ModuleRelease {name}"), e))?;
            api.delete(&name, &DeleteParams::default())
                .await
                .map_err(|e| Error::kube(format!("delete ModuleRelease {name}"), e))?;
        }
        Ok(())
    }
}

/// A release's requirements as the notification's `requirements` map.
fn requirements_map(
    r: &api::module_release::ModuleReleaseRequirements,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(d) = &r.deckhouse {
        out.insert("deckhouse".to_owned(), d.clone());
    }
    if let Some(k) = &r.kubernetes {
        out.insert("kubernetes".to_owned(), k.clone());
    }
    for (m, c) in &r.modules {
        out.insert(m.clone(), c.clone());
    }
    out
}
