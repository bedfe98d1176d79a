//! The release channel source: `release-channel:<channel>` → DeckhouseRelease objects.
//!
//! Observe (settings, channel image digest and `version.json`, releases, the running version) →
//! plan with [`release_plan::channel`] and [`release_plan::canary`] → act (restore, create,
//! delete, suspend, resume), then remember the channel digest so an unchanged channel costs one
//! HEAD request.

use std::collections::BTreeMap;

use api::deckhouse_release::{
    DeckhouseRelease, DeckhouseReleaseFields, DeckhouseReleaseSpec, MESSAGE_RESTORED,
};
use api::keys;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use release_plan::channel::{
    ChannelAction, ClusterRelease, CreateCause, NewReleases, channel_actions, needs_restore,
    plan_new_releases, step_by_step,
};
use release_plan::{Phase, ReleaseVersion, canary, cleanup};
use serde_json::json;

use crate::Error;
use crate::controller::Engine;
use crate::settings::Channel;
use crate::version_json::VersionJson;

/// What a channel sync did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Synced {
    /// The release restored from the running version.
    pub restored: Option<String>,
    /// Releases created.
    pub created: Vec<String>,
    /// Pending releases deleted (newer than a rolled-back channel).
    pub deleted: Vec<String>,
    /// Releases the channel suspended.
    pub suspended: Vec<String>,
    /// Releases the channel resumed.
    pub resumed: Vec<String>,
}

/// The result of [`Engine::sync_channel`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelOutcome {
    /// No `releaseChannel` is set: nothing is followed.
    DevMode,
    /// The channel image digest has not changed since the last sync.
    Unchanged,
    /// The channel was read and the releases brought in line.
    Synced(Synced),
}

/// The changelog link Deckhouse writes for a version.
pub fn changelog_link(version: &ReleaseVersion) -> String {
    format!(
        "https://github.com/deckhouse/deckhouse/releases/tag/v{}",
        version
    )
}

/// The release name of a version: `v1.68.5`.
pub fn release_name(version: &ReleaseVersion) -> String {
    format!("v{version}")
}

pub(crate) fn cluster_release(release: &DeckhouseRelease) -> Option<ClusterRelease> {
    let version = ReleaseVersion::parse(&release.spec.spec.version).ok()?;
    let phase = Phase::parse(
        release
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .map_or("", |p| p.as_str()),
    );
    let mut out = ClusterRelease::new(release.name_any(), version, phase);
    out.notification_time_shift = release
        .annotations()
        .get(keys::RELEASE_NOTIFICATION_TIME_SHIFT)
        .is_some_and(|v| v == "true");
    out.apply_after = release.spec.spec.apply_after.as_ref().map(|t| t.0);
    Some(out)
}

impl Engine {
    /// Reads the release channel and brings the DeckhouseReleases in line with it.
    pub async fn sync_channel(&self) -> Result<ChannelOutcome, Error> {
        let settings = self.settings().await?;
        self.metrics
            .set_release_channel(settings.release_channel.map_or("", Channel::as_str));
        let Some(channel) = settings.release_channel else {
            return Ok(ChannelOutcome::DevMode);
        };
        let tag = channel.image_tag();
        let digest = self
            .source
            .digest(tag)
            .await
            .inspect_err(|_| self.metrics.registry_error())?;
        {
            let cached = self
                .channel_digest
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let (Some(d), Some((t, c))) = (digest, cached.as_ref())
                && t == tag
                && *c == d
            {
                return Ok(ChannelOutcome::Unchanged);
            }
        }
        let image = self
            .source
            .image(tag)
            .await
            .inspect_err(|_| self.metrics.registry_error())?;
        let metadata = image.metadata;
        let mut synced = Synced::default();

        let mut releases = self.list_releases().await?;
        let mut cluster: Vec<ClusterRelease> =
            releases.iter().filter_map(cluster_release).collect();
        if needs_restore(&cluster) {
            match self.deployer.running_version().await? {
                Some(running) => {
                    synced.restored = Some(self.restore(&releases, &running).await?);
                    releases = self.list_releases().await?;
                    cluster = releases.iter().filter_map(cluster_release).collect();
                }
                None => tracing::warn!("no Deployed release and no running version to restore"),
            }
        }

        let existing: Vec<String> = releases.iter().map(ResourceExt::name_any).collect();
        match plan_new_releases(&cluster, &metadata.version, channel.is_lts())? {
            NewReleases::Channel { cause } => {
                if let Some(name) = self
                    .create_release(&existing, channel, &metadata, cause, None, true)
                    .await?
                {
                    synced.created.push(name);
                }
            }
            NewReleases::StepByStep {
                from,
                inherit_apply_after,
            } => {
                // Deckhouse's d8_updating_is_failed{version}: 1 while the intermediate releases
                // cannot be read from the registry, 0 once they can.
                let steps = self.step_metadata(&from, &metadata, &existing).await;
                self.metrics
                    .set_updating_failed(metadata.version.original(), steps.is_err());
                for (version, step_metadata) in steps? {
                    let is_channel_version = version == metadata.version;
                    if let Some(name) = self
                        .create_release(
                            &existing,
                            channel,
                            &step_metadata,
                            CreateCause::StepByStep,
                            inherit_apply_after,
                            is_channel_version,
                        )
                        .await?
                    {
                        synced.created.push(name);
                    }
                }
            }
        }

        let releases = self.list_releases().await?;
        let cluster: Vec<ClusterRelease> = releases.iter().filter_map(cluster_release).collect();
        for action in channel_actions(&cluster, &metadata.version, metadata.suspend) {
            match action {
                ChannelAction::Delete { name } => {
                    self.releases_api()
                        .delete(&name, &DeleteParams::default())
                        .await
                        .map_err(|e| Error::kube(format!("delete DeckhouseRelease {name}"), e))?;
                    tracing::info!(release = %name, "deleted: newer than the rolled-back channel");
                    synced.deleted.push(name);
                }
                ChannelAction::Suspend { name } => {
                    self.annotate(&name, &[(keys::RELEASE_SUSPENDED, Some("true"))])
                        .await?;
                    synced.suspended.push(name);
                }
                ChannelAction::Resume { name } => {
                    self.annotate(&name, &[(keys::RELEASE_SUSPENDED, None)])
                        .await?;
                    self.patch_status(&name, json!({"phase": "Pending", "message": ""}))
                        .await?;
                    synced.resumed.push(name);
                }
            }
        }

        if let Some(digest) = digest.or(Some(image.digest)) {
            *self
                .channel_digest
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some((tag.to_owned(), digest));
        }
        Ok(ChannelOutcome::Synced(synced))
    }

    /// Restores the running version as a Deployed release: marks an existing release of that
    /// name Deployed, or creates one (`approved: true`, `current-restored: "true"`).
    /// The metadata of every step from `from` to the channel's version that is not in the
    /// cluster yet (the channel's own version always, from the channel image).
    async fn step_metadata(
        &self,
        from: &ReleaseVersion,
        metadata: &VersionJson,
        existing: &[String],
    ) -> Result<Vec<(ReleaseVersion, VersionJson)>, Error> {
        let tags = self.source.tags().await?;
        let mut steps = Vec::new();
        for version in step_by_step(from, &metadata.version, &tags)? {
            if version == metadata.version {
                steps.push((version, metadata.clone()));
            } else if !existing.contains(&release_name(&version)) {
                let step = self.source.image(version.original()).await?.metadata;
                steps.push((version, step));
            }
        }
        Ok(steps)
    }

    async fn restore(&self, releases: &[DeckhouseRelease], running: &str) -> Result<String, Error> {
        let version = ReleaseVersion::parse(running)?;
        let name = release_name(&version);
        if !releases.iter().any(|r| r.name_any() == name) {
            let release = DeckhouseRelease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    annotations: Some(
                        [(keys::RELEASE_CURRENT_RESTORED.to_owned(), "true".to_owned())].into(),
                    ),
                    ..Default::default()
                },
                spec: DeckhouseReleaseFields {
                    approved: true,
                    spec: DeckhouseReleaseSpec {
                        version: name.clone(),
                        changelog_link: Some(changelog_link(&version)),
                        ..Default::default()
                    },
                },
                status: None,
            };
            self.releases_api()
                .create(&PostParams::default(), &release)
                .await
                .map_err(|e| Error::kube(format!("create DeckhouseRelease {name}"), e))?;
        }
        self.patch_status(
            &name,
            json!({
                "phase": "Deployed",
                "message": MESSAGE_RESTORED,
                "approved": true,
                "transitionTime": Time(self.clock.now()),
            }),
        )
        .await?;
        tracing::info!(release = %name, "restored the running version");
        Ok(name)
    }

    /// Creates the release of `metadata.version` unless it exists; `Some(name)` when created.
    async fn create_release(
        &self,
        existing: &[String],
        channel: Channel,
        metadata: &VersionJson,
        cause: CreateCause,
        inherited_apply_after: Option<jiff::Timestamp>,
        is_channel_version: bool,
    ) -> Result<Option<String>, Error> {
        let version = &metadata.version;
        let name = release_name(version);
        if existing.contains(&name) {
            return Ok(None);
        }
        let apply_after = canary::new_release_apply_after(
            self.clock.now(),
            metadata.canary.get(channel.canary_key()),
            &self.cluster_uuid,
            version.original(),
            inherited_apply_after,
        )?;
        let mut annotations =
            BTreeMap::from([(keys::RELEASE_CHANGE_CAUSE.to_owned(), cause.change_cause())]);
        if is_channel_version && metadata.suspend {
            annotations.insert(keys::RELEASE_SUSPENDED.to_owned(), "true".to_owned());
        }
        let release = DeckhouseRelease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                annotations: Some(annotations),
                ..Default::default()
            },
            spec: DeckhouseReleaseFields {
                approved: false,
                spec: DeckhouseReleaseSpec {
                    version: name.clone(),
                    apply_after: apply_after.map(Time),
                    requirements: metadata.requirements.clone(),
                    disruptions: metadata.disruptions_of_minor(),
                    changelog: None,
                    changelog_link: Some(changelog_link(version)),
                },
            },
            status: None,
        };
        match self
            .releases_api()
            .create(&PostParams::default(), &release)
            .await
        {
            Ok(_) => {
                tracing::info!(release = %name, cause = %cause.change_cause(), "created");
                Ok(Some(name))
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
            Err(e) => Err(Error::kube(format!("create DeckhouseRelease {name}"), e)),
        }
    }

    /// Sets (`Some`) or removes (`None`) annotations of a release.
    pub(crate) async fn annotate(
        &self,
        name: &str,
        annotations: &[(&str, Option<&str>)],
    ) -> Result<(), Error> {
        let map: serde_json::Map<String, serde_json::Value> = annotations
            .iter()
            .map(|(k, v)| {
                (
                    (*k).to_owned(),
                    v.map_or(serde_json::Value::Null, |v| json!(v)),
                )
            })
            .collect();
        self.releases_api()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": map}})),
            )
            .await
            .map_err(|e| Error::kube(format!("annotate DeckhouseRelease {name}"), e))?;
        Ok(())
    }

    /// Merges `status` into a release's status.
    pub(crate) async fn patch_status(
        &self,
        name: &str,
        status: serde_json::Value,
    ) -> Result<(), Error> {
        self.releases_api()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .map_err(|e| Error::kube(format!("update status of DeckhouseRelease {name}"), e))?;
        Ok(())
    }

    /// The platform cleanup: extra Deployed releases → Superseded, Pending releases older than
    /// the Deployed one → Skipped "Skipped by cleanup hook", outdated releases beyond the newest
    /// 10 deleted.
    pub async fn cleanup(&self) -> Result<cleanup::Plan, Error> {
        let releases = self.list_releases().await?;
        let entries: Vec<cleanup::Entry> = releases
            .iter()
            .filter_map(cluster_release)
            .map(|r| cleanup::Entry {
                name: r.name,
                version: r.version,
                phase: r.phase,
            })
            .collect();
        let plan = cleanup::deckhouse(&entries);
        let now = Time(self.clock.now());
        for name in &plan.supersede {
            self.patch_status(
                name,
                json!({"phase": "Superseded", "message": "", "transitionTime": now}),
            )
            .await?;
        }
        for name in &plan.skip {
            self.patch_status(
                name,
                json!({"phase": "Skipped", "message": cleanup::MSG_SKIPPED_BY_CLEANUP, "transitionTime": now}),
            )
            .await?;
        }
        for name in &plan.delete {
            self.releases_api()
                .delete(name, &DeleteParams::default())
                .await
                .map_err(|e| Error::kube(format!("delete DeckhouseRelease {name}"), e))?;
        }
        Ok(plan)
    }
}
